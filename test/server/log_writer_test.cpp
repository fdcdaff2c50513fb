// server/log's writer: lines queued by any thread are written in order by a thread of its own;
// a descriptor that does not take them never makes a caller wait, and what is dropped is
// counted and said.

#include <fcntl.h>
#include <gtest/gtest.h>
#include <pthread.h>
#include <simdjson.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "server/log.hpp"

namespace topogate::server {
namespace {

using namespace std::chrono_literals;

struct pipe_fds {
  int r = -1;
  int w = -1;
  pipe_fds() {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) == 0) {
      r = fds[0];
      w = fds[1];
    }
  }
  ~pipe_fds() {
    if (r >= 0) ::close(r);
    if (w >= 0) ::close(w);
  }
  // Fills the pipe until it takes nothing more (its write end made non-blocking for that).
  void fill() const {
    const int flags = ::fcntl(w, F_GETFL);
    ::fcntl(w, F_SETFL, flags | O_NONBLOCK);
    const std::string block(4096, 'x');
    while (::write(w, block.data(), block.size()) > 0) {
    }
    const std::string byte(1, 'x');
    while (::write(w, byte.data(), 1) > 0) {
    }
    ::fcntl(w, F_SETFL, flags);
  }
  // A thread that reads the pipe into `out` until every write end is closed.
  [[nodiscard]] std::thread read_to_end(std::string& out) const {
    return std::thread([fd = r, &out] {
      char buf[65536];
      for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;)
        out.append(buf, static_cast<std::size_t>(n));
    });
  }
  // Everything readable now, without waiting.
  [[nodiscard]] std::string drain() const {
    const int flags = ::fcntl(r, F_GETFL);
    ::fcntl(r, F_SETFL, flags | O_NONBLOCK);
    std::string out;
    char buf[65536];
    for (ssize_t n; (n = ::read(r, buf, sizeof buf)) > 0;)
      out.append(buf, static_cast<std::size_t>(n));
    ::fcntl(r, F_SETFL, flags);
    return out;
  }
};

// Runs `f` on a thread of its own with SIGPIPE blocked, as every thread serve() starts has it.
void with_sigpipe_blocked(const std::function<void()>& f) {
  std::thread t([&] {
    sigset_t pipe_only;
    sigemptyset(&pipe_only);
    sigaddset(&pipe_only, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_only, nullptr);
    f();
  });
  t.join();
}

std::string numbered(int i, std::size_t width = 0) {
  std::string line = format_log_line(log_level::info, "line", {{"n", i}});
  if (line.size() + 1 < width) line.append(width - line.size() - 1, ' ');
  return line + "\n";
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::size_t at = 0;
  for (std::size_t nl; (nl = text.find('\n', at)) != std::string::npos; at = nl + 1)
    out.push_back(text.substr(at, nl - at));
  EXPECT_EQ(at, text.size()) << "a line was cut";
  return out;
}

long long number_of(const std::string& line, long long* dropped = nullptr);

// `text` is exactly lines 0 .. count-1, in order.
void expect_numbered_in_order(const std::string& text, int count) {
  const auto lines = lines_of(text);
  ASSERT_EQ(lines.size(), static_cast<std::size_t>(count));
  for (int i = 0; i < count; ++i) EXPECT_EQ(number_of(lines[static_cast<std::size_t>(i)]), i);
}

// The line's "n", or -1 for the dropped note (its "dropped" in *dropped).
long long number_of(const std::string& line, long long* dropped) {
  simdjson::dom::parser p;
  simdjson::dom::element doc;
  EXPECT_FALSE(p.parse(line).get(doc)) << line;
  int64_t v = 0;
  if (!doc["n"].get(v)) return v;
  std::string_view msg;
  EXPECT_FALSE(doc["msg"].get(msg)) << line;
  EXPECT_EQ(msg, "log lines dropped: stderr did not take them");
  int64_t said = 0;
  EXPECT_FALSE(doc["dropped"].get(said)) << line;
  if (dropped != nullptr) *dropped = said;
  return -1;
}

TEST(LogWriter, WritesEveryLineInOrder) {
  pipe_fds p;
  ASSERT_GE(p.r, 0);
  std::string out;
  {
    log_writer w(p.w, 1 << 20);
    for (int i = 0; i < 500; ++i) ASSERT_TRUE(w.push(numbered(i)));
    ASSERT_TRUE(w.flush(10s));
    out = p.drain();
    EXPECT_EQ(w.dropped(), 0u);
  }
  expect_numbered_in_order(out, 500);
}

TEST(LogWriter, LinesFromManyThreadsStayWhole) {
  pipe_fds p;
  ASSERT_GE(p.r, 0);
  std::string out;
  std::thread reader;
  {
    log_writer w(p.w, 4 << 20);  // room for all of them: nothing is dropped
    // Lines longer than one write (PIPE_BUF), from four threads at once.
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&w, t] {
        for (int i = 0; i < 100; ++i) w.push(numbered(t * 1000 + i, 6000));
      });
    }
    reader = p.read_to_end(out);
    for (auto& t : threads) t.join();
    ASSERT_TRUE(w.flush(30s));
    EXPECT_EQ(w.dropped(), 0u);
  }
  ::close(p.w);
  p.w = -1;
  reader.join();
  const auto lines = lines_of(out);
  ASSERT_EQ(lines.size(), 400u);
  // Each thread's lines in its order.
  std::vector<long long> last(4, -1);
  for (const auto& l : lines) {
    EXPECT_EQ(l.size(), 5999u);
    const long long n = number_of(l);
    const auto t = static_cast<std::size_t>(n / 1000);
    ASSERT_LT(t, 4u);
    EXPECT_GT(n, last[t]);
    last[t] = n;
  }
}

TEST(LogWriter, AFullDescriptorHoldsTheCapacityExactlyAndDropsPastIt) {
  pipe_fds p;
  ASSERT_GE(p.r, 0);
  p.fill();  // the descriptor takes nothing: every line pushed stays held
  const std::string sample = numbered(0, 100);
  ASSERT_EQ(sample.size(), 100u);
  log_writer w(p.w, 1000, 50ms);
  for (int i = 0; i < 10; ++i) EXPECT_TRUE(w.push(numbered(i, 100))) << i;  // 1000 bytes: full
  EXPECT_FALSE(w.push(numbered(10, 100)));  // one line more: dropped
  EXPECT_FALSE(w.push("x\n"));              // even two bytes
  EXPECT_EQ(w.dropped(), 2u);
  EXPECT_FALSE(w.flush(200ms));  // nothing is written while the pipe is full
}

TEST(LogWriter, ALineLargerThanTheCapacityGoesIntoAnEmptyQueue) {
  pipe_fds p;
  ASSERT_GE(p.r, 0);
  log_writer w(p.w, 100);
  const std::string big = numbered(7, 5000);
  ASSERT_TRUE(w.push(big));
  ASSERT_TRUE(w.flush(10s));
  EXPECT_EQ(p.drain(), big);
  EXPECT_EQ(w.dropped(), 0u);
}

TEST(LogWriter, AReaderThatStopsNeverStopsTheCallerAndTheGapIsSaid) {
  pipe_fds p;
  ASSERT_GE(p.r, 0);
  ASSERT_GT(::fcntl(p.w, F_SETPIPE_SZ, 4096), 0);
  auto w = std::make_unique<log_writer>(p.w, 16 * 1024);
  // Nothing reads: the pipe (4 KiB) and the queue (16 KiB) fill, and every push still returns.
  int accepted = 0;
  int refused = 0;
  for (int i = 0; i < 2000; ++i) (w->push(numbered(i, 200)) ? accepted : refused)++;
  EXPECT_GT(refused, 0);
  EXPECT_LE(accepted, (4096 + 16 * 1024) / 200 + 1);
  EXPECT_EQ(w->dropped(), static_cast<std::uint64_t>(refused));
  EXPECT_FALSE(w->flush(100ms));
  // The reader comes back: what was held comes out, then the next line, after the note of
  // the lines missing before it.
  std::string out;
  std::thread reader = p.read_to_end(out);
  ASSERT_TRUE(w->flush(30s));
  ASSERT_TRUE(w->push(numbered(5000, 200)));
  ASSERT_TRUE(w->flush(30s));
  // The reader's end of file: every write end closed, the writer's own description of the
  // pipe (which it keeps until it is destroyed) included.
  const std::uint64_t refused_counted = w->dropped();
  w.reset();
  ::close(p.w);
  p.w = -1;
  reader.join();
  // Every accepted line, in order; a note where lines went missing (the pushes may have
  // raced the writer's first writes, so a gap can come before the last one too), and the
  // notes count every line refused.
  const auto lines = lines_of(out);
  long long previous = -1;
  long long said = 0;
  int written = 0;
  for (const auto& line : lines) {
    long long dropped = 0;
    const long long n = number_of(line, &dropped);
    if (n == -1) {
      said += dropped;
      continue;
    }
    EXPECT_GT(n, previous);
    previous = n;
    ++written;
  }
  EXPECT_EQ(written, accepted + 1);
  EXPECT_EQ(said, refused);
  EXPECT_EQ(refused_counted, static_cast<std::uint64_t>(refused));
  EXPECT_EQ(number_of(lines.back()), 5000);
  long long last_note = 0;
  EXPECT_EQ(number_of(lines[lines.size() - 2], &last_note), -1) << "the gap before the last line";
}

TEST(LogWriter, NoReaderAtAllLosesTheLinesButNotTheProcess) {
  pipe_fds p;
  ASSERT_GE(p.r, 0);
  ::close(p.r);  // a write now fails with EPIPE and raises SIGPIPE, which would end the test
  p.r = -1;
  log_writer w(p.w, 1 << 20);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(w.push(numbered(i)));
  ASSERT_TRUE(w.flush(10s));
  EXPECT_EQ(w.dropped(), 3u);
}

TEST(LogWriter, StoppingGivesUpOnADescriptorThatTakesNothing) {
  pipe_fds p;
  ASSERT_GE(p.r, 0);
  p.fill();
  {
    log_writer w(p.w, 1 << 20, 100ms);
    ASSERT_TRUE(w.push(numbered(1)));
  }  // returns: the drain's bound passed (a writer blocked in write would never return)
  SUCCEED();
}

TEST(LogWriter, ALineToAPipeThatTakesItIsWrittenByItsCaller) {
  pipe_fds p;
  ASSERT_GE(p.r, 0);
  log_writer w(p.w, 1 << 20);
  with_sigpipe_blocked([&] {
    for (int i = 0; i < 50; ++i) {
      const std::string line = numbered(i);
      ASSERT_TRUE(w.push(line));
      EXPECT_EQ(p.drain(), line) << "in the pipe when push returned";
    }
  });
  EXPECT_EQ(w.direct_writes(), 50u);
  EXPECT_EQ(w.dropped(), 0u);
}

TEST(LogWriter, ACallerWithoutSigpipeBlockedLeavesThePipeToTheWriterThread) {
  pipe_fds p;
  ASSERT_GE(p.r, 0);
  sigset_t now;
  ASSERT_EQ(pthread_sigmask(SIG_BLOCK, nullptr, &now), 0);
  ASSERT_EQ(sigismember(&now, SIGPIPE), 0) << "this test's thread has SIGPIPE blocked";
  log_writer w(p.w, 1 << 20);
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(w.push(numbered(i)));
  ASSERT_TRUE(w.flush(10s));
  EXPECT_EQ(w.direct_writes(), 0u);
  EXPECT_EQ(lines_of(p.drain()).size(), 5u);
}

TEST(LogWriter, AFullPipeQueuesTheCallersLinesInOrder) {
  pipe_fds p;
  ASSERT_GE(p.r, 0);
  ASSERT_GT(::fcntl(p.w, F_SETPIPE_SZ, 4096), 0);
  auto w = std::make_unique<log_writer>(p.w, 1 << 20);
  std::string filler;
  with_sigpipe_blocked([&] {
    // The first lines go straight in until the pipe is full; the rest wait, and none of these
    // pushes waits for the pipe.
    for (int i = 0; i < 100; ++i) ASSERT_TRUE(w->push(numbered(i, 200)));
  });
  EXPECT_GT(w->direct_writes(), 0u);
  EXPECT_LT(w->direct_writes(), 100u);
  std::string out;
  std::thread reader = p.read_to_end(out);
  ASSERT_TRUE(w->flush(30s));
  w.reset();  // its own description of the pipe closed: the reader's end of file
  ::close(p.w);
  p.w = -1;
  reader.join();
  expect_numbered_in_order(out, 100);
}

TEST(LogWriter, APipeWhoseReaderLeftLosesTheCallersLineButNotTheProcess) {
  pipe_fds p;
  ASSERT_GE(p.r, 0);
  log_writer w(p.w, 1 << 20);  // the reader is there when the writer opens its description
  ::close(p.r);
  p.r = -1;
  with_sigpipe_blocked([&] { EXPECT_FALSE(w.push(numbered(1))); });
  EXPECT_EQ(w.dropped(), 1u);
  EXPECT_EQ(w.direct_writes(), 0u);
}

TEST(LogWriter, ASocketIsWrittenByTheCallerWithoutSigpipe) {
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  {
    log_writer w(sv[0], 1 << 20);
    const std::string line = numbered(3);
    ASSERT_TRUE(w.push(line));  // from this thread, SIGPIPE not blocked: MSG_NOSIGNAL
    std::string got(line.size(), '\0');
    ASSERT_EQ(::recv(sv[1], got.data(), got.size(), MSG_DONTWAIT),
              static_cast<ssize_t>(line.size()));
    EXPECT_EQ(got, line);
    ::close(sv[1]);  // the reader leaves: EPIPE, and no SIGPIPE to end this test
    EXPECT_FALSE(w.push(numbered(4)));
    EXPECT_EQ(w.direct_writes(), 1u);
    EXPECT_EQ(w.dropped(), 1u);
  }
  ::close(sv[0]);
}

}  // namespace
}  // namespace topogate::server

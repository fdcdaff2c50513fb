#include "server/log.hpp"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <climits>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <ctime>

#include "core/field_error.hpp"

namespace topogate::server {

namespace {

std::atomic<int> min_level{static_cast<int>(log_level::info)};

std::string_view level_name(log_level l) {
  switch (l) {
    case log_level::debug:
      return "debug";
    case log_level::info:
      return "info";
    case log_level::warn:
      return "warn";
    case log_level::error:
      return "error";
  }
  return "info";
}

void append_timestamp(std::string& out) {
  const auto now = std::chrono::system_clock::now();
  const auto secs = std::chrono::system_clock::to_time_t(now);
  const auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[96];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>(ms));
  out += buf;
}

}  // namespace

void set_log_level(log_level level) { min_level.store(static_cast<int>(level)); }

std::string format_log_line(log_level level, std::string_view msg,
                            std::initializer_list<log_field> fields) {
  std::string out = "{\"ts\":\"";
  append_timestamp(out);
  out += "\",\"level\":\"";
  out += level_name(level);
  out += "\",\"msg\":";
  core::append_json_string(out, msg);
  for (const auto& f : fields) {
    out += ',';
    core::append_json_string(out, f.key);
    out += ':';
    if (const auto* s = std::get_if<std::string_view>(&f.value)) {
      core::append_json_string(out, *s);
    } else if (const auto* i = std::get_if<long long>(&f.value)) {
      out += std::to_string(*i);
    } else if (const auto* d = std::get_if<double>(&f.value)) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.3f", *d);
      out += buf;
    } else {
      out += std::get<bool>(f.value) ? "true" : "false";
    }
  }
  out += '}';
  return out;
}

namespace {

log_writer& stderr_writer() {
  // Never destroyed: a line logged while the process exits (another thread, a static's
  // destructor) still has a writer. At exit, what is queued gets log_exit_flush to be written.
  static log_writer* const w = [] {
    auto* made = new log_writer(STDERR_FILENO, log_queue_bytes);
    std::atexit([] { log_flush(log_exit_flush); });
    return made;
  }();
  return *w;
}

}  // namespace

void log(log_level level, std::string_view msg, std::initializer_list<log_field> fields) {
  if (static_cast<int>(level) < min_level.load(std::memory_order_relaxed)) return;
  std::string line = format_log_line(level, msg, fields);
  line += '\n';
  stderr_writer().push(std::move(line));
}

std::uint64_t log_lines_dropped() noexcept { return stderr_writer().dropped(); }

bool log_flush(std::chrono::milliseconds within) { return stderr_writer().flush(within); }

namespace {

sigset_t sigpipe_only() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGPIPE);
  return set;
}

// Takes back a SIGPIPE that a failed write left pending on this thread (where it is blocked).
void discard_pending_sigpipe() {
  const sigset_t set = sigpipe_only();
  const timespec none{0, 0};
  while (sigtimedwait(&set, nullptr, &none) == SIGPIPE) {
  }
}

// Whether this thread has SIGPIPE blocked, as it was when the thread first asked: threads set
// their masks when they start (serve() blocks it before it starts any).
bool sigpipe_blocked_here() {
  thread_local const bool blocked = [] {
    sigset_t now;
    sigemptyset(&now);
    return pthread_sigmask(SIG_BLOCK, nullptr, &now) == 0 && sigismember(&now, SIGPIPE) == 1;
  }();
  return blocked;
}

}  // namespace

log_writer::log_writer(int fd, std::size_t capacity, std::chrono::milliseconds drain)
    : fd_(fd), capacity_(capacity), drain_(drain) {
  struct stat st {};
  if (::fstat(fd_, &st) == 0) {
    if (S_ISSOCK(st.st_mode)) {
      direct_socket_ = true;
    } else if (S_ISFIFO(st.st_mode)) {
      // A description of the same pipe of its own, non-blocking: the caller's write then never
      // waits, and the descriptor's own flags (shared with whoever else holds it) stay as they
      // are. Without /proc, every line goes through the writer thread.
      const std::string path = "/proc/self/fd/" + std::to_string(fd_);
      direct_fd_ = ::open(path.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
    }
  }
  thread_ = std::thread([this] { run(); });
}

log_writer::direct log_writer::try_direct(std::string& line) {
  ssize_t n = -1;
  if (direct_socket_) {
    n = ::send(fd_, line.data(), line.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
  } else if (direct_fd_ >= 0 && sigpipe_blocked_here()) {
    n = ::write(direct_fd_, line.data(), line.size());
  } else {
    return direct::queue;
  }
  if (n == static_cast<ssize_t>(line.size())) {
    direct_writes_.fetch_add(1, std::memory_order_relaxed);
    return direct::written;
  }
  if (n > 0) {
    line.erase(0, static_cast<std::size_t>(n));  // the rest after it, by the writer thread
    return direct::queue;
  }
  if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return direct::queue;
  // EPIPE (no reader; SIGPIPE is blocked in this thread, or MSG_NOSIGNAL), EBADF...: lost.
  if (!direct_socket_) discard_pending_sigpipe();
  return direct::lost;
}

log_writer::~log_writer() {
  {
    std::lock_guard lk(mu_);
    stop_ = true;
    stop_by_ = std::chrono::steady_clock::now() + drain_;
  }
  wake_.notify_all();
  thread_.join();
  if (direct_fd_ >= 0) ::close(direct_fd_);
}

bool log_writer::push(std::string line) {
  {
    std::lock_guard lk(mu_);
    if (held_ + line.size() > capacity_ && held_ > 0) {
      ++gap_;
      dropped_.fetch_add(1, std::memory_order_relaxed);
      return false;
    }
    if (gap_ > 0) {
      // Where the lines went missing, and how many: the first line that fits again says so.
      std::string note =
          format_log_line(log_level::warn, "log lines dropped: stderr did not take them",
                          {{"dropped", static_cast<long long>(gap_)}});
      note += '\n';
      held_ += note.size();
      queue_.push_back(std::move(note));
      gap_ = 0;
    }
    if (queue_.empty() && !writing_ && line.size() <= PIPE_BUF) {
      // Nothing waits before it: the caller writes it itself when the descriptor takes it
      // without waiting (a pipe or a socket), and the writer thread is not woken for it.
      switch (try_direct(line)) {
        case direct::written:
          return true;
        case direct::lost:
          dropped_.fetch_add(1, std::memory_order_relaxed);
          return false;
        case direct::queue:
          break;
      }
    }
    held_ += line.size();
    queue_.push_back(std::move(line));
  }
  wake_.notify_one();
  return true;
}

bool log_writer::flush(std::chrono::milliseconds within) {
  std::unique_lock lk(mu_);
  return written_.wait_for(lk, within, [this] { return queue_.empty() && !writing_; });
}

std::size_t log_writer::write_all(std::string_view bytes) {
  // At most PIPE_BUF a write: a pipe that polls writable has room for that much, so the
  // write does not block.
  constexpr std::size_t most = PIPE_BUF;
  std::size_t done = 0;
  while (done < bytes.size()) {
    pollfd p{fd_, POLLOUT, 0};
    const int ready = ::poll(&p, 1, 100);
    if (ready < 0 && errno != EINTR) break;
    if (ready <= 0) {
      std::lock_guard lk(mu_);
      if (stop_ && std::chrono::steady_clock::now() >= stop_by_) break;
      continue;
    }
    if ((p.revents & (POLLERR | POLLNVAL)) != 0 && (p.revents & POLLOUT) == 0) break;
    const ssize_t n = ::write(fd_, bytes.data() + done, std::min(bytes.size() - done, most));
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      break;  // EPIPE (no reader), EBADF, ENOSPC...: the rest goes nowhere
    }
    done += static_cast<std::size_t>(n);
  }
  return done;
}

void log_writer::run() {
  // A write to a pipe whose reader is gone raises SIGPIPE in the writing thread: blocked here,
  // the write fails with EPIPE instead of ending the process, and the signal it left pending
  // is taken back.
  const sigset_t pipe_only = sigpipe_only();
  pthread_sigmask(SIG_BLOCK, &pipe_only, nullptr);
  std::unique_lock lk(mu_);
  for (;;) {
    wake_.wait(lk, [this] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) break;  // stopping, and nothing left
    std::deque<std::string> batch;
    batch.swap(queue_);
    writing_ = true;
    lk.unlock();
    std::string bytes;
    for (const auto& line : batch) bytes += line;
    const std::size_t written = write_all(bytes);
    if (written < bytes.size()) {
      // Every line not written whole is lost.
      std::size_t end = 0;
      std::uint64_t lost = 0;
      for (const auto& line : batch) {
        end += line.size();
        if (end > written) ++lost;
      }
      dropped_.fetch_add(lost, std::memory_order_relaxed);
      discard_pending_sigpipe();
    }
    lk.lock();
    held_ -= bytes.size();
    writing_ = false;
    if (written < bytes.size() && stop_ && std::chrono::steady_clock::now() >= stop_by_) {
      // Stopping, and the descriptor takes nothing more: what is left is lost.
      dropped_.fetch_add(queue_.size(), std::memory_order_relaxed);
      queue_.clear();
      held_ = 0;
    }
    if (queue_.empty()) written_.notify_all();
  }
}

}  // namespace topogate::server

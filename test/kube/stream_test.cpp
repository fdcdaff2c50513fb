// client::stream_lines, the watch's reader (kube/client.hpp), against a TLS peer of the
// test's own: a kube-apiserver cannot be told to split a line across chunks, fall silent or
// cut a body short on cue, so this peer writes exactly what each test scripts. What a real
// apiserver sends is covered by the KubeNodes and KubeStore tests (kube_test.cpp).
#include <gtest/gtest.h>

#include <atomic>
#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/streambuf.hpp>
#include <boost/asio/write.hpp>
#include <chrono>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "kube/client.hpp"
#include "kube/tls_conn.hpp"
#include "tls_peer.hpp"

namespace topogate::kube {
namespace {

namespace asio = boost::asio;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;
using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;
using testing::identity;
using testing::self_signed;

// One step of the peer's script: wait `before`, then write `bytes` (one TLS record), or, with
// `until`, wait until it holds (at most 10 s) before writing.
struct step {
  step(std::string b, std::chrono::milliseconds wait = 0ms, std::function<bool()> cond = {})
      : bytes(std::move(b)), before(wait), until(std::move(cond)) {}
  std::string bytes;
  std::chrono::milliseconds before;
  std::function<bool()> until;
};

// Accepts one connection, reads the request head, plays the script, then ends as `end` says:
// close_notify and close, a TCP close without close_notify, or silence (at most 10 s).
class stream_peer {
 public:
  enum class ending { close, cut, hold };

  stream_peer(std::vector<step> script, ending end)
      : id_(self_signed()), ctx_(ssl::context::tls_server), acceptor_(ioc_) {
    ctx_.use_certificate_chain(asio::buffer(id_.cert_pem));
    ctx_.use_private_key(asio::buffer(id_.key_pem), ssl::context::pem);
    const tcp::endpoint at(asio::ip::make_address("127.0.0.1"), 0);
    acceptor_.open(at.protocol());
    acceptor_.bind(at);
    acceptor_.listen();
    port_ = acceptor_.local_endpoint().port();
    thread_ = std::thread([this, script = std::move(script), end] { serve(script, end); });
  }
  ~stream_peer() {
    done_ = true;
    boost::system::error_code ec;
    acceptor_.close(ec);
    thread_.join();
  }
  [[nodiscard]] kube::endpoint api() const {
    kube::endpoint ep;
    ep.host = "127.0.0.1";
    ep.port = std::to_string(port_);
    ep.ca_pem = id_.cert_pem;
    ep.token = "stream-test-token";
    return ep;
  }
  std::string request_head() const { return head_; }

 private:
  void serve(const std::vector<step>& script, ending end) {
    boost::system::error_code ec;
    ssl::stream<tcp::socket> s(ioc_, ctx_);
    acceptor_.accept(s.next_layer(), ec);
    if (ec) return;
    s.handshake(ssl::stream_base::server, ec);
    if (ec) return;
    asio::streambuf req;
    asio::read_until(s, req, "\r\n\r\n", ec);
    if (ec) return;
    head_.assign(asio::buffers_begin(req.data()), asio::buffers_end(req.data()));
    for (const auto& st : script) {
      std::this_thread::sleep_for(st.before);
      if (st.until) {
        const auto limit = clock_type::now() + 10s;
        while (!st.until() && clock_type::now() < limit) std::this_thread::sleep_for(1ms);
      }
      asio::write(s, asio::buffer(st.bytes), ec);
      if (ec) return;
    }
    if (end == ending::close) {
      s.shutdown(ec);
    } else if (end == ending::hold) {
      // Silent until the test ends, or 10 s: a client that never gives up fails, not hangs.
      const auto limit = clock_type::now() + 10s;
      while (!done_ && clock_type::now() < limit) std::this_thread::sleep_for(5ms);
    }
    s.next_layer().close(ec);
  }

  identity id_;
  asio::io_context ioc_;
  ssl::context ctx_;
  tcp::acceptor acceptor_;
  unsigned short port_ = 0;
  std::thread thread_;
  std::atomic<bool> done_{false};
  std::string head_;
};

const std::string chunked_head =
    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n";

std::string chunk(const std::string& data) {
  char size[32];
  std::snprintf(size, sizeof size, "%zx\r\n", data.size());
  return size + data + "\r\n";
}

struct collected {
  std::vector<std::string> lines;
  stream_response out;
  std::string no_answer;  // why no answer began (the call failed)
  clock_type::duration took{};
};

collected stream(const endpoint& ep, std::chrono::seconds idle,
                 const std::function<bool(std::string_view)>& also = {}) {
  collected c;
  client api(ep);
  const auto t0 = clock_type::now();
  auto r = api.stream_lines(
      "/api/v1/nodes?watch=true",
      [&](std::string_view line) {
        c.lines.emplace_back(line);
        return also ? also(line) : true;
      },
      idle, "application/json");
  c.took = clock_type::now() - t0;
  if (r) {
    c.out = std::move(*r);
  } else {
    c.no_answer = r.error().message;
  }
  return c;
}

TEST(StreamLines, EachLineIsHandedOnWholeAsSoonAsItsLastByteArrives) {
  std::atomic<int> seen{0};
  // A line split across two chunks and two records, then two lines in one chunk; the peer
  // sends the third record only once the client has handed on the first line, and the last
  // line has no newline before the body ends.
  stream_peer peer({{chunked_head + chunk("{\"type\":\"ADDED\",")},
                    {chunk("\"n\":1}\n{\"n\":2}\n{\"n\""), 30ms},
                    {chunk(":3}\n{\"n\":4}"), 0ms, [&] { return seen.load() >= 2; }},
                    {"0\r\n\r\n"}},
                   stream_peer::ending::close);
  const auto c = stream(peer.api(), 10s, [&](std::string_view) {
    ++seen;
    return true;
  });
  EXPECT_EQ(c.no_answer, "");
  EXPECT_EQ(c.out.status, 200);
  EXPECT_EQ(c.out.broken, "");
  EXPECT_EQ(c.lines, (std::vector<std::string>{"{\"type\":\"ADDED\",\"n\":1}", "{\"n\":2}",
                                               "{\"n\":3}", "{\"n\":4}"}));
  EXPECT_LT(c.took, 10s) << "the peer waited for a line the client never handed on";
  EXPECT_NE(peer.request_head().find("GET /api/v1/nodes?watch=true HTTP/1.1"), std::string::npos);
  EXPECT_NE(peer.request_head().find("Bearer stream-test-token"), std::string::npos);
}

TEST(StreamLines, ASilentStreamEndsAtTheIdleLimit) {
  stream_peer peer({{chunked_head + chunk("{\"n\":1}\n")}}, stream_peer::ending::hold);
  const auto c = stream(peer.api(), 1s);
  EXPECT_EQ(c.out.broken, "watch idle timeout");
  EXPECT_EQ(c.lines, std::vector<std::string>{"{\"n\":1}"});
  // The wait for the next byte ends at the limit: cut 1 s after the last byte, with room for a
  // slow machine above.
  EXPECT_GE(c.took, 1s);
  EXPECT_LT(c.took, 4s);
}

TEST(StreamLines, AStreamThatKeepsTalkingIsNotCutAtTheIdleLimit) {
  // 8 lines 300 ms apart: 2.4 s in all, longer than the 1 s limit, never 1 s silent.
  std::vector<step> script{{chunked_head}};
  for (int i = 0; i < 8; ++i)
    script.push_back({chunk("{\"n\":" + std::to_string(i) + "}\n"), 300ms});
  script.push_back({"0\r\n\r\n"});
  stream_peer peer(script, stream_peer::ending::close);
  const auto c = stream(peer.api(), 1s);
  EXPECT_EQ(c.out.broken, "");
  EXPECT_EQ(c.lines.size(), 8u);
  EXPECT_GE(c.took, 2400ms);
}

TEST(StreamLines, ABodyCutShortIsAnErrorAndItsPartialLineIsNotHandedOn) {
  stream_peer peer({{chunked_head + chunk("{\"n\":1}\n{\"n\":")}}, stream_peer::ending::cut);
  const auto c = stream(peer.api(), 10s);
  EXPECT_EQ(c.out.broken.rfind("read: ", 0), 0u) << c.out.broken;
  EXPECT_EQ(c.lines, std::vector<std::string>{"{\"n\":1}"});
}

TEST(StreamLines, TheReaderStopsTheStreamWhenItReturnsFalse) {
  stream_peer peer({{chunked_head + chunk("{\"n\":1}\n{\"n\":2}\n{\"n\":3}\n")}},
                   stream_peer::ending::hold);
  const auto c = stream(peer.api(), 10s, [](std::string_view line) { return line != "{\"n\":2}"; });
  EXPECT_EQ(c.out.broken, "");
  EXPECT_EQ(c.lines, (std::vector<std::string>{"{\"n\":1}", "{\"n\":2}"}));
  EXPECT_LT(c.took, 5s);
}

TEST(StreamLines, AnAnswerOtherThan200IsKeptAsItsBodyNotAsLines) {
  const std::string body = R"({"kind":"Status","code":410,"reason":"Expired"})";
  stream_peer peer({{"HTTP/1.1 410 Gone\r\nContent-Type: application/json\r\nContent-Length: " +
                     std::to_string(body.size()) + "\r\n\r\n" + body}},
                   stream_peer::ending::close);
  const auto c = stream(peer.api(), 10s);
  EXPECT_EQ(c.out.status, 410);
  EXPECT_EQ(c.out.body, body);
  EXPECT_TRUE(c.lines.empty());
}

// Cancels `api` from a thread of its own `after` once `lines` lines were handed on (or 10 s
// passed).
std::thread cancel_after(client& api, const std::atomic<int>& seen, int lines,
                         std::chrono::milliseconds after) {
  return std::thread([&api, &seen, lines, after] {
    const auto limit = clock_type::now() + 10s;
    while (seen.load() < lines && clock_type::now() < limit) std::this_thread::sleep_for(1ms);
    std::this_thread::sleep_for(after);
    api.cancel();
  });
}

// A watch whose lines are only counted into `seen` (read at `pace`; none: unpaced).
core::result<stream_response> count_lines(client& api, std::atomic<int>& seen,
                                          std::chrono::milliseconds pace = {}) {
  return api.stream_lines(
      "/api/v1/nodes?watch=true",
      [&seen](std::string_view) {
        ++seen;
        return true;
      },
      30s, "application/json", pace);
}

// A watch read at `pace` whose lines are only timed into `at` (when each was handed on), until
// `most` of them came.
core::result<stream_response> time_lines(
    client& api, std::vector<clock_type::time_point>& at, std::chrono::milliseconds pace,
    std::size_t most = std::numeric_limits<std::size_t>::max()) {
  return api.stream_lines(
      "/api/v1/nodes?watch=true",
      [&at, most](std::string_view) {
        at.push_back(clock_type::now());
        return at.size() < most;
      },
      30s, "application/json", pace);
}

// When the peer sent a step: mark() is the step's condition, at() the time it was sent.
struct send_time {
  std::atomic<clock_type::rep> ticks{0};
  std::function<bool()> mark() {
    return [this] {
      ticks = clock_type::now().time_since_epoch().count();
      return true;
    };
  }
  [[nodiscard]] clock_type::time_point at() const {
    return clock_type::time_point(clock_type::duration(ticks.load()));
  }
};

TEST(StreamLines, CancelFromAnotherThreadEndsAStreamInProgressAtOnce) {
  stream_peer peer({{chunked_head + chunk("{\"n\":1}\n")}}, stream_peer::ending::hold);
  client api(peer.api());
  std::atomic<int> seen{0};
  std::thread canceller = cancel_after(api, seen, 1, 50ms);
  const auto t0 = clock_type::now();
  const auto r = count_lines(api, seen);
  const auto took = clock_type::now() - t0;
  canceller.join();
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->broken, "cancelled");
  EXPECT_EQ(seen.load(), 1);
  // The peer stays silent for 10 s and the idle limit is 30 s: only cancel() ends it this soon.
  EXPECT_LT(took, 5s);
  // And every later call fails at once.
  const auto again = api.stream_lines(
      "/x", [](std::string_view) { return true; }, 1s);
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error().message, "cancelled");
}

// With a read pace, the lines that arrive within a pace of the last read are read together
// with the next one, and a line after a quiet spell as it arrives. The answer's head is not
// paced.
TEST(StreamLines, APacedStreamReadsWhatArrivesWithinThePaceTogetherAndAfterAQuietSpellAtOnce) {
  send_time fifth;
  stream_peer peer({{chunked_head + chunk("{\"n\":1}\n")},
                    {chunk("{\"n\":2}\n"), 10ms},
                    {chunk("{\"n\":3}\n"), 190ms},
                    {chunk("{\"n\":4}\n"), 10ms},
                    {chunk("{\"n\":5}\n"), 2500ms, fifth.mark()},
                    {"0\r\n\r\n"}},
                   stream_peer::ending::close);
  client api(peer.api());
  std::vector<clock_type::time_point> at;
  const auto r = time_lines(api, at, 1000ms);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->broken, "");
  ASSERT_EQ(at.size(), 5u);
  // Line 3 came 190 ms after line 2, within the pace of the read that found line 2: it waits
  // for the pace, and line 4, 10 ms behind it, is read with it.
  EXPECT_GE(at[2] - at[1], 700ms);
  EXPECT_LT(at[3] - at[2], 200ms);
  // Line 5 came 2.5 s after them, more than a pace after the last read: read as it came.
  EXPECT_LT(at[4] - fifth.at(), 500ms);
}

// A stream begins when a record comes within a pace of the wake-up before it: records further
// apart are each read as they come, with no pause after them (it would cost a wake-up more).
TEST(StreamLines, APacedStreamPausesOnlyOnceRecordsComeWithinThePaceOfEachOther) {
  send_time third;
  stream_peer peer({{chunked_head + chunk("{\"n\":1}\n")},
                    {chunk("{\"n\":2}\n"), 1500ms},
                    {chunk("{\"n\":3}\n"), 300ms, third.mark()},
                    {chunk("{\"n\":4}\n"), 100ms},
                    {"0\r\n\r\n"}},
                   stream_peer::ending::close);
  client api(peer.api());
  std::vector<clock_type::time_point> at;
  const auto r = time_lines(api, at, 1000ms);
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_EQ(at.size(), 4u);
  // Line 2 came after a quiet spell longer than the pace, line 3 300 ms after it: both read as
  // they came (line 3 had no pause to wait for).
  EXPECT_LT(at[2] - third.at(), 250ms);
  // Line 3 came within the pace of line 2: a stream, so line 4, 100 ms later, waits for the pace.
  EXPECT_GE(at[3] - at[2], 700ms);
}

// What gathers during a pause is read in full after it, however many reads that takes: 200
// lines of 2 KB (400 KB, many times what one read takes) 10 ms after the first line are all
// handed on one pace later, not one read's worth per pace.
TEST(StreamLines, APacedStreamReadsAllThatGatheredDuringThePause) {
  std::vector<step> script{{chunked_head + chunk("{\"n\":0}\n")}};
  const std::string pad(2000, 'x');
  for (int i = 1; i <= 200; ++i)
    script.push_back({chunk("{\"n\":" + std::to_string(i) + ",\"pad\":\"" + pad + "\"}\n"),
                      i == 1 ? 10ms : 0ms});
  stream_peer peer(script, stream_peer::ending::hold);
  client api(peer.api());
  std::vector<clock_type::time_point> at;
  const auto r = time_lines(api, at, 1000ms, 201);
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_EQ(at.size(), 201u);
  // One pace (1 s) after the first line; 13 or more paces if each read waited for one.
  EXPECT_LT(at.back() - at.front(), 4s);
}

TEST(StreamLines, CancelEndsAPacedReadsPauseAtOnce) {
  stream_peer peer({{chunked_head + chunk("{\"n\":1}\n")},
                    {chunk("{\"n\":2}\n"), 10ms},
                    {chunk("{\"n\":3}\n"), 150ms}},
                   stream_peer::ending::hold);
  client api(peer.api());
  std::atomic<int> seen{0};
  std::thread canceller = cancel_after(api, seen, 2, 400ms);
  const auto t0 = clock_type::now();
  const auto r = count_lines(api, seen, 8000ms);
  const auto took = clock_type::now() - t0;
  canceller.join();
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->broken, "cancelled");
  // Line 3 came 150 ms after line 2, within the 8 s pace: still held when cancel() came,
  // 400 ms after line 2, and cancel() ended the pause.
  EXPECT_EQ(seen.load(), 2);
  EXPECT_LT(took, 4s);
}

TEST(StreamLines, AStreamOnAPeerThatIsNotTrustedFailsAtTheHandshake) {
  stream_peer peer({{chunked_head + chunk("{\"n\":1}\n")}}, stream_peer::ending::close);
  auto ep = peer.api();
  ep.ca_pem = self_signed().cert_pem;  // another CA
  const auto c = stream(ep, 10s);
  EXPECT_EQ(c.no_answer.rfind("TLS handshake with 127.0.0.1: ", 0), 0u) << c.no_answer;
  EXPECT_NE(c.no_answer.find("certificate verify failed"), std::string::npos) << c.no_answer;
  EXPECT_TRUE(c.lines.empty());
}

TEST(StreamLines, NoListenerIsNoAnswer) {
  unsigned short port = 0;
  {
    asio::io_context ioc;
    tcp::acceptor a(ioc, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
    port = a.local_endpoint().port();
  }  // closed: nothing listens there now
  kube::endpoint ep;
  ep.host = "127.0.0.1";
  ep.port = std::to_string(port);
  ep.ca_pem = self_signed().cert_pem;
  const auto c = stream(ep, 10s);
  EXPECT_EQ(c.no_answer, "connect 127.0.0.1:" + ep.port + ": Connection refused");
  EXPECT_LT(c.took, 5s);
}

// A write to a peer that has closed its end is an error like any other: it does not raise
// SIGPIPE, which would end the process (topogate does not ignore the signal). The peer closes
// after the handshake; the first write reaches its kernel, which answers with a reset; the
// writes after it find the connection gone.
TEST(TlsConn, WritesToAPeerThatHasClosedFailWithoutSigpipe) {
  const identity id = self_signed();
  asio::io_context ioc;
  ssl::context server_ctx(ssl::context::tls_server);
  server_ctx.use_certificate_chain(asio::buffer(id.cert_pem));
  server_ctx.use_private_key(asio::buffer(id.key_pem), ssl::context::pem);
  tcp::acceptor acceptor(ioc, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  std::thread peer([&] {
    boost::system::error_code ec;
    ssl::stream<tcp::socket> s(ioc, server_ctx);
    acceptor.accept(s.next_layer(), ec);
    if (!ec) s.handshake(ssl::stream_base::server, ec);
    s.next_layer().close(ec);
  });
  tls_conn conn;
  const auto deadline = clock_type::now() + 10s;
  ASSERT_TRUE(conn.connect({"127.0.0.1"}, acceptor.local_endpoint().port(), deadline));
  ssl::context client_ctx(ssl::context::tls_client);
  client_ctx.add_certificate_authority(asio::buffer(id.cert_pem));
  client_ctx.set_verify_mode(ssl::verify_peer);
  const auto handshake = conn.handshake(
      client_ctx.native_handle(), [](SSL*) { return core::result<void>{}; }, deadline);
  peer.join();
  ASSERT_TRUE(handshake) << handshake.error().message;
  tls_conn::outcome o;
  int writes = 0;
  for (; writes < 5 && o.st == tls_conn::status::ok; ++writes) {
    std::this_thread::sleep_for(50ms);
    o = conn.write_all(std::string(4096, 'x'), deadline);
  }
  EXPECT_EQ(o.st, tls_conn::status::failed);
  EXPECT_FALSE(o.error.empty());
  EXPECT_GE(writes, 2) << "the first write reaches the peer's kernel";
}

}  // namespace
}  // namespace topogate::kube

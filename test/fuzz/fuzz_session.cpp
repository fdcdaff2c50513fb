// The server itself: `serve` (server/serve.cpp) runs in this process on loopback ports, as
// `topogate serve` does, and every input is one client connection over a real socket. So
// the connection code that fuzz_http restates in its harness runs here as written: the
// session's read loop feeding Beast's parser, the header and per-route body limits,
// `Expect: 100-continue`, pipelining, the linger after a 413, the TLS channel, the deadline
// timer and the close in both directions.
// Input: byte 0 picks the listener (bit 0: the plain-HTTP health listener, else TLS with
// a real OpenSSL client) and how the rest is cut into socket writes (bits 1-2: all at
// once, or pieces whose sizes are read from the bytes themselves); the rest is what the
// client sends. After the last write the client closes its side (TLS: close_notify first)
// and reads until the server closes.
// Properties beyond "no crash" (ASan and UBSan also cover the server's threads):
//   - the server closes the connection within 1.5 s of the client's close, before its own
//     2 s wait for the client's close_notify and its 5 s timeouts would: the end of the
//     client's input is acted on, never waited out, and no input leaves a connection open
//     (1.5 s leaves room for a loaded machine: a close acted on takes milliseconds);
//   - the TLS handshake completes.
// Every socket call is bounded by a deadline and retried after a signal (libFuzzer's
// -timeout watchdog is a SIGALRM).
//   - what the server sends parses as a sequence of HTTP/1.1 responses with valid
//     statuses, never 500 (a response to HEAD ends the check: its length is not its body);
//   - the server still answers a health probe on a new connection afterwards.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <string>
#include <string_view>
#include <thread>

#include "fuzz_common.hpp"
#include "fuzz_inventory_files.hpp"
#include "server/config.hpp"
#include "server/pki.hpp"
#include "server/serve.hpp"

namespace {

using namespace topogate;
namespace fs = std::filesystem;
namespace http = boost::beast::http;

// A port nothing listens on now (bound, then released) for the health listener: `serve`
// reports only the TLS port it bound.
unsigned short free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  fuzz::check(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0, "bind");
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

// At exit the server is stopped as SIGTERM stops it (drain, then `serve` returns), so that
// no server thread is still running while the process tears its globals down.
// The thread that ran it is joined, so that it has ended (and OpenSSL has freed its
// per-thread error state) before LeakSanitizer looks. Then the server's files
// (certificates, token, inventory) are removed.
std::promise<void> server_stopped;
std::atomic<bool> stopping{false};
std::thread server_thread;
fs::path server_dir;

void stop_server() {
  stopping = true;
  ::kill(::getpid(), SIGTERM);
  if (server_stopped.get_future().wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
    server_thread.detach();  // still draining: the leak check may report its objects
    return;
  }
  server_thread.join();
  std::error_code ignored;
  fs::remove_all(server_dir, ignored);
}

struct world {
  fs::path dir;
  unsigned short tls_port = 0;
  unsigned short health_port = 0;
  SSL_CTX* client_ctx = nullptr;

  world() {
    const fs::path base = fs::exists("/dev/shm") ? fs::path("/dev/shm") : fs::temp_directory_path();
    dir = base / ("topogate-fuzz-session-" + std::to_string(::getpid()));
    fs::create_directories(dir);
    server_dir = dir;
    const server::issued ca = fuzz::value_of(server::make_ca("fuzz CA", 30), "make CA");
    const server::issued leaf = fuzz::value_of(
        server::issue(ca, {"localhost", "fuzz", {"localhost"}, {"127.0.0.1"}, true, 30}), "issue");
    write("server.crt", leaf.cert_pem);
    write("server.key", leaf.key_pem);
    write("alpha.token", "alpha-old\nalpha-new\n");
    write("source.yaml", fuzz::inventory_source_yaml);
    write("snapshot.yaml", fuzz::inventory_snapshot_yaml);
    health_port = free_port();
    // Short timeouts so that an input which stops half-way is closed quickly; small body
    // limits so that inputs of libFuzzer's sizes reach them.
    const std::string config =
        "listen: {address: 127.0.0.1, port: 0, healthPort: " + std::to_string(health_port) +
        "}\n"
        "tls: {certFile: server.crt, keyFile: server.key}\n"
        "threads: 2\n"
        "logging: {accessLog: false, level: error}\n"
        "limits: {headerBytes: 8192, admissionBodyBytes: 32768, handshakeTimeout: 5s, "
        "readTimeout: 5s, idleTimeout: 5s, shutdownTimeout: 2s}\n"
        "inventories:\n"
        "  - {name: alpha, source: source.yaml, snapshot: snapshot.yaml,\n"
        "     readers: {bearerTokenFiles: [alpha.token]}}\n";
    write("topogate.yaml", config);
    auto cfg = server::load_serve_config((dir / "topogate.yaml").string());
    fuzz::check(cfg.ok(), "configuration", cfg ? std::string_view() : cfg.error().message);

    std::promise<unsigned short> listening;
    auto port = listening.get_future();
    // A write to a connection the server has closed must fail, not kill the process.
    std::signal(SIGPIPE, SIG_IGN);
    server_thread = std::thread([cfg = std::move(*cfg), &listening]() mutable {
      server::serve_hooks hooks;
      hooks.on_listening = [&listening](unsigned short p) { listening.set_value(p); };
      const int rc = server::serve(std::move(cfg), hooks);
      if (!stopping) fuzz::fail("serve returned", std::to_string(rc));
      server_stopped.set_value();
    });
    fuzz::check(port.wait_for(std::chrono::seconds(30)) == std::future_status::ready,
                "the server did not start");
    tls_port = port.get();
    std::atexit(stop_server);

    client_ctx = SSL_CTX_new(TLS_client_method());
    fuzz::check(client_ctx != nullptr, "client context");
    SSL_CTX_set_verify(client_ctx, SSL_VERIFY_NONE, nullptr);
  }

  void write(const char* name, std::string_view text) const { std::ofstream(dir / name) << text; }
};

world& the_world() {
  static world w;
  return w;
}

using steady = std::chrono::steady_clock;
constexpr auto close_within = std::chrono::milliseconds(1500);

// Every socket is non-blocking and every wait is a poll with the time left until a deadline.
// libFuzzer's -timeout watchdog is a SIGALRM on this thread, and a signal interrupts a
// blocking call (a socket with SO_RCVTIMEO gets EINTR whatever SA_RESTART says): a wait is
// retried after one, and only the deadline ends it.
bool wait_for(int fd, short events, steady::time_point deadline) {
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - steady::now()).count();
    if (left <= 0) return false;
    pollfd p{fd, events, 0};
    const int r = ::poll(&p, 1, static_cast<int>(std::min<long long>(left, 1000)));
    if (r > 0) return true;
    if (r < 0 && errno != EINTR) return false;
  }
}

long long ms_since(steady::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(steady::now() - t).count();
}

int connect_to(unsigned short port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
  fuzz::check(fd >= 0, "socket");
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    fuzz::check(errno == EINPROGRESS || errno == EINTR, "connect", std::strerror(errno));
    fuzz::check(wait_for(fd, POLLOUT, steady::now() + std::chrono::seconds(3)),
                "connect: no answer");
    int err = 0;
    socklen_t len = sizeof err;
    ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
    fuzz::check(err == 0, "connect", std::strerror(err));
  }
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

// The server's answer parses as HTTP/1.1 responses with valid statuses, never 500.
void check_responses(std::string_view wire, std::string_view sent) {
  const bool head = sent.find("HEAD") != std::string_view::npos;
  while (!wire.empty()) {
    http::response_parser<http::string_body> p;
    p.eager(true);
    p.body_limit(1u << 20);
    boost::beast::error_code ec;
    const std::size_t used = p.put(boost::asio::buffer(wire.data(), wire.size()), ec);
    if (ec == http::error::need_more || (!ec && !p.is_done())) {
      fuzz::check(head, "a response cut short", std::string(wire.substr(0, 200)));
      return;
    }
    fuzz::check(!ec, "the server's answer is not an HTTP response",
                std::string(wire.substr(0, 200)) + "\n" + ec.message());
    const unsigned status = p.get().result_int();
    fuzz::check(status >= 100 && status <= 599 && status != 500, "status", std::to_string(status));
    wire.remove_prefix(used);
    if (head) return;
  }
}

// Sends until done, the server closes (a limit, an error answer: fine) or the deadline.
void send_all_plain(int fd, std::string_view data, steady::time_point deadline) {
  while (!data.empty()) {
    const ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n > 0) {
      data.remove_prefix(static_cast<std::size_t>(n));
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (!wait_for(fd, POLLOUT, deadline)) return;
    } else {
      return;
    }
  }
}

// Reads until the server closes (an end of stream or a reset); false when it has not by the
// deadline.
bool read_to_close_plain(int fd, std::string& out, steady::time_point deadline) {
  char buf[16384];
  for (;;) {
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n > 0) {
      out.append(buf, static_cast<std::size_t>(n));
    } else if (n == 0) {
      return true;
    } else if (errno == EINTR) {
      continue;
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      if (!wait_for(fd, POLLIN, deadline)) return false;
    } else {
      return true;
    }
  }
}

enum class tls_result { done, closed, timed_out };

// One TLS call on the non-blocking socket, repeated while OpenSSL waits for the socket.
// `closed`: the connection ended (the server's close_notify, an end of stream, a reset or
// an alert); `timed_out`: it was still open at the deadline.
template <class Op>
tls_result tls_call(SSL* ssl, int fd, steady::time_point deadline, Op op) {
  for (;;) {
    const int r = op();
    if (r == 1) return tls_result::done;
    const int e = SSL_get_error(ssl, r);
    const int saved = errno;
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
      if (!wait_for(fd, e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT, deadline))
        return tls_result::timed_out;
    } else if (e == SSL_ERROR_SYSCALL && saved == EINTR) {
      continue;
    } else {
      return tls_result::closed;
    }
  }
}

void probe_health(const world& w) {
  const int fd = connect_to(w.health_port);
  const auto deadline = steady::now() + std::chrono::seconds(3);
  send_all_plain(fd, "GET /livez HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", deadline);
  std::string out;
  const bool closed = read_to_close_plain(fd, out, deadline);
  ::close(fd);
  fuzz::check(closed && out.rfind("HTTP/1.1 200", 0) == 0, "the server stopped answering probes",
              out.substr(0, 200));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  world& w = the_world();
  if (size < 1) return 0;
  const bool plain = (data[0] & 1) != 0;
  const unsigned cut = (data[0] >> 1) & 3;
  const std::string_view sent(reinterpret_cast<const char*>(data + 1), size - 1);
  // The socket writes: all at once, or pieces sized by the bytes themselves.
  auto next_piece = [&, at = std::size_t{0}](std::size_t left) mutable {
    if (cut == 0) return left;
    const auto b = static_cast<unsigned char>(sent[at++ % sent.size()]);
    return std::min<std::size_t>(left, cut == 1 ? 1 + b % 16 : 1 + b * 8u);
  };

  std::string answer;
  bool closed = false;
  const int fd = connect_to(plain ? w.health_port : w.tls_port);
  // Writing may take its time (thousands of small pieces on a loaded machine); a server that
  // neither reads nor closes is caught by the read below. The close must follow the
  // client's within 1.5 s.
  const auto write_deadline = steady::now() + std::chrono::seconds(10);
  if (plain) {
    for (std::string_view rest = sent; !rest.empty();) {
      const std::size_t n = next_piece(rest.size());
      send_all_plain(fd, rest.substr(0, n), write_deadline);
      rest.remove_prefix(n);
    }
    ::shutdown(fd, SHUT_WR);
    closed = read_to_close_plain(fd, answer, steady::now() + close_within);
  } else {
    SSL* ssl = SSL_new(w.client_ctx);
    SSL_set_fd(ssl, fd);
    const auto started = steady::now();
    const tls_result hs =
        tls_call(ssl, fd, started + std::chrono::seconds(4), [&] { return SSL_connect(ssl); });
    fuzz::check(hs == tls_result::done, "TLS handshake with the server",
                std::string(hs == tls_result::timed_out ? "timed out" : "failed") + " after " +
                    std::to_string(ms_since(started)) +
                    " ms: " + ERR_error_string(ERR_peek_last_error(), nullptr));
    for (std::string_view rest = sent; !rest.empty();) {
      const std::size_t n = next_piece(rest.size());
      std::size_t written = 0;
      if (tls_call(ssl, fd, write_deadline,
                   [&] { return SSL_write_ex(ssl, rest.data(), n, &written); }) != tls_result::done)
        break;  // the server closed first (or stopped reading: the read below judges)
      rest.remove_prefix(n);
    }
    // close_notify (0: sent, the server's not yet seen), then the end of the stream.
    (void)tls_call(ssl, fd, write_deadline, [&] { return SSL_shutdown(ssl) >= 0 ? 1 : -1; });
    ::shutdown(fd, SHUT_WR);
    const auto deadline = steady::now() + close_within;
    char buf[16384];
    for (;;) {
      std::size_t got = 0;
      const tls_result r =
          tls_call(ssl, fd, deadline, [&] { return SSL_read_ex(ssl, buf, sizeof buf, &got); });
      if (r == tls_result::done) {
        answer.append(buf, got);
        continue;
      }
      // After a TLS-level end (an alert, a record OpenSSL refuses) the socket itself must
      // still reach its end.
      if (r == tls_result::closed) {
        std::string rest;
        closed = read_to_close_plain(fd, rest, deadline);
      }
      break;
    }
    SSL_free(ssl);
    ERR_clear_error();
  }
  ::close(fd);
  fuzz::check(closed, "the server kept the connection open after the client closed",
              std::string(sent.substr(0, 200)));
  check_responses(answer, sent);
  probe_health(w);
  return 0;
}

#include "server/server.hpp"

#include <openssl/err.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>

#include <boost/asio/bind_executor.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <algorithm>
#include <array>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <optional>

#include "inventory/registry.hpp"
#include "server/log.hpp"
#include "server/metrics.hpp"

namespace topogate::server {

namespace beast = boost::beast;
namespace net = boost::asio;
namespace ssl = boost::asio::ssl;
using tcp = net::ip::tcp;
using clock_type = std::chrono::steady_clock;

namespace {

struct drainable {
  virtual ~drainable() = default;
  virtual void drain() = 0;
};

// The metric's reason for an OpenSSL error code.
std::string ssl_failure_reason(unsigned long err) {
  switch (ERR_GET_REASON(err)) {
    case SSL_R_UNSUPPORTED_PROTOCOL:
    case SSL_R_TLSV1_ALERT_PROTOCOL_VERSION:
      return "protocol_version";
    case SSL_R_NO_SHARED_CIPHER: return "no_shared_cipher";
    case SSL_R_HTTP_REQUEST: return "plain_http";
    case SSL_R_WRONG_VERSION_NUMBER: return "wrong_version";
    case SSL_R_TLSV1_ALERT_UNKNOWN_CA:
    case SSL_R_SSLV3_ALERT_BAD_CERTIFICATE:
    case SSL_R_SSLV3_ALERT_CERTIFICATE_UNKNOWN:
    case SSL_R_TLSV1_ALERT_DECRYPT_ERROR:
      return "client_rejected_certificate";
    default: return "tls_error";
  }
}

// The reason for a socket error during the handshake.
std::string handshake_failure_reason(const beast::error_code& ec) {
  if (ec == beast::error::timeout) return "timeout";
  if (ec == net::error::eof || ec == net::error::connection_reset) return "eof";
  return "other";
}

std::string rfc2253_subject(X509* cert) {
  BIO* bio = BIO_new(BIO_s_mem());
  if (!bio) return {};
  X509_NAME_print_ex(bio, X509_get_subject_name(cert), 0, XN_FLAG_RFC2253);
  char* data = nullptr;
  const long len = BIO_get_mem_data(bio, &data);
  std::string out(data, static_cast<std::size_t>(len > 0 ? len : 0));
  BIO_free(bio);
  return out;
}

bool is_health_route(std::string_view route) {
  return route == "/healthz" || route == "/livez" || route == "/readyz" || route == "/metrics";
}

}  // namespace

struct server::impl {
  impl(serve_config c, inventory::registry& r, metrics& mm, credential_watcher& cw)
      : cfg(std::move(c)),
        reg(r),
        m(mm),
        creds(cw),
        ioc(static_cast<int>(thread_count())),
        control(net::make_strand(ioc)),
        signals(control, SIGINT, SIGTERM, SIGHUP),
        poll_timer(control),
        deadline_timer(control),
        accept_retry_timer(control) {
    limits.admission = cfg.limits.admission_body_bytes;
    limits.push = cfg.limits.push_body_bytes;
    unsigned char seed[8];
    RAND_bytes(seed, sizeof seed);
    for (unsigned char b : seed) request_seed = (request_seed << 8) | b;
  }

  unsigned thread_count() const {
    if (cfg.threads) return cfg.threads;
    const unsigned n = std::thread::hardware_concurrency();
    return n ? n : 1;
  }

  serve_config cfg;
  inventory::registry& reg;
  metrics& m;
  credential_watcher& creds;
  net::io_context ioc;
  net::strand<net::io_context::executor_type> control;
  std::optional<tcp::acceptor> acceptor;
  std::optional<tcp::acceptor> health_acceptor;
  net::signal_set signals;
  net::steady_timer poll_timer;
  net::steady_timer deadline_timer;
  net::steady_timer accept_retry_timer;
  health_state health;
  body_limits limits;
  std::atomic<std::size_t> connections{0};
  std::atomic<bool> stopping{false};
  std::atomic<std::uint64_t> request_counter{0};
  std::uint64_t request_seed = 0;
  std::mutex sessions_mu;
  std::unordered_map<std::uint64_t, std::weak_ptr<drainable>> sessions;
  std::uint64_t next_session = 0;

  std::string next_request_id() {
    std::uint64_t v = request_seed ^ (request_counter.fetch_add(1) * 0x9e3779b97f4a7c15ULL);
    std::string id(16, '0');
    for (int i = 15; i >= 0; --i, v >>= 4) id[static_cast<std::size_t>(i)] = "0123456789abcdef"[v & 0xf];
    return id;
  }

  std::uint64_t add_session(std::weak_ptr<drainable> s) {
    std::lock_guard lock(sessions_mu);
    const auto id = ++next_session;
    sessions.emplace(id, std::move(s));
    return id;
  }

  void remove_session(std::uint64_t id) {
    {
      std::lock_guard lock(sessions_mu);
      sessions.erase(id);
    }
    m.connection_closed();
    if (connections.fetch_sub(1) == 1 && stopping.load()) {
      net::post(control, [this] { deadline_timer.cancel(); });
    }
  }

  router_context context(listener_kind kind) {
    router_context ctx;
    ctx.registry = &reg;
    ctx.auth = creds.auth();
    ctx.m = &m;
    ctx.health = &health;
    ctx.admission = &cfg.admission;
    ctx.push_body_bytes = cfg.limits.push_body_bytes;
    ctx.listener = kind;
    return ctx;
  }

  void do_accept(tcp::acceptor& a, listener_kind kind);
  void on_accept(tcp::socket socket, const tcp::endpoint& peer, listener_kind kind);
  // The peer address of the connection each listener is accepting (filled by accept(2)
  // itself, so no getpeername per connection).
  std::array<tcp::endpoint, 2> accept_peer;
  void do_poll();
  void do_signals();
  void begin_shutdown();
};

namespace {

// What the session needs from its transport's read side.
enum class read_status : std::uint8_t { ok, want_read, closed, failed };

// Reads requests, enforces the transport limits and writes responses; the answer itself
// comes from handle(). The session drives its socket itself: it reads raw bytes into the
// transport (Derived: TLS or plain TCP), takes plaintext out of it, and feeds Beast's
// parser synchronously; a response is rendered and sealed (encrypted, or copied) into one
// buffer and written with one socket write per batch. One deadline timer per connection,
// re-armed only when it fires or a deadline moves earlier than it (a later deadline, the
// usual step from one request to the next, only moves deadline_).
template <class Derived>
class http_session : public drainable {
 public:
  http_session(server::impl& srv, listener_kind kind, std::string remote, tcp::socket&& socket)
      : srv_(srv), kind_(kind), remote_(std::move(remote)), socket_(std::move(socket)), timer_(socket_.get_executor()) {}

  ~http_session() override {
    if (peer_.leaf) X509_free(peer_.leaf);
    if (id_) srv_.remove_session(id_);
  }

  void drain() override {
    net::post(socket_.get_executor(), [self = derived().shared_from_this()] {
      self->draining_ = true;
      // An idle keep-alive connection is closed after a short grace; a busy one after its
      // response. A request whose bytes have already arrived is in flight even if its
      // header has not been parsed yet: it is answered, not cut off.
      if (self->idle_ && !self->has_pending_input()) self->arm_drain_grace();
    });
  }

  void set_id(std::uint64_t id) { id_ = id; }

 protected:
  Derived& derived() { return static_cast<Derived&>(*this); }

  // ---- deadline

  // A later deadline only moves deadline_; an earlier one than the timer's re-arms it.
  void expires_at(clock_type::time_point when) {
    deadline_ = when;
    if (closed_) return;
    if (!timer_armed_ || when < timer_expiry_) arm_timer();
  }
  void expires_after(clock_type::duration d) { expires_at(clock_type::now() + d); }

  void arm_timer() {
    timer_armed_ = true;
    timer_expiry_ = deadline_;
    timer_.expires_at(deadline_);  // cancels a wait already pending: its handler sees operation_aborted
    timer_.async_wait([self = derived().shared_from_this()](beast::error_code ec) { self->on_timer(ec); });
  }

  void on_timer(beast::error_code ec) {
    if (ec == net::error::operation_aborted || closed_) return;  // re-armed, or closed
    timer_armed_ = false;
    if (clock_type::now() < deadline_) return arm_timer();
    // The pending read or write completes with operation_aborted and sees timed_out_.
    timed_out_ = true;
    beast::error_code ignored;
    socket_.cancel(ignored);
  }

  void close_socket() {
    if (closed_) return;
    closed_ = true;
    beast::error_code ignored;
    timer_.cancel();
    if (drain_timer_) drain_timer_->cancel();
    socket_.close(ignored);
  }

  // The error a socket operation failed with, as the session treats it.
  beast::error_code io_error(beast::error_code ec) const {
    if (timed_out_ && ec == net::error::operation_aborted) return beast::error::timeout;
    return ec;
  }

  // ---- draining

  bool has_pending_input() {
    if (buffer_.size() > 0 || derived().transport_pending()) return true;
    beast::error_code ec;
    const std::size_t queued = socket_.available(ec);
    return !ec && queued > 0;
  }

  // "Nothing pending" is not proof of an idle connection while a read is outstanding:
  // Asio's reactor may already have taken the request's bytes off the socket for the
  // pending read without its completion having run yet (another thread's reactor pass),
  // and then neither the socket nor the transport nor buffer_ shows them. So an idle
  // connection is closed only if it is still idle after a grace period; bytes in that
  // window complete the read and the request is answered (the response then closes the
  // connection: keep_alive_ is false once stopping). The grace is far below any
  // shutdownTimeout and delays the exit only while idle connections remain.
  static constexpr std::chrono::milliseconds drain_idle_grace{100};

  void arm_drain_grace() {
    if (closed_) return;
    if (!drain_timer_) drain_timer_.emplace(socket_.get_executor());
    drain_timer_->expires_after(drain_idle_grace);
    drain_timer_->async_wait([self = derived().shared_from_this()](beast::error_code ec) {
      if (ec || self->closed_) return;
      if (self->idle_ && !self->has_pending_input()) {
        beast::error_code ignored;
        self->socket_.cancel(ignored);
      }
    });
  }

  // ---- reading a request

  void do_read() {
    // While draining, a connection whose next request has already arrived (for a new
    // connection: sent right behind the handshake) is still answered.
    if ((draining_ || srv_.stopping.load()) && !has_pending_input()) arm_drain_grace();
    parser_.emplace();
    parser_->header_limit(static_cast<std::uint32_t>(srv_.cfg.limits.header_bytes));
    // Beast checks Content-Length against the body limit while parsing the header; the
    // per-route limit is set once the route is known (on_read_header).
    parser_->body_limit(std::max(srv_.limits.admission, srv_.limits.push));
    buffer_.max_size(srv_.cfg.limits.header_bytes + 65536);
    idle_ = true;
    reading_body_ = false;
    // The first request gets readTimeout from the accept; later ones idleTimeout.
    expires_after(first_request_ ? srv_.cfg.limits.read_timeout : srv_.cfg.limits.idle_timeout);
    pump();
  }

  // Parses what is buffered, takes more plaintext from the transport while it has some,
  // and reads the socket when it has none. Ends in finish_read() or a pending read.
  void pump() {
    for (;;) {
      if (buffer_.size() > 0) {
        beast::error_code ec;
        const std::size_t used = parser_->put(buffer_.data(), ec);
        buffer_.consume(used);
        if (ec == http::error::need_more) {
          ec = {};
        } else if (ec) {
          return finish_read(ec);
        }
        if (reading_body_ ? parser_->is_done() : parser_->is_header_done()) return finish_read({});
        if (used > 0 && buffer_.size() > 0) continue;  // e.g. a chunk header, then its data
      }
      if (buffer_.size() >= buffer_.max_size()) return finish_read(http::error::buffer_overflow);
      // Room for what one read may bring: the rest of a body of known length (up to 64 KiB)
      // in one go, or at least 512 bytes.
      std::size_t want = std::max<std::size_t>(512, buffer_.capacity() - buffer_.size());
      if (reading_body_) {
        if (const auto len = parser_->content_length_remaining(); len && *len > want) {
          want = static_cast<std::size_t>(std::min<std::uint64_t>(*len, 65536));
        }
      }
      want = std::min(want, buffer_.max_size() - buffer_.size());
      const auto space = buffer_.prepare(want);
      std::size_t got = 0;
      switch (derived().read_plain(static_cast<char*>(space.data()), space.size(), got)) {
        case read_status::ok:
          buffer_.commit(got);
          continue;
        case read_status::want_read:
          return derived().flush_then_fill(
              [self = derived().shared_from_this()](beast::error_code ec) { self->on_fill(ec); });
        case read_status::closed:
          return on_end_of_input();
        case read_status::failed:
          return finish_read(ssl::error::stream_truncated);
      }
    }
  }

  void on_fill(beast::error_code ec) {
    if (!ec) return pump();
    ec = io_error(ec);
    if (ec == net::error::eof) return on_end_of_input();
    finish_read(ec);
  }

  // The peer closed its side: as Beast's read does, end_of_stream before any byte of a
  // request, otherwise whatever the parser makes of the end (partial_message).
  void on_end_of_input() {
    if (!parser_->got_some()) return finish_read(http::error::end_of_stream);
    beast::error_code ec;
    parser_->put_eof(ec);
    if (!ec && !parser_->is_done()) ec = http::error::partial_message;
    finish_read(ec);
  }

  void finish_read(beast::error_code ec) {
    if (reading_body_) return on_read_body(ec);
    on_read_header(ec);
  }

  void on_read_header(beast::error_code ec) {
    idle_ = false;
    if (ec) {
      if (ec == http::error::header_limit) return send_error(http::status::request_header_fields_too_large, "request header too large");
      if (ec == http::error::end_of_stream || ec == net::error::operation_aborted || ec == beast::error::timeout ||
          ec == net::error::eof || ec == ssl::error::stream_truncated || ec == net::error::connection_reset) {
        return do_close();
      }
      if (ec == http::error::body_limit) {
        return send_error(http::status::payload_too_large, "request body exceeds the limit for this route");
      }
      if (ec == http::error::buffer_overflow) {
        return send_error(http::status::request_header_fields_too_large, "request header too large");
      }
      return send_error(http::status::bad_request, "malformed HTTP request");
    }
    started_ = clock_type::now();
    srv_.m.in_flight_add(1);
    counted_ = true;
    auto& hdr = parser_->get();
    const std::size_t limit = body_limit(hdr.method(), hdr.target(), srv_.limits);
    if (const auto len = parser_->content_length(); len && *len > limit) {
      return send_error(http::status::payload_too_large,
                        "request body of " + std::to_string(*len) + " bytes exceeds the limit of " + std::to_string(limit) + " bytes for this route");
    }
    parser_->body_limit(limit);
    reading_body_ = true;
    parser_->eager(true);
    if (parser_->is_done()) return on_request();
    expires_after(srv_.cfg.limits.read_timeout);
    const auto expect = hdr[http::field::expect];
    if (beast::iequals(expect, "100-continue")) {
      // curl and other clients wait for this before sending a large body.
      static constexpr std::string_view continue_line = "HTTP/1.1 100 Continue\r\n\r\n";
      if (!derived().seal(continue_line)) return close_socket();
      return write_wire([self = derived().shared_from_this()](beast::error_code wec, std::size_t) {
        if (wec) return self->do_close();
        self->pump();
      });
    }
    pump();
  }

  void on_read_body(beast::error_code ec) {
    if (ec == http::error::body_limit) return send_error(http::status::payload_too_large, "request body exceeds the limit for this route");
    if (ec) {
      if (ec == beast::error::timeout || ec == net::error::operation_aborted) {
        log(log_level::warn, "request body read timed out", {{"remote", remote_}});
      }
      finish_counting();
      return do_close();
    }
    on_request();
  }

  void on_request() {
    const request req = parser_->release();
    request_info info;
    deferred_response later;
    response res = handle(req, peer_, srv_.context(kind_), info, started_, &later);
    keep_alive_ = req.keep_alive() && !draining_ && !srv_.stopping.load();
    if (later) {
      // A push: answered from the inventory's lane (by store.timeout at the latest), posted
      // back to this connection's executor. Nothing is read meanwhile, and no thread waits.
      expires_at(clock_type::time_point::max());
      later([self = derived().shared_from_this(), info = std::move(info), method = std::string(req.method_string()),
             version = req.version()](response answer) mutable {
        auto ex = self->socket_.get_executor();
        net::post(ex, [self = std::move(self), answer = std::move(answer), info = std::move(info),
                       method = std::move(method), version]() mutable {
          if (self->closed_) return self->finish_counting();
          self->keep_alive_ = self->keep_alive_ && !self->draining_ && !self->srv_.stopping.load();
          self->send(std::move(answer), method, info, version);
        });
      });
      return;
    }
    send(std::move(res), req.method_string(), info, req.version());
  }

  // ---- writing a response

  void send_error(http::status status, std::string_view message) {
    std::string body = "{\"error\":";
    core::append_json_string(body, message);
    body += ",\"code\":" + std::to_string(static_cast<int>(status)) + "}\n";
    response res{status, 11};
    res.set(http::field::content_type, "application/json");
    res.body() = shared_body::value_type(std::move(body));
    res.prepare_payload();
    if (!counted_) {
      started_ = clock_type::now();
      srv_.m.in_flight_add(1);
      counted_ = true;
    }
    keep_alive_ = false;  // the rest of the stream cannot be trusted
    // A client still sending the refused body reads no response if the socket closes under
    // it (TCP reset); keep reading and discarding for a bounded time, as nginx's
    // lingering close does, so the 413 reaches it.
    linger_ = status == http::status::payload_too_large;
    request_info info;
    info.route = "transport";
    const std::string_view method = parser_ && parser_->is_header_done() ? parser_->get().method_string() : "-";
    send(std::move(res), method, info, 11);
  }

  void send(response&& res, std::string_view method, const request_info& info, unsigned version) {
    const std::string rid = srv_.next_request_id();
    res.version(version);
    res.keep_alive(keep_alive_);
    res.set("X-Request-Id", rid);
    const double seconds = std::chrono::duration<double>(clock_type::now() - started_).count();
    const int status = static_cast<int>(res.result_int());
    srv_.m.observe_request(info.route, status, seconds);
    if (srv_.cfg.access_log) {
      log(is_health_route(info.route) ? log_level::debug : log_level::info, "request",
          {{"request_id", rid},
           {"method", method},
           {"route", info.route},
           {"status", status},
           {"duration_ms", seconds * 1000.0},
           {"peer", info.identity.empty() ? (peer_subject_.empty() ? std::string("anonymous") : "cert:" + peer_subject_) : info.identity},
           {"remote", remote_},
           {"inventory", info.inventory},
           {"bytes", static_cast<long long>(res.body().data.size())},
           {"detail", info.detail}});
    }
    res_.emplace(std::move(res));
    // One deadline for the whole response, however many socket writes it takes.
    expires_after(srv_.cfg.limits.read_timeout);
    write_response(*res_);
  }

  // The header and the start of the body share the first record; the body (borrowed from
  // the revision, never copied in plaintext) is sealed in batches, one socket write each.
  void write_response(response& res) {
    plain_.clear();
    render_header(res, plain_);
    body_left_ = res.body().data;
    written_ = 0;
    const std::size_t room = plain_.size() < tls_record_plaintext ? tls_record_plaintext - plain_.size() : 0;
    const std::size_t first = std::min(room, body_left_.size());
    plain_.append(body_left_.data(), first);
    body_left_.remove_prefix(first);
    // Room for a whole batch up front: growing the buffer record by record would copy it
    // again at every doubling.
    if (!body_left_.empty()) wire_.reserve(wire_batch + tls_record_plaintext);
    if (!derived().seal(plain_)) return on_write(ssl::error::stream_truncated, 0);
    fill_wire();
  }

  // Seals up to wire_batch of the body behind what wire_ holds, then writes it all.
  void fill_wire() {
    while (!body_left_.empty() && wire_.size() < wire_batch) {
      const std::size_t n = std::min(body_left_.size(), wire_batch - wire_.size());
      if (!derived().seal(body_left_.substr(0, n))) return on_write(ssl::error::stream_truncated, written_);
      body_left_.remove_prefix(n);
    }
    write_wire([self = derived().shared_from_this()](beast::error_code ec, std::size_t n) { self->on_wire(ec, n); });
  }

  void on_wire(beast::error_code ec, std::size_t n) {
    written_ += n;
    if (ec || body_left_.empty()) {
      body_left_ = {};
      return on_write(ec, written_);
    }
    fill_wire();
  }

  // Writes everything wire_ holds, then empties it.
  template <class Handler>
  void write_wire(Handler&& handler) {
    net::async_write(socket_, net::buffer(wire_),
                     [this, h = std::forward<Handler>(handler)](beast::error_code ec, std::size_t n) mutable {
                       wire_.clear();
                       h(io_error(ec), n);
                     });
  }

  void on_write(beast::error_code ec, std::size_t) {
    finish_counting();
    res_.reset();
    if (!ec && linger_) {
      linger_deadline_ = clock_type::now() + std::chrono::seconds(5);
      return do_linger();
    }
    if (ec || !keep_alive_) return do_close();
    first_request_ = false;
    // An idle keep-alive connection does not keep a large body's read buffer or a large
    // response's write buffer; the usual request's (a few KiB) stays, so the next one is
    // again a single read.
    if (buffer_.size() == 0 && buffer_.capacity() > 16384) buffer_.shrink_to_fit();
    if (wire_.capacity() > wire_batch + tls_record_plaintext) std::string().swap(wire_);
    do_read();
  }

  // Reads and discards raw bytes for a bounded time and amount, then closes.
  void do_linger() {
    expires_at(linger_deadline_);
    socket_.async_read_some(net::buffer(discard_), [self = derived().shared_from_this()](beast::error_code ec, std::size_t n) {
      self->on_linger(ec, n);
    });
  }

  void on_linger(beast::error_code ec, std::size_t n) {
    lingered_ += n;
    if (ec == net::error::eof) peer_ended_ = true;
    // Bounded in time and bytes: a client may not keep the connection by streaming forever.
    if (ec || lingered_ > (64u << 20) || clock_type::now() >= linger_deadline_) {
      linger_ = false;
      return do_close();
    }
    do_linger();
  }

  void do_close() { derived().close(); }

  void finish_counting() {
    if (counted_) {
      srv_.m.in_flight_add(-1);
      counted_ = false;
    }
  }

  void capture_peer(SSL* ssl) {
    peer_.leaf = SSL_get1_peer_certificate(ssl);
    peer_.chain = SSL_get_peer_cert_chain(ssl);
    if (peer_.leaf) {
      peer_subject_ = rfc2253_subject(peer_.leaf);
      peer_.subject = peer_subject_;
    }
  }

  // Ciphertext per socket write: a 1 MiB body leaves in 16 writes instead of 64 record
  // writes, and the batch stays in the core's L2 cache between OpenSSL writing it and the
  // kernel copying it.
  static constexpr std::size_t wire_batch = 64 * 1024;

  server::impl& srv_;
  listener_kind kind_;
  std::string remote_;
  std::uint64_t id_ = 0;
  tcp::socket socket_;
  net::steady_timer timer_;
  clock_type::time_point deadline_ = clock_type::time_point::max();
  clock_type::time_point timer_expiry_;
  bool timer_armed_ = false;
  bool timed_out_ = false;
  bool closed_ = false;
  // A read returned the end of the stream: the peer sends nothing more, and a further read
  // would wait for a readiness edge that has already passed (Asio marks the socket drained).
  bool peer_ended_ = false;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  bool reading_body_ = false;
  std::optional<response> res_;
  std::string plain_;           // the header and the first part of the body: the first record
  std::string wire_;            // bytes for the socket: records (TLS) or plaintext
  std::string_view body_left_;  // body bytes not yet sealed (owned by res_)
  std::size_t written_ = 0;
  peer_certificate peer_;
  std::string peer_subject_;
  clock_type::time_point started_;
  bool first_request_ = true;
  bool idle_ = false;
  bool draining_ = false;
  std::optional<net::steady_timer> drain_timer_;  // created when a drain meets an idle read
  bool keep_alive_ = true;
  bool counted_ = false;
  bool linger_ = false;
  std::size_t lingered_ = 0;
  clock_type::time_point linger_deadline_;
  std::array<char, 4096> discard_{};
};

class tls_session final : public http_session<tls_session>, public std::enable_shared_from_this<tls_session> {
 public:
  tls_session(tcp::socket&& socket, std::shared_ptr<ssl::context> ctx, server::impl& srv, std::string remote)
      : http_session(srv, listener_kind::tls, std::move(remote), std::move(socket)),
        ctx_(std::move(ctx)),
        channel_(ctx_->native_handle()) {
    channel_.set_output(&wire_);
  }

  void run() {
    net::dispatch(socket_.get_executor(), [self = shared_from_this()] {
      self->expires_after(self->srv_.cfg.limits.handshake_timeout);
      self->handshake();
    });
  }

  bool transport_pending() const { return channel_.pending(); }

  read_status read_plain(char* dst, std::size_t len, std::size_t& got) {
    // Nothing read off the socket and not yet decrypted: OpenSSL has nothing to give (the
    // usual case after a response, when the next request has not arrived), so go straight
    // to the socket instead of through a failing SSL_read.
    got = 0;
    if (!channel_.pending()) return read_status::want_read;
    switch (channel_.read(dst, len, got)) {
      case tls_channel::status::ok: return read_status::ok;
      case tls_channel::status::want_read: return read_status::want_read;
      case tls_channel::status::closed: return read_status::closed;
      case tls_channel::status::failed: break;
    }
    return read_status::failed;
  }

  bool seal(std::string_view plain) { return channel_.write(plain); }

  // Sends what OpenSSL wrote while reading (an alert, a KeyUpdate), then reads more ciphertext.
  template <class Handler>
  void flush_then_fill(Handler&& handler) {
    if (wire_.empty()) return fill(std::forward<Handler>(handler));
    write_wire([self = shared_from_this(), h = std::forward<Handler>(handler)](beast::error_code ec, std::size_t) mutable {
      if (ec) return h(ec);
      self->fill(std::move(h));
    });
  }

  // close_notify, then the peer's (or its end of the stream): a peer that never answers
  // cannot hold the connection, nor, while draining, delay the exit. A peer whose stream
  // has already ended (a bare FIN, or a 413's linger read to the end) is not waited for.
  void close() {
    if (closing_ || closed_) return;
    closing_ = true;
    expires_after(srv_.stopping.load() ? std::chrono::milliseconds(200) : std::chrono::milliseconds(2000));
    channel_.close_notify();
    if (wire_.empty()) return close_socket();
    write_wire([self = shared_from_this()](beast::error_code ec, std::size_t) {
      if (ec || self->peer_ended_) return self->close_socket();
      self->await_close_notify();
    });
  }

 private:
  template <class Handler>
  void fill(Handler&& handler) {
    const auto [data, size] = channel_.input_space();
    if (size == 0) {  // cannot happen with a conforming OpenSSL; never spin on it
      return net::post(socket_.get_executor(), [h = std::forward<Handler>(handler)]() mutable {
        h(beast::error_code(ssl::error::stream_truncated));
      });
    }
    socket_.async_read_some(net::buffer(data, size),
                            [self = shared_from_this(), h = std::forward<Handler>(handler)](beast::error_code ec, std::size_t n) mutable {
                              self->channel_.commit(n);
                              if (ec == net::error::eof) self->peer_ended_ = true;
                              h(ec);
                            });
  }

  void handshake() {
    const auto st = channel_.handshake();
    if (st == tls_channel::status::failed || st == tls_channel::status::closed) {
      return handshake_failed(st == tls_channel::status::closed ? "eof" : ssl_failure_reason(channel_.error()),
                              "TLS error");
    }
    auto next = [self = shared_from_this(), done = st == tls_channel::status::ok](beast::error_code ec) {
      if (ec) {
        ec = self->io_error(ec);
        return self->handshake_failed(handshake_failure_reason(ec), ec.message());
      }
      if (done) return self->on_handshake();
      self->handshake();
    };
    // A flight to send first (ServerHello..Finished; after the handshake, TLS 1.2's last
    // flight or TLS 1.3's tickets), then the client's next one, or the first request.
    if (!wire_.empty()) {
      return write_wire([next = std::move(next)](beast::error_code ec, std::size_t) mutable { next(ec); });
    }
    if (st == tls_channel::status::ok) return on_handshake();
    fill(std::move(next));
  }

  void on_handshake() {
    capture_peer(channel_.native_handle());
    do_read();
  }

  void handshake_failed(const std::string& reason, const std::string& detail) {
    srv_.m.handshake_failure(reason);
    log(log_level::debug, "TLS handshake failed", {{"remote", remote_}, {"reason", reason}, {"error", detail}});
    // The alert OpenSSL wrote (protocol_version, handshake_failure, ...) tells the client
    // why; it goes out once, without waiting for anything.
    if (!wire_.empty()) {
      beast::error_code ignored;
      socket_.non_blocking(true, ignored);
      socket_.write_some(net::buffer(wire_), ignored);
      wire_.clear();
    }
    close_socket();
  }

  void await_close_notify() {
    std::size_t got = 0;
    for (;;) {
      const auto st = channel_.read(discard_.data(), discard_.size(), got);
      if (st == tls_channel::status::ok) continue;  // data after our close_notify: dropped
      if (st != tls_channel::status::want_read) return close_socket();
      break;
    }
    fill([self = shared_from_this()](beast::error_code ec) {
      if (ec) return self->close_socket();
      self->await_close_notify();
    });
  }

  std::shared_ptr<ssl::context> ctx_;  // the context this connection was accepted with
  tls_channel channel_;
  bool closing_ = false;
};

class plain_session final : public http_session<plain_session>, public std::enable_shared_from_this<plain_session> {
 public:
  plain_session(tcp::socket&& socket, server::impl& srv, std::string remote)
      : http_session(srv, listener_kind::plain_health, std::move(remote), std::move(socket)) {}

  void run() {
    net::dispatch(socket_.get_executor(), [self = shared_from_this()] { self->do_read(); });
  }

  bool transport_pending() const { return in_.size() > 0; }

  read_status read_plain(char* dst, std::size_t len, std::size_t& got) {
    got = std::min(len, in_.size());
    if (got == 0) return read_status::want_read;
    std::memcpy(dst, in_.data(), got);
    in_.erase(0, got);
    return read_status::ok;
  }

  bool seal(std::string_view plain) {
    wire_.append(plain);
    return true;
  }

  template <class Handler>
  void flush_then_fill(Handler&& handler) {
    in_.resize(4096);
    socket_.async_read_some(net::buffer(in_),
                            [self = shared_from_this(), h = std::forward<Handler>(handler)](beast::error_code ec, std::size_t n) mutable {
                              self->in_.resize(n);
                              h(ec);
                            });
  }

  void close() {
    beast::error_code ignored;
    socket_.shutdown(tcp::socket::shutdown_send, ignored);
    close_socket();
  }

 private:
  std::string in_;
};

}  // namespace

void server::impl::do_accept(tcp::acceptor& a, listener_kind kind) {
  // With one thread every handler already runs in turn: a strand per connection would only add
  // a mutex and a type-erased strand copy to each completion (about a tenth of the CPU of an
  // admission POST). With several threads it keeps each connection's handlers serialised.
  const net::any_io_executor conn_ex = thread_count() == 1 ? net::any_io_executor(ioc.get_executor())
                                                            : net::any_io_executor(net::make_strand(ioc));
  tcp::endpoint& peer = accept_peer[kind == listener_kind::tls ? 0 : 1];
  a.async_accept(conn_ex, peer, net::bind_executor(control, [this, &a, &peer, kind](beast::error_code ec, tcp::socket s) {
    if (stopping.load() || !a.is_open()) return;
    if (ec) {
      if (ec == net::error::operation_aborted) return;
      // EMFILE and friends: back off instead of spinning on the error.
      log(log_level::warn, "accept failed", {{"error", ec.message()}});
      accept_retry_timer.expires_after(std::chrono::milliseconds(100));
      accept_retry_timer.async_wait([this, &a, kind](beast::error_code) {
        if (!stopping.load() && a.is_open()) do_accept(a, kind);
      });
      return;
    }
    on_accept(std::move(s), peer, kind);
    do_accept(a, kind);
  }));
}

void server::impl::on_accept(tcp::socket socket, const tcp::endpoint& peer, listener_kind kind) {
  if (connections.load() >= cfg.limits.max_connections) {
    m.connection_refused();
    beast::error_code ignored;
    socket.close(ignored);
    return;
  }
  connections.fetch_add(1);
  m.connection_opened();
  beast::error_code ec;
  socket.set_option(tcp::no_delay(true), ec);
  std::string remote = peer.address().to_string() + ":" + std::to_string(peer.port());
  if (kind == listener_kind::tls) {
    auto ctx = creds.tls();
    auto s = std::make_shared<tls_session>(std::move(socket), std::move(ctx), *this, std::move(remote));
    s->set_id(add_session(s));
    s->run();
  } else {
    auto s = std::make_shared<plain_session>(std::move(socket), *this, std::move(remote));
    s->set_id(add_session(s));
    s->run();
  }
}

void server::impl::do_poll() {
  poll_timer.expires_after(std::chrono::seconds(1));
  poll_timer.async_wait([this](beast::error_code ec) {
    if (ec || stopping.load()) return;
    creds.poll();
    do_poll();
  });
}

void server::impl::do_signals() {
  signals.async_wait([this](beast::error_code ec, int sig) {
    if (ec) return;
    if (sig == SIGHUP) {
      log(log_level::info, "SIGHUP: re-reading inventories and credentials");
      reg.resync();
      creds.poll(true);
      do_signals();
      return;
    }
    log(log_level::info, "shutdown signal received", {{"signal", sig == SIGTERM ? "SIGTERM" : "SIGINT"}});
    begin_shutdown();
  });
}

void server::impl::begin_shutdown() {
  if (stopping.exchange(true)) return;
  health.draining = true;
  beast::error_code ignored;
  if (acceptor) acceptor->close(ignored);
  if (health_acceptor) health_acceptor->close(ignored);
  poll_timer.cancel();
  accept_retry_timer.cancel();
  signals.cancel();
  std::vector<std::shared_ptr<drainable>> live;
  {
    std::lock_guard lock(sessions_mu);
    for (auto& [id, w] : sessions) {
      if (auto s = w.lock()) live.push_back(std::move(s));
    }
  }
  log(log_level::info, "draining", {{"connections", static_cast<long long>(connections.load())},
                                    {"deadline_ms", static_cast<long long>(cfg.limits.shutdown_timeout.count())}});
  for (auto& s : live) s->drain();
  live.clear();
  if (connections.load() == 0) return;
  deadline_timer.expires_after(cfg.limits.shutdown_timeout);
  deadline_timer.async_wait([this](beast::error_code ec) {
    if (ec) return;
    log(log_level::warn, "shutdown deadline reached; closing remaining connections",
        {{"connections", static_cast<long long>(connections.load())}});
    ioc.stop();
  });
}

server::server(serve_config cfg, inventory::registry& reg, metrics& m, credential_watcher& creds)
    : impl_(std::make_unique<impl>(std::move(cfg), reg, m, creds)) {}

server::~server() = default;

namespace {
bool open_acceptor(std::optional<tcp::acceptor>& acc, net::io_context& ioc, const std::string& address, unsigned port,
                   unsigned short& bound, std::string* error) {
  beast::error_code ec;
  const auto addr = net::ip::make_address(address, ec);
  if (ec) {
    if (error) *error = "invalid listen address \"" + address + "\"";
    return false;
  }
  acc.emplace(ioc);
  const tcp::endpoint ep(addr, static_cast<unsigned short>(port));
  acc->open(ep.protocol(), ec);
  if (!ec) acc->set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) acc->bind(ep, ec);
  if (!ec) acc->listen(net::socket_base::max_listen_connections, ec);
  if (ec) {
    if (error) *error = "cannot listen on " + address + ":" + std::to_string(port) + ": " + ec.message();
    return false;
  }
  bound = acc->local_endpoint().port();
  return true;
}
}  // namespace

bool server::listen(std::string* error) {
  auto& d = *impl_;
  if (!open_acceptor(d.acceptor, d.ioc, d.cfg.address, d.cfg.port, port_, error)) return false;
  if (d.cfg.health_port) {
    if (!open_acceptor(d.health_acceptor, d.ioc, d.cfg.health_address, d.cfg.health_port, health_port_, error)) {
      return false;
    }
  }
  return true;
}

void server::run(const std::function<void()>& on_listening) {
  auto& d = *impl_;
  net::dispatch(d.control, [&d] {
    d.do_accept(*d.acceptor, listener_kind::tls);
    if (d.health_acceptor) d.do_accept(*d.health_acceptor, listener_kind::plain_health);
    d.do_signals();
    d.do_poll();
  });
  d.health.certificates_loaded = d.creds.tls() != nullptr;
  d.health.listening = true;
  log(log_level::info, "listening",
      {{"address", d.cfg.address}, {"port", static_cast<long long>(port_)},
       {"health_port", static_cast<long long>(health_port_)}, {"threads", static_cast<long long>(d.thread_count())}});
  if (on_listening) on_listening();
  std::vector<std::thread> threads;
  const unsigned n = d.thread_count();
  threads.reserve(n - 1);
  for (unsigned i = 1; i < n; ++i) threads.emplace_back([&d] { d.ioc.run(); });
  d.ioc.run();
  for (auto& t : threads) t.join();
  d.health.listening = false;
  log(log_level::info, "stopped");
}

void server::shutdown() {
  auto& d = *impl_;
  net::post(d.control, [&d] { d.begin_shutdown(); });
}

}  // namespace topogate::server

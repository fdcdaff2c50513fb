#pragma once
// One HTTP/1.1 connection: reads requests, enforces the transport limits (header size, body
// size per route, read/idle/write deadlines), routes them (handle(), router.hpp), writes the
// responses and keeps the connection alive or ends it. The session drives its socket itself:
// it reads raw bytes into the transport (Derived, a `transport`: TLS or plain TCP), takes
// plaintext out of it, and feeds Beast's parser synchronously; a response is rendered and
// sealed (encrypted, or copied) into one buffer and written with one socket write per batch.
// One deadline timer per connection, re-armed only when it fires or a deadline moves earlier
// than it (a later deadline, the usual step from one request to the next, only moves
// deadline_).
//
// The connection's life is one connection_state, changed only by transition(); every error
// ends in fail(), which decides from the error and the state what it costs.

#include <openssl/err.h>
#include <openssl/ssl.h>

#include <algorithm>
#include <array>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "core/field_error.hpp"
#include "server/body_cursor.hpp"
#include "server/listener.hpp"
#include "server/log.hpp"
#include "server/metrics.hpp"
#include "server/router.hpp"
#include "server/tls.hpp"
#include "server/transport.hpp"
#include "util/wipe.hpp"

namespace topogate::server {

namespace beast = boost::beast;
namespace net = boost::asio;
namespace ssl = boost::asio::ssl;
using tcp = net::ip::tcp;

// Where a connection is in its life. Every change goes through http_session::transition(),
// which refuses any change legal_transition() does not list.
enum class connection_state : std::uint8_t {
  accepted,          // registered with the listener; nothing sent or read yet
  handshaking,       // the transport's handshake (TLS), under limits.handshakeTimeout
  reading_header,    // waiting for a request or reading its header: the connection is idle
  reading_body,      // the route is known and its body limit set; reading the body
  sending_continue,  // writing "100 Continue" before the body is read
  awaiting_push,     // the answer is made on the inventory's lane; nothing is read
  responding,        // writing a response, under one deadline for all of it
  lingering,         // after a 413: reading and discarding what the client still sends
  shutting_down,     // ending the stream (TLS: close_notify, then a bounded wait for the peer's)
  closed             // the socket is closed; late completions only release the session
};

// The legal steps. Any state may end in `closed` (the socket is closed at once: a failed
// handshake, a transport that can no longer seal, the end of shutting_down).
[[nodiscard]] constexpr bool legal_transition(connection_state from, connection_state to) noexcept {
  using s = connection_state;
  if (to == s::closed) return from != s::closed;
  switch (from) {
    case s::accepted:
      return to == s::handshaking || to == s::reading_header;
    case s::handshaking:
      return to == s::reading_header;
    case s::reading_header:
      // A header that cannot be answered (431, 400, a 413 on Content-Length) is answered
      // without reading a body; the route's own answer comes after reading_body.
      return to == s::reading_body || to == s::responding || to == s::shutting_down;
    case s::reading_body:
      return to == s::sending_continue || to == s::awaiting_push || to == s::responding ||
             to == s::shutting_down;
    case s::sending_continue:
      return to == s::reading_body || to == s::shutting_down;
    case s::awaiting_push:
      return to == s::responding;
    case s::responding:
      return to == s::reading_header || to == s::lingering || to == s::shutting_down;
    case s::lingering:
      return to == s::shutting_down;
    case s::shutting_down:
    case s::closed:
      return false;
  }
  return false;
}

[[nodiscard]] constexpr std::string_view state_name(connection_state s) noexcept {
  switch (s) {
    case connection_state::accepted:
      return "accepted";
    case connection_state::handshaking:
      return "handshaking";
    case connection_state::reading_header:
      return "reading_header";
    case connection_state::reading_body:
      return "reading_body";
    case connection_state::sending_continue:
      return "sending_continue";
    case connection_state::awaiting_push:
      return "awaiting_push";
    case connection_state::responding:
      return "responding";
    case connection_state::lingering:
      return "lingering";
    case connection_state::shutting_down:
      return "shutting_down";
    case connection_state::closed:
      return "closed";
  }
  return "?";
}

// What an error means for a connection, whichever operation met it.
enum class failure_kind : std::uint8_t {
  peer_gone,         // the peer ended or reset its stream (eof, end_of_stream, reset), or the
                     // TLS stream broke under the session (stream_truncated: a record that
                     // does not decrypt, a transport that can no longer seal, a close_notify
                     // before the handshake is done)
  timed_out,         // the connection's deadline fired (beast::error::timeout)
  cancelled,         // operation_aborted: the drain closed an idle connection
  header_too_large,  // limits.headerBytes (Beast's header_limit, or the read buffer full)
  body_too_large,    // the route's body limit
  tls_error,         // OpenSSL refused the peer (an error of the ssl category)
  other              // a malformed request, or any other socket error
};

[[nodiscard]] inline failure_kind classify(const beast::error_code& ec) noexcept {
  if (ec == http::error::end_of_stream || ec == net::error::eof ||
      ec == net::error::connection_reset || ec == ssl::error::stream_truncated) {
    return failure_kind::peer_gone;
  }
  if (ec == beast::error::timeout) return failure_kind::timed_out;
  if (ec == net::error::operation_aborted) return failure_kind::cancelled;
  if (ec == http::error::header_limit || ec == http::error::buffer_overflow) {
    return failure_kind::header_too_large;
  }
  if (ec == http::error::body_limit) return failure_kind::body_too_large;
  if (ec.category() == net::error::get_ssl_category()) return failure_kind::tls_error;
  return failure_kind::other;
}

// The metric's reason for an OpenSSL error code.
[[nodiscard]] inline std::string ssl_failure_reason(unsigned long err) {
  switch (ERR_GET_REASON(err)) {
    case SSL_R_UNSUPPORTED_PROTOCOL:
    case SSL_R_TLSV1_ALERT_PROTOCOL_VERSION:
      return "protocol_version";
    case SSL_R_NO_SHARED_CIPHER:
      return "no_shared_cipher";
    case SSL_R_HTTP_REQUEST:
      return "plain_http";
    case SSL_R_WRONG_VERSION_NUMBER:
      return "wrong_version";
    case SSL_R_TLSV1_ALERT_UNKNOWN_CA:
    case SSL_R_SSLV3_ALERT_BAD_CERTIFICATE:
    case SSL_R_SSLV3_ALERT_CERTIFICATE_UNKNOWN:
    case SSL_R_TLSV1_ALERT_DECRYPT_ERROR:
      return "client_rejected_certificate";
    default:
      return "tls_error";
  }
}

// The body bytes a parser still expects when the request has a Content-Length, else 0.
// GCC 12 (-O1 with ASan) reads boost::optional's storage in Beast's
// content_length_remaining() as maybe-uninitialized once inlined here, though the optional
// is tested before use: the warning is silenced for this function only.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
template <class Parser>
std::uint64_t body_bytes_remaining(const Parser& parser) {
  const auto len = parser.content_length_remaining();
  return len ? *len : 0;
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

// Derived is the transport: it derives from http_session<Derived> and
// std::enable_shared_from_this<Derived>, satisfies `transport` (transport.hpp), and may use
// the session's socket_, wire_, write_wire(), expires_after(), io_error(), fail(),
// close_socket(), transition(), do_read() and peer fields.
template <class Derived>
class http_session : public drainable {
 public:
  http_session(server::impl& srv, listener_kind kind, std::string remote, tcp::socket&& socket)
      : srv_(srv),
        kind_(kind),
        remote_(std::move(remote)),
        socket_(std::move(socket)),
        timer_(socket_.get_executor()) {}

  ~http_session() override {
    // A request counted in flight is uncounted on every path, an abandoned one included.
    finish_counting();
    util::wipe_storage(buffer_);  // the last requests' bytes, bearer tokens among them
    if (peer_.leaf) X509_free(peer_.leaf);
    if (id_) srv_.remove_session(id_);
  }

  void drain() override {
    net::post(socket_.get_executor(), [self = derived().shared_from_this()] {
      // An idle keep-alive connection is closed after a short grace; a busy one after its
      // response. A request whose bytes have already arrived is in flight even if its
      // header has not been parsed yet: it is answered, not cut off.
      if (self->idle() && !self->has_pending_input()) self->arm_drain_grace();
    });
  }

  void set_id(std::uint64_t id) { id_ = id; }

 protected:
  using clock_type = std::chrono::steady_clock;

  Derived& derived() {
    static_assert(transport<Derived>, "a session's Derived must satisfy `transport`");
    return static_cast<Derived&>(*this);
  }

  // ---- state

  void transition(connection_state to) {
    if (!legal_transition(state_, to)) {
      // A broken invariant of the session itself, never the peer's doing.
      log(log_level::error, "illegal connection state transition",
          {{"from", state_name(state_)}, {"to", state_name(to)}, {"remote", remote_}});
      std::abort();
    }
    state_ = to;
  }

  // Waiting for the next request (or the first) with nothing of it parsed.
  [[nodiscard]] bool idle() const { return state_ == connection_state::reading_header; }

  // ---- deadline

  // A later deadline only moves deadline_; an earlier one than the timer's re-arms it.
  void expires_at(clock_type::time_point when) {
    deadline_ = when;
    if (state_ == connection_state::closed) return;
    if (!timer_armed_ || when < timer_expiry_) arm_timer();
  }
  void expires_after(clock_type::duration d) { expires_at(clock_type::now() + d); }

  void arm_timer() {
    timer_armed_ = true;
    timer_expiry_ = deadline_;
    // Cancels a wait already pending: its handler sees operation_aborted.
    timer_.expires_at(deadline_);
    timer_.async_wait(
        [self = derived().shared_from_this()](beast::error_code ec) { self->on_timer(ec); });
  }

  void on_timer(beast::error_code ec) {
    // Re-armed, or closed.
    if (ec == net::error::operation_aborted || state_ == connection_state::closed) return;
    timer_armed_ = false;
    if (clock_type::now() < deadline_) return arm_timer();
    // The pending read or write completes with operation_aborted and sees timed_out_.
    timed_out_ = true;
    beast::error_code ignored;
    socket_.cancel(ignored);
  }

  // The error a socket operation failed with, as the session treats it.
  beast::error_code io_error(beast::error_code ec) const {
    if (timed_out_ && ec == net::error::operation_aborted) return beast::error::timeout;
    return ec;
  }

  // ---- errors

  // Every error the connection meets ends here (Beast's advanced_server_flex has fail()):
  // what it costs depends on what the error means and on where the connection was.
  void fail(beast::error_code ec) {
    const failure_kind kind = classify(ec);
    // The peer sends nothing more; a further read would wait for a readiness edge that has
    // already passed.
    if (ec == net::error::eof) peer_ended_ = true;
    switch (state_) {
      case connection_state::handshaking:
        return fail_handshake(ec, kind);
      case connection_state::reading_header:
        switch (kind) {
          case failure_kind::header_too_large:
            return send_error(http::status::request_header_fields_too_large,
                              "request header too large");
          case failure_kind::body_too_large:
            return send_error(http::status::payload_too_large,
                              "request body exceeds the limit for this route");
          case failure_kind::peer_gone:
          case failure_kind::timed_out:
          case failure_kind::cancelled:
            return do_close();
          case failure_kind::tls_error:
          case failure_kind::other:
            return send_error(http::status::bad_request, "malformed HTTP request");
        }
        return;
      case connection_state::reading_body:
        if (kind == failure_kind::body_too_large) {
          return send_error(http::status::payload_too_large,
                            "request body exceeds the limit for this route");
        }
        if (kind == failure_kind::timed_out || kind == failure_kind::cancelled) {
          log(log_level::warn, "request body read timed out", {{"remote", remote_}});
        }
        finish_counting();
        return do_close();
      case connection_state::sending_continue:
        finish_counting();
        // A transport that could not seal the interim response cannot seal a close_notify.
        if (ec == ssl::error::stream_truncated) return close_socket();
        return do_close();
      case connection_state::responding:
        body_.clear();
        finish_counting();
        res_.reset();
        return do_close();
      case connection_state::lingering:
        return do_close();
      case connection_state::accepted:
      case connection_state::awaiting_push:
      case connection_state::shutting_down:
        return close_socket();
      case connection_state::closed:
        return;
    }
  }

  void fail_handshake(const beast::error_code& ec, failure_kind kind) {
    std::string reason = "other";
    switch (kind) {
      case failure_kind::tls_error:
        reason = ssl_failure_reason(static_cast<unsigned long>(static_cast<unsigned>(ec.value())));
        break;
      case failure_kind::timed_out:
        reason = "timeout";
        break;
      case failure_kind::peer_gone:
        reason = "eof";
        break;
      default:
        break;
    }
    const bool from_tls = kind == failure_kind::tls_error || ec == ssl::error::stream_truncated;
    srv_.m.handshake_failure(reason);
    log(log_level::debug, "TLS handshake failed",
        {{"remote", remote_},
         {"reason", reason},
         {"error", from_tls ? std::string("TLS error") : ec.message()}});
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

  // ---- ending the connection

  void do_close() {
    if (state_ == connection_state::shutting_down || state_ == connection_state::closed) return;
    transition(connection_state::shutting_down);
    derived().close();
  }

  void close_socket() {
    if (state_ == connection_state::closed) return;
    transition(connection_state::closed);
    beast::error_code ignored;
    timer_.cancel();
    if (drain_timer_) drain_timer_->cancel();
    socket_.close(ignored);
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
  // connection: no keep-alive once stopping). The grace is far below any shutdownTimeout
  // and delays the exit only while idle connections remain.
  static constexpr std::chrono::milliseconds drain_idle_grace{100};

  void arm_drain_grace() {
    if (state_ == connection_state::closed) return;
    if (!drain_timer_) drain_timer_.emplace(socket_.get_executor());
    drain_timer_->expires_after(drain_idle_grace);
    drain_timer_->async_wait([self = derived().shared_from_this()](beast::error_code ec) {
      if (ec || self->state_ == connection_state::closed) return;
      if (self->idle() && !self->has_pending_input()) {
        beast::error_code ignored;
        self->socket_.cancel(ignored);
      }
    });
  }

  // ---- reading a request

  void do_read() {
    // While draining, a connection whose next request has already arrived (for a new
    // connection: sent right behind the handshake) is still answered.
    if (srv_.stopping.load() && !has_pending_input()) arm_drain_grace();
    transition(connection_state::reading_header);
    parser_.emplace();
    parser_->header_limit(static_cast<std::uint32_t>(srv_.cfg.limits.header_bytes));
    // Beast checks Content-Length against the body limit while parsing the header; the
    // per-route limit is set once the route is known (on_header).
    parser_->body_limit(std::max(srv_.limits.admission, srv_.limits.push));
    buffer_.max_size(srv_.cfg.limits.header_bytes + 65536);
    // The first request gets readTimeout from the accept; later ones idleTimeout.
    expires_after(first_request_ ? srv_.cfg.limits.read_timeout : srv_.cfg.limits.idle_timeout);
    pump();
  }

  // Parses what is buffered, takes more plaintext from the transport while it has some,
  // and reads the socket when it has none. Ends in finish_read() or a pending read.
  void pump() {
    const bool body = state_ == connection_state::reading_body;
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
        if (body ? parser_->is_done() : parser_->is_header_done()) return finish_read({});
        if (used > 0 && buffer_.size() > 0) continue;  // e.g. a chunk header, then its data
      }
      if (buffer_.size() >= buffer_.max_size()) return finish_read(http::error::buffer_overflow);
      // Room for what one read may bring: the rest of a body of known length (up to 64 KiB)
      // in one go, or at least 512 bytes.
      std::size_t want = std::max<std::size_t>(512, buffer_.capacity() - buffer_.size());
      if (body) {
        if (const std::uint64_t len = body_bytes_remaining(*parser_); len > want) {
          want = static_cast<std::size_t>(std::min<std::uint64_t>(len, 65536));
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
    if (ec) return fail(ec);
    if (state_ == connection_state::reading_body) return on_request();
    on_header();
  }

  void on_header() {
    started_ = clock_type::now();
    srv_.m.in_flight_add(1);
    counted_ = true;
    auto& hdr = parser_->get();
    const std::size_t limit = body_limit(hdr.method(), hdr.target(), srv_.limits);
    if (const auto len = parser_->content_length(); len && *len > limit) {
      // A request no route takes gets the routing answer, not a 413 for a body it could not
      // have sent anywhere; either way the body is left unread.
      if (auto refused = unrouted_response(hdr.method(), hdr.target(), kind_))
        return send_refusal(std::move(*refused), true);
      return send_error(http::status::payload_too_large,
                        "request body of " + std::to_string(*len) + " bytes exceeds the limit of " +
                            std::to_string(limit) + " bytes for this route");
    }
    parser_->body_limit(limit);
    transition(connection_state::reading_body);
    parser_->eager(true);
    if (parser_->is_done()) return on_request();
    expires_after(srv_.cfg.limits.read_timeout);
    const auto expect = hdr[http::field::expect];
    if (beast::iequals(expect, "100-continue")) {
      // curl and other clients wait for this before sending a large body.
      static constexpr std::string_view continue_line = "HTTP/1.1 100 Continue\r\n\r\n";
      transition(connection_state::sending_continue);
      if (!derived().seal(continue_line)) return fail(ssl::error::stream_truncated);
      return write_wire([self = derived().shared_from_this()](beast::error_code ec, std::size_t) {
        if (ec) return self->fail(ec);
        self->transition(connection_state::reading_body);
        self->pump();
      });
    }
    pump();
  }

  void on_request() {
    const request req = parser_->release();
    // The bearer token in the request's header fields is wiped when the request goes (its
    // storage is the request's own; the router keeps no copy past its check).
    const std::string_view authorization = req[http::field::authorization];
    std::span<char> authorization_bytes{const_cast<char*>(authorization.data()),
                                        authorization.size()};
    const util::wiped_at_exit wipe_authorization{authorization_bytes};
    request_info info;
    deferred_response later;
    response res = handle(req, peer_, srv_.context(kind_), info, started_, &later);
    // Draining (a shutdown delay, or stopping): each answer closes its connection, so a
    // keep-alive client dials again and reaches a replica that stays.
    after_response_ = req.keep_alive() && !srv_.health.draining.load() ? after_response::read_next
                                                                       : after_response::close;
    if (later) {
      // A push: answered from the inventory's lane (by store.timeout at the latest), posted
      // back to this connection's executor. Nothing is read meanwhile, and no thread waits.
      transition(connection_state::awaiting_push);
      expires_at(clock_type::time_point::max());
      later([self = derived().shared_from_this(), info = std::move(info),
             method = std::string(req.method_string()),
             version = req.version()](response answer) mutable {
        auto ex = self->socket_.get_executor();
        net::post(ex, [self = std::move(self), answer = std::move(answer), info = std::move(info),
                       method = std::move(method), version]() mutable {
          if (self->state_ == connection_state::closed) return self->finish_counting();
          if (self->srv_.health.draining.load()) self->after_response_ = after_response::close;
          self->send(std::move(answer), method, info, version);
        });
      });
      return;
    }
    send(std::move(res), req.method_string(), info, req.version());
  }

  // ---- writing a response

  void send_error(http::status status, std::string_view message) {
    send_refusal(error_response(status, message), false);
  }

  // An answer given before the request was read whole; `body_unread`: a body the client may
  // still be sending (a refusal decided from the header alone).
  void send_refusal(response&& res, bool body_unread) {
    const auto status = res.result();
    res.prepare_payload();
    if (!counted_) {
      started_ = clock_type::now();
      srv_.m.in_flight_add(1);
      counted_ = true;
    }
    // No keep-alive: the rest of the stream cannot be trusted. A client still sending the
    // refused body reads no response if the socket closes under it (TCP reset); keep
    // reading and discarding for a bounded time, as nginx's lingering close does, so the
    // answer reaches it.
    after_response_ = status == http::status::payload_too_large || body_unread
                          ? after_response::linger
                          : after_response::close;
    request_info info;
    info.route = "transport";
    const std::string_view method =
        parser_ && parser_->is_header_done() ? parser_->get().method_string() : "-";
    send(std::move(res), method, info, 11);
  }

  void send(response&& res, std::string_view method, const request_info& info, unsigned version) {
    transition(connection_state::responding);
    const std::string rid = srv_.next_request_id();
    res.version(version);
    res.keep_alive(after_response_ == after_response::read_next);
    res.set("X-Request-Id", rid);
    const double seconds = std::chrono::duration<double>(clock_type::now() - started_).count();
    const int status = static_cast<int>(res.result_int());
    srv_.m.observe_request(info.route, status, seconds);
    if (srv_.cfg.access_log) {
      log(is_polled_route(info.route) ? log_level::debug : log_level::info, "request",
          {{"request_id", rid},
           {"method", method},
           {"route", info.route},
           {"status", status},
           {"duration_ms", seconds * 1000.0},
           {"peer", info.identity.empty() ? (peer_subject_.empty() ? std::string("anonymous")
                                                                   : "cert:" + peer_subject_)
                                          : info.identity},
           {"remote", remote_},
           {"inventory", info.inventory},
           {"bytes", static_cast<long long>(res.body().size())},
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
    body_.reset(res.body().data, res.body().pieces);
    const std::size_t room =
        plain_.size() < tls_record_plaintext ? tls_record_plaintext - plain_.size() : 0;
    body_.gather(plain_, room);
    // Room for a whole batch up front: growing the buffer record by record would copy it
    // again at every doubling.
    if (!body_.done()) wire_.reserve(wire_batch + tls_record_plaintext);
    if (!derived().seal(plain_)) return fail(ssl::error::stream_truncated);
    fill_wire();
  }

  // Seals up to wire_batch of the body behind what wire_ holds, then writes it all.
  void fill_wire() {
    while (!body_.done() && wire_.size() < wire_batch) {
      if (!body_.seal_next(wire_batch - wire_.size(), tls_record_plaintext, plain_,
                           [this](std::string_view plain) { return derived().seal(plain); }))
        return fail(ssl::error::stream_truncated);
    }
    write_wire([self = derived().shared_from_this()](beast::error_code ec, std::size_t n) {
      self->on_wire(ec, n);
    });
  }

  void on_wire(beast::error_code ec, std::size_t /*written*/) {
    if (ec) return fail(ec);
    if (!body_.done()) return fill_wire();
    on_write();
  }

  // Writes everything wire_ holds, then empties it.
  template <class Handler>
  void write_wire(Handler&& handler) {
    net::async_write(
        socket_, net::buffer(wire_),
        [this, h = std::forward<Handler>(handler)](beast::error_code ec, std::size_t n) mutable {
          wire_.clear();
          h(io_error(ec), n);
        });
  }

  // The whole response is out: the next request, a lingering read, or the end.
  void on_write() {
    finish_counting();
    res_.reset();
    switch (after_response_) {
      case after_response::linger:
        linger_deadline_ = clock_type::now() + std::chrono::seconds(5);
        transition(connection_state::lingering);
        return do_linger();
      case after_response::close:
        return do_close();
      case after_response::read_next:
        break;
    }
    first_request_ = false;
    // An idle keep-alive connection does not keep a large body's read buffer or a large
    // response's write buffer; the usual request's (a few KiB) stays, so the next one is
    // again a single read.
    // Between requests what was read is wiped (a bearer token was in it); a pipelined
    // request already read stays.
    if (buffer_.size() == 0) {
      util::wipe_storage(buffer_);
      if (buffer_.capacity() > 16384) buffer_.shrink_to_fit();
    }
    if (wire_.capacity() > wire_batch + tls_record_plaintext) std::string().swap(wire_);
    do_read();
  }

  // Reads and discards raw bytes for a bounded time and amount, then closes.
  void do_linger() {
    expires_at(linger_deadline_);
    socket_.async_read_some(net::buffer(discard_),
                            [self = derived().shared_from_this()](
                                beast::error_code ec, std::size_t n) { self->on_linger(ec, n); });
  }

  void on_linger(beast::error_code ec, std::size_t n) {
    lingered_ += n;
    if (ec) return fail(io_error(ec));
    // Bounded in time and bytes: a client may not keep the connection by streaming forever.
    if (lingered_ > (64u << 20) || clock_type::now() >= linger_deadline_) return do_close();
    do_linger();
  }

  void finish_counting() {
    if (counted_) {
      srv_.m.in_flight_add(-1);
      counted_ = false;
    }
  }

  // Ciphertext per socket write: a 1 MiB body leaves in 16 writes instead of 64 record
  // writes, and the batch stays in the core's L2 cache between OpenSSL writing it and the
  // kernel copying it.
  static constexpr std::size_t wire_batch = 64 * 1024;

  // What follows the response being written; decided with it (and part of its header).
  enum class after_response : std::uint8_t {
    read_next,  // keep-alive: the next request
    close,      // Connection: close, an error response, or a stopping server
    linger      // a 413: lingering, then close
  };

  server::impl& srv_;
  listener_kind kind_;
  std::string remote_;
  std::uint64_t id_ = 0;
  tcp::socket socket_;
  connection_state state_ = connection_state::accepted;
  after_response after_response_ = after_response::read_next;

  net::steady_timer timer_;
  clock_type::time_point deadline_ = clock_type::time_point::max();
  clock_type::time_point timer_expiry_;
  // The flags below are not phases of the connection, so they stay beside state_:
  // Whether timer_ has a wait pending (it is re-armed only when needed, in any state).
  bool timer_armed_ = false;
  // The deadline fired and cancelled the socket: the operation_aborted that the pending
  // read or write completes with is a timeout. A deadline can fire in any state.
  bool timed_out_ = false;
  // A read returned the end of the stream: the peer sends nothing more, and a further read
  // would wait for a readiness edge that has already passed (Asio marks the socket drained).
  // It is the peer's half of the stream, learnt in whatever state the read ran.
  bool peer_ended_ = false;
  // Selects readTimeout (the first request, timed from the accept) or idleTimeout (a
  // keep-alive wait) for reading_header; it is history, not a phase.
  bool first_request_ = true;
  // The request is counted in the in-flight gauge: from its header (or the error response
  // that replaces it) until its response is written or the connection fails reading its body.
  bool counted_ = false;

  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  std::optional<response> res_;
  // The header and the first part of the body (the first record), then a record gathered
  // across two pieces.
  std::string plain_;
  std::string wire_;  // bytes for the socket: records (TLS) or plaintext
  body_cursor body_;  // the body not yet sealed (owned by res_)
  peer_certificate peer_;
  std::string peer_subject_;
  clock_type::time_point started_;
  std::optional<net::steady_timer> drain_timer_;  // created when a drain meets an idle read
  std::size_t lingered_ = 0;
  clock_type::time_point linger_deadline_;
  std::array<char, 4096> discard_{};
};

}  // namespace topogate::server

#include "server/transport_tls.hpp"

#include <openssl/err.h>
#include <openssl/ssl.h>

#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <utility>

#include "server/http_session.hpp"
#include "server/openssl_text.hpp"
#include "server/tls.hpp"

namespace topogate::server {

namespace {

class tls_session final : public http_session<tls_session>,
                          public std::enable_shared_from_this<tls_session> {
 public:
  tls_session(tcp::socket&& socket, std::shared_ptr<ssl::context> ctx, server::impl& srv,
              std::string remote)
      : http_session(srv, listener_kind::tls, std::move(remote), std::move(socket)),
        ctx_(std::move(ctx)),
        channel_(ctx_->native_handle()) {
    channel_.set_output(&wire_);
  }

  void run() {
    net::dispatch(socket_.get_executor(), [self = shared_from_this()] {
      self->transition(connection_state::handshaking);
      self->expires_after(self->srv_.cfg.limits.handshake_timeout);
      self->handshake();
    });
  }

  // ---- transport

  bool transport_pending() const { return channel_.pending(); }

  read_status read_plain(char* dst, std::size_t len, std::size_t& got) {
    // Nothing read off the socket and not yet decrypted: OpenSSL has nothing to give (the
    // usual case after a response, when the next request has not arrived), so go straight
    // to the socket instead of through a failing SSL_read.
    got = 0;
    if (!channel_.pending()) return read_status::want_read;
    switch (channel_.read(dst, len, got)) {
      case tls_channel::status::ok:
        return read_status::ok;
      case tls_channel::status::want_read:
        return read_status::want_read;
      case tls_channel::status::closed:
        return read_status::closed;
      case tls_channel::status::failed:
        break;
    }
    return read_status::failed;
  }

  bool seal(std::string_view plain) { return channel_.write(plain); }

  // Sends what OpenSSL wrote while reading (an alert, a KeyUpdate), then reads more ciphertext.
  template <class Handler>
  void flush_then_fill(Handler&& handler) {
    if (wire_.empty()) return fill(std::forward<Handler>(handler));
    write_wire([self = shared_from_this(), h = std::forward<Handler>(handler)](
                   beast::error_code ec, std::size_t) mutable {
      if (ec) return h(ec);
      self->fill(std::move(h));
    });
  }

  // close_notify, then the peer's (or its end of the stream): a peer that never answers
  // cannot hold the connection, nor, while draining, delay the exit. A peer whose stream
  // has already ended (a bare FIN, or a 413's linger read to the end) is not waited for.
  void close() {
    expires_after(srv_.stopping.load() ? std::chrono::milliseconds(200)
                                       : std::chrono::milliseconds(2000));
    channel_.close_notify();
    if (wire_.empty()) return close_socket();
    write_wire([self = shared_from_this()](beast::error_code ec, std::size_t) {
      if (ec) return self->fail(ec);
      if (self->peer_ended_) return self->close_socket();
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
                            [self = shared_from_this(), h = std::forward<Handler>(handler)](
                                beast::error_code ec, std::size_t n) mutable {
                              self->channel_.commit(n);
                              if (ec == net::error::eof) self->peer_ended_ = true;
                              h(ec);
                            });
  }

  // The OpenSSL error of a failed handshake step, as an error_code of Asio's ssl category.
  beast::error_code tls_error() const {
    // Reason 0 (no OpenSSL error queued: the connection could not be created) is "tls_error".
    const unsigned long err = channel_.error() ? channel_.error() : ERR_PACK(ERR_LIB_SSL, 0, 0);
    return {static_cast<int>(err), net::error::get_ssl_category()};
  }

  void handshake() {
    switch (channel_.handshake()) {
      case tls_channel::status::failed:
        return fail(tls_error());
      // The peer's close_notify: the TLS stream ended before the handshake did.
      case tls_channel::status::closed:
        return fail(ssl::error::stream_truncated);
      case tls_channel::status::ok:
        return flush_handshake(true);
      case tls_channel::status::want_read:
        return flush_handshake(false);
    }
  }

  // A flight to send first (ServerHello..Finished; after the handshake, TLS 1.2's last
  // flight or TLS 1.3's tickets), then the client's next one, or the first request.
  void flush_handshake(bool done) {
    auto next = [self = shared_from_this(), done](beast::error_code ec) {
      if (ec) return self->fail(self->io_error(ec));
      if (done) return self->on_handshake();
      self->handshake();
    };
    if (!wire_.empty()) {
      return write_wire(
          [next = std::move(next)](beast::error_code ec, std::size_t) mutable { next(ec); });
    }
    if (done) return on_handshake();
    fill(std::move(next));
  }

  void on_handshake() {
    capture_peer();
    do_read();
  }

  void capture_peer() {
    SSL* ssl = channel_.native_handle();
    peer_.leaf = SSL_get1_peer_certificate(ssl);
    peer_.chain = SSL_get_peer_cert_chain(ssl);
    if (peer_.leaf) {
      peer_subject_ = rfc2253(X509_get_subject_name(peer_.leaf));
      peer_.subject = peer_subject_;
    }
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
      if (ec) return self->fail(ec);
      self->await_close_notify();
    });
  }

  std::shared_ptr<ssl::context> ctx_;  // the context this connection was accepted with
  tls_channel channel_;
};

}  // namespace

void start_tls_session(tcp::socket&& socket, std::shared_ptr<ssl::context> ctx, server::impl& srv,
                       std::string remote) {
  auto s = std::make_shared<tls_session>(std::move(socket), std::move(ctx), srv, std::move(remote));
  s->set_id(srv.add_session(s));
  s->run();
}

}  // namespace topogate::server

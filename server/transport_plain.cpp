#include "server/transport_plain.hpp"

#include <boost/asio/dispatch.hpp>
#include <cstring>
#include <utility>

#include "server/http_session.hpp"

namespace topogate::server {

namespace {

class plain_session final : public http_session<plain_session>,
                            public std::enable_shared_from_this<plain_session> {
 public:
  plain_session(tcp::socket&& socket, server::impl& srv, std::string remote)
      : http_session(srv, listener_kind::plain_health, std::move(remote), std::move(socket)) {}

  void run() {
    net::dispatch(socket_.get_executor(), [self = shared_from_this()] { self->do_read(); });
  }

  // ---- transport

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
                            [self = shared_from_this(), h = std::forward<Handler>(handler)](
                                beast::error_code ec, std::size_t n) mutable {
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
  std::string in_;  // bytes read off the socket, not yet taken by the session
};

}  // namespace

void start_plain_session(tcp::socket&& socket, server::impl& srv, std::string remote) {
  auto s = std::make_shared<plain_session>(std::move(socket), srv, std::move(remote));
  s->set_id(srv.add_session(s));
  s->run();
}

}  // namespace topogate::server

#pragma once
// The listeners and the process around the connections: accepting (and refusing past
// limits.maxConnections), the connection registry, signals, credential polling and the
// drain on shutdown. Each accepted socket is handed to a transport (transport_tls.hpp,
// transport_plain.hpp), which runs the connection's http_session.

#include <array>
#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include "server/config.hpp"
#include "server/router.hpp"
#include "server/server.hpp"
#include "server/tls.hpp"

namespace topogate::inventory {
class registry;
}

namespace topogate::server {

class metrics;
class metrics_gate;

// A connection as the drain on shutdown sees it.
struct drainable {
  virtual ~drainable() = default;
  // Called once the server is stopping: finish what is in flight, close when idle.
  virtual void drain() = 0;
};

struct server::impl {
  impl(serve_config c, inventory::registry& r, metrics& mm, credential_watcher& cw);

  [[nodiscard]] unsigned thread_count() const;

  serve_config cfg;
  inventory::registry& reg;
  metrics& m;
  credential_watcher& creds;
  metrics_gate* metrics_auth = nullptr;  // metrics.auth; null: /metrics open
  boost::asio::io_context ioc;
  boost::asio::strand<boost::asio::io_context::executor_type> control;
  std::optional<boost::asio::ip::tcp::acceptor> acceptor;
  std::optional<boost::asio::ip::tcp::acceptor> health_acceptor;
  boost::asio::signal_set signals;
  boost::asio::steady_timer poll_timer;
  boost::asio::steady_timer deadline_timer;
  // limits.shutdownDelay: between the signal and the drain.
  boost::asio::steady_timer delay_timer;
  bool delaying = false;
  boost::asio::steady_timer accept_retry_timer;
  health_state health;
  body_limits limits;
  std::atomic<std::size_t> connections{0};
  std::atomic<bool> stopping{false};
  std::atomic<std::uint64_t> request_counter{0};
  std::uint64_t request_seed = 0;
  std::mutex sessions_mu;
  std::unordered_map<std::uint64_t, std::weak_ptr<drainable>> sessions;
  std::uint64_t next_session = 0;
  // The peer address of the connection each listener is accepting (filled by accept(2)
  // itself, so no getpeername per connection).
  std::array<boost::asio::ip::tcp::endpoint, 2> accept_peer;

  std::string next_request_id();

  // The connection registry the drain walks; a session removes itself when destroyed.
  std::uint64_t add_session(std::weak_ptr<drainable> s);
  void remove_session(std::uint64_t id);

  [[nodiscard]] router_context context(listener_kind kind);

  // Binds one listener (port 0 picks a free port); the bound port in `bound`.
  core::result<void> open_acceptor(std::optional<boost::asio::ip::tcp::acceptor>& acc,
                                   const std::string& address, unsigned port,
                                   unsigned short& bound);

  void do_accept(boost::asio::ip::tcp::acceptor& a, listener_kind kind);
  void on_accept(boost::asio::ip::tcp::socket socket, const boost::asio::ip::tcp::endpoint& peer,
                 listener_kind kind);
  void do_poll();
  void do_signals();
  // SIGTERM/SIGINT: with limits.shutdownDelay, first fail /readyz and keep serving (every
  // response closes its connection) while the endpoints drop this replica, then drain; a
  // second signal ends the delay at once.
  void on_shutdown_signal();
  void begin_shutdown();
};

}  // namespace topogate::server

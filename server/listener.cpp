#include "server/listener.hpp"

#include <openssl/rand.h>

#include <boost/asio/bind_executor.hpp>
#include <boost/asio/post.hpp>
#include <boost/beast/core/error.hpp>
#include <csignal>
#include <thread>
#include <utility>
#include <vector>

#include "inventory/registry.hpp"
#include "server/log.hpp"
#include "server/metrics.hpp"
#include "server/metrics_auth.hpp"
#include "server/transport_plain.hpp"
#include "server/transport_tls.hpp"

namespace topogate::server {

namespace beast = boost::beast;
namespace net = boost::asio;
using tcp = net::ip::tcp;

server::impl::impl(serve_config c, inventory::registry& r, metrics& mm, credential_watcher& cw)
    : cfg(std::move(c)),
      reg(r),
      m(mm),
      creds(cw),
      ioc(static_cast<int>(thread_count())),
      control(net::make_strand(ioc)),
      signals(control, SIGINT, SIGTERM, SIGHUP),
      poll_timer(control),
      deadline_timer(control),
      delay_timer(control),
      accept_retry_timer(control) {
  limits.admission = cfg.limits.admission_body_bytes;
  limits.push = cfg.limits.push_body_bytes;
  unsigned char seed[8];
  RAND_bytes(seed, sizeof seed);
  for (unsigned char b : seed) request_seed = (request_seed << 8) | b;
}

unsigned server::impl::thread_count() const {
  if (cfg.threads) return cfg.threads;
  const unsigned n = std::thread::hardware_concurrency();
  return n ? n : 1;
}

std::string server::impl::next_request_id() {
  std::uint64_t v = request_seed ^ (request_counter.fetch_add(1) * 0x9e3779b97f4a7c15ULL);
  std::string id(16, '0');
  for (int i = 15; i >= 0; --i, v >>= 4) {
    id[static_cast<std::size_t>(i)] = "0123456789abcdef"[v & 0xf];
  }
  return id;
}

std::uint64_t server::impl::add_session(std::weak_ptr<drainable> s) {
  std::lock_guard lock(sessions_mu);
  const auto id = ++next_session;
  sessions.emplace(id, std::move(s));
  return id;
}

void server::impl::remove_session(std::uint64_t id) {
  {
    std::lock_guard lock(sessions_mu);
    sessions.erase(id);
  }
  m.connection_closed();
  if (connections.fetch_sub(1) == 1 && stopping.load()) {
    net::post(control, [this] { deadline_timer.cancel(); });
  }
}

router_context server::impl::context(listener_kind kind) {
  router_context ctx;
  ctx.registry = &reg;
  ctx.auth = creds.auth();
  ctx.m = &m;
  ctx.metrics_auth = metrics_auth;
  ctx.health = &health;
  ctx.admission = &cfg.admission;
  ctx.push_body_bytes = cfg.limits.push_body_bytes;
  ctx.listener = kind;
  ctx.dry_run = cfg.dry_run;
  return ctx;
}

core::result<void> server::impl::open_acceptor(std::optional<tcp::acceptor>& acc,
                                               const std::string& address, unsigned port,
                                               unsigned short& bound) {
  beast::error_code ec;
  const auto addr = net::ip::make_address(address, ec);
  if (ec)
    return core::fail(core::errc::invalid_argument, "invalid listen address \"" + address + "\"");
  acc.emplace(ioc);
  const tcp::endpoint ep(addr, static_cast<unsigned short>(port));
  acc->open(ep.protocol(), ec);
  if (!ec) acc->set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) acc->bind(ep, ec);
  if (!ec) acc->listen(net::socket_base::max_listen_connections, ec);
  if (ec) {
    return core::fail(core::errc::io, "cannot listen on " + address + ":" + std::to_string(port) +
                                          ": " + ec.message());
  }
  bound = acc->local_endpoint().port();
  return {};
}

void server::impl::do_accept(tcp::acceptor& a, listener_kind kind) {
  // With one thread every handler already runs in turn: a strand per connection would only add
  // a mutex and a type-erased strand copy to each completion (about a tenth of the CPU of an
  // admission POST). With several threads it keeps each connection's handlers serialised.
  const net::any_io_executor conn_ex = thread_count() == 1
                                           ? net::any_io_executor(ioc.get_executor())
                                           : net::any_io_executor(net::make_strand(ioc));
  tcp::endpoint& peer = accept_peer[kind == listener_kind::tls ? 0 : 1];
  a.async_accept(
      conn_ex, peer,
      net::bind_executor(control, [this, &a, &peer, kind](beast::error_code ec, tcp::socket s) {
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
    start_tls_session(std::move(socket), creds.tls(), *this, std::move(remote));
  } else {
    start_plain_session(std::move(socket), *this, std::move(remote));
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
      if (metrics_auth) metrics_auth->poll_token_file(true);
      do_signals();
      return;
    }
    log(log_level::info, "shutdown signal received",
        {{"signal", sig == SIGTERM ? "SIGTERM" : "SIGINT"}});
    on_shutdown_signal();
  });
}

void server::impl::on_shutdown_signal() {
  if (delaying) {
    log(log_level::info, "second shutdown signal: ending the shutdown delay");
    delay_timer.cancel();
    begin_shutdown();
    return;
  }
  const auto delay = cfg.limits.shutdown_delay;
  if (delay.count() <= 0 || stopping.load()) {
    begin_shutdown();
    return;
  }
  // Kubernetes removes a terminating Pod from its Service's endpoints while it sends
  // SIGTERM; a client that resolved the endpoint just before still dials this replica.
  delaying = true;
  health.draining = true;
  log(log_level::info, "shutdown delay: serving while the endpoints drop this replica",
      {{"delay_ms", static_cast<long long>(delay.count())}});
  delay_timer.expires_after(delay);
  delay_timer.async_wait([this](beast::error_code ec) {
    if (ec) return;
    begin_shutdown();
  });
  do_signals();
}

void server::impl::begin_shutdown() {
  if (stopping.exchange(true)) return;
  health.draining = true;
  delaying = false;
  delay_timer.cancel();
  beast::error_code ignored;
  if (acceptor) acceptor->close(ignored);
  if (health_acceptor) health_acceptor->close(ignored);
  poll_timer.cancel();
  accept_retry_timer.cancel();
  // A scrape waiting for a token review is answered now instead of holding the drain.
  if (metrics_auth) metrics_auth->shutdown();
  signals.cancel();
  std::vector<std::shared_ptr<drainable>> live;
  {
    std::lock_guard lock(sessions_mu);
    for (auto& [id, w] : sessions) {
      if (auto s = w.lock()) live.push_back(std::move(s));
    }
  }
  log(log_level::info, "draining",
      {{"connections", static_cast<long long>(connections.load())},
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

}  // namespace topogate::server

#include "server/server.hpp"

#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <csignal>
#include <thread>
#include <vector>

#include "server/listener.hpp"
#include "server/log.hpp"

namespace topogate::server {

namespace net = boost::asio;

server::server(serve_config cfg, inventory::registry& reg, metrics& m, credential_watcher& creds,
               metrics_gate* metrics_auth)
    : impl_(std::make_unique<impl>(std::move(cfg), reg, m, creds)) {
  impl_->metrics_auth = metrics_auth;
}

server::~server() = default;

core::result<void> server::listen() {
  auto& d = *impl_;
  if (auto r = d.open_acceptor(d.acceptor, d.cfg.address, d.cfg.port, port_); !r) return r;
  if (d.cfg.health_port) {
    return d.open_acceptor(d.health_acceptor, d.cfg.health_address, d.cfg.health_port,
                           health_port_);
  }
  return {};
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
      {{"address", d.cfg.address},
       {"port", static_cast<long long>(port_)},
       {"health_port", static_cast<long long>(health_port_)},
       {"threads", static_cast<long long>(d.thread_count())}});
  if (on_listening) on_listening();
  std::vector<std::thread> threads;
  const unsigned n = d.thread_count();
  threads.reserve(n - 1);
  {
    // The shutdown signals go to this thread only: the other threads start with them blocked.
    // A signal the kernel hands to a thread that is still starting can be lost (seen under
    // ThreadSanitizer: a SIGTERM sent as the server began listening was never acted on).
    sigset_t shutdown_signals;
    sigset_t before;
    sigemptyset(&shutdown_signals);
    sigaddset(&shutdown_signals, SIGINT);
    sigaddset(&shutdown_signals, SIGTERM);
    sigaddset(&shutdown_signals, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &shutdown_signals, &before);
    for (unsigned i = 1; i < n; ++i) threads.emplace_back([&d] { d.ioc.run(); });
    pthread_sigmask(SIG_SETMASK, &before, nullptr);
  }
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

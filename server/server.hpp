#pragma once
// The process: listeners, connections, signals, credential polling and draining.
// Connections drive their own sockets (TLS through tls_channel, tls.hpp), one strand each
// with several threads; Beast parses the requests and handle() (router.hpp) answers them.

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "core/result.hpp"
#include "server/config.hpp"
#include "server/router.hpp"
#include "server/tls.hpp"

namespace topogate::inventory {
class registry;
}

namespace topogate::server {

class metrics;
class metrics_gate;

class server {
 public:
  // `metrics_auth` (optional, outliving the server) decides who may scrape /metrics.
  server(serve_config cfg, inventory::registry& reg, metrics& m, credential_watcher& creds,
         metrics_gate* metrics_auth = nullptr);
  ~server();
  server(const server&) = delete;
  server& operator=(const server&) = delete;

  // Binds the listeners (port 0 picks a free port), or says why it cannot.
  core::result<void> listen();
  [[nodiscard]] unsigned short port() const noexcept { return port_; }
  [[nodiscard]] unsigned short health_port() const noexcept { return health_port_; }

  // Serves until a shutdown completes: SIGTERM/SIGINT (or shutdown()) stop accepting,
  // finish in-flight requests, close idle connections, and return within
  // limits.shutdownTimeout. SIGHUP re-reads inventories and credentials.
  // `on_listening` runs once the listeners accept connections.
  void run(const std::function<void()>& on_listening = {});
  void shutdown();  // thread-safe

  // The listener and what its connections share (listener.hpp); public only so the
  // sessions (http_session.hpp) can name it.
  struct impl;

 private:
  std::unique_ptr<impl> impl_;
  unsigned short port_ = 0;
  unsigned short health_port_ = 0;
};

}  // namespace topogate::server

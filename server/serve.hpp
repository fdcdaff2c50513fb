#pragma once
// Runs a configured server to completion; shared by `serve` and `demo`.

#include <functional>
#include <span>
#include <string>
#include <string_view>

#include "core/result.hpp"
#include "inventory/registry.hpp"
#include "server/config.hpp"

namespace topogate::server {

struct serve_hooks {
  // Called once the listeners accept connections, with the bound TLS port.
  std::function<void(unsigned short port)> on_listening;
  // Builds the registry's stores and Node watch (the Kubernetes ones live in topogate_kube,
  // which `topogate` links and the fuzz build does not). Unset: make_file_dependencies.
  std::function<inventory::registry_deps(const serve_config&)> dependencies;
};

// Exit status: 0 after a clean shutdown, 1 when the server could not start, 2 for
// unusable credentials (a configuration problem).
int serve(serve_config cfg, const serve_hooks& hooks = {});

// Applies --port/--address/--threads/--health-port overrides; errc::invalid_argument naming
// the option it could not apply.
core::result<void> apply_overrides(serve_config& cfg, std::span<const std::string_view> args);

}  // namespace topogate::server

#pragma once
// Runs a configured server to completion; shared by `serve` and `demo`.

#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "core/result.hpp"
#include "inventory/registry.hpp"
#include "server/config.hpp"

namespace topogate::server {

class audit_source;
class ownership_watch;
class cluster_lister;
class token_reviewer;

struct serve_hooks {
  // Called once the listeners accept connections, with the bound TLS port.
  std::function<void(unsigned short port)> on_listening;
  // The Kubernetes-backed parts are built by the composition root (cli/serve.cpp) on kube/'s
  // client, which `topogate` links and server/ and the fuzz build do not.
  // Builds the registry's stores and Node watch (inventory/kube.hpp's make_dependencies).
  // Unset: make_file_dependencies.
  std::function<inventory::registry_deps(const serve_config&)> dependencies;
  // Builds the periodic audit's source when audit.enabled (cli/audit_kube.hpp).
  // Unset: audit.enabled stops the start.
  std::function<core::result<std::unique_ptr<audit_source>>(const serve_config&)> make_audit_source;
  // Builds the admission ownership view when admission.ownershipCheck.enabled
  // (ownership_view.hpp's loop on cli/ownership_kube.hpp's lister). Unset: that setting stops
  // the start.
  std::function<core::result<std::unique_ptr<ownership_watch>>(const serve_config&)>
      make_ownership_view;
  // Builds the token reviewer of metrics.auth: kubernetes (cli/metrics_auth_kube.hpp).
  // Unset: that mode stops the start.
  std::function<core::result<std::unique_ptr<token_reviewer>>(const serve_config&)>
      make_token_reviewer;
  // Builds the lister of a dry run's Workload answer when an inventory has workloadImpact
  // (cli/serve.cpp, on cli/diagnose_kube.hpp). Unset: that setting stops the start.
  std::function<core::result<std::unique_ptr<cluster_lister>>(const serve_config&)>
      make_cluster_lister;
};

// Exit status: 0 after a clean shutdown, 1 when the server could not start, 2 for
// unusable credentials (a configuration problem).
int serve(serve_config cfg, const serve_hooks& hooks = {});

// Applies --port/--address/--threads/--health-port overrides; errc::invalid_argument naming
// the option it could not apply.
core::result<void> apply_overrides(serve_config& cfg, std::span<const std::string_view> args);

}  // namespace topogate::server

// topogate serve --config FILE [--port N] [--address A] [--threads N] [--health-port N]
#include "server/serve.hpp"

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "cli/audit_kube.hpp"
#include "cli/commands.hpp"
#include "cli/diagnose_kube.hpp"
#include "cli/metrics_auth_kube.hpp"
#include "cli/ownership_kube.hpp"
#include "inventory/kube.hpp"
#include "server/audit_loop.hpp"
#include "server/config.hpp"
#include "server/log.hpp"
#include "server/metrics_auth.hpp"
#include "server/ownership_view.hpp"

namespace topogate::cli {

// The stores and the Node watch the configuration asks for, Kubernetes ones included.
inventory::registry_deps serve_dependencies(const server::serve_config& cfg) {
  const auto& invs = cfg.registry.inventories;
  const bool watch_nodes =
      std::any_of(invs.begin(), invs.end(), [](const auto& i) { return i.nodes_from_api; });
  return inventory::make_dependencies(cfg.registry.store, watch_nodes,
                                      [](std::string_view level, std::string_view msg) {
                                        const auto l = level == "error"   ? server::log_level::error
                                                       : level == "warn"  ? server::log_level::warn
                                                       : level == "debug" ? server::log_level::debug
                                                                          : server::log_level::info;
                                        server::log(l, msg, {{"component", "inventory"}});
                                      });
}

int run_serve(args a) {
  std::string config_path;
  std::vector<std::string_view> overrides;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (a[i] == "--config" && i + 1 < a.size()) {
      config_path = std::string(a[++i]);
    } else if (a[i].starts_with("--config=")) {
      config_path = std::string(a[i].substr(9));
    } else {
      overrides.push_back(a[i]);
    }
  }
  if (config_path.empty()) {
    std::fputs(
        "usage: topogate serve --config FILE [--port N] [--address ADDR] [--threads N] "
        "[--health-port N]\n",
        stderr);
    return 2;
  }
  auto cfg = server::load_serve_config(config_path);
  if (!cfg) {
    std::fprintf(stderr, "topogate: %s\n", cfg.error().message.c_str());
    return 2;
  }
  if (const auto applied = server::apply_overrides(*cfg, overrides); !applied) {
    std::fprintf(stderr, "topogate serve: %s\n", applied.error().message.c_str());
    return 2;
  }
  // The composition root: the server's Kubernetes-backed parts, on kube/'s client, all on the
  // API the store's settings name (store.apiServer, tokenFile, caFile; else in-cluster).
  server::serve_hooks hooks;
  hooks.dependencies = serve_dependencies;
  hooks.make_audit_source = [](const server::serve_config& c) {
    return make_kube_audit_source(inventory::api_access(c.registry.store), c.audit,
                                  c.admission.validation);
  };
  hooks.make_ownership_view =
      [](const server::serve_config& c) -> core::result<std::unique_ptr<server::ownership_watch>> {
    auto lister =
        make_kube_ownership_lister(inventory::api_access(c.registry.store), c.ownership_check);
    if (!lister) return std::move(lister).error();
    return std::unique_ptr<server::ownership_watch>(
        std::make_unique<server::ownership_view_loop>(c.ownership_check, std::move(*lister)));
  };
  hooks.make_cluster_lister = [](const server::serve_config& c) {
    return make_kube_cluster_lister(inventory::api_access(c.registry.store));
  };
  hooks.make_token_reviewer = [](const server::serve_config& c) {
    return make_kube_token_reviewer(inventory::api_access(c.registry.store), c.metrics.audiences);
  };
  return server::serve(std::move(*cfg), hooks);
}

}  // namespace topogate::cli

#pragma once
// The inventory's parts on the Kubernetes API: the revision store (one ConfigMap per
// inventory) and the Node list/watch, built by whoever runs the registry (serve) and handed to
// it (registry_deps). Their own library, topogate_inventory_kube, on kube/'s client: the
// registry (topogate_inventory) and a build without the client (the fuzz targets) link none
// of it.

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "core/nodes.hpp"
#include "core/result.hpp"
#include "inventory/registry.hpp"
#include "inventory/store.hpp"
#include "kube/endpoint.hpp"

namespace topogate::inventory {

using log_fn = std::function<void(std::string_view level, std::string_view message)>;

// Where the API is, as store.apiServer, tokenFile and caFile say (empty: in-cluster); the
// audit, the ownership view and metrics.auth reach the same API.
[[nodiscard]] kube::api_access api_access(const store_config& cfg);

// One ConfigMap `topogate-<inventory>` per inventory in the namespace, written with
// optimistic concurrency on metadata.resourceVersion and watched. Fails with
// errc::invalid_argument when the configuration does not say where the API is.
core::result<std::unique_ptr<revision_store>> make_kube_store(const store_config& cfg, log_fn log);
// Every Node's name and labels, listed and watched as metadata.
core::result<std::unique_ptr<node_watch>> make_node_watch(const store_config& cfg, log_fn log);

// Everything `cfg` asks for: the file or kubernetes store, and a Node watch when
// `watch_nodes` (some inventory lists Nodes through the API). What cannot be built is left
// null with its error, which the registry reports (pushes refused, a log line).
registry_deps make_dependencies(const store_config& cfg, bool watch_nodes, const log_fn& log);

}  // namespace topogate::inventory

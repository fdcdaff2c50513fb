#pragma once
// Where inventory outcomes become HTTP: the status code, the Kubernetes Status body, the
// ETag and Retry-After headers of every push answer, and the 404 of an unknown inventory.
// The registry decides what happened (inventory/registry.hpp's push_outcome); this decides
// only how it is said.

#include <string_view>

#include "inventory/registry.hpp"
#include "server/router.hpp"

namespace topogate::server {

// The answer to PUT /snapshots/{name}.
// `workloads`: a dry run's Workload answer (a JSON value), added to a 200 or 409 as
// "workloads" when not empty.
[[nodiscard]] response push_response(const inventory::push_result& r, std::string_view name,
                                     std::string_view workloads = {});
// 404 with a Kubernetes Status naming the inventory (status and history of an unknown one).
[[nodiscard]] response inventory_not_found(std::string_view name);
// An error about one inventory: a Status whose details name it (kind Snapshot, group
// topology.gpustack.ai), as every push answer's does.
[[nodiscard]] response inventory_failure(http::status status, std::string_view message,
                                         std::string_view name);

}  // namespace topogate::server

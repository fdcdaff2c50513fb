#pragma once
// The TopologySource the snapshot targets validate against: the runbook's data-center
// levels plus an additionalWritePrefix, so S4, S5 and S8/S9 are all reachable.
#include <string_view>

#include "core/topology_source.hpp"
#include "fuzz_common.hpp"

namespace topogate::fuzz {

inline const core::topology_source& fuzz_source() {
  static const core::topology_source source = [] {
    constexpr std::string_view text = R"(apiVersion: worker.gpustack.ai/v1
kind: TopologySource
metadata: {name: data-center}
spec:
  levels: [topology.kubernetes.io/region, topology.gpustack.ai/zone, topology.gpustack.ai/rack, example.com/pod]
  additionalWritePrefix: example.com/
  webhook:
    url: https://inventory.example/snapshot
    pollInterval: 1m
    timeout: 10s
    maxStaleness: 10m
    bearerTokenSecretRef: {namespace: gpustack-system, name: inventory-token}
)";
    auto r = core::validate_topology_source_text(text);
    check(r.ok(), "the fuzz TopologySource is valid", core::render_text(r.errors));
    return r.source;
  }();
  return source;
}

}  // namespace topogate::fuzz

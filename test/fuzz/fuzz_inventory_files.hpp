#pragma once
// The inventory the server-side targets (fuzz_http, fuzz_session) serve: a configMap
// TopologySource with the runbook's data-center levels, and a one-Node snapshot for it.
#include <string_view>

namespace topogate::fuzz {

constexpr std::string_view inventory_source_yaml = R"(apiVersion: worker.gpustack.ai/v1
kind: TopologySource
metadata: {name: data-center}
spec:
  levels: [topology.gpustack.ai/region, topology.gpustack.ai/zone, topology.gpustack.ai/rack]
  configMap:
    configMapRef: {namespace: gpustack-system, name: topology-inventory}
    key: snapshot.yaml
    maxStaleness: 10m
)";

constexpr std::string_view inventory_snapshot_yaml = R"(apiVersion: topology.gpustack.ai/v1alpha1
revision: inventory-42
nodes:
  worker-a: {topology.gpustack.ai/region: region-a, topology.gpustack.ai/zone: zone-a, topology.gpustack.ai/rack: rack-01}
)";

}  // namespace topogate::fuzz

#pragma once

// The data-center inventory the snapshot benchmarks and the instruction guard measure:
// the runbook's configMap TopologySource (region/zone/rack), and a snapshot of as many
// Nodes as fit in S10's 1 MiB, spread round-robin over 4 regions x 4 zones x 16 racks
// (every rack in one zone, every zone in one region).

#include <cstddef>
#include <cstdio>
#include <string>

#include "core/snapshot.hpp"

namespace topogate::bench {

inline constexpr const char* data_center_source = R"(apiVersion: worker.gpustack.ai/v1
kind: TopologySource
metadata:
  name: data-center
spec:
  nodeSelector: {}
  levels:
    - topology.gpustack.ai/region
    - topology.gpustack.ai/zone
    - topology.gpustack.ai/rack
  configMap:
    configMapRef:
      namespace: gpustack-system
      name: topology-inventory
    key: snapshot.yaml
    maxStaleness: 10m
)";

// printf formats (one %zu each) for the Node name and the three label values; fixed-width
// formats make every Node render to the same number of bytes.
struct node_names {
  const char* node;
  const char* region;
  const char* zone;
  const char* rack;
};

// Appends Nodes to `snap` while `render(snap)` stays within S10's limit: the most Nodes
// that fit.
template <class Render>
void fill_round_robin(core::snapshot& snap, const node_names& f, Render render) {
  auto add = [&](std::size_t i) {
    const std::size_t rack = i % 256, zone = rack / 16, region = zone / 4;
    char name[32], r[32], z[32], k[32];
    std::snprintf(name, sizeof name, f.node, i);
    std::snprintf(r, sizeof r, f.region, region);
    std::snprintf(z, sizeof z, f.zone, zone);
    std::snprintf(k, sizeof k, f.rack, rack);
    snap.nodes.push_back({name,
                          {{"topology.gpustack.ai/region", r},
                           {"topology.gpustack.ai/zone", z},
                           {"topology.gpustack.ai/rack", k}}});
  };
  const std::size_t first = snap.nodes.size();
  add(first);
  const std::size_t one = render(snap).size();
  add(first + 1);
  const std::size_t per = render(snap).size() - one;
  // Rendering ~1 MiB per step would be slow: extrapolate, then trim to the exact limit.
  for (std::size_t i = first + 2; one + (i - first) * per <= core::max_snapshot_bytes; ++i) add(i);
  while (render(snap).size() > core::max_snapshot_bytes) snap.nodes.pop_back();
}

// A Node's watch object as the metadata-only watch receives it: the ~20 labels cloud GPU Nodes
// carry, three topology levels (rack = i / 16), and a heartbeat label no rule reads; `group`
// is its node-group label (the scale benchmark's nodeSelector key).
// `rack`, when given, replaces the Node's topology.gpustack.ai/rack value.
inline std::string node_json(std::size_t i, std::size_t beat, const char* group = "gpu",
                             const char* rack = nullptr) {
  char name[32];
  std::snprintf(name, sizeof name, "gpu-%05zu", i);
  const char zone = "abcd"[i % 4];
  std::string out =
      R"({"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":{"name":")";
  out += name;
  out += R"(","resourceVersion":")" + std::to_string(1000 + beat) + R"(","labels":{)";
  out += R"("kubernetes.io/hostname":")" + std::string(name) + R"(","kubernetes.io/os":"linux",)";
  out += R"("kubernetes.io/arch":"amd64","node.kubernetes.io/instance-type":"p5.48xlarge",)";
  out += R"("topology.kubernetes.io/region":"us-east-1","topology.kubernetes.io/zone":"us-east-1)";
  out += zone;
  out += R"(","eks.amazonaws.com/nodegroup":"gpu-ng-)" + std::to_string(i % 8) + R"(",)";
  out +=
      R"("eks.amazonaws.com/capacityType":"ON_DEMAND","karpenter.sh/capacity-type":"on-demand",)";
  out += R"("nvidia.com/gpu.present":"true","nvidia.com/gpu.product":"NVIDIA-H100-80GB-HBM3",)";
  out += R"("nvidia.com/gpu.count":"8","nvidia.com/gpu.memory":"81559",)";
  out += R"("feature.node.kubernetes.io/cpu-model.vendor_id":"AMD",)";
  out += R"("feature.node.kubernetes.io/pci-10de.present":"true",)";
  out += R"("topology.gpustack.ai/region":"region-a","topology.gpustack.ai/zone":"zone-)";
  out += std::to_string(i / 64 % 4) + R"(","topology.gpustack.ai/rack":")" +
         (rack != nullptr ? std::string(rack) : "rack-" + std::to_string(i / 16)) + R"(",)";
  out += R"("node-group":")" + std::string(group) + R"(",)";
  out += R"("example.com/heartbeat":")" + std::to_string(beat) + R"("}}})";
  return out;
}

}  // namespace topogate::bench

#pragma once

// The cluster the Node-change benchmark and its instruction-count driver measure: N Nodes as
// the metadata-only watch receives them (bench/corpus.hpp's node_json), kept in a node_view
// as the registry keeps them, and one inventory (nodeSelector node-group=gpu, unknown Nodes
// pruned) that accepted a snapshot of the first min(N, 7000) of them.

#include <simdjson.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "bench/corpus.hpp"
#include "core/nodes.hpp"
#include "core/topology_source.hpp"
#include "inventory/inventory.hpp"
#include "inventory/node_view.hpp"

namespace topogate::bench {

inline constexpr const char* selected_source = R"(apiVersion: worker.gpustack.ai/v1alpha1
kind: TopologySource
metadata: {name: dc}
spec:
  levels: [topology.gpustack.ai/region, topology.gpustack.ai/zone, topology.gpustack.ai/rack]
  nodeSelector: {matchLabels: {node-group: gpu}}
  configMap:
    configMapRef: {namespace: gpustack-system, name: topology-inventory}
    key: snapshot.yaml
    maxStaleness: 10m
)";

inline constexpr std::size_t snapshot_nodes = 7000;

struct cluster {
  topogate::core::topology_source source;
  topogate::inventory::detail::node_view view;
  simdjson::dom::parser parser;

  explicit cluster(std::size_t n)
      : source(topogate::core::validate_topology_source_text(selected_source).source),
        view([this](std::string_view key) {
          return topogate::core::reads_node_label(source, key);
        }) {
    for (std::size_t i = 0; i < n; ++i) {
      simdjson::dom::element node;
      const auto json = node_json(i, 0);
      if (parser.parse(json).get(node)) std::abort();
      view.add_listed(node);
    }
    view.finish_list();
  }
  cluster(const cluster&) = delete;  // the view's filter refers to this source
  cluster& operator=(const cluster&) = delete;

  // Node i's node-group label set to `group`: true when the view changed.
  bool set_group(std::size_t i, const char* group) {
    simdjson::dom::element node;
    const auto json = node_json(i, 1, group);
    if (parser.parse(json).get(node)) std::abort();
    return view.apply("MODIFIED", node);
  }

  // Node i's topology.gpustack.ai/rack label set to `rack` (what a consumer projecting the
  // next revision writes; the served one decides a rack from the snapshot): true when the
  // view changed.
  bool set_rack(std::size_t i, const char* rack) {
    simdjson::dom::element node;
    const auto json = node_json(i, 1, "gpu", rack);
    if (parser.parse(json).get(node)) std::abort();
    return view.apply("MODIFIED", node);
  }
  // The inventory, given the view's list, with the snapshot accepted; null if refused.
  [[nodiscard]] std::unique_ptr<topogate::inventory::inventory> make_inventory();
};

// The snapshot the inventory accepted: the first min(N, 7000) Nodes, labelled as they are.
inline std::string snapshot_json(std::size_t n) {
  std::string out = R"({"apiVersion":"topology.gpustack.ai/v1alpha1","revision":"scale","nodes":{)";
  for (std::size_t i = 0; i < std::min(n, snapshot_nodes); ++i) {
    char name[32];
    std::snprintf(name, sizeof name, "gpu-%05zu", i);
    if (i) out += ',';
    out += '"' + std::string(name) + R"(":{"topology.gpustack.ai/region":"region-a",)";
    out += R"("topology.gpustack.ai/zone":"zone-)" + std::to_string(i / 64 % 4) + R"(",)";
    out += R"("topology.gpustack.ai/rack":"rack-)" + std::to_string(i / 16) + R"("})";
  }
  return out + "}}";
}

inline std::unique_ptr<topogate::inventory::inventory> cluster::make_inventory() {
  topogate::inventory::inventory_config cfg;
  cfg.name = "dc";
  cfg.source = source;
  cfg.unknown_nodes = topogate::inventory::unknown_nodes_policy::prune;
  auto inv = std::make_unique<topogate::inventory::inventory>(cfg);
  inv->set_nodes(view.take());
  topogate::inventory::inventory::offer_options push;
  push.origin = "push";
  const std::size_t n = view.size();
  if (!inv->offer(snapshot_json(n), push).accepted) return nullptr;
  return inv;
}

}  // namespace topogate::bench

#pragma once
// Ownership conflicts between writing TopologySources, as the consumer decides them: two
// sources that publish (configMap or webhook) conflict when their levels share a key and
// the other's nodeSelector selects one of the Nodes this one selects. The consumer then
// publishes neither (each is Ready=False with reason OwnershipConflict, its NodeFeatures
// removed), so a valid snapshot reaches no Node. nodeLabels sources never conflict.

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "topology_source.hpp"

namespace topogate::core {

// A TopologySource as the check needs it (views: the caller keeps the strings alive).
struct ownership_source {
  std::string_view name;
  const std::vector<std::string>* levels = nullptr;
  const label_selector* selector = nullptr;  // nullptr: selects every Node
  bool writes = false;                       // spec.configMap or spec.webhook
};

// The same with its own strings, as read from a TopologySource object.
struct owned_source {
  std::string namespace_, name;  // namespace_: empty for the cluster-scoped kind
  std::vector<std::string> levels;
  std::optional<label_selector> selector;  // nullopt: selects every Node
  bool writes = false;
  [[nodiscard]] ownership_source view() const {
    return {name, &levels, selector ? &*selector : nullptr, writes};
  }
};

// The parts of TopologySource `object` a conflict depends on; nullopt when its spec is not a
// mapping or its nodeSelector is invalid (the consumer cannot use it either).
[[nodiscard]] std::optional<owned_source> read_ownership_source(const doc_node& object);

struct ownership_node {
  std::string_view name;
  const std::vector<std::pair<std::string, std::string>>* labels = nullptr;
};

struct ownership_conflict {
  std::string first, second;        // the two sources, first < second
  std::vector<std::string> levels;  // the levels both list, in first's order
  std::vector<std::string> nodes;   // the Nodes both select, sorted
};

// Every conflicting pair of writing sources among `sources`, over `nodes`, sorted by
// (first, second). A pair whose selectors share no Node of `nodes` does not conflict.
[[nodiscard]] std::vector<ownership_conflict> find_ownership_conflicts(
    const std::vector<ownership_source>& sources, const std::vector<ownership_node>& nodes);

// "writing sources a and b both list topology.gpustack.ai/rack and select 3 Nodes (n1, n2,
// n3): the consumer publishes neither (Ready=False, OwnershipConflict)".
[[nodiscard]] std::string describe(const ownership_conflict& c);

}  // namespace topogate::core

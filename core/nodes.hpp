#pragma once
// The cluster's Nodes, as `kubectl get nodes -o json` prints them (a v1 List of Node).

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "field_error.hpp"
#include "topology_source.hpp"

namespace topogate::core {

struct cluster_node {
  std::string name;
  std::vector<std::pair<std::string, std::string>> labels;  // sorted by key
  [[nodiscard]] const std::string* label(std::string_view key) const noexcept;
};

struct node_list {
  std::vector<cluster_node> nodes;  // sorted by name, unique
  [[nodiscard]] const cluster_node* find(std::string_view name) const noexcept;
};

struct node_list_result {
  node_list list;
  error_list errors;
  [[nodiscard]] bool ok() const noexcept { return errors.empty(); }
};

// Accepts a v1 List (or NodeList) of Node objects in JSON or YAML.
node_list_result parse_node_list(std::string_view text);

// The Nodes the source selects (spec.nodeSelector; absent or {} selects every Node).
node_list select_nodes(const node_list& all, const topology_source& src);

// Whether any rule reads a Node's label `key` for `src`: its levels (profiles, S7-S9, the
// impact), its nodeSelector's keys, the profile label, and the read-only parents S6
// compares. A change to any other label of a Node changes no verdict, no served revision
// and no impact, so a Node view may keep only these (and a Node's name).
[[nodiscard]] bool reads_node_label(const topology_source& src, std::string_view key) noexcept;

}  // namespace topogate::core

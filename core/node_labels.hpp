#pragma once
// Node-label hierarchies (TopologySources with `nodeLabels`): the snapshot hierarchy rules
// S7-S9 applied to the labels the selected Nodes already carry, plus what the consumer
// would derive from them (per-level domains and each Node's profile).
//
// A nodeLabels source never publishes, so there is no snapshot to reject: these checks
// tell an administrator, before the consumer does, that the declared levels are not a real
// nested hierarchy on this cluster (a child value under two parents, two independent
// dimensions listed as if nested, a Node carrying a child level without its parent).

#include <cstddef>
#include <string>
#include <vector>

#include "field_error.hpp"
#include "nodes.hpp"
#include "topology_source.hpp"

namespace topogate::core {

struct level_domain {
  std::string value;
  std::size_t nodes = 0;  // selected Nodes carrying this value
};

// How the Nodes' values of one level sit under the values of the level before it.
enum class nesting {
  root,         // the first level: no parent to sit under
  nested,       // every value under exactly one parent tuple
  conflicting,  // a few values under two or more parent tuples (mislabelled Nodes)
  independent,  // most values under several parents: two dimensions, not a hierarchy
};
[[nodiscard]] std::string_view to_string(nesting n) noexcept;

struct level_summary {
  std::string key;
  std::size_t nodes = 0;              // selected Nodes carrying the level
  std::vector<level_domain> domains;  // sorted by value
  nesting verdict = nesting::root;
  std::size_t conflicting_values = 0;  // values seen under more than one parent tuple
};

// One child value seen under more than one ancestor tuple (S9).
struct parent_conflict {
  std::string level;
  std::string value;
  struct placement {
    std::string parents;             // "{topology.kubernetes.io/zone=a}"
    std::vector<std::string> nodes;  // sorted by name
  };
  std::vector<placement> placements;  // first: the tuple of the smallest Node name
};

struct node_profile_entry {
  std::string node;
  std::string profile_id;
  std::size_t depth = 0;  // declared levels in the profile (kubernetes.io/hostname not counted)
};

struct profile_summary {
  std::string id;
  std::vector<std::string> levels;  // ends with kubernetes.io/hostname
  std::size_t nodes = 0;
};

struct node_label_report {
  error_list errors;  // S7, S8, S9, every one
  std::size_t total_nodes = 0;
  std::size_t selected_nodes = 0;
  std::vector<level_summary> levels;  // in the consumer's normalized order (normalize_levels)
  std::vector<parent_conflict> conflicts;
  std::vector<node_profile_entry> nodes;  // selected Nodes, sorted by name
  std::vector<profile_summary> profiles;  // sorted by depth (deepest first), then id
  [[nodiscard]] bool ok() const noexcept { return errors.empty(); }
};

// The hierarchy checks over the Nodes `src` selects from `all` (Nodes outside
// spec.nodeSelector are not looked at). Works for any source; it is what the consumer
// relies on for a nodeLabels source.
// The levels are taken in the consumer's normalized order (tier runs as for profiles), and an
// empty Node label value counts as absent, as the consumer reads it.
//  - S7 a level's value is not a label value;
//  - S8 a Node carries a level without every level before it (in that order);
//  - S9 a value sits under two different ancestor tuples (paths and messages as for
//    snapshots), and `spec.levels[i]` when most values of level i sit under several values
//    of level i-1 (two independent dimensions listed as if nested).
[[nodiscard]] node_label_report check_node_labels(const topology_source& src, const node_list& all);

// {"valid","totalNodes","selectedNodes","levels":[...],"conflicts":[...],"profiles":[...],
//  "nodes":[...],"errors":[...]} (errors as render_json).
[[nodiscard]] std::string render_node_label_report_json(const node_label_report& r);
// Human tables: per level the domains and Node counts, conflicts, profiles, Nodes.
[[nodiscard]] std::string render_node_label_report_text(const node_label_report& r);

}  // namespace topogate::core

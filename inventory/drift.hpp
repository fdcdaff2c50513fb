#pragma once
// Label drift: the Nodes whose labels differ from what the served revision tells the consumer
// to write on them. The consumer writes each described Node's private topology labels (its
// levels under topology.gpustack.ai/ or the source's additionalWritePrefix, through NFD) and
// every managed Node's topology.gpustack.ai/profile, and does not watch the Nodes afterwards:
// a label NFD never applied, or one a controller overwrote, stays wrong. The registry checks
// this periodically and counts a Node once it stayed drifted for the grace period
// (docs/inventory.md, "Label drift").

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/nodes.hpp"
#include "core/profile_impact.hpp"
#include "core/snapshot.hpp"
#include "core/topology_source.hpp"
#include "inventory/inventory.hpp"

namespace topogate::inventory {

struct label_drift {
  std::string key;
  std::string want;      // what the revision says
  std::string have;      // the Node's value ("" when absent)
  bool present = false;  // whether the Node has the label at all
};

struct node_drift {
  std::string node;
  std::vector<label_drift> labels;  // by key
};

// The served Nodes of `rev` (its accepted snapshot `accepted`, less rev's pruned Nodes) and its
// managed Nodes (rev.profiles) whose labels in `nodes` differ, by Node name. Only the keys a
// Node view keeps are compared (core::reads_node_label: the levels and the profile label);
// the standard keys (read-only parents) are not written by the consumer and S6 already holds
// them equal.
[[nodiscard]] std::vector<node_drift> find_drift(const core::topology_source& src,
                                                 const revision& rev,
                                                 const core::snapshot& accepted,
                                                 const core::node_list& nodes);

// What one check compared: enough to tell which Nodes a later check must compare again.
struct drift_basis {
  std::shared_ptr<const core::snapshot> accepted;  // the revision's (accepted_decoded)
  bool accepted_sorted = false;                    // its Nodes listed by name
  std::vector<std::string> pruned;                 // the revision's pruned Nodes
  std::shared_ptr<const core::profile_assignment> profiles;
  std::shared_ptr<const core::node_list> nodes;
};
[[nodiscard]] drift_basis basis_of(const revision& rev,
                                   std::shared_ptr<const core::node_list> nodes);

// The names of the Nodes whose drift may differ between a check of `before` and one of `rev`
// and `nodes` (sorted, unique): added to, removed from or relabelled in the list, pruned in
// one revision and not the other, or given another profile. Node lists and profile
// assignments that share chunks are compared only where they do not. nullopt when the
// accepted snapshots differ (or are not listed by name): every Node is compared again.
[[nodiscard]] std::optional<std::vector<std::string>> drift_changes(const drift_basis& before,
                                                                    const revision& rev,
                                                                    const core::node_list& nodes);

// find_drift(src, rev, accepted, nodes) from `before`, what find_drift gave for an earlier
// check, and `changed`, drift_changes' names since it: only those Nodes are compared again.
// `accepted` lists its Nodes by name.
[[nodiscard]] std::vector<node_drift> refind_drift(const core::topology_source& src,
                                                   const revision& rev,
                                                   const core::snapshot& accepted,
                                                   const core::node_list& nodes,
                                                   std::vector<node_drift> before,
                                                   const std::vector<std::string>& changed);

// The drift of one inventory as last checked.
struct drift_report {
  std::chrono::system_clock::time_point checked_at;
  std::chrono::seconds grace{0};
  std::size_t mismatched = 0;  // Nodes whose labels differ now, within the grace or past it
  std::size_t drifted = 0;     // of those, the Nodes that differ for at least the grace
  struct entry {
    node_drift drift;
    std::chrono::system_clock::time_point since;  // first seen differing as it does now
  };
  std::vector<entry> nodes;  // the drifted ones, by name, at most max_listed
  static constexpr std::size_t max_listed = 100;
};

// Keeps, across checks, when each Node started to differ as it does; a Node whose wanted
// labels or own labels change starts again.
class drift_tracker {
 public:
  // Records a check made at `now`; returns the report.
  std::shared_ptr<const drift_report> update(const std::vector<node_drift>& found,
                                             std::chrono::system_clock::time_point now,
                                             std::chrono::seconds grace);
  // The same when `found` differs from what the last update was given only at the Nodes
  // named in `changed` (sorted, unique; refind_drift's): only their signatures are built.
  std::shared_ptr<const drift_report> update(const std::vector<node_drift>& found,
                                             const std::vector<std::string>& changed,
                                             std::chrono::system_clock::time_point now,
                                             std::chrono::seconds grace);
  // The report of a check at `now` that found what the last update was given (`found`, by
  // name, as find_drift lists it): the same as update(found, now, grace), without building
  // a signature or storing anything (a check between changes, when every Node may differ).
  std::shared_ptr<const drift_report> age(const std::vector<node_drift>& found,
                                          std::chrono::system_clock::time_point now,
                                          std::chrono::seconds grace) const;
  void clear() { since_.clear(); }

 private:
  // The differing keys, wanted and found values of one Node, as two 64-bit hashes of their
  // text (128 bits: two different drifts of a Node are not taken for one another in practice),
  // so that a Node that differs costs the tracker a few words, not a copy of its drift.
  using signature = std::array<std::uint64_t, 2>;
  struct seen {
    signature sig{};
    std::chrono::system_clock::time_point since;
  };
  [[nodiscard]] static signature signature_of(const node_drift& d);
  std::map<std::string, seen, std::less<>> since_;
};

}  // namespace topogate::inventory

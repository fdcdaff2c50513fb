#pragma once
// Profile-change impact of a new revision: which Nodes change topology.gpustack.ai/profile,
// which profiles appear and disappear, and what the consumer does about it (the runbook's
// "Change a live hierarchy"). A profile is one ResourceFlavor and one Topology on the
// consumer's side, so a profile appearing or disappearing changes the managed ClusterQueue's
// flavor set, which GPUStack migrates by draining the queue.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "nodes.hpp"
#include "snapshot.hpp"
#include "topology_source.hpp"

namespace topogate::core {

struct assigned_profile {
  std::string id;                   // fnv64-xxxxxxxxxxxxxxxx (core/profile.hpp)
  std::vector<std::string> levels;  // ends with kubernetes.io/hostname
  std::size_t nodes = 0;            // Nodes assigned this profile
};

struct node_assignment {
  node_name node;             // shared with the Node list's entry when it has the Node
  std::uint32_t profile = 0;  // index into profile_assignment::profiles
  // One value per level of the profile, kubernetes.io/hostname excluded; shared by the
  // copies (an assignment updated for a few Nodes copies their chunks, and a profile
  // appearing or disappearing renumbers every entry).
  std::shared_ptr<const std::vector<std::string>> level_values;
  [[nodiscard]] const std::vector<std::string>& values() const noexcept;
};

// node -> profile for one revision.
struct profile_assignment {
  std::vector<assigned_profile>
      profiles;  // only profiles in use, by depth (deepest first), then id
  // Sorted by node name, unique; copies share chunks, and update_profiles copies only those
  // of the updated Nodes.
  chunked_vector<node_assignment> nodes;
  [[nodiscard]] const assigned_profile& profile_of(const node_assignment& n) const {
    return profiles[n.profile];
  }
  [[nodiscard]] const node_assignment* find(std::string_view node) const noexcept;
};

// The profiles the consumer derives once `snap` is projected onto the Nodes `selected` (the
// Nodes the source selects; null when unknown). A level key the source may write
// (topology.gpustack.ai/* and additionalWritePrefix) takes its value from the snapshot only:
// the Node's current value is what the previous revision projected and is about to be
// replaced. Any other key (the read-only topology.kubernetes.io/region and zone) is read from
// the snapshot when it carries it, else from the Node. A selected Node the snapshot does not
// describe is still managed and still gets a profile (usually kubernetes.io/hostname only).
// `snap` may be null (a nodeLabels source: every level is read from the Nodes).
[[nodiscard]] profile_assignment assign_profiles(const topology_source& src, const snapshot* snap,
                                                 const node_list* selected);

// One Node whose assignment is decided again: the snapshot's entry for it (the served
// snapshot's, null when it does not describe the Node) and the selected Node (null when it
// is not selected). Both null: the Node is no longer managed.
struct profile_update {
  std::string_view node;
  const snapshot_node* described = nullptr;
  const cluster_node* cluster = nullptr;
};

// assign_profiles(src, snap, selected) for a snapshot and Node list that differ from the
// ones `before` was assigned from only at `updates` (sorted by node, unique): the other
// Nodes keep their entries, the table of profiles follows the counts. Equal to assigning
// them all again; costs a copy of the entries, not a look at every Node's labels, and
// nothing when no update changes an entry (`before` itself is returned).
[[nodiscard]] std::shared_ptr<const profile_assignment> update_profiles(
    const topology_source& src, const std::shared_ptr<const profile_assignment>& before,
    const std::vector<profile_update>& updates);

struct profile_change {
  std::string node;
  std::string from;  // profile id; empty when the Node was not assigned before
  std::string to;    // profile id; empty when the Node is no longer assigned
};

// What an impact is measured against: the revision served before (the usual case), the
// profiles the Nodes carry in the cluster (a process's first revision when the Node list is
// known), or nothing (a first revision without a Node list: every Node is "added").
enum class impact_baseline { revision, node_labels, none };

struct profile_impact {
  impact_baseline baseline = impact_baseline::revision;
  std::size_t nodes_before = 0;
  std::size_t nodes_after = 0;
  std::size_t profiles_before = 0;
  std::size_t profiles_after = 0;
  // Counts are exact; the lists below keep at most `max_listed` entries each (a 10 000-Node
  // re-labelling must not turn into a multi-megabyte push response or history entry).
  std::size_t changed_count = 0;        // assigned before and after, different profile
  std::size_t added_count = 0;          // assigned after only
  std::size_t removed_count = 0;        // assigned before only
  std::vector<profile_change> changed;  // sorted by node
  std::vector<profile_change> added;
  std::vector<profile_change> removed;
  std::vector<assigned_profile> appeared;     // in use after only (nodes = after)
  std::vector<assigned_profile> disappeared;  // in use before only (nodes = before)
  std::vector<std::string> consequences;      // the runbook's steps that apply, in order

  // Nodes that lose the profile they had: changed + removed. A new Node drains nothing.
  [[nodiscard]] std::size_t profile_changes() const noexcept {
    return changed_count + removed_count;
  }
  // Profiles whose ResourceFlavor and Topology appear or go: the flavor set changes.
  [[nodiscard]] std::size_t flavor_changes() const noexcept {
    return appeared.size() + disappeared.size();
  }
  [[nodiscard]] bool empty() const noexcept {
    return changed_count == 0 && added_count == 0 && removed_count == 0 && appeared.empty() &&
           disappeared.empty();
  }
};

inline constexpr std::size_t default_max_listed_changes = 100;

// The profiles the cluster carries now: every Node of `nodes` with a non-empty
// topology.gpustack.ai/profile label gets that profile (its levels are unknown: empty). The
// baseline of a process's first revision when the Node list is known, so that a restart with a
// changed TopologySource (a new hierarchy: the chart restarts topogate on a configuration
// change) reports the Nodes whose profile the consumer will change, not every Node as added.
[[nodiscard]] profile_assignment profiles_from_node_labels(const node_list& nodes);

[[nodiscard]] profile_impact compute_profile_impact(
    const profile_assignment& before, const profile_assignment& after,
    std::size_t max_listed = default_max_listed_changes);

// {"empty":bool,"baseline":"revision"|"nodeLabels"|"none","nodesBefore":n,"nodesAfter":n,"profilesBefore":n,"profilesAfter":n,
//  "profileChanges":n,"changedNodes":{"count":n,"items":[{"node","from","to"}],"truncated":bool},
//  "addedNodes":{...},"removedNodes":{...},"appearedProfiles":[{"id","levels","nodes"}],
//  "disappearedProfiles":[...],"consequences":["..."]}
// `max_items` shortens the Node lists further (history entries); counts stay exact.
[[nodiscard]] std::string render_impact_json(const profile_impact& impact,
                                             std::size_t max_items = default_max_listed_changes);
// A few lines for logs, history notes and terminals.
[[nodiscard]] std::string render_impact_text(const profile_impact& impact);
// One line: "4 Node(s) change profile, 0 added, 0 removed; profiles +1 -1".
[[nodiscard]] std::string summarize_impact(const profile_impact& impact);

}  // namespace topogate::core

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
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
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

// A digest of one Node's drift (its differing keys, wanted and found values): two 64-bit
// hashes of their text, 128 bits, so two different drifts of a Node are not taken for one
// another in practice.
using drift_signature = std::array<std::uint64_t, 2>;
[[nodiscard]] drift_signature signature_of(const node_drift& d);

// One Node that differs, as kept between checks: its name (shared with the Node list), a
// digest of how it differs, and since when it has differed so (unset until a tracker records
// it). A few words per Node, whatever its labels: the drift's text is built again, by
// describe_drift, only for the Nodes a report lists.
struct drift_mark {
  core::node_name node;
  drift_signature sig{};
  std::optional<std::chrono::system_clock::time_point> since;
};

// What one check compared: enough to tell which Nodes a later check must compare again, and
// to describe any Node's drift as that check found it.
struct drift_basis {
  std::shared_ptr<const core::snapshot> accepted;  // the revision's (accepted_decoded)
  bool accepted_sorted = false;                    // its Nodes listed by name
  std::vector<std::string> pruned;                 // the revision's pruned Nodes, sorted
  // accepted's Nodes less the pruned ones, by name (indices); set whenever `accepted` is
  std::shared_ptr<const std::vector<std::uint32_t>> served;
  std::shared_ptr<const core::profile_assignment> profiles;
  std::shared_ptr<const core::node_list> nodes;
};
// The basis of a check of `rev` and `nodes`. With `previous`, the basis of an earlier check:
// when it has the same accepted snapshot and pruned Nodes (a Node change that only moved
// profiles or labels the rules compare), its index of the served Nodes is shared, not built
// again.
[[nodiscard]] drift_basis basis_of(const revision& rev,
                                   std::shared_ptr<const core::node_list> nodes,
                                   const drift_basis* previous = nullptr);

// The names of the Nodes whose drift may differ between a check of `before` and one of `rev`
// and `nodes` (sorted, unique): added to, removed from or relabelled in the list, pruned in
// one revision and not the other, or given another profile. Node lists and profile
// assignments that share chunks are compared only where they do not. nullopt when the
// accepted snapshots differ (or are not listed by name): every Node is compared again.
[[nodiscard]] std::optional<std::vector<std::string>> drift_changes(const drift_basis& before,
                                                                    const revision& rev,
                                                                    const core::node_list& nodes);

// find_drift for the revision and list of `b`, as marks (by name, no `since`): one pass over
// the served and the managed Nodes.
[[nodiscard]] std::vector<drift_mark> find_drift_marks(const core::topology_source& src,
                                                       const drift_basis& b);
// The same from `before`, what an earlier check found (by name), and `changed`, drift_changes'
// names since it: only those Nodes are compared again. A Node compared again whose drift is
// the one it had keeps its `since`; the others keep their mark as it was.
[[nodiscard]] std::vector<drift_mark> refind_drift_marks(const core::topology_source& src,
                                                         const drift_basis& b,
                                                         std::vector<drift_mark> before,
                                                         const std::vector<std::string>& changed);
// One Node's drift for the revision and list of `b`: no labels when it does not differ (or is
// not in the list).
[[nodiscard]] node_drift describe_drift(const core::topology_source& src, const drift_basis& b,
                                        std::string_view name);

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

// Keeps, across checks, what each check found and when each Node started to differ as it
// does; a Node whose wanted labels or own labels change starts again.
class drift_tracker {
 public:
  // The drift of a Node a report lists (describe_drift's, for the check's basis).
  using describe_fn = std::function<node_drift(std::string_view name)>;

  // Records a check made at `now` that found `found` (by name, as find_drift_marks and
  // refind_drift_marks list them); returns the report. A mark without `since` takes the one
  // the last check recorded for the Node when its signature is the same, else `now`.
  std::shared_ptr<const drift_report> update(std::vector<drift_mark> found,
                                             std::chrono::system_clock::time_point now,
                                             std::chrono::seconds grace,
                                             const describe_fn& describe);
  // The report of a check at `now` that found what the last update recorded: nothing is
  // compared or stored (a check between changes).
  [[nodiscard]] std::shared_ptr<const drift_report> age(std::chrono::system_clock::time_point now,
                                                        std::chrono::seconds grace,
                                                        const describe_fn& describe) const;
  // What the last update recorded, for refind_drift_marks; the tracker holds nothing after.
  [[nodiscard]] std::vector<drift_mark> take_found() { return std::exchange(found_, {}); }
  [[nodiscard]] const std::vector<drift_mark>& found() const noexcept { return found_; }
  void clear() { found_.clear(); }

 private:
  std::vector<drift_mark> found_;  // by name, each with its since
};

}  // namespace topogate::inventory

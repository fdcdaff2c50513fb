#pragma once
// The ownership warning of a TopologySource review (docs/rules.md, "Ownership conflicts"): a
// writing source whose levels overlap an existing writing source's, and whose nodeSelector
// shares Nodes with it, is allowed with a warning naming the other source, the shared levels
// and the shared Nodes; the consumer will publish neither.
//
// The existing sources and Nodes come from a view of the cluster someone else keeps current
// (server/ownership_view.hpp lists them on a thread of its own): the review reads the view's
// latest snapshot and never waits for it. Without a snapshot no warning is given.

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/document.hpp"
#include "core/ownership.hpp"

namespace topogate::admission {

// The cluster as the view saw it last: immutable once published.
struct ownership_snapshot {
  std::vector<core::owned_source> sources;  // every TopologySource, writing or not
  // Every Node: name and labels (sorted by key).
  std::vector<std::pair<std::string, std::vector<std::pair<std::string, std::string>>>> nodes;
};

class ownership_view {
 public:
  virtual ~ownership_view() = default;
  // The latest snapshot, or nullptr while there is none (the API has not answered yet).
  // Must not block on anything but a pointer copy: it runs on the admission path.
  [[nodiscard]] virtual std::shared_ptr<const ownership_snapshot> current() const = 0;
};

// At most this many conflicts are named, one warning each; the rest are counted in one more.
inline constexpr std::size_t max_ownership_warnings = 5;

// The warnings for TopologySource `object` against `snap`: none when it does not write
// (nodeLabels), or overlaps no other writing source. The source in `snap` with the object's
// own namespace and name is its old version (an UPDATE) and is left out.
[[nodiscard]] std::vector<std::string> ownership_warnings(const ownership_snapshot& snap,
                                                          const core::doc_node& object);

// One conflict as a warning of at most max_warning_length bytes: "OwnershipConflict with
// TopologySource B, neither publishes: LEVELS on N Nodes (n1, n2, +M)", listing as many levels
// and Nodes as fit and counting the rest.
[[nodiscard]] std::string ownership_warning(std::string_view other,
                                            const std::vector<std::string>& levels,
                                            const std::vector<std::string>& nodes);

}  // namespace topogate::admission

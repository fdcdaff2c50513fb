#pragma once
// The cluster's Nodes as the Node watch keeps them: each Node's name and the labels some rule
// reads (node_watch::label_filter), fed by list pages and watch events, nothing else of a
// Node. No I/O: the watch (kube_store.cpp) feeds it, and so can a benchmark. What a change
// costs does not grow with the cluster: a lookup by name and a comparison of the kept labels.

#include <simdjson.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_set>
#include <utility>
#include <vector>

#include "core/nodes.hpp"
#include "inventory/store.hpp"

namespace topogate::inventory::detail {

class node_view {
 public:
  explicit node_view(node_watch::label_filter keep = {}) : keep_(std::move(keep)) {}

  // A (re)list: every page's Nodes go into a fresh map, which finish_list() then makes the
  // view (a failed list is dropped with discard_list(); the view stays as it was).
  void add_listed(simdjson::dom::element node);
  void finish_list();
  void discard_list() { listing_.clear(); }

  // One watch event of `type` ("ADDED", "MODIFIED", "DELETED"; anything else is ignored):
  // true when a Node appeared or left, or one of its kept labels changed.
  bool apply(std::string_view type, simdjson::dom::element node);

  // The view as a list: sorted by name, each Node's kept labels sorted by key.
  [[nodiscard]] core::node_list list() const;
  // The same as the registry takes it, once per coalescing window: named (node_list::id), and
  // naming the Nodes that changed since the list taken before (node_list::since, changed),
  // unless a relist came between or more changed than max(64, 1/16 of the Nodes): the
  // inventories then apply a change from those Nodes alone.
  // The view keeps the list it hands out, and builds the next one from it and the Nodes
  // named since.
  [[nodiscard]] std::shared_ptr<const core::node_list> take();
  [[nodiscard]] std::size_t size() const noexcept { return nodes_.size(); }
  // How many different sets of kept labels the view holds for its Nodes (and, until the next
  // sweep, for Nodes it no longer has).
  [[nodiscard]] std::size_t label_sets() const noexcept { return interned_.size(); }

 private:
  using labels = core::node_labels;  // shared with every list handed out
  [[nodiscard]] labels kept_labels(simdjson::dom::element node);
  // Nodes whose kept labels are the same share one vector of them (the Nodes of one zone or
  // rack: one), held by interned_ by content. A set no Node uses any more is dropped by the
  // sweep after each list and whenever the sets doubled since the last sweep.
  struct content_hash {
    using is_transparent = void;
    std::size_t operator()(const labels::storage& s) const noexcept;
    std::size_t operator()(const labels& l) const noexcept { return (*this)(l.get()); }
  };
  struct same_content {
    using is_transparent = void;
    bool operator()(const labels& a, const labels& b) const { return a.get() == b.get(); }
    bool operator()(const labels::storage& a, const labels& b) const { return a == b.get(); }
    bool operator()(const labels& a, const labels::storage& b) const { return a.get() == b; }
  };
  void sweep_label_sets();
  // Whether `node`'s kept labels are exactly `have`, read in place: the common event (a
  // heartbeat, a label no rule reads) then allocates, copies and sorts nothing.
  [[nodiscard]] bool same_kept(simdjson::dom::element node, const labels& have) const;

  void changed(std::string_view name);

  node_watch::label_filter keep_;
  std::unordered_set<labels, content_hash, same_content> interned_;
  std::size_t sweep_at_ = 1024;
  labels::storage scratch_;  // kept_labels' labels before they are found or added
  std::map<core::node_name, labels, std::less<>> nodes_;
  std::map<core::node_name, labels, std::less<>> listing_;
  bool changes_known_ = false;                   // changed_ holds every change since that list
  std::vector<std::string> changed_;             // names, in event order, repeats allowed
  std::shared_ptr<const core::node_list> last_;  // the list last taken (null: none yet)
};

}  // namespace topogate::inventory::detail

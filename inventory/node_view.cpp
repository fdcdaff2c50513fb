#include "inventory/node_view.hpp"

#include <algorithm>
#include <atomic>
#include <boost/container_hash/hash.hpp>
#include <cstdint>
#include <iterator>

namespace topogate::inventory::detail {

namespace {
std::string_view name_of(simdjson::dom::element node) {
  std::string_view name;
  if (node["metadata"]["name"].get(name)) return {};
  return name;
}
}  // namespace

node_view::labels node_view::kept_labels(simdjson::dom::element node) {
  scratch_.clear();
  simdjson::dom::object all;
  if (node["metadata"]["labels"].get(all)) return {};
  for (auto field : all) {
    std::string_view v;
    if (field.value.get(v) || (keep_ && !keep_(field.key))) continue;
    scratch_.emplace_back(std::string(field.key), std::string(v));
  }
  if (scratch_.empty()) return {};
  std::sort(scratch_.begin(), scratch_.end());
  if (const auto it = interned_.find(scratch_); it != interned_.end()) return *it;
  // A vector of exactly its size: most sets are kept as long as their Nodes.
  labels added(labels::storage(std::make_move_iterator(scratch_.begin()),
                               std::make_move_iterator(scratch_.end())));
  interned_.insert(added);
  if (interned_.size() >= sweep_at_) sweep_label_sets();
  return added;
}

std::size_t node_view::content_hash::operator()(const labels::storage& s) const noexcept {
  // std::hash of each key and value (libstdc++'s murmur over the bytes), combined in order by
  // Boost's combiner. boost::hash_range over the pairs gives the same guarantees but costs a
  // label change that no rule reads 7 % more instructions (node_label_10000, release).
  std::size_t h = s.size();
  const std::hash<std::string_view> text;
  for (const auto& [k, v] : s) {
    boost::hash_combine(h, text(k));
    boost::hash_combine(h, text(v));
  }
  return h;
}

void node_view::sweep_label_sets() {
  // A count of 1 is the set's own copy: no Node, no list handed out holds it (a list handed
  // out that held it would have to be copied from to share it again, which only the view
  // does, under its lock).
  std::erase_if(interned_, [](const labels& l) { return l.use_count() == 1; });
  sweep_at_ = std::max<std::size_t>(1024, 2 * interned_.size());
}

bool node_view::same_kept(simdjson::dom::element node, const labels& have) const {
  const labels::storage& h = have.get();
  // Each kept label found in `have` marks its place; one found twice (or more than 64 kept)
  // is left to the comparison of built labels, which counts duplicates as they are.
  if (h.size() > 64) return false;
  simdjson::dom::object all;
  if (node["metadata"]["labels"].get(all)) return h.empty();
  std::uint64_t seen = 0;
  for (auto field : all) {
    std::string_view v;
    if (field.value.get(v) || (keep_ && !keep_(field.key))) continue;
    const auto it = std::lower_bound(
        h.begin(), h.end(), field.key,
        [](const labels::value_type& l, std::string_view k) { return l.first < k; });
    if (it == h.end() || it->first != field.key || it->second != v) return false;
    const std::uint64_t bit = std::uint64_t{1} << static_cast<unsigned>(it - h.begin());
    if ((seen & bit) != 0) return false;
    seen |= bit;
  }
  return seen == (h.size() == 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << h.size()) - 1);
}

void node_view::add_listed(simdjson::dom::element node) {
  listing_[core::node_name(name_of(node))] = kept_labels(node);
}

void node_view::finish_list() {
  nodes_.swap(listing_);
  listing_.clear();
  sweep_label_sets();
  // Nodes may have changed unseen while the watch was cut: the next list names no change.
  changes_known_ = false;
  changed_.clear();
}

void node_view::changed(std::string_view name) {
  if (!changes_known_) return;
  // Past what an inventory applies from the names alone, the names are not worth keeping.
  if (changed_.size() >= std::max<std::size_t>(64, nodes_.size() / 16)) {
    changes_known_ = false;
    changed_.clear();
    return;
  }
  changed_.emplace_back(name);
}

bool node_view::apply(std::string_view type, simdjson::dom::element node) {
  const std::string_view name = name_of(node);
  if (type == "DELETED") {
    const auto it = nodes_.find(name);
    if (it == nodes_.end()) return false;
    nodes_.erase(it);
    changed(name);
    return true;
  }
  if (type != "ADDED" && type != "MODIFIED") return false;
  const auto it = nodes_.find(name);
  if (it != nodes_.end()) {
    // Status heartbeats and labels no rule reads: nothing to tell.
    if (same_kept(node, it->second)) return false;
    auto kept = kept_labels(node);
    if (it->second == kept) return false;
    it->second = std::move(kept);
    changed(name);
    return true;
  }
  nodes_.emplace(core::node_name(name), kept_labels(node));
  changed(name);
  return true;
}

core::node_list node_view::list() const {
  core::node_list out;
  out.nodes.reserve(nodes_.size());
  for (const auto& [name, ls] : nodes_) out.nodes.push_back({name, ls});
  return out;
}

std::shared_ptr<const core::node_list> node_view::take() {
  // Unique in the process: a list is never taken for another view's.
  static std::atomic<std::uint64_t> next_id{1};
  auto out = std::make_shared<core::node_list>();
  const bool known = changes_known_ && last_;
  if (known) {
    std::sort(changed_.begin(), changed_.end());
    changed_.erase(std::unique(changed_.begin(), changed_.end()), changed_.end());
  }
  if (known) {
    // The list taken before, sharing its chunks, with the named Nodes as the view has them
    // now: a change copies the chunk of each Node it names (at most 64 Nodes), nothing else.
    out->nodes = last_->nodes;
    for (const std::string& name : changed_) {
      const auto at = out->nodes.partition_point(
          [&name](const core::cluster_node& n) { return n.name < name; });
      const std::size_t i = at.index();
      const bool listed = at != out->nodes.end() && at->name == name;
      const auto now = nodes_.find(name);
      if (now == nodes_.end()) {
        if (listed) out->nodes.erase(i);
      } else if (!listed) {
        out->nodes.insert(i, {now->first, now->second});
      } else if (!(at->labels == now->second)) {
        out->nodes.set(i, {now->first, now->second});
      }
    }
  } else {
    out->nodes = list().nodes;
  }
  out->id = next_id.fetch_add(1, std::memory_order_relaxed);
  if (known) {
    out->since = last_->id;
    out->changed = std::move(changed_);
  }
  changes_known_ = true;
  changed_.clear();
  last_ = out;
  return out;
}

}  // namespace topogate::inventory::detail

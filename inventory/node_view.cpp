#include "inventory/node_view.hpp"

#include <algorithm>

namespace topogate::inventory::detail {

namespace {
std::string_view name_of(simdjson::dom::element node) {
  std::string_view name;
  if (node["metadata"]["name"].get(name)) return {};
  return name;
}
}  // namespace

node_view::labels node_view::kept_labels(simdjson::dom::element node) const {
  labels::storage out;
  simdjson::dom::object all;
  if (node["metadata"]["labels"].get(all)) return {};
  for (auto field : all) {
    std::string_view v;
    if (field.value.get(v) || (keep_ && !keep_(field.key))) continue;
    out.emplace_back(std::string(field.key), std::string(v));
  }
  std::sort(out.begin(), out.end());
  return labels(std::move(out));
}

void node_view::add_listed(simdjson::dom::element node) {
  listing_[std::string(name_of(node))] = kept_labels(node);
}

void node_view::finish_list() {
  nodes_.swap(listing_);
  listing_.clear();
}

bool node_view::apply(std::string_view type, simdjson::dom::element node) {
  const std::string_view name = name_of(node);
  if (type == "DELETED") {
    const auto it = nodes_.find(name);
    if (it == nodes_.end()) return false;
    nodes_.erase(it);
    return true;
  }
  if (type != "ADDED" && type != "MODIFIED") return false;
  auto kept = kept_labels(node);
  const auto it = nodes_.find(name);
  if (it != nodes_.end()) {
    // Status heartbeats and labels no rule reads: nothing to tell.
    if (it->second == kept) return false;
    it->second = std::move(kept);
    return true;
  }
  nodes_.emplace(std::string(name), std::move(kept));
  return true;
}

core::node_list node_view::list() const {
  core::node_list out;
  out.nodes.reserve(nodes_.size());
  for (const auto& [name, ls] : nodes_) out.nodes.push_back({name, ls});
  return out;
}

}  // namespace topogate::inventory::detail

#include "inventory/drift.hpp"

#include <algorithm>
#include <iterator>
#include <string_view>
#include <unordered_set>
#include <utility>

namespace topogate::inventory {
namespace {

constexpr std::string_view profile_label = "topology.gpustack.ai/profile";

void compare(node_drift& d, std::string_view key, std::string_view want,
             const core::cluster_node& node) {
  const std::string* have = node.label(key);
  if (have != nullptr && *have == want) return;
  label_drift l;
  l.key = std::string(key);
  l.want = std::string(want);
  l.present = have != nullptr;
  if (have != nullptr) l.have = *have;
  d.labels.push_back(std::move(l));
}

std::string signature_of(const node_drift& d) {
  std::string s;
  for (const auto& l : d.labels) {
    s += l.key;
    s.push_back('\0');
    s += l.want;
    s.push_back('\0');
    s += l.present ? l.have : std::string("\x01");
    s.push_back('\0');
  }
  return s;
}

}  // namespace

std::vector<node_drift> find_drift(const core::topology_source& src, const revision& rev,
                                   const core::snapshot& accepted, const core::node_list& nodes) {
  // The served Nodes' levels, then every managed Node's profile; each pass by Node name
  // (a snapshot not listed by name is sorted after), merged at the end.
  std::vector<node_drift> levels;
  const std::unordered_set<std::string_view> pruned(rev.pruned_nodes.begin(),
                                                    rev.pruned_nodes.end());
  core::node_list::cursor at(nodes);
  for (const auto& n : accepted.nodes) {
    if (!pruned.empty() && pruned.contains(n.name)) continue;
    const core::cluster_node* node = at.find(n.name);
    if (node == nullptr) continue;
    node_drift d;
    for (const auto& l : n.labels) {
      if (core::is_read_only_parent(l.key) || l.key == profile_label ||
          !core::reads_node_label(src, l.key))
        continue;
      compare(d, l.key, l.value, *node);
    }
    if (d.labels.empty()) continue;
    d.node = n.name;
    std::sort(d.labels.begin(), d.labels.end(),
              [](const label_drift& a, const label_drift& b) { return a.key < b.key; });
    levels.push_back(std::move(d));
  }
  const auto by_name = [](const node_drift& a, const node_drift& b) { return a.node < b.node; };
  if (!std::is_sorted(levels.begin(), levels.end(), by_name))
    std::sort(levels.begin(), levels.end(), by_name);
  std::vector<node_drift> profiles;
  if (rev.profiles) {
    core::node_list::cursor pat(nodes);
    for (const auto& a : rev.profiles->nodes) {  // sorted by name
      const core::cluster_node* node = pat.find(a.node);
      if (node == nullptr) continue;
      node_drift d;
      compare(d, profile_label, rev.profiles->profile_of(a).id, *node);
      if (d.labels.empty()) continue;
      d.node = a.node;
      profiles.push_back(std::move(d));
    }
  }
  std::vector<node_drift> out;
  out.reserve(levels.size() + profiles.size());
  auto l = levels.begin();
  auto p = profiles.begin();
  while (l != levels.end() || p != profiles.end()) {
    if (p == profiles.end() || (l != levels.end() && l->node < p->node)) {
      out.push_back(std::move(*l++));
    } else if (l == levels.end() || p->node < l->node) {
      out.push_back(std::move(*p++));
    } else {
      // The same Node: its profile label among its levels, by key.
      auto merged = std::move(*l++);
      auto& ls = merged.labels;
      auto& pl = p++->labels.front();
      ls.insert(std::upper_bound(
                    ls.begin(), ls.end(), pl,
                    [](const label_drift& a, const label_drift& b) { return a.key < b.key; }),
                std::move(pl));
      out.push_back(std::move(merged));
    }
  }
  return out;
}

std::shared_ptr<const drift_report> drift_tracker::update(const std::vector<node_drift>& found,
                                                          std::chrono::system_clock::time_point now,
                                                          std::chrono::seconds grace) {
  auto report = std::make_shared<drift_report>();
  report->checked_at = now;
  report->grace = grace;
  report->mismatched = found.size();
  std::map<std::string, seen, std::less<>> next;
  for (const auto& d : found) {
    auto sig = signature_of(d);
    auto since = now;
    if (auto it = since_.find(d.node); it != since_.end() && it->second.signature == sig)
      since = it->second.since;
    if (now - since >= grace) {
      ++report->drifted;
      if (report->nodes.size() < drift_report::max_listed) report->nodes.push_back({d, since});
    }
    std::string name = d.node;
    next.emplace(std::move(name), seen{std::move(sig), since});
  }
  since_ = std::move(next);
  return report;
}

std::shared_ptr<const drift_report> drift_tracker::age(const std::vector<node_drift>& found,
                                                       std::chrono::system_clock::time_point now,
                                                       std::chrono::seconds grace) const {
  auto report = std::make_shared<drift_report>();
  report->checked_at = now;
  report->grace = grace;
  report->mismatched = found.size();
  // since_ holds found's names, in the same order: one pass over both.
  auto it = since_.begin();
  for (const auto& d : found) {
    if (it == since_.end() || it->first != d.node) it = since_.find(d.node);
    const auto since = it != since_.end() ? it->second.since : now;
    if (now - since >= grace) {
      ++report->drifted;
      if (report->nodes.size() < drift_report::max_listed) report->nodes.push_back({d, since});
    }
    if (it != since_.end()) ++it;
  }
  return report;
}

}  // namespace topogate::inventory

#include "inventory/drift.hpp"

#include <algorithm>
#include <functional>
#include <iterator>
#include <optional>
#include <string_view>
#include <utility>

#include "inventory/inventory_internal.hpp"

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

// `d`'s labels (cleared first) as the drift of `node`: the levels of its entry in the accepted
// snapshot (`served`; null: not served) and its profile (`profile`; null: not managed), by key.
void drift_into(node_drift& d, const core::topology_source& src, const core::snapshot_node* served,
                const std::string* profile, const core::cluster_node& node) {
  d.labels.clear();
  if (served != nullptr) {
    for (const auto& l : served->labels) {
      if (core::is_read_only_parent(l.key) || l.key == profile_label ||
          !core::reads_node_label(src, l.key))
        continue;
      compare(d, l.key, l.value, node);
    }
  }
  if (profile != nullptr) compare(d, profile_label, *profile, node);
  std::sort(d.labels.begin(), d.labels.end(),
            [](const label_drift& a, const label_drift& b) { return a.key < b.key; });
}

// The served entry of `name` in b's accepted snapshot (null: not served).
const core::snapshot_node* served_entry(const drift_basis& b, std::string_view name) {
  if (!b.accepted) return nullptr;
  const auto& nodes = b.accepted->nodes;
  const auto& served = *b.served;
  const auto it =
      std::lower_bound(served.begin(), served.end(), name,
                       [&](std::uint32_t i, std::string_view key) { return nodes[i].name < key; });
  return it != served.end() && nodes[*it].name == name ? &nodes[*it] : nullptr;
}

// The profile b's revision gives `name` (null: not managed).
const std::string* profile_of(const drift_basis& b, std::string_view name) {
  if (!b.profiles) return nullptr;
  const auto* a = b.profiles->find(name);
  return a != nullptr ? &b.profiles->profile_of(*a).id : nullptr;
}

// Calls `f(node, drift)` for each Node of b's list that differs, by name: one merge of the
// served Nodes and the managed ones, each looked up in the list as the pass goes.
template <class F>
void for_each_drift(const core::topology_source& src, const drift_basis& b, F&& f) {
  if (!b.nodes) return;
  core::node_list::cursor at(*b.nodes);
  node_drift d;
  const std::size_t ns = b.accepted ? b.served->size() : 0;
  const std::size_t np = b.profiles ? b.profiles->nodes.size() : 0;
  std::size_t i = 0;
  std::size_t j = 0;
  while (i < ns || j < np) {
    const core::snapshot_node* s = i < ns ? &b.accepted->nodes[(*b.served)[i]] : nullptr;
    const core::node_assignment* a = j < np ? &b.profiles->nodes[j] : nullptr;
    if (s != nullptr && a != nullptr) {
      const int c = s->name.compare(a->node.str());
      if (c < 0) a = nullptr;
      if (c > 0) s = nullptr;
    }
    if (s != nullptr) ++i;
    if (a != nullptr) ++j;
    const core::cluster_node* node =
        at.find(s != nullptr ? std::string_view(s->name) : std::string_view(a->node.str()));
    if (node == nullptr) continue;
    drift_into(d, src, s, a != nullptr ? &b.profiles->profile_of(*a).id : nullptr, *node);
    if (!d.labels.empty()) f(*node, d);
  }
}

std::vector<std::string> sorted_copy(const std::vector<std::string>& v) {
  std::vector<std::string> out = v;
  if (!std::is_sorted(out.begin(), out.end())) std::sort(out.begin(), out.end());
  return out;
}

// Appends the names of the entries of `a` and `b` (chunked, sorted by name, unique) that
// only one has or that are not `same` in both.
template <class Seq, class Name, class Same>
void names_differing(const Seq& a, const Seq& b, bool skip_shared, Name name, Same same,
                     std::vector<std::string>& out) {
  using entry = typename Seq::value_type;
  detail::walk_differences(a, b, skip_shared, name, same, [&](const entry* x, const entry* y) {
    out.push_back(name(x != nullptr ? *x : *y));
    return true;
  });
}

}  // namespace

drift_signature signature_of(const node_drift& d) {
  // The text is built in a buffer the thread keeps: no allocation per Node once it is grown.
  thread_local std::string s;
  s.clear();
  for (const auto& l : d.labels) {
    s += l.key;
    s.push_back('\0');
    s += l.want;
    s.push_back('\0');
    if (l.present) {
      s += l.have;
    } else {
      s.push_back('\x01');
    }
    s.push_back('\0');
  }
  const std::hash<std::string_view> h;
  const std::uint64_t first = h(s);
  s.push_back('\x02');  // the second hash is of another text
  return {first, h(s)};
}

namespace {

void index_served(drift_basis& b) {
  auto served = std::make_shared<std::vector<std::uint32_t>>();
  if (b.accepted) {
    const auto& nodes = b.accepted->nodes;
    served->reserve(nodes.size());
    for (std::size_t i = 0; i < nodes.size(); ++i) {
      if (!b.pruned.empty() && std::binary_search(b.pruned.begin(), b.pruned.end(), nodes[i].name))
        continue;
      served->push_back(static_cast<std::uint32_t>(i));
    }
    if (!b.accepted_sorted)
      std::sort(served->begin(), served->end(),
                [&](std::uint32_t x, std::uint32_t y) { return nodes[x].name < nodes[y].name; });
  }
  b.served = std::move(served);
}

// basis_of with `accepted` and `nodes` given, not owned: the basis lives within the call.
drift_basis basis_over(const revision& rev, const core::snapshot& accepted,
                       const core::node_list& nodes) {
  drift_basis b;
  b.accepted = std::shared_ptr<const core::snapshot>(std::shared_ptr<void>(), &accepted);
  b.accepted_sorted = detail::names_increasing(accepted);
  b.pruned = sorted_copy(rev.pruned_nodes);
  b.profiles = rev.profiles;
  b.nodes = std::shared_ptr<const core::node_list>(std::shared_ptr<void>(), &nodes);
  index_served(b);
  return b;
}

}  // namespace

drift_basis basis_of(const revision& rev, std::shared_ptr<const core::node_list> nodes,
                     const drift_basis* previous) {
  drift_basis b;
  b.accepted = rev.accepted_shared();
  b.accepted_sorted = rev.accepted_sorted;
  b.pruned = sorted_copy(rev.pruned_nodes);
  b.profiles = rev.profiles;
  b.nodes = std::move(nodes);
  if (previous != nullptr && previous->served && b.accepted && previous->accepted == b.accepted &&
      previous->accepted_sorted == b.accepted_sorted && previous->pruned == b.pruned) {
    b.served = previous->served;
  } else {
    index_served(b);
  }
  return b;
}

std::optional<std::vector<std::string>> drift_changes(const drift_basis& before,
                                                      const revision& rev,
                                                      const core::node_list& nodes) {
  if (!before.accepted || !before.nodes || before.accepted != rev.accepted_decoded ||
      !before.accepted_sorted || !rev.accepted_sorted)
    return std::nullopt;
  std::vector<std::string> out;
  // The lists: Nodes added, removed or relabelled.
  names_differing(
      before.nodes->nodes, nodes.nodes, true,
      [](const auto& n) -> const std::string& { return n.name; },
      [](const auto& x, const auto& y) { return x.labels == y.labels; }, out);
  // Pruned in one revision and not the other.
  {
    const auto pruned = sorted_copy(rev.pruned_nodes);
    std::set_symmetric_difference(before.pruned.begin(), before.pruned.end(), pruned.begin(),
                                  pruned.end(), std::back_inserter(out));
  }
  // Another profile, or managed in one and not the other.
  const core::profile_assignment* p = before.profiles.get();
  const core::profile_assignment* q = rev.profiles.get();
  if (p != q) {
    if (p == nullptr || q == nullptr) {
      for (const auto& a : (p != nullptr ? p : q)->nodes) out.push_back(a.node);
    } else {
      // Entries of a shared chunk index the same profiles when both tables list the same
      // profiles in the same order (only their counts may differ).
      const bool same_table =
          p->profiles.size() == q->profiles.size() &&
          std::equal(p->profiles.begin(), p->profiles.end(), q->profiles.begin(),
                     [](const core::assigned_profile& x, const core::assigned_profile& y) {
                       return x.id == y.id;
                     });
      names_differing(
          p->nodes, q->nodes, same_table,
          [](const auto& a) -> const std::string& { return a.node; },
          [&](const auto& x, const auto& y) { return p->profile_of(x).id == q->profile_of(y).id; },
          out);
    }
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::vector<node_drift> find_drift(const core::topology_source& src, const revision& rev,
                                   const core::snapshot& accepted, const core::node_list& nodes) {
  std::vector<node_drift> out;
  for_each_drift(src, basis_over(rev, accepted, nodes),
                 [&](const core::cluster_node& node, const node_drift& d) {
                   out.push_back(d);
                   out.back().node = node.name;
                 });
  return out;
}

std::vector<drift_mark> find_drift_marks(const core::topology_source& src, const drift_basis& b) {
  std::vector<drift_mark> out;
  for_each_drift(src, b, [&](const core::cluster_node& node, const node_drift& d) {
    out.push_back({node.name, signature_of(d), std::nullopt});
  });
  return out;
}

std::vector<drift_mark> refind_drift_marks(const core::topology_source& src, const drift_basis& b,
                                           std::vector<drift_mark> before,
                                           const std::vector<std::string>& changed) {
  std::vector<drift_mark> out;
  out.reserve(before.size() + changed.size());
  auto it = before.begin();
  std::optional<core::node_list::cursor> at;
  if (b.nodes) at.emplace(*b.nodes);
  node_drift d;
  for (const std::string& name : changed) {
    while (it != before.end() && it->node < name) out.push_back(std::move(*it++));
    const drift_mark* was = nullptr;
    if (it != before.end() && it->node == name) was = &*it++;  // compared again
    const core::cluster_node* node = at ? at->find(name) : nullptr;
    if (node == nullptr) continue;
    drift_into(d, src, served_entry(b, name), profile_of(b, name), *node);
    if (d.labels.empty()) continue;
    drift_mark m{node->name, signature_of(d), std::nullopt};
    if (was != nullptr && was->sig == m.sig) m.since = was->since;
    out.push_back(std::move(m));
  }
  for (; it != before.end(); ++it) out.push_back(std::move(*it));
  return out;
}

node_drift describe_drift(const core::topology_source& src, const drift_basis& b,
                          std::string_view name) {
  node_drift d;
  d.node = std::string(name);
  const core::cluster_node* node = b.nodes ? b.nodes->find(name) : nullptr;
  if (node != nullptr) drift_into(d, src, served_entry(b, name), profile_of(b, name), *node);
  return d;
}

std::shared_ptr<const drift_report> drift_tracker::update(std::vector<drift_mark> found,
                                                          std::chrono::system_clock::time_point now,
                                                          std::chrono::seconds grace,
                                                          const describe_fn& describe) {
  // Both by name: one pass over what the last update recorded.
  auto old = found_.begin();
  for (auto& m : found) {
    if (m.since) continue;
    old =
        std::lower_bound(old, found_.end(), m.node,
                         [](const drift_mark& x, const core::node_name& n) { return x.node < n; });
    m.since = old != found_.end() && old->node == m.node && old->sig == m.sig ? old->since : now;
  }
  found_ = std::move(found);
  return age(now, grace, describe);
}

std::shared_ptr<const drift_report> drift_tracker::age(std::chrono::system_clock::time_point now,
                                                       std::chrono::seconds grace,
                                                       const describe_fn& describe) const {
  auto report = std::make_shared<drift_report>();
  report->checked_at = now;
  report->grace = grace;
  report->mismatched = found_.size();
  for (const auto& m : found_) {
    const auto since = m.since.value_or(now);
    if (now - since < grace) continue;
    ++report->drifted;
    if (report->nodes.size() < drift_report::max_listed)
      report->nodes.push_back({describe(m.node), since});
  }
  return report;
}

}  // namespace topogate::inventory

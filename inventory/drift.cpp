#include "inventory/drift.hpp"

#include <algorithm>
#include <functional>
#include <iterator>
#include <string_view>
#include <unordered_set>
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

// find_drift's entry for one Node (no labels: none differs), `node` as the list has it (null:
// not in the list, not compared). `pruned` sorted by name.
node_drift drift_of(const core::topology_source& src, const revision& rev,
                    const core::snapshot& accepted, const std::vector<std::string>& pruned,
                    std::string_view name, const core::cluster_node* node) {
  node_drift d;
  if (node == nullptr) return d;
  const auto it = std::lower_bound(
      accepted.nodes.begin(), accepted.nodes.end(), name,
      [](const core::snapshot_node& n, std::string_view key) { return n.name < key; });
  const bool served = it != accepted.nodes.end() && it->name == name &&
                      !std::binary_search(pruned.begin(), pruned.end(), name);
  // Room for every label that may differ, at once: no growth by doubling for each Node.
  d.labels.reserve((served ? it->labels.size() : 0) + (rev.profiles ? 1 : 0));
  if (served) {
    for (const auto& l : it->labels) {
      if (core::is_read_only_parent(l.key) || l.key == profile_label ||
          !core::reads_node_label(src, l.key))
        continue;
      compare(d, l.key, l.value, *node);
    }
  }
  if (rev.profiles) {
    if (const auto* a = rev.profiles->find(name))
      compare(d, profile_label, rev.profiles->profile_of(*a).id, *node);
  }
  if (d.labels.empty()) return d;
  d.node = std::string(name);
  std::sort(d.labels.begin(), d.labels.end(),
            [](const label_drift& a, const label_drift& b) { return a.key < b.key; });
  return d;
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

drift_tracker::signature drift_tracker::signature_of(const node_drift& d) {
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

drift_basis basis_of(const revision& rev, std::shared_ptr<const core::node_list> nodes) {
  drift_basis b;
  b.accepted = rev.accepted_decoded;
  b.accepted_sorted = rev.accepted_sorted;
  b.pruned = sorted_copy(rev.pruned_nodes);
  b.profiles = rev.profiles;
  b.nodes = std::move(nodes);
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

std::vector<node_drift> refind_drift(const core::topology_source& src, const revision& rev,
                                     const core::snapshot& accepted, const core::node_list& nodes,
                                     std::vector<node_drift> before,
                                     const std::vector<std::string>& changed) {
  const auto pruned = sorted_copy(rev.pruned_nodes);
  std::vector<node_drift> out;
  out.reserve(before.size() + changed.size());
  auto b = before.begin();
  core::node_list::cursor at(nodes);
  for (const std::string& name : changed) {
    while (b != before.end() && b->node < name) out.push_back(std::move(*b++));
    if (b != before.end() && b->node == name) ++b;  // compared again
    auto d = drift_of(src, rev, accepted, pruned, name, at.find(name));
    if (!d.labels.empty()) out.push_back(std::move(d));
  }
  for (; b != before.end(); ++b) out.push_back(std::move(*b));
  return out;
}

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
    const auto sig = signature_of(d);
    auto since = now;
    if (auto it = since_.find(d.node); it != since_.end() && it->second.sig == sig)
      since = it->second.since;
    if (now - since >= grace) {
      ++report->drifted;
      if (report->nodes.size() < drift_report::max_listed) report->nodes.push_back({d, since});
    }
    std::string name = d.node;
    next.emplace(std::move(name), seen{sig, since});
  }
  since_ = std::move(next);
  return report;
}

std::shared_ptr<const drift_report> drift_tracker::update(const std::vector<node_drift>& found,
                                                          const std::vector<std::string>& changed,
                                                          std::chrono::system_clock::time_point now,
                                                          std::chrono::seconds grace) {
  auto f = found.begin();
  for (const std::string& name : changed) {
    f = std::lower_bound(f, found.end(), name,
                         [](const node_drift& d, const std::string& n) { return d.node < n; });
    auto it = since_.find(name);
    if (f == found.end() || f->node != name) {
      if (it != since_.end()) since_.erase(it);  // no longer differs
      continue;
    }
    const auto sig = signature_of(*f);
    if (it == since_.end()) {
      since_.emplace(name, seen{sig, now});
    } else if (it->second.sig != sig) {
      it->second = seen{sig, now};  // differs otherwise: starts again
    }
  }
  return age(found, now, grace);
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

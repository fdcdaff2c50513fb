// A Node change applied to the served revision alone (inventory::evaluate_change), and what
// it needs: the difference of two selected lists, and each level value's served carrier,
// against which a Node that joins is checked. docs/inventory.md, "Node lists".

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/profile_impact.hpp"
#include "core/snapshot.hpp"
#include "inventory/inventory.hpp"
#include "inventory/inventory_internal.hpp"

namespace topogate::inventory {

namespace detail {

// Each value's first served carrier per level but the first (`gone`: the pruned Nodes,
// sorted as the snapshot is).
std::shared_ptr<const revision::level_carriers> carriers_of(const core::topology_source& src,
                                                            const core::snapshot& snap,
                                                            const std::vector<std::string>& gone) {
  auto out = std::make_shared<revision::level_carriers>();
  const auto& levels = src.levels;
  if (levels.size() < 2) return out;
  out->by_level.resize(levels.size() - 1);
  std::size_t g = 0;
  for (std::uint32_t si = 0; si < snap.nodes.size(); ++si) {
    const core::snapshot_node& n = snap.nodes[si];
    if (g < gone.size() && gone[g] == n.name) {
      ++g;
      continue;
    }
    for (const core::snapshot_label& l : n.labels)
      for (std::size_t i = 1; i < levels.size(); ++i)
        if (l.key == levels[i]) out->by_level[i - 1].emplace(l.value, si);
  }
  return out;
}

}  // namespace detail

inventory::node_diff inventory::diff_nodes(const core::node_list& before,
                                           const core::node_list& after, std::size_t most) {
  node_diff d;
  detail::walk_differences(
      before.nodes, after.nodes, true,
      [](const core::cluster_node& n) -> const auto& { return n.name; },
      [](const core::cluster_node& x, const core::cluster_node& y) { return x.labels == y.labels; },
      [&](const core::cluster_node* x, const core::cluster_node* y) {
        d.changes.emplace_back(x, y);
        d.many = d.changes.size() > most;
        return !d.many;
      });
  return d;
}

std::shared_ptr<const core::node_list> inventory::select_changed(
    const std::shared_ptr<const core::node_list>& all, const core::node_list& before,
    node_diff& diff) const {
  const auto& selector = cfg_.source.node_selector;
  // Each named Node as `before` has it and as the selection has it now (null: absent).
  struct edit {
    const core::cluster_node* was;
    const core::cluster_node* now;
  };
  std::vector<edit> edits;
  for (const std::string& name : all->changed) {
    const core::cluster_node* now = all->find(name);
    if (now != nullptr && selector && !selector->matches(now->labels)) now = nullptr;
    const core::cluster_node* was = before.find(name);
    if (was == nullptr && now == nullptr) continue;
    if (was != nullptr && now != nullptr && was->labels == now->labels) continue;
    edits.push_back({was, now});
  }
  if (edits.empty()) return nullptr;
  std::shared_ptr<const core::node_list> selected;
  if (!selector) {
    selected = all;  // every Node is selected: the list itself
  } else {
    // `before` with the edits applied: its chunks are shared, and each edit copies the one
    // chunk of the Node it names.
    auto out = std::make_shared<core::node_list>();
    out->nodes = before.nodes;
    for (const edit& e : edits) {
      const std::string_view name = e.now != nullptr ? e.now->name : e.was->name;
      const std::size_t at =
          out->nodes.partition_point([name](const core::cluster_node& n) { return n.name < name; })
              .index();
      if (e.was == nullptr) {
        out->nodes.insert(at, *e.now);
      } else if (e.now == nullptr) {
        out->nodes.erase(at);
      } else {
        out->nodes.set(at, *e.now);
      }
    }
    selected = std::move(out);
  }
  const std::size_t most = std::max<std::size_t>(64, selected->nodes.size() / 16);
  diff.many = edits.size() > most;
  if (!diff.many) {
    diff.changes.reserve(edits.size());
    for (const edit& e : edits)
      diff.changes.emplace_back(e.was, e.now != nullptr ? selected->find(e.now->name) : nullptr);
  }
  return selected;
}

std::optional<inventory::evaluation> inventory::evaluate_change(
    const revision& cur, const revision& base, const node_diff& diff,
    const std::shared_ptr<const core::node_list>& after,
    const std::shared_ptr<const core::profile_assignment>& profiles) const {
  const auto& snap_ptr = cur.accepted_decoded;
  if (diff.many || !snap_ptr || snap_ptr != base.accepted_decoded || !cur.members ||
      !cur.accepted_sorted)
    return std::nullopt;
  const core::snapshot& snap = *snap_ptr;

  const auto described = [&](std::string_view name) -> const core::snapshot_node* {
    const auto it = std::lower_bound(
        snap.nodes.begin(), snap.nodes.end(), name,
        [](const core::snapshot_node& n, std::string_view key) { return n.name < key; });
    return it != snap.nodes.end() && it->name == name ? &*it : nullptr;
  };
  std::vector<core::profile_update> updates;
  std::vector<const core::snapshot_node*> left;    // described Nodes that left: pruned now
  std::vector<const core::snapshot_node*> joined;  // pruned Nodes that joined: served now
  const auto change = [&](const core::cluster_node* was, const core::cluster_node* now) {
    const std::string_view name = now != nullptr ? now->name : was->name;
    const core::snapshot_node* d = described(name);
    if (d != nullptr) {
      // A described Node is served when `before` has it (cur is valid for `before`), pruned
      // when it does not.
      if (was == nullptr) {
        if (!core::read_only_parents_match(*d, now)) return false;  // S6 fails
        joined.push_back(d);
      } else if (now == nullptr) {
        if (cfg_.unknown_nodes != unknown_nodes_policy::prune) return false;  // S3 fails
        left.push_back(d);
        d = nullptr;
      } else if (!core::read_only_parents_match(*d, now)) {
        return false;  // S6 fails: evaluate() reports it
      }
    }
    updates.push_back({name, d, now});
    return true;
  };
  for (const auto& [was, now] : diff.changes)
    if (!change(was, now)) return std::nullopt;
  if (!joined.empty() && !joins_hold(cur, snap, joined, after)) return std::nullopt;

  evaluation ev;
  auto next_profiles = core::update_profiles(cfg_.source, profiles, updates);
  auto rev = std::make_shared<revision>();
  if (left.empty() && joined.empty()) {
    if (next_profiles == profiles) {
      ev.unchanged = true;  // the same bytes, the same profiles: nothing to publish
      return ev;
    }
    // The same Nodes are served: the same bytes (and their YAML), only profiles move.
    *rev = cur;
  } else {
    // Each Node that left is dropped from the rendering and each that joined is rendered
    // into it; the others are not rendered again. Both lists are in name order, as the
    // snapshot and the pruned Nodes are.
    const auto& pruned_before = cur.pruned_nodes;
    // A described Node's member index in cur's rendering: its position among the
    // snapshot's Nodes less the pruned ones before it.
    const auto member_of = [&](const core::snapshot_node* d) {
      const auto below = std::lower_bound(pruned_before.begin(), pruned_before.end(), d->name);
      return static_cast<std::size_t>(d - snap.nodes.data()) -
             static_cast<std::size_t>(below - pruned_before.begin());
    };
    std::vector<std::size_t> drop;
    drop.reserve(left.size());
    for (const core::snapshot_node* d : left) drop.push_back(member_of(d));
    std::vector<std::pair<std::size_t, const core::snapshot_node*>> insert;
    insert.reserve(joined.size());
    for (const core::snapshot_node* d : joined) insert.emplace_back(member_of(d), d);
    std::vector<std::string> pruned;
    pruned.reserve(pruned_before.size() + left.size());
    {
      std::size_t l = 0;
      std::size_t jn = 0;
      for (const std::string& name : pruned_before) {
        while (l < left.size() && left[l]->name < name) pruned.push_back(left[l++]->name);
        if (jn < joined.size() && joined[jn]->name == name) {
          ++jn;  // served again
          continue;
        }
        pruned.push_back(name);
      }
      while (l < left.size()) pruned.push_back(left[l++]->name);
    }
    rev->revision_id =
        pruned.empty() ? snap.revision : snap.revision + "+pruned-" + std::to_string(pruned.size());
    std::vector<std::uint32_t> members;
    std::vector<core::copied_bytes> copied;
    rev->json_text =
        core::splice_rendered_nodes(cur.json_text, *cur.members, drop, insert, snap.api_version,
                                    rev->revision_id, &members, &copied);
    // S10 as served: a Node back may take the rendering past what the consumer reads.
    if (rev->json_text.size() > core::max_snapshot_bytes) return std::nullopt;
    rev->members = std::make_shared<const std::vector<std::uint32_t>>(std::move(members));
    // Only the chunks around the Nodes that left or joined (and the header) are hashed again.
    rev->digest = std::make_shared<const body_digest>(
        cur.digest ? body_digest::update(*cur.digest, rev->json_text, copied)
                   : body_digest::of(rev->json_body()));
    rev->etag = rev->digest->etag();
    rev->accepted_revision_id = snap.revision;
    rev->node_count = cur.node_count - drop.size() + insert.size();
    // The accepted snapshot is accepted_decoded's: nothing packed is kept beside it.
    rev->pruned_nodes = std::move(pruned);
    rev->accepted_decoded = snap_ptr;
    rev->accepted_sorted = true;
    rev->accepted_canonical = cur.accepted_canonical;
    rev->carriers = cur.carriers;
  }
  rev->profiles = std::move(next_profiles);
  ev.rev = std::move(rev);
  return ev;
}

bool inventory::joins_hold(const revision& cur, const core::snapshot& snap,
                           const std::vector<const core::snapshot_node*>& joined,
                           const std::shared_ptr<const core::node_list>& after) const {
  // The served Nodes are valid together, so every Node carrying a value of a level shares
  // its ancestors. A Node joining them is valid with them when it is valid with one carrier
  // of each of its values (the rules are per Node, or per value and its ancestors, or the
  // size, checked on the rendering): a small snapshot of it and those carriers goes through
  // the rules. A value no served Node carries is left to the full evaluation.
  if (!cur.carriers) return false;
  const auto& levels = cfg_.source.levels;
  const auto& by_level = cur.carriers->by_level;
  const core::snapshot_context ctx{&cfg_.source, after.get(), true};
  // Described Node k is served after this change: cur serves it and it is still selected (a
  // carrier that left in this change is not).
  const auto served_now = [&](std::uint32_t k) {
    const std::string& name = snap.nodes[k].name;
    return !std::binary_search(cur.pruned_nodes.begin(), cur.pruned_nodes.end(), name) &&
           after->find(name) != nullptr;
  };
  // A carrier of `value` at level i served now: the index's (`self`: the joining Node is its
  // own), or when that one left since the index was built (or the index had none), the first
  // other found in the snapshot. One Node leaving must not send every later join of its
  // values (a zone's: a quarter of them) to the full evaluation.
  const auto carrier = [&](std::size_t i, std::string_view value,
                           std::uint32_t self) -> std::optional<std::uint32_t> {
    if (const auto it = by_level[i - 1].find(value);
        it != by_level[i - 1].end() && (it->second == self || served_now(it->second)))
      return it->second;
    for (std::uint32_t k = 0; k < snap.nodes.size(); ++k) {
      if (k == self) continue;
      for (const core::snapshot_label& l : snap.nodes[k].labels)
        if (l.key == levels[i] && l.value == value && served_now(k)) return k;
    }
    return std::nullopt;
  };
  for (const core::snapshot_node* x : joined) {
    core::snapshot mini;
    mini.api_version = snap.api_version;
    mini.revision = snap.revision;
    mini.nodes.push_back(*x);
    const auto self = static_cast<std::uint32_t>(x - snap.nodes.data());
    std::vector<std::uint32_t> with;
    for (std::size_t i = 1; i < levels.size() && i - 1 < by_level.size(); ++i) {
      for (const core::snapshot_label& l : x->labels) {
        if (l.key != levels[i]) continue;
        const auto k = carrier(i, l.value, self);
        if (!k) return false;
        if (*k != self && std::find(with.begin(), with.end(), *k) == with.end()) with.push_back(*k);
      }
    }
    for (const std::uint32_t k : with) mini.nodes.push_back(snap.nodes[k]);
    if (!core::validate_snapshot(mini, ctx).empty()) return false;
  }
  return true;
}

}  // namespace topogate::inventory

#include "profile_impact.hpp"

#include <algorithm>
#include <map>
#include <set>

#include "field_error.hpp"
#include "profile.hpp"

namespace topogate::core {

namespace {

const std::string* described_label(const snapshot_node& n, std::string_view key) noexcept {
  for (const auto& l : n.labels) {
    if (l.key == key) return &l.value;
  }
  return nullptr;
}

struct source_node {
  std::string_view name;
  const snapshot_node* described = nullptr;
  const cluster_node* cluster = nullptr;
};

std::string join_ids(const std::vector<std::string>& ids) {
  std::string out;
  for (const auto& id : ids) {
    if (!out.empty()) out += ", ";
    out += id;
  }
  return out;
}

std::string levels_text(const std::vector<std::string>& levels) {
  std::string out;
  for (const auto& l : levels) {
    if (!out.empty()) out += " > ";
    out += l;
  }
  return out;
}

void append_changes(std::string& out, std::string_view key, std::size_t count,
                    const std::vector<profile_change>& items, std::size_t max_items) {
  append_json_string(out, key);
  out += ":{\"count\":" + std::to_string(count) + ",\"items\":[";
  const std::size_t shown = std::min(items.size(), max_items);
  for (std::size_t i = 0; i < shown; ++i) {
    if (i != 0) out.push_back(',');
    out += "{\"node\":";
    append_json_string(out, items[i].node);
    out += ",\"from\":";
    append_json_string(out, items[i].from);
    out += ",\"to\":";
    append_json_string(out, items[i].to);
    out.push_back('}');
  }
  out += "],\"truncated\":";
  out += count > shown ? "true" : "false";
  out.push_back('}');
}

void append_profiles(std::string& out, std::string_view key,
                     const std::vector<assigned_profile>& profiles) {
  append_json_string(out, key);
  out += ":[";
  for (std::size_t i = 0; i < profiles.size(); ++i) {
    if (i != 0) out.push_back(',');
    out += "{\"id\":";
    append_json_string(out, profiles[i].id);
    out += ",\"levels\":[";
    for (std::size_t j = 0; j < profiles[i].levels.size(); ++j) {
      if (j != 0) out.push_back(',');
      append_json_string(out, profiles[i].levels[j]);
    }
    out += "],\"nodes\":" + std::to_string(profiles[i].nodes) + "}";
  }
  out.push_back(']');
}

// The runbook's "Change a live hierarchy", restricted to the steps this impact triggers.
std::vector<std::string> consequences_of(const profile_impact& im) {
  std::vector<std::string> out;
  const bool flavor_set_changes = !im.appeared.empty() || !im.disappeared.empty();
  if (flavor_set_changes) {
    out.emplace_back(
        "Record the managed ClusterQueue's name, UID, stop policy, status.reservingWorkloads and "
        "flavor "
        "references before and after the change.");
  }
  if (!im.appeared.empty()) {
    std::vector<std::string> ids;
    for (const auto& p : im.appeared) ids.push_back(p.id);
    out.push_back(
        "New profile(s) " + join_ids(ids) +
        ": their ordered level keys produce a new profile and Topology; GPUStack creates the "
        "replacement ResourceFlavors first.");
  }
  if (im.profile_changes() != 0) {
    out.push_back(std::to_string(im.profile_changes()) +
                  " Node(s) change or lose topology.gpustack.ai/profile: each Node and its Devices "
                  "ledger must "
                  "converge on the same topology.gpustack.ai/profile before accelerator admission "
                  "can use the "
                  "replacement flavor.");
  }
  if (flavor_set_changes) {
    out.emplace_back(
        "GPUStack sets HoldAndDrain on the managed ClusterQueue, waits for zero reservations, "
        "switches the "
        "flavor set on the same queue, then restores the previous stop policy.");
    // Flavors whose Nodes or whose existence change: the Workloads admitted on them move.
    std::set<std::string> affected;
    for (const auto& p : im.disappeared) affected.insert(p.id);
    for (const auto& c : im.changed) affected.insert(c.from);
    for (const auto& c : im.removed) affected.insert(c.from);
    std::string line = "Kueue evicts and later readmits affected Workloads";
    if (!affected.empty()) {
      line += " (those admitted on the flavors of ";
      line += join_ids(std::vector<std::string>(affected.begin(), affected.end()));
      line += ")";
    }
    line += ": plan for a service interruption.";
    out.push_back(std::move(line));
  }
  if (!im.disappeared.empty()) {
    std::vector<std::string> ids;
    for (const auto& p : im.disappeared) ids.push_back(p.id);
    out.push_back("Profile(s) " + join_ids(ids) +
                  " are no longer used: their old flavors and Topology disappear only after "
                  "references clear.");
  }
  if (flavor_set_changes) {
    out.emplace_back(
        "If TopologyReady=False, read its reason and the queue's migration annotations before "
        "changing anything "
        "else: a missing replacement flavor, immutable object drift, too many required flavors, or "
        "quota that "
        "cannot be conserved leaves the last complete queue plan in place.");
  }
  return out;
}

}  // namespace

profile_assignment profiles_from_node_labels(const node_list& nodes) {
  profile_assignment pa;
  std::map<std::string, std::uint32_t> index;  // profile id -> position in pa.profiles
  for (const auto& n : nodes.nodes) {          // sorted by name, unique
    const std::string* id = n.label("topology.gpustack.ai/profile");
    if (id == nullptr || id->empty()) continue;
    auto [it, fresh] = index.emplace(*id, static_cast<std::uint32_t>(pa.profiles.size()));
    if (fresh) pa.profiles.push_back({*id, {}, 0});
    ++pa.profiles[it->second].nodes;
    pa.nodes.push_back({n.name, it->second, {}});
  }
  return pa;
}

const std::vector<std::string>& node_assignment::values() const noexcept {
  static const std::vector<std::string> none;
  return level_values ? *level_values : none;
}

const node_assignment* profile_assignment::find(std::string_view node) const noexcept {
  const auto it = nodes.partition_point([node](const node_assignment& n) { return n.node < node; });
  return it != nodes.end() && it->node == node ? &*it : nullptr;
}

namespace {

// What decides each Node's profile for a source: its normalised levels, and which of them
// take their value from the snapshot only.
struct profile_rules {
  std::vector<std::string> levels;
  std::vector<bool> from_snapshot_only;
  profile_rules(const topology_source& src, bool with_snapshot)
      : levels(normalize_levels(src.levels)), from_snapshot_only(levels.size(), false) {
    if (!with_snapshot) return;
    for (std::size_t i = 0; i < levels.size(); ++i)
      from_snapshot_only[i] = is_publishable_key(levels[i], src) && !is_read_only_parent(levels[i]);
  }
  // The Node's entry and its depth (the number of levels populated without a gap).
  std::size_t assign(const source_node& n, node_assignment& a) const {
    std::vector<std::string> values;
    const std::size_t depth = assign(n, values);
    a.node = n.cluster != nullptr ? n.cluster->name : node_name(n.name);
    a.level_values = values.empty()
                         ? nullptr
                         : std::make_shared<const std::vector<std::string>>(std::move(values));
    return depth;
  }
  std::size_t assign(const source_node& n, std::vector<std::string>& values) const {
    values.clear();
    std::size_t depth = 0;
    for (; depth < levels.size(); ++depth) {
      const std::string* v =
          n.described != nullptr ? described_label(*n.described, levels[depth]) : nullptr;
      if (v == nullptr && !from_snapshot_only[depth] && n.cluster != nullptr)
        v = n.cluster->label(levels[depth]);
      if (v == nullptr || v->empty()) break;  // a Node may omit a fine suffix, never a parent
      values.push_back(*v);
    }
    return depth;
  }
  // The profiles in use, deepest first, as `kubectl get resourceflavors` lists the most
  // specific flavor first; `index_of_depth` maps a depth to its position.
  void table(const std::vector<std::size_t>& count_by_depth, profile_assignment& out,
             std::vector<std::uint32_t>& index_of_depth) const {
    out.profiles.clear();
    index_of_depth.assign(levels.size() + 1, 0);
    for (std::size_t d = levels.size() + 1; d-- > 0;) {
      if (count_by_depth[d] == 0) continue;
      assigned_profile p;
      p.levels.assign(levels.begin(), levels.begin() + static_cast<std::ptrdiff_t>(d));
      p.levels.emplace_back(hostname_label);
      p.id = profile_id(p.levels);
      p.nodes = count_by_depth[d];
      index_of_depth[d] = static_cast<std::uint32_t>(out.profiles.size());
      out.profiles.push_back(std::move(p));
    }
  }
};

}  // namespace

profile_assignment assign_profiles(const topology_source& src, const snapshot* snap,
                                   const node_list* selected) {
  // A profile is the longest populated prefix of the normalised levels, so a source has at
  // most levels+1 profiles and each is identified by its depth.
  const profile_rules rules(src, snap != nullptr);

  std::vector<source_node> all;
  if (snap != nullptr) {
    all.reserve(snap->nodes.size());
    for (const auto& n : snap->nodes) all.push_back({n.name, &n, nullptr});
    // Served and exported snapshots usually list Nodes sorted already: one pass, no sort.
    const auto by_name = [](const source_node& a, const source_node& b) { return a.name < b.name; };
    if (!std::is_sorted(all.begin(), all.end(), by_name))
      std::sort(all.begin(), all.end(), by_name);
  }
  if (selected != nullptr) {
    std::vector<source_node> merged;
    merged.reserve(all.size() + selected->nodes.size());
    std::size_t i = 0;
    for (const auto& c : selected->nodes) {
      while (i < all.size() && all[i].name < c.name) merged.push_back(all[i++]);
      if (i < all.size() && all[i].name == c.name) {
        merged.push_back({c.name, all[i++].described, &c});
      } else {
        merged.push_back({c.name, nullptr, &c});
      }
    }
    while (i < all.size()) merged.push_back(all[i++]);
    all = std::move(merged);
  }
  // A snapshot never names a Node twice (S1 rejects duplicate keys); keep the first anyway.
  all.erase(
      std::unique(all.begin(), all.end(),
                  [](const source_node& a, const source_node& b) { return a.name == b.name; }),
      all.end());

  profile_assignment out;
  std::vector<std::size_t> depth_of;
  std::vector<std::size_t> count_by_depth(rules.levels.size() + 1, 0);
  out.nodes.reserve(all.size());
  depth_of.reserve(all.size());
  // The Nodes of one domain carry the same values: they share one vector (a rack's Nodes,
  // one), the one of the Node before when it is the same.
  std::map<std::vector<std::string>, std::shared_ptr<const std::vector<std::string>>> by_values;
  std::shared_ptr<const std::vector<std::string>> last;
  std::vector<std::string> values;
  for (const auto& n : all) {
    node_assignment a;
    const std::size_t depth = rules.assign(n, values);
    a.node = n.cluster != nullptr ? n.cluster->name : node_name(n.name);
    if (!values.empty()) {
      if (!last || *last != values) {
        auto& shared = by_values[values];
        if (!shared) shared = std::make_shared<const std::vector<std::string>>(values);
        last = shared;
      }
      a.level_values = last;
    }
    ++count_by_depth[depth];
    depth_of.push_back(depth);
    out.nodes.push_back(std::move(a));
  }
  std::vector<std::uint32_t> index_of_depth;
  rules.table(count_by_depth, out, index_of_depth);
  std::size_t i = 0;
  out.nodes.edit_each([&](node_assignment& a) { a.profile = index_of_depth[depth_of[i++]]; });
  return out;
}

std::shared_ptr<const profile_assignment> update_profiles(
    const topology_source& src, const std::shared_ptr<const profile_assignment>& shared_before,
    const std::vector<profile_update>& updates) {
  const profile_assignment& before = *shared_before;
  const profile_rules rules(src, true);
  {
    // Most changes leave every entry as it was (a label the snapshot decides, a profile
    // label): then nothing is copied.
    bool same = true;
    std::vector<std::string> values;
    for (const profile_update& u : updates) {
      const node_assignment* was = before.find(u.node);
      if ((u.described == nullptr && u.cluster == nullptr) || was == nullptr) {
        same = was == nullptr && u.described == nullptr && u.cluster == nullptr;
      } else {
        const std::size_t depth = rules.assign({u.node, u.described, u.cluster}, values);
        same = before.profiles[was->profile].levels.size() == depth + 1 && values == was->values();
      }
      if (!same) break;
    }
    if (same) return shared_before;
  }
  // A profile's depth is its number of levels, kubernetes.io/hostname excluded.
  std::vector<std::size_t> count_by_depth(rules.levels.size() + 1, 0);
  std::vector<std::size_t> depth_of_profile(before.profiles.size());
  for (std::size_t p = 0; p < before.profiles.size(); ++p) {
    const std::size_t depth = before.profiles[p].levels.size() - 1;
    depth_of_profile[p] = depth;
    if (depth < count_by_depth.size()) count_by_depth[depth] += before.profiles[p].nodes;
  }

  // `before`'s entries, shared chunk by chunk: only the chunks of the updated Nodes are
  // copied (and every one when a profile appears or disappears, which renumbers them all).
  profile_assignment out;
  out.nodes = before.nodes;
  const auto position = [&](std::string_view name) {
    return out.nodes.partition_point([name](const node_assignment& n) { return n.node < name; });
  };
  std::vector<std::pair<std::string_view, std::size_t>> fresh;  // Node, depth
  for (const profile_update& u : updates) {
    const auto it = position(u.node);
    const std::size_t at = it.index();
    const bool had = it != out.nodes.end() && it->node == u.node;
    if (had) --count_by_depth[depth_of_profile[it->profile]];
    if (u.described == nullptr && u.cluster == nullptr) {  // no longer managed
      if (had) out.nodes.erase(at);
      continue;
    }
    node_assignment a;
    const std::size_t depth = rules.assign({u.node, u.described, u.cluster}, a);
    ++count_by_depth[depth];
    fresh.emplace_back(u.node, depth);
    if (had) {
      out.nodes.set(at, std::move(a));
    } else {
      out.nodes.insert(at, std::move(a));
    }
  }

  std::vector<std::uint32_t> index_of_depth;
  rules.table(count_by_depth, out, index_of_depth);
  // The table moves only when a profile appears or disappears: then every entry is renumbered.
  bool same_table = out.profiles.size() == before.profiles.size();
  for (std::size_t p = 0; same_table && p < out.profiles.size(); ++p)
    same_table = out.profiles[p].id == before.profiles[p].id;
  if (!same_table) {
    std::vector<std::uint32_t> renumber(before.profiles.size());
    for (std::size_t p = 0; p < before.profiles.size(); ++p)
      renumber[p] = index_of_depth[depth_of_profile[p]];
    out.nodes.edit_each([&](node_assignment& n) {
      if (n.profile < renumber.size()) n.profile = renumber[n.profile];
    });
  }
  for (const auto& [name, depth] : fresh)
    out.nodes.edit(position(name).index()).profile = index_of_depth[depth];
  return std::make_shared<const profile_assignment>(std::move(out));
}

profile_impact compute_profile_impact(const profile_assignment& before,
                                      const profile_assignment& after, std::size_t max_listed) {
  profile_impact im;
  im.nodes_before = before.nodes.size();
  im.nodes_after = after.nodes.size();
  im.profiles_before = before.profiles.size();
  im.profiles_after = after.profiles.size();

  auto note = [max_listed](std::vector<profile_change>& list, std::size_t& count,
                           profile_change c) {
    ++count;
    if (list.size() < max_listed) list.push_back(std::move(c));
  };
  // A profile of `before` -> the position of the same profile (by id) in `after`'s table:
  // a Node keeps its profile when its entries map to each other, no id compared per Node.
  constexpr std::uint32_t none = ~std::uint32_t{0};
  std::vector<std::uint32_t> same(before.profiles.size(), none);
  for (std::size_t p = 0; p < before.profiles.size(); ++p)
    for (std::size_t q = 0; q < after.profiles.size(); ++q)
      if (before.profiles[p].id == after.profiles[q].id) same[p] = static_cast<std::uint32_t>(q);
  // A chunk both assignments share holds the same entries, which keep their profiles when
  // each profile keeps its place in the table: it is passed over whole.
  bool same_places = before.profiles.size() == after.profiles.size();
  for (std::size_t p = 0; same_places && p < same.size(); ++p) same_places = same[p] == p;
  auto i = before.nodes.begin();
  auto j = after.nodes.begin();
  const auto i_end = before.nodes.end();
  const auto j_end = after.nodes.end();
  while (i != i_end || j != j_end) {
    if (same_places && i.shares_chunk_with(j)) {
      i.skip_chunk();
      j.skip_chunk();
      continue;
    }
    // Both name mostly the same Nodes in the same order: equal names are tried first.
    if (i != i_end && j != j_end && i->node == j->node) {
      const auto& b = *i++;
      const auto& a = *j++;
      if (same[b.profile] != a.profile)
        note(im.changed, im.changed_count,
             {a.node, before.profile_of(b).id, after.profile_of(a).id});
    } else if (j == j_end || (i != i_end && i->node < j->node)) {
      const auto& b = *i++;
      note(im.removed, im.removed_count, {b.node, before.profile_of(b).id, {}});
    } else {
      const auto& a = *j++;
      note(im.added, im.added_count, {a.node, {}, after.profile_of(a).id});
    }
  }

  auto ids = [](const profile_assignment& pa) {
    std::set<std::string_view> s;
    for (const auto& p : pa.profiles) s.insert(p.id);
    return s;
  };
  const auto before_ids = ids(before);
  const auto after_ids = ids(after);
  for (const auto& p : after.profiles) {
    if (!before_ids.contains(p.id)) im.appeared.push_back(p);
  }
  for (const auto& p : before.profiles) {
    if (!after_ids.contains(p.id)) im.disappeared.push_back(p);
  }
  im.consequences = consequences_of(im);
  return im;
}

std::string render_impact_json(const profile_impact& im, std::size_t max_items) {
  std::string out = "{\"empty\":";
  out += im.empty() ? "true" : "false";
  out += ",\"baseline\":";
  out += im.baseline == impact_baseline::revision      ? "\"revision\""
         : im.baseline == impact_baseline::node_labels ? "\"nodeLabels\""
                                                       : "\"none\"";
  out += ",\"nodesBefore\":" + std::to_string(im.nodes_before);
  out += ",\"nodesAfter\":" + std::to_string(im.nodes_after);
  out += ",\"profilesBefore\":" + std::to_string(im.profiles_before);
  out += ",\"profilesAfter\":" + std::to_string(im.profiles_after);
  out += ",\"profileChanges\":" + std::to_string(im.profile_changes());
  out += ",\"flavorChanges\":" + std::to_string(im.flavor_changes());
  out.push_back(',');
  append_changes(out, "changedNodes", im.changed_count, im.changed, max_items);
  out.push_back(',');
  append_changes(out, "addedNodes", im.added_count, im.added, max_items);
  out.push_back(',');
  append_changes(out, "removedNodes", im.removed_count, im.removed, max_items);
  out.push_back(',');
  append_profiles(out, "appearedProfiles", im.appeared);
  out.push_back(',');
  append_profiles(out, "disappearedProfiles", im.disappeared);
  out += ",\"consequences\":[";
  for (std::size_t i = 0; i < im.consequences.size(); ++i) {
    if (i != 0) out.push_back(',');
    append_json_string(out, im.consequences[i]);
  }
  out += "]}";
  return out;
}

std::string summarize_impact(const profile_impact& im) {
  if (im.empty()) return "no profile change";
  return std::to_string(im.changed_count) + " Node(s) change profile, " +
         std::to_string(im.added_count) + " added, " + std::to_string(im.removed_count) +
         " removed; profiles +" + std::to_string(im.appeared.size()) + " -" +
         std::to_string(im.disappeared.size());
}

std::string render_impact_text(const profile_impact& im) {
  std::string out = "Profile impact: " + summarize_impact(im);
  if (im.baseline == impact_baseline::node_labels)
    out +=
        " (against the Nodes' topology.gpustack.ai/profile labels: the first revision of this "
        "process)";
  out += "\n";
  if (im.empty()) return out;
  for (const auto& p : im.appeared) {
    out += "  + profile " + p.id + " (" + levels_text(p.levels) + "), " + std::to_string(p.nodes) +
           " Node(s)\n";
  }
  for (const auto& p : im.disappeared) {
    out += "  - profile " + p.id + " (" + levels_text(p.levels) + "), " + std::to_string(p.nodes) +
           " Node(s)\n";
  }
  auto list = [&out](std::string_view what, std::size_t count,
                     const std::vector<profile_change>& items) {
    if (count == 0) return;
    out += "  " + std::string(what) + ": " + std::to_string(count) + "\n";
    for (const auto& c : items) {
      out += "    " + c.node + ": " + (c.from.empty() ? "-" : c.from) + " -> " +
             (c.to.empty() ? "-" : c.to) + "\n";
    }
    if (count > items.size()) out += "    ... " + std::to_string(count - items.size()) + " more\n";
  };
  list("Nodes changing profile", im.changed_count, im.changed);
  list("Nodes added", im.added_count, im.added);
  list("Nodes removed", im.removed_count, im.removed);
  for (const auto& c : im.consequences) out += "  * " + c + "\n";
  return out;
}

}  // namespace topogate::core

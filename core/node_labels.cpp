#include "node_labels.hpp"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>

#include "hierarchy_internal.hpp"
#include "profile.hpp"
#include "syntax.hpp"

namespace topogate::core {

// ---------------------------------------------------------------------------------------
// Rules shared with the snapshot check.

namespace detail {

std::string node_label_path(std::string_view node, std::string_view k) {
  return key(key("nodes", node), k);
}

bool is_domain_value(std::string_view value) noexcept {
  // The consumer keys a topology domain by its value: an empty one names no domain.
  return !value.empty() && is_label_value(value);
}

field_error domain_value_error(std::string path, std::string_view value) {
  std::string why = "a label value must be non-empty";
  if (!value.empty()) {
    const auto problems = check_label_value(value);
    why = problems.empty() ? "invalid label value" : problems.front();
  }
  return invalid("S7", std::move(path), value, std::move(why));
}

field_error missing_parent_error(std::string path, std::string_view child,
                                 std::string_view parent) {
  return required("S8", std::move(path),
                  "the node carries " + std::string(child) + " but not its parent level " +
                      std::string(parent) + " (a node may omit a fine suffix, never a parent)");
}

field_error parent_conflict_error(std::string path, std::string_view value,
                                  std::string_view first_tuple, std::string_view first_node,
                                  std::string_view here_tuple) {
  return invalid("S9", std::move(path), value,
                 "this value is already under " + std::string(first_tuple) + " on node " +
                     std::string(first_node) + "; here it is under " + std::string(here_tuple) +
                     " (a child value belongs to exactly one parent)");
}

void append_tuple_entry(std::string& out, bool first, std::string_view k, std::string_view value) {
  if (!first) out += ", ";
  out += k;
  out += '=';
  out += value;
}

}  // namespace detail

std::string_view to_string(nesting n) noexcept {
  switch (n) {
    case nesting::root:
      return "root";
    case nesting::nested:
      return "nested";
    case nesting::conflicting:
      return "conflicting";
    case nesting::independent:
      return "independent";
  }
  return "nested";
}

namespace {

// Hostile or broken clusters must not turn into an unbounded error list (as for snapshots).
constexpr std::size_t error_cap = 1000;

using tuple_t = std::vector<std::string_view>;

std::string tuple_text(const std::vector<std::string>& levels, const tuple_t& values) {
  std::string out = "{";
  for (std::size_t i = 0; i < values.size(); ++i)
    detail::append_tuple_entry(out, i == 0, levels[i], values[i]);
  out += '}';
  return out;
}

}  // namespace

node_label_report check_node_labels(const topology_source& src, const node_list& all) {
  node_label_report r;
  const node_list selected = select_nodes(all, src);
  // The consumer checks the hierarchy in its normalized order (tier runs reversed as for
  // profiles), not in the order listed; `listed[i]` is level i's index in spec.levels.
  const std::vector<std::string> levels = normalize_levels(src.levels);
  const std::size_t L = levels.size();
  std::vector<std::size_t> listed(L, 0);
  for (std::size_t i = 0; i < L; ++i)
    listed[i] = static_cast<std::size_t>(
        std::find(src.levels.begin(), src.levels.end(), levels[i]) - src.levels.begin());
  const std::size_t N = selected.nodes.size();
  r.total_nodes = all.nodes.size();
  r.selected_nodes = N;

  // values[n * L + i]: node n's label for level i (null when absent). Nodes are in name
  // order, the order in which the consumer visits them.
  std::vector<const std::string*> values(N * L, nullptr);
  std::vector<std::size_t> chain(N, 0);  // levels carried without a gap from the first
  std::map<std::string, profile_summary> profiles;
  for (std::size_t n = 0; n < N; ++n) {
    const cluster_node& node = selected.nodes[n];
    const std::string** mine = values.data() + n * L;
    std::size_t deepest = L;
    for (std::size_t i = 0; i < L; ++i) {
      mine[i] = node.label(levels[i]);
      // An empty value is no value to the consumer: the Node simply has a shorter profile.
      if (mine[i] != nullptr && mine[i]->empty()) mine[i] = nullptr;
      if (!mine[i]) continue;
      deepest = i;
      if (!detail::is_domain_value(*mine[i]))
        r.errors.push_back(
            detail::domain_value_error(detail::node_label_path(node.name, levels[i]), *mine[i]));
    }
    if (deepest != L) {
      for (std::size_t i = 0; i < deepest; ++i)
        if (!mine[i])
          r.errors.push_back(detail::missing_parent_error(
              detail::node_label_path(node.name, levels[i]), levels[deepest], levels[i]));
    }
    while (chain[n] < L && mine[chain[n]]) ++chain[n];

    profile p = derive_profile(levels, node.labels);
    r.nodes.push_back({node.name, p.id, p.levels.size() - 1});
    auto [it, inserted] = profiles.try_emplace(p.id);
    if (inserted) {
      it->second.id = p.id;
      it->second.levels = std::move(p.levels);
    }
    ++it->second.nodes;
  }

  for (std::size_t i = 0; i < L; ++i) {
    level_summary& s = r.levels.emplace_back();
    s.key = levels[i];
    std::map<std::string_view, std::size_t> counts;
    for (std::size_t n = 0; n < N; ++n)
      if (const std::string* v = values[n * L + i]) ++counts[*v];
    for (const auto& [v, c] : counts) {
      s.domains.push_back({std::string(v), c});
      s.nodes += c;
    }
    s.verdict = i == 0 ? nesting::root : nesting::nested;
  }

  // S9 as the consumer applies it: keyed by the tuple of all ancestor values, over the Nodes
  // that carry the level with its whole chain (a broken chain is already an S8 error).
  error_list conflict_errors;
  for (std::size_t i = 1; i < L; ++i) {
    // value -> ancestor tuple -> Nodes (in name order); the first tuple met is the smallest
    // Node name's, which sets the value's parents.
    std::map<std::string_view, std::vector<std::pair<tuple_t, std::vector<std::size_t>>>> seen;
    std::map<std::string_view, std::set<std::string_view>> direct_parents;
    for (std::size_t n = 0; n < N; ++n) {
      if (chain[n] <= i) continue;
      const std::string_view value = *values[n * L + i];
      tuple_t tuple;
      tuple.reserve(i);
      for (std::size_t j = 0; j < i; ++j) tuple.emplace_back(*values[n * L + j]);
      direct_parents[value].insert(tuple.back());
      auto& placements = seen[value];
      auto it = std::find_if(placements.begin(), placements.end(),
                             [&](const auto& p) { return p.first == tuple; });
      if (it == placements.end()) {
        placements.push_back({std::move(tuple), {n}});
      } else {
        it->second.push_back(n);
      }
    }
    level_summary& s = r.levels[i];
    std::size_t several_direct = 0;
    for (const auto& [value, parents] : direct_parents) several_direct += parents.size() > 1;
    for (const auto& [value, placements] : seen) {
      if (placements.size() < 2) continue;
      ++s.conflicting_values;
      parent_conflict& c = r.conflicts.emplace_back();
      c.level = levels[i];
      c.value = std::string(value);
      const std::string first_tuple = tuple_text(levels, placements.front().first);
      const std::string& first_node = selected.nodes[placements.front().second.front()].name;
      for (const auto& [tuple, nodes] : placements) {
        auto& p = c.placements.emplace_back();
        p.parents = tuple_text(levels, tuple);
        for (std::size_t n : nodes) p.nodes.push_back(selected.nodes[n].name);
      }
      for (std::size_t k = 1; k < placements.size(); ++k)
        for (std::size_t n : placements[k].second)
          conflict_errors.push_back(detail::parent_conflict_error(
              detail::node_label_path(selected.nodes[n].name, levels[i]), value, first_tuple,
              first_node, c.placements[k].parents));
    }
    if (s.conflicting_values == 0) continue;
    // One misplaced rack is a labelling mistake; most racks under several zones means the two
    // labels are independent dimensions (rack and accelerator partition), which the runbook
    // says never to list as a hierarchy. The direct parent decides, so that a zone under two
    // regions does not make every one of its racks look independent of zones.
    if (several_direct >= 2 && several_direct * 2 >= direct_parents.size()) {
      s.verdict = nesting::independent;
      conflict_errors.push_back(
          invalid("S9", index(child("spec", "levels"), listed[i]), levels[i],
                  std::to_string(several_direct) + " of " + std::to_string(direct_parents.size()) +
                      " values of " + levels[i] + " sit under more than one " + levels[i - 1] +
                      ": these labels are two independent dimensions, not a nested hierarchy; list "
                      "only a real "
                      "nested hierarchy"));
    } else {
      s.verdict = nesting::conflicting;
    }
  }
  r.errors.insert(r.errors.end(), std::make_move_iterator(conflict_errors.begin()),
                  std::make_move_iterator(conflict_errors.end()));
  if (r.errors.size() > error_cap) {
    const std::size_t total = r.errors.size();
    const std::string rule = r.errors[error_cap].rule;
    r.errors.resize(error_cap);
    field_error e = too_many(rule, "nodes", total, error_cap);
    e.detail = std::to_string(total - error_cap) + " more errors not shown";
    r.errors.push_back(std::move(e));
  }

  for (auto& [id, p] : profiles) r.profiles.push_back(std::move(p));
  std::stable_sort(r.profiles.begin(), r.profiles.end(),
                   [](const profile_summary& a, const profile_summary& b) {
                     return a.levels.size() > b.levels.size();
                   });
  return r;
}

// ---------------------------------------------------------------------------------------
// Rendering.

std::string render_node_label_report_json(const node_label_report& r) {
  std::string out = "{\"valid\":";
  out += r.ok() ? "true" : "false";
  out += ",\"totalNodes\":" + std::to_string(r.total_nodes);
  out += ",\"selectedNodes\":" + std::to_string(r.selected_nodes);
  out += ",\"levels\":[";
  for (std::size_t i = 0; i < r.levels.size(); ++i) {
    const level_summary& s = r.levels[i];
    if (i) out += ',';
    out += "{\"key\":";
    append_json_string(out, s.key);
    out += ",\"nodes\":" + std::to_string(s.nodes);
    out += ",\"nesting\":";
    append_json_string(out, to_string(s.verdict));
    out += ",\"conflictingValues\":" + std::to_string(s.conflicting_values);
    out += ",\"domains\":[";
    for (std::size_t d = 0; d < s.domains.size(); ++d) {
      if (d) out += ',';
      out += "{\"value\":";
      append_json_string(out, s.domains[d].value);
      out += ",\"nodes\":" + std::to_string(s.domains[d].nodes) + "}";
    }
    out += "]}";
  }
  out += "],\"conflicts\":[";
  for (std::size_t i = 0; i < r.conflicts.size(); ++i) {
    const parent_conflict& c = r.conflicts[i];
    if (i) out += ',';
    out += "{\"level\":";
    append_json_string(out, c.level);
    out += ",\"value\":";
    append_json_string(out, c.value);
    out += ",\"placements\":[";
    for (std::size_t p = 0; p < c.placements.size(); ++p) {
      if (p) out += ',';
      out += "{\"parents\":";
      append_json_string(out, c.placements[p].parents);
      out += ",\"nodes\":[";
      for (std::size_t n = 0; n < c.placements[p].nodes.size(); ++n) {
        if (n) out += ',';
        append_json_string(out, c.placements[p].nodes[n]);
      }
      out += "]}";
    }
    out += "]}";
  }
  out += "],\"profiles\":[";
  for (std::size_t i = 0; i < r.profiles.size(); ++i) {
    const profile_summary& p = r.profiles[i];
    if (i) out += ',';
    out += "{\"id\":";
    append_json_string(out, p.id);
    out += ",\"levels\":[";
    for (std::size_t l = 0; l < p.levels.size(); ++l) {
      if (l) out += ',';
      append_json_string(out, p.levels[l]);
    }
    out += "],\"nodes\":" + std::to_string(p.nodes) + "}";
  }
  out += "],\"nodes\":[";
  for (std::size_t i = 0; i < r.nodes.size(); ++i) {
    if (i) out += ',';
    out += "{\"name\":";
    append_json_string(out, r.nodes[i].node);
    out += ",\"profile\":";
    append_json_string(out, r.nodes[i].profile_id);
    out += ",\"depth\":" + std::to_string(r.nodes[i].depth) + "}";
  }
  out += "],\"errors\":";
  out += render_json(r.errors);
  out += '}';
  return out;
}

namespace {

// Left-aligned columns, two spaces apart (kubectl's table style).
std::string table(const std::vector<std::vector<std::string>>& rows) {
  std::vector<std::size_t> width;
  for (const auto& row : rows)
    for (std::size_t c = 0; c < row.size(); ++c) {
      if (width.size() <= c) width.push_back(0);
      width[c] = std::max(width[c], row[c].size());
    }
  std::string out;
  for (const auto& row : rows) {
    std::string line;
    for (std::size_t c = 0; c < row.size(); ++c) {
      line += row[c];
      if (c + 1 < row.size()) line.append(width[c] - row[c].size() + 2, ' ');
    }
    out += line;
    out += '\n';
  }
  return out;
}

}  // namespace

std::string render_node_label_report_text(const node_label_report& r) {
  std::string out = "Nodes: " + std::to_string(r.selected_nodes) + " selected of " +
                    std::to_string(r.total_nodes) + "\n\n";
  std::vector<std::vector<std::string>> rows = {
      {"LEVEL", "NODES", "NESTING", "VALUE", "VALUE NODES"}};
  for (const level_summary& s : r.levels) {
    std::vector<std::string> head = {s.key, std::to_string(s.nodes),
                                     std::string(to_string(s.verdict))};
    if (s.domains.empty()) {
      head.insert(head.end(), {"-", "0"});
      rows.push_back(std::move(head));
      continue;
    }
    for (std::size_t d = 0; d < s.domains.size(); ++d) {
      std::vector<std::string> row = d == 0 ? head : std::vector<std::string>{"", "", ""};
      row.push_back(s.domains[d].value);
      row.push_back(std::to_string(s.domains[d].nodes));
      rows.push_back(std::move(row));
    }
  }
  out += table(rows);
  if (!r.conflicts.empty()) {
    out += "\nValues under more than one parent:\n";
    rows = {{"LEVEL", "VALUE", "PARENTS", "NODES"}};
    for (const parent_conflict& c : r.conflicts) {
      for (std::size_t p = 0; p < c.placements.size(); ++p) {
        std::string nodes;
        for (std::size_t n = 0; n < c.placements[p].nodes.size(); ++n) {
          if (n) nodes += ',';
          nodes += c.placements[p].nodes[n];
        }
        rows.push_back(
            {p == 0 ? c.level : "", p == 0 ? c.value : "", c.placements[p].parents, nodes});
      }
    }
    out += table(rows);
  }
  out += "\nProfiles:\n";
  rows = {{"PROFILE", "NODES", "LEVELS"}};
  for (const profile_summary& p : r.profiles) {
    std::string levels;
    for (std::size_t l = 0; l < p.levels.size(); ++l) {
      if (l) levels += " > ";
      levels += p.levels[l];
    }
    rows.push_back({p.id, std::to_string(p.nodes), levels});
  }
  out += table(rows);
  out += "\nNodes:\n";
  rows = {{"NODE", "PROFILE", "DEPTH"}};
  for (const node_profile_entry& n : r.nodes)
    rows.push_back({n.node, n.profile_id, std::to_string(n.depth)});
  out += table(rows);
  return out;
}

}  // namespace topogate::core

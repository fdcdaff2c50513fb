#include "ownership.hpp"

#include <algorithm>
#include <tuple>

namespace topogate::core {

namespace {

bool selects(const ownership_source& s, const ownership_node& n) {
  static const std::vector<std::pair<std::string, std::string>> none;
  return s.selector == nullptr || s.selector->matches(n.labels != nullptr ? *n.labels : none);
}

// How many Nodes a description names before it only counts the rest.
constexpr std::size_t nodes_named = 5;

std::string_view meta_text(const doc_node& o, std::string_view key) noexcept {
  const doc_node* meta = o.find("metadata");
  const doc_node* n = meta != nullptr ? meta->find(key) : nullptr;
  return n != nullptr && n->is_scalar() ? std::string_view(n->text) : std::string_view();
}

}  // namespace

std::optional<owned_source> read_ownership_source(const doc_node& o) {
  owned_source s;
  s.namespace_ = std::string(meta_text(o, "namespace"));
  s.name = std::string(meta_text(o, "name"));
  const doc_node* spec = o.find("spec");
  if (spec == nullptr || !spec->is_mapping()) return std::nullopt;
  if (const doc_node* levels = spec->find("levels"); levels && levels->is_sequence())
    for (const auto& l : levels->items)
      if (l.is_scalar()) s.levels.push_back(l.text);
  if (const doc_node* sel = spec->find("nodeSelector"); sel && sel->is_mapping()) {
    error_list invalid;  // an invalid selector is already a T14 violation
    label_selector parsed;
    validate_label_selector(*sel, "spec.nodeSelector", "T14", invalid, &parsed);
    if (!invalid.empty()) return std::nullopt;
    s.selector = std::move(parsed);
  }
  for (const char* arm : {"configMap", "webhook"})
    if (const doc_node* a = spec->find(arm); a && !a->is_null()) s.writes = true;
  return s;
}

std::vector<ownership_conflict> find_ownership_conflicts(
    const std::vector<ownership_source>& sources, const std::vector<ownership_node>& nodes) {
  std::vector<ownership_conflict> out;
  for (std::size_t i = 0; i < sources.size(); ++i) {
    for (std::size_t j = i + 1; j < sources.size(); ++j) {
      const ownership_source& a = sources[i];
      const ownership_source& b = sources[j];
      if (!a.writes || !b.writes || a.name == b.name || !a.levels || !b.levels) continue;
      ownership_conflict c;
      for (const auto& level : *a.levels)
        if (std::find(b.levels->begin(), b.levels->end(), level) != b.levels->end() &&
            std::find(c.levels.begin(), c.levels.end(), level) == c.levels.end())
          c.levels.push_back(level);
      if (c.levels.empty()) continue;
      for (const ownership_node& n : nodes)
        if (selects(a, n) && selects(b, n)) c.nodes.emplace_back(n.name);
      if (c.nodes.empty()) continue;
      std::sort(c.nodes.begin(), c.nodes.end());
      c.first = std::string(std::min(a.name, b.name));
      c.second = std::string(std::max(a.name, b.name));
      out.push_back(std::move(c));
    }
  }
  std::sort(out.begin(), out.end(), [](const ownership_conflict& x, const ownership_conflict& y) {
    return std::tie(x.first, x.second) < std::tie(y.first, y.second);
  });
  return out;
}

std::string describe(const ownership_conflict& c) {
  std::string out = "writing sources " + c.first + " and " + c.second + " both list ";
  for (std::size_t i = 0; i < c.levels.size(); ++i) out += (i ? ", " : "") + c.levels[i];
  out += " and select " + std::to_string(c.nodes.size()) +
         (c.nodes.size() == 1 ? " Node (" : " Nodes (");
  for (std::size_t i = 0; i < c.nodes.size() && i < nodes_named; ++i)
    out += (i ? ", " : "") + c.nodes[i];
  if (c.nodes.size() > nodes_named) out += ", ...";
  out += "): the consumer publishes neither (Ready=False, OwnershipConflict)";
  return out;
}

}  // namespace topogate::core

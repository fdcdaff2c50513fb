#include "admission/ownership.hpp"

#include "admission/review.hpp"

namespace topogate::admission {

namespace {

std::string nodes_word(std::size_t n) { return std::to_string(n) + (n == 1 ? " Node" : " Nodes"); }

}  // namespace

std::string ownership_warning(std::string_view other, const std::vector<std::string>& levels,
                              const std::vector<std::string>& nodes) {
  constexpr std::size_t budget = max_warning_length;
  const std::string head =
      "OwnershipConflict with TopologySource " + std::string(other) + ", neither publishes: ";
  const std::string on = " on " + nodes_word(nodes.size());
  // Levels: as many as fit, the rest counted; at least their number.
  std::string lv;
  std::size_t listed = 0;
  for (const auto& l : levels) {
    const std::size_t rest = levels.size() - listed - 1;
    const std::string part = (listed ? ", " : "") + l;
    const std::size_t reserve = rest ? 4 + std::to_string(rest).size() : 0;  // " +K"
    if (head.size() + lv.size() + part.size() + reserve + on.size() > budget) break;
    lv += part;
    ++listed;
  }
  if (listed == 0)
    lv = std::to_string(levels.size()) + (levels.size() == 1 ? " level" : " levels");
  else if (listed < levels.size())
    lv += " +" + std::to_string(levels.size() - listed);
  std::string out = head + lv + on;
  // Nodes: as many names as fit, the rest counted.
  std::string names;
  std::size_t named = 0;
  for (const auto& n : nodes) {
    const std::size_t rest = nodes.size() - named - 1;
    const std::string part = (named ? ", " : " (") + n;
    const std::size_t reserve = (rest ? 4 + std::to_string(rest).size() : 0) + 1;  // ", +M" ")"
    if (out.size() + names.size() + part.size() + reserve > budget) break;
    names += part;
    ++named;
  }
  if (named > 0) {
    if (named < nodes.size()) names += ", +" + std::to_string(nodes.size() - named);
    out += names + ")";
  }
  return out;
}

std::vector<std::string> ownership_warnings(const ownership_snapshot& snap,
                                            const core::doc_node& object) {
  std::vector<std::string> out;
  const auto self = core::read_ownership_source(object);
  if (!self || !self->writes || self->levels.empty()) return out;
  // The Nodes this object selects, once: each pair below is checked over these only.
  std::vector<core::ownership_node> mine;
  const core::ownership_source me = self->view();
  for (const auto& [name, labels] : snap.nodes)
    if (me.selector == nullptr || me.selector->matches(labels)) mine.push_back({name, &labels});
  if (mine.empty()) return out;
  std::size_t conflicts = 0;
  for (const auto& other : snap.sources) {
    if (!other.writes || other.name.empty()) continue;
    // Its own old version (UPDATE), by namespace and name.
    if (other.namespace_ == self->namespace_ && other.name == self->name) continue;
    core::ownership_source o = other.view();
    core::ownership_source m = me;
    // The pair's names only order the result; a CREATE with generateName has none yet.
    if (m.name.empty() || m.name == o.name) m.name = "\x01";
    const auto found = core::find_ownership_conflicts({m, o}, mine);
    if (found.empty()) continue;
    if (++conflicts <= max_ownership_warnings)
      out.push_back(ownership_warning(other.name, found.front().levels, found.front().nodes));
  }
  if (conflicts > max_ownership_warnings) {
    out.push_back("OwnershipConflict with " + std::to_string(conflicts - max_ownership_warnings) +
                  " more writing TopologySources");
  }
  return out;
}

}  // namespace topogate::admission

#include "core/rules.hpp"

#include <algorithm>
#include <charconv>
#include <utility>

namespace topogate::core {
namespace {

// A rule id split for ordering: its letter(s) and its number ("T10" -> {"T", 10}).
std::pair<std::string_view, unsigned> rule_key(std::string_view r) noexcept {
  std::size_t digits = r.size();
  while (digits > 0 && r[digits - 1] >= '0' && r[digits - 1] <= '9') --digits;
  unsigned n = 0;
  std::from_chars(r.data() + digits, r.data() + r.size(), n);
  return {r.substr(0, digits), n};
}

}  // namespace

std::span<const rule_info> rules_of(rule_kind kind) noexcept {
  const auto first =
      std::find_if(rules.begin(), rules.end(), [&](const rule_info& r) { return r.kind == kind; });
  const auto last =
      std::find_if(first, rules.end(), [&](const rule_info& r) { return r.kind != kind; });
  return {first, last};
}

const rule_info* find_rule(std::string_view id) noexcept {
  const auto it =
      std::find_if(rules.begin(), rules.end(), [&](const rule_info& r) { return r.id == id; });
  return it == rules.end() ? nullptr : &*it;
}

bool rule_less(std::string_view a, std::string_view b) noexcept {
  const auto ka = rule_key(a), kb = rule_key(b);
  if (ka.first != kb.first) return ka.first < kb.first;
  if (ka.second != kb.second) return ka.second < kb.second;
  return a < b;
}

std::string_view kind_name(rule_kind kind) noexcept {
  switch (kind) {
    case rule_kind::topology_source:
      return "TopologySource";
    case rule_kind::snapshot:
      return "snapshot";
    case rule_kind::model_deployment:
      return "ModelDeployment";
  }
  return "";
}

}  // namespace topogate::core

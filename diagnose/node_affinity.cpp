// A PodSet's required node affinity as Kueue v0.17.0 reads it: matched against a Node's labels
// and name (labels.Requirement, the fields In/NotIn of one value), and, when a term does not
// parse, the errors Kubernetes' component-helpers give for it, worded as they are.

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "diagnose/cluster_objects.hpp"
#include "diagnose/diagnose_internal.hpp"

namespace topogate::diagnose {

namespace {

// Go's strconv.ParseInt(t, 10, 64): an optional sign, then decimal digits only, in range.
std::optional<std::int64_t> go_int(std::string_view t) {
  std::string_view digits = t;
  if (!digits.empty() && (digits[0] == '+' || digits[0] == '-')) digits.remove_prefix(1);
  if (digits.empty() ||
      !std::all_of(digits.begin(), digits.end(), [](char ch) { return ch >= '0' && ch <= '9'; }))
    return std::nullopt;
  const std::string_view number = t[0] == '+' ? t.substr(1) : t;
  std::int64_t v = 0;
  const auto [end, ec] = std::from_chars(number.data(), number.data() + number.size(), v);
  if (ec != std::errc() || end != number.data() + number.size()) return std::nullopt;
  return v;
}

// One requirement of a term, as labels.Requirement matches it; an invalid requirement (an
// unknown operator, a wrong number of values) makes its term match nothing.
bool requirement_matches(const node_selector_requirement& r, const std::string* value) {
  const auto in = [&] {
    return value && std::find(r.values.begin(), r.values.end(), *value) != r.values.end();
  };
  if (r.op == "In") return !r.values.empty() && in();
  if (r.op == "NotIn") return !r.values.empty() && !in();
  if (r.op == "Exists") return r.values.empty() && value;
  if (r.op == "DoesNotExist") return r.values.empty() && !value;
  if (r.op == "Gt" || r.op == "Lt") {
    if (r.values.size() != 1 || !value) return false;
    const std::optional<std::int64_t> want = go_int(r.values[0]);
    const std::optional<std::int64_t> have = go_int(*value);
    if (!want.has_value() || !have.has_value()) return false;
    const std::int64_t w = want.value(), h = have.value();
    return r.op == "Gt" ? h > w : h < w;
  }
  return false;
}

}  // namespace

bool affinity_matches(const node_affinity& terms, const label_map& labels, std::string_view name) {
  for (const auto& t : terms) {
    if (t.match_expressions.empty() && t.match_fields.empty()) continue;
    bool ok = true;
    for (const auto& r : t.match_expressions)
      ok = ok && requirement_matches(r, find_label(labels, r.key));
    if (!name.empty())
      for (const auto& f : t.match_fields) {
        // Fields: In and NotIn of exactly one value; a Node has metadata.name only.
        const std::string v = f.key == "metadata.name" ? std::string(name) : std::string();
        const bool valid = (f.op == "In" || f.op == "NotIn") && f.values.size() == 1;
        ok = ok && valid && ((f.op == "In") == (v == f.values[0]));
      }
    else
      for (const auto& f : t.match_fields)
        ok = ok && (f.op == "In" || f.op == "NotIn") && f.values.size() == 1;
    if (ok) return true;
  }
  return false;
}

namespace {

// A string as Go's encoding/json writes it (HTML characters escaped).
std::string go_json_string(std::string_view s) {
  std::string out = "\"";
  for (const char ch : s) {
    const auto u = static_cast<unsigned char>(ch);
    if (ch == '"' || ch == '\\') {
      out += '\\';
      out += ch;
    } else if (u < 0x20 || ch == '<' || ch == '>' || ch == '&') {
      static const char* hex = "0123456789abcdef";
      out += "\\u00";
      out += hex[u >> 4];
      out += hex[u & 15];
    } else {
      out += ch;
    }
  }
  return out + "\"";
}

// A requirement's values as apimachinery prints a bad []string: its JSON (null for nil).
std::string values_json(const node_selector_requirement& r) {
  if (r.values_null && r.values.empty()) return "null";
  std::string out = "[";
  for (std::size_t i = 0; i < r.values.size(); ++i)
    out += (i ? "," : "") + go_json_string(r.values[i]);
  return out + "]";
}

}  // namespace

std::vector<std::string> affinity_term_errors(const node_selector_term& term, std::size_t index) {
  std::vector<std::string> errs;
  const std::string at = "nodeSelectorTerms[" + std::to_string(index) + "]";
  const auto invalid = [&](const std::string& path, const std::string& value,
                           const std::string& detail) {
    errs.push_back(path + ": Invalid value: " + value + ": " + detail);
  };
  const auto unsupported = [&](const std::string& path, const std::string& op,
                               const std::string& supported) {
    errs.push_back(path + ".operator: Unsupported value: " + go_json_string(op) +
                   ": supported values: " + supported);
  };
  for (std::size_t j = 0; j < term.match_expressions.size(); ++j) {
    const auto& r = term.match_expressions[j];
    const std::string p = at + ".matchExpressions[" + std::to_string(j) + "]";
    if (r.op == "In" || r.op == "NotIn") {
      if (r.values.empty())
        invalid(p + ".values", values_json(r),
                "for 'in', 'notin' operators, values set can't be empty");
    } else if (r.op == "Exists" || r.op == "DoesNotExist") {
      if (!r.values.empty())
        invalid(p + ".values", values_json(r),
                "values set must be empty for exists and does not exist");
    } else if (r.op == "Gt" || r.op == "Lt") {
      if (r.values.size() != 1)
        invalid(p + ".values", values_json(r),
                "for 'Gt', 'Lt' operators, exactly one value is required");
      for (std::size_t k = 0; k < r.values.size(); ++k)
        if (!go_int(r.values[k]))
          invalid(p + ".values[" + std::to_string(k) + "]", go_json_string(r.values[k]),
                  "for 'Gt', 'Lt' operators, the value must be an integer");
    } else {
      unsupported(p, r.op, "\"In\", \"NotIn\", \"Exists\", \"DoesNotExist\", \"Gt\", \"Lt\"");
    }
  }
  for (std::size_t j = 0; j < term.match_fields.size(); ++j) {
    const auto& f = term.match_fields[j];
    const std::string p = at + ".matchFields[" + std::to_string(j) + "]";
    if (f.op == "In" || f.op == "NotIn") {
      if (f.values.size() != 1) invalid(p + ".values", values_json(f), "must have one element");
    } else {
      unsupported(p, f.op, "\"In\", \"NotIn\"");
    }
  }
  return errs;
}

std::string aggregate_errors(const std::vector<std::string>& errors) {
  std::vector<std::string> seen;
  for (const auto& e : errors)
    if (std::find(seen.begin(), seen.end(), e) == seen.end()) seen.push_back(e);
  if (seen.empty()) return {};
  if (seen.size() == 1) return seen.front();
  return "[" + detail::join(seen, ", ") + "]";
}

std::string node_selector_text(const node_affinity& terms) {
  const auto requirements = [](const std::vector<node_selector_requirement>& rs) {
    std::string out = "[]NodeSelectorRequirement{";
    for (const auto& r : rs)
      out += "NodeSelectorRequirement{Key:" + r.key + ",Operator:" + r.op + ",Values:[" +
             detail::join(r.values, " ") + "],},";
    return out + "}";
  };
  std::string out = "&NodeSelector{NodeSelectorTerms:[]NodeSelectorTerm{";
  for (const auto& t : terms)
    out += "NodeSelectorTerm{MatchExpressions:" + requirements(t.match_expressions) +
           ",MatchFields:" + requirements(t.match_fields) + ",},";
  return out + "},}";
}

}  // namespace topogate::diagnose

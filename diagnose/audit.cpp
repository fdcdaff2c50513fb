#include "diagnose/audit.hpp"

#include <algorithm>
#include <tuple>

#include "core/admitted_kinds.hpp"
#include "core/rules.hpp"

namespace topogate::diagnose {

namespace {

std::string_view text_of(const core::doc_node* n) noexcept {
  return n != nullptr && n->is_scalar() ? std::string_view(n->text) : std::string_view();
}

std::string_view group_of(std::string_view api_version) noexcept {
  const auto slash = api_version.find('/');
  return slash == std::string_view::npos ? std::string_view() : api_version.substr(0, slash);
}

std::string_view meta_text(const core::doc_node& o, std::string_view key) noexcept {
  const core::doc_node* meta = o.find("metadata");
  return text_of(meta != nullptr ? meta->find(key) : nullptr);
}

// The kinds admission validates (core/admitted_kinds.hpp), named by an object or a typed list.
const core::admitted_kind* audited_kind(std::string_view api_version,
                                        std::string_view kind) noexcept {
  return core::find_admitted_kind(group_of(api_version), kind);
}

// The parts of a TopologySource an ownership conflict depends on.
void remember_source(audit_report& into, const core::doc_node& o) {
  auto s = core::read_ownership_source(o);
  if (!s) return;
  into.sources_seen.push_back(
      {std::move(s->name), std::move(s->levels), std::move(s->selector), s->writes});
}

void remember_node(audit_report& into, const core::doc_node& o) {
  std::vector<std::pair<std::string, std::string>> labels;
  const core::doc_node* meta = o.find("metadata");
  if (const core::doc_node* l = meta ? meta->find("labels") : nullptr; l && l->is_mapping())
    for (const auto& [k, v] : l->map) labels.emplace_back(k, v.is_scalar() ? v.text : "");
  std::sort(labels.begin(), labels.end());
  into.nodes_seen.emplace_back(std::string(meta_text(o, "name")), std::move(labels));
  ++into.nodes;
}

void check_one(audit_report& into, const core::doc_node& o, const core::admitted_kind& kind,
               const audit_options& opts) {
  audited_object obj;
  obj.kind = std::string(kind.kind);
  obj.name = std::string(meta_text(o, "name"));
  if (kind.namespaced) {
    obj.namespace_ = std::string(meta_text(o, "namespace"));
    if (!opts.namespaces.empty() && std::find(opts.namespaces.begin(), opts.namespaces.end(),
                                              obj.namespace_) == opts.namespaces.end()) {
      ++into.out_of_scope;
      return;
    }
  }
  // Admission's own validation of a CREATE or UPDATE of the kind (admission/review.cpp).
  std::vector<std::string> warnings;
  kind.validate(o, opts.validation, obj.errors, warnings);
  switch (kind.route) {
    case core::admission_route::topology_sources:
      ++into.topology_sources;
      remember_source(into, o);
      break;
    case core::admission_route::model_deployments:
      ++into.model_deployments;
      break;
  }
  if (!obj.errors.empty()) into.violating.push_back(std::move(obj));
}

std::string plural(std::size_t n, std::string_view one) {
  std::string s = std::to_string(n) + " " + std::string(one);
  if (n != 1) s += 's';
  return s;
}

}  // namespace

std::string audited_object::id() const {
  std::string out = namespace_.empty() ? std::string() : namespace_ + "/";
  out += name.empty() ? std::string("<no name>") : name;
  return out;
}

std::vector<std::string> audited_object::rules() const {
  std::vector<std::string> out;
  for (const auto& e : errors) out.push_back(e.rule);
  std::sort(out.begin(), out.end(),
            [](const std::string& a, const std::string& b) { return core::rule_less(a, b); });
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::map<std::pair<std::string, std::string>, std::size_t> audit_report::objects_by_rule() const {
  std::map<std::pair<std::string, std::string>, std::size_t> out;
  for (const auto& o : violating) {
    for (const auto& r : o.rules()) ++out[{o.kind, r}];
  }
  return out;
}

std::map<std::string, std::size_t> audit_report::violations_by_rule() const {
  std::map<std::string, std::size_t> out;
  for (const auto& o : violating) {
    for (const auto& e : o.errors) ++out[e.rule];
  }
  return out;
}

std::size_t audit_report::violation_count() const noexcept {
  std::size_t n = 0;
  for (const auto& o : violating) n += o.errors.size();
  return n;
}

void audit_objects(audit_report& into, const core::doc_node& o, const audit_options& opts) {
  if (!o.is_mapping()) {
    ++into.ignored;
    return;
  }
  const std::string_view kind = text_of(o.find("kind"));
  const std::string_view api_version = text_of(o.find("apiVersion"));
  if (kind.ends_with("List")) {
    const core::doc_node* items = o.find("items");
    if (items == nullptr || !items->is_sequence()) return;
    const std::string_view item_kind = kind.substr(0, kind.size() - 4);
    for (const auto& item : items->items) {
      // The API's typed lists (TopologySourceList) leave kind and apiVersion off their items:
      // they are the list's, and the validation reads them.
      if (kind != "List" && item.is_mapping() && audited_kind(api_version, item_kind) &&
          (item.find("kind") == nullptr || item.find("apiVersion") == nullptr)) {
        core::doc_node copy = item;
        for (const auto& [field, value] :
             {std::pair{std::string_view("kind"), item_kind},
              std::pair{std::string_view("apiVersion"), api_version}}) {
          if (copy.find(field) != nullptr) continue;
          core::doc_node v;
          v.k = core::doc_node::kind::scalar;
          v.text = std::string(value);
          copy.map.emplace_back(std::string(field), std::move(v));
        }
        audit_objects(into, copy, opts);
        continue;
      }
      audit_objects(into, item, opts);
    }
    return;
  }
  if (const core::admitted_kind* admitted = audited_kind(api_version, kind)) {
    check_one(into, o, *admitted, opts);
  } else if (kind == "Node" && api_version == "v1") {
    remember_node(into, o);
  } else {
    ++into.ignored;
  }
}

void finish(audit_report& report) {
  std::stable_sort(report.violating.begin(), report.violating.end(),
                   [](const audited_object& a, const audited_object& b) {
                     return std::tie(a.kind, a.namespace_, a.name) <
                            std::tie(b.kind, b.namespace_, b.name);
                   });
  std::vector<core::ownership_source> owners;
  for (const auto& s : report.sources_seen)
    owners.push_back({s.name, &s.levels, s.selector ? &*s.selector : nullptr, s.writes});
  std::vector<core::ownership_node> nodes;
  for (const auto& [name, labels] : report.nodes_seen) nodes.push_back({name, &labels});
  report.conflicts = core::find_ownership_conflicts(owners, nodes);
}

std::string audit_summary(const audit_report& r) {
  std::string out = "audit: " + plural(r.checked(), "object") + " checked (" +
                    plural(r.topology_sources, "TopologySource") + ", " +
                    plural(r.model_deployments, "ModelDeployment") + "), " +
                    std::to_string(r.violating.size()) + " violating";
  if (r.violating.empty()) return out;
  std::vector<std::pair<std::string, std::size_t>> rules;
  for (const auto& kv : r.violations_by_rule()) rules.emplace_back(kv.first, kv.second);
  std::sort(rules.begin(), rules.end(),
            [](const auto& a, const auto& b) { return core::rule_less(a.first, b.first); });
  out += "; " + plural(r.violation_count(), "violation") + " by rule:";
  for (const auto& [rule, n] : rules)
    out += " " + (rule.empty() ? std::string("-") : rule) + "=" + std::to_string(n);
  return out;
}

namespace {

std::string conflicts_summary(const audit_report& r) {
  return r.conflicts.empty() ? std::string()
                             : "; " + plural(r.conflicts.size(), "ownership conflict") + " over " +
                                   plural(r.nodes, "Node");
}

}  // namespace

std::string render_audit_text(const audit_report& r) {
  std::string out;
  for (const auto& o : r.violating) {
    const std::string head = o.kind + " " + o.id() + ": ";
    for (const auto& e : o.errors) {
      out += head;
      out += e.rule.empty() ? "-" : e.rule;
      out += ' ';
      e.append_to(out);
      out += '\n';
    }
  }
  for (const auto& c : r.conflicts)
    for (const std::string* name : {&c.first, &c.second})
      out += std::string(topology_source_kind) + " " + *name +
             ": ownership conflict: " + core::describe(c) + "\n";
  out += audit_summary(r);
  out += conflicts_summary(r);
  out += '\n';
  return out;
}

std::string render_audit_json(const audit_report& r) {
  std::string out = R"({"violations":[)";
  bool first = true;
  for (const auto& o : r.violating) {
    for (const auto& e : o.errors) {
      out += first ? "\n  " : ",\n  ";
      first = false;
      out += R"({"kind":)";
      core::append_json_string(out, o.kind);
      out += R"(,"namespace":)";
      core::append_json_string(out, o.namespace_);
      out += R"(,"name":)";
      core::append_json_string(out, o.name);
      out += R"(,"rule":)";
      core::append_json_string(out, e.rule);
      out += R"(,"path":)";
      core::append_json_string(out, e.path);
      out += R"(,"type":)";
      core::append_json_string(out, core::to_string(e.type));
      out += R"(,"message":")";
      e.append_json_body_to(out);
      out += "\"}";
    }
  }
  out += first ? "]" : "\n]";
  out += R"(,"conflicts":[)";
  for (std::size_t i = 0; i < r.conflicts.size(); ++i) {
    const auto& c = r.conflicts[i];
    out += i ? ",\n  " : "\n  ";
    out += R"({"sources":[)";
    core::append_json_string(out, c.first);
    out += ',';
    core::append_json_string(out, c.second);
    out += R"(],"levels":[)";
    for (std::size_t j = 0; j < c.levels.size(); ++j) {
      if (j) out += ',';
      core::append_json_string(out, c.levels[j]);
    }
    out += R"(],"nodes":[)";
    for (std::size_t j = 0; j < c.nodes.size(); ++j) {
      if (j) out += ',';
      core::append_json_string(out, c.nodes[j]);
    }
    out += R"(],"message":)";
    core::append_json_string(out, core::describe(c));
    out += '}';
  }
  out += r.conflicts.empty() ? "]" : "\n]";
  out += R"(,"summary":{"checked":)" + std::to_string(r.checked()) + R"(,"topologySources":)" +
         std::to_string(r.topology_sources) + R"(,"modelDeployments":)" +
         std::to_string(r.model_deployments) + R"(,"violating":)" +
         std::to_string(r.violating.size()) + R"(,"violations":)" +
         std::to_string(r.violation_count()) + R"(,"ignored":)" + std::to_string(r.ignored) +
         R"(,"outOfScope":)" + std::to_string(r.out_of_scope) + R"(,"conflicts":)" +
         std::to_string(r.conflicts.size()) + R"(,"byRule":{)";
  std::vector<std::pair<std::string, std::size_t>> rules;
  for (const auto& kv : r.violations_by_rule()) rules.emplace_back(kv.first, kv.second);
  std::sort(rules.begin(), rules.end(),
            [](const auto& a, const auto& b) { return core::rule_less(a.first, b.first); });
  bool first_rule = true;
  for (const auto& [rule, n] : rules) {
    if (!first_rule) out += ',';
    first_rule = false;
    core::append_json_string(out, rule);
    out += ':' + std::to_string(n);
  }
  out += "}}}\n";
  return out;
}

}  // namespace topogate::diagnose

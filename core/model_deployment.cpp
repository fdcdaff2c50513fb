#include "model_deployment.hpp"

#include "profile.hpp"
#include "syntax.hpp"

namespace topogate::core {

namespace {

bool is_string_scalar(const doc_node& n) noexcept {
  return n.is_scalar() && n.tag == doc_node::scalar_tag::str;
}

std::string_view shown(const doc_node& n) noexcept {
  return n.is_scalar() ? n.as_string() : n.kind_name();
}

// M1/M2 for one role's requiredLevel, with the consumer's verdicts: "" is unset, any
// qualified name is a valid key, kubernetes.io/hostname is forbidden. Kueue matches the level
// against the Topology's label keys, so a key without a prefix (a level name such as `zone`)
// never matches and leaves the role Pending: the consumer accepts it, so topogate warns
// (docs/rules.md, "Deliberate differences").
void check_required_level(const doc_node& level, const std::string& path, error_list& errors,
                          std::vector<std::string>& warnings) {
  if (!is_string_scalar(level)) {
    errors.push_back(invalid("M1", path, shown(level), "must be a string label key"));
    return;
  }
  const std::string_view value = level.as_string();
  if (value.empty()) return;  // unset, as the consumer reads it
  if (value == hostname_label) {
    errors.push_back(forbidden("M2", path,
                               "kubernetes.io/hostname is the implicit final level; omit the field "
                               "instead"));
    return;
  }
  const auto msgs = check_qualified_name(value);
  for (const auto& msg : msgs) errors.push_back(invalid("M1", path, value, msg));
  if (msgs.empty() && value.find('/') == std::string_view::npos) {
    // No value in the text: a warning travels in a 120-character header.
    std::string w = path + " has no prefix (e.g. topology.kubernetes.io/zone): no level matches";
    if (w.size() > 120) w.resize(120);
    warnings.push_back(std::move(w));
  }
}

}  // namespace

deployment_result validate_model_deployment(const doc_node& object) {
  deployment_result r;
  auto& errors = r.errors;
  if (!object.is_mapping()) {
    errors.push_back(invalid("", "", shown(object), "a ModelDeployment must be an object"));
    return r;
  }
  // A bare `spec:` excerpt (as the runbook shows) is accepted; when present, apiVersion
  // and kind must name a ModelDeployment.
  if (const doc_node* av = object.find("apiVersion"); av != nullptr && !av->is_null()) {
    if (!is_string_scalar(*av) || av->as_string().substr(0, 19) != "worker.gpustack.ai/") {
      errors.push_back(
          invalid("", "apiVersion", shown(*av), "must be in the worker.gpustack.ai group"));
    }
  }
  if (const doc_node* kind = object.find("kind"); kind != nullptr && !kind->is_null()) {
    if (!is_string_scalar(*kind) || kind->as_string() != "ModelDeployment") {
      errors.push_back(not_supported("", "kind", shown(*kind), {"ModelDeployment"}));
    }
  }
  const doc_node* spec = object.find("spec");
  if (spec == nullptr || spec->is_null()) return r;
  if (!spec->is_mapping()) {
    errors.push_back(invalid("", "spec", shown(*spec), "must be an object"));
    return r;
  }
  const doc_node* roles = spec->find("roles");
  if (roles == nullptr || roles->is_null()) return r;
  if (!roles->is_sequence()) {
    errors.push_back(invalid("M1", "spec.roles", shown(*roles), "must be a list of roles"));
    return r;
  }
  for (std::size_t i = 0; i < roles->items.size(); ++i) {
    const doc_node& role = roles->items[i];
    const std::string role_path = index("spec.roles", i);
    if (role.is_null()) continue;
    if (!role.is_mapping()) {
      errors.push_back(invalid("M1", role_path, shown(role), "must be an object"));
      continue;
    }
    const doc_node* topology = role.find("topology");
    if (topology == nullptr || topology->is_null()) continue;
    const std::string topology_path = child(role_path, "topology");
    if (!topology->is_mapping()) {
      errors.push_back(invalid("M1", topology_path, shown(*topology), "must be an object"));
      continue;
    }
    const doc_node* level = topology->find("requiredLevel");
    if (level == nullptr || level->is_null()) continue;
    check_required_level(*level, child(topology_path, "requiredLevel"), errors, r.warnings);
  }
  return r;
}

deployment_result validate_model_deployment_text(std::string_view text) {
  auto decoded = decode_any(text, "");
  if (!decoded.ok()) {
    deployment_result r;
    r.errors = std::move(decoded.errors);
    return r;
  }
  return validate_model_deployment(decoded.root);
}

}  // namespace topogate::core

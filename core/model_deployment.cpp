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

constexpr std::string_view label_key_hint =
    "must be a label key such as topology.kubernetes.io/zone or topology.gpustack.ai/rack, not a "
    "level name (zone) or a concrete value (us-east-1a)";

// M1/M2 for one role's requiredLevel. Kueue matches the level against the Topology's
// label keys, so anything but a prefixed key can never match and leaves the role Pending.
void check_required_level(const doc_node& level, const std::string& path, error_list& errors) {
  if (!is_string_scalar(level)) {
    errors.push_back(invalid("M1", path, shown(level), "must be a string label key"));
    return;
  }
  const std::string_view value = level.as_string();
  if (value.empty()) {
    errors.push_back(
        invalid("M1", path, value,
                std::string(label_key_hint) + "; omit the field for unconstrained placement"));
    return;
  }
  if (value == hostname_label) {
    errors.push_back(forbidden("M2", path,
                               "kubernetes.io/hostname is the implicit final level; omit the field "
                               "instead"));
    return;
  }
  const auto msgs = check_qualified_name(value);
  for (const auto& msg : msgs) errors.push_back(invalid("M1", path, value, msg));
  if (msgs.empty() && value.find('/') == std::string_view::npos) {
    errors.push_back(invalid("M1", path, value, std::string(label_key_hint)));
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
    check_required_level(*level, child(topology_path, "requiredLevel"), errors);
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

#pragma once
// The kinds the validating webhook admits, one row each: the API group and kind the apiserver
// names in an AdmissionReview's request.kind, the resource and scope the chart's
// ValidatingWebhookConfiguration registers for it, the webhook path that configuration calls,
// and the validation a CREATE or UPDATE of it gets. The server's routes, `topogate review`,
// the audit and the chart's test read this table; adding a kind is a row here (and its
// validator), and a webhook in helm/topogate/templates/webhook.yaml.

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/document.hpp"
#include "core/field_error.hpp"
#include "core/topology_source.hpp"

namespace topogate::core {

// The webhook's routes, one per admitted kind, in the order of admitted_kinds.
enum class admission_route : std::uint8_t { topology_sources, model_deployments };

// Appends every error and warning of a CREATE or UPDATE of the kind (UPDATE is judged as CREATE:
// no rule compares the new object with the old one).
using admission_validator = void (*)(const doc_node& object, const validation_options& opts,
                                     error_list& errors, std::vector<std::string>& warnings);

// validate_model_deployment as an admission_validator (no option applies to it).
void check_model_deployment(const doc_node& object, const validation_options& opts,
                            error_list& errors, std::vector<std::string>& warnings);

struct admitted_kind {
  admission_route route;
  std::string_view group;     // the API group, in request.kind and the webhook's apiGroups
  std::string_view kind;      // request.kind.kind
  std::string_view resource;  // the webhook rule's resources (the CRD's plural)
  bool namespaced;            // the webhook rule's scope: Namespaced, else Cluster
  std::string_view path;      // the webhook's clientConfig path: "/validate/" + resource
  admission_validator validate;
};

inline constexpr std::string_view gpustack_worker_group = "worker.gpustack.ai";

inline constexpr std::array<admitted_kind, 2> admitted_kinds = {{
    {admission_route::topology_sources, gpustack_worker_group, "TopologySource", "topologysources",
     false, "/validate/topologysources", &check_topology_source},
    {admission_route::model_deployments, gpustack_worker_group, "ModelDeployment",
     "modeldeployments", true, "/validate/modeldeployments", &check_model_deployment},
}};

[[nodiscard]] constexpr const admitted_kind& admitted(admission_route r) noexcept {
  return admitted_kinds[static_cast<std::size_t>(r)];
}

// The row of (group, kind), or nullptr for a kind the webhook allows unread.
[[nodiscard]] constexpr const admitted_kind* find_admitted_kind(std::string_view group,
                                                                std::string_view kind) noexcept {
  for (const auto& k : admitted_kinds)
    if (k.group == group && k.kind == kind) return &k;
  return nullptr;
}

namespace detail {
constexpr bool admitted_kinds_consistent() {
  for (std::size_t i = 0; i < admitted_kinds.size(); ++i) {
    const admitted_kind& k = admitted_kinds[i];
    if (static_cast<std::size_t>(k.route) != i) return false;
    if (!k.path.starts_with("/validate/") || k.path.substr(10) != k.resource) return false;
  }
  return true;
}
static_assert(admitted_kinds_consistent(),
              "admitted_kinds: rows in admission_route order, each path /validate/<resource>");
}  // namespace detail

}  // namespace topogate::core

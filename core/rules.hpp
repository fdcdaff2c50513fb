#pragma once
// The rules topogate enforces, in one table: each id, the kind of object it applies to and a
// one-line summary (docs/rules.md gives each in full, in the same order; a test holds the two
// equal). Metrics start a counter per rule from it, the audit orders rules by it, and the
// validators' ids are checked against it.

#include <array>
#include <span>
#include <string_view>

namespace topogate::core {

enum class rule_kind { topology_source, snapshot, model_deployment };

struct rule_info {
  std::string_view id;  // "T1".."T14", "S1".."S10", "M1".."M2"
  rule_kind kind;
  std::string_view summary;
};

inline constexpr std::array<rule_info, 26> rules{{
    {"T1", rule_kind::topology_source, "spec.levels has 1 to 16 entries"},
    {"T2", rule_kind::topology_source, "each level is a label key"},
    {"T3", rule_kind::topology_source, "kubernetes.io/hostname is never a level"},
    {"T4", rule_kind::topology_source, "no level is listed twice"},
    {"T5", rule_kind::topology_source, "exactly one of nodeLabels, configMap, webhook"},
    {"T6", rule_kind::topology_source, "additionalWritePrefix is one unreserved DNS-1123 prefix"},
    {"T7", rule_kind::topology_source, "no additionalWritePrefix with nodeLabels"},
    {"T8", rule_kind::topology_source, "configMap.key is set and maxStaleness positive"},
    {"T9", rule_kind::topology_source, "webhook.url is an absolute https URL"},
    {"T10", rule_kind::topology_source, "webhook durations are positive"},
    {"T11", rule_kind::topology_source, "webhook.timeout is at most pollInterval"},
    {"T12", rule_kind::topology_source, "exactly one webhook credential"},
    {"T13", rule_kind::topology_source, "references are in the worker namespace, with valid names"},
    {"T14", rule_kind::topology_source, "spec.nodeSelector is a valid label selector"},
    {"S1", rule_kind::snapshot, "one well-formed document of the snapshot API"},
    {"S2", rule_kind::snapshot, "revision is not blank"},
    {"S3", rule_kind::snapshot, "every node is a known, selected Node"},
    {"S4", rule_kind::snapshot, "every label key is a declared level"},
    {"S5", rule_kind::snapshot, "every key is publishable"},
    {"S6", rule_kind::snapshot, "a read-only parent equals the Node's own label"},
    {"S7", rule_kind::snapshot, "every value is a non-empty label value"},
    {"S8", rule_kind::snapshot, "a node with a level has every level before it"},
    {"S9", rule_kind::snapshot, "a value never appears under two parents"},
    {"S10", rule_kind::snapshot, "at most 1 MiB as received and as served"},
    {"M1", rule_kind::model_deployment, "a role's requiredLevel is a label key"},
    {"M2", rule_kind::model_deployment, "a role's requiredLevel is not kubernetes.io/hostname"},
}};

// The rules of one kind, in table order (T1..T14, S1..S10, M1..M2).
[[nodiscard]] std::span<const rule_info> rules_of(rule_kind kind) noexcept;
// The rule with this id; null for anything else.
[[nodiscard]] const rule_info* find_rule(std::string_view id) noexcept;
// Reading order: by letter, then by number (M2 before S1, T2 before T10); "" first. Any
// string sorts, in the table or not.
[[nodiscard]] bool rule_less(std::string_view a, std::string_view b) noexcept;
// The kind's name as Kubernetes and the metrics spell it: "TopologySource", "snapshot",
// "ModelDeployment".
[[nodiscard]] std::string_view kind_name(rule_kind kind) noexcept;

}  // namespace topogate::core

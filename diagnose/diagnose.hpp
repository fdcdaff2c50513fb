#pragma once
// The runbook's manual procedures as answers computed from cluster objects
// (cluster_objects.hpp): "Verify the scheduling chain" (check_chain) and "Diagnose Pending
// workloads" (diagnose_pending). Pure analysis: the objects come from files or the API,
// read by the caller.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "diagnose/cluster_objects.hpp"

namespace topogate::diagnose {

// Runbook section titles: every finding names the step it comes from.
inline constexpr std::string_view step_verify_chain = "Verify the scheduling chain";
inline constexpr std::string_view step_request_level = "Request a level from ModelDeployment";
inline constexpr std::string_view step_pending = "Diagnose Pending workloads";

// The label GPUStack puts on a role's Workload; without it the PodSet name is the role.
inline constexpr std::string_view role_label = "worker.gpustack.ai/role";
// Kueue's limit on flavors in one resource group (ClusterQueue CRD, maxItems).
inline constexpr std::size_t max_flavors_per_group = 64;

struct chain_finding {
  std::string check;   // stable id, e.g. "node-profile", "topology-hostname"
  std::string object;  // "Node/worker-a", "ResourceFlavor/zone-a", "Workload/default/w"
  std::string field;   // "metadata.labels[topology.gpustack.ai/profile]"
  std::string step;    // runbook section title
  std::string detail;
};

struct chain_report {
  std::vector<chain_finding> findings;
  std::vector<std::string> notes;  // what could not be checked, and why (not findings)
  std::size_t managed_nodes = 0, flavors = 0, topologies = 0, queues = 0, requests = 0;
  [[nodiscard]] bool clean() const noexcept { return findings.empty(); }
};

[[nodiscard]] chain_report check_chain(const cluster_objects& objects);

// The name the consumer gives the NodeFeature of a source's Node: "gpustack-topology-" and
// 16 lowercase hex digits of FNV-1a 64 over the source UID, a zero byte and the Node name.
[[nodiscard]] std::string nfd_feature_name(std::string_view source_uid, std::string_view node);
// A standard key (kubernetes.io or a *.kubernetes.io namespace, topology.kubernetes.io/zone):
// never in a NodeFeature's spec.labels.
[[nodiscard]] bool is_standard_label_key(std::string_view key);

enum class verdict { ok, problem, info, skipped };
[[nodiscard]] std::string_view to_string(verdict v) noexcept;

struct pending_step {
  int number = 0;
  std::string title;
  verdict result = verdict::info;
  std::vector<std::string> lines;
};

struct node_capacity {
  std::string name;
  resource_amounts allocatable, used, free;
  std::int64_t fits = 0;  // Pods of the PodSet this Node can take
};

struct domain_capacity {
  std::vector<std::string> values;  // the domain's path, coarsest level first
  std::vector<node_capacity> nodes;
  std::int64_t fits = 0;
  bool holds = false;  // fits >= the PodSet count
};

struct flavor_capacity {
  std::string flavor, topology;
  bool level_in_topology = false;
  std::vector<domain_capacity> domains;
  std::int64_t fits = 0;                                      // every counted Node of the flavor
  std::vector<std::pair<std::string, std::string>> excluded;  // Node -> why it is not counted
};

struct podset_fit {
  std::string podset, level;  // level: required (or preferred) topology level, "" for none
  bool required = false;
  std::int64_t count = 0;
  resource_amounts per_pod;
  std::vector<flavor_capacity> flavors;
  std::int64_t cluster_fits = 0;  // summed over the flavors' counted Nodes
  std::int64_t best_domain = 0;
  // The most Pods one flavor's domains of the level hold together: where a `preferred`
  // request ends up when no single domain holds it (Kueue falls back to coarser levels and,
  // at the top, spreads the PodSet over several domains).
  std::int64_t best_spanning = 0;
  [[nodiscard]] bool fits_one_domain() const noexcept { return best_domain >= count; }
  [[nodiscard]] bool preferred() const noexcept { return !required && !level.empty(); }
  // Kueue's TAS can place the PodSet: in one domain of the level, or (preferred only) across
  // domains.
  [[nodiscard]] bool fits() const noexcept {
    return fits_one_domain() || (preferred() && best_spanning >= count);
  }
};

// One Workload of a (multi-role) deployment: its role, reservation and whether each of its
// PodSets finds a domain.
struct group_status {
  std::string workload;  // namespace/name
  std::string role;
  bool quota_reserved = false, admitted = false;
  bool fits = false;             // Kueue's TAS can place every PodSet (podset_fit::fits)
  bool fits_one_domain = false;  // every PodSet in one domain of its level
  std::string assignment;        // "zone-a=2" style summary of the topology assignment
};

// Kueue v0.17.0's decision for the Workload, taken in Kueue's order: the ClusterQueue's
// quota and flavor choice PodSet group by group (resource groups, flavors in order, the
// nominalQuota less what reserved Workloads use), then topology-aware placement in the
// chosen flavor, group by group, each group's assignment subtracted before the next.
struct kueue_podset {
  std::string podset, group;  // group: podSetGroupName, "" when none
  std::string flavor;         // chosen by quota; "" when quota stopped the Workload first
  std::string stage;          // "placed", "quota", "topology", "not reached"
  std::string detail;         // Kueue-style message or the assignment ("host-a=2, host-b=1")
  std::int64_t count = 0;     // the count Kueue admits (below spec count: partial admission)
  std::int64_t spec_count = 0;
};

struct kueue_decision {
  bool modelled = false;     // a ClusterQueue was found: the decision below is computed
  bool admissible = false;   // quota and placement admit every PodSet
  bool no_decision = false;  // a Kueue v0.17.0 bug leaves the Workload undecided (message)
  // What stops it: "queue", "resources", "quota", "preemption", "topology"; "" when admissible.
  std::string step;
  std::string podset;    // the PodSet that stops it
  std::string message;   // as Kueue words it ("couldn't assign flavors to pod set ...")
  std::string reason;    // Kueue's QuotaReserved reason: "Inadmissible" or "Pending"
  bool partial = false;  // admissible only at the smaller counts minCount allows
  std::vector<std::string> preempts;  // the Workloads Kueue preempts for it (step "preemption")
  std::vector<kueue_podset> podsets;
  std::vector<std::string> notes;  // Kueue's known bugs that matter here, inputs not modelled
};

struct pending_report {
  bool found = false;
  std::string workload;    // namespace/name
  std::string deployment;  // namespace/name of the owning ModelDeployment, "" when none
  std::vector<pending_step> steps;
  std::vector<podset_fit> fits;
  std::vector<group_status> groups;
  kueue_decision kueue;
  std::string conclusion;
};

// `ns` may be empty: the first Workload of that name in any namespace.
[[nodiscard]] pending_report diagnose_pending(const cluster_objects& objects, std::string_view ns,
                                              std::string_view name);

// Pods of `per_pod` that fit into `free` as Kueue counts them: every Pod also takes one of
// `pods`, so a Node whose allocatable lacks `pods` fits none; a resource the Pod requests
// and `free` lacks fits none; an over-committed resource (negative free) gives a negative
// count (truncated toward zero), which Kueue sums into the domain.
[[nodiscard]] std::int64_t pods_that_fit(const resource_amounts& free,
                                         const resource_amounts& per_pod);

// Kueue v0.17.0's decision for `w` (kueue_decision above).
[[nodiscard]] kueue_decision follow_kueue(const cluster_objects& objects, const workload& w);

// Renderings for the command line: people's tables and JSON.
[[nodiscard]] std::string render_chain_text(const chain_report& r);
[[nodiscard]] std::string render_chain_json(const chain_report& r);
[[nodiscard]] std::string render_pending_text(const pending_report& r);
[[nodiscard]] std::string render_pending_json(const pending_report& r);

}  // namespace topogate::diagnose

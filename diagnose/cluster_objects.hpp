#pragma once
// The cluster objects the runbook's checks read, decoded from what `kubectl get ... -o json`
// prints (a List, a typed list such as NodeList, or one object): Nodes, Pods, Kueue
// Topologies, ResourceFlavors, ClusterQueues, LocalQueues and Workloads (v1beta1 and
// v1beta2), TopologySources and ModelDeployments, LimitRanges, RuntimeClasses and
// Namespaces, NFD's NodeFeatures and ConfigMaps. Only the fields the diagnosis needs are
// kept; unknown kinds are counted and skipped, so a whole `kubectl get all`-style dump can
// be handed over as is.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/document.hpp"
#include "core/field_error.hpp"
#include "core/topology_source.hpp"

namespace topogate::diagnose {

// What this analysis takes from the core: its document model, its field errors and the
// TopologySource and profile rules.
using core::doc_node;
using core::error_list;
using core::field_error;
using core::label_selector;
using core::topology_source;

inline constexpr std::string_view profile_label = "topology.gpustack.ai/profile";

// The NFD hop (docs/operations.md, "## `topogate diagnose chain`"): the labels the consumer
// puts on each NodeFeature it writes, the annotation nfd-master keeps on the Nodes it
// labelled, and the namespace the consumer writes NodeFeatures in.
inline constexpr std::string_view nfd_node_name_label = "nfd.node.kubernetes.io/node-name";
inline constexpr std::string_view source_uid_label = "topology.gpustack.ai/source-uid";
inline constexpr std::string_view nfd_feature_labels_annotation =
    "nfd.node.kubernetes.io/feature-labels";
inline constexpr std::string_view default_worker_namespace = "gpustack-system";

// resource name -> amount (cpu in milli-units, everything else in whole units; quantity.hpp).
using resource_amounts = std::map<std::string, std::int64_t>;
using label_map = std::vector<std::pair<std::string, std::string>>;  // sorted by key

[[nodiscard]] const std::string* find_label(const label_map& labels, std::string_view key) noexcept;

struct object_condition {
  std::string type, status, reason, message;
};
[[nodiscard]] const object_condition* find_condition(
    const std::vector<object_condition>& conditions, std::string_view type) noexcept;

struct owner_ref {
  std::string kind, name;
  std::string uid;          // metadata.ownerReferences[*].uid
  bool controller = false;  // controller: true
};

struct taint {
  std::string key, value, effect;
};
struct toleration {
  std::string key, op, value, effect;  // op: "Exists" or "Equal" ("" means Equal)
};

struct k8s_node {
  std::string name;
  label_map labels;
  resource_amounts allocatable;
  bool unschedulable = false;
  std::optional<bool> ready;  // status.conditions[Ready]; nullopt when the Node reports none
  std::vector<taint> taints;
  // The annotation nfd-master writes (the label keys it applied, comma-separated); nullopt
  // when the Node has none.
  std::optional<std::string> nfd_feature_labels;
};

// The resource fields of one Pod spec, as written (before any defaulting).
struct container_resources {
  std::string name;
  resource_amounts requests, limits;  // a key present with 0 is set (to zero)
  bool sidecar = false;               // an init container with restartPolicy: Always
};
struct pod_resources {
  std::vector<container_resources> containers, init_containers;
  resource_amounts pod_requests;  // spec.resources.requests (Pod-level resources)
  resource_amounts overhead;      // spec.overhead
  std::string runtime_class;      // spec.runtimeClassName
};

// A LimitRange's items of type Container (the defaults it gives a container, its bounds)
// and of type Pod (its bounds), each kind's items summarised as Kueue does: the lowest max
// and the highest min of each resource.
struct limit_range {
  std::string namespace_, name;
  bool has_container_item = false;
  resource_amounts default_limits, default_requests;  // first Container item's, merged in order
  resource_amounts container_max, container_min, pod_max, pod_min;
};

struct runtime_class {
  std::string name;
  std::optional<resource_amounts> overhead;  // overhead.podFixed; nullopt without overhead
};

struct k8s_pod {
  std::string namespace_, name, node_name, phase;
  resource_amounts requests;  // effective request: containers, init containers, overhead
  std::string workload;       // Kueue's kueue.x-k8s.io/workload annotation, when set
  // A TAS Pod (Kueue's podset-required-, podset-preferred- or podset-unconstrained-topology
  // annotation): Kueue counts it through its Workload's reservation, not as Node usage.
  bool tas = false;
};

struct kueue_topology {
  std::string name;
  std::vector<std::string> levels;  // spec.levels[*].nodeLabel, coarsest first
};

struct resource_flavor {
  std::string name;
  label_map node_labels;
  std::string topology_name;  // spec.topologyName, "" when unset
  std::vector<taint> node_taints;
  std::vector<toleration> tolerations;  // spec.tolerations: added to every PodSet's
};

struct queue_flavor {
  std::size_t group = 0;  // index in spec.resourceGroups
  std::string name;
  std::vector<std::string> resources;
  resource_amounts nominal;  // resources[*].nominalQuota
  // resources[*].borrowingLimit and lendingLimit: a resource is present when its limit is set.
  resource_amounts borrowing_limit, lending_limit;
};

struct cluster_queue {
  std::string name;
  std::vector<std::vector<std::string>> group_resources;  // coveredResources per group
  std::vector<queue_flavor> flavors;
  std::vector<object_condition> conditions;
  std::optional<std::int64_t> reserving_workloads, admitted_workloads, pending_workloads;
  std::string stop_policy;
  std::string cohort;  // spec.cohortName (v1beta2) or spec.cohort (v1beta1)
  // spec.flavorFungibility.whenCanBorrow: "" (Kueue's default, MayStopSearch; Borrow in
  // v1beta1) or TryNextFlavor.
  std::string when_can_borrow;
  // spec.flavorFungibility.whenCanPreempt: "" (Kueue's default, TryNextFlavor) or
  // MayStopSearch (v1beta1: Preempt).
  std::string when_can_preempt;
  // spec.preemption: withinClusterQueue, reclaimWithinCohort, borrowWithinCohort.policy ("" when
  // unset: Never).
  std::string within_cluster_queue, reclaim_within_cohort, borrow_within_cohort;
  std::optional<std::int64_t> borrow_max_priority;  // borrowWithinCohort.maxPriorityThreshold
  // spec.namespaceSelector: nullopt (absent) selects no namespace, {} every namespace.
  std::optional<label_selector> namespace_selector;
  bool terminating = false;  // metadata.deletionTimestamp is set
  // The AdmissionChecks it asks for: spec.admissionChecks (v1beta1) and
  // spec.admissionChecksStrategy.admissionChecks[].name.
  std::vector<std::string> admission_checks;
};

// A Kueue Cohort object (cluster-scoped): its parent and its own quota. A cohort a
// ClusterQueue names without an object has neither.
struct cohort_object {
  std::string name;
  std::string parent;                 // spec.parentName
  std::vector<queue_flavor> flavors;  // spec.resourceGroups, as a ClusterQueue's
};

// A Kueue AdmissionCheck (cluster-scoped).
struct admission_check {
  std::string name, controller;  // spec.controllerName
  bool active = false;           // its Active condition is True
};

// A Workload's state of one AdmissionCheck (status.admissionChecks[]).
struct admission_check_state {
  std::string name, state, message;  // state: Pending, Ready, Retry, Rejected
};

struct local_queue {
  std::string namespace_, name, cluster_queue;
  std::string stop_policy;  // spec.stopPolicy, "" when unset
};

struct k8s_namespace {
  std::string name;
  label_map labels;
};

// spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution: terms ORed,
// the requirements of a term ANDed.
struct node_selector_requirement {
  std::string key, op;  // op: In, NotIn, Exists, DoesNotExist, Gt, Lt
  std::vector<std::string> values;
  bool values_null = false;  // `values` absent or null (Go's nil slice), not []
};
struct node_selector_term {
  std::vector<node_selector_requirement> match_expressions, match_fields;
};
using node_affinity = std::vector<node_selector_term>;

// Whether a Node with `labels` and `name` matches the required node affinity, as the
// scheduler (and Kueue) match it: a term without requirements is skipped, no term left
// matches nothing; matchFields know metadata.name only and are checked when `name` is set.
[[nodiscard]] bool affinity_matches(const node_affinity& terms, const label_map& labels,
                                    std::string_view name);

// The parse errors of one term (`index`: its place in the list) as k8s.io/component-helpers'
// nodeaffinity (v0.35) finds them: an operator it does not know, In/NotIn without values,
// Exists/DoesNotExist with values, Gt/Lt without exactly one integer, matchFields other than
// In/NotIn of exactly one value; each worded as apimachinery's field errors
// ("nodeSelectorTerms[0].matchExpressions[0].values[0]: Invalid value: \"abc\": ..."). Label
// keys and values are not validated. An empty term has none.
[[nodiscard]] std::vector<std::string> affinity_term_errors(const node_selector_term& term,
                                                            std::size_t index);
// Errors joined as apimachinery's aggregate prints them: duplicates dropped, one alone, several
// "[a, b]"; "" when none.
[[nodiscard]] std::string aggregate_errors(const std::vector<std::string>& errors);
// The node selector as Go's %s prints a *corev1.NodeSelector (&NodeSelector{...}).
[[nodiscard]] std::string node_selector_text(const node_affinity& terms);

struct topology_domain {
  std::vector<std::string> values;  // one per assignment level
  std::int64_t count = 0;
};

struct podset {
  std::string name;
  std::int64_t count = 1;
  std::optional<std::int64_t> min_count;  // minCount (partial admission); nullopt when unset
  pod_resources resources;                // the template's, as stored
  resource_amounts requests;  // per Pod, effective, as Kueue computes it (kueue_requests)
  std::vector<std::string> request_sources;  // what Kueue added to the template's requests
  label_map node_selector;
  std::optional<node_affinity> required_affinity;  // nullopt: the template sets none
  std::vector<toleration> tolerations;
  std::string required_level, preferred_level;
  bool unconstrained = false;
  std::string group_name;  // topologyRequest.podSetGroupName
  // topologyRequest.podSetSliceRequiredTopology and podSetSliceSize: slices of slice_size
  // Pods, each in one domain of slice_level ("" when unset).
  std::string slice_level;
  std::optional<std::int64_t> slice_size;
  bool slice_layers = false;  // podsetSliceRequiredTopologyConstraints is set
};

struct podset_assignment {
  std::string name;
  std::map<std::string, std::string> flavors;  // resource -> flavor
  std::int64_t count = 0;
  std::vector<std::string> topology_levels;
  std::vector<topology_domain> topology_domains;
};

struct workload {
  std::string namespace_, name, api_version;
  label_map labels;
  std::vector<owner_ref> owners;
  std::string queue_name;
  std::string uid;                       // metadata.uid
  std::optional<std::int64_t> priority;  // spec.priority (Kueue sets it from the priority class)
  std::string quota_reserved_at;         // the QuotaReserved condition's lastTransitionTime
  // Kueue's queue-order timestamp (workload.Ordering.GetQueueOrderTimestamp, RFC 3339): the
  // Evicted condition's lastTransitionTime after an eviction by PodsReadyTimeout or by an
  // AdmissionCheck, else metadata.creationTimestamp.
  std::string queue_order_at;
  bool evicted = false;  // the Evicted condition is True (preemption takes these first)
  std::vector<podset> podsets;
  std::vector<object_condition> conditions;
  std::string admitted_cluster_queue;  // status.admission.clusterQueue
  std::vector<podset_assignment> assignments;
  std::vector<admission_check_state> check_states;  // status.admissionChecks
  [[nodiscard]] bool quota_reserved() const noexcept;
  [[nodiscard]] bool admitted() const noexcept;
};

struct deployment_role {
  std::string name, required_level;
  std::optional<std::int64_t> replicas, size;
};

struct model_deployment {
  std::string namespace_, name;
  std::vector<deployment_role> roles;
  std::vector<object_condition> conditions;
  // Progress messages under status other than conditions ("status.roles[decode].message": ...).
  std::vector<std::pair<std::string, std::string>> progress;
};

struct topology_source_object {
  std::string name, uid;
  std::vector<std::string> levels;
  std::optional<label_selector> node_selector;  // nullopt: selects every Node
  bool writes = false;                          // spec.configMap or spec.webhook
  bool webhook = false;                         // spec.webhook
  // spec.configMap: configMapRef and key ("" for a webhook source).
  std::string config_map_namespace, config_map_name, config_map_key;
  std::vector<object_condition> conditions;
};

// An NFD NodeFeature (nfd.k8s-sigs.io/v1alpha1).
struct node_feature {
  std::string namespace_, name;
  label_map labels;  // metadata.labels
  std::vector<owner_ref> owners;
  label_map spec_labels;  // spec.labels
};

struct config_map {
  std::string namespace_, name;
  std::map<std::string, std::string> data;
};

struct cluster_objects {
  std::vector<k8s_node> nodes;
  std::vector<k8s_pod> pods;
  std::vector<kueue_topology> topologies;
  std::vector<resource_flavor> flavors;
  std::vector<cluster_queue> cluster_queues;
  std::vector<local_queue> local_queues;
  std::vector<workload> workloads;
  std::vector<model_deployment> deployments;
  std::vector<topology_source_object> sources;
  std::vector<limit_range> limit_ranges;
  std::vector<runtime_class> runtime_classes;
  std::vector<k8s_namespace> namespaces;
  std::vector<node_feature> node_features;
  std::vector<config_map> config_maps;
  std::vector<admission_check> admission_checks;
  std::vector<cohort_object> cohorts;
  // Whether AdmissionChecks were read at all (an AdmissionCheck or an AdmissionCheckList
  // decoded): without them a ClusterQueue's checks are judged by its Active condition.
  bool admission_checks_read = false;
  // Whether NodeFeatures were read at all: a NodeFeature or a NodeFeatureList decoded, or
  // the caller saying so (an empty `kubectl get nodefeatures` dump, an API that serves
  // them). false: the API does not serve them (no CRD) or no dump was given.
  bool node_features_read = false;
  // The namespace the consumer writes its NodeFeatures in (the worker namespace).
  std::string worker_namespace = std::string(default_worker_namespace);
  // Snapshot texts standing for a webhook source's revision, by source name ("" for any
  // webhook source without one of its own).
  std::map<std::string, std::string> revision_texts;
  std::size_t skipped = 0;  // objects of kinds the diagnosis does not read
  // What listing them from the API left out or could not read (a kind not served or not
  // allowed, a field that is not what its kind says), as notes for the answer built on them
  // (the server's dry run: server/workload_impact.cpp).
  std::vector<std::string> list_notes;

  [[nodiscard]] const k8s_node* node(std::string_view name) const noexcept;
  [[nodiscard]] const kueue_topology* topology(std::string_view name) const noexcept;
  [[nodiscard]] const resource_flavor* flavor(std::string_view name) const noexcept;
  [[nodiscard]] const cluster_queue* queue(std::string_view name) const noexcept;
  [[nodiscard]] const admission_check* check(std::string_view name) const noexcept;
  [[nodiscard]] const cohort_object* cohort(std::string_view name) const noexcept;
  [[nodiscard]] const local_queue* local(std::string_view ns, std::string_view name) const noexcept;
  [[nodiscard]] const k8s_namespace* namespace_of(std::string_view name) const noexcept;
  [[nodiscard]] const workload* find_workload(std::string_view ns,
                                              std::string_view name) const noexcept;
  [[nodiscard]] const model_deployment* deployment(std::string_view ns,
                                                   std::string_view name) const noexcept;
  [[nodiscard]] const config_map* find_config_map(std::string_view ns,
                                                  std::string_view name) const noexcept;
};

// Adds every object in `text` (JSON or YAML: a List, a typed list or one object). Errors
// name `origin` in their path ("nodes.json: items[3].status.allocatable[cpu]"); an object
// with an error is still added with what could be read.
error_list add_objects(cluster_objects& into, std::string_view text, std::string_view origin);
// One decoded object (as from a list item or a single API GET).
error_list add_object(cluster_objects& into, const doc_node& object, std::string_view path);

// The resource fields of a Pod spec.
pod_resources read_pod_resources(const doc_node& pod_spec, error_list& errors,
                                 std::string_view path);
// The effective request of one Pod (the scheduler's formula): the larger of the sum over
// containers plus restartable (sidecar) init containers, and each plain init container
// together with the sidecars started before it; Pod-level requests (cpu, memory,
// hugepages-*) replace that sum for the resources they name; plus spec.overhead.
resource_amounts pod_requests(const pod_resources& pod);
resource_amounts pod_requests(const doc_node& pod_spec, error_list& errors, std::string_view path);
// A Workload PodSet's per-Pod request as Kueue v0.17.0 computes it when it queues the
// Workload (the stored template is not changed): the RuntimeClass's overhead when the
// template names one and sets no overhead, the namespace's LimitRange container defaults
// for what a container leaves unset, then limits for missing requests; then pod_requests.
// `sources` (optional) receives what was added, in words.
resource_amounts kueue_requests(const cluster_objects& c, std::string_view ns,
                                const pod_resources& pod, std::vector<std::string>* sources);
// The Pod kueue_requests sums: the template with the overhead, the LimitRange defaults and
// the limits for missing requests added.
pod_resources kueue_pod(const cluster_objects& c, std::string_view ns, const pod_resources& pod,
                        std::vector<std::string>* sources);
// Kueue v0.17.0's resource validation of a Workload not yet admitted (the scheduler's, before
// any flavor): a container of a PodSet, after kueue_pod, that requests more of a resource
// than it limits keeps the Workload Pending with this message ("" when none does).
std::string kueue_resources_invalid(const cluster_objects& c, const workload& w);
// Kueue v0.17.0's LimitRange validation, next: with the namespace's LimitRanges summarised
// (the lowest max, the highest min), a container (after kueue_pod) whose larger of request
// and limit is above a Container max, or whose smaller is below a Container min, or a Pod
// whose request (pod_requests) is above a Pod max or below a Pod min, keeps the Workload
// Pending with this message ("" when none does or the namespace has no LimitRange).
std::string kueue_limit_range_invalid(const cluster_objects& c, const workload& w);

// Whether the TopologySource's spec.nodeSelector selects labels (absent or {} selects all).
[[nodiscard]] bool source_selects(const topology_source_object& src, const label_map& labels);

}  // namespace topogate::diagnose

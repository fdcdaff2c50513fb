#pragma once
// What kueue_decision.cpp (the order of Kueue's steps), kueue_quota.cpp (the ClusterQueue's
// quota and flavor choice) and kueue_placement.cpp (topology-aware placement in one flavor)
// share.

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "diagnose/cluster_objects.hpp"

namespace topogate::diagnose::detail {

// One domain of a flavor's topology tree as Kueue's TAS snapshot holds it: a leaf is a
// Node (Topology ending with the hostname level) or the Nodes sharing every level value.
struct tas_domain {
  std::vector<std::string> values;
  std::vector<std::size_t> children;  // indices into the next level's domains
  resource_amounts free;              // leaves only: allocatable less usage
  const k8s_node* node = nullptr;     // leaves of a hostname Topology
  std::int64_t state = 0, with_leader = 0, leader = 0;
  std::int64_t slice_state = 0, slice_with_leader = 0;  // slices (place_group)
};

// Kueue's ExclusionStats: why leaves were left out in the last fill_counts, first cause only.
struct exclusion_stats {
  std::int64_t total = 0, node_selector = 0, affinity = 0;
  std::map<std::string, std::int64_t> taints, resources;
};

struct tas_snapshot {
  exclusion_stats stats;
  const kueue_topology* topo = nullptr;
  const resource_flavor* rf = nullptr;
  bool per_node = false;
  std::vector<std::vector<tas_domain>> levels;  // coarsest first; the last are the leaves
};

// Kueue's TAS snapshot of `rf`'s Nodes under `topo`, their free capacity less `used`, and
// its leaf domains' less `domain_used` (by their values; usage Kueue keeps per domain when the
// Topology does not end with kubernetes.io/hostname).
tas_snapshot build_snapshot(
    const cluster_objects& c, const resource_flavor& rf, const kueue_topology& topo,
    const std::map<std::string, resource_amounts>& used,
    const std::map<std::vector<std::string>, resource_amounts>& domain_used = {});

struct tas_request {
  const podset* ps = nullptr;
  std::int64_t count = 0;
};

struct tas_result {
  bool ok = false;
  bool no_decision = false;  // Kueue's own assumptions fail: it never decides
  std::string reason;
  std::map<std::string, std::int64_t> workers, leaders;  // leaf id -> Pods
};

// Kueue's findTopologyAssignment for one group (workers, optional leader) in one flavor,
// `assumed` (per leaf) taken by the groups placed before.
tas_result place_group(tas_snapshot& s, const tas_request& workers, const tas_request* leader,
                       const std::map<std::string, resource_amounts>& assumed, bool tas_only_queue);
// Kueue v0.17.0 known bug: a Topology ending with the hostname keys its leaves by the hostname
// alone and every other domain by its values joined with ","; both share one map, so a
// hostname equal to a top-level value (one value, no ",") takes that domain's place, and the
// tree Kueue builds depends on Go's map order. The Nodes of `rf`'s snapshot whose hostname
// equals a value of the Topology's first level, sorted.
std::vector<std::string> hostnames_equal_to_top_values(const cluster_objects& c,
                                                       const resource_flavor& rf,
                                                       const kueue_topology& topo);
// Adds what `placed` takes (per leaf) to `assumed`; `with_pods` counts the Pods as well.
void add_assumed(std::map<std::string, resource_amounts>& assumed,
                 const std::map<std::string, std::int64_t>& placed, const resource_amounts& per_pod,
                 bool with_pods);
// "host-a=2, host-b=1".
std::string placed_text(const std::map<std::string, std::int64_t>& placed);
// The PodSet asks for topology-aware scheduling (a level, unconstrained, or slices).
bool requests_tas(const podset& ps);

// Quantities as Kueue prints them in its quota messages.
std::string quota_text(std::string_view res, std::int64_t v);
// The resource group of `q` covering `res`; npos when none does.
std::size_t group_covering(const cluster_queue& q, std::string_view res);
// Kueue's checkFlavorForPodSets for one PodSet: "" when the flavor may take it. `error`, when
// given, gets the error Kueue's check returns instead of a reason (the required node affinity
// kept for the flavor's label keys does not parse and no term matches); the result is then "".
std::string flavor_mismatch(const cluster_objects& c, const cluster_queue& q, std::size_t rg,
                            const podset& ps, const std::string& flavor, bool tas_only,
                            std::string* error = nullptr);

// A flavor and a resource (Kueue's FlavorResource).
using flavor_resource = std::pair<std::string, std::string>;

// What the Workloads holding a reservation use, per ClusterQueue (by name), flavor and resource.
using reserved_usages = std::map<std::string, std::map<flavor_resource, std::int64_t>>;
// The usages of every ClusterQueue, those of `except` left out.
reserved_usages reserved_usage(const cluster_objects& c,
                               const std::vector<const workload*>& except);
// A ClusterQueue's or Cohort's nominalQuota per flavor and resource (0 where a covered resource
// has none).
std::map<flavor_resource, std::int64_t> nominal_quotas(const std::vector<queue_flavor>& flavors);

// The quota Kueue's scheduler snapshot holds for one ClusterQueue and, when it names a cohort,
// the cohort tree above it (pkg/cache/scheduler/resource_node.go): each node lends its
// SubtreeQuota less what its lendingLimit keeps back and borrows up to its borrowingLimit; a
// Cohort object adds its own nominalQuota and names its parent.
class cohort_quota {
 public:
  // Usage: what the Workloads holding a reservation use, `except` left out.
  cohort_quota(const cluster_objects& c, const cluster_queue& q, const workload* except);
  // The same with several left out (preemption's simulated removals).
  cohort_quota(const cluster_objects& c, const cluster_queue& q,
               const std::vector<const workload*>& except);
  // The same with the usages given (preemption's search keeps them and subtracts removals).
  cohort_quota(const cluster_objects& c, const cluster_queue& q, const reserved_usages& used);
  // Kueue's Available: unused quota of the ClusterQueue and what it may borrow now (>= 0).
  [[nodiscard]] std::int64_t available(const flavor_resource& fr) const;
  // Kueue's PotentialAvailable: the most the ClusterQueue could use with no usage anywhere.
  [[nodiscard]] std::int64_t potential(const flavor_resource& fr) const;
  // Using `val` more than now exceeds the ClusterQueue's nominalQuota (Kueue's BorrowingWith).
  [[nodiscard]] bool borrows(const flavor_resource& fr, std::int64_t val) const;
  [[nodiscard]] bool in_cohort() const noexcept { return path_.size() > 1; }
  [[nodiscard]] std::int64_t usage(const flavor_resource& fr) const;
  // The Cohorts of a cycle of parents above the ClusterQueue, from the first met again to it
  // again ("a", "b", "a"), which Kueue refuses and the path cuts where it closes; empty when
  // none.
  [[nodiscard]] const std::vector<std::string>& cycle() const noexcept { return cycle_; }
  [[nodiscard]] std::int64_t nominal(const flavor_resource& fr) const;

 private:
  // One node of Kueue's resource tree (pkg/cache/scheduler/resource_node.go): a ClusterQueue,
  // or a cohort with its Cohort object's own quota and what its children lend.
  struct member {
    std::map<flavor_resource, std::int64_t> nominal, subtree, usage, lending, borrowing;
    // localQuota: what a lendingLimit keeps from the parent.
    [[nodiscard]] std::int64_t local(const flavor_resource& fr) const;
  };
  [[nodiscard]] std::int64_t available_at(std::size_t i, const flavor_resource& fr) const;
  [[nodiscard]] std::int64_t potential_at(std::size_t i, const flavor_resource& fr) const;
  // The ClusterQueue, then its cohort and the cohort's parents up to the root.
  std::vector<member> path_;
  std::vector<std::string> cycle_;
};

// What a Workload holding a reservation uses, per flavor and resource (its admission's counts).
std::map<flavor_resource, std::int64_t> quota_usage(const workload& x);

// Kueue's classical preemption (pkg/scheduler/preemption, classical/), for a ClusterQueue
// alone or in a cohort of ClusterQueues (one level: a Cohort object's own quota and parent are
// not read). `need` maps each flavor and resource lacking unused quota to what the Workload
// would use of it (Kueue's frsNeedPreemption and the usage it checks). The candidates: the
// Workloads of `q` that spec.preemption.withinClusterQueue lets `w` preempt (a lower priority;
// with LowerOrNewerEqualPriority also an equal one queued after `w`), and, with
// reclaimWithinCohort, those of the cohort's other ClusterQueues using more than their
// nominalQuota of a needed resource that the policy lets it reclaim; each using a needed
// resource. They are taken in Kueue's order (evicted already; other ClusterQueues first; the
// lowest priority; the most recent reservation; the uid), skipping one whose ClusterQueue is
// back within its nominalQuota, until the usage fits (with or without borrowing, in the order
// borrowWithinCohort gives), then those not needed given back (the last but one first). Empty
// when even all of them do not make it fit.
struct preemption_choice {
  std::vector<const workload*> targets;
  bool reclaim = false;  // a target is in another ClusterQueue of the cohort
};
// `placement`, when given, must hold as well once the targets are gone (the scheduler's
// workloadFits checks the topology; the flavor assigner's simulation does not).
using preemption_placement = std::function<bool(const std::vector<const workload*>& removed)>;
preemption_choice preemption_targets(const cluster_objects& c, const cluster_queue& q,
                                     const workload& w,
                                     const std::map<flavor_resource, std::int64_t>& need,
                                     const preemption_placement& placement = {});
// A preemption policy lets `w` preempt `x` (Kueue's SatisfiesPreemptionPolicy): LowerPriority,
// LowerOrNewerEqualPriority, Any.
bool satisfies_preemption_policy(std::string_view policy, const workload& w, const workload& x);
// The policy is set and not Never.
inline bool preemption_set(std::string_view policy) { return !policy.empty() && policy != "Never"; }

}  // namespace topogate::diagnose::detail

#pragma once
// What diagnose.cpp, diagnose_chain.cpp, the kueue_*.cpp files and nfd_hop.cpp share: small helpers
// over the cluster's objects.

#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "diagnose/cluster_objects.hpp"
#include "diagnose/diagnose.hpp"

namespace topogate::diagnose::detail {

inline constexpr std::int64_t big = std::numeric_limits<std::int64_t>::max();

std::int64_t sat_add(std::int64_t a, std::int64_t b) noexcept;
std::string join(const std::vector<std::string>& v, std::string_view sep);
// "ns/name".
std::string ns_name(std::string_view ns, std::string_view name);
// type=status (reason: message), as the runbook prints a condition.
std::string render_condition(const object_condition& c);
// The role a Workload runs: GPUStack's role label, else its (first) PodSet's name.
std::string role_of(const workload& w);
// The Workload's ModelDeployment owner, nullptr when none.
const owner_ref* deployment_owner(const workload& w);
// The ClusterQueue's flavor names, each once, in order.
std::vector<std::string> queue_flavor_names(const cluster_queue& q);
// Every label of `want` present in `have` with its value.
bool labels_match(const label_map& want, const label_map& have);
// NoSchedule and NoExecute keep Pods off a Node; PreferNoSchedule does not.
bool counts_for_scheduling(const taint& t);
// The PodSet's tolerations and the ResourceFlavor's.
std::vector<toleration> with_flavor(const podset& ps, const resource_flavor* rf);
bool tolerates(const std::vector<toleration>& tols, const taint& t);
// Kueue's way from a Workload to its ClusterQueue: its admission, else spec.queueName, the
// LocalQueue of that name in the Workload's namespace, its spec.clusterQueue; and the checks
// Kueue makes there before it tries any flavor (docs/operations.md, step 7).
struct queue_route {
  const local_queue* lq = nullptr;
  const cluster_queue* cq = nullptr;  // nullptr: missing (or not reached)
  std::string cq_name;
  // No LocalQueue was read at all (files without them): the only ClusterQueue is taken.
  bool assumed = false;
  // When the queue keeps the Workload Pending: Kueue's QuotaReserved reason and message,
  // and what makes it so ("" otherwise).
  std::string reason, message, detail;
};
queue_route route_of(const cluster_objects& c, const workload& w);
// Why Kueue holds the ClusterQueue inactive, as its Active condition words it ("Can't admit
// new workloads: is stopped."); "" when Kueue would hold it active.
std::string inactive_reason(const cluster_objects& c, const cluster_queue& q);
// The ClusterQueue a Workload is (or would be) admitted to (route_of's, even when it is
// inactive), nullptr when none.
const cluster_queue* queue_of(const cluster_objects& c, const workload& w);
// What bound Pods and hostname-level reservations take on each Node (in `flavor` only when
// given), `except` left out.
std::map<std::string, resource_amounts> node_usage(const cluster_objects& c, const workload* except,
                                                   std::string_view flavor = {});
// The same with the Workloads of `removed` gone as well, their bound Pods too (preemption's
// simulated removals).
std::map<std::string, resource_amounts> node_usage(const cluster_objects& c, const workload* except,
                                                   const std::vector<const workload*>& removed,
                                                   std::string_view flavor);
// What reservations take of each leaf domain (its values) of a Topology whose LEVELS do not end
// with kubernetes.io/hostname, in `flavor` only: Kueue keeps such usage per domain, not per
// Node (assignments at exactly these levels; none for a hostname Topology).
std::map<std::vector<std::string>, resource_amounts> domain_usage(
    const cluster_objects& c, const workload* except, const std::vector<const workload*>& removed,
    std::string_view flavor, const std::vector<std::string>& levels);

// The NFD hop of check_chain: findings and notes for every writing TopologySource
// (nfd_hop.cpp).
void check_nfd_hop(const cluster_objects& c, chain_report& r);

}  // namespace topogate::diagnose::detail

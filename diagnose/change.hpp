#pragma once
// The runbook's "Change a live hierarchy" before it is done: a candidate revision of a
// TopologySource against the cluster's current objects. The consumer's profiles for the
// revision (core/profile_impact.hpp) become the replacement ResourceFlavors and Topologies
// GPUStack creates, the managed ClusterQueues whose flavor set changes are drained (every
// Workload holding a reservation in them is evicted), and each evicted Workload is decided
// again on the new hierarchy by the same model as `diagnose pending` (follow_kueue,
// diagnose_pending), in Kueue's order, each admission taking its capacity before the next.
// Pure analysis: the objects, the revision and the source come from the caller.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/snapshot.hpp"
#include "core/topology_source.hpp"
#include "diagnose/cluster_objects.hpp"

namespace topogate::diagnose {

// The TopologySource of the objects a revision is for: the only one read (`name` empty) or
// the one named; nullopt with `why` set otherwise. Its levels and nodeSelector are what the
// profiles need.
[[nodiscard]] std::optional<core::topology_source> source_of(const cluster_objects& c,
                                                             const std::string& name,
                                                             std::string& why);

struct change_profile {
  std::string id;                   // fnv64-...
  std::vector<std::string> levels;  // ends with kubernetes.io/hostname
  std::size_t nodes = 0;
  std::string flavor, topology;  // the ResourceFlavor and Topology that pin it
  bool exists = false;           // the flavor exists already (it is kept, not created)
};

struct change_queue {
  std::string name;
  std::vector<std::string> before, after;  // the flavor names, in order
  bool drained = false;                    // the flavor set changes: GPUStack drains it
  std::string quota_rule;                  // how the replacement flavors' quota was set
};

struct change_podset {
  std::string podset;
  std::int64_t count = 0;       // the Pods Kueue admits (spec count, or less: minCount)
  std::string level;            // required or preferred level, "" for none
  std::string flavor;           // the flavor it is placed in ("" when pending)
  std::string domain;           // "topology.kubernetes.io/zone=zone-a" (admitted, a level)
  std::string placement;        // "worker-a1=1, worker-a2=1"
  std::int64_t largest = 0;     // pending: the most Pods one new domain of the level holds
  std::int64_t spec_count = 0;  // the PodSet's count
  std::string text;             // "admitted again (domain ...)" or "stays Pending (...)"
};

struct change_workload {
  std::string workload;  // namespace/name
  std::string cluster_queue;
  std::int64_t priority = 0;
  bool evicted = false;  // held a reservation before (else: Pending before, queued as well)
  bool admitted = false;
  std::string message;  // Kueue's message when it stays Pending
  std::vector<change_podset> podsets;
};

struct change_report {
  std::string revision;
  std::string source;
  core::error_list errors;  // the revision does not validate: nothing else is computed
  std::size_t nodes = 0, changed_nodes = 0;
  std::vector<change_profile> profiles;  // after the change, deepest first
  std::vector<std::string> gone;         // profile flavors no ClusterQueue uses any more
  std::vector<change_queue> queues;      // every ClusterQueue with a profile flavor
  // In the order Kueue takes them after the switch: every Workload of a drained queue.
  std::vector<change_workload> workloads;
  std::size_t evicted = 0, readmitted = 0, stranded = 0;
  std::vector<std::string> notes;
  [[nodiscard]] bool ok() const noexcept { return errors.empty(); }
};

// `snap` is the candidate revision; `src` the TopologySource it is for (with the new levels
// when the change is one of levels).
[[nodiscard]] change_report diagnose_change(const cluster_objects& c,
                                            const core::topology_source& src,
                                            const core::snapshot& snap);

// "evicted E, admitted again R, stranded S".
[[nodiscard]] std::string change_summary(const change_report& r);
[[nodiscard]] std::string render_change_text(const change_report& r);
[[nodiscard]] std::string render_change_json(const change_report& r);

}  // namespace topogate::diagnose

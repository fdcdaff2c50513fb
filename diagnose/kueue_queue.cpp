// Kueue v0.17.0's way from a Workload to its ClusterQueue and the checks it makes there before
// any flavor is tried (diagnose_internal.hpp: route_of), as the pinned module's
// pkg/controller/core/workload_controller.go, pkg/cache/scheduler/clusterqueue.go and
// pkg/scheduler/scheduler.go take them.

#include <algorithm>
#include <map>

#include "diagnose/diagnose_internal.hpp"

namespace topogate::diagnose::detail {

using namespace core;

std::string inactive_reason(const cluster_objects& c, const cluster_queue& q) {
  // Kueue's ClusterQueue cache: terminating, else the causes in its order.
  if (q.terminating) return "Can't admit new workloads; clusterQueue is terminating";
  std::vector<std::string> causes;
  if (!q.stop_policy.empty() && q.stop_policy != "None") causes.push_back("is stopped");
  std::vector<std::string> missing;
  std::map<std::string, std::string> no_topology;  // TAS flavor -> its missing Topology
  for (const auto& f : q.flavors) {
    const resource_flavor* rf = c.flavor(f.name);
    if (!rf) {
      missing.push_back(f.name);
    } else if (!rf->topology_name.empty() && !c.topology(rf->topology_name)) {
      no_topology[f.name] = rf->topology_name;
    }
  }
  if (!missing.empty())
    causes.push_back("references missing ResourceFlavor(s): " + join(missing, ","));
  // Its AdmissionChecks, each missing or not Active (sorted, as Kueue lists them); judged only
  // when AdmissionChecks were read.
  if (c.admission_checks_read) {
    std::vector<std::string> absent, inactive;
    for (const auto& name : q.admission_checks) {
      const admission_check* ac = c.check(name);
      auto& into = !ac ? absent : inactive;
      if ((!ac || !ac->active) && std::find(into.begin(), into.end(), name) == into.end())
        into.push_back(name);
    }
    std::sort(absent.begin(), absent.end());
    std::sort(inactive.begin(), inactive.end());
    if (!absent.empty())
      causes.push_back("references missing AdmissionCheck(s): " + join(absent, ","));
    if (!inactive.empty())
      causes.push_back("references inactive AdmissionCheck(s): " + join(inactive, ","));
  }
  // Kueue walks these in Go map order; sorted by flavor here.
  for (const auto& [f, t] : no_topology)
    causes.push_back("there is no Topology \"" + t + "\" for TAS flavor \"" + f + "\"");
  if (!causes.empty()) return "Can't admit new workloads: " + join(causes, ", ") + ".";
  // Causes diagnose does not read (AdmissionChecks when none were read, MultiKueue's
  // constraints): the queue's own Active condition.
  if (const auto* a = find_condition(q.conditions, "Active"); a && a->status == "False")
    return a->message.empty() ? "Can't admit new workloads." : a->message;
  return {};
}

queue_route route_of(const cluster_objects& c, const workload& w) {
  queue_route r;
  if (!w.admitted_cluster_queue.empty()) {
    r.cq_name = w.admitted_cluster_queue;
    r.cq = c.queue(r.cq_name);
    return r;
  }
  // Kueue's Workload controller: the LocalQueue, its stopPolicy, the ClusterQueue, its
  // Active state; each writes QuotaReserved=False, reason Inadmissible.
  r.lq = c.local(w.namespace_, w.queue_name);
  if (!r.lq && c.local_queues.empty() && c.cluster_queues.size() == 1) {
    r.assumed = true;
    r.cq = &c.cluster_queues.front();
    r.cq_name = r.cq->name;
  } else if (!r.lq) {
    r.reason = "Inadmissible";
    r.message = "LocalQueue " + w.queue_name + " doesn't exist";
    r.detail = "no LocalQueue " + w.queue_name + " in namespace " + w.namespace_;
    return r;
  } else {
    r.cq_name = r.lq->cluster_queue;
    r.cq = c.queue(r.cq_name);
    if (!r.lq->stop_policy.empty() && r.lq->stop_policy != "None") {
      r.reason = "Inadmissible";
      r.message = "LocalQueue " + w.queue_name + " is inactive";
      r.detail = "LocalQueue " + ns_name(w.namespace_, w.queue_name) + " has stopPolicy " +
                 r.lq->stop_policy;
      return r;
    }
    if (!r.cq) {
      r.reason = "Inadmissible";
      r.message = "ClusterQueue " + r.cq_name + " doesn't exist";
      r.detail = "LocalQueue " + ns_name(w.namespace_, w.queue_name) + " names ClusterQueue " +
                 r.cq_name + ", which does not exist";
      return r;
    }
  }
  if (const std::string why = inactive_reason(c, *r.cq); !why.empty()) {
    r.reason = "Inadmissible";
    r.message = "ClusterQueue " + r.cq_name + " is inactive";
    r.detail = "ClusterQueue " + r.cq_name + ": " + why;
    return r;
  }
  // Kueue's scheduler: the namespace against the ClusterQueue's namespaceSelector (absent
  // selects nothing); QuotaReserved=False, reason Pending.
  label_map ns_labels;
  if (const k8s_namespace* n = c.namespace_of(w.namespace_)) {
    ns_labels = n->labels;
  } else {
    // The label the apiserver puts on every Namespace.
    ns_labels = {{"kubernetes.io/metadata.name", w.namespace_}};
  }
  if (!r.cq->namespace_selector || !r.cq->namespace_selector->matches(ns_labels)) {
    r.reason = "Pending";
    r.message = "Workload namespace doesn't match ClusterQueue selector";
    std::vector<std::string> shown;
    for (const auto& [k, v] : ns_labels) shown.push_back(k + "=" + v);
    r.detail = "namespace " + w.namespace_ + " (labels " + join(shown, ",") +
               ") is not selected by ClusterQueue " + r.cq_name + "'s namespaceSelector" +
               (r.cq->namespace_selector ? "" : " (absent: no namespace)");
  }
  return r;
}

const cluster_queue* queue_of(const cluster_objects& c, const workload& w) {
  return route_of(c, w).cq;
}

}  // namespace topogate::diagnose::detail

// The runbook's "Verify the scheduling chain" (diagnose.hpp: check_chain): the managed Nodes,
// their flavors and Topologies, the ClusterQueue and the ModelDeployments' requests, each
// finding naming the object, the field and the runbook step.

#include <algorithm>
#include <map>
#include <set>

#include "core/ownership.hpp"
#include "core/profile.hpp"
#include "diagnose/diagnose.hpp"
#include "diagnose/diagnose_internal.hpp"

namespace topogate::diagnose {

using namespace core;
using namespace detail;

chain_report check_chain(const cluster_objects& c) {
  chain_report r;
  auto add = [&](std::string check, std::string object, std::string field, std::string_view step,
                 std::string detail) {
    r.findings.push_back({std::move(check), std::move(object), std::move(field), std::string(step),
                          std::move(detail)});
  };
  const std::string profile_field = "metadata.labels[" + std::string(profile_label) + "]";

  // Writing sources whose levels overlap and whose selectors share Nodes: the consumer
  // publishes neither, whatever their snapshots say (core/ownership).
  {
    std::vector<ownership_source> owners;
    for (const auto& s : c.sources)
      owners.push_back(
          {s.name, &s.levels, s.node_selector ? &*s.node_selector : nullptr, s.writes});
    std::vector<ownership_node> nodes;
    for (const auto& n : c.nodes) nodes.push_back({n.name, &n.labels});
    for (const auto& conflict : find_ownership_conflicts(owners, nodes))
      for (const std::string* name : {&conflict.first, &conflict.second})
        add("source-ownership", "TopologySource/" + *name, "spec.nodeSelector", step_verify_chain,
            describe(conflict));
  }
  for (const auto& s : c.sources) {
    const auto* ready = find_condition(s.conditions, "Ready");
    if (!ready || ready->status != "True")
      add("source-ready", "TopologySource/" + s.name, "status.conditions[Ready]", step_verify_chain,
          ready ? "source is not Ready: " + render_condition(*ready)
                : "source reports no Ready condition");
  }
  // The NFD hop: the NodeFeatures writing sources publish through, applied to the Nodes.
  check_nfd_hop(c, r);

  // Profiles the flavors pin, to tell whether a Node's capacity reaches any flavor.
  std::set<std::string> pinned;
  for (const auto& f : c.flavors)
    if (const std::string* p = find_label(f.node_labels, profile_label)) pinned.insert(*p);
  std::set<std::string> carried;

  for (const auto& n : c.nodes) {
    std::vector<const topology_source_object*> selecting;
    for (const auto& s : c.sources)
      if (source_selects(s, n.labels)) selecting.push_back(&s);
    const std::string* have = find_label(n.labels, profile_label);
    const bool managed = c.sources.empty() ? have != nullptr : !selecting.empty();
    if (!managed) continue;
    ++r.managed_nodes;
    const std::string object = "Node/" + n.name;
    if (!have || have->empty()) {
      add("node-profile", object, profile_field, step_verify_chain,
          "managed Node has no profile label (selected by " +
              (selecting.empty() ? std::string("no source")
                                 : "TopologySource/" + selecting.front()->name) +
              ")");
      continue;
    }
    carried.insert(*have);
    if (!selecting.empty()) {
      std::vector<std::string> derived;
      bool matched = false;
      for (const auto* s : selecting) {
        const profile p = derive_profile(s->levels, n.labels);
        if (p.id == *have) matched = true;
        derived.push_back(p.id + " (TopologySource/" + s->name + ": " + join(p.levels, ", ") + ")");
      }
      if (!matched)
        add("node-profile-derivation", object, profile_field, step_verify_chain,
            "profile " + *have +
                " is not what the Node's labels derive to: " + join(derived, "; "));
    }
    if (!c.flavors.empty() && !pinned.count(*have))
      add("node-flavor", object, profile_field, step_verify_chain,
          "no ResourceFlavor pins profile " + *have + ": this Node's capacity is in no flavor");
  }

  std::set<std::string> referenced;
  for (const auto& q : c.cluster_queues)
    for (const auto& f : q.flavors) referenced.insert(f.name);

  for (const auto& f : c.flavors) {
    const std::string* p = find_label(f.node_labels, profile_label);
    if (!p && !referenced.count(f.name) && f.topology_name.empty()) continue;  // not a TAS flavor
    ++r.flavors;
    const std::string object = "ResourceFlavor/" + f.name;
    const std::string field = "spec.nodeLabels[" + std::string(profile_label) + "]";
    if (!p) {
      add("flavor-profile", object, field, step_verify_chain, "flavor does not pin a profile");
    } else if (!c.nodes.empty() && !carried.count(*p)) {
      bool any = false;
      for (const auto& n : c.nodes)
        if (const std::string* v = find_label(n.labels, profile_label); v && *v == *p) any = true;
      if (!any)
        add("flavor-profile-nodes", object, field, step_verify_chain,
            "no Node carries the pinned profile " + *p + ": the flavor has no capacity");
    }
    if (f.topology_name.empty()) {
      add("flavor-topology", object, "spec.topologyName", step_verify_chain,
          "flavor references no Topology");
      continue;
    }
    const kueue_topology* t = c.topology(f.topology_name);
    if (!t) {
      add("flavor-topology", object, "spec.topologyName", step_verify_chain,
          "Topology " + f.topology_name + " does not exist");
      continue;
    }
    if (p && !t->levels.empty() && profile_id(t->levels) != *p)
      add("flavor-topology-profile", object, "spec.topologyName", step_verify_chain,
          "Topology " + t->name + " levels (" + join(t->levels, ", ") + ") are profile " +
              profile_id(t->levels) + ", the flavor pins " + *p);
  }

  for (const auto& t : c.topologies) {
    ++r.topologies;
    if (t.levels.empty() || t.levels.back() != hostname_label)
      add("topology-hostname", "Topology/" + t.name,
          t.levels.empty() ? std::string("spec.levels")
                           : index("spec.levels", t.levels.size() - 1) + ".nodeLabel",
          step_verify_chain,
          "final level is " + (t.levels.empty() ? std::string("missing") : t.levels.back()) +
              ", not " + std::string(hostname_label));
  }

  for (const auto& q : c.cluster_queues) {
    ++r.queues;
    const std::string object = "ClusterQueue/" + q.name;
    std::map<std::size_t, std::size_t> per_group;
    for (std::size_t i = 0; i < q.flavors.size(); ++i) {
      const auto& f = q.flavors[i];
      ++per_group[f.group];
      if (!c.flavor(f.name))
        add("queue-flavor", object,
            index("spec.resourceGroups", f.group) + ".flavors[" + f.name + "]", step_verify_chain,
            "ResourceFlavor " + f.name + " does not exist");
    }
    for (const auto& [g, n] : per_group)
      if (n > max_flavors_per_group)
        add("queue-flavor-limit", object, index("spec.resourceGroups", g) + ".flavors",
            step_pending,
            std::to_string(n) + " flavors in one resource group, Kueue allows " +
                std::to_string(max_flavors_per_group));
    const auto* tr = find_condition(q.conditions, "TopologyReady");
    if (!tr || tr->status != "True")
      add("queue-topology-ready", object, "status.conditions[TopologyReady]", step_verify_chain,
          tr ? render_condition(*tr) : "no TopologyReady condition");
  }

  // Requested levels must be levels of some Topology (of the queue's flavors when known).
  auto levels_of_queue = [&](const cluster_queue* q) {
    std::set<std::string> levels;
    std::vector<const kueue_topology*> topos;
    if (q) {
      for (const auto& name : queue_flavor_names(*q))
        if (const auto* f = c.flavor(name))
          if (const auto* t = c.topology(f->topology_name)) topos.push_back(t);
    } else {
      for (const auto& t : c.topologies) topos.push_back(&t);
    }
    for (const auto* t : topos) levels.insert(t->levels.begin(), t->levels.end());
    return levels;
  };
  const auto all_levels = levels_of_queue(nullptr);
  for (const auto& d : c.deployments) {
    for (std::size_t i = 0; i < d.roles.size(); ++i) {
      const auto& role = d.roles[i];
      if (role.required_level.empty()) continue;
      ++r.requests;
      if (!c.topologies.empty() && !all_levels.count(role.required_level))
        add("requested-level", "ModelDeployment/" + ns_name(d.namespace_, d.name),
            index("spec.roles", i) + ".topology.requiredLevel", step_request_level,
            "level " + role.required_level + " is in no Topology");
    }
  }
  for (const auto& w : c.workloads) {
    const std::string object = "Workload/" + ns_name(w.namespace_, w.name);
    const cluster_queue* q = queue_of(c, w);
    const auto levels = levels_of_queue(q);
    const model_deployment* md = nullptr;
    if (const owner_ref* o = deployment_owner(w)) md = c.deployment(w.namespace_, o->name);
    for (std::size_t i = 0; i < w.podsets.size(); ++i) {
      const auto& ps = w.podsets[i];
      const std::string base = index("spec.podSets", i) + ".topologyRequest";
      for (const auto& [lv, field] :
           {std::pair{ps.required_level, "required"}, {ps.preferred_level, "preferred"}}) {
        if (lv.empty()) continue;
        ++r.requests;
        if (!c.topologies.empty() && !levels.count(lv))
          add("requested-level", object, base + "." + field, step_verify_chain,
              "level " + lv + " is in no Topology of " +
                  (q ? "ClusterQueue " + q->name + "'s flavors" : "the cluster"));
      }
      if (md) {
        const std::string role = w.podsets.size() == 1 ? role_of(w) : ps.name;
        for (const auto& mr : md->roles)
          if (mr.name == role && !mr.required_level.empty() &&
              mr.required_level != ps.required_level)
            add("workload-request", object, base + ".required", step_verify_chain,
                "role " + role + " of ModelDeployment " + md->name + " requires " +
                    mr.required_level + " but the PodSet requests " +
                    (ps.required_level.empty() ? "no level" : ps.required_level));
      }
    }
  }
  return r;
}

}  // namespace topogate::diagnose

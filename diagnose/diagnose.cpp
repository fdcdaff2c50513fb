#include "diagnose/diagnose.hpp"

#include <algorithm>
#include <limits>
#include <map>
#include <optional>
#include <set>

#include "core/ownership.hpp"
#include "core/profile.hpp"
#include "diagnose/diagnose_internal.hpp"
#include "diagnose/quantity.hpp"

namespace topogate::diagnose {

// Built on the core: its documents, field errors and rules are used by their names here.
using namespace core;

// The helpers the other files of diagnose/ share (diagnose_internal.hpp).
namespace detail {

std::int64_t sat_add(std::int64_t a, std::int64_t b) noexcept {
  if (b > 0 && a > big - b) return big;
  return a + b;
}

std::string ns_name(std::string_view ns, std::string_view name) {
  return ns.empty() ? std::string(name) : std::string(ns) + "/" + std::string(name);
}

std::string join(const std::vector<std::string>& v, std::string_view sep) {
  std::string out;
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (i) out += sep;
    out += v[i];
  }
  return out;
}

std::string render_condition(const object_condition& c) {
  std::string s = c.type + "=" + c.status;
  if (!c.reason.empty()) s += " (" + c.reason + ")";
  if (!c.message.empty()) s += ": " + c.message;
  return s;
}

std::string render_amounts(const resource_amounts& r) {
  std::string s;
  for (const auto& [k, v] : r) {
    if (!s.empty()) s += ", ";
    s += k + "=" + format_amount(k, v);
  }
  return s.empty() ? "nothing" : s;
}

bool labels_match(const label_map& want, const label_map& have) {
  for (const auto& [k, v] : want) {
    const std::string* got = find_label(have, k);
    if (!got || *got != v) return false;
  }
  return true;
}

bool counts_for_scheduling(const taint& t) {
  return t.effect == "NoSchedule" || t.effect == "NoExecute";  // PreferNoSchedule does not
}

std::vector<toleration> with_flavor(const podset& ps, const resource_flavor* rf) {
  std::vector<toleration> out = ps.tolerations;
  if (rf) out.insert(out.end(), rf->tolerations.begin(), rf->tolerations.end());
  return out;
}

std::string taint_text(const taint& t) {
  return t.key + (t.value.empty() ? "" : "=" + t.value) + ":" + t.effect;
}

bool tolerates(const std::vector<toleration>& tols, const taint& t) {
  for (const auto& tol : tols) {
    if (!tol.effect.empty() && tol.effect != t.effect) continue;
    if (tol.key.empty() && tol.op == "Exists") return true;
    if (tol.key != t.key) continue;
    if (tol.op == "Exists" || tol.value == t.value) return true;
  }
  return false;
}

// The role a Workload runs: GPUStack's role label, else its (first) PodSet's name.
std::string role_of(const workload& w) {
  if (const std::string* r = find_label(w.labels, role_label)) return *r;
  return w.podsets.empty() ? std::string() : w.podsets.front().name;
}

const owner_ref* deployment_owner(const workload& w) {
  for (const auto& o : w.owners)
    if (o.kind == "ModelDeployment") return &o;
  return nullptr;
}

std::vector<std::string> queue_flavor_names(const cluster_queue& q) {
  std::vector<std::string> out;
  for (const auto& f : q.flavors)
    if (std::find(out.begin(), out.end(), f.name) == out.end()) out.push_back(f.name);
  return out;
}

// The flavors a PodSet's capacity is counted in: those of its admission, else every flavor
// of its ClusterQueue, else every flavor that references a Topology.
std::vector<std::string> flavors_for(const cluster_objects& c, const workload& w,
                                     const podset& ps) {
  std::vector<std::string> out;
  for (const auto& a : w.assignments)
    if (a.name == ps.name)
      for (const auto& [r, f] : a.flavors)
        if (std::find(out.begin(), out.end(), f) == out.end()) out.push_back(f);
  if (!out.empty()) return out;
  if (const cluster_queue* q = queue_of(c, w)) return queue_flavor_names(*q);
  for (const auto& f : c.flavors)
    if (!f.topology_name.empty()) out.push_back(f.name);
  return out;
}

// What bound, non-terminated Pods other than TAS Pods request on each Node, plus the
// reservation of Workloads that hold quota with a hostname-level assignment and no such Pod
// (Kueue counts that capacity as taken, in the Workload's flavor).
std::map<std::string, resource_amounts> node_usage(const cluster_objects& c, const workload* except,
                                                   std::string_view flavor) {
  return node_usage(c, except, {}, flavor);
}

namespace {

// Each reservation Kueue counts as TAS usage in `flavor` (every flavor when empty): the
// assignments of Workloads that hold quota and have no Pod bound (WITH_PODS), `except` and
// the Workloads of GONE left out; FN(assignment, its PodSet).
template <class Fn>
void for_each_reservation(const cluster_objects& c, const workload* except,
                          const std::set<std::string>& gone, const std::set<std::string>& with_pods,
                          std::string_view flavor, Fn fn) {
  for (const auto& w : c.workloads) {
    if (&w == except || gone.count(w.namespace_ + "/" + w.name) || !w.quota_reserved() ||
        with_pods.count(w.namespace_ + "/" + w.name))
      continue;
    for (const auto& a : w.assignments) {
      // Kueue keeps TAS usage per flavor: a reservation counts in its own flavor only.
      if (!flavor.empty() && !a.flavors.empty()) {
        bool in = false;
        for (const auto& [r, f] : a.flavors) in = in || f == flavor;
        if (!in) continue;
      }
      for (const auto& s : w.podsets)
        if (s.name == a.name) fn(a, s);
    }
  }
}

std::set<std::string> names_of(const std::vector<const workload*>& removed) {
  std::set<std::string> gone;
  for (const workload* x : removed) gone.insert(x->namespace_ + "/" + x->name);
  return gone;
}

// A Pod Kueue counts as Node usage (in every flavor over its Node): bound, not terminated,
// not a TAS Pod (whose Workload's reservation counts instead, in its own flavor).
bool node_usage_pod(const k8s_pod& p) {
  return !p.node_name.empty() && p.phase != "Succeeded" && p.phase != "Failed" && !p.tas;
}

// The Workloads with such a Pod: their Pods count, not their reservation.
std::set<std::string> with_bound_pods(const cluster_objects& c) {
  std::set<std::string> out;
  for (const auto& p : c.pods)
    if (node_usage_pod(p) && !p.workload.empty()) out.insert(p.namespace_ + "/" + p.workload);
  return out;
}

void add_requests(resource_amounts& u, const podset& ps, std::int64_t count) {
  for (const auto& [k, v] : ps.requests)
    for (std::int64_t i = 0; i < count; ++i) u[k] = sat_add(u[k], v);
  u["pods"] = sat_add(u["pods"], count);
}

}  // namespace

std::map<std::string, resource_amounts> node_usage(const cluster_objects& c, const workload* except,
                                                   const std::vector<const workload*>& removed,
                                                   std::string_view flavor) {
  std::map<std::string, resource_amounts> used;
  const std::set<std::string> gone = names_of(removed);
  for (const auto& p : c.pods) {
    if (!node_usage_pod(p)) continue;
    if (!p.workload.empty() && gone.count(p.namespace_ + "/" + p.workload)) continue;
    auto& u = used[p.node_name];
    for (const auto& [k, v] : p.requests) u[k] = sat_add(u[k], v);
    u["pods"] = sat_add(u["pods"], 1);
  }
  for_each_reservation(
      c, except, gone, with_bound_pods(c), flavor,
      [&](const podset_assignment& a, const podset& ps) {
        if (a.topology_levels.empty() || a.topology_levels.back() != hostname_label) return;
        for (const auto& d : a.topology_domains)
          if (!d.values.empty()) add_requests(used[d.values.back()], ps, d.count);
      });
  return used;
}

std::map<std::vector<std::string>, resource_amounts> domain_usage(
    const cluster_objects& c, const workload* except, const std::vector<const workload*>& removed,
    std::string_view flavor, const std::vector<std::string>& levels) {
  std::map<std::vector<std::string>, resource_amounts> used;
  if (levels.empty() || levels.back() == hostname_label) return used;
  for_each_reservation(c, except, names_of(removed), with_bound_pods(c), flavor,
                       [&](const podset_assignment& a, const podset& ps) {
                         if (a.topology_levels != levels) return;
                         for (const auto& d : a.topology_domains)
                           add_requests(used[d.values], ps, d.count);
                       });
  return used;
}

}  // namespace detail

using namespace detail;

namespace {

flavor_capacity flavor_fit(const cluster_objects& c, const resource_flavor* rf,
                           std::string_view flavor_name, const podset& ps, std::string_view level,
                           const std::map<std::string, resource_amounts>& used) {
  flavor_capacity fc;
  fc.flavor = flavor_name;
  const kueue_topology* topo = rf ? c.topology(rf->topology_name) : nullptr;
  fc.topology = rf ? rf->topology_name : "";
  std::size_t depth = 0;  // levels that name a domain
  if (level.empty()) {
    fc.level_in_topology = true;  // no request: the whole flavor is one domain
  } else if (topo) {
    for (std::size_t i = 0; i < topo->levels.size(); ++i)
      if (topo->levels[i] == level) {
        fc.level_in_topology = true;
        depth = i + 1;
      }
  }
  if (!rf) return fc;
  std::map<std::vector<std::string>, domain_capacity> domains;
  // Kueue checks taints, the nodeSelector and the required node affinity per Node only when
  // the Topology ends with the hostname level.
  const bool per_node = !topo || (!topo->levels.empty() && topo->levels.back() == hostname_label);
  const auto tols = with_flavor(ps, rf);
  for (const auto& n : c.nodes) {
    if (!labels_match(rf->node_labels, n.labels)) continue;
    std::string why;
    if (topo)
      for (const auto& l : topo->levels)
        if (why.empty() && !find_label(n.labels, l))
          why = "no " + l + " label: outside the flavor's Topology";
    if (!why.empty()) {
    } else if (n.unschedulable) {
      why = "cordoned (spec.unschedulable)";
    } else if (!n.ready) {
      why = "no Ready condition (counts as not Ready)";
    } else if (!*n.ready) {
      why = "not Ready";
    } else if (per_node && !labels_match(ps.node_selector, n.labels)) {
      why = "PodSet nodeSelector does not match";
    } else if (per_node && ps.required_affinity &&
               !affinity_matches(*ps.required_affinity, n.labels, n.name)) {
      why = "PodSet required node affinity does not match";
    } else if (per_node) {
      for (const auto& t : n.taints)
        if (why.empty() && counts_for_scheduling(t) && !tolerates(tols, t))
          why = "taint " + taint_text(t) + " not tolerated";
    }
    if (why.empty())
      for (const auto& t : rf->node_taints)
        if (why.empty() && counts_for_scheduling(t) && !tolerates(tols, t))
          why = "flavor taint " + taint_text(t) + " not tolerated";
    if (!why.empty()) {
      fc.excluded.emplace_back(n.name, why);  // the scheduler would not place the Pod there
      continue;
    }
    node_capacity nc;
    nc.name = n.name;
    nc.allocatable = n.allocatable;
    if (auto it = used.find(n.name); it != used.end()) nc.used = it->second;
    nc.free = nc.allocatable;
    for (const auto& [k, v] : nc.used) nc.free[k] -= v;  // over-committed: negative, as Kueue
    nc.fits = pods_that_fit(nc.free, ps.requests);
    // Capacity outside every domain of the level still counts cluster-wide: that is the
    // difference the runbook asks to look at.
    fc.fits = sat_add(fc.fits, nc.fits);
    std::vector<std::string> path;
    if (!fc.level_in_topology) {
      why = "Topology " + (topo ? topo->name : std::string("(none)")) + " has no level " +
            std::string(level);
    } else if (topo) {
      for (std::size_t i = 0; i < depth; ++i) {
        const std::string* v = find_label(n.labels, topo->levels[i]);
        if (!v) {  // an empty value is a domain of its own
          why = "no " + topo->levels[i] + " label";
          break;
        }
        path.push_back(*v);
      }
    }
    if (!why.empty()) {
      fc.excluded.emplace_back(n.name, why + "; " + std::to_string(nc.fits) + " would fit");
      continue;
    }
    auto& d = domains[path];
    d.values = path;
    d.fits = sat_add(d.fits, nc.fits);
    d.nodes.push_back(std::move(nc));
  }
  for (auto& [k, d] : domains) {
    d.holds = d.fits >= ps.count;
    fc.domains.push_back(std::move(d));
  }
  return fc;
}

podset_fit fit_podset(const cluster_objects& c, const workload& w, const podset& ps,
                      const std::map<std::string, resource_amounts>& used) {
  podset_fit pf;
  pf.podset = ps.name;
  pf.required = !ps.required_level.empty();
  pf.level = pf.required ? ps.required_level : ps.preferred_level;
  pf.count = ps.count;
  pf.per_pod = ps.requests;
  for (const auto& name : flavors_for(c, w, ps)) {
    auto fc = flavor_fit(c, c.flavor(name), name, ps, pf.level, used);
    pf.cluster_fits = sat_add(pf.cluster_fits, fc.fits);
    std::int64_t spanning = 0;
    for (const auto& d : fc.domains) {
      pf.best_domain = std::max(pf.best_domain, d.fits);
      spanning = sat_add(spanning, d.fits);
    }
    pf.best_spanning = std::max(pf.best_spanning, spanning);
    pf.flavors.push_back(std::move(fc));
  }
  return pf;
}

std::string assignment_summary(const workload& w) {
  std::string s;
  for (const auto& a : w.assignments) {
    for (const auto& d : a.topology_domains) {
      if (!s.empty()) s += ", ";
      s += join(d.values, "/") + "=" + std::to_string(d.count);
    }
  }
  return s;
}
}  // namespace

std::string_view to_string(verdict v) noexcept {
  switch (v) {
    case verdict::ok:
      return "ok";
    case verdict::problem:
      return "problem";
    case verdict::info:
      return "info";
    case verdict::skipped:
      return "skipped";
  }
  return "info";
}

std::int64_t pods_that_fit(const resource_amounts& free, const resource_amounts& per_pod) {
  // Kueue's Requests.CountIn with `pods: 1` added to the Pod's requests.
  resource_amounts req = per_pod;
  req["pods"] = 1;
  std::int64_t fits = big;
  for (const auto& [k, v] : req) {
    if (v == 0) continue;
    auto it = free.find(k);
    if (it == free.end()) return 0;
    fits = std::min(fits, it->second / v);  // truncates toward zero, as Go does
  }
  return fits;
}

pending_report diagnose_pending(const cluster_objects& c, std::string_view ns,
                                std::string_view name) {
  pending_report r;
  const workload* w = c.find_workload(ns, name);
  if (!w) {
    r.workload = ns_name(ns, name);
    r.conclusion = "Workload " + r.workload + " not found";
    return r;
  }
  r.found = true;
  r.workload = ns_name(w->namespace_, w->name);
  const model_deployment* md = nullptr;
  if (const owner_ref* o = deployment_owner(*w)) {
    r.deployment = ns_name(w->namespace_, o->name);
    md = c.deployment(w->namespace_, o->name);
  }
  const std::string role = role_of(*w);

  // 1. ModelDeployment progress.
  {
    pending_step s{
        1, "Read the ModelDeployment progress message for the role and replica", verdict::info, {}};
    if (r.deployment.empty()) {
      s.result = verdict::skipped;
      s.lines.push_back("no ModelDeployment owns this Workload");
    } else if (!md) {
      s.result = verdict::skipped;
      s.lines.push_back("ModelDeployment " + r.deployment +
                        " (owner) was not among the objects read");
    } else {
      s.lines.push_back("ModelDeployment " + r.deployment + ", role " + role);
      for (const auto& cond : md->conditions) s.lines.push_back(render_condition(cond));
      for (const auto& [path, msg] : md->progress) s.lines.push_back(path + ": " + msg);
      if (md->conditions.empty() && md->progress.empty()) s.lines.push_back("no status reported");
    }
    r.steps.push_back(std::move(s));
  }

  // 2. Workload conditions, topology request and assignment.
  {
    pending_step s{2,
                   "Read the generated Workload conditions and topology request/assignment",
                   verdict::ok,
                   {}};
    for (const auto& cond : w->conditions) s.lines.push_back(render_condition(cond));
    if (w->conditions.empty()) s.lines.push_back("no conditions");
    for (const auto& ps : w->podsets) {
      std::string req = ps.required_level.empty()
                            ? (ps.preferred_level.empty()
                                   ? (ps.unconstrained ? "unconstrained" : "no topology request")
                                   : "preferred " + ps.preferred_level)
                            : "required " + ps.required_level;
      s.lines.push_back("PodSet " + ps.name + ": count " + std::to_string(ps.count) + ", " + req +
                        ", per Pod " + render_amounts(ps.requests));
      if (!ps.request_sources.empty())
        s.lines.push_back(
            "  per Pod request as Kueue computes it, beyond the template's requests: " +
            join(ps.request_sources, "; "));
    }
    for (const auto& a : w->assignments) {
      std::string dom;
      for (const auto& d : a.topology_domains) {
        if (!dom.empty()) dom += ", ";
        dom += join(d.values, "/") + "=" + std::to_string(d.count);
      }
      s.lines.push_back("assignment " + a.name + ": " +
                        (a.topology_levels.empty() ? std::string("no topology assignment")
                                                   : join(a.topology_levels, ", ") + " -> " + dom));
    }
    if (!w->quota_reserved()) {
      s.result = verdict::problem;
      s.lines.push_back("Pending: no quota reserved");
    }
    if (md) {
      for (const auto& mr : md->roles)
        for (const auto& ps : w->podsets)
          if (mr.name == (w->podsets.size() == 1 ? role : ps.name) && !mr.required_level.empty() &&
              mr.required_level != ps.required_level) {
            s.result = verdict::problem;
            s.lines.push_back("role " + mr.name + " requires " + mr.required_level +
                              " but PodSet " + ps.name +
                              " carries no matching topologyRequest.required");
          }
    }
    r.steps.push_back(std::move(s));
  }

  // 3. LocalQueue, ClusterQueue Active, TopologyReady and flavor count.
  const cluster_queue* q = queue_of(c, *w);
  {
    pending_step s{3,
                   "Check the ClusterQueue TopologyReady condition and resource-group flavor count",
                   verdict::ok,
                   {}};
    const queue_route route = route_of(c, *w);
    if (route.lq)
      s.lines.push_back("LocalQueue " + ns_name(route.lq->namespace_, route.lq->name) +
                        " -> ClusterQueue " + route.lq->cluster_queue);
    if (route.assumed)
      s.lines.push_back("no LocalQueue was read: the only ClusterQueue, " + route.cq_name +
                        ", is taken");
    if (!route.message.empty()) {
      s.result = verdict::problem;
      s.lines.push_back(route.message + ": " + route.detail);
    }
    if (!q) {
      s.result = verdict::problem;
      s.lines.push_back("no ClusterQueue found for queue " +
                        (w->queue_name.empty() ? "(none)" : w->queue_name));
    } else {
      s.lines.push_back("ClusterQueue " + q->name);
      const auto* tr = find_condition(q->conditions, "TopologyReady");
      if (!tr || tr->status != "True") s.result = verdict::problem;
      s.lines.push_back(tr ? render_condition(*tr) : "no TopologyReady condition");
      // Kueue's own readiness, which its scheduler follows (step 7).
      if (const auto* a = find_condition(q->conditions, "Active"))
        s.lines.push_back(render_condition(*a));
      for (std::size_t g = 0; g < q->group_resources.size(); ++g) {
        std::vector<std::string> names;
        for (const auto& f : q->flavors)
          if (f.group == g) names.push_back(f.name);
        s.lines.push_back("resource group " + std::to_string(g) + " (" +
                          join(q->group_resources[g], ", ") + "): " + std::to_string(names.size()) +
                          " flavor" + (names.size() == 1 ? "" : "s") + " of at most " +
                          std::to_string(max_flavors_per_group) + ": " + join(names, ", "));
        if (names.size() > max_flavors_per_group) s.result = verdict::problem;
      }
      if (!q->stop_policy.empty() && q->stop_policy != "None")
        s.lines.push_back("stopPolicy " + q->stop_policy +
                          " (a hierarchy change may be draining the queue)");
      if (q->reserving_workloads)
        s.lines.push_back("reservingWorkloads " + std::to_string(*q->reserving_workloads));
    }
    r.steps.push_back(std::move(s));
  }

  // 4. Referenced ResourceFlavors.
  std::vector<std::string> flavor_names;
  for (const auto& ps : w->podsets)
    for (const auto& f : flavors_for(c, *w, ps))
      if (std::find(flavor_names.begin(), flavor_names.end(), f) == flavor_names.end())
        flavor_names.push_back(f);
  {
    pending_step s{4,
                   "Check every referenced ResourceFlavor's profile label and topologyName",
                   verdict::ok,
                   {}};
    if (flavor_names.empty()) {
      s.result = verdict::problem;
      s.lines.push_back("no ResourceFlavor is referenced");
    }
    for (const auto& fn : flavor_names) {
      const resource_flavor* f = c.flavor(fn);
      if (!f) {
        s.result = verdict::problem;
        s.lines.push_back(fn + ": does not exist");
        continue;
      }
      const std::string* p = find_label(f->node_labels, profile_label);
      std::string line = fn + ": profile " + (p ? *p : std::string("(none)")) + ", topologyName " +
                         (f->topology_name.empty() ? std::string("(none)") : f->topology_name);
      const kueue_topology* t = c.topology(f->topology_name);
      if (!p || !t) s.result = verdict::problem;
      if (!f->topology_name.empty() && !t) line += " (Topology missing)";
      s.lines.push_back(line);
    }
    r.steps.push_back(std::move(s));
  }

  // 5. Requested level against each Topology and the Nodes' labels.
  {
    pending_step s{
        5,
        "Compare the requested level with each Kueue Topology and the actual Node labels",
        verdict::ok,
        {}};
    for (const auto& ps : w->podsets) {
      const std::string level = ps.required_level.empty() ? ps.preferred_level : ps.required_level;
      if (level.empty()) {
        s.lines.push_back("PodSet " + ps.name + ": no level requested");
        continue;
      }
      std::vector<std::string> with, without;
      for (const auto& t : c.topologies)
        (std::find(t.levels.begin(), t.levels.end(), level) != t.levels.end() ? with : without)
            .push_back(t.name);
      std::size_t labelled = 0;
      for (const auto& n : c.nodes)
        if (find_label(n.labels, level)) ++labelled;
      s.lines.push_back("PodSet " + ps.name + " requests " + level + ": in Topology " +
                        (with.empty() ? std::string("(none)") : join(with, ", ")) + "; not in " +
                        (without.empty() ? std::string("(none)") : join(without, ", ")) + "; " +
                        std::to_string(labelled) + " of " + std::to_string(c.nodes.size()) +
                        " Nodes carry the label");
      bool in_flavor = false;
      for (const auto& fn : flavors_for(c, *w, ps))
        if (const auto* f = c.flavor(fn))
          if (const auto* t = c.topology(f->topology_name))
            if (std::find(t->levels.begin(), t->levels.end(), level) != t->levels.end())
              in_flavor = true;
      if (!in_flavor) {
        s.result = verdict::problem;
        s.lines.push_back("no flavor of the queue has a Topology with level " + level);
      }
    }
    r.steps.push_back(std::move(s));
  }

  // 6. Capacity per domain.
  const auto used = node_usage(c, w);
  {
    pending_step s{
        6,
        "Count CPU, memory, and requested extended resources inside one domain, not cluster-wide",
        verdict::ok,
        {}};
    for (const auto& ps : w->podsets) {
      podset_fit pf = fit_podset(c, *w, ps, used);
      const std::string lvl = pf.level.empty() ? "cluster" : pf.level;
      std::string line = "PodSet " + ps.name + " (count " + std::to_string(pf.count) +
                         "): cluster-wide " + std::to_string(pf.cluster_fits) + " fit; ";
      if (pf.fits_one_domain()) {
        line += "a " + lvl + " domain holds " + std::to_string(pf.best_domain);
      } else {
        line += "no " + lvl + " domain holds " + std::to_string(pf.count) + " (largest holds " +
                std::to_string(pf.best_domain) + ")";
        if (pf.preferred()) {
          // Kueue's fallback for a preferred level: coarser levels, then several domains.
          line +=
              pf.fits()
                  ? "; preferred, so Kueue falls back to coarser levels and can spread it: the " +
                        lvl + " domains hold " + std::to_string(pf.best_spanning) + " together"
                  : "; preferred, but even spread over every " + lvl + " domain only " +
                        std::to_string(pf.best_spanning) + " fit";
        }
        if (!pf.fits()) s.result = verdict::problem;
      }
      s.lines.push_back(line);
      r.fits.push_back(std::move(pf));
    }
    r.steps.push_back(std::move(s));
  }

  // 7. Kueue's own decision, in its order.
  r.kueue = follow_kueue(c, *w);
  {
    pending_step s{7,
                   "Follow Kueue's decision: quota and flavor, then placement PodSet by PodSet",
                   verdict::ok,
                   {}};
    if (!r.kueue.modelled) {
      s.result = verdict::skipped;
      s.lines.push_back("no ClusterQueue found: Kueue's decision is not followed");
    } else {
      for (const auto& p : r.kueue.podsets)
        s.lines.push_back("PodSet " + p.podset +
                          (p.group.empty() ? "" : " (group " + p.group + ")") + ", count " +
                          std::to_string(p.count) +
                          (p.count == p.spec_count
                               ? std::string()
                               : " of " + std::to_string(p.spec_count) + " (partial admission)") +
                          ": " + p.stage + (p.flavor.empty() ? "" : " in flavor " + p.flavor) +
                          (p.detail.empty() ? "" : ": " + p.detail));
      if (!r.kueue.admissible) {
        s.result = verdict::problem;
        s.lines.push_back(r.kueue.message);
      }
      for (const auto& n : r.kueue.notes) s.lines.push_back("note: " + n);
    }
    r.steps.push_back(std::move(s));
  }

  // The deployment's other groups: which hold a reservation, which lack a domain.
  std::vector<const workload*> group;
  if (const owner_ref* o = deployment_owner(*w)) {
    for (const auto& x : c.workloads)
      if (x.namespace_ == w->namespace_)
        if (const owner_ref* xo = deployment_owner(x); xo && xo->name == o->name)
          group.push_back(&x);
  }
  if (group.size() > 1) {
    // In the deployment's role order, then by name: the same report whatever order the
    // objects were listed in.
    auto rank = [&](const workload* x) {
      std::size_t i = 0;
      if (md)
        for (; i < md->roles.size(); ++i)
          if (md->roles[i].name == role_of(*x)) break;
      return std::pair{i, x->name};
    };
    std::sort(group.begin(), group.end(),
              [&](const workload* a, const workload* b) { return rank(a) < rank(b); });
    for (const workload* x : group) {
      group_status g;
      g.workload = ns_name(x->namespace_, x->name);
      g.role = role_of(*x);
      g.quota_reserved = x->quota_reserved();
      g.admitted = x->admitted();
      g.assignment = assignment_summary(*x);
      g.fits = true;
      g.fits_one_domain = true;
      const auto u = node_usage(c, x);
      for (const auto& ps : x->podsets) {
        const podset_fit pf = fit_podset(c, *x, ps, u);
        if (!pf.fits()) g.fits = false;
        if (!pf.fits_one_domain()) g.fits_one_domain = false;
      }
      r.groups.push_back(std::move(g));
    }
  }

  const auto& last = r.fits;
  bool short_domain = false;
  for (const auto& pf : last)
    if (!pf.fits()) short_domain = true;
  if (w->quota_reserved()) {
    r.conclusion = "Workload " + r.workload + " holds a reservation" +
                   (w->admitted() ? " and is admitted" : " (held for its set; not admitted)");
  } else if (r.kueue.modelled && r.kueue.admissible && r.kueue.partial) {
    std::vector<std::string> counts;
    for (const auto& p : r.kueue.podsets)
      if (p.count != p.spec_count)
        counts.push_back("PodSet " + p.podset + " with " + std::to_string(p.count) + " of " +
                         std::to_string(p.spec_count) + " Pods");
    r.conclusion =
        "Pending, but Kueue admits it partially at its next scheduling cycle (minCount): " +
        join(counts, ", ");
  } else if (r.kueue.modelled && !r.kueue.admissible && r.kueue.step == "queue") {
    r.conclusion = "Pending at the queue, before any flavor is tried: " + r.kueue.message + " (" +
                   r.kueue.reason + ")";
  } else if (r.kueue.modelled && !r.kueue.admissible && r.kueue.step == "resources") {
    // A container's requests above its limits, or outside the LimitRanges' bounds: the
    // message says which, the note in which words.
    r.conclusion =
        "Pending before any flavor is tried, at Kueue's check of the requests: " + r.kueue.message;
  } else if (r.kueue.modelled && !r.kueue.admissible && r.kueue.step == "preemption") {
    r.conclusion = "Pending at quota and flavor choice: Kueue would preempt " +
                   join(r.kueue.preempts, ", ") + " to admit it: " + r.kueue.message;
  } else if (r.kueue.modelled && !r.kueue.admissible && r.kueue.step == "quota") {
    r.conclusion = "Pending at quota and flavor choice: PodSet " + r.kueue.podset +
                   " stops the Workload: " + r.kueue.message;
  } else if (r.kueue.modelled && !r.kueue.admissible) {
    // Topology placement: the PodSet's own numbers, and which PodSets were placed before it.
    std::vector<std::string> before;
    for (const auto& p : r.kueue.podsets) {
      if (p.podset == r.kueue.podset) break;
      if (p.stage == "placed") before.push_back(p.podset + " (" + p.detail + ")");
    }
    const podset_fit* pf = nullptr;
    for (const auto& f : last)
      if (f.podset == r.kueue.podset) pf = &f;
    std::string numbers;
    if (pf)
      numbers = " (" + std::to_string(pf->count) + " Pods; alone: cluster-wide " +
                std::to_string(pf->cluster_fits) + " fit, the largest domain holds " +
                std::to_string(pf->best_domain) +
                (pf->preferred() ? ", all " + pf->level + " domains together " +
                                       std::to_string(pf->best_spanning)
                                 : std::string()) +
                ")";
    r.conclusion =
        "Pending at topology placement: PodSet " + r.kueue.podset + numbers +
        " stops the Workload" +
        (before.empty() ? std::string()
                        : " once the PodSets before it are placed: " + join(before, "; ")) +
        ": " + r.kueue.message;
  } else if (short_domain) {
    for (const auto& pf : last)
      if (!pf.fits())
        r.conclusion =
            "Pending: no single " + (pf.level.empty() ? std::string("cluster") : pf.level) +
            " domain holds PodSet " + pf.podset + " (" + std::to_string(pf.count) +
            " Pods): cluster-wide " + std::to_string(pf.cluster_fits) +
            " fit, the largest domain holds " + std::to_string(pf.best_domain) +
            (pf.preferred()
                 ? ", all " + pf.level + " domains together " + std::to_string(pf.best_spanning)
                 : std::string());
  } else {
    std::vector<std::string> problems;
    for (const auto& s : r.steps)
      if (s.number >= 3 && s.number <= 5 && s.result == verdict::problem)
        problems.push_back(std::to_string(s.number));
    r.conclusion =
        problems.empty()
            ? "Pending, yet a domain holds every PodSet and steps 3-5 pass: Kueue has not reserved "
              "quota "
              "yet (read the QuotaReserved message; quota or a competing Workload may hold it)"
            : "Pending, yet a domain holds every PodSet: the chain is broken at step " +
                  join(problems, ", ");
  }
  if (!w->quota_reserved())
    for (const auto& n : r.kueue.notes) r.conclusion += "; " + n;
  if (!r.groups.empty()) {
    std::vector<std::string> held, lacking;
    for (const auto& g : r.groups) {
      if (g.quota_reserved)
        held.push_back(g.role + " (" + g.workload + ")");
      else if (!g.fits)
        lacking.push_back(g.role + " (" + g.workload + ")");
    }
    if (!held.empty()) r.conclusion += "; reserved and held for the set: " + join(held, ", ");
    if (!lacking.empty()) r.conclusion += "; short of a domain: " + join(lacking, ", ");
  }
  return r;
}

}  // namespace topogate::diagnose

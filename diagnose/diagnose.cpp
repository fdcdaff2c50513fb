#include "diagnose/diagnose.hpp"

#include <algorithm>
#include <limits>
#include <map>
#include <optional>
#include <set>

#include "core/ownership.hpp"
#include "core/profile.hpp"
#include "diagnose/quantity.hpp"

namespace topogate::diagnose {

// Built on the core: its documents, field errors and rules are used by their names here.
using namespace core;

namespace {

constexpr std::int64_t big = std::numeric_limits<std::int64_t>::max();

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

// The ClusterQueue a Workload is (or would be) admitted to: its admission, else its
// LocalQueue's, else the only ClusterQueue there is.
const cluster_queue* queue_of(const cluster_objects& c, const workload& w) {
  if (!w.admitted_cluster_queue.empty()) return c.queue(w.admitted_cluster_queue);
  for (const auto& lq : c.local_queues)
    if (lq.name == w.queue_name && lq.namespace_ == w.namespace_) return c.queue(lq.cluster_queue);
  if (c.cluster_queues.size() == 1) return &c.cluster_queues.front();
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

// What bound, non-terminated Pods request on each Node, plus the reservation of Workloads
// that hold quota with a hostname-level assignment but have no Pod bound yet (Kueue counts
// that capacity as taken).
std::map<std::string, resource_amounts> node_usage(const cluster_objects& c, const workload* except,
                                                   std::string_view flavor = {}) {
  std::map<std::string, resource_amounts> used;
  std::set<std::string> with_pods;
  for (const auto& p : c.pods) {
    if (p.node_name.empty() || p.phase == "Succeeded" || p.phase == "Failed") continue;
    auto& u = used[p.node_name];
    for (const auto& [k, v] : p.requests) u[k] = sat_add(u[k], v);
    u["pods"] = sat_add(u["pods"], 1);
    if (!p.workload.empty()) with_pods.insert(p.namespace_ + "/" + p.workload);
  }
  for (const auto& w : c.workloads) {
    if (&w == except || !w.quota_reserved() || with_pods.count(w.namespace_ + "/" + w.name))
      continue;
    for (const auto& a : w.assignments) {
      if (a.topology_levels.empty() || a.topology_levels.back() != hostname_label) continue;
      // Kueue keeps TAS usage per flavor: a reservation counts in its own flavor only.
      if (!flavor.empty() && !a.flavors.empty()) {
        bool in = false;
        for (const auto& [r, f] : a.flavors) in = in || f == flavor;
        if (!in) continue;
      }
      const podset* ps = nullptr;
      for (const auto& s : w.podsets)
        if (s.name == a.name) ps = &s;
      if (!ps) continue;
      for (const auto& d : a.topology_domains) {
        if (d.values.empty()) continue;
        auto& u = used[d.values.back()];
        for (const auto& [k, v] : ps->requests)
          for (std::int64_t i = 0; i < d.count; ++i) u[k] = sat_add(u[k], v);
        u["pods"] = sat_add(u["pods"], d.count);
      }
    }
  }
  return used;
}

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
  // Kueue checks taints and the nodeSelector per Node only when the Topology ends with the
  // hostname level.
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

// ---------------------------------------------------------------- Kueue's decision

// One domain of a flavor's topology tree as Kueue's TAS snapshot holds it: a leaf is a
// Node (Topology ending with the hostname level) or the Nodes sharing every level value.
struct tas_domain {
  std::vector<std::string> values;
  std::vector<std::size_t> children;  // indices into the next level's domains
  resource_amounts free;              // leaves only: allocatable less usage
  const k8s_node* node = nullptr;     // leaves of a hostname Topology
  std::int64_t state = 0, with_leader = 0, leader = 0;
};

struct tas_snapshot {
  const kueue_topology* topo = nullptr;
  const resource_flavor* rf = nullptr;
  bool per_node = false;
  std::vector<std::vector<tas_domain>> levels;  // coarsest first; the last are the leaves
};

tas_snapshot build_snapshot(const cluster_objects& c, const resource_flavor& rf,
                            const kueue_topology& topo,
                            const std::map<std::string, resource_amounts>& used) {
  tas_snapshot s;
  s.topo = &topo;
  s.rf = &rf;
  const std::size_t depth = topo.levels.size();
  s.per_node = depth > 0 && topo.levels.back() == hostname_label;
  s.levels.resize(depth);
  if (depth == 0) return s;
  std::vector<std::map<std::vector<std::string>, std::size_t>> index(depth);
  for (const auto& n : c.nodes) {
    // Kueue's Node cache holds schedulable Nodes whose Ready condition is True; a flavor
    // takes those with its nodeLabels and a label (any value, "" too) for every level.
    if (n.unschedulable || !n.ready || !*n.ready) continue;
    if (!labels_match(rf.node_labels, n.labels)) continue;
    std::vector<std::string> values;
    for (const auto& l : topo.levels) {
      const std::string* v = find_label(n.labels, l);
      if (!v) break;
      values.push_back(*v);
    }
    if (values.size() != depth) continue;
    resource_amounts free = n.allocatable;
    if (auto it = used.find(n.name); it != used.end())
      for (const auto& [k, v] : it->second) free[k] -= v;
    std::size_t parent = 0;
    for (std::size_t i = 0; i < depth; ++i) {
      std::vector<std::string> key(values.begin(), values.begin() + static_cast<long>(i) + 1);
      if (i + 1 == depth && s.per_node) key.push_back(n.name);  // one leaf per Node
      auto [it, fresh] = index[i].emplace(key, s.levels[i].size());
      if (fresh) {
        tas_domain d;
        d.values.assign(values.begin(), values.begin() + static_cast<long>(i) + 1);
        s.levels[i].push_back(std::move(d));
        if (i > 0) s.levels[i - 1][parent].children.push_back(it->second);
      }
      parent = it->second;
    }
    tas_domain& leaf = s.levels[depth - 1][parent];
    if (s.per_node) leaf.node = &n;
    for (const auto& [k, v] : free) leaf.free[k] += v;
  }
  return s;
}

std::string leaf_id(const tas_domain& d) { return d.node ? d.node->name : join(d.values, ","); }

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

void fill_counts(tas_snapshot& s, const resource_amounts& req, const resource_amounts* leader_req,
                 const std::vector<toleration>& tols, const label_map& selector,
                 const std::map<std::string, resource_amounts>& assumed) {
  auto& leaves = s.levels.back();
  for (auto& leaf : leaves) {
    leaf.state = leaf.with_leader = leaf.leader = 0;
    if (s.per_node) {
      bool excluded = false;
      for (const auto& t : leaf.node->taints)
        if (counts_for_scheduling(t) && !tolerates(tols, t)) excluded = true;
      if (excluded || !labels_match(selector, leaf.node->labels)) continue;
    }
    resource_amounts remaining = leaf.free;
    if (auto it = assumed.find(leaf_id(leaf)); it != assumed.end())
      for (const auto& [k, v] : it->second) remaining[k] -= v;
    leaf.state = pods_that_fit(remaining, req);
    if (leader_req && pods_that_fit(remaining, *leader_req) > 0) {
      leaf.leader = 1;
      for (const auto& [k, v] : *leader_req) remaining[k] -= v;
      remaining["pods"] -= 1;
    }
    leaf.with_leader = pods_that_fit(remaining, req);
  }
  for (std::size_t i = s.levels.size() - 1; i-- > 0;) {
    for (auto& d : s.levels[i]) {
      std::int64_t sum = 0, min_diff = big, leader = 0;
      for (std::size_t ch : d.children) {
        const auto& c = s.levels[i + 1][ch];
        sum += c.state;
        min_diff = std::min(min_diff, c.state - c.with_leader);
        leader = std::max(leader, c.leader);
      }
      d.state = sum;
      d.with_leader = d.children.empty() ? 0 : sum - min_diff;
      d.leader = leader;
    }
  }
}

// Kueue's orderings (BestFit for a required or preferred level, LeastFreeCapacity for an
// unconstrained request).
void sort_with_leader(std::vector<tas_domain*>& v, bool least_free) {
  std::stable_sort(v.begin(), v.end(), [&](const tas_domain* a, const tas_domain* b) {
    if (a->leader != b->leader) return a->leader > b->leader;
    if (a->with_leader != b->with_leader)
      return least_free ? a->with_leader < b->with_leader : a->with_leader > b->with_leader;
    return a->values < b->values;
  });
}
void sort_plain(std::vector<tas_domain*>& v, bool least_free) {
  std::stable_sort(v.begin(), v.end(), [&](const tas_domain* a, const tas_domain* b) {
    if (a->state != b->state) return least_free ? a->state < b->state : a->state > b->state;
    return a->values < b->values;
  });
}

tas_domain* best_fit(const std::vector<tas_domain*>& v, std::size_t from, std::int64_t needed,
                     bool with_leader) {
  auto st = [&](const tas_domain* d) { return with_leader ? d->with_leader : d->state; };
  tas_domain* best = v[from];
  for (std::size_t i = from; i < v.size(); ++i)
    if (st(v[i]) >= needed && st(v[i]) < st(best)) best = v[i];
  return best;
}

// Kueue's updateCountsToMinimumGeneric. `*short_of` is set when the domains run out before
// the count is reached: Kueue v0.17.0 logs "unexpected remainingCount" (code assumptions
// violated) and returns no assignment.
std::vector<tas_domain*> update_counts(const std::vector<tas_domain*>& doms, std::int64_t count,
                                       std::int64_t leaders, bool least_free, bool* short_of) {
  std::vector<tas_domain*> out;
  std::int64_t remaining = count, rem_leaders = leaders;
  for (std::size_t i = 0; i < doms.size(); ++i) {
    tas_domain* d = doms[i];
    if (rem_leaders > 0) {
      if (!least_free && d->with_leader >= remaining && d->leader >= rem_leaders)
        d = best_fit(doms, i, remaining, true);
      out.push_back(d);
      if (d->with_leader >= remaining && d->leader >= rem_leaders) {
        d->state = remaining;
        d->leader = rem_leaders;
        return out;
      }
      // Kueue distributes slices of one Pod here: clamp, then consume.
      d->with_leader = std::min(d->with_leader, remaining);
      d->leader = std::min(d->leader, rem_leaders);
      d->state = d->with_leader;
      rem_leaders -= d->leader;
      remaining -= d->with_leader;
      continue;
    }
    if (!least_free && d->state >= remaining) d = best_fit(doms, i, remaining, false);
    d->leader = 0;
    out.push_back(d);
    if (d->state >= remaining) {
      d->state = remaining;
      return out;
    }
    remaining -= d->state;
  }
  if (remaining > 0 || rem_leaders > 0) *short_of = true;
  return out;
}

std::string not_fit(const tas_snapshot& s, std::int64_t fit, std::int64_t count) {
  const std::string t = "topology \"" + s.topo->name + "\" ";
  if (fit <= 0) return t + "doesn't allow to fit any of " + std::to_string(count) + " pod(s)";
  return t + "allows to fit only " + std::to_string(fit) + " out of " + std::to_string(count) +
         " pod(s)";
}

// Kueue's findLevelWithFitDomains: the domains of `level` (or coarser, for a preferred
// request) the PodSet is placed in; "" reason when it fits.
std::pair<std::vector<tas_domain*>, std::string> fit_level(tas_snapshot& s, std::size_t level,
                                                           bool required, std::int64_t count,
                                                           std::int64_t leaders,
                                                           bool unconstrained) {
  std::vector<tas_domain*> sorted;
  for (auto& d : s.levels[level]) sorted.push_back(&d);
  if (sorted.empty()) return {{}, "no topology domains at level: " + s.topo->levels[level]};
  const bool least_free = unconstrained;
  sort_with_leader(sorted, least_free);
  tas_domain* top = sorted.front();
  if (!least_free && top->with_leader >= count && top->leader >= leaders)
    top = best_fit(sorted, 0, count, leaders > 0);
  if (least_free) {
    for (tas_domain* d : sorted)
      if (d->state >= count) return {{d}, ""};
    if (required) return {{}, not_fit(s, sorted.back()->state, count)};
  }
  if (top->with_leader < count || top->leader < leaders) {
    if (required) return {{}, not_fit(s, top->state, count)};
    if (level > 0 && !unconstrained)
      return fit_level(s, level - 1, required, count, leaders, unconstrained);
    std::vector<tas_domain*> out;
    std::int64_t remaining = count, rem_leaders = leaders;
    std::size_t i = 0;
    for (; rem_leaders > 0 && i < sorted.size() && sorted[i]->leader > 0; ++i) {
      tas_domain* d = sorted[i];
      if (!least_free && d->with_leader >= remaining) d = best_fit(sorted, i, remaining, true);
      out.push_back(d);
      rem_leaders -= d->leader;
      remaining -= d->with_leader;
    }
    if (rem_leaders > 0) return {{}, not_fit(s, leaders - rem_leaders, count)};
    std::vector<tas_domain*> rest(sorted.begin() + static_cast<long>(i), sorted.end());
    sort_plain(rest, least_free);
    for (std::size_t j = 0; remaining > 0 && j < rest.size(); ++j) {
      tas_domain* d = rest[j];
      if (!least_free && d->state >= remaining) d = best_fit(rest, j, remaining, false);
      out.push_back(d);
      remaining -= d->state;
    }
    if (remaining > 0) return {{}, not_fit(s, count - remaining, count)};
    // The level the spread ends at: every domain chosen is of `level`.
    return {out, ""};
  }
  return {{top}, ""};
}

std::size_t level_of(const tas_domain* d) { return d->values.size() - 1; }

// Kueue's findTopologyAssignment for one group (workers, optional leader) in one flavor.
tas_result place_group(tas_snapshot& s, const tas_request& workers, const tas_request* leader,
                       const std::map<std::string, resource_amounts>& assumed,
                       bool tas_only_queue) {
  tas_result r;
  const podset& ps = *workers.ps;
  resource_amounts req = ps.requests;
  resource_amounts leader_req;
  if (leader) leader_req = leader->ps->requests;
  const std::int64_t leaders = leader ? 1 : 0;
  const bool required = !ps.required_level.empty();
  const bool implied = ps.required_level.empty() && ps.preferred_level.empty() && tas_only_queue;
  const bool unconstrained =
      ps.required_level.empty() && ps.preferred_level.empty() && (ps.unconstrained || implied);
  std::string key = required                                   ? ps.required_level
                    : !ps.preferred_level.empty()              ? ps.preferred_level
                    : unconstrained && !s.topo->levels.empty() ? s.topo->levels.back()
                                                               : std::string();
  if (key.empty()) {
    r.reason = "topology level not specified";
    return r;
  }
  std::size_t level = 0;
  bool found = false;
  for (std::size_t i = 0; i < s.topo->levels.size(); ++i)
    if (s.topo->levels[i] == key) {
      level = i;
      found = true;
    }
  if (!found) {
    r.reason = "no requested topology level: " + key;
    return r;
  }
  fill_counts(s, req, leader ? &leader_req : nullptr, with_flavor(ps, s.rf),
              s.per_node ? ps.node_selector : label_map{}, assumed);
  auto [fit, reason] = fit_level(s, level, required, workers.count, leaders, unconstrained);
  if (!reason.empty()) {
    r.reason = reason;
    return r;
  }
  bool short_of = false;
  std::vector<tas_domain*> cur =
      update_counts(fit, workers.count, leaders, unconstrained, &short_of);
  for (std::size_t lv = cur.empty() ? s.levels.size() : level_of(cur.front()) + 1;
       lv < s.levels.size(); ++lv) {
    std::vector<tas_domain*> lower;
    for (tas_domain* d : cur)
      for (std::size_t ch : d->children) lower.push_back(&s.levels[lv][ch]);
    sort_plain(lower, unconstrained);
    cur = update_counts(lower, workers.count, leaders, unconstrained, &short_of);
  }
  if (short_of) {
    r.no_decision = true;
    r.reason =
        "Kueue v0.17.0 known bug: the domains chosen for the leader and workers hold "
        "fewer Pods than their level's count promised (Kueue logs \"unexpected "
        "remainingCount\", code assumptions violated): Kueue makes no decision and the "
        "Workload stays without a QuotaReserved condition";
    return r;
  }
  for (tas_domain* d : cur) {
    if (leader && d->leader > 0) r.leaders[leaf_id(*d)] += d->leader;
    if (d->state > 0) r.workers[leaf_id(*d)] += d->state;
  }
  r.ok = true;
  return r;
}

void add_assumed(std::map<std::string, resource_amounts>& assumed,
                 const std::map<std::string, std::int64_t>& placed, const resource_amounts& per_pod,
                 bool with_pods) {
  for (const auto& [leaf, n] : placed) {
    auto& u = assumed[leaf];
    for (const auto& [k, v] : per_pod) u[k] = sat_add(u[k], v * n);
    if (with_pods) u["pods"] += n;  // Kueue v0.17.0 leaves this out (see follow_kueue)
  }
}

std::string placed_text(const std::map<std::string, std::int64_t>& placed) {
  std::string s;
  for (const auto& [leaf, n] : placed) {
    if (!s.empty()) s += ", ";
    s += leaf + "=" + std::to_string(n);
  }
  return s;
}

bool requests_tas(const podset& ps) {
  return !ps.required_level.empty() || !ps.preferred_level.empty() || ps.unconstrained;
}

std::string quota_text(std::string_view res, std::int64_t v) {
  return format_amount(std::string(res), v);
}

// The resource group of `q` covering `res`; npos when none does.
std::size_t group_covering(const cluster_queue& q, std::string_view res) {
  for (std::size_t g = 0; g < q.group_resources.size(); ++g)
    for (const auto& r : q.group_resources[g])
      if (r == res) return g;
  return std::string::npos;
}

// Kueue's checkFlavorForPodSets for one PodSet: "" when the flavor may take it.
std::string flavor_mismatch(const cluster_objects& c, const cluster_queue& q, std::size_t rg,
                            const podset& ps, const std::string& flavor, bool tas_only) {
  const resource_flavor* rf = c.flavor(flavor);
  if (!rf) return "flavor " + flavor + " not found";
  const bool implied = !requests_tas(ps) && tas_only;
  if (requests_tas(ps) && !implied) {
    if (rf->topology_name.empty()) {
      bool overlap = false;
      for (const auto& r : q.group_resources[rg]) overlap = overlap || ps.requests.count(r);
      if (overlap) return "Flavor \"" + flavor + "\" does not support TopologyAwareScheduling";
    } else {
      const kueue_topology* t = c.topology(rf->topology_name);
      if (!t) return "Flavor \"" + flavor + "\" information missing in TAS cache";
      const std::string key = !ps.required_level.empty()    ? ps.required_level
                              : !ps.preferred_level.empty() ? ps.preferred_level
                                                            : std::string();
      if (!key.empty() && std::find(t->levels.begin(), t->levels.end(), key) == t->levels.end())
        return "Flavor \"" + flavor + "\" does not contain the requested level";
      if (t->levels.empty())
        return "Flavor \"" + flavor + "\" does not contain the requested level";
    }
  } else if (!implied && !rf->topology_name.empty()) {
    return "Flavor \"" + flavor + "\" supports only TopologyAwareScheduling";
  }
  const auto tols = with_flavor(ps, rf);
  for (const auto& t : rf->node_taints)
    if (counts_for_scheduling(t) && !tolerates(tols, t))
      // Kueue prints the Taint struct with Go's %s: {key value effect <nil>}.
      return "untolerated taint {" + t.key + " " + t.value + " " + t.effect + " <nil>} in flavor " +
             flavor;
  // The nodeSelector against the flavor's nodeLabels, for the label keys the group's
  // flavors use.
  for (const auto& [k, v] : ps.node_selector) {
    bool key_used = false;
    for (const auto& f : q.flavors)
      if (f.group == rg)
        if (const resource_flavor* o = c.flavor(f.name); o && find_label(o->node_labels, k))
          key_used = true;
    if (!key_used) continue;
    const std::string* have = find_label(rf->node_labels, k);
    if (!have || *have != v) return "flavor " + flavor + " doesn't match node affinity";
  }
  return "";
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

kueue_decision follow_kueue(const cluster_objects& c, const workload& w) {
  kueue_decision k;
  const cluster_queue* q = queue_of(c, w);
  if (!q) return k;
  k.modelled = true;
  bool tas_only = !q->flavors.empty();
  for (const auto& f : q->flavors)
    if (const resource_flavor* rf = c.flavor(f.name); !rf || rf->topology_name.empty())
      tas_only = false;
  if (!q->cohort.empty())
    k.notes.push_back("ClusterQueue " + q->name + " is in cohort " + q->cohort +
                      ": borrowing is not modelled, only its own nominalQuota counts");
  const bool covers_pods = group_covering(*q, "pods") != std::string::npos;

  // PodSet groups (podSetGroupName; else each PodSet alone), in the order they first appear.
  std::vector<std::vector<std::size_t>> groups;
  {
    std::map<std::string, std::size_t> by_name;
    for (std::size_t i = 0; i < w.podsets.size(); ++i) {
      const auto& g = w.podsets[i].group_name;
      if (!g.empty()) {
        if (auto it = by_name.find(g); it != by_name.end()) {
          groups[it->second].push_back(i);
          continue;
        }
        by_name[g] = groups.size();
      }
      groups.push_back({i});
    }
  }
  for (const auto& ps : w.podsets)
    k.podsets.push_back({ps.name, ps.group_name, "", "not reached", "", ps.count});
  if (w.quota_reserved()) {
    // Kueue has decided: its admission is the answer (re-deciding would count the
    // Workload's own bound Pods against it).
    k.admissible = true;
    for (auto& p : k.podsets) {
      p.stage = "placed";
      for (const auto& a : w.assignments)
        if (a.name == p.podset) {
          for (const auto& [r, f] : a.flavors)
            if (p.flavor.empty()) p.flavor = f;
          std::vector<std::string> doms;
          for (const auto& d : a.topology_domains)
            doms.push_back(join(d.values, "/") + "=" + std::to_string(d.count));
          p.detail = join(doms, ", ");
        }
    }
    k.notes.push_back("the Workload holds a reservation: Kueue's admission is its decision");
    return k;
  }

  // What the Workloads holding a reservation in this ClusterQueue use, per flavor.
  std::map<std::pair<std::string, std::string>, std::int64_t> usage;
  for (const auto& x : c.workloads) {
    if (&x == &w || !x.quota_reserved() || x.admitted_cluster_queue != q->name) continue;
    for (const auto& a : x.assignments) {
      const podset* ps = nullptr;
      for (const auto& s : x.podsets)
        if (s.name == a.name) ps = &s;
      if (!ps) continue;
      const std::int64_t n = a.count > 0 ? a.count : ps->count;
      for (const auto& [r, f] : a.flavors) {
        auto it = ps->requests.find(r);
        const std::int64_t per = r == "pods" ? 1 : (it == ps->requests.end() ? 0 : it->second);
        usage[{f, r}] = sat_add(usage[{f, r}], per * n);
      }
    }
  }

  // 1. Quota and flavor, group by group; `start[g]`: the position in its resource group's
  // flavors where the group's search begins (Kueue's LastTriedFlavorIdx: after a failed
  // scheduling cycle the next one starts after the flavor tried last).
  std::vector<std::string> group_flavor(groups.size());
  std::vector<std::size_t> chosen_pos(groups.size()), rg_size(groups.size());
  auto quota_pass = [&](const std::vector<std::size_t>& start, kueue_decision& kd) {
    std::map<std::pair<std::string, std::string>, std::int64_t> assumed_quota;
    for (std::size_t g = 0; g < groups.size(); ++g) {
      const podset& first = w.podsets[groups[g].front()];
      resource_amounts total;
      for (std::size_t i : groups[g]) {
        const auto& ps = w.podsets[i];
        for (const auto& [r, v] : ps.requests) total[r] = sat_add(total[r], v * ps.count);
        if (covers_pods) total["pods"] += ps.count;
      }
      std::map<std::size_t, std::string> chosen;  // resource group -> flavor
      std::string fail;
      for (const auto& [res, amount] : total) {
        const std::size_t rg = group_covering(*q, res);
        if (rg == std::string::npos) {
          if (amount == 0) continue;
          fail = "resource " + res + " unavailable in ClusterQueue";
          break;
        }
        if (chosen.count(rg)) continue;
        std::vector<std::string> reasons;
        std::size_t pos = 0;
        rg_size[g] = 0;
        for (const auto& f : q->flavors) rg_size[g] += f.group == rg;
        for (const auto& f : q->flavors) {
          if (f.group != rg) continue;
          if (pos++ < start[g]) continue;
          std::string why;
          for (std::size_t i : groups[g])
            if (why.empty()) why = flavor_mismatch(c, *q, rg, w.podsets[i], f.name, tas_only);
          if (!why.empty()) {
            reasons.push_back(why);
            continue;
          }
          bool fits = true;
          for (const auto& r : q->group_resources[rg]) {
            auto t = total.find(r);
            if (t == total.end()) continue;
            const std::int64_t before = assumed_quota[{f.name, r}];
            const std::int64_t val = sat_add(before, t->second);
            auto nq = f.nominal.find(r);
            const std::int64_t nominal = nq == f.nominal.end() ? 0 : nq->second;
            if (val > nominal) {
              reasons.push_back("insufficient quota for " + r + " in flavor " + f.name +
                                ", previously considered podsets requests (" +
                                quota_text(r, before) + ") + current podset request (" +
                                quota_text(r, t->second) + ") > maximum capacity (" +
                                quota_text(r, nominal) + ")");
              fits = false;
              break;
            }
            const std::int64_t available = nominal - usage[{f.name, r}];
            if (val > available) {
              // Kueue would look for Workloads to preempt; none is preemptible here
              // (preemption is not modelled), so the next flavor is tried.
              reasons.push_back("insufficient unused quota for " + r + " in flavor " + f.name +
                                ", " + quota_text(r, val - available) + " more needed");
              fits = false;
              break;
            }
          }
          if (fits) {
            chosen[rg] = f.name;
            chosen_pos[g] = pos - 1;
            break;
          }
        }
        if (!chosen.count(rg)) {
          fail = join(reasons, ", ");
          if (fail.empty()) fail = "no flavor in the resource group of " + res;
          break;
        }
      }
      if (!fail.empty()) {
        kd.step = "quota";
        kd.podset = first.name;
        kd.message = "couldn't assign flavors to pod set " + first.name + ": " + fail;
        for (std::size_t i : groups[g]) {
          kd.podsets[i].stage = "quota";
          kd.podsets[i].detail = fail;
        }
        return false;
      }
      for (const auto& [res, amount] : total) {
        const std::size_t rg = group_covering(*q, res);
        if (rg == std::string::npos) continue;
        auto& a = assumed_quota[{chosen[rg], res}];
        a = sat_add(a, amount);
      }
      // The flavor TAS places the group in: that of its covered resources' group.
      group_flavor[g].clear();
      for (const auto& [rg, f] : chosen)
        if (group_flavor[g].empty()) group_flavor[g] = f;
      for (std::size_t i : groups[g]) kd.podsets[i].flavor = group_flavor[g];
    }
    return true;
  };

  // 2. Topology-aware placement, group by group in the chosen flavor; each group's
  // assignment is subtracted before the next. `strict` also subtracts the Pod count.
  auto place_all = [&](bool strict, kueue_decision* out) {
    std::map<std::string, tas_snapshot> snaps;
    std::map<std::string, std::map<std::string, resource_amounts>> assumed;  // flavor -> leaf
    for (std::size_t g = 0; g < groups.size(); ++g) {
      const std::string& fname = group_flavor[g];
      const resource_flavor* rf = c.flavor(fname);
      const kueue_topology* topo = rf ? c.topology(rf->topology_name) : nullptr;
      const podset& lead_ps = w.podsets[groups[g].front()];
      if (!topo || (!requests_tas(lead_ps) && !tas_only)) {
        if (out)
          for (std::size_t i : groups[g]) out->podsets[i].stage = "placed";
        continue;  // not a TAS PodSet: quota alone admits it
      }
      auto it = snaps.find(fname);
      if (it == snaps.end())
        it = snaps.emplace(fname, build_snapshot(c, *rf, *topo, node_usage(c, &w, fname))).first;
      tas_request workers{&w.podsets[groups[g][0]], w.podsets[groups[g][0]].count};
      std::optional<tas_request> leader;
      if (groups[g].size() > 1) {
        leader = tas_request{&w.podsets[groups[g][1]], w.podsets[groups[g][1]].count};
        if (leader->count > workers.count) std::swap(*leader, workers);
      }
      const tas_result r =
          place_group(it->second, workers, leader ? &*leader : nullptr, assumed[fname], tas_only);
      if (!r.ok) {
        if (out) {
          out->step = "topology";
          out->no_decision = r.no_decision;
          out->podset = workers.ps->name;
          out->message = r.no_decision ? r.reason
                                       : "couldn't assign flavors to pod set " + workers.ps->name +
                                             ": " + r.reason;
          for (std::size_t i : groups[g]) {
            out->podsets[i].stage = "topology";
            out->podsets[i].detail = r.reason;
          }
          if (groups[g].size() > 1)
            out->notes.push_back("the PodSets of group " + workers.ps->group_name +
                                 " fail together; Kueue's message names either of them (Go map "
                                 "order)");
        }
        return false;
      }
      add_assumed(assumed[fname], r.workers, workers.ps->requests, strict);
      if (leader) add_assumed(assumed[fname], r.leaders, leader->ps->requests, strict);
      if (out)
        for (std::size_t i : groups[g]) {
          const bool is_leader = leader && leader->ps == &w.podsets[i];
          out->podsets[i].stage = "placed";
          out->podsets[i].detail = placed_text(is_leader ? r.leaders : r.workers);
        }
    }
    return true;
  };
  // Kueue's scheduling cycles: quota picks a flavor per group, TAS runs there; when TAS
  // fails, the next cycle starts after the flavors tried (wrapping to the first after the
  // last), until a cycle admits the Workload or the cycles repeat.
  const kueue_decision blank = k;
  std::vector<std::size_t> start(groups.size(), 0);
  std::set<std::vector<std::size_t>> seen;
  std::vector<std::string> tried;
  for (;;) {
    if (!seen.insert(start).second) break;
    kueue_decision attempt = blank;
    if (!quota_pass(start, attempt)) {
      bool from_first = true;
      for (auto s0 : start) from_first = from_first && s0 == 0;
      if (from_first || seen.count(std::vector<std::size_t>(groups.size(), 0))) {
        if (from_first || k.step.empty()) k = attempt;
        break;
      }
      start.assign(groups.size(), 0);
      continue;
    }
    attempt.admissible = place_all(false, &attempt);
    k = attempt;
    if (k.admissible || k.no_decision) break;
    tried.push_back(join(group_flavor, "+"));
    for (std::size_t g = 0; g < groups.size(); ++g)
      start[g] = chosen_pos[g] + 1 >= rg_size[g] ? 0 : chosen_pos[g] + 1;
  }
  if (!tried.empty() && (k.admissible || tried.size() > 1)) {
    for (auto& t : tried)
      if (t == join(group_flavor, "+") && !k.admissible) t.clear();
    std::vector<std::string> before;
    for (const auto& t : tried)
      if (!t.empty()) before.push_back(t);
    if (!before.empty())
      k.notes.push_back(
          "Kueue tries the next flavor in a later scheduling cycle after "
          "topology placement fails (LastTriedFlavorIdx): failed in " +
          join(before, ", ") +
          (k.admissible ? ", placed in " + join(group_flavor, "+") : std::string()));
  }
  if (groups.size() > 1 && k.admissible) {
    const bool strict = place_all(true, nullptr);
    if (strict != k.admissible)
      k.notes.push_back(
          "Kueue v0.17.0 known bug: the Pods of earlier PodSets are not subtracted from a Node's "
          "`pods` allocatable when the next PodSet is placed; counting them, the Workload " +
          std::string(strict ? "would fit" : "would not fit") +
          "; diagnose follows Kueue's decision" +
          (strict ? "" : " (the kubelet may refuse the Pods beyond a Node's `pods`)"));
  }
  return k;
}

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

  // 3. ClusterQueue TopologyReady and flavor count.
  const cluster_queue* q = queue_of(c, *w);
  {
    pending_step s{3,
                   "Check the ClusterQueue TopologyReady condition and resource-group flavor count",
                   verdict::ok,
                   {}};
    if (!q) {
      s.result = verdict::problem;
      s.lines.push_back("no ClusterQueue found for queue " +
                        (w->queue_name.empty() ? "(none)" : w->queue_name));
    } else {
      s.lines.push_back("ClusterQueue " + q->name);
      const auto* tr = find_condition(q->conditions, "TopologyReady");
      if (!tr || tr->status != "True") s.result = verdict::problem;
      s.lines.push_back(tr ? render_condition(*tr) : "no TopologyReady condition");
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
                          std::to_string(p.count) + ": " + p.stage +
                          (p.flavor.empty() ? "" : " in flavor " + p.flavor) +
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

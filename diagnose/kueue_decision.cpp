// Kueue v0.17.0's decision for one Workload, followed in Kueue's order (diagnose.hpp,
// kueue_decision): the ClusterQueue's quota and flavor choice, then topology-aware placement
// PodSet group by PodSet group in the chosen flavor, as the pinned module's
// pkg/scheduler/flavorassigner and pkg/cache/scheduler/tas_flavor_snapshot.go take it.

#include <algorithm>
#include <map>
#include <set>

#include "core/profile.hpp"
#include "diagnose/diagnose.hpp"
#include "diagnose/diagnose_internal.hpp"
#include "diagnose/quantity.hpp"

namespace topogate::diagnose {

using namespace core;
using namespace detail;

namespace {

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

// corev1 Taint.ToString: key=value:effect, key:effect, key=value: or key.
std::string taint_text(const taint& t) {
  if (t.effect.empty()) return t.value.empty() ? t.key : t.key + "=" + t.value + ":";
  return t.value.empty() ? t.key + ":" + t.effect : t.key + "=" + t.value + ":" + t.effect;
}

// Kueue's Requests.CountInWithLimitingResource (with `pods: 1` added): a requested resource
// the leaf lacks is the cause, else the one with the fewest Pods, ties to the smaller name.
// Kueue returns the first missing one in Go's map order; with several missing, the smallest
// name is taken here.
std::string limiting_resource(const resource_amounts& free, const resource_amounts& per_pod) {
  resource_amounts req = per_pod;
  req["pods"] = 1;
  for (const auto& [k, v] : req)
    if (v != 0 && free.find(k) == free.end()) return k;
  std::string lim;
  std::int64_t least = big;
  for (const auto& [k, v] : req) {
    const std::int64_t n = v == 0 ? big : free.at(k) / v;
    if (lim.empty() || n < least) {
      least = n;
      lim = k;
    }
  }
  return lim;
}

// Kueue's formatReasons: "kind: n" parts sorted as strings, joined by ", ".
std::string exclusions_text(const exclusion_stats& st) {
  std::vector<std::string> parts;
  if (st.node_selector > 0) parts.push_back("nodeSelector: " + std::to_string(st.node_selector));
  if (st.affinity > 0) parts.push_back("affinity: " + std::to_string(st.affinity));
  for (const auto& [k, n] : st.taints) parts.push_back("taint \"" + k + "\": " + std::to_string(n));
  for (const auto& [k, n] : st.resources)
    parts.push_back("resource \"" + k + "\": " + std::to_string(n));
  if (parts.empty()) return {};
  std::sort(parts.begin(), parts.end());
  return ". Total nodes: " + std::to_string(st.total) + "; excluded: " + join(parts, ", ");
}

// Kueue's slices (podSetSliceRequiredTopology, podSetSliceSize): groups of `size` Pods that
// each fit one domain of `level`. Without them a slice is one Pod at the lowest level.
struct slice_request {
  std::int64_t size = 1;
  std::size_t level = 0;  // index into the Topology's levels
};

void fill_counts(tas_snapshot& s, const resource_amounts& req, const resource_amounts* leader_req,
                 const std::vector<toleration>& tols, const label_map& selector,
                 const node_affinity* affinity,
                 const std::map<std::string, resource_amounts>& assumed,
                 const slice_request& slice) {
  auto& leaves = s.levels.back();
  s.stats = {};
  for (auto& lv : s.levels)
    for (auto& d : lv) d.state = d.with_leader = d.leader = d.slice_state = d.slice_with_leader = 0;
  for (auto& leaf : leaves) {
    ++s.stats.total;
    if (s.per_node) {
      // The first untolerated NoSchedule/NoExecute taint in the Node's order is the cause.
      const taint* untolerated = nullptr;
      for (const auto& t : leaf.node->taints)
        if (counts_for_scheduling(t) && !tolerates(tols, t)) {
          untolerated = &t;
          break;
        }
      if (untolerated) {
        ++s.stats.taints[taint_text(*untolerated)];
        continue;
      }
      if (!labels_match(selector, leaf.node->labels)) {
        ++s.stats.node_selector;
        continue;
      }
      if (affinity && !affinity_matches(*affinity, leaf.node->labels, leaf.node->name)) {
        ++s.stats.affinity;
        continue;
      }
    }
    resource_amounts remaining = leaf.free;
    if (auto it = assumed.find(leaf_id(leaf)); it != assumed.end())
      for (const auto& [k, v] : it->second) remaining[k] -= v;
    leaf.state = pods_that_fit(remaining, req);
    if (leaf.state == 0) {
      const std::string lim = limiting_resource(remaining, req);
      if (!lim.empty()) ++s.stats.resources[lim];
    }
    if (leader_req && pods_that_fit(remaining, *leader_req) > 0) {
      leaf.leader = 1;
      for (const auto& [k, v] : *leader_req) remaining[k] -= v;
      remaining["pods"] -= 1;
    }
    leaf.with_leader = pods_that_fit(remaining, req);
  }
  // Slices are counted at the slice level and summed above it; below it they are 0.
  if (slice.level + 1 == s.levels.size())
    for (auto& leaf : leaves) {
      leaf.slice_state = leaf.state / slice.size;
      leaf.slice_with_leader = leaf.with_leader / slice.size;
    }
  for (std::size_t i = s.levels.size() - 1; i-- > 0;) {
    for (auto& d : s.levels[i]) {
      std::int64_t sum = 0, min_diff = big, leader = 0, slices = 0, min_slice_diff = big;
      for (std::size_t ch : d.children) {
        const auto& c = s.levels[i + 1][ch];
        sum += c.state;
        min_diff = std::min(min_diff, c.state - c.with_leader);
        slices += c.slice_state;
        min_slice_diff = std::min(min_slice_diff, c.slice_state - c.slice_with_leader);
        leader = std::max(leader, c.leader);
      }
      d.state = sum;
      d.with_leader = d.children.empty() ? 0 : sum - min_diff;
      d.leader = leader;
      d.slice_state = slices;
      d.slice_with_leader = d.children.empty() ? 0 : slices - min_slice_diff;
      if (i == slice.level) {
        d.slice_state = d.state / slice.size;
        d.slice_with_leader = d.with_leader / slice.size;
      }
    }
  }
}

// Kueue's orderings (BestFit for a required or preferred level, LeastFreeCapacity for an
// unconstrained request): slices first, then the fewest Pods, then the level values.
void sort_with_leader(std::vector<tas_domain*>& v, bool least_free) {
  std::stable_sort(v.begin(), v.end(), [&](const tas_domain* a, const tas_domain* b) {
    if (a->leader != b->leader) return a->leader > b->leader;
    if (a->slice_with_leader != b->slice_with_leader)
      return least_free ? a->slice_with_leader < b->slice_with_leader
                        : a->slice_with_leader > b->slice_with_leader;
    if (a->with_leader != b->with_leader) return a->with_leader < b->with_leader;
    return a->values < b->values;
  });
}
void sort_plain(std::vector<tas_domain*>& v, bool least_free) {
  std::stable_sort(v.begin(), v.end(), [&](const tas_domain* a, const tas_domain* b) {
    if (a->slice_state != b->slice_state)
      return least_free ? a->slice_state < b->slice_state : a->slice_state > b->slice_state;
    if (a->state != b->state) return a->state < b->state;
    return a->values < b->values;
  });
}

// Kueue's findBestFitDomain*: the first domain with the least room that still holds
// `needed`, else v[from]. `slices`: counted in slices; `with_leader`: with the leader.
tas_domain* best_fit(const std::vector<tas_domain*>& v, std::size_t from, std::int64_t needed,
                     bool with_leader, bool slices = true) {
  auto st = [&](const tas_domain* d) {
    if (slices) return with_leader ? d->slice_with_leader : d->slice_state;
    return with_leader ? d->with_leader : d->state;
  };
  tas_domain* best = v[from];
  for (std::size_t i = from; i < v.size(); ++i)
    if (st(v[i]) >= needed && st(v[i]) < st(best)) best = v[i];
  return best;
}

// Kueue's updateCountsToMinimumGeneric, in slices (`slices`) or in Pods. `*short_of` is set
// when the domains run out before the count is reached: Kueue v0.17.0 logs "unexpected
// remainingCount" (code assumptions violated) and returns no assignment.
std::vector<tas_domain*> update_counts(const std::vector<tas_domain*>& doms, std::int64_t count,
                                       std::int64_t leaders, bool least_free, bool* short_of,
                                       std::int64_t slice_size = 1, bool slices = true) {
  std::vector<tas_domain*> out;
  std::int64_t remaining = slices ? count / slice_size : count, rem_leaders = leaders;
  for (std::size_t i = 0; i < doms.size(); ++i) {
    tas_domain* d = doms[i];
    if (rem_leaders > 0) {
      auto with = [&](tas_domain* x) -> std::int64_t& {
        return slices ? x->slice_with_leader : x->with_leader;
      };
      if (!least_free && with(d) >= remaining && d->leader >= rem_leaders)
        d = best_fit(doms, i, remaining, true, slices);
      out.push_back(d);
      if (with(d) >= remaining && d->leader >= rem_leaders) {
        if (slices) d->slice_state = remaining;
        d->state = remaining * (slices ? slice_size : 1);
        d->leader = rem_leaders;
        return out;
      }
      if (slices) {
        // Clamp, then consume.
        d->slice_with_leader = std::min(d->slice_with_leader, remaining);
        d->leader = std::min(d->leader, rem_leaders);
        d->state = d->slice_with_leader * slice_size;
        rem_leaders -= d->leader;
        remaining -= d->slice_with_leader;
      } else {
        // Pods: consume, then clamp (the domain's state is left as it was).
        remaining -= d->with_leader;
        rem_leaders -= d->leader;
        d->with_leader = std::min(d->with_leader, remaining);
        d->leader = std::min(d->leader, rem_leaders);
      }
      continue;
    }
    std::int64_t& have = slices ? d->slice_state : d->state;
    if (!least_free && have >= remaining) d = best_fit(doms, i, remaining, false, slices);
    std::int64_t& room = slices ? d->slice_state : d->state;
    d->leader = 0;
    out.push_back(d);
    if (room >= remaining) {
      d->state = remaining * (slices ? slice_size : 1);
      if (slices) d->slice_state = remaining;
      return out;
    }
    if (slices) d->state = d->slice_state * slice_size;
    remaining -= room;
  }
  if (remaining > 0 || rem_leaders > 0) *short_of = true;
  return out;
}

std::string not_fit(const tas_snapshot& s, std::int64_t fit, std::int64_t count,
                    std::int64_t slice_size) {
  const std::string t = "topology \"" + s.topo->name + "\" ";
  const std::string ex = exclusions_text(s.stats);
  const std::string unit = slice_size == 1 ? " pod(s)" : " slice(s)";
  if (fit <= 0) return t + "doesn't allow to fit any of " + std::to_string(count) + unit + ex;
  return t + "allows to fit only " + std::to_string(fit) + " out of " + std::to_string(count) +
         unit + ex;
}

// Kueue's findLevelWithFitDomains: the domains of `level` (or coarser, for a preferred
// request) the PodSet's slices are placed in; "" reason when it fits.
std::pair<std::vector<tas_domain*>, std::string> fit_level(tas_snapshot& s, std::size_t level,
                                                           bool required, std::int64_t count,
                                                           std::int64_t leaders, bool unconstrained,
                                                           std::int64_t slice_size) {
  std::vector<tas_domain*> sorted;
  for (auto& d : s.levels[level]) sorted.push_back(&d);
  if (sorted.empty()) return {{}, "no topology domains at level: " + s.topo->levels[level]};
  const bool least_free = unconstrained;
  const std::int64_t slices = count / slice_size;
  auto no_fit = [&](std::int64_t fit) { return not_fit(s, fit, slices, slice_size); };
  sort_with_leader(sorted, least_free);
  tas_domain* top = sorted.front();
  if (!least_free && top->slice_with_leader >= slices && top->leader >= leaders)
    top = best_fit(sorted, 0, slices, leaders > 0);
  if (least_free) {
    for (tas_domain* d : sorted)
      if (d->slice_state >= slices) return {{d}, ""};
    // Kueue reports the last domain's Pods here, in slices' words.
    if (required) return {{}, no_fit(sorted.back()->state)};
  }
  if (top->slice_with_leader < slices || top->leader < leaders) {
    if (required) return {{}, no_fit(top->slice_state)};
    if (level > 0 && !unconstrained)
      return fit_level(s, level - 1, required, count, leaders, unconstrained, slice_size);
    std::vector<tas_domain*> out;
    std::int64_t remaining = slices, rem_leaders = leaders;
    std::size_t i = 0;
    for (; rem_leaders > 0 && i < sorted.size() && sorted[i]->leader > 0; ++i) {
      tas_domain* d = sorted[i];
      if (!least_free && d->slice_with_leader >= remaining)
        d = best_fit(sorted, i, remaining, true);
      out.push_back(d);
      rem_leaders -= d->leader;
      remaining -= d->slice_with_leader;
    }
    if (rem_leaders > 0) return {{}, no_fit(leaders - rem_leaders)};
    std::vector<tas_domain*> rest(sorted.begin() + static_cast<long>(i), sorted.end());
    sort_plain(rest, least_free);
    for (std::size_t j = 0; remaining > 0 && j < rest.size(); ++j) {
      tas_domain* d = rest[j];
      if (!least_free && d->slice_state >= remaining) d = best_fit(rest, j, remaining, false);
      out.push_back(d);
      remaining -= d->slice_state;
    }
    if (remaining > 0) return {{}, no_fit(slices - remaining)};
    // The level the spread ends at: every domain chosen is of `level`.
    return {out, ""};
  }
  return {{top}, ""};
}

std::size_t level_of(const tas_domain* d) { return d->values.size() - 1; }

std::size_t level_index(const kueue_topology& t, const std::string& key, bool* found) {
  for (std::size_t i = 0; i < t.levels.size(); ++i)
    if (t.levels[i] == key) {
      *found = true;
      return i;
    }
  *found = false;
  return 0;
}

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
  if (!ps.slice_level.empty() && !ps.slice_size) {
    r.reason = "slice topology requested, but slice size not provided";
    return r;
  }
  slice_request slice;
  if (!ps.slice_level.empty()) slice.size = std::max<std::int64_t>(1, *ps.slice_size);
  const bool required = !ps.required_level.empty();
  // A request of slices only is unconstrained above them, from the highest level.
  const bool slice_only =
      ps.required_level.empty() && ps.preferred_level.empty() && !ps.slice_level.empty();
  const bool implied = ps.required_level.empty() && ps.preferred_level.empty() && !slice_only &&
                       !ps.unconstrained && tas_only_queue;
  const bool unconstrained = ps.required_level.empty() && ps.preferred_level.empty() &&
                             (ps.unconstrained || implied || slice_only);
  const auto& tl = s.topo->levels;
  std::string key = required                       ? ps.required_level
                    : !ps.preferred_level.empty()  ? ps.preferred_level
                    : slice_only && !tl.empty()    ? tl.front()
                    : unconstrained && !tl.empty() ? tl.back()
                                                   : std::string();
  if (key.empty()) {
    r.reason = "topology level not specified";
    return r;
  }
  bool found = false;
  const std::size_t level = level_index(*s.topo, key, &found);
  if (!found) {
    r.reason = "no requested topology level: " + key;
    return r;
  }
  const std::string slice_key = ps.slice_level.empty() ? tl.back() : ps.slice_level;
  slice.level = level_index(*s.topo, slice_key, &found);
  if (!found) {
    r.reason = "no requested topology level for slices: " + slice_key;
    return r;
  }
  if (level > slice.level) {
    r.reason = "podset slice topology " + slice_key + " is above the podset topology " + key;
    return r;
  }
  fill_counts(s, req, leader ? &leader_req : nullptr, with_flavor(ps, s.rf),
              s.per_node ? ps.node_selector : label_map{},
              ps.required_affinity ? &*ps.required_affinity : nullptr, assumed, slice);
  auto [fit, reason] =
      fit_level(s, level, required, workers.count, leaders, unconstrained, slice.size);
  if (!reason.empty()) {
    r.reason = reason;
    return r;
  }
  bool short_of = false;
  std::vector<tas_domain*> cur =
      update_counts(fit, workers.count, leaders, unconstrained, &short_of, slice.size);
  const std::size_t depth = s.levels.size();
  std::size_t lv = cur.empty() ? depth - 1 : level_of(cur.front());
  // Above the slice level: every domain of the next level together, in slices.
  for (; lv < std::min(depth - 1, slice.level); ++lv) {
    std::vector<tas_domain*> lower;
    for (tas_domain* d : cur)
      for (std::size_t ch : d->children) lower.push_back(&s.levels[lv + 1][ch]);
    sort_plain(lower, unconstrained);
    cur = update_counts(lower, workers.count, leaders, unconstrained, &short_of, slice.size);
  }
  // At and below it: each domain's Pods among its own children.
  for (; lv + 1 < depth; ++lv) {
    std::vector<tas_domain*> next;
    for (tas_domain* d : cur) {
      std::vector<tas_domain*> lower;
      for (std::size_t ch : d->children) lower.push_back(&s.levels[lv + 1][ch]);
      sort_plain(lower, unconstrained);
      for (tas_domain* x :
           update_counts(lower, d->state, d->leader, unconstrained, &short_of, 1, false))
        next.push_back(x);
    }
    cur = std::move(next);
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
  return !ps.required_level.empty() || !ps.preferred_level.empty() || ps.unconstrained ||
         !ps.slice_level.empty() || ps.slice_size;
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
      // Kueue's HasLevel: the request's level and the slice level (the lowest by default).
      const bool slice_only =
          ps.required_level.empty() && ps.preferred_level.empty() && !ps.slice_level.empty();
      const auto& tl = t->levels;
      const std::string key = !ps.required_level.empty()        ? ps.required_level
                              : !ps.preferred_level.empty()     ? ps.preferred_level
                              : slice_only && !tl.empty()       ? tl.front()
                              : ps.unconstrained && !tl.empty() ? tl.back()
                                                                : std::string();
      const std::string slice_key =
          !ps.slice_level.empty() ? ps.slice_level : (tl.empty() ? std::string() : tl.back());
      const auto has = [&](const std::string& k) {
        return std::find(tl.begin(), tl.end(), k) != tl.end();
      };
      if (key.empty() || !has(key) || !has(slice_key))
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
  // The nodeSelector and the required node affinity against the flavor's nodeLabels, for
  // the label keys the group's flavors use.
  const auto key_used = [&](const std::string& k) {
    for (const auto& f : q.flavors)
      if (f.group == rg)
        if (const resource_flavor* o = c.flavor(f.name); o && find_label(o->node_labels, k))
          return true;
    return false;
  };
  const std::string no_match = "flavor " + flavor + " doesn't match node affinity";
  for (const auto& [k, v] : ps.node_selector) {
    if (!key_used(k)) continue;
    const std::string* have = find_label(rf->node_labels, k);
    if (!have || *have != v) return no_match;
  }
  if (ps.required_affinity) {
    // Each term keeps the expressions on those keys (matchFields are dropped); a term left
    // empty lets every flavor through.
    node_affinity kept;
    for (const auto& t : *ps.required_affinity) {
      node_selector_term k;
      for (const auto& e : t.match_expressions)
        if (key_used(e.key)) k.match_expressions.push_back(e);
      if (k.match_expressions.empty()) {
        kept.clear();
        break;
      }
      kept.push_back(std::move(k));
    }
    if (!kept.empty() && !affinity_matches(kept, rf->node_labels, "")) return no_match;
  }
  return "";
}
}  // namespace

kueue_decision follow_kueue(const cluster_objects& c, const workload& w) {
  kueue_decision k;
  const queue_route route = route_of(c, w);
  if (!route.message.empty() && !w.quota_reserved()) {
    // The queue stops it before any flavor is tried (Kueue's Workload controller and the
    // scheduler's first checks).
    k.modelled = true;
    k.step = "queue";
    k.message = route.message;
    k.reason = route.reason;
    for (const auto& ps : w.podsets)
      k.podsets.push_back({ps.name, ps.group_name, "", "not reached", "", ps.count, ps.count});
    k.notes.push_back(route.detail);
    return k;
  }
  const cluster_queue* q = route.cq;
  if (!q) return k;
  k.modelled = true;
  if (route.assumed)
    k.notes.push_back("no LocalQueue was read: the only ClusterQueue, " + q->name +
                      ", is taken for queue " + w.queue_name);
  bool tas_only = !q->flavors.empty();
  for (const auto& f : q->flavors)
    if (const resource_flavor* rf = c.flavor(f.name); !rf || rf->topology_name.empty())
      tas_only = false;
  for (const auto& ps : w.podsets)
    if (ps.slice_layers)
      k.notes.push_back("PodSet " + ps.name +
                        " sets podsetSliceRequiredTopologyConstraints: slice layers are not "
                        "modelled, only podSetSliceRequiredTopology and podSetSliceSize");
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
    k.podsets.push_back({ps.name, ps.group_name, "", "not reached", "", ps.count, ps.count});
  // The counts tried: the spec's, or smaller ones down to minCount (partial admission).
  std::vector<std::int64_t> counts;
  for (const auto& ps : w.podsets) counts.push_back(ps.count);
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
          if (a.count > 0) p.count = a.count;
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
        for (const auto& [r, v] : ps.requests) total[r] = sat_add(total[r], v * counts[i]);
        if (covers_pods) total["pods"] += counts[i];
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
      tas_request workers{&w.podsets[groups[g][0]], counts[groups[g][0]]};
      std::optional<tas_request> leader;
      if (groups[g].size() > 1) {
        leader = tas_request{&w.podsets[groups[g][1]], counts[groups[g][1]]};
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
  // One assignment at `counts` from `start`: quota and flavor, then placement.
  auto assign = [&](const std::vector<std::size_t>& start, kueue_decision& attempt) {
    attempt = blank;
    for (std::size_t i = 0; i < counts.size(); ++i) attempt.podsets[i].count = counts[i];
    if (!quota_pass(start, attempt)) return false;
    attempt.admissible = place_all(false, &attempt);
    return attempt.admissible;
  };
  // Kueue's partial admission (PodSetReducer): when the spec counts do not fit, the same
  // cycle binary-searches the counts between them and minCount (each PodSet with a minCount
  // lowered in proportion to its share of the total reduction) for the largest that fits.
  std::int64_t total_delta = 0;
  for (const auto& ps : w.podsets) total_delta += ps.count - ps.min_count.value_or(ps.count);
  // The counts at search index h of total_delta (Kueue's fillPodSetSizesForSearchIndex).
  auto scale_counts = [&](std::int64_t h) {
    for (std::size_t i = 0; i < counts.size(); ++i) {
      const auto& ps = w.podsets[i];
      counts[i] = ps.count - (ps.count - ps.min_count.value_or(ps.count)) * h / total_delta;
    }
  };
  auto partial = [&](const std::vector<std::size_t>& start, kueue_decision& out) {
    if (total_delta <= 0) return false;
    const auto saved_flavor = group_flavor;
    const auto saved_pos = chosen_pos;
    const auto saved_size = rg_size;
    bool found = false;
    std::int64_t lo = 0, hi = total_delta + 1, last_good = 0;  // Go's sort.Search
    while (lo < hi) {
      const std::int64_t h = lo + (hi - lo) / 2;
      scale_counts(h);
      kueue_decision attempt;
      if (assign(start, attempt)) {
        last_good = h;
        out = std::move(attempt);
        found = true;
        hi = h;
      } else {
        lo = h + 1;
      }
    }
    found = found && lo == last_good;
    if (found) {
      scale_counts(last_good);
      // The flavors and positions of the assignment Kueue admits.
      kueue_decision again;
      assign(start, again);
    } else {
      for (std::size_t i = 0; i < counts.size(); ++i) counts[i] = w.podsets[i].count;
      // The next cycle starts from the full assignment's flavors (Kueue keeps its state).
      group_flavor = saved_flavor;
      chosen_pos = saved_pos;
      rg_size = saved_size;
    }
    return found;
  };
  std::vector<std::size_t> start(groups.size(), 0);
  std::set<std::vector<std::size_t>> seen;
  std::vector<std::string> tried;
  for (;;) {
    if (!seen.insert(start).second) break;
    kueue_decision attempt = blank;
    for (std::size_t i = 0; i < counts.size(); ++i) counts[i] = w.podsets[i].count;
    const bool quota_ok = quota_pass(start, attempt);
    if (quota_ok) attempt.admissible = place_all(false, &attempt);
    if (!attempt.admissible && !attempt.no_decision) {
      kueue_decision reduced;
      if (partial(start, reduced)) {
        k = std::move(reduced);
        k.partial = true;
        std::vector<std::string> what;
        for (std::size_t i = 0; i < counts.size(); ++i)
          if (counts[i] != w.podsets[i].count)
            what.push_back("PodSet " + w.podsets[i].name + " with " + std::to_string(counts[i]) +
                           " of " + std::to_string(w.podsets[i].count) + " Pods (minCount " +
                           std::to_string(w.podsets[i].min_count.value_or(0)) + ")");
        k.notes.push_back("partial admission: the spec counts do not fit (" + attempt.message +
                          "); Kueue admits " + join(what, ", "));
        break;
      }
    }
    if (!quota_ok) {
      bool from_first = true;
      for (auto s0 : start) from_first = from_first && s0 == 0;
      if (from_first || seen.count(std::vector<std::size_t>(groups.size(), 0))) {
        if (from_first || k.step.empty()) k = attempt;
        break;
      }
      start.assign(groups.size(), 0);
      continue;
    }
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
  if (!k.admissible) k.reason = "Pending";  // Kueue's scheduler writes it
  return k;
}
}  // namespace topogate::diagnose

// Kueue v0.17.0's topology-aware placement of one PodSet group in one flavor, as the pinned
// module's pkg/cache/scheduler/tas_flavor_snapshot.go and
// pkg/scheduler/flavorassigner/tas_flavorassigner.go take it (kueue_internal.hpp).

#include <algorithm>
#include <map>
#include <set>

#include "core/profile.hpp"
#include "diagnose/diagnose_internal.hpp"
#include "diagnose/kueue_internal.hpp"

namespace topogate::diagnose::detail {

using namespace core;

tas_snapshot build_snapshot(
    const cluster_objects& c, const resource_flavor& rf, const kueue_topology& topo,
    const std::map<std::string, resource_amounts>& used,
    const std::map<std::vector<std::string>, resource_amounts>& domain_used) {
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
  if (!s.per_node)
    for (auto& leaf : s.levels[depth - 1])
      if (auto it = domain_used.find(leaf.values); it != domain_used.end())
        for (const auto& [k, v] : it->second) leaf.free[k] -= v;
  return s;
}

namespace {

std::string leaf_id(const tas_domain& d) { return d.node ? d.node->name : join(d.values, ","); }

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

}  // namespace

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
  if (ps.required_affinity) {
    // Kueue parses the workers' required node affinity whole before counting any domain.
    std::vector<std::string> errs;
    for (std::size_t i = 0; i < ps.required_affinity->size(); ++i) {
      auto e = affinity_term_errors((*ps.required_affinity)[i], i);
      errs.insert(errs.end(), e.begin(), e.end());
    }
    if (!errs.empty()) {
      r.reason = "invalid affinity node selectors: " + node_selector_text(*ps.required_affinity) +
                 ", reason: " + aggregate_errors(errs);
      return r;
    }
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

std::vector<std::string> hostnames_equal_to_top_values(const cluster_objects& c,
                                                       const resource_flavor& rf,
                                                       const kueue_topology& topo) {
  if (topo.levels.size() < 2 || topo.levels.back() != hostname_label) return {};
  const tas_snapshot s = build_snapshot(c, rf, topo, {});
  std::set<std::string> top;
  for (const auto& d : s.levels.front()) top.insert(d.values.front());
  std::set<std::string> hit;
  for (const auto& leaf : s.levels.back())
    if (leaf.node)
      if (const std::string* h = find_label(leaf.node->labels, hostname_label); h && top.count(*h))
        hit.insert(leaf.node->name);
  return {hit.begin(), hit.end()};
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

}  // namespace topogate::diagnose::detail

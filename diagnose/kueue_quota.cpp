// Kueue v0.17.0's quota and flavor checks for one PodSet group, as the pinned module's
// pkg/scheduler/flavorassigner/flavorassigner.go takes them (kueue_internal.hpp).

#include <algorithm>
#include <functional>
#include <set>

#include "core/time.hpp"
#include "diagnose/diagnose_internal.hpp"
#include "diagnose/kueue_internal.hpp"
#include "diagnose/quantity.hpp"

namespace topogate::diagnose::detail {

std::string quota_text(std::string_view res, std::int64_t v) {
  return format_amount(std::string(res), v);
}

std::size_t group_covering(const cluster_queue& q, std::string_view res) {
  for (std::size_t g = 0; g < q.group_resources.size(); ++g)
    for (const auto& r : q.group_resources[g])
      if (r == res) return g;
  return std::string::npos;
}

std::string flavor_mismatch(const cluster_objects& c, const cluster_queue& q, std::size_t rg,
                            const podset& ps, const std::string& flavor, bool tas_only,
                            std::string* error) {
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
    // The terms ORed; a term that does not parse is skipped, and its errors are the check's
    // error when no other term matches (component-helpers' LazyErrorNodeSelector).
    std::vector<std::string> errs;
    bool matched = kept.empty();
    for (std::size_t i = 0; i < kept.size() && !matched; ++i) {
      auto e = affinity_term_errors(kept[i], i);
      if (!e.empty()) {
        errs.insert(errs.end(), e.begin(), e.end());
        continue;
      }
      matched = affinity_matches({kept[i]}, rf->node_labels, "");
    }
    if (!matched && !errs.empty() && error) {
      *error = aggregate_errors(errs);
      return "";
    }
    if (!matched) return no_match;
  }
  return "";
}
namespace {

std::int64_t value_at(const std::map<flavor_resource, std::int64_t>& m, const flavor_resource& fr) {
  auto it = m.find(fr);
  return it == m.end() ? 0 : it->second;
}

}  // namespace

std::map<flavor_resource, std::int64_t> quota_usage(const workload& x) {
  std::map<flavor_resource, std::int64_t> out;
  for (const auto& a : x.assignments) {
    const podset* ps = nullptr;
    for (const auto& s : x.podsets)
      if (s.name == a.name) ps = &s;
    if (!ps) continue;
    const std::int64_t n = a.count > 0 ? a.count : ps->count;
    for (const auto& [r, f] : a.flavors) {
      auto it = ps->requests.find(r);
      const std::int64_t per = r == "pods" ? 1 : (it == ps->requests.end() ? 0 : it->second);
      auto& u = out[{f, r}];
      u = sat_add(u, per * n);
    }
  }
  return out;
}

bool satisfies_preemption_policy(std::string_view policy, const workload& w, const workload& x) {
  const std::int64_t mine = w.priority.value_or(0), theirs = x.priority.value_or(0);
  if (policy == "Any") return true;
  if (policy != "LowerPriority" && policy != "LowerOrNewerEqualPriority") return false;
  if (theirs < mine) return true;
  if (theirs != mine || policy != "LowerOrNewerEqualPriority") return false;
  // An equal priority queued strictly after `w` (SchedulerTimestampPreemptionBuffer, alpha and
  // off by default in v0.17.0, would ask for five minutes more).
  const auto mine_queued = core::parse_rfc3339(w.queue_order_at);
  const auto queued = core::parse_rfc3339(x.queue_order_at);
  return mine_queued && queued && *mine_queued < *queued;
}

reserved_usages reserved_usage(const cluster_objects& c,
                               const std::vector<const workload*>& except) {
  reserved_usages out;
  for (const auto& x : c.workloads) {
    if (!x.quota_reserved()) continue;
    if (std::find(except.begin(), except.end(), &x) != except.end()) continue;
    auto& queue = out[x.admitted_cluster_queue];
    for (const auto& [fr, v] : quota_usage(x)) queue[fr] = sat_add(queue[fr], v);
  }
  return out;
}

std::map<flavor_resource, std::int64_t> nominal_quotas(const std::vector<queue_flavor>& flavors) {
  std::map<flavor_resource, std::int64_t> out;
  for (const auto& f : flavors)
    for (const auto& r : f.resources) {
      auto n = f.nominal.find(r);
      out[{f.name, r}] = n == f.nominal.end() ? 0 : n->second;
    }
  return out;
}

preemption_choice preemption_targets(const cluster_objects& c, const cluster_queue& q,
                                     const workload& w,
                                     const std::map<flavor_resource, std::int64_t>& need,
                                     const preemption_placement& placement) {
  // Kueue's preemption variants: within the ClusterQueue; reclaiming in the cohort with the
  // ClusterQueue within its nominalQuota (hierarchical advantage); or, without it, a candidate
  // only when not borrowing (ReclaimWithoutBorrowing) or also while borrowing.
  enum class variant { within_queue, hierarchical, without_borrowing, while_borrowing };
  struct candidate {
    const workload* wl;
    const cluster_queue* cq;
    variant v;
    std::map<flavor_resource, std::int64_t> usage;
  };
  const auto uses_needed = [&](const std::map<flavor_resource, std::int64_t>& u) {
    for (const auto& [fr, v] : need)
      if (value_at(u, fr) > 0) return true;
    return false;
  };
  const bool borrow_forbidden = !preemption_set(q.borrow_within_cohort);
  // What each ClusterQueue uses, the preemptor left out, summed once; the search below
  // subtracts a candidate's usage as it removes it and adds it back when it gives it back.
  const std::vector<const workload*> preemptor{&w};
  const reserved_usages base = reserved_usage(c, preemptor);
  reserved_usages used = base;
  const auto usage_of =
      [&](const cluster_queue& cq) -> const std::map<flavor_resource, std::int64_t>& {
    static const std::map<flavor_resource, std::int64_t> none;
    auto it = used.find(cq.name);
    return it == used.end() ? none : it->second;
  };
  std::map<const cluster_queue*, std::map<flavor_resource, std::int64_t>> nominals;
  const auto nominal_of = [&](const cluster_queue& cq, const flavor_resource& fr) {
    auto it = nominals.find(&cq);
    if (it == nominals.end()) it = nominals.emplace(&cq, nominal_quotas(cq.flavors)).first;
    return value_at(it->second, fr);
  };
  // Kueue's IsWithinNominalInResources for a ClusterQueue: no needed resource used beyond its
  // nominalQuota.
  const auto within_nominal = [&](const cluster_queue& cq) {
    const auto& u = usage_of(cq);
    for (const auto& [fr, v] : need)
      if (value_at(u, fr) > nominal_of(cq, fr)) return false;
    return true;
  };
  std::vector<candidate> same, hierarchy, priority;
  if (preemption_set(q.within_cluster_queue)) {
    for (const auto& x : c.workloads) {
      if (&x == &w || !x.quota_reserved() || x.admitted_cluster_queue != q.name) continue;
      auto u = quota_usage(x);
      if (!uses_needed(u) || !satisfies_preemption_policy(q.within_cluster_queue, w, x)) continue;
      same.push_back({&x, &q, variant::within_queue, std::move(u)});
    }
  }
  if (!q.cohort.empty() && preemption_set(q.reclaim_within_cohort)) {
    // QuantitiesFitInQuota: the usage fits in the ClusterQueue's own nominalQuota.
    const auto& own = usage_of(q);
    bool advantage = true;
    for (const auto& [fr, v] : need)
      advantage = advantage && sat_add(value_at(own, fr), v) <= nominal_of(q, fr);
    for (const auto& cq : c.cluster_queues) {
      if (&cq == &q || cq.cohort != q.cohort || within_nominal(cq)) continue;
      for (const auto& x : c.workloads) {
        if (!x.quota_reserved() || x.admitted_cluster_queue != cq.name) continue;
        auto u = quota_usage(x);
        if (!uses_needed(u) || !satisfies_preemption_policy(q.reclaim_within_cohort, w, x))
          continue;
        variant v = variant::hierarchical;
        if (!advantage) {
          // isAboveBorrowingThreshold: a priority not below the preemptor's, or above
          // borrowWithinCohort.maxPriorityThreshold, is reclaimed only without borrowing.
          const std::int64_t theirs = x.priority.value_or(0);
          const bool above = theirs >= w.priority.value_or(0) ||
                             (q.borrow_max_priority && theirs > *q.borrow_max_priority);
          v = borrow_forbidden || above ? variant::without_borrowing : variant::while_borrowing;
        }
        (advantage ? hierarchy : priority).push_back({&x, &cq, v, std::move(u)});
      }
    }
  }
  // Kueue's CandidatesOrdering: those already evicted first, other ClusterQueues before the
  // preemptor's, then the lowest priority, the most recent reservation (RFC 3339 times order
  // as strings), the uid.
  const auto order = [&](const candidate& a, const candidate& b) {
    if (a.wl->evicted != b.wl->evicted) return a.wl->evicted;
    if ((a.cq == &q) != (b.cq == &q)) return b.cq == &q;
    const auto pa = a.wl->priority.value_or(0), pb = b.wl->priority.value_or(0);
    if (pa != pb) return pa < pb;
    if (a.wl->quota_reserved_at != b.wl->quota_reserved_at)
      return a.wl->quota_reserved_at > b.wl->quota_reserved_at;
    return a.wl->uid < b.wl->uid;
  };
  for (auto* list : {&same, &hierarchy, &priority}) std::sort(list->begin(), list->end(), order);
  std::vector<const candidate*> all;
  for (const bool evicted : {true, false})
    for (const auto* list : {&hierarchy, &priority, &same})
      for (const auto& k : *list)
        if (k.wl->evicted == evicted) all.push_back(&k);

  // workloadFits: the usage fits what is available once the targets are gone, and without
  // borrowing when borrowing is not allowed in this attempt.
  std::vector<const workload*> removed{&w};
  const auto fits = [&](bool borrowing) {
    const cohort_quota quota(c, q, used);
    for (const auto& [fr, v] : need) {
      if (!borrowing && quota.borrows(fr, v)) return false;
      if (v > quota.available(fr)) return false;
    }
    return !placement ||
           placement(std::vector<const workload*>(removed.begin() + 1, removed.end()));
  };
  // The attempts, with and without borrowing, in Kueue's order.
  bool under_nominal = true;  // queueUnderNominalInResourcesNeedingPreemption
  {
    const auto& own = usage_of(q);
    for (const auto& [fr, v] : need)
      under_nominal = under_nominal && value_at(own, fr) < nominal_of(q, fr);
  }
  std::vector<bool> attempts;
  if ((hierarchy.empty() && priority.empty()) || (borrow_forbidden && !under_nominal))
    attempts = {true};
  else if (borrow_forbidden && hierarchy.empty())
    attempts = {false, true};
  else
    attempts = {true, false};
  // A candidate's usage leaves its ClusterQueue's (sign -1) or comes back to it (+1).
  const auto move_usage = [&](const candidate& k, std::int64_t sign) {
    auto& queue = used[k.cq->name];
    for (const auto& [fr, v] : k.usage) queue[fr] = sat_add(queue[fr], sign * v);
  };
  for (const bool borrowing : attempts) {
    std::vector<const candidate*> targets;
    removed.assign(1, &w);
    used = base;
    for (const candidate* k : all) {
      if (k->cq != &q) {
        if (borrowing && k->v == variant::without_borrowing) continue;
        if (within_nominal(*k->cq)) continue;
      }
      removed.push_back(k->wl);
      move_usage(*k, -1);
      targets.push_back(k);
      if (!fits(borrowing)) continue;
      // fillBackWorkloads: from the one before the last, each given back if it still fits.
      for (std::size_t i = targets.size() - 1; i-- > 0;) {
        removed.erase(std::find(removed.begin(), removed.end(), targets[i]->wl));
        move_usage(*targets[i], 1);
        if (fits(borrowing)) {
          targets[i] = targets.back();
          targets.pop_back();
        } else {
          removed.push_back(targets[i]->wl);
          move_usage(*targets[i], -1);
        }
      }
      preemption_choice out;
      for (const auto* t : targets) {
        out.targets.push_back(t->wl);
        out.reclaim = out.reclaim || t->cq != &q;
      }
      return out;
    }
  }
  return {};
}

std::int64_t cohort_quota::member::local(const flavor_resource& fr) const {
  auto ll = lending.find(fr);
  if (ll == lending.end()) return 0;
  return std::max<std::int64_t>(0, value_at(subtree, fr) - ll->second);
}

cohort_quota::cohort_quota(const cluster_objects& c, const cluster_queue& q, const workload* except)
    : cohort_quota(c, q, std::vector<const workload*>{except}) {}

cohort_quota::cohort_quota(const cluster_objects& c, const cluster_queue& q,
                           const std::vector<const workload*>& except)
    : cohort_quota(c, q, reserved_usage(c, except)) {}

cohort_quota::cohort_quota(const cluster_objects& c, const cluster_queue& q,
                           const reserved_usages& used) {
  // A node's own quotas: its nominalQuota starts its SubtreeQuota.
  const auto quotas_of = [](const std::vector<queue_flavor>& flavors, member& m) {
    m.nominal = nominal_quotas(flavors);
    m.subtree = m.nominal;
    for (const auto& f : flavors) {
      for (const auto& r : f.resources) {
        const flavor_resource fr{f.name, r};
        if (auto b = f.borrowing_limit.find(r); b != f.borrowing_limit.end())
          m.borrowing[fr] = b->second;
        if (auto l = f.lending_limit.find(r); l != f.lending_limit.end()) m.lending[fr] = l->second;
      }
    }
  };
  const auto queue_node = [&](const cluster_queue& cq) {
    member m;
    quotas_of(cq.flavors, m);
    if (auto it = used.find(cq.name); it != used.end()) m.usage = it->second;
    return m;
  };
  // A cohort: its Cohort object's own quota (none without one), plus what each child (its
  // ClusterQueues, the Cohorts naming it as parent) lends beyond what it keeps local, and
  // their usage beyond that (Kueue's accumulateFromChild). A cycle, which Kueue refuses, is
  // cut where it closes.
  std::set<std::string> visiting;
  std::function<member(const std::string&)> cohort_node = [&](const std::string& name) {
    member m;
    if (const cohort_object* k = c.cohort(name)) quotas_of(k->flavors, m);
    if (!visiting.insert(name).second) return m;
    const auto add_child = [&m](const member& child) {
      for (const auto& [fr, v] : child.subtree) m.subtree[fr] += v - child.local(fr);
      for (const auto& [fr, u] : child.usage)
        m.usage[fr] += std::max<std::int64_t>(0, u - child.local(fr));
    };
    for (const auto& cq : c.cluster_queues)
      if (cq.cohort == name) add_child(queue_node(cq));
    for (const auto& k : c.cohorts)
      if (k.parent == name && k.name != name) add_child(cohort_node(k.name));
    visiting.erase(name);
    return m;
  };
  path_.push_back(queue_node(q));
  std::vector<std::string> up;  // the cohorts of the path, in order
  for (std::string name = q.cohort; !name.empty();) {
    if (auto again = std::find(up.begin(), up.end(), name); again != up.end()) {
      cycle_.assign(again, up.end());
      cycle_.push_back(name);
      break;
    }
    up.push_back(name);
    path_.push_back(cohort_node(name));
    const cohort_object* k = c.cohort(name);
    name = k ? k->parent : std::string();
  }
}

std::int64_t cohort_quota::usage(const flavor_resource& fr) const {
  return value_at(path_.front().usage, fr);
}

std::int64_t cohort_quota::nominal(const flavor_resource& fr) const {
  return value_at(path_.front().nominal, fr);
}

// Kueue's available(): unused local quota plus what the parent has, capped by the
// borrowingLimit, up to the root.
std::int64_t cohort_quota::available_at(std::size_t i, const flavor_resource& fr) const {
  const member& m = path_[i];
  const std::int64_t subtree = value_at(m.subtree, fr), used = value_at(m.usage, fr);
  if (i + 1 == path_.size()) return subtree - used;
  std::int64_t from_parent = available_at(i + 1, fr);
  const std::int64_t local = m.local(fr);
  if (auto bl = m.borrowing.find(fr); bl != m.borrowing.end()) {
    const std::int64_t stored = subtree - local;
    const std::int64_t used_there = std::max<std::int64_t>(0, used - local);
    from_parent = std::min(stored - used_there + bl->second, from_parent);
  }
  return std::max<std::int64_t>(0, local - used) + from_parent;
}

std::int64_t cohort_quota::available(const flavor_resource& fr) const {
  return std::max<std::int64_t>(0, available_at(0, fr));
}

// Kueue's potentialAvailable(): the same with no usage anywhere.
std::int64_t cohort_quota::potential_at(std::size_t i, const flavor_resource& fr) const {
  const member& m = path_[i];
  const std::int64_t subtree = value_at(m.subtree, fr);
  if (i + 1 == path_.size()) return subtree;
  std::int64_t p = m.local(fr) + potential_at(i + 1, fr);
  if (auto bl = m.borrowing.find(fr); bl != m.borrowing.end())
    p = std::min(subtree + bl->second, p);
  return p;
}

std::int64_t cohort_quota::potential(const flavor_resource& fr) const {
  return potential_at(0, fr);
}

bool cohort_quota::borrows(const flavor_resource& fr, std::int64_t val) const {
  return value_at(path_.front().usage, fr) + val > value_at(path_.front().nominal, fr);
}

}  // namespace topogate::diagnose::detail

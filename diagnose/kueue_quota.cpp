// Kueue v0.17.0's quota and flavor checks for one PodSet group, as the pinned module's
// pkg/scheduler/flavorassigner/flavorassigner.go takes them (kueue_internal.hpp).

#include <algorithm>

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

std::vector<const workload*> preemption_targets(
    const cluster_objects& c, const cluster_queue& q, const workload& w, const cohort_quota& quota,
    const std::map<flavor_resource, std::int64_t>& need) {
  struct candidate {
    const workload* wl;
    std::map<flavor_resource, std::int64_t> usage;
  };
  const std::int64_t mine = w.priority.value_or(0);
  // SatisfiesPreemptionPolicy: a lower priority; with LowerOrNewerEqualPriority also an equal
  // priority queued strictly after `w` (SchedulerTimestampPreemptionBuffer, alpha and off by
  // default in v0.17.0, would ask for five minutes more).
  const auto mine_queued = core::parse_rfc3339(w.queue_order_at);
  const auto may_preempt = [&](const workload& x) {
    const std::int64_t theirs = x.priority.value_or(0);
    if (theirs < mine) return true;
    if (theirs != mine || q.within_cluster_queue != "LowerOrNewerEqualPriority") return false;
    const auto queued = core::parse_rfc3339(x.queue_order_at);
    return mine_queued && queued && *mine_queued < *queued;
  };
  std::vector<candidate> cands;
  for (const auto& x : c.workloads) {
    if (&x == &w || !x.quota_reserved() || x.admitted_cluster_queue != q.name) continue;
    if (!may_preempt(x)) continue;
    auto u = quota_usage(x);
    bool uses = false;
    for (const auto& [fr, v] : need) uses = uses || value_at(u, fr) > 0;
    if (uses) cands.push_back({&x, std::move(u)});
  }
  // Kueue's CandidatesOrdering: those already evicted first, then the lowest priority, then
  // the most recent reservation (RFC 3339 times order as strings), then the uid.
  std::sort(cands.begin(), cands.end(), [](const candidate& a, const candidate& b) {
    if (a.wl->evicted != b.wl->evicted) return a.wl->evicted;
    const auto pa = a.wl->priority.value_or(0), pb = b.wl->priority.value_or(0);
    if (pa != pb) return pa < pb;
    if (a.wl->quota_reserved_at != b.wl->quota_reserved_at)
      return a.wl->quota_reserved_at > b.wl->quota_reserved_at;
    return a.wl->uid < b.wl->uid;
  });
  std::map<flavor_resource, std::int64_t> freed;
  const auto fits = [&] {
    for (const auto& [fr, v] : need)
      if (v > quota.nominal(fr) - (quota.usage(fr) - value_at(freed, fr))) return false;
    return true;
  };
  const auto add = [&](const candidate& k, std::int64_t sign) {
    for (const auto& [fr, v] : k.usage) freed[fr] += sign * v;
  };
  std::vector<const candidate*> targets;
  for (const auto& k : cands) {
    add(k, 1);
    targets.push_back(&k);
    if (!fits()) continue;
    // Kueue's fillBackWorkloads: from the one before the last, each given back if it still fits.
    for (std::size_t i = targets.size() - 1; i-- > 0;) {
      add(*targets[i], -1);
      if (fits()) {
        targets[i] = targets.back();
        targets.pop_back();
      } else {
        add(*targets[i], 1);
      }
    }
    std::vector<const workload*> out;
    for (const auto* t : targets) out.push_back(t->wl);
    return out;
  }
  return {};
}

std::int64_t cohort_quota::member::local(const flavor_resource& fr) const {
  auto ll = lending.find(fr);
  if (ll == lending.end()) return 0;
  return std::max<std::int64_t>(0, value_at(nominal, fr) - ll->second);
}

cohort_quota::cohort_quota(const cluster_objects& c, const cluster_queue& q,
                           const workload* except) {
  const auto member_of = [&](const cluster_queue& cq) {
    member m;
    for (const auto& f : cq.flavors) {
      for (const auto& r : f.resources) {
        const flavor_resource fr{f.name, r};
        auto n = f.nominal.find(r);
        m.nominal[fr] = n == f.nominal.end() ? 0 : n->second;
        if (auto b = f.borrowing_limit.find(r); b != f.borrowing_limit.end())
          m.borrowing[fr] = b->second;
        if (auto l = f.lending_limit.find(r); l != f.lending_limit.end()) m.lending[fr] = l->second;
      }
    }
    for (const auto& x : c.workloads) {
      if (&x == except || !x.quota_reserved() || x.admitted_cluster_queue != cq.name) continue;
      for (const auto& [fr, v] : quota_usage(x)) {
        auto& u = m.usage[fr];
        u = sat_add(u, v);
      }
    }
    return m;
  };
  self_ = member_of(q);
  if (q.cohort.empty()) return;
  // The cohort's SubtreeQuota and Usage: what its members lend and use beyond what they keep.
  for (const auto& cq : c.cluster_queues) {
    if (cq.cohort != q.cohort) continue;
    members_.push_back(&cq == &q ? self_ : member_of(cq));
    const member& m = members_.back();
    for (const auto& [fr, n] : m.nominal) cohort_subtree_[fr] += n - m.local(fr);
    for (const auto& [fr, u] : m.usage)
      cohort_usage_[fr] += std::max<std::int64_t>(0, u - m.local(fr));
  }
}

std::int64_t cohort_quota::usage(const flavor_resource& fr) const {
  return value_at(self_.usage, fr);
}

std::int64_t cohort_quota::nominal(const flavor_resource& fr) const {
  return value_at(self_.nominal, fr);
}

std::int64_t cohort_quota::available(const flavor_resource& fr) const {
  const std::int64_t nominal = value_at(self_.nominal, fr), used = value_at(self_.usage, fr);
  if (!in_cohort()) return std::max<std::int64_t>(0, nominal - used);
  const std::int64_t local = self_.local(fr);
  std::int64_t from_cohort = value_at(cohort_subtree_, fr) - value_at(cohort_usage_, fr);
  if (auto bl = self_.borrowing.find(fr); bl != self_.borrowing.end()) {
    const std::int64_t stored = nominal - local;
    const std::int64_t used_there = std::max<std::int64_t>(0, used - local);
    from_cohort = std::min(stored - used_there + bl->second, from_cohort);
  }
  return std::max<std::int64_t>(0, std::max<std::int64_t>(0, local - used) + from_cohort);
}

std::int64_t cohort_quota::potential(const flavor_resource& fr) const {
  const std::int64_t nominal = value_at(self_.nominal, fr);
  if (!in_cohort()) return nominal;
  std::int64_t p = self_.local(fr) + value_at(cohort_subtree_, fr);
  if (auto bl = self_.borrowing.find(fr); bl != self_.borrowing.end())
    p = std::min(nominal + bl->second, p);
  return p;
}

bool cohort_quota::borrows(const flavor_resource& fr, std::int64_t val) const {
  return value_at(self_.usage, fr) + val > value_at(self_.nominal, fr);
}

}  // namespace topogate::diagnose::detail

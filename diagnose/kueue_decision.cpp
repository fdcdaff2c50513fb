// Kueue v0.17.0's decision for one Workload, followed in Kueue's order (diagnose.hpp,
// kueue_decision): the ClusterQueue's quota and flavor choice, then topology-aware placement
// PodSet group by PodSet group in the chosen flavor, as the pinned module's
// pkg/scheduler/flavorassigner and pkg/cache/scheduler/tas_flavor_snapshot.go take it.

#include <algorithm>
#include <map>
#include <set>

#include "diagnose/diagnose.hpp"
#include "diagnose/diagnose_internal.hpp"
#include "diagnose/kueue_internal.hpp"

namespace topogate::diagnose {

using namespace detail;

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
  // The scheduler validates the requests against the limits, then against the namespace's
  // LimitRanges, before any flavor is tried; a Workload holding a reservation is past it.
  using validation = std::string (*)(const cluster_objects&, const workload&);
  for (const auto& [validate, note] :
       {std::pair<validation, const char*>{
            kueue_resources_invalid,
            "the requests Kueue computes (LimitRange defaults, then limits for missing requests) "
            "exceed a container's limits"},
        std::pair<validation, const char*>{
            kueue_limit_range_invalid,
            "the requests Kueue computes are outside the min or max of the namespace's "
            "LimitRanges (the lowest max and the highest min of each resource)"}}) {
    if (w.quota_reserved()) break;
    std::string invalid = validate(c, w);
    if (invalid.empty()) continue;
    k.step = "resources";
    k.message = std::move(invalid);
    k.reason = "Pending";
    for (const auto& ps : w.podsets)
      k.podsets.push_back({ps.name, ps.group_name, "", "not reached", "", ps.count, ps.count});
    k.notes.push_back(note);
    return k;
  }
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
  {
    std::set<std::string> seen_flavors;
    for (const auto& f : q->flavors) {
      const resource_flavor* rf = c.flavor(f.name);
      const kueue_topology* topo = rf ? c.topology(rf->topology_name) : nullptr;
      if (!topo || !seen_flavors.insert(f.name).second) continue;
      const auto hit = hostnames_equal_to_top_values(c, *rf, *topo);
      if (!hit.empty())
        k.notes.push_back(
            "Kueue v0.17.0 known bug: in flavor " + f.name + " the hostname of Node(s) " +
            join(hit, ", ") + " equals a " + topo->levels.front() +
            " value; Kueue keys hostname leaves and " + topo->levels.front() +
            " domains in one map, so the domain tree it builds depends on Go's map order (Nodes "
            "may fall out of their domain) and its decision may differ from this one between "
            "scheduling cycles");
    }
  }
  if (!q->cohort.empty() && preemption_set(q->reclaim_within_cohort)) {
    // Reclaiming is followed among the ClusterQueues of the cohort itself; across a tree of
    // Cohort objects, Kueue also reclaims from other subtrees of its ancestors.
    const cohort_object* own = c.cohort(q->cohort);
    bool nested = own && !own->parent.empty();
    for (const auto& x : c.cohorts) nested = nested || x.parent == q->cohort;
    if (nested)
      k.notes.push_back("ClusterQueue " + q->name + " reclaims within cohort " + q->cohort +
                        ", which is part of a tree of Cohorts: only the ClusterQueues of " +
                        q->cohort + " itself are taken as candidates here");
  }
  if (preemption_set(q->within_cluster_queue) && q->within_cluster_queue != "LowerPriority" &&
      q->within_cluster_queue != "LowerOrNewerEqualPriority")
    k.notes.push_back("ClusterQueue " + q->name + " preempts " + q->within_cluster_queue +
                      " within itself: not a policy Kueue v0.17.0 defines there, no Workload "
                      "is taken as a candidate");
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
    if (!w.admitted() && !w.check_states.empty()) {
      // Quota reserved, admission waiting for the ClusterQueue's AdmissionChecks.
      std::vector<std::string> states;
      for (const auto& s : w.check_states)
        states.push_back(s.name + " " + (s.state.empty() ? std::string("Pending") : s.state) +
                         (s.message.empty() ? std::string() : " (" + s.message + ")"));
      k.notes.push_back("admitted once every AdmissionCheck is Ready: " + join(states, ", "));
    }
    return k;
  }

  // What the Workloads holding a reservation use in this ClusterQueue and its cohort.
  const cohort_quota quota(c, *q, &w);
  if (!quota.cycle().empty())
    k.notes.push_back("Cohorts " + join(quota.cycle(), " -> ") +
                      " form a cycle of parents, which Kueue refuses: the cohort tree is "
                      "followed only up to where the cycle closes");
  const bool try_next_when_borrowing = q->when_can_borrow == "TryNextFlavor";
  // Kueue's classical preemption, within the ClusterQueue and reclaiming in its cohort; a
  // flavor that fits only by preempting is kept while the search goes on for one that fits
  // as is (whenCanPreempt: TryNextFlavor, the default).
  const bool may_preempt = preemption_set(q->within_cluster_queue) ||
                           (quota.in_cohort() && preemption_set(q->reclaim_within_cohort));
  // Kueue simulates preemption for a request within nominalQuota, or beyond it when
  // borrowWithinCohort allows preempting while borrowing.
  const bool preempt_while_borrowing = quota.in_cohort() && preemption_set(q->borrow_within_cohort);
  const bool stop_when_preempting =
      q->when_can_preempt == "MayStopSearch" || q->when_can_preempt == "Preempt";

  // 1. Quota and flavor, group by group; `start[g * n_rg + rg]`: the position in resource
  // group rg's flavors where PodSet group g's search begins (Kueue's LastTriedFlavorIdx, kept
  // per PodSet and resource: after a failed scheduling cycle the next one starts after the
  // flavor tried last). `chosen_pos` likewise: the position tried last, npos when the PodSet
  // group took no flavor of that resource group.
  const std::size_t n_rg = q->group_resources.size();
  std::vector<std::size_t> rg_size(n_rg, 0);
  for (const auto& f : q->flavors)
    if (f.group < n_rg) ++rg_size[f.group];
  std::vector<std::string> group_flavor(groups.size());
  std::vector<std::size_t> chosen_pos(groups.size() * n_rg, std::string::npos);
  // The TAS flavors a PodSet was assigned when more than one (Kueue's onlyTASFlavor fails:
  // "more than one TAS flavor assigned"), sorted; empty otherwise.
  std::vector<std::vector<std::string>> multi_tas(w.podsets.size());
  // The PodSets' requests that a TAS placement needs.
  const auto tas_podset = [&](const podset& ps) { return requests_tas(ps) || tas_only; };
  // A PodSet's TAS flavors among `chosen` (resource group -> flavor), for the resources it
  // requests (Kueue filters the group's flavors by the PodSet's own requests).
  const auto tas_flavors_of = [&](const podset& ps,
                                  const std::map<std::size_t, std::string>& chosen) {
    std::set<std::string> out;
    const auto add = [&](std::string_view res) {
      auto it = chosen.find(group_covering(*q, res));
      if (it == chosen.end()) return;
      if (const resource_flavor* rf = c.flavor(it->second); rf && !rf->topology_name.empty())
        out.insert(it->second);
    };
    for (const auto& [r, v] : ps.requests) add(r);
    if (covers_pods) add("pods");
    return std::vector<std::string>(out.begin(), out.end());
  };
  // 2. (defined before 1, which checks placement after a preemption) Topology-aware placement,
  // group by group in the chosen flavor; each group's assignment is subtracted before the next.
  // `strict` also subtracts the Pod count. `removed`: Workloads taken as preempted, their capacity
  // free (the scheduler's check that the Workload fits once its preemption targets are gone).
  auto place_all = [&](bool strict, kueue_decision* out,
                       const std::vector<const workload*>* removed = nullptr) {
    static const std::vector<const workload*> no_removals;
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
      bool no_tas = false;
      for (std::size_t i : groups[g]) no_tas = no_tas || !multi_tas[i].empty();
      if (no_tas) {
        // Kueue v0.17.0 known bug: onlyTASFlavor fails for the PodSet, but the assignment's
        // mode was computed (and cached) before, so Kueue admits it without a topology
        // assignment when its quota fits.
        if (out)
          for (std::size_t i : groups[g]) {
            out->podsets[i].stage = "placed";
            out->podsets[i].detail = "no topology assignment";
            if (!multi_tas[i].empty())
              out->notes.push_back(
                  "Kueue v0.17.0 known bug: PodSet " + w.podsets[i].name +
                  " is assigned more than one TAS flavor (" + join(multi_tas[i], ", ") +
                  ", from different resource groups); Kueue finds no topology for it and, its "
                  "quota fitting, admits it without a topology assignment (its Pods are not "
                  "placed by TAS)");
          }
        continue;
      }
      auto it = snaps.find(fname);
      if (it == snaps.end())
        it =
            snaps
                .emplace(fname, build_snapshot(c, *rf, *topo,
                                               removed ? node_usage(c, &w, *removed, fname)
                                                       : node_usage(c, &w, fname),
                                               domain_usage(c, &w, removed ? *removed : no_removals,
                                                            fname, topo->levels)))
                .first;
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
  // Kueue's Status.Message: the reasons sorted, joined by ", ".
  const auto reasons_text = [](std::vector<std::string> reasons) {
    std::sort(reasons.begin(), reasons.end());
    return join(reasons, ", ");
  };
  // The PodSets of group g assigned more than one TAS flavor by `chosen`: multi_tas set; the
  // first such in spec order, npos when none.
  const auto check_tas_flavors = [&](std::size_t g,
                                     const std::map<std::size_t, std::string>& chosen) {
    std::size_t first = std::string::npos;
    for (std::size_t i : groups[g]) {
      multi_tas[i].clear();
      if (!tas_podset(w.podsets[i])) continue;
      auto t = tas_flavors_of(w.podsets[i], chosen);
      if (t.size() > 1) {
        multi_tas[i] = std::move(t);
        first = std::min(first, i);
      }
    }
    return first;
  };
  auto quota_pass = [&](const std::vector<std::size_t>& start, kueue_decision& kd) {
    std::map<std::pair<std::string, std::string>, std::int64_t> assumed_quota;
    std::vector<const workload*> victims;              // of the groups that preempt
    bool reclaims = false;                             // some in other ClusterQueues of the cohort
    std::map<flavor_resource, std::int64_t> need_all;  // what the preempting flavors lack
    // Kueue's Assignment.Message: one "couldn't assign flavors to pod set P: reasons" for each
    // PodSet of a group that got flavors without fitting (Preempt mode), in group order.
    std::vector<std::string> not_fit;
    std::string first_not_fit;        // the first such PodSet
    bool without_candidates = false;  // a group in Preempt mode that no preemption frees
    for (auto& m : multi_tas) m.clear();
    std::fill(chosen_pos.begin(), chosen_pos.end(), std::string::npos);
    for (std::size_t g = 0; g < groups.size(); ++g) {
      const podset& first = w.podsets[groups[g].front()];
      resource_amounts total;
      for (std::size_t i : groups[g]) {
        const auto& ps = w.podsets[i];
        for (const auto& [r, v] : ps.requests) total[r] = sat_add(total[r], v * counts[i]);
        if (covers_pods) total["pods"] += counts[i];
      }
      std::map<std::size_t, std::string> chosen;  // resource group -> flavor
      std::set<std::size_t> done;                 // resource groups searched
      std::string fail;
      bool fail_is_error = false;  // Kueue's status error: "failed to assign flavors ..."
      // Resource groups whose request lacks unused quota only where Kueue would look for
      // Workloads to preempt and none may be (its mode Preempt, without candidates): the
      // flavor it keeps. `group_reasons`: the reasons of the resource groups in Preempt mode.
      std::map<std::size_t, std::string> soft;
      std::vector<std::string> group_reasons;
      for (const auto& [res, amount] : total) {
        const std::size_t rg = group_covering(*q, res);
        if (rg == std::string::npos) {
          if (amount == 0) continue;
          fail = "resource " + res + " unavailable in ClusterQueue";
          break;
        }
        if (!done.insert(rg).second) continue;
        std::vector<std::string> reasons;
        std::size_t pos = 0;
        std::string unused_only;  // the first flavor short of unused quota alone
        // A flavor that fits only by borrowing: the first such, kept while the search goes on
        // for one that fits without (flavorFungibility.whenCanBorrow: TryNextFlavor).
        std::string borrowing_flavor, preempting_flavor;
        std::size_t last_pos = 0, preempting_pos = 0;
        std::vector<const workload*> preempting_victims;
        std::map<flavor_resource, std::int64_t> preempting_need;
        for (const auto& f : q->flavors) {
          if (f.group != rg) continue;
          if (pos++ < start[g * n_rg + rg]) continue;
          last_pos = pos - 1;
          std::string why, error;
          for (std::size_t i : groups[g])
            if (why.empty() && error.empty())
              why = flavor_mismatch(c, *q, rg, w.podsets[i], f.name, tas_only, &error);
          if (!error.empty()) {
            // The flavor check's error ends the search (the PodSet's affinity does not parse).
            fail = error;
            fail_is_error = true;
            break;
          }
          if (!why.empty()) {
            reasons.push_back(why);
            continue;
          }
          // `hard`: a resource Kueue finds no fit for (NoFit), which ends the flavor's checks;
          // one short of unused quota only (Preempt mode) lets the next resources be checked.
          bool fits = true, borrows = false, unused = false, hard = false;
          std::map<flavor_resource, std::int64_t> short_of;  // what preemption must free
          for (const auto& r : q->group_resources[rg]) {
            auto t = total.find(r);
            if (t == total.end()) continue;
            const flavor_resource fr{f.name, r};
            const std::int64_t before = assumed_quota[fr];
            const std::int64_t val = sat_add(before, t->second);
            const std::int64_t most = quota.potential(fr);
            if (val > most) {
              reasons.push_back("insufficient quota for " + r + " in flavor " + f.name +
                                ", previously considered podsets requests (" +
                                quota_text(r, before) + ") + current podset request (" +
                                quota_text(r, t->second) + ") > maximum capacity (" +
                                quota_text(r, most) + ")");
              fits = false;
              hard = true;
              break;
            }
            const std::int64_t available = quota.available(fr);
            if (val > available) {
              // Kueue looks for Workloads to preempt when the request is within nominalQuota;
              // without any the next flavor is tried.
              reasons.push_back("insufficient unused quota for " + r + " in flavor " + f.name +
                                ", " + quota_text(r, val - available) + " more needed");
              const bool preemptable = val <= quota.nominal(fr) || preempt_while_borrowing;
              if (may_preempt && preemptable) {
                short_of[fr] = val;
                continue;
              }
              fits = false;
              if (!preemptable) {
                hard = true;
                break;
              }
              unused = true;
              continue;
            }
            borrows = borrows || (quota.in_cohort() && quota.borrows(fr, val));
          }
          if (!fits) {
            if (unused && !hard && unused_only.empty()) unused_only = f.name;
            continue;
          }
          if (!short_of.empty()) {
            auto choice = preemption_targets(c, *q, w, short_of);
            if (choice.targets.empty()) {  // no candidates: the next flavor
              if (unused_only.empty()) unused_only = f.name;
              continue;
            }
            if (preempting_flavor.empty()) {
              preempting_flavor = f.name;
              preempting_pos = pos - 1;
              preempting_victims = std::move(choice.targets);
              preempting_need = short_of;
            }
            if (!stop_when_preempting) continue;
            break;
          }
          if (borrows && try_next_when_borrowing) {
            if (borrowing_flavor.empty()) borrowing_flavor = f.name;
            continue;
          }
          chosen[rg] = f.name;
          chosen_pos[g * n_rg + rg] = pos - 1;
          break;
        }
        if (fail_is_error) break;
        if (!chosen.count(rg) && !borrowing_flavor.empty()) {
          // Kueue takes the best flavor it saw and starts the next cycle after the last tried.
          chosen[rg] = borrowing_flavor;
          chosen_pos[g * n_rg + rg] = last_pos;
        } else if (!chosen.count(rg) && !preempting_flavor.empty()) {
          // Fitting by borrowing is preferred to preempting (BorrowingOverPreemption).
          chosen[rg] = preempting_flavor;
          chosen_pos[g * n_rg + rg] = stop_when_preempting ? preempting_pos : last_pos;
          for (const workload* v : preempting_victims)
            if (std::find(victims.begin(), victims.end(), v) == victims.end()) victims.push_back(v);
          for (const auto& [fr, v] : preempting_need) need_all[fr] = std::max(need_all[fr], v);
          group_reasons.insert(group_reasons.end(), reasons.begin(), reasons.end());
        }
        if (!chosen.count(rg) && !unused_only.empty()) {
          // Kueue keeps that flavor in Preempt mode and goes on with the other resources.
          soft[rg] = unused_only;
          group_reasons.insert(group_reasons.end(), reasons.begin(), reasons.end());
          continue;
        }
        if (!chosen.count(rg)) {
          fail = reasons_text(reasons);
          if (fail.empty()) fail = "no flavor in the resource group of " + res;
          break;
        }
      }
      if (fail_is_error) {
        // Kueue's message is the first error alone.
        kd.step = "quota";
        kd.podset = first.name;
        kd.message = "failed to assign flavors to pod set " + first.name + ": " + fail;
        for (std::size_t i : groups[g]) {
          kd.podsets[i].stage = "quota";
          kd.podsets[i].detail = fail;
        }
        return false;
      }
      // The group's PodSets each named with the group's reasons (Kueue gives every PodSet of
      // the group the group's status); a group that fails ends the assignment.
      const auto name_not_fit = [&](const std::string& why) {
        for (std::size_t i : groups[g]) {
          not_fit.push_back("couldn't assign flavors to pod set " + w.podsets[i].name + ": " + why);
          if (first_not_fit.empty()) first_not_fit = w.podsets[i].name;
          kd.podsets[i].stage = "quota";
          kd.podsets[i].detail = why;
        }
      };
      if (!fail.empty()) {
        name_not_fit(fail);
        kd.step = "quota";
        kd.podset = first_not_fit;
        kd.message = join(not_fit, "; ");
        return false;
      }
      if (!group_reasons.empty()) name_not_fit(reasons_text(group_reasons));
      without_candidates = without_candidates || !soft.empty();
      chosen.insert(soft.begin(), soft.end());
      for (const auto& [res, amount] : total) {
        const std::size_t rg = group_covering(*q, res);
        if (rg == std::string::npos) continue;
        auto& a = assumed_quota[{chosen[rg], res}];
        a = sat_add(a, amount);
      }
      // The flavor TAS places the group in: its TAS flavor (Kueue's onlyTASFlavor), else the
      // first chosen.
      group_flavor[g].clear();
      check_tas_flavors(g, chosen);
      for (const auto& [rg, f] : chosen)
        if (const resource_flavor* rf = c.flavor(f); rf && !rf->topology_name.empty()) {
          group_flavor[g] = f;
          break;
        }
      for (const auto& [rg, f] : chosen)
        if (group_flavor[g].empty()) group_flavor[g] = f;
      for (std::size_t i : groups[g]) kd.podsets[i].flavor = group_flavor[g];
    }
    if (without_candidates) {
      // Preempt mode and a group no preemption frees: Kueue's message is the groups' reasons,
      // unless a PodSet was assigned more than one TAS flavor (onlyTASFlavor's error, which
      // Kueue's message gives alone).
      for (std::size_t g = 0; g < groups.size(); ++g)
        for (std::size_t i : groups[g]) {
          if (multi_tas[i].empty()) continue;
          kd.step = "quota";
          kd.podset = w.podsets[i].name;
          kd.message = "failed to assign flavors to pod set " + w.podsets[i].name +
                       ": more than one TAS flavor assigned: " + join(multi_tas[i], ", ");
          kd.podsets[i].stage = "quota";
          kd.podsets[i].detail = kd.message;
          kd.notes.push_back("PodSet " + w.podsets[i].name +
                             " takes TAS flavors from more than one resource group; Kueue "
                             "places a PodSet in one TAS flavor only");
          return false;
        }
      kd.step = "quota";
      kd.podset = first_not_fit;
      kd.message = join(not_fit, "; ");
      return false;
    }
    if (!victims.empty()) {
      // The scheduler's GetTargets on the whole assignment: the same search, with the
      // topology placement checked as well once the targets are gone (the flavor assigner's
      // simulation above has no placement).
      const preemption_placement placement = [&](const std::vector<const workload*>& removed) {
        return place_all(false, nullptr, &removed);
      };
      auto final_choice = preemption_targets(c, *q, w, need_all, placement);
      if (final_choice.targets.empty()) {
        // "Workload requires preemption, but there are no candidate workloads": it waits with
        // the flavor assigner's message, and reserves nothing.
        kd.step = "quota";
        kd.podset = w.podsets.front().name;
        kd.message = join(not_fit, "; ");
        for (auto& p : kd.podsets) {
          p.stage = "quota";
          p.detail = kd.message;
        }
        std::vector<std::string> names;
        for (const workload* v : victims) names.push_back(v->namespace_ + "/" + v->name);
        std::sort(names.begin(), names.end());
        kd.notes.push_back("preempting " + join(names, ", ") +
                           " would free the quota, but the topology would not place the "
                           "Workload even with every candidate gone: Kueue preempts nothing");
        return false;
      }
      victims = std::move(final_choice.targets);
      reclaims = final_choice.reclaim;
      // The scheduler issues the preemptions and the Workload waits for them (its message
      // gains ". Pending the preemption of N workload(s)").
      kd.step = "preemption";
      kd.podset = w.podsets.front().name;
      kd.message = join(not_fit, "; ") + ". Pending the preemption of " +
                   std::to_string(victims.size()) + " workload(s)";
      for (const workload* v : victims) kd.preempts.push_back(v->namespace_ + "/" + v->name);
      std::sort(kd.preempts.begin(), kd.preempts.end());
      for (auto& p : kd.podsets) p.stage = "preemption";
      kd.notes.push_back("Kueue preempts " + join(kd.preempts, ", ") + " (spec.preemption." +
                         (reclaims ? "reclaimWithinCohort " + q->reclaim_within_cohort
                                   : "withinClusterQueue " + q->within_cluster_queue) +
                         "); the Workload is admitted once they have released their quota and "
                         "capacity (the topology places it without them)");
      return false;
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
    const auto saved_multi = multi_tas;
    bool found = false;
    std::int64_t lo = 0, hi = total_delta + 1, last_good = 0;  // Go's sort.Search
    while (lo < hi) {
      const std::int64_t h = lo + (hi - lo) / 2;
      scale_counts(h);
      kueue_decision attempt;
      // A count that fits by preempting is found too (the reducer takes an assignment in
      // Preempt mode with targets).
      if (assign(start, attempt) || attempt.step == "preemption") {
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
      multi_tas = saved_multi;
    }
    return found;
  };
  std::vector<std::size_t> start(groups.size() * n_rg, 0);
  std::set<std::vector<std::size_t>> seen;
  std::vector<std::string> tried;
  bool later_quota = false;  // a cycle after the first stopped at quota (its message kept)
  for (;;) {
    if (!seen.insert(start).second) break;
    kueue_decision attempt = blank;
    for (std::size_t i = 0; i < counts.size(); ++i) counts[i] = w.podsets[i].count;
    const bool quota_ok = quota_pass(start, attempt);
    if (quota_ok) attempt.admissible = place_all(false, &attempt);
    if (!attempt.admissible && !attempt.no_decision && attempt.step != "preemption") {
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
        k.notes.push_back(
            "partial admission: the spec counts do not fit (" + attempt.message + "); Kueue " +
            (k.step == "preemption" ? "preempts to admit " : "admits ") + join(what, ", "));
        break;
      }
    }
    if (!quota_ok && attempt.step == "preemption") {
      k = attempt;
      break;
    }
    if (!quota_ok) {
      bool from_first = true;
      for (auto s0 : start) from_first = from_first && s0 == 0;
      if (from_first || seen.count(std::vector<std::size_t>(start.size(), 0))) {
        // A later cycle that quota stops ends the search; its message is the one Kueue's
        // condition keeps as the Workload waits (an event in the queue runs the cycles again,
        // from the first flavor, and may leave the first cycle's message instead).
        later_quota = !from_first;
        k = attempt;
        break;
      }
      start.assign(start.size(), 0);
      continue;
    }
    k = attempt;
    if (k.admissible || k.no_decision) break;
    tried.push_back(join(group_flavor, "+"));
    // Each resource group the PodSet group took a flavor of starts after it (the first
    // after the last); the others from the first.
    for (std::size_t j = 0; j < start.size(); ++j) {
      const std::size_t p = chosen_pos[j];
      start[j] = p == std::string::npos || p + 1 >= rg_size[j % n_rg] ? 0 : p + 1;
    }
  }
  if (later_quota && !tried.empty())
    k.notes.push_back("topology placement failed in " + join(tried, ", ") +
                      "; Kueue's next scheduling cycle starts after it (LastTriedFlavorIdx) and "
                      "stops at quota and flavor choice: Kueue's condition keeps that cycle's "
                      "message as the Workload waits, though an event in the queue that runs "
                      "the cycles again may leave the first cycle's topology message");
  else if (!tried.empty() && (k.admissible || tried.size() > 1)) {
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

// Kueue v0.17.0's quota in a cohort and its preemption as diagnose follows them
// (diagnose/kueue_quota.cpp): borrowing and lending in a cohort and a tree of Cohorts, classical
// preemption within a ClusterQueue and reclaiming within the cohort, on small clusters built
// in code, each behaviour from both sides.

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "test/diagnose/kueue_cluster.hpp"

namespace topogate::diagnose {
namespace {

using namespace kueue_test;

// ---------------------------------------------------------------- cohorts and borrowing

// ClusterQueue q (cpu 6 in flavor f) and `lender` (cpu `lend` in f, memory ample) in cohort
// "pool"; a Workload w of two 4-CPU Pods in one zone needs 8.
cluster_objects cohort_cluster(std::int64_t lend) {
  auto c = tas_cluster();
  c.cluster_queues[0].flavors[0].nominal["cpu"] = 6000;
  c.cluster_queues[0].cohort = "pool";
  cluster_queue lender = c.cluster_queues[0];
  lender.name = "lender";
  lender.flavors[0].nominal["cpu"] = lend;
  c.cluster_queues.push_back(lender);
  add_workload(c, "w", {make_podset("main", 2, 4000)});
  return c;
}

// Kueue's message when flavor f lacks `n` unused CPUs.
std::string cpu_more_needed(int n) {
  return "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor "
         "f, " +
         std::to_string(n) + " more needed";
}

// A ClusterQueue borrows what the other ClusterQueues of its cohort do not use: 6 + 4 >= 8
// admits; 6 + 1 < 8 is Kueue's "maximum capacity (7)"; outside the cohort, 6.
TEST(KueueCohort, BorrowsTheCohortsUnusedQuota) {
  auto c = cohort_cluster(4000);
  auto k = decide(c, "w");
  EXPECT_TRUE(k.admissible) << k.message;
  EXPECT_EQ(k.podsets[0].flavor, "f");
  c = cohort_cluster(1000);
  k = decide(c, "w");
  EXPECT_FALSE(k.admissible);
  EXPECT_EQ(k.step, "quota");
  EXPECT_EQ(k.message,
            "couldn't assign flavors to pod set main: insufficient quota for cpu in flavor f, "
            "previously considered podsets requests (0) + current podset request (8) > maximum "
            "capacity (7)");
  c = cohort_cluster(2000);
  EXPECT_TRUE(decide(c, "w").admissible);  // 6 + 2: exactly 8
  c = cohort_cluster(4000);
  c.cluster_queues[1].cohort = "elsewhere";
  EXPECT_NE(decide(c, "w").message.find("maximum capacity (6)"), std::string::npos);
}

// borrowingLimit caps what q takes from its cohort, lendingLimit what the lender gives it:
// either at 1 leaves 6 + 1 = 7 (< 8, Kueue's "maximum capacity (7)"), at 2 exactly 8. A
// lendingLimit on q keeps its own quota local, still its own to use.
TEST(KueueCohort, BorrowingAndLendingLimitsCap) {
  for (const bool borrowing : {true, false}) {
    auto c = cohort_cluster(4000);
    auto& f = c.cluster_queues[borrowing ? 0 : 1].flavors[0];
    (borrowing ? f.borrowing_limit : f.lending_limit)["cpu"] = 1000;
    const auto k = decide(c, "w");
    EXPECT_FALSE(k.admissible) << borrowing;
    EXPECT_NE(k.message.find("> maximum capacity (7)"), std::string::npos) << k.message;
    (borrowing ? f.borrowing_limit : f.lending_limit)["cpu"] = 2000;
    EXPECT_TRUE(decide(c, "w").admissible) << borrowing;
  }
  auto c = cohort_cluster(4000);
  c.cluster_queues[0].flavors[0].lending_limit["cpu"] = 0;
  EXPECT_TRUE(decide(c, "w").admissible);
}

// What the other ClusterQueues use beyond what they keep local is gone from the cohort:
// the lender using 3 of its 4 leaves 7 (Kueue's "1 more needed"), using 2 leaves 8. A
// lendingLimit keeps the lender's usage local first: using 3 of 4 with lendingLimit 2 (2
// kept local) takes only 1 of the 2 it lends.
TEST(KueueCohort, CohortUsageLeavesLess) {
  auto c = cohort_cluster(4000);
  hold(c, "other", "lender", 3000);
  auto k = decide(c, "w");
  EXPECT_FALSE(k.admissible);
  EXPECT_EQ(k.message, cpu_more_needed(1));
  c = cohort_cluster(4000);
  hold(c, "other", "lender", 2000);
  EXPECT_TRUE(decide(c, "w").admissible);
  c = cohort_cluster(4000);
  c.cluster_queues[1].flavors[0].lending_limit["cpu"] = 2000;
  hold(c, "other", "lender", 3000);
  k = decide(c, "w");
  EXPECT_EQ(k.message, cpu_more_needed(1));
  c.cluster_queues[0].flavors[0].nominal["cpu"] = 7000;
  EXPECT_TRUE(decide(c, "w").admissible);
}

// A borrowing ClusterQueue's own usage counts against what it may still borrow: q using 5
// of its 6 with borrowingLimit 4 may take 1 + 4 = 5 more (not the cohort's 1 + 4 + ...).
TEST(KueueCohort, OwnUsageCountsAgainstTheBorrowingLimit) {
  auto c = cohort_cluster(8000);
  c.cluster_queues[0].flavors[0].borrowing_limit["cpu"] = 4000;
  hold(c, "mine", "q", 5000);
  auto k = decide(c, "w");  // needs 8: 1 unused + at most 4 borrowed
  EXPECT_FALSE(k.admissible);
  EXPECT_EQ(k.message, cpu_more_needed(3));
  c.cluster_queues[0].flavors[0].borrowing_limit["cpu"] = 7000;
  EXPECT_TRUE(decide(c, "w").admissible);
}

// flavorFungibility.whenCanBorrow: by default (MayStopSearch) the first flavor that fits by
// borrowing is taken; TryNextFlavor goes on to a flavor that fits without borrowing, and
// falls back to the borrowing one when none does.
TEST(KueueCohort, WhenCanBorrowTryNextFlavor) {
  auto c = cohort_cluster(4000);
  add_flavor_f2(c, "other", "zone-o", {{"o1", 4000}, {"o2", 4000}});
  auto k = decide(c, "w");
  EXPECT_TRUE(k.admissible) << k.message;
  EXPECT_EQ(k.podsets[0].flavor, "f");
  c.cluster_queues[0].when_can_borrow = "TryNextFlavor";
  k = decide(c, "w");
  EXPECT_TRUE(k.admissible) << k.message;
  EXPECT_EQ(k.podsets[0].flavor, "f2");
  c.cluster_queues[0].flavors[1].nominal["cpu"] = 7000;  // f2 too little: back to f
  k = decide(c, "w");
  EXPECT_TRUE(k.admissible) << k.message;
  EXPECT_EQ(k.podsets[0].flavor, "f");
}

// ---------------------------------------------------------------- preemption

// ClusterQueue q (cpu 6, withinClusterQueue LowerPriority) fully used by low (priority 0, 3
// CPU, reserved first), low2 (priority 0, 2 CPU, reserved after) and high (priority 200, 1
// CPU); w (priority 100) asks for `cpu` in one Pod.
cluster_objects preemption_cluster(std::int64_t cpu) {
  auto c = tas_cluster();
  c.cluster_queues[0].flavors[0].nominal["cpu"] = 6000;
  c.cluster_queues[0].within_cluster_queue = "LowerPriority";
  hold(c, "low", "q", 3000).quota_reserved_at = "2026-12-01T10:00:00Z";
  hold(c, "low2", "q", 2000).quota_reserved_at = "2026-12-01T11:00:00Z";
  auto& high = hold(c, "high", "q", 1000);
  high.priority = 200;
  high.quota_reserved_at = "2026-12-01T12:00:00Z";
  add_workload(c, "w", {make_podset("main", 1, cpu)}).priority = 100;
  return c;
}

// A Workload holding `cpu` of flavor f in ClusterQueue `queue`.
struct held_cpu {
  const char* name;
  const char* queue;
  std::int64_t cpu;
};

// `c` with `held`, each reserved an hour after the one before (from 10:00), and w (priority
// 100) asking for `pods` Pods of 1 CPU in one zone.
cluster_objects with_held(cluster_objects c, const std::vector<held_cpu>& held, std::int64_t pods) {
  int hour = 10;
  for (const auto& h : held)
    hold(c, h.name, h.queue, h.cpu).quota_reserved_at =
        "2026-12-01T" + std::to_string(hour++) + ":00:00Z";
  add_workload(c, "w", {make_podset("main", pods, 1000)}).priority = 100;
  return c;
}

// w's decision: Pending the preemption of `targets` with `more` CPUs more needed.
void expect_preempts(const cluster_objects& c, int more, const std::vector<std::string>& targets) {
  const auto k = decide(c, "w");
  EXPECT_EQ(k.message, preemption_message(more, static_cast<int>(targets.size())));
  EXPECT_EQ(k.preempts, targets);
}

// Kueue takes the lower-priority Workloads, the most recently reserved first, until the
// request fits, then gives back those not needed: 4 CPUs take low2 and low; 3 CPUs take low
// alone (low2 given back); high (a higher priority) is never taken.
TEST(KueuePreemption, LowerPriorityTakenInKueuesOrderFewestKept) {
  auto c = preemption_cluster(4000);
  auto r = diagnose_pending(c, "default", "w");
  EXPECT_FALSE(r.kueue.admissible);
  EXPECT_EQ(r.kueue.step, "preemption");
  EXPECT_EQ(r.kueue.message, preemption_message(4, 2));
  EXPECT_EQ(r.kueue.preempts, (std::vector<std::string>{"default/low", "default/low2"}));
  EXPECT_EQ(r.conclusion.rfind("Pending at quota and flavor choice: Kueue would preempt "
                               "default/low, default/low2 to admit it",
                               0),
            0u)
      << r.conclusion;
  c = preemption_cluster(3000);
  const auto k = decide(c, "w");
  EXPECT_EQ(k.message, preemption_message(3, 1));
  EXPECT_EQ(k.preempts, std::vector<std::string>{"default/low"});
  // 6 CPUs: low and low2 free only 5 (high stays): no preemption, the next flavor (none).
  c = preemption_cluster(6000);
  EXPECT_EQ(decide(c, "w").message, cpu_more_needed(6));
  EXPECT_TRUE(decide(c, "w").preempts.empty());
}

// Candidates removed in turn each free their own usage, and one given back takes it again:
// a (1 CPU, reserved last), b (1 CPU) and c (4 CPUs, reserved first) fill q's 6; w (5 Pods of
// 1 CPU) removes a, b, then c, gives b back (5 free) and keeps a (without it only 4 are free).
// Asking for 4, a is given back too.
TEST(KueuePreemption, RemovalsAndGiveBacksEachMoveTheirOwnUsage) {
  auto q = tas_cluster();
  q.cluster_queues[0].flavors[0].nominal["cpu"] = 6000;
  q.cluster_queues[0].within_cluster_queue = "LowerPriority";
  const std::vector<held_cpu> held{{"c", "q", 4000}, {"b", "q", 1000}, {"a", "q", 1000}};
  expect_preempts(with_held(q, held, 5), 5, {"default/a", "default/c"});
  expect_preempts(with_held(q, held, 4), 4, {"default/c"});
}

// No preemption: policy Never (the default), an equal priority, a request above nominalQuota
// (Kueue does not preempt for it). In a cohort, preemption within the ClusterQueue is the same.
TEST(KueuePreemption, NotWhenThePolicyPriorityOrQuotaForbid) {
  auto c = preemption_cluster(3000);
  c.cluster_queues[0].within_cluster_queue = "Never";
  EXPECT_EQ(decide(c, "w").message, cpu_more_needed(3));
  c = preemption_cluster(3000);
  c.workloads.back().priority = 0;
  EXPECT_EQ(decide(c, "w").message, cpu_more_needed(3));
  c = preemption_cluster(7000);
  EXPECT_NE(decide(c, "w").message.find("> maximum capacity (6)"), std::string::npos);
  c = preemption_cluster(3000);
  c.cluster_queues[0].cohort = "pool";
  const auto k = decide(c, "w");
  EXPECT_EQ(k.message, preemption_message(3, 1));
  EXPECT_EQ(k.preempts, std::vector<std::string>{"default/low"});
}

// LowerOrNewerEqualPriority: an equal priority is a candidate only when queued strictly after
// the preemptor (Kueue's queue-order timestamp); a lower priority is one as with LowerPriority.
TEST(KueuePreemption, LowerOrNewerEqualPriorityTakesEqualPrioritiesQueuedLater) {
  const auto equal_priorities = [](std::int64_t cpu) {
    auto c = preemption_cluster(cpu);
    c.cluster_queues[0].within_cluster_queue = "LowerOrNewerEqualPriority";
    named(c, "w").queue_order_at = "2026-12-01T09:00:00Z";
    named(c, "low").priority = 100;
    named(c, "low").queue_order_at = "2026-12-01T09:00:01Z";  // queued after w
    named(c, "low2").priority = 100;
    named(c, "low2").queue_order_at = "2026-12-01T08:59:59Z";  // before w
    return c;
  };
  auto c = equal_priorities(3000);
  auto k = decide(c, "w");
  EXPECT_EQ(k.message, preemption_message(3, 1));
  EXPECT_EQ(k.preempts, std::vector<std::string>{"default/low"});
  // 4 CPUs: low frees 3; low2, queued before w, is not a candidate.
  c = equal_priorities(4000);
  EXPECT_EQ(decide(c, "w").message, cpu_more_needed(4));
  EXPECT_TRUE(decide(c, "w").preempts.empty());
  // Queued in the same instant: not strictly after, not a candidate.
  c = equal_priorities(3000);
  named(c, "low").queue_order_at = "2026-12-01T09:00:00Z";
  EXPECT_EQ(decide(c, "w").message, cpu_more_needed(3));
  // A fraction of a second later is after.
  named(c, "low").queue_order_at = "2026-12-01T09:00:00.5Z";
  EXPECT_EQ(decide(c, "w").preempts, std::vector<std::string>{"default/low"});
  // LowerPriority takes no equal priority however late it was queued.
  c = equal_priorities(3000);
  c.cluster_queues[0].within_cluster_queue = "LowerPriority";
  EXPECT_EQ(decide(c, "w").message, cpu_more_needed(3));
  // No note says equal priorities are left out.
  c = equal_priorities(3000);
  k = decide(c, "w");
  for (const auto& n : k.notes) EXPECT_EQ(n.find("only lower priorities"), std::string::npos) << n;
}

// Candidates already evicted come first (Kueue's CandidatesOrdering): 2 CPUs take low2 (the
// most recent reservation) unless low is being evicted already.
TEST(KueuePreemption, CandidatesAlreadyEvictedFirst) {
  auto c = preemption_cluster(2000);
  EXPECT_EQ(decide(c, "w").preempts, std::vector<std::string>{"default/low2"});
  named(c, "low").evicted = true;
  EXPECT_EQ(decide(c, "w").preempts, std::vector<std::string>{"default/low"});
}

// The queue-order timestamp as read from a Workload: its creationTimestamp, or the time of an
// eviction by PodsReadyTimeout or an AdmissionCheck; another eviction (a preemption) keeps the
// creation time but marks it evicted.
TEST(KueuePreemption, QueueOrderTimestampAsRead) {
  const auto read = [](const std::string& evicted) {
    cluster_objects c;
    const auto errors = add_objects(c,
                                    R"({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
        "metadata": {"name": "w", "namespace": "default", "creationTimestamp": "2026-12-01T09:00:00Z"},
        "spec": {"queueName": "lq", "podSets": [{"name": "main", "count": 1}]},
        "status": {"conditions": [)" + evicted +
                                        R"(]}})",
                                    "test");
    EXPECT_TRUE(errors.empty());
    return c.workloads.at(0);
  };
  auto w = read("");
  EXPECT_EQ(w.queue_order_at, "2026-12-01T09:00:00Z");
  EXPECT_FALSE(w.evicted);
  for (const char* reason : {"PodsReadyTimeout", "AdmissionCheck"}) {
    w = read(std::string(R"({"type": "Evicted", "status": "True", "reason": ")") + reason +
             R"(", "lastTransitionTime": "2026-12-01T10:00:00Z"})");
    EXPECT_EQ(w.queue_order_at, "2026-12-01T10:00:00Z") << reason;
    EXPECT_TRUE(w.evicted);
  }
  w = read(R"({"type": "Evicted", "status": "True", "reason": "Preempted",
               "lastTransitionTime": "2026-12-01T10:00:00Z"})");
  EXPECT_EQ(w.queue_order_at, "2026-12-01T09:00:00Z");
  EXPECT_TRUE(w.evicted);
  w = read(R"({"type": "Evicted", "status": "False", "reason": "PodsReadyTimeout",
               "lastTransitionTime": "2026-12-01T10:00:00Z"})");
  EXPECT_EQ(w.queue_order_at, "2026-12-01T09:00:00Z");
  EXPECT_FALSE(w.evicted);
}

// q (cpu 6) and lender (cpu 4) in cohort pool; `borrower`, in lender, holds 8 CPUs (4 of them
// q's, borrowed); w, in q, asks for `cpu` CPUs: 2 are left in the cohort.
cluster_objects reclaim_cluster(std::int64_t cpu, const std::string& reclaim) {
  auto c = cohort_cluster(4000);
  c.cluster_queues[0].reclaim_within_cohort = reclaim;
  c.workloads.clear();
  hold(c, "borrower", "lender", 8000).quota_reserved_at = "2026-12-01T10:00:00Z";
  add_workload(c, "w", {make_podset("main", 1, cpu)}).priority = 10;
  return c;
}

// Kueue's cohort tree: a Cohort object's own nominalQuota joins what the cohort lends, and its
// parent's quota is reachable through it (capped by the Cohort's borrowingLimit, kept back by
// a lendingLimit). q (6) and lender (1) in pool: 7 alone; pool's own 1 makes 8 (w fits); a
// parent org with 2 more makes 10.
TEST(KueueCohort, CohortObjectsOwnQuotaAndParents) {
  auto c = cohort_cluster(1000);
  EXPECT_NE(decide(c, "w").message.find("> maximum capacity (7)"), std::string::npos);
  c.cohorts.push_back(cohort_with("pool", "", 1000));
  EXPECT_TRUE(decide(c, "w").admissible);
  c.workloads.back().podsets[0].count = 3;  // 12
  EXPECT_NE(decide(c, "w").message.find("> maximum capacity (8)"), std::string::npos);
  c.cohorts[0].parent = "org";
  c.cohorts.push_back(cohort_with("org", "", 2000));
  EXPECT_NE(decide(c, "w").message.find("> maximum capacity (10)"), std::string::npos);
  // pool may borrow at most 1 from org: 8 + 1.
  c.cohorts[0].flavors[0].borrowing_limit["cpu"] = 1000;
  EXPECT_NE(decide(c, "w").message.find("> maximum capacity (9)"), std::string::npos);
  c.cohorts[0].flavors[0].borrowing_limit.clear();
  // What org's other children use is gone from it: a ClusterQueue there using 2 of its 0.
  cluster_queue sibling = c.cluster_queues[1];
  sibling.name = "sibling";
  sibling.cohort = "org";
  sibling.flavors[0].nominal["cpu"] = 0;
  c.cluster_queues.push_back(sibling);
  c.workloads.back().podsets[0].count = 2;  // 8: fits in pool alone
  hold(c, "sib", "sibling", 2000);
  EXPECT_TRUE(decide(c, "w").admissible);
  named(c, "w").podsets[0].requests["cpu"] = 4500;  // 9: needs 1 of org's 2, all used
  EXPECT_EQ(decide(c, "w").message,
            "couldn't assign flavors to pod set main: insufficient unused quota for cpu in "
            "flavor f, 1 more needed");
  // Reclaiming is followed within pool only: a note says so once pool is part of a tree.
  EXPECT_FALSE(has_note(decide(c, "w"), "part of a tree of Cohorts"));
  c.cluster_queues[0].reclaim_within_cohort = "Any";
  EXPECT_TRUE(has_note(decide(c, "w"), "part of a tree of Cohorts"));
  // A cycle (pool -> org -> pool), which Kueue refuses, is cut where it closes.
  c.cohorts[1].parent = "pool";
  EXPECT_FALSE(decide(c, "w").admissible);
}

// A cycle of parents, which Kueue refuses, is named in a note: pool -> org -> pool, and a
// Cohort its own parent; a tree without one has no such note.
TEST(KueueCohort, ACycleOfParentsIsNamed) {
  auto c = cohort_cluster(1000);
  c.cohorts.push_back(cohort_with("pool", "org", 1000));
  c.cohorts.push_back(cohort_with("org", "", 2000));
  EXPECT_FALSE(has_note(decide(c, "w"), "cycle")) << ::testing::PrintToString(decide(c, "w").notes);
  c.cohorts[1].parent = "pool";
  auto k = decide(c, "w");
  EXPECT_TRUE(has_note(k,
                       "Cohorts pool -> org -> pool form a cycle of parents, which Kueue "
                       "refuses"))
      << ::testing::PrintToString(k.notes);
  c.cohorts[1].parent = "";
  c.cohorts[0].parent = "pool";
  k = decide(c, "w");
  EXPECT_TRUE(has_note(k, "Cohorts pool -> pool form a cycle"))
      << ::testing::PrintToString(k.notes);
  EXPECT_FALSE(has_note(k, "org"));
}

// reclaimWithinCohort: a request within q's nominalQuota takes back what another ClusterQueue
// of the cohort borrows, by preempting its Workloads (Kueue's reclamation within the cohort).
TEST(KueueReclaim, WithinNominalReclaimsFromABorrowingQueue) {
  auto c = reclaim_cluster(4000, "Any");
  auto k = decide(c, "w");
  EXPECT_FALSE(k.admissible);
  EXPECT_EQ(k.step, "preemption");
  EXPECT_EQ(k.message, preemption_message(2, 1));
  EXPECT_EQ(k.preempts, std::vector<std::string>{"default/borrower"});
  EXPECT_TRUE(has_note(k, "reclaimWithinCohort Any")) << ::testing::PrintToString(k.notes);
  // Never (the default): nothing is reclaimed.
  c = reclaim_cluster(4000, "");
  EXPECT_EQ(decide(c, "w").message, cpu_more_needed(2));
  EXPECT_TRUE(decide(c, "w").preempts.empty());
  c = reclaim_cluster(4000, "Never");
  EXPECT_TRUE(decide(c, "w").preempts.empty());
  // LowerPriority: the borrower's priority decides.
  c = reclaim_cluster(4000, "LowerPriority");
  EXPECT_EQ(decide(c, "w").preempts, std::vector<std::string>{"default/borrower"});
  c.workloads[0].priority = 10;
  EXPECT_EQ(decide(c, "w").message, cpu_more_needed(2));
}

// A ClusterQueue within its nominalQuota is never reclaimed from: the lender using its own 4
// while q's own Workload holds 4 of 6 leaves 2, and nothing is taken.
TEST(KueueReclaim, NotFromAQueueWithinItsNominalQuota) {
  auto c = reclaim_cluster(4000, "Any");
  c.workloads[0].assignments[0].count = 1;
  c.workloads[0].podsets[0].requests["cpu"] = 4000;
  hold(c, "mine", "q", 4000);
  const auto k = decide(c, "w");
  EXPECT_EQ(k.message, cpu_more_needed(2));
  EXPECT_TRUE(k.preempts.empty());
}

// Two Workloads reclaimed from another ClusterQueue in turn: lender (nominal 0 here) borrows
// all it uses, b1 (2 CPUs, reserved last) and b2 (3 CPUs), from q's 6. Asking for 5 (1
// free), removing b1 leaves 3 free, b2 too 6, and b1 is kept (without it 4); asking for 4, b1
// is given back.
TEST(KueueReclaim, TwoBorrowersReclaimedInTurn) {
  auto q = cohort_cluster(0);
  q.cluster_queues[0].reclaim_within_cohort = "Any";
  q.workloads.clear();
  const std::vector<held_cpu> held{{"b2", "lender", 3000}, {"b1", "lender", 2000}};
  expect_preempts(with_held(q, held, 5), 4, {"default/b1", "default/b2"});
  expect_preempts(with_held(q, held, 4), 3, {"default/b2"});
}

// Beyond q's nominalQuota Kueue simulates preemption only with borrowWithinCohort; a
// candidate above its maxPriorityThreshold is then reclaimed only without borrowing, which
// a request beyond nominalQuota cannot do. (Two Pods of 3.5 CPUs: zone a holds them.)
TEST(KueueReclaim, BeyondNominalOnlyWithBorrowWithinCohort) {
  auto c = reclaim_cluster(3500, "Any");
  c.workloads.back().podsets[0].count = 2;
  EXPECT_EQ(decide(c, "w").message, cpu_more_needed(5));
  c.cluster_queues[0].borrow_within_cohort = "LowerPriority";
  auto k = decide(c, "w");
  EXPECT_EQ(k.preempts, std::vector<std::string>{"default/borrower"}) << k.message;
  c.cluster_queues[0].borrow_max_priority = -1;  // the borrower's 0 is above it
  k = decide(c, "w");
  EXPECT_EQ(k.message, cpu_more_needed(5));
  EXPECT_TRUE(k.preempts.empty());
  c.cluster_queues[0].borrow_max_priority = 0;  // not above
  EXPECT_EQ(decide(c, "w").preempts, std::vector<std::string>{"default/borrower"});
}

// The scheduler's search for preemption targets also checks the topology once they are gone:
// one Pod of 7 CPUs fits no 4-CPU Node, so reclaiming the quota would not admit it and Kueue
// preempts nothing; as two Pods of 3.5 CPUs in one zone it preempts. Within the ClusterQueue
// the same: a Pod no Node holds preempts nothing.
TEST(KueuePreemption, TargetsMustLetTheTopologyPlaceTheWorkload) {
  auto c = reclaim_cluster(7000, "Any");
  c.cluster_queues[0].borrow_within_cohort = "LowerPriority";
  auto k = decide(c, "w");
  EXPECT_EQ(k.step, "quota");
  EXPECT_EQ(k.message, cpu_more_needed(5));
  EXPECT_TRUE(k.preempts.empty());
  EXPECT_TRUE(has_note(k, "would not place the Workload even with every candidate gone"))
      << ::testing::PrintToString(k.notes);
  c.workloads.back().podsets[0].requests["cpu"] = 3500;
  c.workloads.back().podsets[0].count = 2;
  EXPECT_EQ(decide(c, "w").preempts, std::vector<std::string>{"default/borrower"});
  // Within the ClusterQueue: 5 CPUs in one Pod (nominal 6, 1 free) fit no Node.
  auto p = preemption_cluster(5000);
  k = decide(p, "w");
  EXPECT_TRUE(k.preempts.empty());
  EXPECT_EQ(k.message, cpu_more_needed(5));
  p = preemption_cluster(3000);
  EXPECT_EQ(decide(p, "w").preempts, std::vector<std::string>{"default/low"});
}

// flavorFungibility.whenCanPreempt: TryNextFlavor (the default) goes on to a flavor that fits
// as is; MayStopSearch preempts in the first flavor where preempting makes it fit.
TEST(KueuePreemption, WhenCanPreemptTryNextFlavor) {
  auto c = preemption_cluster(3000);
  add_flavor_f2(c, "other", "zone-o", {{"o1", 4000}});
  auto k = decide(c, "w");
  EXPECT_TRUE(k.admissible) << k.message;
  EXPECT_EQ(k.podsets[0].flavor, "f2");
  c.cluster_queues[0].when_can_preempt = "MayStopSearch";
  k = decide(c, "w");
  EXPECT_FALSE(k.admissible);
  EXPECT_EQ(k.preempts, std::vector<std::string>{"default/low"});
}

}  // namespace
}  // namespace topogate::diagnose

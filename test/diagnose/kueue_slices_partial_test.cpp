// Kueue v0.17.0's slices (podSetSliceRequiredTopology, podSetSliceSize) and partial admission
// (minCount) as diagnose follows them (diagnose/kueue_placement.cpp, kueue_decision.cpp),
// each behaviour from both sides.

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "test/diagnose/kueue_cluster.hpp"

namespace topogate::diagnose {
namespace {

using namespace kueue_test;

// ---------------------------------------------------------------- slices

// podSetSliceRequiredTopology + podSetSliceSize: every slice of `size` Pods fits one domain
// of the slice level. Pods of 1500m: a 4-CPU Node holds 2, a zone 4.
TEST(KueueSlices, EverySliceFitsOneDomainOfItsLevel) {
  auto c = tas_cluster();
  add_workload(c, "w", {make_podset("main", 3, 1500)});
  EXPECT_TRUE(decide(c, "w").admissible);  // 3 Pods in one zone, over two Nodes
  auto& ps = c.workloads[0].podsets[0];
  ps.slice_level = host;
  ps.slice_size = 3;  // no Node holds 3
  auto k = decide(c, "w");
  EXPECT_FALSE(k.admissible);
  EXPECT_EQ(k.step, "topology");
  EXPECT_EQ(k.message,
            "couldn't assign flavors to pod set main: topology \"t\" doesn't allow to fit any of "
            "1 slice(s)");
  // Slices of two: two per zone, each on one Node.
  ps.count = 4;
  ps.slice_size = 2;
  k = decide(c, "w");
  ASSERT_TRUE(k.admissible) << k.message;
  EXPECT_EQ(k.podsets[0].detail, "a1=2, a2=2");
  // A slice size that is not one: "pod(s)" become "slice(s)" only then.
  ps.count = 10;
  k = decide(c, "w");
  EXPECT_EQ(k.message,
            "couldn't assign flavors to pod set main: topology \"t\" allows to fit only 2 out of 5 "
            "slice(s)");
  ps.slice_size = 1;
  EXPECT_NE(decide(c, "w").message.find("allows to fit only 4 out of 10 pod(s)"),
            std::string::npos);
}

// A request of slices only: unconstrained above the slice level, from the highest level,
// least free capacity first; slices spread over domains.
TEST(KueueSlices, SliceOnlyRequestIsUnconstrainedAbove) {
  auto c = tas_cluster();
  add_workload(c, "w", {make_podset("main", 6, 1500, "")});
  auto& ps = c.workloads[0].podsets[0];
  ps.slice_level = zone;
  ps.slice_size = 3;  // a zone holds one slice of 3
  auto k = decide(c, "w");
  ASSERT_TRUE(k.admissible) << k.message;
  EXPECT_EQ(k.podsets[0].detail, "a1=2, a2=1, b1=2, b2=1");
  ps.count = 9;  // 3 slices, 2 fit
  k = decide(c, "w");
  EXPECT_EQ(k.message,
            "couldn't assign flavors to pod set main: topology \"t\" allows to fit only 2 out of 3 "
            "slice(s)");
  // Required zone with zone slices: one zone must hold every slice.
  ps.count = 6;
  ps.required_level = zone;
  EXPECT_FALSE(decide(c, "w").admissible);
}

TEST(KueueSlices, InvalidSliceRequests) {
  auto c = tas_cluster();
  add_workload(c, "w", {make_podset("main", 2, 1000, host)});
  auto& ps = c.workloads[0].podsets[0];
  ps.slice_level = zone;
  auto k = decide(c, "w");
  EXPECT_EQ(k.message,
            "couldn't assign flavors to pod set main: slice topology requested, but slice size not "
            "provided");
  ps.slice_size = 1;
  EXPECT_EQ(decide(c, "w").message,
            "couldn't assign flavors to pod set main: podset slice topology " + std::string(zone) +
                " is above the podset topology " + host);
  // A slice level the flavor's Topology lacks: the flavor is skipped at quota.
  ps.slice_level = "example.com/rack";
  k = decide(c, "w");
  EXPECT_EQ(k.step, "quota");
  EXPECT_EQ(k.message,
            "couldn't assign flavors to pod set main: Flavor \"f\" does not contain the requested "
            "level");
}

// ---------------------------------------------------------------- partial admission

// minCount: when the spec counts do not fit, Kueue searches the counts down to minCount
// (binary search, the largest that fits) in the same cycle.
TEST(KueuePartial, LargestCountThatFitsDownToMinCount) {
  auto c = tas_cluster();
  // A zone holds 4 Pods of 2 CPUs (two 4-CPU Nodes).
  add_workload(c, "w", {make_podset("main", 5, 2000)});
  auto k = decide(c, "w");
  EXPECT_FALSE(k.admissible);
  EXPECT_FALSE(k.partial);
  c.workloads[0].podsets[0].min_count = 5;  // no room to reduce
  EXPECT_FALSE(decide(c, "w").admissible);
  c.workloads[0].podsets[0].min_count = 2;
  k = decide(c, "w");
  EXPECT_TRUE(k.admissible);
  EXPECT_TRUE(k.partial);
  ASSERT_EQ(k.podsets.size(), 1u);
  EXPECT_EQ(k.podsets[0].count, 4);
  EXPECT_EQ(k.podsets[0].spec_count, 5);
  EXPECT_EQ(k.podsets[0].stage, "placed");
  const auto r = diagnose_pending(c, "default", "w");
  EXPECT_NE(r.conclusion.find("admits it partially"), std::string::npos) << r.conclusion;
  EXPECT_NE(r.conclusion.find("PodSet main with 4 of 5 Pods"), std::string::npos);
  EXPECT_NE(step(r, 7).lines.front().find("count 4 of 5 (partial admission)"), std::string::npos);
  // A minCount the room does not reach: Pending with the spec counts' message.
  c.workloads[0].podsets[0].min_count = 5;
  c.workloads[0].podsets[0].count = 6;
  k = decide(c, "w");
  EXPECT_FALSE(k.admissible);
  EXPECT_NE(k.message.find("out of 6 pod(s)"), std::string::npos) << k.message;
  // The spec counts fit: minCount changes nothing.
  c.workloads[0].podsets[0].count = 3;
  c.workloads[0].podsets[0].min_count = 1;
  k = decide(c, "w");
  EXPECT_TRUE(k.admissible);
  EXPECT_FALSE(k.partial);
  EXPECT_EQ(k.podsets[0].count, 3);
}

// Quota stops the spec count; the reduced count fits the nominalQuota.
TEST(KueuePartial, QuotaLimitsTheCount) {
  auto c = tas_cluster();
  c.cluster_queues[0].flavors[0].nominal["cpu"] = 5000;
  add_workload(c, "w", {make_podset("main", 8, 1000)});
  auto k = decide(c, "w");
  EXPECT_EQ(k.step, "quota");
  c.workloads[0].podsets[0].min_count = 2;
  k = decide(c, "w");
  EXPECT_TRUE(k.admissible);
  EXPECT_EQ(k.podsets[0].count, 5);
  // Kueue's search is over the reduction in proportion: 8 down to 2 in 6 steps.
  c.workloads[0].podsets[0].min_count = 6;
  EXPECT_FALSE(decide(c, "w").admissible);
}

// Partial admission with preemption: the spec count (8) is beyond nominalQuota (6), so no
// preemption is simulated for it; a reduced count that fits by preempting is what the reducer
// finds (an assignment in Preempt mode with targets): 6 Pods, preempting low (3 CPUs).
TEST(KueuePartial, AReducedCountThatFitsByPreempting) {
  auto c = tas_cluster();
  c.cluster_queues[0].flavors[0].nominal["cpu"] = 6000;
  c.cluster_queues[0].within_cluster_queue = "LowerPriority";
  hold(c, "low", "q", 3000).quota_reserved_at = "2026-12-01T10:00:00Z";
  auto& w = add_workload(c, "w", {make_podset("main", 8, 1000)});
  w.priority = 100;
  auto k = decide(c, "w");
  EXPECT_EQ(k.step, "quota");
  EXPECT_TRUE(k.preempts.empty());
  EXPECT_NE(k.message.find("> maximum capacity (6)"), std::string::npos) << k.message;
  named(c, "w").podsets[0].min_count = 4;
  k = decide(c, "w");
  EXPECT_TRUE(k.partial);
  EXPECT_EQ(k.step, "preemption");
  EXPECT_EQ(k.podsets[0].count, 6);
  EXPECT_EQ(k.preempts, std::vector<std::string>{"default/low"});
  EXPECT_EQ(k.message, preemption_message(3, 1));
  EXPECT_TRUE(has_note(k, "Kueue preempts to admit PodSet main with 6 of 8 Pods"))
      << ::testing::PrintToString(k.notes);
  // Without a policy that allows it, no count down to minCount fits the 3 CPUs left.
  c.cluster_queues[0].within_cluster_queue = "Never";
  k = decide(c, "w");
  EXPECT_TRUE(k.preempts.empty());
  EXPECT_FALSE(k.partial);
  EXPECT_EQ(k.step, "quota");
  // With minCount 3, 3 fits as is.
  named(c, "w").podsets[0].min_count = 3;
  k = decide(c, "w");
  EXPECT_TRUE(k.admissible);
  EXPECT_EQ(k.podsets[0].count, 3);
}

}  // namespace
}  // namespace topogate::diagnose

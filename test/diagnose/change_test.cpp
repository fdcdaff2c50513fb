// `diagnose change` (diagnose/change.cpp): a candidate revision's Workload impact on the
// change-zone-rack fixture (the runbook's zone -> zone + rack change): a change that strands,
// one that admits every evicted Workload again, one that changes nothing, an invalid
// revision, and the order in which the evicted and the waiting Workloads compete.

#include "diagnose/change.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "core/document.hpp"
#include "test/diagnose/fixtures.hpp"

namespace topogate::diagnose {
namespace {

using testing::fixtures;
using testing::load;
using testing::slurp;

constexpr const char* region = "topology.kubernetes.io/region";
constexpr const char* zone = "topology.kubernetes.io/zone";
constexpr const char* rack = "topology.gpustack.ai/rack";
constexpr const char* rack_profile = "fnv64-1861b5f6016a523a";
constexpr const char* zone_profile = "fnv64-570aeab478df5111";

core::topology_source rack_source() {
  const auto d = core::decode_any(slurp(fixtures() / "change-zone-rack-source.json"));
  EXPECT_TRUE(d.ok());
  auto v = core::validate_topology_source(d.root);
  EXPECT_TRUE(v.ok()) << core::render_text(v.errors);
  return v.source;
}

core::snapshot snapshot_of(const std::string& text) {
  auto d = core::decode_snapshot(text);
  EXPECT_TRUE(d.ok()) << core::render_text(d.errors);
  return d.value;
}

// A revision giving the Nodes named in `racks` a rack of their own name.
std::string revision(const std::vector<std::string>& racks) {
  std::string out = "apiVersion: topology.gpustack.ai/v1alpha1\nrevision: r\nnodes:\n";
  for (const char* n : {"worker-a1", "worker-a2", "worker-b1", "worker-b2"}) {
    const std::string name(n);
    out +=
        "  " + name + ":\n    " + region + ": region-1\n    " + zone + ": zone-" + name[7] + "\n";
    if (std::find(racks.begin(), racks.end(), name) != racks.end())
      out += std::string("    ") + rack + ": rack-" + name.substr(7) + "\n";
  }
  return out;
}

const change_workload& find(const change_report& r, const std::string& w) {
  for (const auto& x : r.workloads)
    if (x.workload == w) return x;
  ADD_FAILURE() << "no " << w;
  return r.workloads.front();
}

// The runbook's change: zone-b split between the rack profile (worker-b1) and the zone
// profile (worker-b2): pair-1 is admitted again in zone-a, pair-2 stays Pending.
TEST(Change, ZoneSplitBetweenProfilesStrandsOnePair) {
  const auto c = load("change-zone-rack");
  const auto r = diagnose_change(c, rack_source(),
                                 snapshot_of(slurp(fixtures() / "change-zone-rack-revision.yaml")));
  ASSERT_TRUE(r.ok()) << core::render_text(r.errors);
  EXPECT_EQ(r.changed_nodes, 3u);
  ASSERT_EQ(r.profiles.size(), 2u);
  EXPECT_EQ(r.profiles[0].id, rack_profile);  // deepest first: Kueue tries it first
  EXPECT_FALSE(r.profiles[0].exists);
  EXPECT_EQ(r.profiles[0].flavor, std::string("gpustack-") + rack_profile);
  EXPECT_EQ(r.profiles[1].id, zone_profile);
  EXPECT_TRUE(r.profiles[1].exists);
  ASSERT_EQ(r.queues.size(), 1u);
  EXPECT_TRUE(r.queues[0].drained);
  EXPECT_EQ(r.queues[0].after, (std::vector<std::string>{std::string("gpustack-") + rack_profile,
                                                         std::string("gpustack-") + zone_profile}));
  ASSERT_EQ(r.workloads.size(), 2u);
  EXPECT_EQ(r.workloads[0].workload, "default/pair-1");  // admitted first, taken first
  const auto& p1 = find(r, "default/pair-1");
  EXPECT_TRUE(p1.evicted);
  EXPECT_TRUE(p1.admitted);
  ASSERT_EQ(p1.podsets.size(), 1u);
  EXPECT_EQ(p1.podsets[0].domain, std::string(zone) + "=zone-a");
  EXPECT_EQ(p1.podsets[0].placement, "worker-a1=1, worker-a2=1");
  EXPECT_EQ(p1.podsets[0].text,
            std::string("admitted again (domain ") + zone + "=zone-a: worker-a1=1, worker-a2=1)");
  const auto& p2 = find(r, "default/pair-2");
  EXPECT_TRUE(p2.evicted);
  EXPECT_FALSE(p2.admitted);
  ASSERT_EQ(p2.podsets.size(), 1u);
  EXPECT_EQ(p2.podsets[0].largest, 1);
  EXPECT_EQ(p2.podsets[0].text,
            std::string("stays Pending (largest new ") + zone + " domain holds 1 of 2 Pods)");
  EXPECT_FALSE(p2.message.empty());
  EXPECT_EQ(change_summary(r), "evicted 2, admitted again 1, stranded 1");
  const std::string json = render_change_json(r);
  EXPECT_NE(json.find("\"summary\":{\"evicted\":2,\"admittedAgain\":1,\"stranded\":1}"),
            std::string::npos)
      << json;
  EXPECT_NE(render_change_text(r).find("summary: evicted 2, admitted again 1, stranded 1"),
            std::string::npos);
}

// Every Node gets a rack: one profile replaces the other, both zones stay whole in it, and
// both pairs are admitted again.
TEST(Change, WholeZonesInTheNewProfileReadmitEveryPair) {
  const auto c = load("change-zone-rack");
  const auto r =
      diagnose_change(c, rack_source(),
                      snapshot_of(revision({"worker-a1", "worker-a2", "worker-b1", "worker-b2"})));
  ASSERT_TRUE(r.ok()) << core::render_text(r.errors);
  EXPECT_EQ(r.changed_nodes, 4u);
  ASSERT_EQ(r.profiles.size(), 1u);
  ASSERT_EQ(r.queues.size(), 1u);
  EXPECT_TRUE(r.queues[0].drained);
  EXPECT_EQ(r.gone, (std::vector<std::string>{std::string("gpustack-") + zone_profile}));
  EXPECT_EQ(change_summary(r), "evicted 2, admitted again 2, stranded 0");
  EXPECT_EQ(find(r, "default/pair-1").podsets.at(0).domain, std::string(zone) + "=zone-a");
  EXPECT_EQ(find(r, "default/pair-2").podsets.at(0).domain, std::string(zone) + "=zone-b");
}

// The same profiles: the flavor set does not change, nothing is drained or evicted.
TEST(Change, SameProfilesEvictNothing) {
  const auto c = load("change-zone-rack");
  std::string why;
  const auto src = source_of(c, "", why);
  ASSERT_TRUE(src) << why;
  const auto r =
      diagnose_change(c, *src, snapshot_of(slurp(fixtures() / "change-zone-rack-same.yaml")));
  ASSERT_TRUE(r.ok()) << core::render_text(r.errors);
  EXPECT_EQ(r.changed_nodes, 0u);
  ASSERT_EQ(r.queues.size(), 1u);
  EXPECT_FALSE(r.queues[0].drained);
  EXPECT_TRUE(r.workloads.empty());
  EXPECT_EQ(change_summary(r), "evicted 0, admitted again 0, stranded 0");
  // A rack on one Node only is a profile change: the queue is drained then.
  const auto one = diagnose_change(c, rack_source(), snapshot_of(revision({"worker-a1"})));
  ASSERT_TRUE(one.ok());
  EXPECT_TRUE(one.queues.at(0).drained);
  EXPECT_EQ(one.evicted, 2u);
}

// A revision the consumer would refuse is not analysed.
TEST(Change, InvalidRevisionIsRefused) {
  const auto c = load("change-zone-rack");
  std::string text = revision({"worker-a1"});
  text += "  worker-z9:\n    topology.kubernetes.io/zone: zone-z\n";  // not a Node
  const auto r = diagnose_change(c, rack_source(), snapshot_of(text));
  EXPECT_FALSE(r.ok());
  EXPECT_TRUE(r.workloads.empty());
  EXPECT_EQ(r.evicted, 0u);
  EXPECT_NE(render_change_text(r).find("does not validate"), std::string::npos);
}

// The TopologySource is the only one read; none or several must be named.
TEST(Change, SourceOfTheObjects) {
  auto c = load("change-zone-rack");
  std::string why;
  const auto src = source_of(c, "", why);
  ASSERT_TRUE(src);
  EXPECT_EQ(src->levels, (std::vector<std::string>{region, zone}));
  EXPECT_FALSE(source_of(c, "other", why));
  c.sources.push_back(c.sources.front());
  c.sources.back().name = "second";
  EXPECT_FALSE(source_of(c, "", why));
  EXPECT_NE(why.find("several"), std::string::npos);
  EXPECT_TRUE(source_of(c, "second", why));
}

// Kueue's order: a Workload that was waiting with a higher priority takes a zone first and
// strands an evicted pair; with a lower priority the pairs come first and it keeps waiting.
TEST(Change, WaitingWorkloadsCompeteInKueuesOrder) {
  for (const std::int64_t prio : {10, -10}) {
    auto c = load("change-zone-rack");
    workload w = c.workloads.front();  // pair-1's shape: 2 Pods of 1500m in one zone
    w.name = "waiting";
    w.uid = "waiting";
    w.priority = prio;
    w.admitted_cluster_queue.clear();
    w.assignments.clear();
    w.conditions = {{"QuotaReserved", "False", "Pending", ""}};
    c.workloads.push_back(w);
    const auto r = diagnose_change(
        c, rack_source(),
        snapshot_of(revision({"worker-a1", "worker-a2", "worker-b1", "worker-b2"})));
    ASSERT_TRUE(r.ok());
    ASSERT_EQ(r.workloads.size(), 3u);
    const auto& waiting = find(r, "default/waiting");
    EXPECT_FALSE(waiting.evicted);
    if (prio > 0) {
      EXPECT_EQ(r.workloads[0].workload, "default/waiting");
      EXPECT_TRUE(waiting.admitted);
      EXPECT_EQ(change_summary(r), "evicted 2, admitted again 1, stranded 1");
      const auto& p2 = find(r, "default/pair-2");
      EXPECT_FALSE(p2.admitted);
      EXPECT_EQ(p2.podsets.at(0).largest, 0);  // both zones taken
    } else {
      EXPECT_EQ(r.workloads[2].workload, "default/waiting");
      EXPECT_FALSE(waiting.admitted);
      EXPECT_EQ(change_summary(r), "evicted 2, admitted again 2, stranded 0");
    }
  }
}

// Among equal priorities Kueue takes the Workload queued first (its queue-order time: the
// creationTimestamp, which the drain does not change, or the time of an eviction by a PodsReady
// timeout or an AdmissionCheck), then the smaller UID: whichever pair comes first gets zone-a.
TEST(Change, EqualPrioritiesInQueueOrderThenUidOrder) {
  const auto snap = snapshot_of(slurp(fixtures() / "change-zone-rack-revision.yaml"));
  for (const bool pair2_older : {true, false}) {
    auto c = load("change-zone-rack");
    auto& p1 = c.workloads[0];
    auto& p2 = c.workloads[1];
    ASSERT_EQ(p1.name, "pair-1");
    p1.queue_order_at = "2026-11-29T20:00:05Z";
    p2.queue_order_at = pair2_older ? "2026-11-29T20:00:04Z" : "2026-11-29T20:00:05Z";
    p1.uid = "bbbb";
    p2.uid = "cccc";  // with equal times, pair-1's smaller UID goes first
    const auto r = diagnose_change(c, rack_source(), snap);
    ASSERT_EQ(r.workloads.size(), 2u);
    const std::string first = pair2_older ? "default/pair-2" : "default/pair-1";
    EXPECT_EQ(r.workloads[0].workload, first);
    EXPECT_TRUE(r.workloads[0].admitted);
    EXPECT_EQ(r.workloads[0].podsets.at(0).domain, std::string(zone) + "=zone-a");
    EXPECT_FALSE(r.workloads[1].admitted);
    EXPECT_EQ(change_summary(r), "evicted 2, admitted again 1, stranded 1");
  }
}

// The queue-order time as read: a Pending Workload created before the pairs, with pair-1's
// shape and their priority, comes first and strands a pair; requeued by a PodsReady
// timeout's eviction after them, it comes last and keeps waiting. Another eviction (a
// preemption) keeps its creation time.
TEST(Change, WaitingWorkloadOrderedByItsQueueOrderTime) {
  for (const std::string reason : {"", "Preempted", "PodsReadyTimeout"}) {
    auto c = load("change-zone-rack");
    for (auto& pair : c.workloads) pair.queue_order_at = "2026-11-29T20:00:05Z";
    const std::string evicted =
        reason.empty() ? ""
                       : R"(, {"type": "Evicted", "status": "True", "reason": ")" + reason +
                             R"(", "lastTransitionTime": "2026-11-29T20:00:10Z"})";
    const auto errors = add_objects(c, R"({"apiVersion": "kueue.x-k8s.io/v1beta2",
      "kind": "Workload", "metadata": {"name": "waiting", "namespace": "default",
        "uid": "aaaa", "creationTimestamp": "2026-11-29T20:00:00Z"},
      "spec": {"queueName": "gpustack", "podSets": [{"name": "main", "count": 2,
        "template": {"spec": {"containers": [{"name": "server",
          "resources": {"requests": {"cpu": "1500m", "memory": "2Gi"}}}]}},
        "topologyRequest": {"required": "topology.kubernetes.io/zone"}}]},
      "status": {"conditions": [{"type": "QuotaReserved", "status": "False",
        "reason": "Pending"})" + evicted + "]}}",
                                    "test");
    ASSERT_TRUE(errors.empty()) << reason;
    const auto r = diagnose_change(
        c, rack_source(),
        snapshot_of(revision({"worker-a1", "worker-a2", "worker-b1", "worker-b2"})));
    ASSERT_EQ(r.workloads.size(), 3u) << reason;
    const bool last = reason == "PodsReadyTimeout";
    EXPECT_EQ(r.workloads[last ? 2 : 0].workload, "default/waiting") << reason;
    EXPECT_EQ(find(r, "default/waiting").admitted, !last) << reason;
    EXPECT_EQ(change_summary(r), last ? "evicted 2, admitted again 2, stranded 0"
                                      : "evicted 2, admitted again 1, stranded 1")
        << reason;
  }
}

// Quota: capacity quota follows the Nodes of each new profile; any other quota is copied.
TEST(Change, ReplacementQuotaRule) {
  auto c = load("change-zone-rack");
  const auto snap = snapshot_of(slurp(fixtures() / "change-zone-rack-revision.yaml"));
  const auto capacity = diagnose_change(c, rack_source(), snap);
  EXPECT_NE(capacity.queues.at(0).quota_rule.find("allocatable"), std::string::npos);
  // With 64 CPUs in every flavor the zone profile's flavor no longer stops pair-2 by quota;
  // Kueue still finds no zone for it.
  c.cluster_queues.front().flavors.front().nominal["cpu"] = 64000;
  const auto copied = diagnose_change(c, rack_source(), snap);
  EXPECT_NE(copied.queues.at(0).quota_rule.find("copied"), std::string::npos);
  EXPECT_EQ(change_summary(copied), "evicted 2, admitted again 1, stranded 1");
}

}  // namespace
}  // namespace topogate::diagnose

// Kueue v0.17.0's queue stage as diagnose follows it (the LocalQueue, the ClusterQueue and
// its Active condition, the namespaceSelector), and Workloads decided again on the clusters
// real Kueue decided them on in the TAS lab.

#include <gtest/gtest.h>

#include <algorithm>

#include "test/diagnose/kueue_cluster.hpp"

namespace topogate::diagnose {
namespace {

using namespace kueue_test;

// spec.queueName -> the LocalQueue of the Workload's namespace -> its clusterQueue: a missing
// LocalQueue keeps the Workload Pending with Kueue's words, the existing one lets it through.
TEST(KueueQueue, LocalQueueOfTheWorkloadsNamespace) {
  auto c = tas_cluster();
  add_workload(c, "w", {make_podset("main", 2, 1000)});
  EXPECT_TRUE(decide(c, "w").admissible);
  c.workloads[0].queue_name = "other";
  auto k = decide(c, "w");
  EXPECT_FALSE(k.admissible);
  EXPECT_EQ(k.step, "queue");
  EXPECT_EQ(k.reason, "Inadmissible");
  EXPECT_EQ(k.message, "LocalQueue other doesn't exist");
  for (const auto& p : k.podsets) EXPECT_EQ(p.stage, "not reached");
  // A LocalQueue of that name in another namespace is not the Workload's.
  c.local_queues.push_back({"team-b", "other", "q", ""});
  EXPECT_EQ(decide(c, "w").message, "LocalQueue other doesn't exist");
  c.local_queues.push_back({"default", "other", "q", ""});
  EXPECT_TRUE(decide(c, "w").admissible);
  const auto r = diagnose_pending(c, "default", "w");
  EXPECT_NE(step(r, 3).lines.front().find("LocalQueue default/other -> ClusterQueue q"),
            std::string::npos);
}

TEST(KueueQueue, StoppedLocalQueueIsInactive) {
  auto c = tas_cluster();
  add_workload(c, "w", {make_podset("main", 2, 1000)});
  c.local_queues[0].stop_policy = "None";
  EXPECT_TRUE(decide(c, "w").admissible);
  for (const char* policy : {"Hold", "HoldAndDrain"}) {
    c.local_queues[0].stop_policy = policy;
    const auto k = decide(c, "w");
    EXPECT_EQ(k.step, "queue") << policy;
    EXPECT_EQ(k.message, "LocalQueue q is inactive") << policy;
    EXPECT_EQ(k.reason, "Inadmissible");
  }
}

TEST(KueueQueue, ClusterQueueOfTheLocalQueueMissing) {
  auto c = tas_cluster();
  add_workload(c, "w", {make_podset("main", 2, 1000)});
  c.local_queues[0].cluster_queue = "gone";
  const auto r = diagnose_pending(c, "default", "w");
  EXPECT_EQ(r.kueue.step, "queue");
  EXPECT_EQ(r.kueue.message, "ClusterQueue gone doesn't exist");
  EXPECT_EQ(step(r, 3).result, verdict::problem);
  EXPECT_NE(r.conclusion.find("Pending at the queue, before any flavor is tried: ClusterQueue "
                              "gone doesn't exist (Inadmissible)"),
            std::string::npos)
      << r.conclusion;
}

// Every cause Kueue's ClusterQueue cache holds a queue inactive for, in its order, and the
// Workload's message for all of them.
TEST(KueueQueue, InactiveClusterQueueCauses) {
  auto base = tas_cluster();
  add_workload(base, "w", {make_podset("main", 2, 1000)});
  auto inactive = [](const cluster_objects& c) {
    const auto k = decide(c, "w");
    EXPECT_EQ(k.step, "queue");
    EXPECT_EQ(k.message, "ClusterQueue q is inactive");
    EXPECT_EQ(k.reason, "Inadmissible");
    return k.notes.empty() ? std::string() : k.notes.front();
  };
  {
    auto c = base;
    c.cluster_queues[0].stop_policy = "None";
    EXPECT_TRUE(decide(c, "w").admissible);
    c.cluster_queues[0].stop_policy = "Hold";
    EXPECT_EQ(inactive(c), "ClusterQueue q: Can't admit new workloads: is stopped.");
    c.cluster_queues[0].stop_policy = "HoldAndDrain";
    EXPECT_EQ(inactive(c), "ClusterQueue q: Can't admit new workloads: is stopped.");
    // Stopped and a flavor missing: both, Kueue's order.
    c.cluster_queues[0].flavors.push_back({0, "x", {"cpu", "memory"}, {}, {}, {}});
    c.cluster_queues[0].flavors.push_back({0, "y", {"cpu", "memory"}, {}, {}, {}});
    EXPECT_EQ(inactive(c),
              "ClusterQueue q: Can't admit new workloads: is stopped, references missing "
              "ResourceFlavor(s): x,y.");
  }
  {
    // A TAS flavor whose Topology does not exist.
    auto c = base;
    c.topologies.clear();
    EXPECT_EQ(inactive(c),
              "ClusterQueue q: Can't admit new workloads: there is no Topology \"t\" for TAS "
              "flavor \"f\".");
  }
  {
    auto c = base;
    c.cluster_queues[0].terminating = true;
    EXPECT_EQ(inactive(c),
              "ClusterQueue q: Can't admit new workloads; clusterQueue is terminating");
  }
  {
    // What diagnose does not read (AdmissionChecks): the queue's Active condition says it;
    // Active=True does not override a cause diagnose sees.
    auto c = base;
    c.cluster_queues[0].conditions.push_back(
        {"Active", "False", "AdmissionCheckNotFound",
         "Can't admit new workloads: references missing AdmissionCheck(s): ac."});
    EXPECT_EQ(inactive(c),
              "ClusterQueue q: Can't admit new workloads: references missing AdmissionCheck(s): "
              "ac.");
    c.cluster_queues[0].conditions = {{"Active", "True", "Ready", "Can admit new workloads"}};
    EXPECT_TRUE(decide(c, "w").admissible);
    c.cluster_queues[0].stop_policy = "Hold";
    EXPECT_EQ(inactive(c), "ClusterQueue q: Can't admit new workloads: is stopped.");
  }
  {
    // AdmissionChecks read: each the ClusterQueue asks for, missing or not Active, sorted as
    // Kueue lists them, after the flavors and before the Topologies.
    auto c = base;
    c.admission_checks_read = true;
    c.cluster_queues[0].admission_checks = {"zeta", "alpha", "ready"};
    c.admission_checks = {{"ready", "ctl", true}};
    EXPECT_EQ(inactive(c),
              "ClusterQueue q: Can't admit new workloads: references missing AdmissionCheck(s): "
              "alpha,zeta.");
    c.admission_checks.push_back({"zeta", "ctl", false});
    c.admission_checks.push_back({"alpha", "ctl", false});
    EXPECT_EQ(inactive(c),
              "ClusterQueue q: Can't admit new workloads: references inactive AdmissionCheck(s): "
              "alpha,zeta.");
    c.admission_checks[1].active = true;
    c.cluster_queues[0].flavors.push_back({0, "x", {"cpu", "memory"}, {}, {}, {}});
    c.topologies.clear();
    EXPECT_EQ(inactive(c),
              "ClusterQueue q: Can't admit new workloads: references missing ResourceFlavor(s): "
              "x, references inactive AdmissionCheck(s): alpha, there is no Topology \"t\" for "
              "TAS flavor \"f\".");
    // Every check Active: the queue admits.
    c = base;
    c.admission_checks_read = true;
    c.cluster_queues[0].admission_checks = {"ready"};
    c.admission_checks = {{"ready", "ctl", true}};
    EXPECT_TRUE(decide(c, "w").admissible);
    // Not read: a reference alone says nothing (the queue's Active condition decides).
    c.admission_checks_read = false;
    c.admission_checks.clear();
    EXPECT_TRUE(decide(c, "w").admissible);
  }
}

// As read: an AdmissionCheckList (empty too: the kind is served), a ClusterQueue's checks in
// both spellings, a Workload's check states.
TEST(KueueQueue, AdmissionChecksAsRead) {
  cluster_objects c;
  auto errors = add_objects(
      c, R"({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "AdmissionCheckList", "items": []})",
      "t");
  EXPECT_TRUE(errors.empty());
  EXPECT_TRUE(c.admission_checks_read);
  EXPECT_TRUE(c.admission_checks.empty());
  errors = add_objects(c, R"({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "AdmissionCheck",
      "metadata": {"name": "joint"}, "spec": {"controllerName": "example.com/joint"},
      "status": {"conditions": [{"type": "Active", "status": "True"}]}})",
                       "t");
  errors = add_objects(c, R"({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
      "metadata": {"name": "q"}, "spec": {"admissionChecks": ["old"],
      "admissionChecksStrategy": {"admissionChecks": [{"name": "joint"}]}}})",
                       "t");
  EXPECT_TRUE(errors.empty());
  errors = add_objects(c, R"({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
      "metadata": {"name": "w", "namespace": "default"}, "spec": {"queueName": "lq", "podSets": []},
      "status": {"admissionChecks": [{"name": "joint", "state": "Retry", "message": "again"}]}})",
                       "t");
  EXPECT_TRUE(errors.empty());
  ASSERT_EQ(c.admission_checks.size(), 1u);
  EXPECT_EQ(c.admission_checks[0].controller, "example.com/joint");
  EXPECT_TRUE(c.admission_checks[0].active);
  ASSERT_EQ(c.cluster_queues.size(), 1u);
  EXPECT_EQ(c.cluster_queues[0].admission_checks, (std::vector<std::string>{"old", "joint"}));
  ASSERT_EQ(c.workloads.size(), 1u);
  ASSERT_EQ(c.workloads[0].check_states.size(), 1u);
  EXPECT_EQ(c.workloads[0].check_states[0].state, "Retry");
  EXPECT_EQ(c.workloads[0].check_states[0].message, "again");
}

// Quota reserved and not admitted: the Workload waits for its AdmissionChecks; each one's
// state is named.
TEST(KueueQueue, ReservedWaitsForItsAdmissionChecks) {
  auto c = tas_cluster();
  auto& w = hold(c, "w", "q", 1000);
  w.check_states = {{"joint", "Pending", "held for its set"}, {"prov", "Ready", ""}};
  auto k = decide(c, "w");
  EXPECT_TRUE(k.admissible);
  EXPECT_NE(std::find(k.notes.begin(), k.notes.end(),
                      "admitted once every AdmissionCheck is Ready: joint Pending (held for its "
                      "set), prov Ready"),
            k.notes.end())
      << ::testing::PrintToString(k.notes);
  // Admitted: no such note.
  c.workloads[0].conditions.push_back({"Admitted", "True", "Admitted", ""});
  k = decide(c, "w");
  for (const auto& n : k.notes) EXPECT_EQ(n.find("AdmissionCheck"), std::string::npos) << n;
}

// The namespace against the ClusterQueue's namespaceSelector: {} selects every namespace, an
// absent selector none; without Namespace objects the apiserver's kubernetes.io/metadata.name
// label is what a namespace carries.
// A container named main with these requests and limits.
container_resources main_container(resource_amounts requests, resource_amounts limits) {
  container_resources ct;
  ct.name = "main";
  ct.requests = std::move(requests);
  ct.limits = std::move(limits);
  return ct;
}

// The PodSet with its template's one container.
podset with_container(podset ps, const container_resources& ct) {
  ps.resources.containers = {ct};
  return ps;
}

// The scheduler's resource validation, before any flavor: a container whose requests, once
// Kueue fills them (LimitRange defaults, then limits), exceed its limits keeps the Workload
// Pending with Kueue's words; equal requests and limits pass.
TEST(KueueQueue, RequestsAboveLimitsAfterDefaults) {
  auto c = tas_cluster();
  const container_resources ct = main_container({}, {{"cpu", 2000}});
  auto& w = add_workload(c, "w", {with_container(make_podset("main", 2, 0), ct)});
  // Without a LimitRange the limit fills the missing request: 2 <= 2.
  EXPECT_TRUE(decide(c, "w").admissible);
  limit_range lr;
  lr.namespace_ = "default";
  lr.name = "defaults";
  lr.has_container_item = true;
  lr.default_requests = {{"cpu", 2000}};
  c.limit_ranges.push_back(lr);
  EXPECT_TRUE(decide(c, "w").admissible);  // the default request equals the limit
  c.limit_ranges[0].default_requests = {{"cpu", 2001}, {"memory", 1ll << 30}};
  auto k = decide(c, "w");
  EXPECT_FALSE(k.admissible);
  EXPECT_EQ(k.step, "resources");
  EXPECT_EQ(k.reason, "Pending");
  EXPECT_EQ(k.message,
            "resources validation failed: spec.podSets[0].template.spec.containers[0]: Invalid "
            "value: [\"cpu\"]: requests must not exceed its limits");
  for (const auto& p : k.podsets) EXPECT_EQ(p.stage, "not reached");
  const auto r = diagnose_pending(c, "default", "w");
  EXPECT_NE(r.conclusion.find("Pending before any flavor is tried"), std::string::npos)
      << r.conclusion;
  // The LimitRange of another namespace does not apply.
  c.limit_ranges[0].namespace_ = "other";
  EXPECT_TRUE(decide(c, "w").admissible);
  c.limit_ranges[0].namespace_ = "default";
  // Two containers over their limits (an init container first), two resources in one: Kubernetes'
  // aggregate, in brackets.
  w.podsets[0].resources.init_containers = {ct};
  w.podsets[0].resources.containers[0].limits["memory"] = 1;
  k = decide(c, "w");
  EXPECT_EQ(k.message,
            "resources validation failed: [spec.podSets[0].template.spec.initContainers[0]: "
            "Invalid value: [\"cpu\"]: requests must not exceed its limits, "
            "spec.podSets[0].template.spec.containers[0]: Invalid value: [\"cpu\",\"memory\"]: "
            "requests must not exceed its limits]");
  // A Workload that holds its reservation is Kueue's answer, not validated again.
  w.conditions = {{"QuotaReserved", "True", "QuotaReserved", ""}};
  EXPECT_TRUE(decide(c, "w").admissible);
}

// Then the LimitRanges' bounds, still before any flavor: one side of each bound admits, the
// other keeps the Workload Pending with Kueue's words; a Pod bound is on the Pod's request.
TEST(KueueQueue, LimitRangeMinAndMax) {
  auto c = tas_cluster();
  auto& w = add_workload(
      c, "w", {with_container(make_podset("main", 2, 1000), main_container({{"cpu", 1000}}, {}))});
  limit_range lr;
  lr.namespace_ = "default";
  lr.name = "bounds";
  lr.container_max = {{"cpu", 1000}};
  lr.container_min = {{"cpu", 1000}};
  c.limit_ranges.push_back(lr);
  EXPECT_TRUE(decide(c, "w").admissible);  // 1 CPU: at the max and at the min
  c.limit_ranges[0].container_max = {{"cpu", 999}};
  auto k = decide(c, "w");
  EXPECT_FALSE(k.admissible);
  EXPECT_EQ(k.step, "resources");
  EXPECT_EQ(k.reason, "Pending");
  EXPECT_EQ(k.message,
            "resources didn't satisfy LimitRange constraints: spec.podSets[0].template.spec."
            "containers[0]: Invalid value: [\"cpu\"]: requests must not be above the limitRange "
            "max");
  for (const auto& p : k.podsets) EXPECT_EQ(p.stage, "not reached");
  c.limit_ranges[0].container_max = {{"cpu", 1000}};
  c.limit_ranges[0].container_min = {{"cpu", 1001}};
  k = decide(c, "w");
  EXPECT_EQ(k.message,
            "resources didn't satisfy LimitRange constraints: spec.podSets[0].template.spec."
            "containers[0]: Invalid value: [\"cpu\"]: requests must not be below the limitRange "
            "min");
  c.limit_ranges[0].container_min = {};
  c.limit_ranges[0].pod_max = {{"cpu", 1000}};
  EXPECT_TRUE(decide(c, "w").admissible);
  c.limit_ranges[0].pod_max = {{"cpu", 999}};
  k = decide(c, "w");
  EXPECT_EQ(k.message,
            "resources didn't satisfy LimitRange constraints: spec.podSets[0].template.spec: "
            "Invalid value: [\"cpu\"]: requests must not be above the limitRange max");
  // A Workload that holds its reservation is Kueue's answer, not validated again.
  w.conditions = {{"QuotaReserved", "True", "QuotaReserved", ""}};
  EXPECT_TRUE(decide(c, "w").admissible);
}

TEST(KueueQueue, NamespaceSelector) {
  auto c = tas_cluster();
  add_workload(c, "w", {make_podset("main", 2, 1000)});
  auto& sel = c.cluster_queues[0].namespace_selector;
  sel = label_selector{{{"team", "ml"}}, {}};
  c.namespaces.push_back({"default", {{"kubernetes.io/metadata.name", "default"}, {"team", "ml"}}});
  EXPECT_TRUE(decide(c, "w").admissible);
  c.namespaces[0].labels = {{"kubernetes.io/metadata.name", "default"}, {"team", "web"}};
  auto k = decide(c, "w");
  EXPECT_EQ(k.step, "queue");
  EXPECT_EQ(k.reason, "Pending");
  EXPECT_EQ(k.message, "Workload namespace doesn't match ClusterQueue selector");
  sel.reset();  // absent: no namespace
  EXPECT_EQ(decide(c, "w").message, "Workload namespace doesn't match ClusterQueue selector");
  c.namespaces.clear();
  sel = label_selector{{}, {{"kubernetes.io/metadata.name", "In", {"default"}}}};
  EXPECT_TRUE(decide(c, "w").admissible);
  sel = label_selector{{}, {{"kubernetes.io/metadata.name", "NotIn", {"default"}}}};
  EXPECT_EQ(decide(c, "w").message, "Workload namespace doesn't match ClusterQueue selector");
  // The Workload controller's checks come first: an inactive queue is what Kueue says.
  c.cluster_queues[0].stop_policy = "Hold";
  EXPECT_EQ(decide(c, "w").message, "ClusterQueue q is inactive");
}

// Files without any LocalQueue: the only ClusterQueue is taken, and a note says so.
TEST(KueueQueue, NoLocalQueueReadTakesTheOnlyClusterQueue) {
  auto c = tas_cluster();
  add_workload(c, "w", {make_podset("main", 2, 1000)});
  c.local_queues.clear();
  auto k = decide(c, "w");
  EXPECT_TRUE(k.admissible);
  ASSERT_FALSE(k.notes.empty());
  EXPECT_NE(k.notes.front().find("no LocalQueue was read"), std::string::npos);
  // With a second ClusterQueue there is no telling which: the LocalQueue is missing, as
  // Kueue finds it.
  c.cluster_queues.push_back(c.cluster_queues[0]);
  c.cluster_queues[1].name = "q2";
  EXPECT_EQ(decide(c, "w").message, "LocalQueue q doesn't exist");
}

// ---------------------------------------------------------------- recorded in the TAS lab

// Fixtures recorded from real Kueue v0.17.0 in the TAS lab (test/e2e/tas/kueue-decision/
// request-limitrange-runtimeclass.json, node-affinity.json, queue-route.json, min-count.json,
// slices.json, node-facts.json, flavor-prefer-no-schedule-and-tolerations.json,
// total-nodes-excluded.json, gpu-usage-tolerations.json, request-limits-pod-level.json,
// pods-known-bug.json): each Workload, decided again on the
// cluster Kueue decided it on (the Workloads submitted after it left out, its own decision
// cleared), gets Kueue's recorded answer: word for word (message and reason) when Pending, the
// count and the Nodes when admitted.
void expect_recorded_decisions(const std::string& dir, const std::vector<std::string>& order) {
  const auto all = load(dir);
  for (std::size_t i = 0; i < order.size(); ++i) {
    auto c = all;
    std::erase_if(c.workloads, [&](const workload& w) {
      return std::find(order.begin() + static_cast<long>(i) + 1, order.end(), w.name) !=
             order.end();
    });
    auto it = std::find_if(c.workloads.begin(), c.workloads.end(),
                           [&](const workload& w) { return w.name == order[i]; });
    ASSERT_NE(it, c.workloads.end()) << order[i];
    const auto* qr = find_condition(it->conditions, "QuotaReserved");
    ASSERT_NE(qr, nullptr) << order[i];
    const bool admitted = qr->status == "True";
    const std::string message = qr->message;
    const std::string reason = qr->reason;
    std::map<std::string, std::int64_t> admitted_counts;  // PodSet -> the count Kueue admitted
    std::map<std::string, std::string> placed;            // PodSet -> "node=n, ..."
    for (const auto& a : it->assignments) {
      admitted_counts[a.name] = a.count;
      std::vector<std::string> doms;
      for (const auto& d : a.topology_domains)
        doms.push_back(d.values.empty() ? std::string()
                                        : d.values.back() + "=" + std::to_string(d.count));
      // Kueue lists the domains by their level values (an empty block before b1), diagnose by
      // the leaf's name: the same placement compares equal.
      std::sort(doms.begin(), doms.end());
      std::string joined;
      for (const auto& x : doms) joined += (joined.empty() ? "" : ", ") + x;
      placed[a.name] = joined;
    }
    it->conditions.clear();
    it->assignments.clear();
    it->admitted_cluster_queue.clear();
    const auto r = diagnose_pending(c, it->namespace_, order[i]);
    EXPECT_EQ(r.kueue.admissible, admitted) << order[i] << ": " << r.kueue.message;
    if (!admitted) {
      EXPECT_EQ(r.kueue.message, message) << order[i];
      EXPECT_EQ(r.kueue.reason, reason) << order[i];
    }
    for (const auto& p : r.kueue.podsets) {
      if (admitted && admitted_counts.count(p.podset)) {
        EXPECT_EQ(p.count, admitted_counts[p.podset]) << order[i] << " " << p.podset;
        if (!placed[p.podset].empty()) {
          EXPECT_EQ(p.detail, placed[p.podset]) << order[i] << " " << p.podset;
        }
      }
    }
  }
}

TEST(KueueRecorded, LimitRangeAndRuntimeClassRequests) {
  expect_recorded_decisions("kueue-requests",
                            {"defaulted", "runtime-overhead", "own-request", "runtime-plain"});
  // Without its LimitRange the defaulted Workload's Pods request no CPU: it would fit.
  auto c = load("kueue-requests");
  c.limit_ranges.clear();
  for (auto& w : c.workloads) {
    w.conditions.clear();
    for (auto& ps : w.podsets) ps.requests = kueue_requests(c, w.namespace_, ps.resources, nullptr);
  }
  std::erase_if(c.workloads, [](const workload& w) { return w.name != "defaulted"; });
  EXPECT_TRUE(diagnose_pending(c, "default", "defaulted").kueue.admissible);
}

TEST(KueueRecorded, QueueRoute) {
  expect_recorded_decisions("kueue-queues",
                            {"selected", "no-local-queue", "no-cluster-queue", "local-queue-held",
                             "not-selected", "default-not-selected"});
  // Selecting team=web too lets not-selected through to its flavor, where it fits.
  auto c = load("kueue-queues");
  auto& sel = c.cluster_queues.at(0).namespace_selector;
  ASSERT_TRUE(sel.has_value());
  sel = label_selector{{}, {{"team", "In", {"ml", "web"}}}};
  for (auto& w : c.workloads) w.conditions.clear();
  std::erase_if(c.workloads, [](const workload& w) { return w.name != "not-selected"; });
  EXPECT_TRUE(diagnose_pending(c, "team-web", "not-selected").kueue.admissible);
}

TEST(KueueRecorded, PartialAdmission) {
  expect_recorded_decisions("kueue-mincount",
                            {"partial-zone", "min-too-high", "fits-whole", "partial-rest"});
  // Without its minCount the first Workload stays Pending: no zone holds 5.
  auto c = load("kueue-mincount");
  std::erase_if(c.workloads, [](const workload& w) { return w.name != "partial-zone"; });
  c.workloads[0].conditions.clear();
  c.workloads[0].assignments.clear();
  c.workloads[0].admitted_cluster_queue.clear();
  c.workloads[0].podsets[0].min_count.reset();
  const auto k = diagnose_pending(c, "default", "partial-zone").kueue;
  EXPECT_FALSE(k.admissible);
  EXPECT_NE(k.message.find("allows to fit only 4 out of 5 pod(s)"), std::string::npos) << k.message;
}

TEST(KueueRecorded, Slices) {
  expect_recorded_decisions("kueue-slices",
                            {"host-slices-of-three", "three-pods-no-slices", "host-slice-of-two",
                             "zone-slices-only-short", "zone-slices-only"});
  // Without its slices the first Workload fits one zone.
  auto c = load("kueue-slices");
  std::erase_if(c.workloads, [](const workload& w) { return w.name != "host-slices-of-three"; });
  c.workloads[0].conditions.clear();
  c.workloads[0].podsets[0].slice_level.clear();
  c.workloads[0].podsets[0].slice_size.reset();
  EXPECT_TRUE(diagnose_pending(c, "default", "host-slices-of-three").kueue.admissible);
}

TEST(KueueRecorded, RequiredNodeAffinity) {
  expect_recorded_decisions("kueue-affinity", {"flavor-refused", "zone-b-not-b1", "gpus-gt-4",
                                               "few-or-no-gpus", "gpus-not-b1"});
}

// node-affinity-invalid.json: affinities that do not parse (Gt not an integer, In without
// values, empty or absent, an unknown operator, matchFields of two values, on a flavor's label
// key), Pending in Kueue's words; a valid Gt admitted.
TEST(KueueRecorded, InvalidRequiredNodeAffinity) {
  expect_recorded_decisions(
      "kueue-affinity-invalid",
      {"gt-not-integer", "in-no-values", "in-values-absent", "two-errors", "valid-term-too",
       "profile-key-gt", "profile-key-and-valid", "bad-operator", "gt-valid", "fields-two-values"});
}

// resource-groups.json: cpu, memory and pods in the profile's flavor, nvidia.com/gpu in a
// second group (gpu-plain without a Topology, then gpu-tas): Kueue's messages word for word,
// and w-gpu admitted without a topology assignment, as diagnose says (Kueue's known bug).
TEST(KueueRecorded, SeveralResourceGroups) {
  expect_recorded_decisions("kueue-resource-groups", {"w-cpu", "w-gpu", "w-gpu-big", "w-gpu-two"});
  auto c = load("kueue-resource-groups");
  std::erase_if(c.workloads, [](const workload& w) { return w.name != "w-gpu"; });
  ASSERT_EQ(c.workloads.size(), 1u);
  ASSERT_EQ(c.workloads[0].assignments.size(), 1u);
  EXPECT_TRUE(c.workloads[0].assignments[0].topology_domains.empty());  // as Kueue admitted it
  c.workloads[0].conditions.clear();
  c.workloads[0].assignments.clear();
  const auto k = diagnose_pending(c, "default", "w-gpu").kueue;
  EXPECT_TRUE(k.admissible);
  EXPECT_EQ(k.podsets[0].detail, "no topology assignment");
  EXPECT_TRUE(has_note(k, "more than one TAS flavor (gpu-tas, gpustack-"));
}

// The TAS lab's cohort-borrowing: above gpustack's 6 + 3 borrowed, borrowing 2 of the 3 the
// lender lends, the lender short of its own kept quota, gpustack's borrowing used up.
TEST(KueueRecorded, CohortBorrowing) {
  expect_recorded_decisions(
      "kueue-cohort", {"w-beyond", "w-borrow", "w-lender-short", "w-lender", "w-borrow-used"});
  // Outside the cohort, gpustack cannot borrow: w-borrow's 8 CPUs exceed its 6.
  auto c = load("kueue-cohort");
  std::erase_if(c.workloads, [](const workload& w) { return w.name != "w-borrow"; });
  c.workloads[0].conditions.clear();
  c.workloads[0].assignments.clear();
  c.workloads[0].admitted_cluster_queue.clear();
  for (auto& q : c.cluster_queues) q.cohort.clear();
  EXPECT_NE(decide(c, "w-borrow").message.find("> maximum capacity (6)"), std::string::npos);
}

// The TAS lab's preemption-lower-priority: no candidate below priority 5; at priority 100,
// low-a (the lowest priority) alone is preempted.
TEST(KueueRecorded, PreemptionLowerPriority) {
  expect_recorded_decisions("kueue-preemption",
                            {"low-a", "low-b", "high", "w-lowest", "w-preempts"});
  auto c = load("kueue-preemption");
  EXPECT_EQ(diagnose_pending(c, "default", "w-preempts").kueue.preempts,
            std::vector<std::string>{"default/low-a"});
  // With the policy Never, Kueue would not preempt: the plain message.
  c.cluster_queues[0].within_cluster_queue = "Never";
  const auto k = diagnose_pending(c, "default", "w-preempts").kueue;
  EXPECT_TRUE(k.preempts.empty());
  EXPECT_EQ(k.message.find("Pending the preemption"), std::string::npos) << k.message;
}

// Workload NAME of fixture DIR alone, its decision cleared: to be decided again.
cluster_objects undecided(const std::string& dir, const std::string& name) {
  auto c = load(dir);
  std::erase_if(c.workloads, [&](const workload& w) { return w.name != name; });
  c.workloads.at(0).conditions.clear();
  c.workloads[0].assignments.clear();
  c.workloads[0].admitted_cluster_queue.clear();
  return c;
}

// The TAS lab's node-facts: a Node without a Ready condition is left out, an over-committed
// one subtracts from its zone, one without pods allocatable holds none.
TEST(KueueRecorded, NodeFacts) {
  expect_recorded_decisions("kueue-node-facts", {"w-three", "w-two"});
  // Without the over-commitment on n-a1 the zone holds the three Pods.
  auto c = undecided("kueue-node-facts", "w-three");
  std::erase_if(c.pods, [](const k8s_pod& p) { return p.node_name == "n-a1"; });
  EXPECT_TRUE(decide(c, "w-three").admissible);
}

// The TAS lab's flavor-prefer-no-schedule-and-tolerations: the flavor's PreferNoSchedule
// nodeTaint is ignored and its tolerations cover the Nodes' gpu taint.
TEST(KueueRecorded, FlavorTolerationsAndPreferNoSchedule) {
  expect_recorded_decisions("kueue-flavor-tolerations", {"w"});
  auto c = undecided("kueue-flavor-tolerations", "w");
  ASSERT_EQ(c.flavors.size(), 1u);
  auto flavor = c.flavors[0];
  c.flavors[0].tolerations.clear();  // the PodSet tolerates nothing itself
  auto k = decide(c, "w");
  EXPECT_FALSE(k.admissible);
  EXPECT_NE(k.message.find("excluded: taint \"gpu=true:NoSchedule\": 4"), std::string::npos)
      << k.message;
  c.flavors[0] = flavor;
  ASSERT_EQ(c.flavors[0].node_taints.size(), 1u);
  c.flavors[0].node_taints[0].effect = "NoSchedule";  // now it counts
  k = decide(c, "w");
  EXPECT_FALSE(k.admissible);
  EXPECT_NE(k.message.find("untolerated taint"), std::string::npos) << k.message;
}

// The TAS lab's total-nodes-excluded: Kueue's "Total nodes: N; excluded: ..." by first cause.
TEST(KueueRecorded, TotalNodesExcluded) {
  expect_recorded_decisions("kueue-total-nodes", {"w-excluded", "w-one"});
  auto c = undecided("kueue-total-nodes", "w-excluded");
  for (auto& n : c.nodes)
    if (n.name == "n-a1") n.taints.clear();
  EXPECT_TRUE(decide(c, "w-excluded").admissible);
}

// The TAS lab's gpu-usage-tolerations: GPU usage (an extended resource) on a tainted pool,
// PodSets with and without the toleration.
TEST(KueueRecorded, GpuUsageAndTolerations) {
  expect_recorded_decisions("kueue-gpu-usage",
                            {"w-untolerating", "w-tolerating", "w-tolerating-one"});
  // Without n-a1's 6 GPUs of usage, the last Workload's 2 x 2 GPUs fit there.
  auto c = load("kueue-gpu-usage");
  for (auto& w : c.workloads)
    if (w.name == "w-tolerating-one") w.conditions.clear();
  std::erase_if(c.pods, [](const k8s_pod& p) { return p.node_name == "n-a1"; });
  EXPECT_TRUE(decide(c, "w-tolerating-one").admissible);
}

// The TAS lab's request-limits-pod-level: limits for missing requests, Pod-level requests.
TEST(KueueRecorded, LimitsAndPodLevelRequests) {
  expect_recorded_decisions("kueue-requests-pod-level", {"limits-only", "pod-level-above",
                                                         "limits-with-request", "pod-level-small"});
  // limits-only with a 2-CPU limit requests 2: a zone of two 4-CPU Nodes holds all three.
  auto c = undecided("kueue-requests-pod-level", "limits-only");
  auto& ps = c.workloads.at(0).podsets.at(0);
  ASSERT_EQ(ps.resources.containers.size(), 1u);
  ps.resources.containers[0].limits["cpu"] = 2000;
  ps.requests = kueue_requests(c, "default", ps.resources, nullptr);
  EXPECT_EQ(ps.requests["cpu"], 2000);
  EXPECT_TRUE(decide(c, "limits-only").admissible);
}

// The TAS lab's pods-known-bug: Kueue admits PodSet b on Nodes whose one `pods` PodSet a
// took; decided again before admission, diagnose admits it too and names the bug.
TEST(KueueRecorded, PodsOfEarlierPodSetsKnownBug) {
  expect_recorded_decisions("kueue-pods-bug", {"w"});
  auto c = undecided("kueue-pods-bug", "w");
  auto k = decide(c, "w");
  EXPECT_TRUE(k.admissible);
  ASSERT_EQ(k.notes.size(), 1u);
  EXPECT_NE(k.notes[0].find("Kueue v0.17.0 known bug"), std::string::npos) << k.notes[0];
  for (auto& n : c.nodes) n.allocatable["pods"] = 2;  // room for a and b: no bug to name
  k = decide(c, "w");
  EXPECT_TRUE(k.admissible);
  EXPECT_TRUE(k.notes.empty());
}

// A Node named like the region: diagnose answers as the Topology says and names Kueue's bug;
// renamed, the note is gone.
TEST(KueueFixture, HostnameEqualToTheRegion) {
  auto c = load("kueue-hostname");
  const std::string bug = "Kueue v0.17.0 known bug: in flavor gpustack-";
  auto r = diagnose_pending(c, "default", "zone-trio");
  EXPECT_FALSE(r.kueue.admissible);
  EXPECT_NE(r.conclusion.find(bug), std::string::npos) << r.conclusion;
  EXPECT_NE(r.conclusion.find("Node(s) region-1 equals a topology.kubernetes.io/region value"),
            std::string::npos);
  for (auto& n : c.nodes)
    if (n.name == "region-1")
      for (auto& [k, v] : n.labels)
        if (k == host) v = n.name = "worker-a1";
  r = diagnose_pending(c, "default", "zone-trio");
  EXPECT_EQ(r.conclusion.find(bug), std::string::npos) << r.conclusion;
}

// The Workload NAME alone on C, undecided (as it was before Kueue's decision).
cluster_objects undecided(cluster_objects c, const std::string& name) {
  std::erase_if(c.workloads, [&](const workload& w) { return w.name != name; });
  for (auto& w : c.workloads) {
    w.conditions.clear();
    w.assignments.clear();
    w.admitted_cluster_queue.clear();
  }
  return c;
}

void set_label(k8s_node& n, const std::string& key, const std::string& value) {
  auto it = std::find_if(n.labels.begin(), n.labels.end(),
                         [&](const auto& kv) { return kv.first >= key; });
  if (it != n.labels.end() && it->first == key)
    it->second = value;
  else
    n.labels.insert(it, {key, value});
}

k8s_node& node_named(cluster_objects& c, const std::string& name) {
  auto it = std::find_if(c.nodes.begin(), c.nodes.end(),
                         [&](const k8s_node& n) { return n.name == name; });
  if (it == c.nodes.end()) throw std::runtime_error("no Node " + name);
  return *it;
}

// flavor-missing-level.json: the lab's flavor pool selects n-a1, n-a2 (zone-a) and n-h1, n-h2
// (no zone label) under the zone profile's Topology; Kueue v0.17.0 leaves n-h1 and n-h2 out of
// the flavor, so three Pods of 3 CPUs do not fit, two in one zone do.
TEST(KueueRecorded, NodeMissingALevelLabel) {
  expect_recorded_decisions("kueue-missing-level", {"w-needs-unlabelled", "w-zone-pair"});
  const auto all = load("kueue-missing-level");
  const auto k = decide(undecided(all, "w-needs-unlabelled"), "w-needs-unlabelled");
  EXPECT_FALSE(k.admissible);
  EXPECT_NE(k.message.find("allows to fit only 2 out of 3 pod(s)"), std::string::npos) << k.message;
  // With the zone label, even an empty value (a domain of its own), the two Nodes count.
  for (const std::string value : {"zone-h", ""}) {
    auto c = undecided(all, "w-needs-unlabelled");
    set_label(node_named(c, "n-h1"), "topology.kubernetes.io/zone", value);
    EXPECT_TRUE(decide(c, "w-needs-unlabelled").admissible) << "zone=" << value;
  }
}

// level-label-empty.json: the flavor blocks, its own Topology [example.com/block, hostname]:
// n-2's empty block label is a domain, n-3 without one is left out of the flavor.
TEST(KueueRecorded, EmptyLevelValueIsADomain) {
  expect_recorded_decisions("kueue-level-empty", {"w-three", "w-pair-one-block", "w-pair"});
  const auto all = load("kueue-level-empty");
  {
    auto c = undecided(all, "w-pair");
    auto& n2 = node_named(c, "n-2");
    std::erase_if(n2.labels, [](const auto& kv) { return kv.first == "example.com/block"; });
    const auto k = decide(c, "w-pair");
    EXPECT_FALSE(k.admissible);
    EXPECT_NE(k.message.find("allows to fit only 1 out of 2 pod(s)"), std::string::npos)
        << k.message;
  }
  {
    auto c = undecided(all, "w-three");
    set_label(node_named(c, "n-3"), "example.com/block", "");
    EXPECT_TRUE(decide(c, "w-three").admissible);
  }
}

// topology-without-hostname.json: the flavor zones has a Topology of its own, [zone] only:
// Kueue v0.17.0 admits two Pods of 3 CPUs in zone-a although n-a1 is tainted, and two Pods
// with a nodeSelector no Node matches; with kubernetes.io/hostname last it would not. w-after
// is Pending in zone-a's usage.
TEST(KueueRecorded, TopologyWithoutHostname) {
  expect_recorded_decisions("kueue-no-hostname",
                            {"w-zone-trio", "w-tainted-pair", "w-selector-pair", "w-after"});
  // Kueue keeps the reservations of such a Topology per zone: w-after (3 x 1.5 CPUs) does not
  // fit zone-a after w-tainted-pair's 6 CPUs and w-selector-pair's 1; without them it does.
  auto c = load("kueue-no-hostname");
  {
    auto free = c;
    std::erase_if(free.workloads, [](const workload& w) {
      return w.name == "w-tainted-pair" || w.name == "w-selector-pair";
    });
    for (auto& w : free.workloads)
      if (w.name == "w-after") w.conditions.clear();
    const auto k = decide(free, "w-after");
    EXPECT_TRUE(k.admissible) << k.message;
  }
  auto topo = std::find_if(c.topologies.begin(), c.topologies.end(),
                           [](const kueue_topology& t) { return t.name == "zones"; });
  ASSERT_NE(topo, c.topologies.end());
  ASSERT_EQ(topo->levels, std::vector<std::string>{"topology.kubernetes.io/zone"});
  topo->levels.push_back("kubernetes.io/hostname");
  for (const std::string name : {"w-tainted-pair", "w-selector-pair"}) {
    const auto k = decide(undecided(c, name), name);
    EXPECT_FALSE(k.admissible) << name;
    EXPECT_NE(k.message.find("couldn't assign flavors to pod set main: topology \"zones\""),
              std::string::npos)
        << name << ": " << k.message;
  }
}

// usage-per-flavor.json: the flavors first (6 CPUs of quota) and the profile's, over the same
// two Nodes, a Pod outside Kueue taking 1 CPU of n-a1. w-first's usage counts in first only;
// the other Pod counts in both.
TEST(KueueRecorded, TasUsagePerFlavor) {
  expect_recorded_decisions("kueue-usage-per-flavor", {"w-first", "w-big", "w-second"});
  const auto all = load("kueue-usage-per-flavor");
  // Without the Pod outside Kueue, w-big fits the profile's flavor.
  {
    auto c = all;
    ASSERT_EQ(c.pods.size(), 1u);
    c.pods.clear();
    std::erase_if(c.workloads, [](const workload& w) { return w.name == "w-second"; });
    auto& w = *std::find_if(c.workloads.begin(), c.workloads.end(),
                            [](const workload& x) { return x.name == "w-big"; });
    w.conditions.clear();
    EXPECT_TRUE(decide(c, "w-big").admissible);
  }
  // Had w-first been placed in the profile's flavor (first without quota), w-second would not
  // fit there: n-a1 has 0 CPUs left, n-a2 1, for Pods of 3.
  {
    auto c = all;
    std::erase_if(c.workloads, [](const workload& w) { return w.name == "w-big"; });
    for (auto& w : c.workloads)
      if (w.name == "w-first")
        for (auto& a : w.assignments)
          for (auto& [r, f] : a.flavors) f = "gpustack-fnv64-f7b1861ac0399767";
    for (auto& f : c.cluster_queues.at(0).flavors)
      for (auto& [r, v] : f.nominal) v = f.name == "first" ? 0 : 2 * v;  // room for both
    auto& w = *std::find_if(c.workloads.begin(), c.workloads.end(),
                            [](const workload& x) { return x.name == "w-second"; });
    w.conditions.clear();
    w.assignments.clear();
    w.admitted_cluster_queue.clear();
    const auto k = decide(c, "w-second");
    EXPECT_FALSE(k.admissible);
    EXPECT_NE(k.message.find("doesn't allow to fit any of 2 pod(s)"), std::string::npos)
        << k.message;
  }
}

}  // namespace
}  // namespace topogate::diagnose

// "Verify the scheduling chain" and "Diagnose Pending workloads" on the runbook's own
// scenarios (test/fixtures/diagnose/, objects as `kubectl get ... -o json` prints them),
// Kubernetes quantities, and the object decoder (v1beta1 and v1beta2 Workloads).
#include "diagnose/diagnose.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "diagnose/cluster_objects.hpp"
#include "diagnose/quantity.hpp"
#include "test/diagnose/fixtures.hpp"

namespace topogate::diagnose {
namespace {

namespace fs = std::filesystem;
using namespace core;

constexpr const char* zone = "topology.kubernetes.io/zone";
constexpr const char* zone_profile = "fnv64-570aeab478df5111";  // region, zone, hostname
using testing::add_file;
using testing::fixtures;
using testing::load;
using testing::step;

std::vector<std::string> checks(const chain_report& r) {
  std::vector<std::string> out;
  for (const auto& f : r.findings) out.push_back(f.check + " " + f.object + " " + f.field);
  std::sort(out.begin(), out.end());
  return out;
}

// ---------------------------------------------------------------- quantities

struct quantity_case {
  const char* text;
  bool ok;
  std::int64_t milli, value;
};

// Every row was checked against apimachinery's resource.ParseQuantity, MilliValue() and
// Value() (v0.31): identical, except where the amount exceeds int64, where Go's
// MilliValue()/Value() wrap around and topogate saturates at INT64_MAX instead ("1E",
// "7Ei", "8Ei", "922337203685477580" milli, "9223372036854775807" milli and beyond).
TEST(Quantity, ParseQuantityGrammarAndRounding) {
  constexpr std::int64_t max = std::numeric_limits<std::int64_t>::max();
  const quantity_case cases[] = {
      {"0", true, 0, 0},
      {"1", true, 1000, 1},
      {"500m", true, 500, 1},  // Value() rounds up
      {"1m", true, 1, 1},
      {"0.5", true, 500, 1},
      {"1.5", true, 1500, 2},
      {"0.0001", true, 1, 1},  // MilliValue() rounds up too: a request never becomes 0
      {"1n", true, 1, 1},
      {"1u", true, 1, 1},
      {"1000u", true, 1, 1},
      {"1001u", true, 2, 1},
      {"1k", true, 1000000, 1000},
      {"1Ki", true, 1024000, 1024},
      {"1Mi", true, 1048576000, 1048576},
      {"1Gi", true, 1073741824000, 1073741824},
      {"1.5Gi", true, 1610612736000, 1610612736},
      {"1G", true, 1000000000000, 1000000000},
      {"1e3", true, 1000000, 1000},
      {"1E3", true, 1000000, 1000},
      {"1e+3", true, 1000000, 1000},
      {"1e-3", true, 1, 1},
      {"1E", true, max, 1000000000000000000},  // exa; milli saturates
      {"8Ei", true, max, max},                 // 2^63: saturated
      {"7Ei", true, max, 8070450532247928832},
      {"+1", true, 1000, 1},
      {"00012", true, 12000, 12},
      {".5", true, 500, 1},
      {"1.", true, 1000, 1},
      {"1.G", true, 1000000000000, 1000000000},  // tolerated by ParseQuantity
      {"-", true, 0, 0},                         // a bare sign is zero there too
      {"9223372036854775807", true, max, max},
      {"9223372036854775808", true, max, max},
      {"922337203685477580", true, max, 922337203685477580},
      {"9223372036854775.807", true, max, 9223372036854776},
      {"", false, 0, 0},
      {" 1", false, 0, 0},
      {"1 ", false, 0, 0},
      {"1Kb", false, 0, 0},
      {"1ki", false, 0, 0},
      {"1K", false, 0, 0},
      {"1e", false, 0, 0},
      {"1e3.5", false, 0, 0},
      {"1ee3", false, 0, 0},
      {"1m5", false, 0, 0},
      {"abc", false, 0, 0},
      {"1..5", false, 0, 0},
      {"--1", false, 0, 0},
      {"1e9223372036854775808", false, 0, 0},  // exponent overflows int64
      {"1e4294967296", true, 1000, 1},         // ...but only int32 of it is kept: 1e0
      {"1e-9", true, 1, 1},
      {"1.5e3", true, 1500000, 1500},
      {"+.5", true, 500, 1},
      {"-0", true, 0, 0},
      {"1.0Mi", true, 1048576000, 1048576},
      {"0.1Ki", true, 102400, 103},
      {"1e01", true, 10000, 10},
      {"1E-1", true, 100, 1},
      {"1Ti", true, 1099511627776000, 1099511627776},
      {"1P", true, 1000000000000000000, 1000000000000000},
      {"0.0000000001", true, 1, 1},
      {"123456789012345678901234567890e-27", true, 123457, 124},
      {"1e2m", false, 0, 0},
      {"1e+", false, 0, 0},
      {"1e-", false, 0, 0},
      {"1i", false, 0, 0},
      {"1Eie", false, 0, 0},
      {"0x10", false, 0, 0},
      {"1_000", false, 0, 0},
      {"1.5.5", false, 0, 0},
      {"1e-3m", false, 0, 0},
  };
  for (const auto& c : cases) {
    const auto q = parse_quantity(c.text);
    ASSERT_EQ(q.has_value(), c.ok) << '"' << c.text << '"';
    if (!q) continue;
    EXPECT_EQ(q->milli, c.milli) << c.text;
    EXPECT_EQ(q->value, c.value) << c.text;
  }
  const auto neg = parse_quantity("-1500m");
  ASSERT_TRUE(neg);
  EXPECT_TRUE(neg->negative);
  EXPECT_EQ(neg->signed_milli(), -1500);
  EXPECT_EQ(neg->signed_value(), -2);
}

TEST(Quantity, UnitPerResource) {
  EXPECT_EQ(amount_of("cpu", *parse_quantity("250m")), 250);
  EXPECT_EQ(amount_of("memory", *parse_quantity("250m")), 1);
  EXPECT_EQ(amount_of("nvidia.com/gpu", *parse_quantity("2")), 2);
  EXPECT_EQ(format_amount("cpu", 1500), "1500m");
  EXPECT_EQ(format_amount("cpu", 2000), "2");
  EXPECT_EQ(format_amount("memory", 8ll << 30), "8Gi");
  EXPECT_EQ(format_amount("memory", 1536ll << 20), "1536Mi");
  EXPECT_EQ(format_amount("memory", 1000), "1000");
}

// ---------------------------------------------------------------- decoding

TEST(ClusterObjects, PodRequestsFollowTheSchedulerFormula) {
  const char* pod = R"({"kind":"Pod","apiVersion":"v1","metadata":{"name":"p","namespace":"d"},
    "spec":{"nodeName":"n",
      "initContainers":[
        {"name":"sidecar","restartPolicy":"Always","resources":{"requests":{"cpu":"200m"}}},
        {"name":"init","resources":{"requests":{"cpu":"3","memory":"1Gi"}}}],
      "containers":[
        {"name":"a","resources":{"requests":{"cpu":"500m","memory":"2Gi","nvidia.com/gpu":"1"}}},
        {"name":"b","resources":{"requests":{"cpu":"250m"}}}],
      "overhead":{"cpu":"100m"}},
    "status":{"phase":"Running"}})";
  cluster_objects c;
  EXPECT_TRUE(add_objects(c, pod, "pod.json").empty());
  ASSERT_EQ(c.pods.size(), 1u);
  const auto& r = c.pods[0].requests;
  // cpu: max(0.5+0.25+0.2 sidecar, 0.2 sidecar + 3 init) + 0.1 overhead
  EXPECT_EQ(r.at("cpu"), 3300);
  EXPECT_EQ(r.at("memory"), 2ll << 30);  // max(2Gi, 1Gi)
  EXPECT_EQ(r.at("nvidia.com/gpu"), 1);
}

TEST(ClusterObjects, BadQuantityIsAFieldErrorNotACrash) {
  const char* nodes = R"({"kind":"NodeList","apiVersion":"v1","items":[
    {"metadata":{"name":"n1"},"status":{"allocatable":{"cpu":"2 cores","memory":"1Gi","nvidia.com/gpu":4}}}]})";
  cluster_objects c;
  const auto errors = add_objects(c, nodes, "nodes.json");
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].type, error_type::invalid);
  EXPECT_EQ(errors[0].path, "nodes.json: items[0].status.allocatable[cpu]");
  ASSERT_EQ(c.nodes.size(), 1u);  // the typed list's items take its kind
  EXPECT_EQ(c.nodes[0].allocatable.count("cpu"), 0u);
  EXPECT_EQ(c.nodes[0].allocatable.at("nvidia.com/gpu"), 4);  // a JSON number is a quantity too
}

TEST(ClusterObjects, UndecodableInputIsAnError) {
  cluster_objects c;
  EXPECT_FALSE(add_objects(c, "{\"kind\": ", "x.json").empty());
  EXPECT_FALSE(add_objects(c, "[1, 2]", "x.json").empty());
}

TEST(ClusterObjects, UnknownKindsAreSkippedNotRead) {
  cluster_objects c;
  const char* list = R"({"kind":"List","apiVersion":"v1","items":[
    {"kind":"Secret","apiVersion":"v1","metadata":{"name":"x"}},
    {"kind":"Topology","apiVersion":"example.com/v1","metadata":{"name":"not-kueue"}},
    {"kind":"Topology","apiVersion":"kueue.x-k8s.io/v1beta1","metadata":{"name":"t"},
     "spec":{"levels":[{"nodeLabel":"a"},{"nodeLabel":"kubernetes.io/hostname"}]}}]})";
  EXPECT_TRUE(add_objects(c, list, "l.json").empty());
  EXPECT_EQ(c.skipped, 2u);
  ASSERT_EQ(c.topologies.size(), 1u);
  EXPECT_EQ(c.topologies[0].levels, (std::vector<std::string>{"a", "kubernetes.io/hostname"}));
}

TEST(ClusterObjects, TopologyAssignmentV1beta1AndV1beta2Slices) {
  const char* v1 =
      R"({"kind":"Workload","apiVersion":"kueue.x-k8s.io/v1beta1","metadata":{"name":"a","namespace":"d"},
    "spec":{"podSets":[{"name":"main","count":3}]},
    "status":{"admission":{"clusterQueue":"q","podSetAssignments":[{"name":"main","count":3,
      "topologyAssignment":{"levels":["z","kubernetes.io/hostname"],
        "domains":[{"values":["z1","n1"],"count":2},{"values":["z1","n2"],"count":1}]}}]}}})";
  const char* v2 =
      R"({"kind":"Workload","apiVersion":"kueue.x-k8s.io/v1beta2","metadata":{"name":"b","namespace":"d"},
    "spec":{"podSets":[{"name":"main","count":5}]},
    "status":{"admission":{"clusterQueue":"q","podSetAssignments":[{"name":"main","count":5,
      "topologyAssignment":{"levels":["z","kubernetes.io/hostname"],"slices":[
        {"domainCount":2,"podCounts":{"individual":[2,1]},
         "valuesPerLevel":[{"universal":"z1"},{"individual":{"prefix":"node-","roots":["1","2"]}}]},
        {"domainCount":1,"podCounts":{"universal":2},
         "valuesPerLevel":[{"universal":"z2"},{"individual":{"roots":["n9"],"suffix":"-x"}}]}]}}]}}})";
  cluster_objects c;
  EXPECT_TRUE(add_objects(c, v1, "a").empty());
  EXPECT_TRUE(add_objects(c, v2, "b").empty());
  ASSERT_EQ(c.workloads.size(), 2u);
  const auto& a = c.workloads[0].assignments.at(0);
  ASSERT_EQ(a.topology_domains.size(), 2u);
  EXPECT_EQ(a.topology_domains[0].values, (std::vector<std::string>{"z1", "n1"}));
  EXPECT_EQ(a.topology_domains[1].count, 1);
  const auto& b = c.workloads[1].assignments.at(0);
  ASSERT_EQ(b.topology_domains.size(), 3u);
  EXPECT_EQ(b.topology_domains[0].values, (std::vector<std::string>{"z1", "node-1"}));
  EXPECT_EQ(b.topology_domains[0].count, 2);
  EXPECT_EQ(b.topology_domains[1].values, (std::vector<std::string>{"z1", "node-2"}));
  EXPECT_EQ(b.topology_domains[1].count, 1);
  EXPECT_EQ(b.topology_domains[2].values, (std::vector<std::string>{"z2", "n9-x"}));
  EXPECT_EQ(b.topology_domains[2].count, 2);
}

// The slices of one assignment expand to at most 100000 domains in all, each with at most 16
// level values (a Topology's most): two slices of 50000 are read whole, two of 60000 stop at
// 100000; 17 levels give 16 values.
TEST(ClusterObjects, TopologyAssignmentSlicesBounded) {
  const auto domains = [](std::int64_t per_slice, int levels) {
    std::string values;
    for (int l = 0; l < levels; ++l) values += std::string(l ? "," : "") + R"({"universal":"v"})";
    const std::string slice = R"({"domainCount":)" + std::to_string(per_slice) +
                              R"(,"podCounts":{"universal":1},"valuesPerLevel":[)" + values + "]}";
    cluster_objects c;
    EXPECT_TRUE(add_objects(c,
                            R"({"kind":"Workload","apiVersion":"kueue.x-k8s.io/v1beta2",
      "metadata":{"name":"b","namespace":"d"},"spec":{"podSets":[{"name":"main","count":1}]},
      "status":{"admission":{"clusterQueue":"q","podSetAssignments":[{"name":"main","count":1,
        "topologyAssignment":{"levels":["z"],"slices":[)" +
                                slice + "," + slice + "]}}]}}}",
                            "b")
                    .empty());
    return c.workloads.at(0).assignments.at(0).topology_domains;
  };
  auto d = domains(50000, 1);
  EXPECT_EQ(d.size(), 100000u);
  EXPECT_EQ(d.back().values, std::vector<std::string>{"v"});
  EXPECT_EQ(domains(60000, 1).size(), 100000u);
  d = domains(1, 16);
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[0].values.size(), 16u);
  EXPECT_EQ(domains(1, 17)[1].values.size(), 16u);
}

TEST(PodsThatFit, EveryRequestedResourceAndThePodCount) {
  EXPECT_EQ(
      pods_that_fit({{"cpu", 4000}, {"memory", 8}, {"pods", 110}}, {{"cpu", 1500}, {"memory", 2}}),
      2);
  EXPECT_EQ(
      pods_that_fit({{"cpu", 4000}, {"memory", 3}, {"pods", 110}}, {{"cpu", 1500}, {"memory", 2}}),
      1);
  // An extended resource the Node does not have: nothing fits.
  EXPECT_EQ(pods_that_fit({{"cpu", 4000}, {"pods", 110}}, {{"cpu", 1000}, {"nvidia.com/gpu", 1}}),
            0);
  EXPECT_EQ(pods_that_fit({{"cpu", 4000}, {"pods", 1}}, {{"cpu", 1000}}), 1);
  // Kueue counts one `pods` per Pod: no `pods` in allocatable, no Pod.
  EXPECT_EQ(pods_that_fit({{"cpu", 4000}}, {{"cpu", 1000}}), 0);
  EXPECT_EQ(pods_that_fit({{"pods", 9}}, {}), 9);  // requests nothing: the Pod count limits
  // Over-committed: a negative count (toward zero), which Kueue sums into the domain.
  EXPECT_EQ(pods_that_fit({{"cpu", -2500}, {"pods", 110}}, {{"cpu", 1000}}), -2);
  EXPECT_EQ(pods_that_fit({{"cpu", -500}, {"pods", 110}}, {{"cpu", 1000}}), 0);
}

// ---------------------------------------------------------------- the chain

TEST(Chain, RunbookClusterIsComplete) {
  const auto c = load("two-zones");
  const auto r = check_chain(c);
  EXPECT_TRUE(r.clean()) << render_chain_text(r);
  EXPECT_EQ(r.managed_nodes, 4u);
  EXPECT_EQ(r.flavors, 1u);
  EXPECT_EQ(r.topologies, 1u);
  EXPECT_EQ(r.queues, 1u);
  EXPECT_EQ(r.requests, 1u);
}

TEST(Chain, BrokenFlavorTopologyQueueAndRequest) {
  const auto c = load("broken-chain");
  const auto r = check_chain(c);
  const std::string pz = zone_profile;
  const std::string pr = "fnv64-8660349c2a183dfd";  // region, hostname
  EXPECT_EQ(
      checks(r),
      (std::vector<std::string>{
          "flavor-topology ResourceFlavor/gpustack-" + pr + " spec.topologyName",
          "flavor-topology-profile ResourceFlavor/gpustack-" + pz + " spec.topologyName",
          "node-profile Node/worker-a2 metadata.labels[topology.gpustack.ai/profile]",
          "node-profile-derivation Node/worker-b1 metadata.labels[topology.gpustack.ai/profile]",
          "queue-flavor ClusterQueue/gpustack "
          "spec.resourceGroups[0].flavors[gpustack-fnv64-0000000000000000]",
          "queue-topology-ready ClusterQueue/gpustack status.conditions[TopologyReady]",
          "requested-level ModelDeployment/default/llm spec.roles[1].topology.requiredLevel",
          "topology-hostname Topology/gpustack-" + pz + " spec.levels[1].nodeLabel",
      }))
      << render_chain_text(r);
  for (const auto& f : r.findings) {
    if (f.check == "requested-level") {
      EXPECT_EQ(f.step, step_request_level);
    } else {
      EXPECT_EQ(f.step, step_verify_chain);
    }
  }
}

TEST(Chain, EachCheckBothSides) {
  auto base = load("two-zones");
  ASSERT_TRUE(check_chain(base).clean());

  {  // a Node without its profile, then the profile restored
    auto c = base;
    auto& labels = c.nodes[0].labels;
    labels.erase(std::find_if(labels.begin(), labels.end(),
                              [](auto& l) { return l.first == profile_label; }));
    EXPECT_EQ(checks(check_chain(c)).size(), 1u);
  }
  {  // a Node the source does not select is not managed: no finding without a profile
    auto c = base;
    auto& labels = c.nodes[0].labels;
    labels.erase(std::find_if(labels.begin(), labels.end(),
                              [](auto& l) { return l.first == "node-role.kubernetes.io/worker"; }));
    labels.erase(std::find_if(labels.begin(), labels.end(),
                              [](auto& l) { return l.first == profile_label; }));
    const auto r = check_chain(c);
    EXPECT_TRUE(r.clean()) << render_chain_text(r);
    EXPECT_EQ(r.managed_nodes, 3u);
  }
  {  // a Topology ending in hostname passes, one ending elsewhere fails
    auto c = base;
    c.topologies[0].levels.push_back("x/rack");
    const auto found = checks(check_chain(c));
    EXPECT_NE(std::find(found.begin(), found.end(),
                        "topology-hostname Topology/gpustack-" + std::string(zone_profile) +
                            " spec.levels[3].nodeLabel"),
              found.end());
  }
  {  // TopologyReady: True passes (above); missing and False fail
    auto c = base;
    c.cluster_queues[0].conditions.clear();
    EXPECT_EQ(check_chain(c).findings.at(0).check, "queue-topology-ready");
    c.cluster_queues[0].conditions.push_back({"TopologyReady", "False", "Migrating", "x"});
    EXPECT_EQ(check_chain(c).findings.at(0).check, "queue-topology-ready");
  }
  {  // without sources, Nodes carrying a profile are the managed ones; one whose profile no
     // flavor pins has its capacity in no flavor
    auto c = base;
    c.sources.clear();
    EXPECT_TRUE(check_chain(c).clean());
    for (auto& l : c.nodes[0].labels)
      if (l.first == profile_label) l.second = "fnv64-0000000000000000";
    const auto r = check_chain(c);
    ASSERT_EQ(r.findings.size(), 1u) << render_chain_text(r);
    EXPECT_EQ(r.findings[0].check, "node-flavor");
    EXPECT_EQ(r.findings[0].object, "Node/worker-a1");
  }
  {  // a source that is not Ready
    auto c = base;
    c.sources[0].conditions[0].status = "False";
    EXPECT_EQ(check_chain(c).findings.at(0).check, "source-ready");
  }
  {  // 64 flavors in a group pass, 65 fail (Kueue's limit)
    auto c = base;
    for (int i = 1; i < 64; ++i) {
      c.flavors.push_back(c.flavors[0]);
      c.flavors.back().name = "f" + std::to_string(i);
      c.cluster_queues[0].flavors.push_back({0, "f" + std::to_string(i), {"cpu"}, {}, {}, {}});
    }
    EXPECT_TRUE(check_chain(c).clean());
    c.flavors.push_back(c.flavors[0]);
    c.flavors.back().name = "f64";
    c.cluster_queues[0].flavors.push_back({0, "f64", {"cpu"}, {}, {}, {}});
    const auto r = check_chain(c);
    ASSERT_EQ(r.findings.size(), 1u);
    EXPECT_EQ(r.findings[0].check, "queue-flavor-limit");
  }
  {  // a requested level in no Topology
    auto c = base;
    c.workloads[0].podsets[0].required_level = "topology.gpustack.ai/rack";
    const auto r = check_chain(c);
    ASSERT_EQ(r.findings.size(), 1u);
    EXPECT_EQ(r.findings[0].check, "requested-level");
    EXPECT_EQ(r.findings[0].field, "spec.podSets[0].topologyRequest.required");
  }
}

TEST(Chain, WorkloadMustCarryTheRolesLevel) {
  auto c = load("multi-role");
  EXPECT_TRUE(check_chain(c).clean()) << render_chain_text(check_chain(c));
  c.workloads[1].podsets[0].required_level.clear();
  const auto r = check_chain(c);
  ASSERT_EQ(r.findings.size(), 1u);
  EXPECT_EQ(r.findings[0].check, "workload-request");
  EXPECT_EQ(r.findings[0].object, "Workload/default/llm-decode-0");
}

// ---------------------------------------------------------------- Pending

TEST(Pending, FourNodesTwoZonesThreePodsStayPending) {
  const auto c = load("two-zones");
  const auto r = diagnose_pending(c, "default", "zone-trio");
  ASSERT_TRUE(r.found);
  ASSERT_EQ(r.steps.size(), 7u);
  for (int i = 0; i < 7; ++i) EXPECT_EQ(r.steps[static_cast<std::size_t>(i)].number, i + 1);
  EXPECT_EQ(step(r, 1).result, verdict::skipped);  // no ModelDeployment owns it
  EXPECT_EQ(step(r, 2).result, verdict::problem);  // QuotaReserved=False
  EXPECT_EQ(step(r, 3).result, verdict::ok);
  EXPECT_EQ(step(r, 4).result, verdict::ok);
  EXPECT_EQ(step(r, 5).result, verdict::ok);
  EXPECT_EQ(step(r, 6).result, verdict::problem);
  ASSERT_EQ(r.fits.size(), 1u);
  const auto& f = r.fits[0];
  EXPECT_EQ(f.level, zone);
  EXPECT_TRUE(f.required);
  EXPECT_EQ(f.count, 3);
  EXPECT_EQ(f.cluster_fits, 4);  // four fit cluster-wide ...
  EXPECT_EQ(f.best_domain, 2);   // ... but no zone holds three
  EXPECT_FALSE(f.fits_one_domain());
  ASSERT_EQ(f.flavors.size(), 1u);
  ASSERT_EQ(f.flavors[0].domains.size(), 2u);
  for (const auto& d : f.flavors[0].domains) {
    EXPECT_EQ(d.fits, 2);
    EXPECT_FALSE(d.holds);
    EXPECT_EQ(d.nodes.size(), 2u);
  }
  EXPECT_EQ(f.flavors[0].domains[0].values, (std::vector<std::string>{"region-1", "zone-a"}));
  // Bound Pods are subtracted; the Succeeded one on worker-a2 is not.
  const auto& a1 = f.flavors[0].domains[0].nodes[0];
  EXPECT_EQ(a1.name, "worker-a1");
  EXPECT_EQ(a1.free.at("cpu"), 1900);
  EXPECT_EQ(a1.free.at("memory"), (8ll << 30) - (128ll << 20));
  EXPECT_EQ(f.flavors[0].domains[0].nodes[1].free.at("cpu"), 2000);
  EXPECT_NE(r.conclusion.find("cluster-wide 4 fit"), std::string::npos) << r.conclusion;
}

TEST(Pending, FourNodesTwoZonesTwoPodsFitOneZone) {
  auto c = load("two-zones");
  add_file(c, fixtures() / "zone-pair.json");
  const auto r = diagnose_pending(c, "default", "zone-pair");
  ASSERT_EQ(r.fits.size(), 1u);
  EXPECT_EQ(r.fits[0].count, 2);
  EXPECT_TRUE(r.fits[0].fits_one_domain());
  EXPECT_EQ(r.fits[0].best_domain, 2);
  EXPECT_EQ(step(r, 6).result, verdict::ok);
  // One more Pod requested than a zone holds flips the verdict.
  c.workloads.back().podsets[0].count = 3;
  EXPECT_EQ(step(diagnose_pending(c, "default", "zone-pair"), 6).result, verdict::problem);
}

// A preferred level is a preference: Kueue falls back to coarser levels and, at the top,
// spreads the PodSet over several domains. Three Pods preferring a zone fit (2 + 2 across the
// zones); five do not.
TEST(Pending, PreferredLevelFitsAcrossDomainsUpToTheirSum) {
  auto c = load("two-zones");
  workload* w = nullptr;
  for (auto& x : c.workloads)
    if (x.name == "zone-trio") w = &x;
  ASSERT_NE(w, nullptr);
  w->podsets[0].preferred_level = w->podsets[0].required_level;
  w->podsets[0].required_level.clear();
  auto r = diagnose_pending(c, "default", "zone-trio");
  ASSERT_EQ(r.fits.size(), 1u);
  EXPECT_FALSE(r.fits[0].required);
  EXPECT_TRUE(r.fits[0].preferred());
  EXPECT_FALSE(r.fits[0].fits_one_domain());  // no zone holds three ...
  EXPECT_EQ(r.fits[0].best_spanning, 4);      // ... both zones hold four together
  EXPECT_TRUE(r.fits[0].fits());
  EXPECT_EQ(step(r, 6).result, verdict::ok);
  EXPECT_NE(step(r, 6).lines[0].find("falls back to coarser levels"), std::string::npos)
      << step(r, 6).lines[0];
  const auto json = render_pending_json(r);
  EXPECT_NE(json.find("\"fitsOneDomain\":false,\"spanningFits\":4,\"fits\":true"),
            std::string::npos)
      << json;

  w->podsets[0].count = 5;  // one more than the zones hold together
  r = diagnose_pending(c, "default", "zone-trio");
  EXPECT_FALSE(r.fits[0].fits());
  EXPECT_EQ(step(r, 6).result, verdict::problem);
  EXPECT_NE(r.conclusion.find("all topology.kubernetes.io/zone domains together 4"),
            std::string::npos)
      << r.conclusion;
  EXPECT_NE(r.conclusion.find("allows to fit only 4 out of 5 pod(s)"), std::string::npos)
      << r.conclusion;
  EXPECT_NE(render_pending_json(r).find("\"fits\":false"), std::string::npos);

  // Required: the sum does not count.
  w->podsets[0].count = 3;
  w->podsets[0].required_level = w->podsets[0].preferred_level;
  w->podsets[0].preferred_level.clear();
  r = diagnose_pending(c, "default", "zone-trio");
  EXPECT_EQ(r.fits[0].best_spanning, 4);
  EXPECT_FALSE(r.fits[0].fits());
}

TEST(Pending, CapacitySplitBetweenZoneAndHostnameProfiles) {
  const auto c = load("split-profiles");
  const auto r = diagnose_pending(c, "default", "zone-trio");
  ASSERT_EQ(r.fits.size(), 1u);
  const auto& f = r.fits[0];
  EXPECT_EQ(f.cluster_fits, 4);  // two in each profile's flavor
  EXPECT_EQ(f.best_domain, 2);
  EXPECT_FALSE(f.fits_one_domain());
  ASSERT_EQ(f.flavors.size(), 2u);
  const auto& zone_flavor = f.flavors[0];
  const auto& host_flavor = f.flavors[1];
  EXPECT_TRUE(zone_flavor.level_in_topology);
  ASSERT_EQ(zone_flavor.domains.size(), 1u);
  EXPECT_EQ(zone_flavor.domains[0].fits, 2);
  EXPECT_FALSE(host_flavor.level_in_topology);  // hostname-only Topology: no zone domain at all
  EXPECT_TRUE(host_flavor.domains.empty());
  EXPECT_EQ(host_flavor.fits, 2);
  EXPECT_EQ(host_flavor.excluded.size(), 2u);
  EXPECT_EQ(step(r, 5).result, verdict::ok);  // the zone flavor has the level
  EXPECT_EQ(step(r, 6).result, verdict::problem);
}

TEST(Pending, MultiRoleOneGroupReservedAnotherShortOfADomain) {
  const auto c = load("multi-role");
  const auto r = diagnose_pending(c, "default", "llm-decode-0");
  EXPECT_EQ(r.deployment, "default/llm");
  EXPECT_EQ(step(r, 1).result, verdict::info);
  ASSERT_EQ(r.fits.size(), 1u);
  // prefill's reservation holds worker-a1 and worker-a2 (no Pod bound yet): zone-a has
  // room for none of decode's Pods, zone-b for two, decode needs three.
  EXPECT_EQ(r.fits[0].cluster_fits, 2);
  EXPECT_EQ(r.fits[0].best_domain, 2);
  ASSERT_EQ(r.groups.size(), 2u);
  const auto& prefill = r.groups[0];
  const auto& decode = r.groups[1];
  EXPECT_EQ(prefill.role, "prefill");
  EXPECT_TRUE(prefill.quota_reserved);
  EXPECT_FALSE(prefill.admitted);
  EXPECT_TRUE(prefill.fits);
  EXPECT_EQ(prefill.assignment, "worker-a1=1, worker-a2=1");
  EXPECT_EQ(decode.role, "decode");
  EXPECT_FALSE(decode.quota_reserved);
  EXPECT_FALSE(decode.fits);
  EXPECT_NE(r.conclusion.find("short of a domain: decode"), std::string::npos) << r.conclusion;
  EXPECT_NE(r.conclusion.find("held for the set: prefill"), std::string::npos) << r.conclusion;

  // Listed in another order (the API lists by name), the groups keep the deployment's role order.
  auto reversed = c;
  std::reverse(reversed.workloads.begin(), reversed.workloads.end());
  const auto again = diagnose_pending(reversed, "default", "llm-decode-0");
  ASSERT_EQ(again.groups.size(), 2u);
  EXPECT_EQ(again.groups[0].role, "prefill");
  EXPECT_EQ(again.groups[1].role, "decode");

  // The reserved group's own diagnosis: it holds its reservation.
  const auto p = diagnose_pending(c, "default", "llm-prefill-0");
  EXPECT_EQ(step(p, 2).result, verdict::ok);
  EXPECT_TRUE(p.fits.at(0).fits_one_domain());
}

TEST(Pending, ExcludedNodesAndMissingWorkload) {
  auto c = load("two-zones");
  c.nodes[0].unschedulable = true;                         // worker-a1 cordoned
  c.nodes[1].taints.push_back({"gpu", "", "NoSchedule"});  // worker-a2 tainted
  c.nodes[2].ready = false;                                // worker-b1 NotReady
  auto r = diagnose_pending(c, "default", "zone-trio");
  EXPECT_EQ(r.fits.at(0).cluster_fits, 1);
  EXPECT_EQ(r.fits.at(0).flavors.at(0).excluded.size(), 3u);
  // A toleration brings the tainted Node back.
  c.workloads[0].podsets[0].tolerations.push_back({"gpu", "Exists", "", ""});
  r = diagnose_pending(c, "default", "zone-trio");
  EXPECT_EQ(r.fits.at(0).cluster_fits, 2);
  EXPECT_FALSE(diagnose_pending(c, "default", "nope").found);
  EXPECT_FALSE(diagnose_pending(c, "other", "zone-trio").found);
  EXPECT_TRUE(diagnose_pending(c, "", "zone-trio").found);
}

TEST(Pending, RenderingsCarryTheTable) {
  const auto c = load("two-zones");
  const auto r = diagnose_pending(c, "default", "zone-trio");
  const std::string text = render_pending_text(r);
  EXPECT_NE(text.find("HOLDS 3"), std::string::npos) << text;
  EXPECT_NE(text.find("6. Count CPU"), std::string::npos) << text;
  const std::string json = render_pending_json(r);
  EXPECT_NE(json.find("\"clusterFits\":4"), std::string::npos) << json;
  EXPECT_NE(json.find("\"largestDomainFits\":2"), std::string::npos) << json;
}

}  // namespace
}  // namespace topogate::diagnose

namespace topogate::diagnose {
namespace {

// Writing sources that overlap make the consumer publish neither: `diagnose chain` names both
// sources and the shared Nodes; without the overlap there is no finding.
TEST(Chain, OwnershipConflictBetweenWritingSources) {
  const auto source = [](std::string_view name, std::string_view level, std::string_view pool) {
    return R"({"apiVersion":"worker.gpustack.ai/v1alpha1","kind":"TopologySource","metadata":{"name":")" +
           std::string(name) + R"("},"spec":{"nodeSelector":{"matchLabels":{"pool":")" +
           std::string(pool) + R"("}},"levels":[")" + std::string(level) +
           R"("],"webhook":{"url":"https://i/s","pollInterval":"1m","timeout":"1s","maxStaleness":"5m"}},)"
           R"("status":{"conditions":[{"type":"Ready","status":"True"}]}})";
  };
  const std::string node =
      R"({"apiVersion":"v1","kind":"Node","metadata":{"name":"n1","labels":{"pool":"a","topology.gpustack.ai/profile":"fnv64-x"}}})";
  const auto chain_of = [&](const std::string& b) {
    cluster_objects c;
    EXPECT_TRUE(add_objects(c,
                            R"({"apiVersion":"v1","kind":"List","items":[)" +
                                source("inventory-a", "topology.gpustack.ai/rack", "a") + "," + b +
                                "," + node + "]}",
                            "objects.json")
                    .empty());
    return check_chain(c);
  };
  const auto r = chain_of(source("inventory-b", "topology.gpustack.ai/rack", "a"));
  std::vector<std::string> found;
  for (const auto& f : r.findings)
    if (f.check == "source-ownership") found.push_back(f.object + ": " + f.detail);
  ASSERT_EQ(found.size(), 2u) << render_chain_text(r);
  EXPECT_EQ(found[0].rfind("TopologySource/inventory-a: writing sources inventory-a and "
                           "inventory-b both list topology.gpustack.ai/rack and select 1 Node (n1)",
                           0),
            0u)
      << found[0];
  EXPECT_EQ(found[1].rfind("TopologySource/inventory-b: ", 0), 0u) << found[1];

  for (const auto& other : {source("inventory-b", "topology.gpustack.ai/zone", "a"),
                            source("inventory-b", "topology.gpustack.ai/rack", "b")}) {
    const auto clean = chain_of(other);
    for (const auto& f : clean.findings)
      EXPECT_NE(f.check, "source-ownership") << render_chain_text(clean);
  }
}

}  // namespace
}  // namespace topogate::diagnose

// Node-label hierarchies (nodeLabels sources): S7-S9 over the labels the selected Nodes
// carry, each rule from both sides, on the runbook's cloud-zones source; the same fault
// gets the same rule and path as in a snapshot; the per-level and profile summary.

#include "core/node_labels.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "core/nodes.hpp"
#include "core/profile.hpp"
#include "core/snapshot.hpp"
#include "core/topology_source.hpp"

namespace topogate::core {
namespace {

constexpr std::string_view region = "topology.kubernetes.io/region";
constexpr std::string_view zone = "topology.kubernetes.io/zone";
constexpr std::string_view rack = "topology.gpustack.ai/rack";
constexpr std::string_view partition = "example.com/accelerator-partition";
constexpr std::string_view worker = "node-role.kubernetes.io/worker";

topology_source source_from(std::string_view yaml) {
  source_result r = validate_topology_source_text(yaml);
  EXPECT_TRUE(r.ok()) << render_text(r.errors);
  return r.source;
}

// The runbook's "Observe existing Node labels" source.
const topology_source& cloud_zones() {
  static const topology_source src = source_from(R"(apiVersion: worker.gpustack.ai/v1
kind: TopologySource
metadata:
  name: cloud-zones
spec:
  nodeSelector:
    matchLabels:
      node-role.kubernetes.io/worker: ""
  levels:
    - topology.kubernetes.io/region
    - topology.kubernetes.io/zone
  nodeLabels: {}
)");
  return src;
}

// Region -> zone -> rack, every Node.
const topology_source& zone_racks() {
  static const topology_source src = source_from(R"(apiVersion: worker.gpustack.ai/v1
kind: TopologySource
metadata:
  name: zone-racks
spec:
  levels:
    - topology.kubernetes.io/region
    - topology.kubernetes.io/zone
    - topology.gpustack.ai/rack
  nodeLabels: {}
)");
  return src;
}

// Zone -> accelerator partition: two independent dimensions listed as if nested.
const topology_source& zone_partitions() {
  static const topology_source src = source_from(R"(apiVersion: worker.gpustack.ai/v1
kind: TopologySource
metadata:
  name: zone-partitions
spec:
  levels:
    - topology.kubernetes.io/zone
    - example.com/accelerator-partition
  nodeLabels: {}
)");
  return src;
}

using labels_t = std::vector<std::pair<std::string, std::string>>;

node_list nodes_of(std::vector<std::pair<std::string, labels_t>> in) {
  std::vector<cluster_node> sorted;
  for (auto& [name, labels] : in) {
    cluster_node n;
    n.name = name;
    labels.emplace_back(std::string(hostname_label), name);
    std::sort(labels.begin(), labels.end());
    n.labels = std::move(labels);
    sorted.push_back(std::move(n));
  }
  std::sort(sorted.begin(), sorted.end(),
            [](const cluster_node& a, const cluster_node& b) { return a.name < b.name; });
  node_list out;
  out.nodes = chunked_vector<cluster_node>(std::move(sorted));
  return out;
}

labels_t w(labels_t l) {
  l.emplace_back(std::string(worker), "");
  return l;
}

std::string path(std::string_view node, std::string_view key) {
  return "nodes[" + std::string(node) + "][" + std::string(key) + "]";
}

struct expected_error {
  std::string rule;
  std::string path;
  error_type type;
};

void expect_errors(const error_list& got, const std::vector<expected_error>& want) {
  ASSERT_EQ(got.size(), want.size()) << render_text(got);
  for (std::size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(got[i].rule, want[i].rule) << got[i].to_string();
    EXPECT_EQ(got[i].path, want[i].path) << got[i].to_string();
    EXPECT_EQ(got[i].type, want[i].type) << got[i].to_string();
  }
}

struct rule_case {
  std::string name;
  const topology_source* (*source)();
  std::vector<std::pair<std::string, labels_t>> nodes;
  std::vector<expected_error> errors;
};

const topology_source* cz() { return &cloud_zones(); }
const topology_source* zr() { return &zone_racks(); }
const topology_source* zp() { return &zone_partitions(); }

const std::string R(region), Z(zone), K(rack), P(partition);
const std::string long63(63, 'a'), long64(64, 'a');

class NodeLabelRules : public testing::TestWithParam<rule_case> {};

TEST_P(NodeLabelRules, Errors) {
  const rule_case& c = GetParam();
  const node_label_report r = check_node_labels(*c.source(), nodes_of(c.nodes));
  expect_errors(r.errors, c.errors);
  EXPECT_EQ(r.ok(), c.errors.empty());
}

INSTANTIATE_TEST_SUITE_P(
    BothSides, NodeLabelRules,
    testing::Values(
        // The runbook's example: two zones of one region.
        rule_case{"cloud_zones_valid",
                  cz,
                  {{"worker-a", w({{R, "us-east-1"}, {Z, "us-east-1a"}})},
                   {"worker-b", w({{R, "us-east-1"}, {Z, "us-east-1b"}})},
                   {"worker-c", w({{R, "us-east-1"}, {Z, "us-east-1a"}})}},
                  {}},
        // S8: a child level without its parent; omitting a fine suffix is fine.
        rule_case{"zone_without_region",
                  cz,
                  {{"worker-a", w({{Z, "us-east-1a"}})},
                   {"worker-b", w({{R, "us-east-1"}, {Z, "us-east-1b"}})}},
                  {{"S8", path("worker-a", region), error_type::required}}},
        rule_case{"region_only_fine_suffix_omitted",
                  cz,
                  {{"worker-a", w({{R, "us-east-1"}})},
                   {"worker-b", w({{R, "us-east-1"}, {Z, "us-east-1b"}})}},
                  {}},
        rule_case{"no_levels_at_all", cz, {{"worker-a", w({})}}, {}},
        rule_case{"rack_without_region_and_zone",
                  zr,
                  {{"n1", {{K, "r1"}}}},
                  {{"S8", path("n1", region), error_type::required},
                   {"S8", path("n1", zone), error_type::required}}},
        rule_case{"rack_without_zone",
                  zr,
                  {{"n1", {{R, "eu"}, {K, "r1"}}}},
                  {{"S8", path("n1", zone), error_type::required}}},
        // Nodes outside spec.nodeSelector are not looked at.
        rule_case{"outside_selector_ignored",
                  cz,
                  {{"control-1", {{Z, "us-east-1a"}}},
                   {"worker-a", w({{R, "us-east-1"}, {Z, "us-east-1a"}})}},
                  {}},
        rule_case{"inside_selector_counted",
                  cz,
                  {{"control-1", w({{Z, "us-east-1a"}})},
                   {"worker-a", w({{R, "us-east-1"}, {Z, "us-east-1a"}})}},
                  {{"S8", path("control-1", region), error_type::required}}},
        // S9: a rack under two zones (one misplaced rack among correctly nested ones).
        rule_case{"rack_under_two_zones",
                  zr,
                  {{"n1", {{R, "eu"}, {Z, "a"}, {K, "r1"}}},
                   {"n2", {{R, "eu"}, {Z, "a"}, {K, "r2"}}},
                   {"n3", {{R, "eu"}, {Z, "b"}, {K, "r1"}}},
                   {"n4", {{R, "eu"}, {Z, "b"}, {K, "r3"}}},
                   {"n5", {{R, "eu"}, {Z, "a"}, {K, "r4"}}}},
                  {{"S9", path("n3", rack), error_type::invalid}}},
        rule_case{"racks_each_in_one_zone",
                  zr,
                  {{"n1", {{R, "eu"}, {Z, "a"}, {K, "r1"}}},
                   {"n2", {{R, "eu"}, {Z, "a"}, {K, "r2"}}},
                   {"n3", {{R, "eu"}, {Z, "b"}, {K, "r3"}}},
                   {"n4", {{R, "eu"}, {Z, "b"}, {K, "r3"}}}},
                  {}},
        // The same zone name in two regions is a conflict too (the whole ancestor tuple).
        rule_case{"zone_under_two_regions",
                  cz,
                  {{"worker-a", w({{R, "eu"}, {Z, "a"}})}, {"worker-b", w({{R, "us"}, {Z, "a"}})}},
                  {{"S9", path("worker-b", zone), error_type::invalid}}},
        // Two independent dimensions: every partition in every zone.
        rule_case{"independent_dimensions",
                  zp,
                  {{"n1", {{Z, "a"}, {P, "p1"}}},
                   {"n2", {{Z, "a"}, {P, "p2"}}},
                   {"n3", {{Z, "b"}, {P, "p1"}}},
                   {"n4", {{Z, "b"}, {P, "p2"}}}},
                  {{"S9", path("n3", partition), error_type::invalid},
                   {"S9", path("n4", partition), error_type::invalid},
                   {"S9", "spec.levels[1]", error_type::invalid}}},
        rule_case{"partitions_nested_after_all",
                  zp,
                  {{"n1", {{Z, "a"}, {P, "p1"}}},
                   {"n2", {{Z, "a"}, {P, "p2"}}},
                   {"n3", {{Z, "b"}, {P, "p3"}}},
                   {"n4", {{Z, "b"}, {P, "p4"}}}},
                  {}},
        // S7: values the consumer cannot key a domain by (63 bytes passes, 64 does not).
        rule_case{"value_63_bytes", cz, {{"worker-a", w({{R, long63}, {Z, "a"}})}}, {}},
        rule_case{"value_64_bytes",
                  cz,
                  {{"worker-a", w({{R, long64}, {Z, "a"}})}},
                  {{"S7", path("worker-a", region), error_type::invalid}}},
        // An empty value is absent to the consumer: a shorter profile, no error...
        rule_case{"empty_value_is_absent", cz, {{"worker-a", w({{R, "eu"}, {Z, ""}})}}, {}},
        // ...so an empty parent under a set child is a missing parent (S8), not S7.
        rule_case{"empty_parent_is_missing",
                  cz,
                  {{"worker-a", w({{R, ""}, {Z, "a"}})}},
                  {{"S8", path("worker-a", region), error_type::required}}},
        rule_case{"value_with_space",
                  cz,
                  {{"worker-a", w({{R, "eu west"}, {Z, "a"}})}},
                  {{"S7", path("worker-a", region), error_type::invalid}}}),
    [](const testing::TestParamInfo<rule_case>& i) { return i.param.name; });

TEST(NodeLabels, CloudZonesSummary) {
  const node_list nodes = nodes_of({{"control-1", {{R, "us-east-1"}, {Z, "us-east-1c"}}},
                                    {"worker-a", w({{R, "us-east-1"}, {Z, "us-east-1a"}})},
                                    {"worker-b", w({{R, "us-east-1"}, {Z, "us-east-1b"}})},
                                    {"worker-c", w({{R, "us-east-1"}, {Z, "us-east-1a"}})},
                                    {"worker-d", w({{R, "us-east-1"}})}});
  const node_label_report r = check_node_labels(cloud_zones(), nodes);
  ASSERT_TRUE(r.ok()) << render_text(r.errors);
  EXPECT_EQ(r.total_nodes, 5u);
  EXPECT_EQ(r.selected_nodes, 4u);
  ASSERT_EQ(r.levels.size(), 2u);
  EXPECT_EQ(r.levels[0].key, region);
  EXPECT_EQ(r.levels[0].nodes, 4u);
  EXPECT_EQ(r.levels[0].verdict, nesting::root);
  ASSERT_EQ(r.levels[0].domains.size(), 1u);
  EXPECT_EQ(r.levels[0].domains[0].value, "us-east-1");
  EXPECT_EQ(r.levels[0].domains[0].nodes, 4u);
  EXPECT_EQ(r.levels[1].nodes, 3u);
  EXPECT_EQ(r.levels[1].verdict, nesting::nested);
  ASSERT_EQ(r.levels[1].domains.size(), 2u);  // us-east-1c is only on the unselected Node
  EXPECT_EQ(r.levels[1].domains[0].value, "us-east-1a");
  EXPECT_EQ(r.levels[1].domains[0].nodes, 2u);
  EXPECT_EQ(r.levels[1].domains[1].value, "us-east-1b");
  EXPECT_EQ(r.levels[1].domains[1].nodes, 1u);

  const std::string full = profile_id({R, Z, std::string(hostname_label)});
  const std::string region_only = profile_id({R, std::string(hostname_label)});
  ASSERT_EQ(r.profiles.size(), 2u);
  EXPECT_EQ(r.profiles[0].id, full);  // deepest first
  EXPECT_EQ(r.profiles[0].nodes, 3u);
  EXPECT_EQ(r.profiles[1].id, region_only);
  EXPECT_EQ(r.profiles[1].nodes, 1u);
  ASSERT_EQ(r.nodes.size(), 4u);
  EXPECT_EQ(r.nodes[0].node, "worker-a");
  EXPECT_EQ(r.nodes[0].profile_id, full);
  EXPECT_EQ(r.nodes[0].depth, 2u);
  EXPECT_EQ(r.nodes[3].node, "worker-d");
  EXPECT_EQ(r.nodes[3].profile_id, region_only);
  EXPECT_EQ(r.nodes[3].depth, 1u);
  EXPECT_TRUE(r.conflicts.empty());
}

TEST(NodeLabels, ConflictsListEveryParentAndNode) {
  const node_label_report r =
      check_node_labels(zone_racks(), nodes_of({{"n1", {{R, "eu"}, {Z, "a"}, {K, "r1"}}},
                                                {"n2", {{R, "eu"}, {Z, "b"}, {K, "r1"}}},
                                                {"n3", {{R, "eu"}, {Z, "a"}, {K, "r1"}}},
                                                {"n4", {{R, "eu"}, {Z, "c"}, {K, "r1"}}},
                                                {"n5", {{R, "eu"}, {Z, "a"}, {K, "r2"}}},
                                                {"n6", {{R, "eu"}, {Z, "b"}, {K, "r3"}}},
                                                {"n7", {{R, "eu"}, {Z, "c"}, {K, "r4"}}}}));
  expect_errors(r.errors, {{"S9", path("n2", rack), error_type::invalid},
                           {"S9", path("n4", rack), error_type::invalid}});
  EXPECT_EQ(r.errors[0].bad_value, "r1");
  ASSERT_EQ(r.conflicts.size(), 1u);
  const parent_conflict& c = r.conflicts[0];
  EXPECT_EQ(c.level, rack);
  EXPECT_EQ(c.value, "r1");
  ASSERT_EQ(c.placements.size(), 3u);
  // The smallest Node name sets the parents, as the consumer visits Nodes in name order.
  EXPECT_EQ(c.placements[0].parents, "{" + R + "=eu, " + Z + "=a}");
  EXPECT_EQ(c.placements[0].nodes, (std::vector<std::string>{"n1", "n3"}));
  EXPECT_EQ(c.placements[1].parents, "{" + R + "=eu, " + Z + "=b}");
  EXPECT_EQ(c.placements[1].nodes, (std::vector<std::string>{"n2"}));
  EXPECT_EQ(c.placements[2].nodes, (std::vector<std::string>{"n4"}));
  EXPECT_EQ(r.levels[2].verdict, nesting::conflicting);
  EXPECT_EQ(r.levels[2].conflicting_values, 1u);
  EXPECT_EQ(r.levels[1].verdict, nesting::nested);
}

TEST(NodeLabels, IndependentDimensionsVerdict) {
  const node_label_report r =
      check_node_labels(zone_partitions(), nodes_of({{"n1", {{Z, "a"}, {P, "p1"}}},
                                                     {"n2", {{Z, "a"}, {P, "p2"}}},
                                                     {"n3", {{Z, "b"}, {P, "p1"}}},
                                                     {"n4", {{Z, "b"}, {P, "p2"}}}}));
  ASSERT_EQ(r.levels.size(), 2u);
  EXPECT_EQ(r.levels[1].verdict, nesting::independent);
  EXPECT_EQ(r.levels[1].conflicting_values, 2u);
  EXPECT_EQ(r.conflicts.size(), 2u);
  EXPECT_EQ(r.errors.back().bad_value, partition);
}

// A zone under two regions makes its racks' ancestor tuples differ (S9 for each), but the
// racks still sit in one zone each: the rack level is not called independent of zones.
TEST(NodeLabels, CascadeFromAParentIsNotIndependence) {
  const node_label_report r =
      check_node_labels(zone_racks(), nodes_of({{"n1", {{R, "eu"}, {Z, "a"}, {K, "r1"}}},
                                                {"n2", {{R, "eu"}, {Z, "a"}, {K, "r2"}}},
                                                {"n3", {{R, "us"}, {Z, "a"}, {K, "r1"}}},
                                                {"n4", {{R, "us"}, {Z, "a"}, {K, "r2"}}}}));
  EXPECT_EQ(r.levels[1].verdict, nesting::conflicting);
  EXPECT_EQ(r.levels[2].verdict, nesting::conflicting);
  for (const auto& e : r.errors) EXPECT_NE(e.path.rfind("spec.levels", 0), 0u) << e.to_string();
}

// The same labels as a snapshot for a source with the same levels: the same rules and paths.
TEST(NodeLabels, SameRulesAndPathsAsTheSnapshotCheck) {
  const topology_source src = source_from(R"(apiVersion: worker.gpustack.ai/v1
kind: TopologySource
metadata:
  name: gpustack-levels
spec:
  levels:
    - topology.gpustack.ai/region
    - topology.gpustack.ai/zone
    - topology.gpustack.ai/rack
  configMap:
    configMapRef: {namespace: gpustack-system, name: inventory}
    key: snapshot.yaml
    maxStaleness: 10m
)");
  const std::string r = "topology.gpustack.ai/region", z = "topology.gpustack.ai/zone",
                    k = "topology.gpustack.ai/rack";
  const std::vector<std::pair<std::string, labels_t>> labels = {
      {"n1", {{r, "eu"}, {z, "a"}, {k, "r1"}}},
      {"n2", {{r, "eu"}, {z, "b"}, {k, "r1"}}},
      {"n3", {{z, "c"}}},
      {"n4", {{r, "eu"}, {z, "b"}, {k, "r4"}}}};
  std::string snap_text = "apiVersion: topology.gpustack.ai/v1alpha1\nrevision: x\nnodes:\n";
  for (const auto& [name, l] : labels) {
    snap_text += "  " + name + ": {";
    for (std::size_t i = 0; i < l.size(); ++i)
      snap_text += (i ? ", " : "") + l[i].first + ": \"" + l[i].second + "\"";
    snap_text += "}\n";
  }
  snapshot_context ctx;
  ctx.source = &src;
  error_list from_snapshot = check_snapshot(snap_text, ctx);
  error_list from_nodes = check_node_labels(src, nodes_of(labels)).errors;
  auto key_of = [](const error_list& l) {
    std::vector<std::tuple<std::string, std::string, error_type, std::string>> out;
    for (const auto& e : l) out.emplace_back(e.rule, e.path, e.type, e.bad_value);
    std::sort(out.begin(), out.end());
    return out;
  };
  ASSERT_EQ(from_nodes.size(), 2u) << render_text(from_nodes);  // S9 n2, S8 n3
  EXPECT_EQ(key_of(from_nodes), key_of(from_snapshot)) << render_text(from_snapshot) << "\n"
                                                       << render_text(from_nodes);
}

// The consumer checks a nodeLabels hierarchy in its normalized level order: a run of
// fabric.topograph.run/tier-N listed leaf first is checked coarsest first.
TEST(NodeLabels, TierRunCheckedInTheConsumersOrder) {
  const topology_source src = source_from(R"(apiVersion: worker.gpustack.ai/v1alpha1
kind: TopologySource
metadata:
  name: fabric
spec:
  levels: [fabric.topograph.run/tier-1, fabric.topograph.run/tier-2]
  nodeLabels: {}
)");
  const std::string t1 = "fabric.topograph.run/tier-1", t2 = "fabric.topograph.run/tier-2";
  // tier-2 alone: the consumer's first level, so no parent is missing.
  const node_label_report only_t2 = check_node_labels(src, nodes_of({{"n1", {{t2, "spine-a"}}}}));
  EXPECT_TRUE(only_t2.ok()) << render_text(only_t2.errors);
  ASSERT_EQ(only_t2.levels.size(), 2u);
  EXPECT_EQ(only_t2.levels[0].key, t2);
  // tier-1 alone: its parent tier-2 is missing.
  const node_label_report only_t1 = check_node_labels(src, nodes_of({{"n1", {{t1, "leaf-a"}}}}));
  expect_errors(only_t1.errors, {{"S8", path("n1", t2), error_type::required}});
  // A leaf under two spines is S9 on tier-1 (the child in that order).
  const node_label_report two =
      check_node_labels(src, nodes_of({{"n1", {{t1, "leaf-a"}, {t2, "spine-a"}}},
                                       {"n2", {{t1, "leaf-a"}, {t2, "spine-b"}}},
                                       {"n3", {{t1, "leaf-b"}, {t2, "spine-a"}}},
                                       {"n4", {{t1, "leaf-c"}, {t2, "spine-b"}}}}));
  expect_errors(two.errors, {{"S9", path("n2", t1), error_type::invalid}});
}

TEST(NodeLabels, ErrorListIsCapped) {
  std::vector<std::pair<std::string, labels_t>> in;
  for (int i = 0; i < 1200; ++i) in.push_back({"n" + std::to_string(i), {{K, "r"}}});
  const node_label_report r = check_node_labels(zone_racks(), nodes_of(in));
  ASSERT_EQ(r.errors.size(), 1001u);
  EXPECT_EQ(r.errors.back().type, error_type::too_many);
  EXPECT_EQ(r.errors.back().rule, "S8");
}

TEST(NodeLabels, RenderingsNameEveryPart) {
  const node_label_report r =
      check_node_labels(zone_racks(), nodes_of({{"n1", {{R, "eu"}, {Z, "a"}, {K, "r1"}}},
                                                {"n2", {{R, "eu"}, {Z, "b"}, {K, "r1"}}}}));
  const std::string json = render_node_label_report_json(r);
  EXPECT_EQ(json.rfind("{\"valid\":false,", 0), 0u) << json;
  EXPECT_NE(json.find("\"nesting\":\"conflicting\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"rule\":\"S9\""), std::string::npos) << json;
  const std::string text = render_node_label_report_text(r);
  EXPECT_NE(text.find("Values under more than one parent"), std::string::npos) << text;
  EXPECT_NE(text.find(profile_id({R, Z, K, std::string(hostname_label)})), std::string::npos)
      << text;
}

}  // namespace
}  // namespace topogate::core

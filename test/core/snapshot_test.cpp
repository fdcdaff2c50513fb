// Snapshot decoding (S1) and rules S2-S10, each from both sides, against the runbook's
// data-center source; the JSON fast path against the YAML decoder on the same text.

#include "core/snapshot.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "core/nodes.hpp"
#include "core/topology_source.hpp"

namespace topogate::core {
namespace {

constexpr std::string_view region = "topology.gpustack.ai/region";
constexpr std::string_view zone = "topology.gpustack.ai/zone";
constexpr std::string_view rack = "topology.gpustack.ai/rack";

topology_source source_from(std::string_view yaml) {
  source_result r = validate_topology_source_text(yaml);
  EXPECT_TRUE(r.ok()) << render_text(r.errors);
  return r.source;
}

// The runbook's ConfigMap source: region -> zone -> rack.
const topology_source& data_center() {
  static const topology_source src = source_from(R"(apiVersion: worker.gpustack.ai/v1
kind: TopologySource
metadata:
  name: data-center
spec:
  nodeSelector: {}
  levels:
    - topology.gpustack.ai/region
    - topology.gpustack.ai/zone
    - topology.gpustack.ai/rack
  configMap:
    configMapRef:
      namespace: gpustack-system
      name: topology-inventory
    key: snapshot.yaml
    maxStaleness: 10m
)");
  return src;
}

// A read-only cloud parent above a private rack, selecting only GPU workers.
const topology_source& cloud_parent() {
  static const topology_source src = source_from(R"(apiVersion: worker.gpustack.ai/v1
kind: TopologySource
metadata:
  name: cloud-racks
spec:
  nodeSelector:
    matchLabels:
      role: gpu
  levels:
    - topology.kubernetes.io/zone
    - topology.gpustack.ai/rack
  configMap:
    configMapRef:
      namespace: gpustack-system
      name: topology-inventory
    key: snapshot.yaml
    maxStaleness: 10m
)");
  return src;
}

const std::string runbook_snapshot = R"(apiVersion: topology.gpustack.ai/v1alpha1
revision: inventory-42
nodes:
  worker-a:
    topology.gpustack.ai/region: region-a
    topology.gpustack.ai/zone: zone-a
    topology.gpustack.ai/rack: rack-01
  worker-b:
    topology.gpustack.ai/region: region-a
    topology.gpustack.ai/zone: zone-a
    topology.gpustack.ai/rack: rack-02
)";

using error_key = std::tuple<std::string, std::string, error_type>;

std::set<std::string> rules_of(const error_list& errors) {
  std::set<std::string> out;
  for (const auto& e : errors) out.insert(e.rule);
  return out;
}

std::vector<error_key> keys_of(const error_list& errors) {
  std::vector<error_key> out;
  for (const auto& e : errors) out.emplace_back(e.rule, e.path, e.type);
  return out;
}

error_list check(std::string_view text, const topology_source& src = data_center(),
                 const node_list* nodes = nullptr) {
  return check_snapshot(text, snapshot_context{&src, nodes});
}

// "nodes:\n  <name>:\n    <k>: <v>\n..." with the usual header.
std::string yaml_snapshot(
    const std::vector<std::pair<std::string, std::vector<std::pair<std::string, std::string>>>>&
        nodes,
    std::string_view revision = "r1") {
  std::string out = "apiVersion: topology.gpustack.ai/v1alpha1\nrevision: ";
  out += revision;
  out += "\nnodes:\n";
  for (const auto& [name, labels] : nodes) {
    out += "  " + name + ":\n";
    for (const auto& [k, v] : labels) out += "    " + k + ": " + v + "\n";
  }
  return out;
}

std::pair<std::string, std::string> L(std::string_view k, std::string v) {
  return {std::string(k), std::move(v)};
}

TEST(SnapshotValid, RunbookExampleYamlAndJson) {
  EXPECT_TRUE(check(runbook_snapshot).empty()) << render_text(check(runbook_snapshot));
  const snapshot_decode_result d = decode_snapshot(runbook_snapshot);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d.value.revision, "inventory-42");
  ASSERT_EQ(d.value.nodes.size(), 2u);
  EXPECT_EQ(d.value.nodes[0].name, "worker-a");
  ASSERT_EQ(d.value.nodes[0].labels.size(), 3u);
  EXPECT_EQ(d.value.nodes[0].labels[2].key, rack);
  EXPECT_EQ(d.value.nodes[0].labels[2].value, "rack-01");
  const std::string json = render_snapshot_json(d.value);
  EXPECT_TRUE(check(json).empty()) << render_text(check(json));
  const snapshot_decode_result again = decode_snapshot(json);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(render_snapshot_json(again.value), json);
}

TEST(SnapshotValid, NodesMayBeMissingNullOrEmptyAndEntriesNullOrEmpty) {
  for (
      const char* text : {
          "apiVersion: topology.gpustack.ai/v1alpha1\nrevision: r\n",
          "apiVersion: topology.gpustack.ai/v1alpha1\nrevision: r\nnodes:\n",
          "apiVersion: topology.gpustack.ai/v1alpha1\nrevision: r\nnodes: {}\n",
          "apiVersion: topology.gpustack.ai/v1alpha1\nrevision: r\nnodes: {worker-a: ~, worker-b: "
          "{}}\n",
          R"({"apiVersion":"topology.gpustack.ai/v1alpha1","revision":"r","nodes":{"worker-a":null,"worker-b":{}}})",
          R"({"apiVersion":"topology.gpustack.ai/v1alpha1","revision":"r","nodes":null})",
          R"({"apiVersion":"topology.gpustack.ai/v1alpha1","revision":"r"})",
      }) {
    EXPECT_TRUE(check(text).empty()) << text << "\n" << render_text(check(text));
  }
  const snapshot_decode_result d = decode_snapshot(
      "apiVersion: topology.gpustack.ai/v1alpha1\nrevision: r\nnodes: {worker-a: ~}\n");
  ASSERT_TRUE(d.ok());
  ASSERT_EQ(d.value.nodes.size(), 1u);
  EXPECT_TRUE(d.value.nodes[0].labels.empty());
}

TEST(SnapshotScalars, KeepTheirLiteralText) {
  const snapshot_decode_result y = decode_snapshot(
      "apiVersion: topology.gpustack.ai/v1alpha1\nrevision: 01\nnodes:\n  w:\n    a: 01\n    b: "
      "1.50\n"
      "    c: true\n    d: 2001-01-01\n    e: 1e3\n    f: 0x1F\n");
  ASSERT_TRUE(y.ok());
  EXPECT_EQ(y.value.revision, "01");
  std::vector<std::string> values;
  for (const auto& l : y.value.nodes[0].labels) values.push_back(l.value);
  EXPECT_EQ(values, (std::vector<std::string>{"01", "1.50", "true", "2001-01-01", "1e3", "0x1F"}));
  const snapshot_decode_result j = decode_snapshot(
      R"({"apiVersion":"topology.gpustack.ai/v1alpha1","revision":42,"nodes":{"w":{"a":42,"b":1e3,"c":-0.50,"d":true}}})");
  ASSERT_TRUE(j.ok());
  EXPECT_EQ(j.value.revision, "42");
  values.clear();
  for (const auto& l : j.value.nodes[0].labels) values.push_back(l.value);
  EXPECT_EQ(values, (std::vector<std::string>{"42", "1e3", "-0.50", "true"}));
}

struct rule_case {
  const char* name;
  std::string text;
  std::set<std::string> rules;
  std::string first_path;
  error_type first_type;
};

class SnapshotRules : public ::testing::TestWithParam<rule_case> {};

TEST_P(SnapshotRules, ReportsExactlyTheseRules) {
  const auto& c = GetParam();
  const error_list errors = check(c.text);
  EXPECT_EQ(rules_of(errors), c.rules) << render_text(errors);
  ASSERT_FALSE(errors.empty());
  EXPECT_EQ(errors.front().path, c.first_path) << render_text(errors);
  EXPECT_EQ(errors.front().type, c.first_type) << render_text(errors);
}

const std::string header = "apiVersion: topology.gpustack.ai/v1alpha1\nrevision: r1\n";

INSTANTIATE_TEST_SUITE_P(
    S1, SnapshotRules,
    ::testing::Values(
        rule_case{
            "api_version_missing", "revision: r\n", {"S1"}, "apiVersion", error_type::required},
        rule_case{"api_version_wrong",
                  "apiVersion: topology.gpustack.ai/v1\nrevision: r\n",
                  {"S1"},
                  "apiVersion",
                  error_type::not_supported},
        rule_case{"api_version_case",
                  "apiVersion: Topology.gpustack.ai/v1alpha1\nrevision: r\n",
                  {"S1"},
                  "apiVersion",
                  error_type::not_supported},
        rule_case{
            "unknown_field", header + "kind: Snapshot\n", {"S1"}, "kind", error_type::forbidden},
        rule_case{
            "keys_case_sensitive", header + "Nodes: {}\n", {"S1"}, "Nodes", error_type::forbidden},
        rule_case{
            "second_document", header + "---\nrevision: r2\n", {"S1"}, "", error_type::invalid},
        rule_case{"trailing_document_start", header + "---\n", {"S1"}, "", error_type::invalid},
        rule_case{"empty", "", {"S1"}, "", error_type::invalid},
        rule_case{"comment_only", "# inventory\n", {"S1"}, "", error_type::invalid},
        rule_case{"yaml_1_2", "%YAML 1.2\n---\n" + header, {"S1"}, "", error_type::invalid},
        rule_case{"duplicate_node",
                  header + "nodes:\n  w: {}\n  w: {}\n",
                  {"S1"},
                  "nodes[w]",
                  error_type::duplicate},
        rule_case{"duplicate_label",
                  header + "nodes:\n  w:\n    " + std::string(region) + ": a\n    " +
                      std::string(region) + ": b\n",
                  {"S1"},
                  "nodes[w][topology.gpustack.ai/region]",
                  error_type::duplicate},
        rule_case{"duplicate_json",
                  R"({"apiVersion":"topology.gpustack.ai/v1alpha1","revision":"r","revision":"s"})",
                  {"S1"},
                  "revision",
                  error_type::duplicate},
        rule_case{"nodes_is_a_list", header + "nodes: [a]\n", {"S1"}, "nodes", error_type::invalid},
        rule_case{"node_is_a_scalar",
                  header + "nodes: {w: x}\n",
                  {"S1"},
                  "nodes[w]",
                  error_type::invalid},
        rule_case{"label_value_is_a_map",
                  header + "nodes:\n  worker-a:\n    key: {x: 1}\n",
                  {"S1"},
                  "nodes[worker-a][key]",
                  error_type::invalid},
        rule_case{"root_is_a_list", "- a\n", {"S1"}, "", error_type::invalid},
        rule_case{"int_tag_on_text",
                  header + "nodes: {w: {" + std::string(region) + ": !!int abc}}\n",
                  {"S1"},
                  "nodes[w][topology.gpustack.ai/region]",
                  error_type::invalid},
        rule_case{"type_error_and_more",
                  "apiVersion: v1\nrevision: ' '\nnodes: [a]\n",
                  {"S1", "S2"},
                  "nodes",
                  error_type::invalid}),
    [](const auto& param_info) { return std::string(param_info.param.name); });

INSTANTIATE_TEST_SUITE_P(
    S2toS9, SnapshotRules,
    ::testing::Values(
        rule_case{"revision_null",
                  "apiVersion: topology.gpustack.ai/v1alpha1\nrevision: ~\n",
                  {"S2"},
                  "revision",
                  error_type::required},
        rule_case{"revision_missing",
                  "apiVersion: topology.gpustack.ai/v1alpha1\n",
                  {"S2"},
                  "revision",
                  error_type::required},
        rule_case{"revision_blank",
                  "apiVersion: topology.gpustack.ai/v1alpha1\nrevision: \" \\t\"\n",
                  {"S2"},
                  "revision",
                  error_type::required},
        rule_case{"revision_nbsp",
                  "apiVersion: topology.gpustack.ai/v1alpha1\nrevision: \"\\u00a0\\u2003\"\n",
                  {"S2"},
                  "revision",
                  error_type::required},
        rule_case{"node_name_not_dns",
                  yaml_snapshot({{"Worker_A", {}}}),
                  {"S3"},
                  "nodes[Worker_A]",
                  error_type::invalid},
        rule_case{"undeclared_level",
                  yaml_snapshot({{"w", {L("topology.gpustack.ai/row", "x")}}}),
                  {"S4"},
                  "nodes[w][topology.gpustack.ai/row]",
                  error_type::invalid},
        rule_case{"undeclared_unpublishable",
                  yaml_snapshot({{"w", {L("kubernetes.io/os", "linux")}}}),
                  {"S4", "S5"},
                  "nodes[w][kubernetes.io/os]",
                  error_type::invalid},
        rule_case{"null_value",
                  yaml_snapshot({{"w", {L(region, "~")}}}),
                  {"S7"},
                  "nodes[w][topology.gpustack.ai/region]",
                  error_type::invalid},
        rule_case{"empty_value",
                  yaml_snapshot({{"w", {L(region, "''")}}}),
                  {"S7"},
                  "nodes[w][topology.gpustack.ai/region]",
                  error_type::invalid},
        rule_case{"invalid_value",
                  yaml_snapshot({{"w", {L(region, "'region a'")}}}),
                  {"S7"},
                  "nodes[w][topology.gpustack.ai/region]",
                  error_type::invalid},
        rule_case{"value_64_chars",
                  yaml_snapshot({{"w", {L(region, std::string(64, 'a'))}}}),
                  {"S7"},
                  "nodes[w][topology.gpustack.ai/region]",
                  error_type::invalid},
        rule_case{"missing_parent",
                  yaml_snapshot({{"w", {L(region, "a"), L(rack, "r1")}}}),
                  {"S8"},
                  "nodes[w][topology.gpustack.ai/zone]",
                  error_type::required},
        rule_case{"missing_root_parent",
                  yaml_snapshot({{"w", {L(zone, "z")}}}),
                  {"S8"},
                  "nodes[w][topology.gpustack.ai/region]",
                  error_type::required},
        rule_case{"rack_under_two_zones",
                  yaml_snapshot({{"w1", {L(region, "a"), L(zone, "z1"), L(rack, "r1")}},
                                 {"w2", {L(region, "a"), L(zone, "z2"), L(rack, "r1")}}}),
                  {"S9"},
                  "nodes[w2][topology.gpustack.ai/rack]",
                  error_type::invalid}),
    [](const auto& param_info) { return std::string(param_info.param.name); });

TEST(SnapshotRulesValidSide, EachRuleHasAPassingNeighbour) {
  // The passing side of S2, S3, S4/S5, S7, S8, S9.
  EXPECT_TRUE(check(yaml_snapshot({{"worker-a.example", {}}}, "\" x \"")).empty());
  EXPECT_TRUE(check(yaml_snapshot({{"w", {L(region, std::string(63, 'a'))}}})).empty());
  EXPECT_TRUE(check(yaml_snapshot({{"w", {L(region, "a"), L(zone, "z")}}}))
                  .empty());  // fine suffix omitted
  EXPECT_TRUE(check(yaml_snapshot({{"w1", {L(region, "a"), L(zone, "z1"), L(rack, "r1")}},
                                   {"w2", {L(region, "a"), L(zone, "z1"), L(rack, "r1")}},
                                   {"w3", {L(region, "a"), L(zone, "z1")}}}))
                  .empty());
}

TEST(SnapshotS9, KeysEachChildByAllItsAncestors) {
  // Zone z is under two regions; rack r1 has the same zone parent on both nodes but not the
  // same region: keyed by all ancestors, it is reported too.
  const error_list errors =
      check(yaml_snapshot({{"w1", {L(region, "a"), L(zone, "z"), L(rack, "r1")}},
                           {"w2", {L(region, "b"), L(zone, "z"), L(rack, "r1")}}}));
  EXPECT_EQ(keys_of(errors),
            (std::vector<error_key>{
                {"S9", "nodes[w2][topology.gpustack.ai/zone]", error_type::invalid},
                {"S9", "nodes[w2][topology.gpustack.ai/rack]", error_type::invalid}}));
  EXPECT_EQ(errors[1].bad_value, "r1");
  EXPECT_NE(errors[1].detail.find("w1"), std::string::npos) << errors[1].detail;
  EXPECT_NE(errors[1].detail.find("region=a"), std::string::npos) << errors[1].detail;
  EXPECT_NE(errors[1].detail.find("region=b"), std::string::npos) << errors[1].detail;
}

TEST(SnapshotS9, ReportsAgainstTheSmallestNodeNameWhateverTheOrder) {
  const auto a = std::make_pair(std::string("node-a"), std::vector{L(region, "r"), L(zone, "z1")});
  const auto b = std::make_pair(std::string("node-b"), std::vector{L(region, "s"), L(zone, "z1")});
  const error_list forward = check(yaml_snapshot({a, b}));
  const error_list backward = check(yaml_snapshot({b, a}));
  EXPECT_EQ(keys_of(forward), keys_of(backward));
  ASSERT_EQ(forward.size(), 1u);
  EXPECT_EQ(forward[0].path, "nodes[node-b][topology.gpustack.ai/zone]");
}

node_list cluster(std::string_view json) {
  node_list_result r = parse_node_list(json);
  EXPECT_TRUE(r.ok()) << render_text(r.errors);
  return r.list;
}

const char* cluster_json = R"({"apiVersion":"v1","kind":"List","items":[
  {"metadata":{"name":"gpu-1","labels":{"role":"gpu","topology.kubernetes.io/zone":"us-east-1a"}}},
  {"metadata":{"name":"gpu-2","labels":{"role":"gpu"}}},
  {"metadata":{"name":"cpu-1","labels":{"role":"cpu","topology.kubernetes.io/zone":"us-east-1a"}}}]})";

TEST(SnapshotS3, EveryNodeKnownAndSelected) {
  const node_list nodes = cluster(cluster_json);
  const auto ok =
      yaml_snapshot({{"gpu-1", {L("topology.kubernetes.io/zone", "us-east-1a"), L(rack, "r1")}}});
  EXPECT_TRUE(check(ok, cloud_parent(), &nodes).empty())
      << render_text(check(ok, cloud_parent(), &nodes));
  const error_list unknown = check(yaml_snapshot({{"gpu-9", {}}}), cloud_parent(), &nodes);
  EXPECT_EQ(keys_of(unknown),
            (std::vector<error_key>{{"S3", "nodes[gpu-9]", error_type::not_found}}));
  const error_list unselected = check(yaml_snapshot({{"cpu-1", {}}}), cloud_parent(), &nodes);
  EXPECT_EQ(keys_of(unselected),
            (std::vector<error_key>{{"S3", "nodes[cpu-1]", error_type::not_found}}));
  // With a node list, names are not checked for DNS syntax beyond being known Nodes.
  const node_list odd = cluster(
      R"({"kind":"List","items":[{"metadata":{"name":"Odd_Name","labels":{"role":"gpu"}}}]})");
  EXPECT_TRUE(check(yaml_snapshot({{"Odd_Name", {}}}), cloud_parent(), &odd).empty());
}

TEST(SnapshotS6, ReadOnlyParentMustEqualTheNodeLabel) {
  const node_list nodes = cluster(cluster_json);
  const auto mismatch =
      yaml_snapshot({{"gpu-1", {L("topology.kubernetes.io/zone", "us-east-1b"), L(rack, "r1")}}});
  EXPECT_EQ(keys_of(check(mismatch, cloud_parent(), &nodes)),
            (std::vector<error_key>{
                {"S6", "nodes[gpu-1][topology.kubernetes.io/zone]", error_type::invalid}}));
  const auto lacking = yaml_snapshot({{"gpu-2", {L("topology.kubernetes.io/zone", "us-east-1a")}}});
  EXPECT_EQ(rules_of(check(lacking, cloud_parent(), &nodes)), (std::set<std::string>{"S6"}));
  // Checked only once S1-S9 pass: a blank revision hides the mismatch.
  const auto both =
      yaml_snapshot({{"gpu-1", {L("topology.kubernetes.io/zone", "us-east-1b")}}}, "' '");
  EXPECT_EQ(rules_of(check(both, cloud_parent(), &nodes)), (std::set<std::string>{"S2"}));
  // Without a node list there is nothing to compare with.
  EXPECT_TRUE(check(mismatch, cloud_parent()).empty());
}

TEST(SnapshotS5, PublishableKeysFollowTheSource) {
  const topology_source writer = source_from(R"(apiVersion: worker.gpustack.ai/v1
kind: TopologySource
metadata: {name: dc}
spec:
  levels: [topology.gpustack.ai/region, topology.example.com/rack]
  additionalWritePrefix: topology.example.com/
  configMap:
    configMapRef: {namespace: gpustack-system, name: inv}
    key: snapshot.yaml
    maxStaleness: 10m
)");
  const auto text = yaml_snapshot({{"w", {L(region, "a"), L("topology.example.com/rack", "r")}}});
  EXPECT_TRUE(check(text, writer).empty()) << render_text(check(text, writer));
  topology_source no_prefix = writer;
  no_prefix.additional_write_prefix.reset();
  EXPECT_EQ(keys_of(check(text, no_prefix)),
            (std::vector<error_key>{
                {"S5", "nodes[w][topology.example.com/rack]", error_type::forbidden}}));
}

// A valid YAML snapshot of exactly `size` bytes (a comment pads it).
std::string yaml_of_size(std::size_t size) {
  std::string text = runbook_snapshot + "#";
  text.append(size - text.size() - 1, 'x');
  text += '\n';
  return text;
}

TEST(SnapshotS10, ReceivedSizeBothSides) {
  const std::string exact = yaml_of_size(max_snapshot_bytes);
  ASSERT_EQ(exact.size(), 1048576u);
  EXPECT_TRUE(check(exact).empty()) << render_text(check(exact));
  const std::string over = yaml_of_size(max_snapshot_bytes + 1);
  const error_list errors = check(over);
  EXPECT_EQ(keys_of(errors), (std::vector<error_key>{{"S10", "", error_type::too_long}}));
  EXPECT_EQ(rules_of(decode_snapshot(over).errors), (std::set<std::string>{"S10"}));
  // JSON padded with white space, both sides.
  std::string json = render_snapshot_json(decode_snapshot(runbook_snapshot).value);
  json.append(max_snapshot_bytes - json.size(), ' ');
  EXPECT_TRUE(check(json).empty());
  json += ' ';
  EXPECT_EQ(rules_of(check(json)), (std::set<std::string>{"S10"}));
}

// A valid snapshot whose canonical JSON rendering is exactly `size` bytes.
snapshot snapshot_rendering_to(std::size_t size) {
  snapshot s;
  s.api_version = snapshot_api_version;
  s.revision = "r1";
  auto add = [&](std::size_t i) {
    char name[32];
    std::snprintf(name, sizeof name, "worker-%06zu", i);
    s.nodes.push_back({name,
                       {{std::string(region), "region-a"},
                        {std::string(zone), "zone-a"},
                        {std::string(rack), "rack-01"}}});
  };
  add(0);
  const std::size_t one = render_snapshot_json(s).size();
  add(1);
  const std::size_t per = render_snapshot_json(s).size() - one;  // same-length names
  // Leave room for a final node whose name absorbs the remainder (100 to 100 + per bytes).
  const std::size_t count = (size - one - 100) / per + 1;
  for (std::size_t i = 2; i < count; ++i) add(i);
  const std::size_t now = render_snapshot_json(s).size();
  const std::size_t empty_node = std::string(R"(,"z":{})").size();
  s.nodes.push_back({"z" + std::string(size - now - empty_node, 'z'), {}});
  return s;
}

TEST(SnapshotS10, RenderedSizeBothSides) {
  // Node names may be long (up to 253); split the padding over a few nodes if needed.
  snapshot s = snapshot_rendering_to(max_snapshot_bytes);
  // Keep node names DNS-valid: a long "zzz..." name is split into labels of <= 63.
  std::string& name = s.nodes.back().name;
  ASSERT_LE(name.size(), 253u);
  for (std::size_t i = 63; i < name.size(); i += 64) name[i] = '.';
  ASSERT_EQ(render_snapshot_json(s).size(), max_snapshot_bytes);
  const snapshot_context ctx{&data_center(), nullptr};
  EXPECT_TRUE(validate_snapshot(s, ctx).empty()) << render_text(validate_snapshot(s, ctx));
  name += 'z';
  ASSERT_EQ(render_snapshot_json(s).size(), max_snapshot_bytes + 1);
  EXPECT_EQ(keys_of(validate_snapshot(s, ctx)),
            (std::vector<error_key>{{"S10", "", error_type::too_long}}));
}

TEST(SnapshotErrors, AllAreReportedUpToACap) {
  std::string text = "apiVersion: topology.gpustack.ai/v1alpha1\nrevision: r\nnodes:\n";
  for (int i = 0; i < 1500; ++i) text += "  w" + std::to_string(i) + ": {x/y: '!'}\n";
  const error_list errors = check(text);
  ASSERT_EQ(errors.size(), 1001u);
  EXPECT_EQ(errors.back().type, error_type::too_many);
  // 1500 nodes x (S4 + S5 + S7) errors: 1000 shown, 3500 counted in the last one.
  EXPECT_NE(errors.back().detail.find("3500 more"), std::string::npos) << errors.back().detail;
  // Just under the cap: every error, no summary.
  std::string small = "apiVersion: topology.gpustack.ai/v1alpha1\nrevision: r\nnodes:\n";
  for (int i = 0; i < 1000; ++i)
    small += "  w" + std::to_string(i) + ": {" + std::string(region) + ": '!'}\n";
  const error_list all = check(small);
  EXPECT_EQ(all.size(), 1000u);
  EXPECT_EQ(rules_of(all), (std::set<std::string>{"S7"}));
}

TEST(SnapshotValidate, DuplicatesInAStructAreReported) {
  snapshot s;
  s.api_version = snapshot_api_version;
  s.revision = "r";
  s.nodes = {{"w", {{std::string(region), "a"}, {std::string(region), "b"}}}, {"w", {}}};
  const error_list errors = validate_snapshot(s, {&data_center(), nullptr});
  EXPECT_EQ(keys_of(errors), (std::vector<error_key>{{"S1", "nodes[w][topology.gpustack.ai/region]",
                                                      error_type::duplicate},
                                                     {"S1", "nodes[w]", error_type::duplicate}}));
}

TEST(SnapshotRender, CanonicalJsonIsSortedEscapedAndDeterministic) {
  snapshot s;
  s.api_version = snapshot_api_version;
  s.revision = "r\"1\n";
  s.nodes = {{"w2", {{"b", "2"}, {"a", "1"}}}, {"w1", {}}};
  EXPECT_EQ(
      render_snapshot_json(s),
      R"({"apiVersion":"topology.gpustack.ai/v1alpha1","revision":"r\"1\n","nodes":{"w1":{},"w2":{"a":"1","b":"2"}}})");
  const std::string yaml = render_snapshot_yaml(s);
  EXPECT_EQ(yaml,
            "apiVersion: \"topology.gpustack.ai/v1alpha1\"\nrevision: \"r\\\"1\\n\"\nnodes:\n  "
            "\"w1\": {}\n"
            "  \"w2\":\n    \"a\": \"1\"\n    \"b\": \"2\"\n");
  // Both renderings decode to the same snapshot (sorted).
  const snapshot_decode_result from_json = decode_snapshot(render_snapshot_json(s));
  const snapshot_decode_result from_yaml = decode_snapshot(yaml);
  ASSERT_TRUE(from_json.ok());
  ASSERT_TRUE(from_yaml.ok()) << render_text(from_yaml.errors);
  EXPECT_EQ(render_snapshot_json(from_json.value), render_snapshot_json(s));
  EXPECT_EQ(render_snapshot_json(from_yaml.value), render_snapshot_json(s));
  EXPECT_EQ(from_yaml.value.revision, "r\"1\n");
  snapshot none;
  none.api_version = snapshot_api_version;
  none.revision = "r";
  EXPECT_EQ(render_snapshot_yaml(none),
            "apiVersion: \"topology.gpustack.ai/v1alpha1\"\nrevision: \"r\"\nnodes: {}\n");
  EXPECT_TRUE(decode_snapshot(render_snapshot_yaml(none)).ok());
}

// The same JSON text through the fast path and, behind a comment line, through the YAML
// decoder: identical snapshots and identical errors (rule, path, type).
std::string random_json(std::mt19937& rng) {
  auto pick = [&](const std::vector<std::string>& v) { return v[rng() % v.size()]; };
  const std::vector<std::string> names = {"\"worker-a\"", "\"worker-b\"", "\"w_c\"",
                                          "\"w.d\"",      "\"W\"",        "\"\""};
  const std::vector<std::string> keys = {"\"topology.gpustack.ai/region\"",
                                         "\"topology.gpustack.ai/zone\"",
                                         "\"topology.gpustack.ai/rack\"",
                                         "\"topology.gpustack.ai/profile\"",
                                         "\"kubernetes.io/os\"",
                                         "\"bad key\"",
                                         "\"<<\""};
  const std::vector<std::string> values = {"\"a\"",   "\"b\"", "\"r1\"", "\"\"",        "null",
                                           "\"x y\"", "true",  "\"-a\"", "\"\\u00e9\"", "\"\\n\"",
                                           "42",      "1.50",  "{}",     "[]"};
  std::string out = "{\"apiVersion\": ";
  out += pick(
      {"\"topology.gpustack.ai/v1alpha1\"", "\"topology.gpustack.ai/v1alpha1\"", "\"v1\"", "null"});
  out += ", \"revision\": " + pick({"\"r1\"", "\" \"", "null", "\"r2\""});
  if (rng() % 10 == 0) out += ", \"extra\": 1";
  out += ", \"nodes\": ";
  if (rng() % 12 == 0) return out + pick({"null", "[]", "\"x\""}) + "}";
  out += "{";
  const int n = static_cast<int>(rng() % 4);
  for (int i = 0; i < n; ++i) {
    if (i) out += ",\n  ";
    out += pick(names) + ": ";
    if (rng() % 10 == 0) {
      out += pick({"null", "{}", "\"x\"", "[1]"});
      continue;
    }
    out += "{";
    const int m = static_cast<int>(rng() % 4);
    for (int j = 0; j < m; ++j) {
      if (j) out += ", ";
      out += pick(keys) + ": " + pick(values);
    }
    out += "}";
  }
  return out + "}}";
}

TEST(SnapshotPaths, JsonFastPathEqualsYamlDecoderOnTheSameText) {
  std::mt19937 rng(20261129);
  int fast_valid = 0;
  for (int i = 0; i < 2000; ++i) {
    const std::string json = random_json(rng);
    const std::string yaml = "# the same text, read by the YAML decoder\n" + json;
    const snapshot_decode_result a = decode_snapshot(json);
    const snapshot_decode_result b = decode_snapshot(yaml);
    ASSERT_EQ(a.ok(), b.ok()) << json << "\n" << render_text(a.errors) << render_text(b.errors);
    if (a.ok()) {
      EXPECT_EQ(render_snapshot_json(a.value), render_snapshot_json(b.value)) << json;
      ASSERT_EQ(a.value.nodes.size(), b.value.nodes.size());
      for (std::size_t k = 0; k < a.value.nodes.size(); ++k)
        EXPECT_EQ(a.value.nodes[k].name, b.value.nodes[k].name) << json;  // document order too
    } else {
      EXPECT_EQ(rules_of(a.errors), rules_of(b.errors)) << json;
    }
    const error_list ea = check(json);
    const error_list eb = check(yaml);
    EXPECT_EQ(keys_of(ea), keys_of(eb)) << json << "\n" << render_text(ea) << render_text(eb);
    fast_valid += ea.empty() ? 1 : 0;
  }
  EXPECT_GT(fast_valid, 20);  // the generator reaches valid snapshots too
}

TEST(SnapshotPaths, JsonErrorsNameTheLinesYamlV3Names) {
  // yaml.v3 (checked with v3.0.1): "line 3: cannot unmarshal !!seq into
  // map[string]map[string]string"; a lone CR ends a line as LF does.
  for (const char* eol : {"\n", "\r\n", "\r"}) {
    const std::string json = std::string("{\"apiVersion\": \"topology.gpustack.ai/v1alpha1\",") +
                             eol + " \"revision\": \"r1\"," + eol + " \"nodes\": [\"worker-a\"]}";
    const error_list e = check(json);
    ASSERT_EQ(e.size(), 1u) << render_text(e);
    EXPECT_EQ(render_text(e),
              "[S1] nodes: Invalid value: line 3: cannot unmarshal !!seq into "
              "map[string]map[string]string\n");
  }
  // A byte-order mark sends the same text (same lines) through the YAML decoder: every
  // message is the same, word for word.
  std::mt19937 rng(20261201);
  int invalid = 0;
  for (int i = 0; i < 2000; ++i) {
    const std::string json = random_json(rng);
    const error_list ea = check(json);
    const error_list eb = check("\xef\xbb\xbf" + json);
    EXPECT_EQ(render_text(ea), render_text(eb)) << json;
    invalid += ea.empty() ? 0 : 1;
  }
  EXPECT_GT(invalid, 200);
}

}  // namespace
}  // namespace topogate::core

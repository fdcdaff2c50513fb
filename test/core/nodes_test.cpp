// Node lists as `kubectl get nodes -o json` (or -o yaml) prints them, and node selection.

#include "core/nodes.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "core/topology_source.hpp"

namespace topogate::core {
namespace {

// Trimmed from real kubectl output: everything but metadata.name/labels is ignored.
const char* kubectl_json = R"({
    "apiVersion": "v1",
    "items": [
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "annotations": {"node.alpha.kubernetes.io/ttl": "0"},
                "creationTimestamp": "2026-11-01T10:00:00Z",
                "labels": {
                    "kubernetes.io/hostname": "worker-b",
                    "topology.kubernetes.io/zone": "us-east-1b",
                    "beta.kubernetes.io/arch": "amd64"
                },
                "name": "worker-b",
                "resourceVersion": "123",
                "uid": "0b6f1c1e-0000-0000-0000-000000000002"
            },
            "spec": {"podCIDR": "10.244.1.0/24", "taints": [{"effect": "NoSchedule", "key": "gpu"}]},
            "status": {"capacity": {"cpu": "8", "nvidia.com/gpu": 4}, "conditions": [{"type": "Ready", "status": "True"}]}
        },
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": "worker-a", "labels": {"kubernetes.io/hostname": "worker-a", "role": "gpu"}},
            "status": {}
        },
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": "worker-c"}
        }
    ],
    "kind": "List",
    "metadata": {"resourceVersion": ""}
})";

TEST(NodeList, ParsesKubectlJsonSortedByNameWithSortedLabels) {
  const node_list_result r = parse_node_list(kubectl_json);
  ASSERT_TRUE(r.ok()) << render_text(r.errors);
  ASSERT_EQ(r.list.nodes.size(), 3u);
  EXPECT_EQ(r.list.nodes[0].name, "worker-a");
  EXPECT_EQ(r.list.nodes[1].name, "worker-b");
  EXPECT_EQ(r.list.nodes[2].name, "worker-c");
  const cluster_node& b = r.list.nodes[1];
  ASSERT_EQ(b.labels.size(), 3u);
  EXPECT_EQ(b.labels[0].first, "beta.kubernetes.io/arch");
  EXPECT_EQ(b.labels[2].first, "topology.kubernetes.io/zone");
  ASSERT_NE(b.label("topology.kubernetes.io/zone"), nullptr);
  EXPECT_EQ(*b.label("topology.kubernetes.io/zone"), "us-east-1b");
  EXPECT_EQ(b.label("topology.kubernetes.io/region"), nullptr);
  EXPECT_TRUE(r.list.nodes[2].labels.empty());
  ASSERT_NE(r.list.find("worker-c"), nullptr);
  EXPECT_EQ(r.list.find("worker-c")->name, "worker-c");
  EXPECT_EQ(r.list.find("worker-d"), nullptr);
  EXPECT_EQ(r.list.find(""), nullptr);
}

TEST(NodeList, YamlAndNodeListKindGiveTheSameList) {
  const char* yaml = R"(apiVersion: v1
kind: NodeList
items:
- metadata:
    name: worker-b
    labels:
      topology.kubernetes.io/zone: us-east-1b
      kubernetes.io/hostname: worker-b
      beta.kubernetes.io/arch: amd64
- metadata:
    name: worker-a
    labels: {kubernetes.io/hostname: worker-a, role: gpu}
- metadata:
    name: worker-c
)";
  const node_list_result y = parse_node_list(yaml);
  const node_list_result j = parse_node_list(kubectl_json);
  ASSERT_TRUE(y.ok()) << render_text(y.errors);
  ASSERT_EQ(y.list.nodes.size(), j.list.nodes.size());
  for (std::size_t i = 0; i < y.list.nodes.size(); ++i) {
    EXPECT_EQ(y.list.nodes[i].name, j.list.nodes[i].name);
    EXPECT_EQ(y.list.nodes[i].labels, j.list.nodes[i].labels);
  }
}

TEST(NodeList, SingleNodeAndEmptyList) {
  const node_list_result one =
      parse_node_list(R"({"kind":"Node","metadata":{"name":"n1","labels":{"a":"b"}}})");
  ASSERT_TRUE(one.ok());
  ASSERT_EQ(one.list.nodes.size(), 1u);
  EXPECT_EQ(one.list.nodes[0].name, "n1");
  const node_list_result none = parse_node_list(R"({"kind":"List","apiVersion":"v1","items":[]})");
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none.list.nodes.empty());
}

struct bad_list {
  const char* name;
  std::string text;
  std::string path;
};

class NodeListRejects : public ::testing::TestWithParam<bad_list> {};

TEST_P(NodeListRejects, WithAPath) {
  const node_list_result r = parse_node_list(GetParam().text);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.errors.front().path, GetParam().path) << render_text(r.errors);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, NodeListRejects,
    ::testing::Values(
        bad_list{"wrong_kind", R"({"kind":"PodList","items":[]})", "kind"},
        bad_list{"items_not_a_list", R"({"kind":"List","items":{}})", "items"},
        bad_list{"item_not_an_object", R"({"kind":"List","items":[1]})", "items[0]"},
        bad_list{"missing_name", R"({"kind":"List","items":[{"metadata":{}}]})",
                 "items[0].metadata.name"},
        bad_list{"label_not_a_string",
                 R"({"kind":"List","items":[{"metadata":{"name":"a","labels":{"x":{}}}}]})",
                 "items[0].metadata.labels[x]"},
        bad_list{"duplicate_name",
                 R"({"kind":"List","items":[{"metadata":{"name":"a"}},{"metadata":{"name":"a"}}]})",
                 "items[a]"},
        bad_list{"yaml_missing_name", "kind: List\nitems:\n- metadata: {labels: {}}\n",
                 "items[0].metadata.name"},
        bad_list{"not_yaml", "kind: List\nitems: [\n", "items"}),
    [](const auto& param_info) { return std::string(param_info.param.name); });

// A cursor answers exactly as find() does, whatever the order of the names it is asked for:
// sorted (the fast path, misses between, before and after the Nodes included), repeated,
// backwards and shuffled.
TEST(NodeListCursor, AnswersAsFindInAnyOrder) {
  node_list list;
  for (int i = 0; i < 1000; i += 2) list.nodes.push_back({"node-" + std::to_string(10000 + i), {}});
  std::vector<std::string> names = {"a", "node-0", "zzz"};
  for (int i = 0; i < 1002; ++i) names.push_back("node-" + std::to_string(10000 + i));
  auto check = [&](const std::vector<std::string>& order, const char* what) {
    node_list::cursor c(list);
    std::size_t found = 0;
    for (const auto& n : order) {
      const cluster_node* want = list.find(n);
      EXPECT_EQ(c.find(n), want) << what << ": " << n;
      found += want != nullptr;
    }
    return found;
  };
  auto sorted = names;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(check(sorted, "sorted"), 500u);
  auto twice = sorted;
  twice.insert(twice.end(), sorted.begin(), sorted.end());
  std::sort(twice.begin(), twice.end());
  EXPECT_EQ(check(twice, "each twice"), 1000u);
  auto backwards = sorted;
  std::reverse(backwards.begin(), backwards.end());
  EXPECT_EQ(check(backwards, "backwards"), 500u);
  auto shuffled = names;
  std::shuffle(shuffled.begin(), shuffled.end(), std::mt19937(7));
  EXPECT_EQ(check(shuffled, "shuffled"), 500u);
  node_list empty;
  node_list::cursor none(empty);
  EXPECT_EQ(none.find("node-10000"), nullptr);
}

// Copies of a Node's labels share one vector; a write through a copy changes that copy only.
TEST(NodeLabels, CopiesShareAndAWriteCopiesFirst) {
  node_labels a = {{"k1", "v1"}, {"k2", "v2"}};
  node_labels b = a;
  EXPECT_EQ(&a.get(), &b.get());  // shared, not copied
  EXPECT_TRUE(a == b);
  b.emplace_back("k3", "v3");
  EXPECT_NE(&a.get(), &b.get());
  EXPECT_EQ(a.size(), 2u);
  EXPECT_EQ(b.size(), 3u);
  EXPECT_FALSE(a == b);
  EXPECT_EQ(b[2].second, "v3");
  node_labels c;  // none: empty, and equal to another empty set
  EXPECT_TRUE(c.empty());
  EXPECT_TRUE(c == node_labels(node_labels::storage{}));
  c.push_back({"k", "v"});
  EXPECT_EQ(c.front().first, "k");
  // A list's copy (as select_nodes makes) keeps the labels it was taken with.
  node_list list;
  list.nodes.push_back({"n", a});
  const node_list copy = list;
  list.nodes.edit(0).labels.edit()[0].second = "changed";
  EXPECT_EQ(*copy.find("n")->label("k1"), "v1");
  EXPECT_EQ(*list.find("n")->label("k1"), "changed");
  EXPECT_EQ(*a.get().front().second.data(), 'v');
}

TEST(SelectNodes, NodeSelectorFiltersAndAbsentSelectsAll) {
  const node_list all = parse_node_list(kubectl_json).list;
  topology_source src;
  EXPECT_EQ(select_nodes(all, src).nodes.size(), 3u);
  src.node_selector = label_selector{};
  EXPECT_EQ(select_nodes(all, src).nodes.size(), 3u);  // {} selects every Node
  src.node_selector->match_labels = {{"role", "gpu"}};
  const node_list gpu = select_nodes(all, src);
  ASSERT_EQ(gpu.nodes.size(), 1u);
  EXPECT_EQ(gpu.nodes[0].name, "worker-a");
  ASSERT_NE(gpu.find("worker-a"), nullptr);
  EXPECT_EQ(gpu.find("worker-b"), nullptr);
}

}  // namespace
}  // namespace topogate::core

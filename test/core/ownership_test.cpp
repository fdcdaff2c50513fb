// Ownership conflicts between writing TopologySources (docs/rules.md, "Ownership conflicts").
#include "core/ownership.hpp"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

namespace topogate::core {
namespace {

using labels_t = std::vector<std::pair<std::string, std::string>>;

struct fixture {
  std::vector<std::string> rack{"topology.gpustack.ai/rack"};
  std::vector<std::string> zone_rack{"topology.gpustack.ai/zone", "topology.gpustack.ai/rack"};
  std::vector<std::string> zone{"topology.gpustack.ai/zone"};
  label_selector pool_a{{{"pool", "a"}}, {}};
  label_selector pool_b{{{"pool", "b"}}, {}};
  labels_t la{{"pool", "a"}}, lb{{"pool", "b"}};
  std::vector<ownership_node> nodes{{"n2", &la}, {"n1", &la}, {"n3", &lb}};
};

TEST(Ownership, OverlappingLevelsAndSharedNodesConflict) {
  fixture f;
  const auto c = find_ownership_conflicts(
      {{"inventory-b", &f.zone_rack, nullptr, true}, {"inventory-a", &f.rack, &f.pool_a, true}},
      f.nodes);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].first, "inventory-a");
  EXPECT_EQ(c[0].second, "inventory-b");
  EXPECT_EQ(c[0].levels, (std::vector<std::string>{"topology.gpustack.ai/rack"}));
  EXPECT_EQ(c[0].nodes, (std::vector<std::string>{"n1", "n2"}));
  const std::string text = describe(c[0]);
  EXPECT_NE(text.find("inventory-a and inventory-b"), std::string::npos) << text;
  EXPECT_NE(text.find("2 Nodes (n1, n2)"), std::string::npos) << text;
  EXPECT_NE(text.find("OwnershipConflict"), std::string::npos) << text;
}

TEST(Ownership, EachConditionAlone) {
  fixture f;
  // Disjoint levels: no conflict, even on the same Nodes.
  EXPECT_TRUE(find_ownership_conflicts(
                  {{"a", &f.rack, nullptr, true}, {"b", &f.zone, nullptr, true}}, f.nodes)
                  .empty());
  // Same levels, selectors without a shared Node: no conflict.
  EXPECT_TRUE(find_ownership_conflicts(
                  {{"a", &f.rack, &f.pool_a, true}, {"b", &f.rack, &f.pool_b, true}}, f.nodes)
                  .empty());
  // A read-only (nodeLabels) source never conflicts.
  EXPECT_TRUE(find_ownership_conflicts(
                  {{"a", &f.rack, nullptr, true}, {"b", &f.rack, nullptr, false}}, f.nodes)
                  .empty());
  // No Nodes known: nothing is shared.
  EXPECT_TRUE(
      find_ownership_conflicts({{"a", &f.rack, nullptr, true}, {"b", &f.rack, nullptr, true}}, {})
          .empty());
  // Both select everything with the same level: a conflict over every Node.
  const auto all = find_ownership_conflicts(
      {{"a", &f.rack, nullptr, true}, {"b", &f.rack, nullptr, true}}, f.nodes);
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].nodes.size(), 3u);
}

TEST(Ownership, ThreeSourcesEveryPair) {
  fixture f;
  const auto c = find_ownership_conflicts({{"c", &f.rack, nullptr, true},
                                           {"a", &f.rack, &f.pool_a, true},
                                           {"b", &f.rack, &f.pool_b, true}},
                                          f.nodes);
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[0].first + "/" + c[0].second, "a/c");
  EXPECT_EQ(c[1].first + "/" + c[1].second, "b/c");
  EXPECT_EQ(c[1].nodes, (std::vector<std::string>{"n3"}));
  EXPECT_NE(describe(c[1]).find("1 Node (n3)"), std::string::npos) << describe(c[1]);
}

}  // namespace
}  // namespace topogate::core

// Profile assignment of a revision and the impact of replacing one revision by another
// (the runbook's "Change a live hierarchy").
#include "core/profile_impact.hpp"

#include <gtest/gtest.h>

#include <algorithm>

#include "core/profile.hpp"

namespace topogate::core {
namespace {

constexpr std::string_view zone = "topology.gpustack.ai/zone";
constexpr std::string_view rack = "topology.gpustack.ai/rack";
constexpr std::string_view std_zone = "topology.kubernetes.io/zone";
constexpr std::string_view tier1 = "fabric.topograph.run/tier-1";
constexpr std::string_view tier2 = "fabric.topograph.run/tier-2";

topology_source source_with(std::vector<std::string> levels) {
  topology_source s;
  s.api_version = "worker.gpustack.ai/v1";
  s.name = "dc";
  s.levels = std::move(levels);
  s.webhook = webhook_source{};
  return s;
}

snapshot snap(std::string revision,
              std::vector<std::pair<std::string, std::vector<snapshot_label>>> nodes) {
  snapshot s;
  s.api_version = std::string(snapshot_api_version);
  s.revision = std::move(revision);
  for (auto& [name, labels] : nodes) s.nodes.push_back({name, std::move(labels)});
  return s;
}

snapshot_label L(std::string_view k, std::string v) { return {std::string(k), std::move(v)}; }

std::string id_of(std::vector<std::string> keys) {
  keys.emplace_back(hostname_label);
  return profile_id(keys);
}

bool has_consequence(const profile_impact& im, std::string_view word) {
  return std::any_of(im.consequences.begin(), im.consequences.end(),
                     [&](const std::string& c) { return c.find(word) != std::string::npos; });
}

// The runbook's four-node, two-zone cluster.
snapshot zone_only(std::string rev) {
  return snap(std::move(rev), {{"worker-a", {L(zone, "zone-a")}},
                               {"worker-b", {L(zone, "zone-a")}},
                               {"worker-c", {L(zone, "zone-b")}},
                               {"worker-d", {L(zone, "zone-b")}}});
}

snapshot zone_and_rack(std::string rev) {
  return snap(std::move(rev), {{"worker-a", {L(zone, "zone-a"), L(rack, "rack-01")}},
                               {"worker-b", {L(zone, "zone-a"), L(rack, "rack-02")}},
                               {"worker-c", {L(zone, "zone-b"), L(rack, "rack-03")}},
                               {"worker-d", {L(zone, "zone-b"), L(rack, "rack-04")}}});
}

TEST(AssignProfiles, LongestPopulatedPrefixPerNodeSortedByName) {
  const auto src = source_with({std::string(zone), std::string(rack)});
  auto s = snap("r", {{"worker-b", {L(zone, "zone-a")}},
                      {"worker-a", {L(zone, "zone-a"), L(rack, "rack-01")}},
                      {"worker-c", {}}});
  const auto pa = assign_profiles(src, &s, nullptr);
  ASSERT_EQ(pa.nodes.size(), 3u);
  EXPECT_EQ(pa.nodes[0].node, "worker-a");
  EXPECT_EQ(pa.nodes[1].node, "worker-b");
  EXPECT_EQ(pa.nodes[2].node, "worker-c");
  EXPECT_EQ(pa.profile_of(pa.nodes[0]).id, id_of({std::string(zone), std::string(rack)}));
  EXPECT_EQ(pa.nodes[0].values(), (std::vector<std::string>{"zone-a", "rack-01"}));
  EXPECT_EQ(pa.profile_of(pa.nodes[1]).id, id_of({std::string(zone)}));
  EXPECT_EQ(pa.profile_of(pa.nodes[2]).id, id_of({}));
  // Deepest profile first, each counted once per Node.
  ASSERT_EQ(pa.profiles.size(), 3u);
  EXPECT_EQ(pa.profiles[0].levels.size(), 3u);
  EXPECT_EQ(pa.profiles[2].levels, (std::vector<std::string>{std::string(hostname_label)}));
  for (const auto& p : pa.profiles) EXPECT_EQ(p.nodes, 1u);
  EXPECT_NE(pa.find("worker-b"), nullptr);
  EXPECT_EQ(pa.find("worker-x"), nullptr);
}

// The Nodes of one domain share one vector of values, whether they are neighbours by name or
// not; Nodes whose values differ in any level, or in depth, do not.
TEST(AssignProfiles, NodesWithTheSameValuesShareThem) {
  const auto src = source_with({std::string(zone), std::string(rack)});
  auto s = snap("r", {{"worker-a", {L(zone, "zone-a"), L(rack, "rack-01")}},
                      {"worker-b", {L(zone, "zone-a"), L(rack, "rack-01")}},
                      {"worker-c", {L(zone, "zone-a"), L(rack, "rack-02")}},
                      {"worker-d", {L(zone, "zone-a"), L(rack, "rack-01")}},
                      {"worker-e", {L(zone, "zone-b"), L(rack, "rack-01")}},
                      {"worker-f", {L(zone, "zone-a")}},
                      {"worker-g", {}}});
  const auto pa = assign_profiles(src, &s, nullptr);
  ASSERT_EQ(pa.nodes.size(), 7u);
  const auto& v = [&](std::size_t i) { return pa.nodes[i].level_values; };
  EXPECT_EQ(v(0), v(1)) << "neighbours in one rack";
  EXPECT_EQ(v(0), v(3)) << "the same rack after another";
  EXPECT_NE(v(0), v(2));
  EXPECT_NE(v(0), v(4)) << "the same rack name in another zone";
  EXPECT_NE(v(0), v(5));
  EXPECT_EQ(v(6), nullptr);
  EXPECT_EQ(pa.nodes[3].values(), (std::vector<std::string>{"zone-a", "rack-01"}));
  EXPECT_EQ(pa.nodes[4].values(), (std::vector<std::string>{"zone-b", "rack-01"}));
  EXPECT_EQ(pa.nodes[5].values(), (std::vector<std::string>{"zone-a"}));
}

TEST(AssignProfiles, SelectedNodesOutsideTheSnapshotAreManagedToo) {
  // A writable key comes from the snapshot only (the Node's value is the previous projection);
  // the read-only standard zone is read from the Node.
  const auto src = source_with({std::string(std_zone), std::string(rack)});
  auto s = snap("r", {{"worker-a", {L(std_zone, "us-east-1a"), L(rack, "rack-01")}}});
  node_list nodes;
  nodes.nodes.push_back({"worker-a", {{std::string(std_zone), "us-east-1a"}}});
  nodes.nodes.push_back(
      {"worker-b", {{std::string(rack), "rack-stale"}, {std::string(std_zone), "us-east-1a"}}});
  nodes.nodes.push_back({"worker-c", {}});
  const auto pa = assign_profiles(src, &s, &nodes);
  ASSERT_EQ(pa.nodes.size(), 3u);
  EXPECT_EQ(pa.profile_of(*pa.find("worker-a")).id,
            id_of({std::string(std_zone), std::string(rack)}));
  EXPECT_EQ(pa.profile_of(*pa.find("worker-b")).id, id_of({std::string(std_zone)}));
  EXPECT_EQ(pa.profile_of(*pa.find("worker-c")).id, id_of({}));
  // Without a snapshot (nodeLabels), every level is read from the Node.
  const auto labels_only = assign_profiles(src, nullptr, &nodes);
  EXPECT_EQ(labels_only.profile_of(*labels_only.find("worker-b")).id,
            id_of({std::string(std_zone), std::string(rack)}));
}

TEST(ProfileImpact, LiveHierarchyChangeZoneToZoneAndRackChangesEveryNode) {
  const auto src = source_with({std::string(zone), std::string(rack)});
  const auto before_snap = zone_only("inventory-41");
  const auto after_snap = zone_and_rack("inventory-42");
  const auto before = assign_profiles(src, &before_snap, nullptr);
  const auto after = assign_profiles(src, &after_snap, nullptr);
  const auto im = compute_profile_impact(before, after);

  EXPECT_FALSE(im.empty());
  EXPECT_EQ(im.changed_count, 4u);
  EXPECT_EQ(im.added_count, 0u);
  EXPECT_EQ(im.removed_count, 0u);
  EXPECT_EQ(im.profile_changes(), 4u);
  ASSERT_EQ(im.changed.size(), 4u);
  const auto old_id = id_of({std::string(zone)});
  const auto new_id = id_of({std::string(zone), std::string(rack)});
  for (const auto& c : im.changed) {
    EXPECT_EQ(c.from, old_id);
    EXPECT_EQ(c.to, new_id);
  }
  EXPECT_EQ(im.changed.front().node, "worker-a");
  ASSERT_EQ(im.appeared.size(), 1u);
  EXPECT_EQ(im.appeared[0].id, new_id);
  EXPECT_EQ(im.appeared[0].nodes, 4u);
  ASSERT_EQ(im.disappeared.size(), 1u);
  EXPECT_EQ(im.disappeared[0].id, old_id);
  EXPECT_EQ(im.flavor_changes(), 2u);
  // The runbook's steps for a flavor-set change: replacement flavors, HoldAndDrain, eviction
  // and readmission, old flavors going once unreferenced.
  EXPECT_TRUE(has_consequence(im, "replacement ResourceFlavors"));
  EXPECT_TRUE(has_consequence(im, "HoldAndDrain"));
  EXPECT_TRUE(has_consequence(im, "readmits"));
  EXPECT_TRUE(has_consequence(im, "references clear"));
  EXPECT_TRUE(has_consequence(im, "TopologyReady=False"));

  const auto json = render_impact_json(im);
  EXPECT_NE(json.find("\"profileChanges\":4"), std::string::npos);
  EXPECT_NE(json.find("\"truncated\":false"), std::string::npos);
  const auto text = render_impact_text(im);
  EXPECT_NE(text.find(new_id), std::string::npos);
}

TEST(ProfileImpact, UnchangedRevisionHasEmptyImpact) {
  const auto src = source_with({std::string(zone), std::string(rack)});
  const auto a = zone_and_rack("inventory-42");
  const auto b = zone_and_rack("inventory-43");  // another revision id, same labels
  const auto im =
      compute_profile_impact(assign_profiles(src, &a, nullptr), assign_profiles(src, &b, nullptr));
  EXPECT_TRUE(im.empty());
  EXPECT_EQ(im.profile_changes(), 0u);
  EXPECT_EQ(im.flavor_changes(), 0u);
  EXPECT_TRUE(im.consequences.empty());
  EXPECT_NE(render_impact_json(im).find("\"empty\":true"), std::string::npos);
}

TEST(ProfileImpact, MovingANodeToAnotherRackIsNotAProfileChange) {
  const auto src = source_with({std::string(zone), std::string(rack)});
  const auto a = zone_and_rack("1");
  auto b = zone_and_rack("2");
  b.nodes[0].labels[1].value = "rack-02";
  const auto im =
      compute_profile_impact(assign_profiles(src, &a, nullptr), assign_profiles(src, &b, nullptr));
  EXPECT_TRUE(im.empty());
}

TEST(ProfileImpact, AddingANodeWithAnExistingProfileDrainsNothing) {
  const auto src = source_with({std::string(zone), std::string(rack)});
  const auto a = zone_and_rack("1");
  auto b = zone_and_rack("2");
  b.nodes.push_back({"worker-e", {L(zone, "zone-b"), L(rack, "rack-04")}});
  const auto im =
      compute_profile_impact(assign_profiles(src, &a, nullptr), assign_profiles(src, &b, nullptr));
  EXPECT_FALSE(im.empty());
  EXPECT_EQ(im.added_count, 1u);
  ASSERT_EQ(im.added.size(), 1u);
  EXPECT_EQ(im.added[0].node, "worker-e");
  EXPECT_TRUE(im.added[0].from.empty());
  EXPECT_EQ(im.added[0].to, id_of({std::string(zone), std::string(rack)}));
  EXPECT_EQ(im.profile_changes(), 0u);
  EXPECT_EQ(im.flavor_changes(), 0u);
  EXPECT_FALSE(has_consequence(im, "HoldAndDrain"));
}

TEST(ProfileImpact, AddingANodeWithANewProfileChangesTheFlavorSet) {
  const auto src = source_with({std::string(zone), std::string(rack)});
  const auto a = zone_and_rack("1");
  auto b = zone_and_rack("2");
  b.nodes.push_back({"worker-e", {L(zone, "zone-b")}});
  const auto im =
      compute_profile_impact(assign_profiles(src, &a, nullptr), assign_profiles(src, &b, nullptr));
  EXPECT_EQ(im.added_count, 1u);
  EXPECT_EQ(im.profile_changes(), 0u);
  ASSERT_EQ(im.appeared.size(), 1u);
  EXPECT_EQ(im.appeared[0].id, id_of({std::string(zone)}));
  EXPECT_TRUE(im.disappeared.empty());
  EXPECT_TRUE(has_consequence(im, "HoldAndDrain"));
}

TEST(ProfileImpact, RemovedNodeLosesItsProfile) {
  const auto src = source_with({std::string(zone), std::string(rack)});
  const auto a = zone_and_rack("1");
  auto b = zone_and_rack("2");
  b.nodes.erase(b.nodes.begin() + 3);
  const auto im =
      compute_profile_impact(assign_profiles(src, &a, nullptr), assign_profiles(src, &b, nullptr));
  EXPECT_EQ(im.removed_count, 1u);
  ASSERT_EQ(im.removed.size(), 1u);
  EXPECT_EQ(im.removed[0].node, "worker-d");
  EXPECT_TRUE(im.removed[0].to.empty());
  EXPECT_EQ(im.profile_changes(), 1u);
  EXPECT_EQ(im.flavor_changes(), 0u);
}

TEST(ProfileImpact, TierRunsAreOrderedCoarsestFirst) {
  // Declared fine-first; the profile lists tier-2 before tier-1 whichever order the source uses.
  const auto fine_first = source_with({std::string(tier1), std::string(tier2)});
  const auto coarse_first = source_with({std::string(tier2), std::string(tier1)});
  const auto before = snap("1", {{"n1", {L(tier2, "spine-1")}}});
  const auto after = snap("2", {{"n1", {L(tier2, "spine-1"), L(tier1, "leaf-1")}}});
  for (const auto* src : {&fine_first, &coarse_first}) {
    const auto im = compute_profile_impact(assign_profiles(*src, &before, nullptr),
                                           assign_profiles(*src, &after, nullptr));
    EXPECT_EQ(im.changed_count, 1u);
    ASSERT_EQ(im.appeared.size(), 1u);
    EXPECT_EQ(im.appeared[0].levels,
              (std::vector<std::string>{std::string(tier2), std::string(tier1),
                                        std::string(hostname_label)}));
    ASSERT_EQ(im.disappeared.size(), 1u);
    EXPECT_EQ(im.disappeared[0].levels,
              (std::vector<std::string>{std::string(tier2), std::string(hostname_label)}));
  }
  // tier-1 alone is a fine suffix without its parent: hostname only.
  const auto leaf_only = snap("3", {{"n1", {L(tier1, "leaf-1")}}});
  const auto pa = assign_profiles(fine_first, &leaf_only, nullptr);
  EXPECT_EQ(pa.profile_of(pa.nodes[0]).id, id_of({}));
}

TEST(ProfileImpact, ListsAreCappedCountsAreNot) {
  const auto src = source_with({std::string(zone), std::string(rack)});
  snapshot a = snap("1", {});
  snapshot b = snap("2", {});
  for (int i = 0; i < 7; ++i) {
    const auto name = "n" + std::to_string(i);
    a.nodes.push_back({name, {L(zone, "z")}});
    b.nodes.push_back({name, {L(zone, "z"), L(rack, "r" + std::to_string(i))}});
  }
  const auto at_cap = compute_profile_impact(assign_profiles(src, &a, nullptr),
                                             assign_profiles(src, &b, nullptr), 7);
  EXPECT_EQ(at_cap.changed.size(), 7u);
  EXPECT_NE(render_impact_json(at_cap).find("\"truncated\":false"), std::string::npos);
  const auto over = compute_profile_impact(assign_profiles(src, &a, nullptr),
                                           assign_profiles(src, &b, nullptr), 6);
  EXPECT_EQ(over.changed_count, 7u);
  EXPECT_EQ(over.changed.size(), 6u);
  EXPECT_NE(render_impact_json(over).find("\"truncated\":true"), std::string::npos);
}

TEST(ProfileImpact, FirstRevisionAddsEveryNode) {
  const auto src = source_with({std::string(zone), std::string(rack)});
  const auto s = zone_and_rack("1");
  const auto im = compute_profile_impact(profile_assignment{}, assign_profiles(src, &s, nullptr));
  EXPECT_EQ(im.added_count, 4u);
  EXPECT_EQ(im.profile_changes(), 0u);
  EXPECT_EQ(im.appeared.size(), 1u);
}

// The cluster as the consumer left it: each Node's topology.gpustack.ai/profile label.
node_list labelled(std::vector<std::pair<std::string, std::string>> node_profile) {
  node_list l;
  for (auto& [name, profile] : node_profile) {
    cluster_node n;
    n.name = name;
    node_labels::storage labels = {{std::string(hostname_label), name}};
    if (!profile.empty()) labels.insert(labels.begin(), {"topology.gpustack.ai/profile", profile});
    std::sort(labels.begin(), labels.end());
    n.labels = std::move(labels);
    l.nodes.push_back(std::move(n));
  }
  return l;
}

TEST(ProfilesFromNodeLabels, EachLabelledNodeKeepsTheProfileItCarries) {
  const auto zone_id = id_of({std::string(zone)});
  const auto pa = profiles_from_node_labels(labelled({{"worker-a", zone_id},
                                                      {"worker-b", zone_id},
                                                      {"worker-c", ""},
                                                      {"worker-d", "fnv64-other"}}));
  ASSERT_EQ(pa.nodes.size(), 3u);  // worker-c carries no profile: not assigned
  EXPECT_EQ(pa.profiles.size(), 2u);
  ASSERT_NE(pa.find("worker-a"), nullptr);
  EXPECT_EQ(pa.profile_of(*pa.find("worker-a")).id, zone_id);
  EXPECT_EQ(pa.profile_of(*pa.find("worker-a")).nodes, 2u);
  EXPECT_TRUE(pa.profile_of(*pa.find("worker-a")).levels.empty());  // unknown from a label
  EXPECT_EQ(pa.find("worker-c"), nullptr);
  EXPECT_EQ(pa.profile_of(*pa.find("worker-d")).id, "fnv64-other");
  EXPECT_TRUE(profiles_from_node_labels(node_list{}).nodes.empty());
}

// A restart with zone -> zone+rack: measured against the labels, exactly the Nodes whose
// label the consumer will change are listed; a Node already on its new profile is not.
TEST(ProfilesFromNodeLabels, HierarchyChangeAfterARestartNamesTheNodesWhoseLabelChanges) {
  const auto src = source_with({std::string(zone), std::string(rack)});
  const auto zone_id = id_of({std::string(zone)});
  const auto rack_id = id_of({std::string(zone), std::string(rack)});
  const auto cluster = labelled(
      {{"worker-a", zone_id}, {"worker-b", zone_id}, {"worker-c", rack_id}, {"worker-d", ""}});
  const auto s = zone_and_rack("2");
  auto im = compute_profile_impact(profiles_from_node_labels(cluster),
                                   assign_profiles(src, &s, &cluster));
  im.baseline = impact_baseline::node_labels;
  ASSERT_EQ(im.changed_count, 2u);
  EXPECT_EQ(im.changed[0].node, "worker-a");
  EXPECT_EQ(im.changed[0].from, zone_id);
  EXPECT_EQ(im.changed[0].to, rack_id);
  EXPECT_EQ(im.changed[1].node, "worker-b");
  EXPECT_EQ(im.added_count, 1u);  // worker-d had no profile
  EXPECT_EQ(im.added[0].node, "worker-d");
  ASSERT_EQ(im.disappeared.size(), 1u);
  EXPECT_EQ(im.disappeared[0].id, zone_id);
  EXPECT_TRUE(im.appeared.empty());  // the rack profile is already in use (worker-c)
  const auto json = render_impact_json(im);
  EXPECT_NE(json.find("\"baseline\":\"nodeLabels\""), std::string::npos);
  EXPECT_NE(render_impact_text(im).find("against the Nodes' topology.gpustack.ai/profile labels"),
            std::string::npos);
  EXPECT_NE(render_impact_json(compute_profile_impact(profile_assignment{}, profile_assignment{}))
                .find("\"baseline\":\"revision\""),
            std::string::npos);
}

}  // namespace
}  // namespace topogate::core

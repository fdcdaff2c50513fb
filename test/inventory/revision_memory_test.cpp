// What a revision keeps, and that keeping less changes nothing a reader sees: the YAML body
// is rendered on first use (once, for every concurrent reader), a revision whose JSON body is
// exactly the accepted snapshot keeps no second copy of it, and a snapshot re-validated after
// a Node change is the accepted one in its document order.

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <thread>
#include <vector>

#include "core/snapshot.hpp"
#include "inventory/inventory.hpp"
#include "test_util.hpp"

namespace topogate::inventory {
namespace {

using testing::manual_clock;

inventory::offer_options from(std::string origin) {
  return {std::move(origin), "", std::nullopt, std::nullopt};
}

// Nodes out of name order and labels out of key order: the canonical rendering reorders both.
constexpr std::string_view unordered_yaml = R"(apiVersion: topology.gpustack.ai/v1alpha1
revision: rev-u
nodes:
  worker-2:
    topology.gpustack.ai/zone: zone-0
    topology.gpustack.ai/region: region-a
    topology.gpustack.ai/rack: rack-0
  worker-0: {topology.gpustack.ai/rack: rack-0, topology.gpustack.ai/region: region-a, topology.gpustack.ai/zone: zone-0}
  worker-1: {topology.gpustack.ai/region: region-a, topology.gpustack.ai/zone: zone-0, topology.gpustack.ai/rack: rack-0}
)";

core::snapshot decoded(std::string_view text) {
  auto d = core::decode_snapshot(text);
  EXPECT_TRUE(d.ok()) << core::render_text(d.errors);
  return std::move(d.value);
}

bool same(const core::snapshot& a, const core::snapshot& b) {
  if (a.api_version != b.api_version || a.revision != b.revision ||
      a.nodes.size() != b.nodes.size())
    return false;
  for (std::size_t i = 0; i < a.nodes.size(); ++i) {
    const auto& x = a.nodes[i];
    const auto& y = b.nodes[i];
    if (x.name != y.name || x.labels.size() != y.labels.size()) return false;
    for (std::size_t j = 0; j < x.labels.size(); ++j) {
      if (x.labels[j].key != y.labels[j].key || x.labels[j].value != y.labels[j].value)
        return false;
    }
  }
  return true;
}

TEST(RevisionMemory, YamlBodyIsTheDirectRenderingOfTheAcceptedSnapshot) {
  manual_clock clk;
  inventory inv(testing::config(), clk);
  ASSERT_TRUE(inv.offer(unordered_yaml, from("push")).accepted);
  const auto rev = inv.current();
  ASSERT_NE(rev, nullptr);
  const auto snap = decoded(unordered_yaml);
  EXPECT_EQ(rev->json_body(), core::render_snapshot_json(snap));
  EXPECT_EQ(rev->yaml_body(), core::render_snapshot_yaml(snap));
  // Kept once rendered: the second call is the same bytes, not a new rendering.
  EXPECT_EQ(rev->yaml_body().data(), rev->yaml_body().data());
  EXPECT_EQ(rev->node_count, 3u);
}

TEST(RevisionMemory, ConcurrentFirstYamlReadersShareOneRendering) {
  manual_clock clk;
  inventory inv(testing::config(), clk);
  ASSERT_TRUE(inv.offer(testing::snapshot_json("rev-1", 64), from("push")).accepted);
  const auto rev = inv.current();
  constexpr int readers = 8;
  std::vector<const char*> seen(readers, nullptr);
  std::atomic<int> ready{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < readers; ++i) {
    threads.emplace_back([&, i] {
      ready.fetch_add(1);
      while (ready.load() < readers) std::this_thread::yield();  // start together
      seen[static_cast<std::size_t>(i)] = rev->yaml_body().data();
    });
  }
  for (auto& t : threads) t.join();
  for (const char* p : seen) EXPECT_EQ(p, seen.front());
  EXPECT_EQ(rev->yaml_body(),
            core::render_snapshot_yaml(decoded(testing::snapshot_json("rev-1", 64))));
}

TEST(RevisionMemory, YamlAfterAReloadIsTheNewRevisionsAndETagsDoNotMove) {
  manual_clock clk;
  inventory inv(testing::config(), clk);
  ASSERT_TRUE(inv.offer(testing::snapshot_json("rev-1"), from("push")).accepted);
  const auto first = inv.current();
  const auto first_etag = first->etag;
  EXPECT_NE(first->yaml_body().find("\"rev-1\""), std::string::npos);

  ASSERT_TRUE(inv.offer(testing::snapshot_json("rev-2", 5), from("push")).accepted);
  const auto second = inv.current();
  ASSERT_NE(second, first);
  // The new revision's first YAML reader gets the new revision, never the cached old one.
  EXPECT_NE(second->yaml_body().find("\"rev-2\""), std::string::npos);
  EXPECT_EQ(second->yaml_body().find("\"rev-1\""), std::string::npos);
  EXPECT_EQ(second->yaml_body(),
            core::render_snapshot_yaml(decoded(testing::snapshot_json("rev-2", 5))));
  // A reader still holding the old revision keeps its body.
  EXPECT_NE(first->yaml_body().find("\"rev-1\""), std::string::npos);
  // Rendering YAML changes no validator: the ETag is the JSON body's, before and after.
  EXPECT_EQ(first->etag, first_etag);
  EXPECT_EQ(second->etag, inventory::etag_of(second->json_body()));

  // The same bytes again: the same ETag, and the YAML of the new revision object is equal.
  inventory other(testing::config(), clk);
  ASSERT_TRUE(other.offer(testing::snapshot_json("rev-2", 5), from("file:x")).accepted);
  EXPECT_EQ(other.current()->etag, second->etag);
  EXPECT_EQ(other.current()->yaml_body(), second->yaml_body());
}

TEST(RevisionMemory, CanonicallyOrderedInputKeepsOneCopy) {
  manual_clock clk;
  inventory inv(testing::config(), clk);
  // Names and each Node's keys in increasing order, as Go's encoding/json writes maps.
  const auto canonical = core::render_snapshot_json(decoded(testing::snapshot_json("rev-1", 4)));
  ASSERT_TRUE(inv.offer(canonical, from("push")).accepted);
  // The served revision is the accepted one, not a copy of it, and holds no packed snapshot:
  // json_body decodes back to exactly what was accepted.
  EXPECT_EQ(inv.accepted(), inv.current());
  EXPECT_EQ(inv.current()->json_body(), canonical);
  EXPECT_EQ(inv.current()->accepted_packed, nullptr);
  core::snapshot back;
  ASSERT_TRUE(inv.current()->accepted_snapshot(back));
  EXPECT_TRUE(same(back, decoded(canonical)));

  // The fixture lists labels region, zone, rack (not by key): kept packed, in that order.
  inventory unordered(testing::config(), clk);
  ASSERT_TRUE(unordered.offer(testing::snapshot_json("rev-1", 4), from("push")).accepted);
  EXPECT_NE(unordered.current()->accepted_packed, nullptr);
  ASSERT_TRUE(unordered.current()->accepted_snapshot(back));
  EXPECT_TRUE(same(back, decoded(testing::snapshot_json("rev-1", 4))));
  EXPECT_EQ(unordered.current()->etag, inv.current()->etag);
}

TEST(RevisionMemory, OutOfOrderInputIsKeptInDocumentOrder) {
  manual_clock clk;
  inventory inv(testing::config(), clk);
  ASSERT_TRUE(inv.offer(unordered_yaml, from("push")).accepted);
  ASSERT_NE(inv.current()->accepted_packed, nullptr);
  core::snapshot back;
  ASSERT_TRUE(inv.current()->accepted_snapshot(back));
  EXPECT_TRUE(same(back, decoded(unordered_yaml)));
  EXPECT_EQ(back.nodes.front().name, "worker-2");
  EXPECT_EQ(back.nodes.front().labels.front().key, testing::zone);
}

TEST(RevisionMemory, PrunedNodesFollowTheDocumentOrderAcrossNodeChanges) {
  manual_clock clk;
  auto cfg = testing::config();
  cfg.unknown_nodes = unknown_nodes_policy::prune;
  inventory inv(cfg, clk);
  inv.set_nodes(testing::nodes(12));
  // worker-0 .. worker-11 in numeric order: worker-2 comes before worker-10 in the document
  // and after it in the canonical rendering.
  ASSERT_TRUE(inv.offer(testing::snapshot_json("rev-1", 12), from("push")).accepted);
  const auto full = inv.current();
  EXPECT_EQ(full->node_count, 12u);

  auto fewer = testing::nodes(12);
  fewer.nodes.erase_if([](const auto& n) { return n.name == "worker-2" || n.name == "worker-10"; });
  inv.set_nodes(fewer);
  const auto pruned = inv.current();
  ASSERT_NE(pruned, nullptr);
  EXPECT_EQ(pruned->revision_id, "rev-1+pruned-2");
  EXPECT_EQ(pruned->accepted_revision_id, "rev-1");
  EXPECT_EQ(pruned->pruned_nodes, (std::vector<std::string>{"worker-2", "worker-10"}));
  EXPECT_EQ(pruned->node_count, 10u);
  EXPECT_EQ(pruned->json_body().find("\"worker-10\""), std::string::npos);
  EXPECT_NE(pruned->yaml_body().find("\"worker-11\""), std::string::npos);
  EXPECT_EQ(pruned->yaml_body().find("\"worker-2\""), std::string::npos);
  // With a Node list the accepted snapshot is kept decoded, shared by the derived revisions,
  // and nothing packed beside it.
  ASSERT_NE(full->accepted_decoded, nullptr);
  EXPECT_EQ(pruned->accepted_decoded, full->accepted_decoded);
  EXPECT_EQ(full->accepted_packed, nullptr);
  EXPECT_EQ(pruned->accepted_packed, nullptr);

  // Every Node back: the full revision again, byte for byte.
  inv.set_nodes(testing::nodes(12));
  EXPECT_EQ(inv.current()->etag, full->etag);
  EXPECT_EQ(inv.current()->json_body(), full->json_body());
}

TEST(RevisionMemory, PrunedRevisionReadsBackItsUnprunedSnapshot) {
  manual_clock clk;
  auto cfg = testing::config();
  cfg.unknown_nodes = unknown_nodes_policy::prune;
  inventory inv(cfg, clk);
  inv.set_nodes(testing::nodes(4, 1));
  // Canonically ordered, but pruned on arrival: json_body no longer holds the accepted
  // snapshot, the decoded one kept for the Node list does (no packed copy beside it).
  ASSERT_TRUE(inv.offer(testing::snapshot_json("rev-1", 4), from("push")).accepted);
  const auto rev = inv.current();
  EXPECT_EQ(rev->revision_id, "rev-1+pruned-1");
  EXPECT_EQ(rev->accepted_packed, nullptr);
  ASSERT_NE(rev->accepted_decoded, nullptr);
  core::snapshot back;
  ASSERT_TRUE(rev->accepted_snapshot(back));
  EXPECT_TRUE(same(back, decoded(testing::snapshot_json("rev-1", 4))));
}

}  // namespace
}  // namespace topogate::inventory

// The inventory's semantics with an injected clock: ETags, If-Match, maxAge, history,
// and re-validation when the Node list changes (reject and prune).

#include "inventory/inventory.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "test_util.hpp"

namespace topogate::inventory {
namespace {

using namespace std::chrono_literals;
using testing::manual_clock;

inventory::offer_options from(std::string origin,
                              std::optional<std::string> if_match = std::nullopt) {
  return {std::move(origin), "", std::move(if_match), std::nullopt};
}

bool has_rule(const core::error_list& errors, std::string_view rule) {
  return std::any_of(errors.begin(), errors.end(), [&](const auto& e) { return e.rule == rule; });
}

TEST(Inventory, EmptyInventoryIsUnavailableWithAReason) {
  manual_clock clk;
  inventory inv(testing::config(), clk);
  EXPECT_FALSE(inv.ready());
  const auto d = inv.serve();
  EXPECT_EQ(d.rev, nullptr);
  EXPECT_FALSE(d.unavailable_reason.empty());
}

TEST(Inventory, AllowEmptyStartIsReadyWithoutRevision) {
  manual_clock clk;
  auto cfg = testing::config();
  cfg.allow_empty_start = true;
  inventory inv(cfg, clk);
  EXPECT_TRUE(inv.ready());
  EXPECT_EQ(inv.serve().rev, nullptr);
}

TEST(Inventory, ValidOfferIsServedWithAStrongSha256ETag) {
  manual_clock clk;
  inventory inv(testing::config(), clk);
  const auto r = inv.offer(testing::snapshot_json("rev-1"), from("push"));
  ASSERT_TRUE(r.accepted) << core::render_text(r.errors);
  const auto d = inv.serve();
  ASSERT_NE(d.rev, nullptr);
  EXPECT_EQ(d.rev->revision_id, "rev-1");
  ASSERT_EQ(d.rev->etag.size(), 66u);
  EXPECT_EQ(d.rev->etag.front(), '"');
  EXPECT_EQ(d.rev->etag.back(), '"');
  EXPECT_EQ(d.rev->etag.find_first_not_of("0123456789abcdef", 1), 65u);
  EXPECT_EQ(d.rev->etag, inventory::etag_of(d.rev->json_body()));
  EXPECT_FALSE(d.rev->yaml_body().empty());
  EXPECT_TRUE(inv.ready());
}

TEST(Inventory, EveryReplicaComputesTheSameETagWhateverTheInputFormat) {
  manual_clock clk;
  inventory a(testing::config(), clk);
  inventory b(testing::config(), clk);
  ASSERT_TRUE(a.offer(testing::snapshot_yaml("rev-y"), from("file:a")).accepted);
  clk.advance(5s);
  ASSERT_TRUE(b.offer(testing::snapshot_yaml("rev-y"), from("push")).accepted);
  EXPECT_EQ(a.current()->etag, b.current()->etag);
  EXPECT_EQ(a.current()->json_body(), b.current()->json_body());
  // The canonical JSON of the YAML document, offered as JSON, is the same revision.
  inventory c(testing::config(), clk);
  ASSERT_TRUE(c.offer(a.current()->json_body(), from("push")).accepted);
  EXPECT_EQ(c.current()->etag, a.current()->etag);
}

TEST(Inventory, InvalidOfferKeepsTheLastValidRevisionAndReportsRules) {
  manual_clock clk;
  inventory inv(testing::config(), clk);
  ASSERT_TRUE(inv.offer(testing::snapshot_json("rev-1"), from("file:x")).accepted);
  const auto etag = inv.current()->etag;
  const auto r = inv.offer(testing::snapshot_bad_level("rev-2"), from("file:x"));
  EXPECT_FALSE(r.accepted);
  EXPECT_TRUE(has_rule(r.errors, "S4"));
  ASSERT_NE(r.served, nullptr);
  EXPECT_EQ(r.served->etag, etag);
  EXPECT_EQ(inv.current()->revision_id, "rev-1");
  const auto last = inv.last_attempt();
  ASSERT_TRUE(last.has_value());
  EXPECT_FALSE(last->accepted);
  EXPECT_TRUE(has_rule(last->errors, "S4"));
}

TEST(Inventory, UndecodableOfferReportsS1) {
  manual_clock clk;
  inventory inv(testing::config(), clk);
  const auto r = inv.offer(
      R"({"apiVersion":"topology.gpustack.ai/v1alpha1","revision":"r","extra":1})", from("push"));
  EXPECT_FALSE(r.accepted);
  EXPECT_TRUE(has_rule(r.errors, "S1"));
  EXPECT_EQ(inv.current(), nullptr);
}

TEST(Inventory, IfMatchIsAStrongPrecondition) {
  manual_clock clk;
  inventory inv(testing::config(), clk);
  // No revision yet: "*" and any tag fail.
  EXPECT_TRUE(inv.prepare(testing::snapshot_json("rev-1"), from("push", "*")).precondition_failed);
  EXPECT_TRUE(
      inv.prepare(testing::snapshot_json("rev-1"), from("push", "\"abc\"")).precondition_failed);
  ASSERT_TRUE(inv.offer(testing::snapshot_json("rev-1"), from("push")).accepted);
  const auto etag = inv.current()->etag;

  EXPECT_FALSE(inv.prepare(testing::snapshot_json("rev-2"), from("push", "*")).precondition_failed);
  EXPECT_FALSE(
      inv.prepare(testing::snapshot_json("rev-2"), from("push", etag)).precondition_failed);
  EXPECT_FALSE(inv.prepare(testing::snapshot_json("rev-2"), from("push", "\"x\", " + etag))
                   .precondition_failed);
  EXPECT_TRUE(
      inv.prepare(testing::snapshot_json("rev-2"), from("push", "W/" + etag)).precondition_failed);
  EXPECT_TRUE(
      inv.prepare(testing::snapshot_json("rev-2"), from("push", "\"0000\"")).precondition_failed);

  // A failed precondition changes nothing, even with a valid body, and is in the history.
  const auto r = inv.offer(testing::snapshot_json("rev-2"), from("push", "\"0000\""));
  EXPECT_FALSE(r.accepted);
  EXPECT_EQ(inv.current()->etag, etag);
  EXPECT_FALSE(inv.last_attempt()->accepted);
  EXPECT_FALSE(inv.last_attempt()->note.empty());
  // The precondition comes first: an invalid body with a stale tag is a 412, not a 422.
  EXPECT_TRUE(inv.prepare(testing::snapshot_bad_level("rev-3"), from("push", "\"0000\""))
                  .precondition_failed);
}

TEST(Inventory, MaxAgeTurnsAStaleRevisionInto503AtTheBoundary) {
  manual_clock clk;
  auto cfg = testing::config();
  cfg.max_age = 60s;
  inventory inv(cfg, clk);
  ASSERT_TRUE(inv.offer(testing::snapshot_json("rev-1"), from("file:x")).accepted);
  clk.advance(60s);
  EXPECT_NE(inv.serve().rev, nullptr) << "exactly maxAge old is still served";
  clk.advance(1ms);
  const auto d = inv.serve();
  EXPECT_EQ(d.rev, nullptr);
  EXPECT_NE(d.unavailable_reason.find("maxAge"), std::string::npos);
  EXPECT_TRUE(inv.ready()) << "stale is a 503 with a reason, not an unready replica";
  EXPECT_NE(inv.current(), nullptr);

  // A failing source does not refresh it; the source confirming the same content does.
  inv.offer(testing::snapshot_bad_level("rev-2"), from("file:x"));
  EXPECT_EQ(inv.serve().rev, nullptr);
  inv.confirm("\"not-the-etag\"");
  EXPECT_EQ(inv.serve().rev, nullptr);
  inv.confirm(inv.current()->etag);
  EXPECT_NE(inv.serve().rev, nullptr);
}

TEST(Inventory, ReloadedRevisionKeepsItsAge) {
  manual_clock clk;
  auto cfg = testing::config();
  cfg.max_age = 60s;
  inventory inv(cfg, clk);
  auto o = from("store");
  o.accepted_at = clk.now() - 61s;
  ASSERT_TRUE(inv.offer(testing::snapshot_json("rev-1"), o).accepted);
  EXPECT_EQ(inv.serve().rev, nullptr);
}

TEST(Inventory, ZeroMaxAgeNeverExpires) {
  manual_clock clk;
  inventory inv(testing::config(), clk);
  ASSERT_TRUE(inv.offer(testing::snapshot_json("rev-1"), from("file:x")).accepted);
  clk.advance(std::chrono::hours(24 * 365));
  EXPECT_NE(inv.serve().rev, nullptr);
}

TEST(Inventory, HistoryIsBoundedAndOrdered) {
  manual_clock clk;
  auto cfg = testing::config();
  cfg.history_size = 3;
  inventory inv(cfg, clk);
  for (int i = 0; i < 5; ++i) {
    clk.advance(1s);
    inv.offer(testing::snapshot_json("rev-" + std::to_string(i)),
              {"push", "writer-" + std::to_string(i), {}, {}});
  }
  inv.offer(testing::snapshot_bad_level("bad"), from("push"));
  const auto h = inv.history();
  ASSERT_EQ(h.size(), 3u);
  EXPECT_EQ(h[0].revision_id, "rev-3");
  EXPECT_EQ(h[0].actor, "writer-3");
  EXPECT_EQ(h[1].revision_id, "rev-4");
  EXPECT_TRUE(h[1].accepted);
  EXPECT_FALSE(h[2].accepted);
  EXPECT_TRUE(has_rule(h[2].errors, "S4"));
  EXPECT_LT(h[0].at, h[1].at);
  EXPECT_EQ(inv.attempts_recorded(), 6u);

  // What a reader that saw n attempts has not seen: the newer ones the history still keeps.
  EXPECT_TRUE(inv.attempts_after(6).empty());
  EXPECT_TRUE(inv.attempts_after(7).empty());
  const auto last = inv.attempts_after(5);
  ASSERT_EQ(last.size(), 1u);
  EXPECT_FALSE(last[0].accepted);
  const auto two = inv.attempts_after(4);
  ASSERT_EQ(two.size(), 2u);
  EXPECT_EQ(two[0].revision_id, "rev-4");
  EXPECT_EQ(inv.attempts_after(0).size(), 3u) << "no more than the history keeps";
  EXPECT_EQ(inv.attempts_after(0)[0].revision_id, "rev-3");
}

TEST(Inventory, UnknownNodeIsRejectedWhenNodesAreKnown) {
  manual_clock clk;
  inventory inv(testing::config(), clk);
  inv.set_nodes(testing::nodes(3));
  const auto r = inv.offer(testing::snapshot_json("rev-1", 4), from("push"));
  EXPECT_FALSE(r.accepted);
  EXPECT_TRUE(has_rule(r.errors, "S3"));
  EXPECT_TRUE(inv.offer(testing::snapshot_json("rev-1", 3), from("push")).accepted);
}

TEST(Inventory, DeletedNodeUnderRejectStopsServingUntilItReturns) {
  manual_clock clk;
  inventory inv(testing::config(), clk);
  inv.set_nodes(testing::nodes(4));
  ASSERT_TRUE(inv.offer(testing::snapshot_json("rev-1"), from("push")).accepted);
  const auto etag = inv.current()->etag;

  inv.set_nodes(testing::nodes(4, /*skip=*/2));
  const auto d = inv.serve();
  EXPECT_EQ(d.rev, nullptr);
  EXPECT_NE(d.unavailable_reason.find("rev-1"), std::string::npos);
  EXPECT_FALSE(inv.ready());
  const auto last = inv.last_attempt();
  ASSERT_TRUE(last.has_value());
  EXPECT_FALSE(last->accepted);
  EXPECT_EQ(last->origin, "nodes");
  EXPECT_TRUE(has_rule(last->errors, "S3"));
  const auto attempts = inv.attempts_recorded();
  inv.set_nodes(testing::nodes(4, 2));  // the same list again: nothing new to record
  EXPECT_EQ(inv.attempts_recorded(), attempts);

  inv.set_nodes(testing::nodes(4));
  ASSERT_NE(inv.serve().rev, nullptr);
  EXPECT_EQ(inv.current()->etag, etag);
}

// The note of a pruned revision (logged, and kept in the history for each revision a Node
// change makes) names at most 20 pruned Nodes: it does not grow with them.
TEST(Inventory, APrunedRevisionsNoteNamesTwentyNodesAtMost) {
  manual_clock clk;
  auto cfg = testing::config();
  cfg.unknown_nodes = unknown_nodes_policy::prune;
  inventory inv(cfg, clk);
  // "worker-<from>, ..., worker-<to>": the names the note should give, in name order.
  const auto names = [](int from, int to) {
    std::string out;
    for (int i = from; i <= to; ++i)
      out += (i == from ? "worker-" : ", worker-") + std::to_string(i);
    return out;
  };
  // 40 described, 20 in the cluster: worker-20..worker-39 pruned, each named.
  inv.set_nodes(testing::nodes(20));
  ASSERT_TRUE(inv.offer(testing::snapshot_json("rev-1", 40), from("push")).accepted);
  ASSERT_EQ(inv.current()->pruned_nodes.size(), 20u);
  EXPECT_EQ(inv.last_attempt()->note, "pruned 20 Node(s) unknown to the cluster: " + names(20, 39));
  // One more pruned (a Node change): the first 20 named, the 21st counted.
  inv.set_nodes(testing::nodes(19));
  ASSERT_NE(inv.serve().rev, nullptr);
  ASSERT_EQ(inv.current()->pruned_nodes.size(), 21u);
  const std::string head = "Node list changed: pruned 21 Node(s) unknown to the cluster: ";
  EXPECT_EQ(inv.last_attempt()->note, head + names(19, 38) + " and 1 more (/status lists them)");
  EXPECT_EQ(inv.last_attempt()->pruned_nodes, 21u);
}

TEST(Inventory, DeletedNodeUnderPruneServesADerivedRevisionDeterministically) {
  manual_clock clk;
  auto cfg = testing::config();
  cfg.unknown_nodes = unknown_nodes_policy::prune;
  inventory a(cfg, clk);
  a.set_nodes(testing::nodes(4));
  ASSERT_TRUE(a.offer(testing::snapshot_json("rev-1"), from("push")).accepted);
  const auto full_etag = a.current()->etag;

  a.set_nodes(testing::nodes(4, 1));
  const auto pruned = a.serve().rev;
  ASSERT_NE(pruned, nullptr);
  EXPECT_EQ(pruned->revision_id, "rev-1+pruned-1");
  EXPECT_NE(pruned->etag, full_etag);
  EXPECT_EQ(pruned->json_body().find("\"worker-1\""), std::string::npos);
  EXPECT_NE(pruned->json_body().find("\"worker-2\""), std::string::npos);
  EXPECT_EQ(pruned->pruned_nodes, std::vector<std::string>{"worker-1"});
  EXPECT_TRUE(a.last_attempt()->accepted);
  EXPECT_EQ(a.last_attempt()->origin, "nodes");
  EXPECT_EQ(a.last_attempt()->pruned_nodes, 1u);

  // A replica that starts after the Node was deleted serves the same revision and ETag.
  inventory b(cfg, clk);
  b.set_nodes(testing::nodes(4, 1));
  ASSERT_TRUE(b.offer(testing::snapshot_json("rev-1"), from("store")).accepted);
  EXPECT_EQ(b.current()->etag, pruned->etag);
  EXPECT_EQ(b.current()->revision_id, pruned->revision_id);

  // The Node comes back: the full revision again.
  a.set_nodes(testing::nodes(4));
  EXPECT_EQ(a.current()->etag, full_etag);
}

TEST(Inventory, PruneDoesNotHideOtherErrors) {
  manual_clock clk;
  auto cfg = testing::config();
  cfg.unknown_nodes = unknown_nodes_policy::prune;
  inventory inv(cfg, clk);
  inv.set_nodes(testing::nodes(1));
  const std::string text =
      R"({"apiVersion":"topology.gpustack.ai/v1alpha1","revision":"r","nodes":{"worker-0":{"topology.gpustack.ai/pod":"p"},"ghost":{"topology.gpustack.ai/region":"a"}}})";
  const auto r = inv.offer(text, from("push"));
  EXPECT_FALSE(r.accepted);
  EXPECT_TRUE(has_rule(r.errors, "S4"));
  // The errors reported are the snapshot's as sent, the unknown Node's included.
  EXPECT_TRUE(has_rule(r.errors, "S3"));
}

TEST(Inventory, UnknownNodesWithoutANodeListAreNotChecked) {
  manual_clock clk;
  inventory inv(testing::config(), clk);
  inv.set_nodes(testing::nodes(2));
  ASSERT_TRUE(inv.offer(testing::snapshot_json("rev-1", 2), from("push")).accepted);
  inv.set_nodes(std::nullopt);
  EXPECT_FALSE(inv.selected_node_count().has_value());
  ASSERT_TRUE(inv.offer(testing::snapshot_json("rev-2", 6), from("push")).accepted);
}

TEST(Inventory, NodeChangeBetweenPrepareAndCommitIsApplied) {
  manual_clock clk;
  inventory inv(testing::config(), clk);
  inv.set_nodes(testing::nodes(4));
  auto p = inv.prepare(testing::snapshot_json("rev-1"), from("push"));
  ASSERT_NE(p.candidate, nullptr);
  inv.set_nodes(testing::nodes(4, 3));
  inv.commit(p);
  EXPECT_EQ(inv.serve().rev, nullptr) << "validated against a Node list that is gone";
  inv.set_nodes(testing::nodes(4));
  ASSERT_NE(inv.serve().rev, nullptr);
  EXPECT_EQ(inv.current()->revision_id, "rev-1");
}

TEST(Inventory, SizeLimitAsReceivedBothSides) {
  manual_clock clk;
  inventory inv(testing::config(), clk);
  // Pad with trailing white space: the document is the same, only the received size grows.
  auto body = testing::snapshot_json("rev-1");
  body.resize(core::max_snapshot_bytes, ' ');
  EXPECT_TRUE(inv.offer(body, from("push")).accepted);
  body.push_back(' ');
  const auto r = inv.offer(body, from("push"));
  EXPECT_FALSE(r.accepted);
  EXPECT_TRUE(has_rule(r.errors, "S10"));
}

}  // namespace
}  // namespace topogate::inventory

// Profile-change impact of every revision an inventory publishes (offers, Node-list changes,
// file sources) and the maxProfileChanges policy on both sides of its limit.

#include <gtest/gtest.h>

#include "inventory/inventory.hpp"
#include "inventory/registry.hpp"
#include "test_util.hpp"

namespace topogate::inventory {
namespace {

using testing::eventually;
using testing::manual_clock;
using testing::served_revision;

// worker-0..worker-(n-1), all in region-a/zone-a; the first `with_rack` also carry a rack
// (profile region>zone>rack>hostname), the others stop at the zone (region>zone>hostname).
std::string snap(std::string_view revision, int n, int with_rack) {
  std::string out = R"({"apiVersion":"topology.gpustack.ai/v1alpha1","revision":")";
  out += revision;
  out += R"(","nodes":{)";
  for (int i = 0; i < n; ++i) {
    if (i != 0) out += ',';
    out += "\"worker-" + std::to_string(i) + "\":{\"" + std::string(testing::region) +
           "\":\"region-a\",\"" + std::string(testing::zone) + "\":\"zone-a\"";
    if (i < with_rack)
      out += ",\"" + std::string(testing::rack) + "\":\"rack-" + std::to_string(i) + "\"";
    out += "}";
  }
  out += "}}";
  return out;
}

inventory::offer_options push(std::optional<std::string> accept = std::nullopt) {
  inventory::offer_options o{"push", "writer", std::nullopt, std::nullopt};
  o.accept_impact = std::move(accept);
  return o;
}

inventory_config limited(std::size_t n) {
  auto cfg = testing::config();
  cfg.max_profile_changes = n;
  return cfg;
}

constexpr int nodes = 8;
constexpr std::size_t limit = 3;

// Baseline: 8 Nodes, 2 with a rack (two profiles in use). Each offer below adds racks, so
// exactly k Nodes change profile and no profile appears or disappears.
struct policy_fixture {
  manual_clock clk;
  inventory inv{limited(limit), clk};
  std::string baseline_etag;
  policy_fixture() {
    const auto r = inv.offer(snap("base", nodes, 2), push());
    EXPECT_TRUE(r.accepted);
    baseline_etag = inv.current()->etag;
  }
};

TEST(ProfileImpactPolicy, UpToTheLimitIsPublishedWithItsImpact) {
  policy_fixture f;
  const auto r = f.inv.offer(snap("three", nodes, 2 + static_cast<int>(limit)), push());
  ASSERT_TRUE(r.accepted);
  EXPECT_FALSE(r.impact_refused);
  ASSERT_NE(r.impact, nullptr);
  EXPECT_EQ(r.impact->profile_changes(), limit);
  EXPECT_EQ(r.impact->flavor_changes(), 0u);
  EXPECT_EQ(served_revision(&f.inv), "three");
  const auto last = f.inv.last_attempt();
  ASSERT_TRUE(last && last->accepted && last->impact);
  EXPECT_EQ(last->impact->changed_count, limit);
  EXPECT_FALSE(last->impact_refused);
  EXPECT_TRUE(f.inv.impact_refusal().empty());
}

TEST(ProfileImpactPolicy, OneOverTheLimitIsRefusedAndRecorded) {
  policy_fixture f;
  const auto before = f.inv.attempts_recorded();
  const auto r = f.inv.offer(snap("four", nodes, 2 + static_cast<int>(limit) + 1), push());
  EXPECT_FALSE(r.accepted);
  EXPECT_TRUE(r.impact_refused);
  EXPECT_TRUE(r.errors.empty());  // valid: refused by policy, not by a rule
  ASSERT_NE(r.impact, nullptr);
  EXPECT_EQ(r.impact->profile_changes(), limit + 1);
  EXPECT_EQ(r.impact_baseline_etag, f.baseline_etag);
  EXPECT_EQ(served_revision(&f.inv), "base");  // the served revision is unchanged
  EXPECT_EQ(f.inv.attempts_recorded(), before + 1);
  const auto last = f.inv.last_attempt();
  ASSERT_TRUE(last.has_value());
  EXPECT_FALSE(last->accepted);
  EXPECT_TRUE(last->impact_refused);
  EXPECT_EQ(last->revision_id, "four");
  ASSERT_NE(last->impact, nullptr);
  EXPECT_EQ(last->impact->changed_count, limit + 1);
  EXPECT_FALSE(f.inv.impact_refusal().empty());
}

TEST(ProfileImpactPolicy, OneOverTheLimitWithTheBaselineETagIsPublished) {
  policy_fixture f;
  const auto r =
      f.inv.offer(snap("four", nodes, 2 + static_cast<int>(limit) + 1), push(f.baseline_etag));
  ASSERT_TRUE(r.accepted);
  EXPECT_FALSE(r.impact_refused);
  EXPECT_EQ(served_revision(&f.inv), "four");
  EXPECT_EQ(f.inv.last_attempt()->impact->profile_changes(), limit + 1);
}

TEST(ProfileImpactPolicy, AcceptanceOfAnotherBaselineDoesNotCount) {
  policy_fixture f;
  const std::string other = "\"" + std::string(64, '0') + "\"";
  EXPECT_TRUE(f.inv.offer(snap("four", nodes, 2 + static_cast<int>(limit) + 1), push(other))
                  .impact_refused);
  // A weak tag never matches (strong comparison, as If-Match).
  EXPECT_TRUE(
      f.inv
          .offer(snap("four", nodes, 2 + static_cast<int>(limit) + 1), push("W/" + f.baseline_etag))
          .impact_refused);
  EXPECT_EQ(served_revision(&f.inv), "base");
  // "*" accepts whatever the impact is.
  EXPECT_TRUE(
      f.inv.offer(snap("four", nodes, 2 + static_cast<int>(limit) + 1), push("*")).accepted);
  EXPECT_EQ(served_revision(&f.inv), "four");
  EXPECT_TRUE(f.inv.impact_refusal().empty());  // a publication clears the refusal
}

TEST(ProfileImpactPolicy, ProfilesAppearingOrDisappearingCountAgainstTheLimitToo) {
  manual_clock clk;
  inventory inv(limited(1), clk);
  // worker-0 region only, worker-1 region>zone; then worker-0 gets zone and rack: one Node
  // changes, but one profile appears (rack) and one disappears (region only).
  const std::string base =
      R"({"apiVersion":"topology.gpustack.ai/v1alpha1","revision":"b","nodes":{)"
      R"("worker-0":{"topology.gpustack.ai/region":"r"},)"
      R"("worker-1":{"topology.gpustack.ai/region":"r","topology.gpustack.ai/zone":"z"}}})";
  const std::string next =
      R"({"apiVersion":"topology.gpustack.ai/v1alpha1","revision":"n","nodes":{)"
      R"("worker-0":{"topology.gpustack.ai/region":"r","topology.gpustack.ai/zone":"z",)"
      R"("topology.gpustack.ai/rack":"k"},)"
      R"("worker-1":{"topology.gpustack.ai/region":"r","topology.gpustack.ai/zone":"z"}}})";
  ASSERT_TRUE(inv.offer(base, push()).accepted);
  const auto r = inv.offer(next, push());
  ASSERT_NE(r.impact, nullptr);
  EXPECT_EQ(r.impact->profile_changes(), 1u);
  EXPECT_EQ(r.impact->flavor_changes(), 2u);
  EXPECT_TRUE(r.impact_refused);
  auto cfg2 = limited(2);
  inventory inv2(cfg2, clk);
  ASSERT_TRUE(inv2.offer(base, push()).accepted);
  EXPECT_TRUE(inv2.offer(next, push()).accepted);
}

TEST(ProfileImpactPolicy, NoLimitAndFirstRevisionAreNeverRefused) {
  manual_clock clk;
  inventory unlimited(testing::config(), clk);
  ASSERT_TRUE(unlimited.offer(snap("base", nodes, 0), push()).accepted);
  const auto r = unlimited.offer(snap("all", nodes, nodes), push());
  EXPECT_TRUE(r.accepted);
  EXPECT_EQ(r.impact->profile_changes(), static_cast<std::size_t>(nodes));

  inventory fresh(limited(1), clk);
  const auto first = fresh.offer(snap("all", nodes, nodes), push());
  EXPECT_TRUE(first.accepted);  // nothing served yet: nothing to drain
  ASSERT_NE(first.impact, nullptr);
  EXPECT_EQ(first.impact->added_count, static_cast<std::size_t>(nodes));
}

// worker-0..n-1, each carrying `profile` as topology.gpustack.ai/profile (empty: none).
core::node_list labelled_nodes(int n, const std::vector<std::string>& profile) {
  auto list = testing::nodes(n);
  for (std::size_t i = 0; i < list.nodes.size(); ++i) {
    auto& node = list.nodes.edit(i);
    const int idx = std::stoi(node.name.str().substr(7));
    if (!profile[static_cast<std::size_t>(idx)].empty())
      node.labels.emplace_back("topology.gpustack.ai/profile",
                               profile[static_cast<std::size_t>(idx)]);
    auto& labels = node.labels.edit();
    std::sort(labels.begin(), labels.end());
  }
  return list;
}

// A process's first revision with a Node list is measured against the profiles the Nodes
// carry: after a restart with a new hierarchy, the impact names the Nodes the consumer will
// relabel. It is reported, never refused (the first revision is always served).
TEST(ProfileImpactPolicy, FirstRevisionWithNodesIsMeasuredAgainstTheirProfileLabels) {
  manual_clock clk;
  // What an earlier process served: 4 Nodes, worker-0 and worker-1 with a rack.
  inventory before(testing::config(), clk);
  before.set_nodes(testing::nodes(4));
  ASSERT_TRUE(before.offer(snap("old", 4, 2), push()).accepted);
  std::vector<std::string> applied;
  for (int i = 0; i < 4; ++i)
    applied.push_back(
        before.current()
            ->profiles->profile_of(*before.current()->profiles->find("worker-" + std::to_string(i)))
            .id);
  applied[3].clear();  // worker-3 was never labelled

  inventory inv(limited(1), clk);
  inv.set_nodes(labelled_nodes(4, applied));
  // Every Node gets a rack: worker-2 changes, worker-3 is added, worker-0/1 keep theirs.
  const auto r = inv.offer(snap("new", 4, 4), push());
  ASSERT_TRUE(r.accepted);  // over the limit of 1, but a first revision is never refused
  ASSERT_NE(r.impact, nullptr);
  EXPECT_EQ(r.impact->baseline, core::impact_baseline::node_labels);
  ASSERT_EQ(r.impact->changed_count, 1u);
  EXPECT_EQ(r.impact->changed[0].node, "worker-2");
  EXPECT_EQ(r.impact->changed[0].from, applied[2]);
  ASSERT_EQ(r.impact->added_count, 1u);
  EXPECT_EQ(r.impact->added[0].node, "worker-3");
  const auto last = inv.last_attempt();
  ASSERT_TRUE(last.has_value());
  ASSERT_NE(last->impact, nullptr);
  EXPECT_EQ(last->impact->changed_count, 1u);
  EXPECT_NE(core::render_impact_json(*last->impact).find("\"baseline\":\"nodeLabels\""),
            std::string::npos);

  // Without a Node list there is nothing to measure against: every Node is added.
  inventory blind(testing::config(), clk);
  const auto b = blind.offer(snap("new", 4, 4), push());
  ASSERT_TRUE(b.accepted);
  EXPECT_EQ(b.impact->baseline, core::impact_baseline::none);
  EXPECT_EQ(b.impact->added_count, 4u);
  // The second revision is measured against the first, as always.
  const auto second = inv.offer(snap("newer", 4, 3), push(std::string("*")));
  ASSERT_TRUE(second.accepted);
  EXPECT_EQ(second.impact->baseline, core::impact_baseline::revision);
  EXPECT_EQ(second.impact->changed_count, 1u);
}

TEST(ProfileImpactPolicy, NodeListChangesAreRecordedNeverRefused) {
  manual_clock clk;
  inventory inv(limited(1), clk);
  inv.set_nodes(testing::nodes(4));
  ASSERT_TRUE(inv.offer(testing::snapshot_json("r1", 4), push()).accepted);
  const auto etag = inv.current()->etag;
  // Three Nodes the snapshot does not describe join: managed, hostname-only profile. The
  // served bytes do not change, the profile set does (one profile appears).
  inv.set_nodes(testing::nodes(7));
  const auto last = inv.last_attempt();
  ASSERT_TRUE(last.has_value());
  EXPECT_EQ(last->origin, "nodes");
  EXPECT_TRUE(last->accepted);
  EXPECT_FALSE(last->impact_refused);
  ASSERT_NE(last->impact, nullptr);
  EXPECT_EQ(last->impact->added_count, 3u);
  EXPECT_EQ(last->impact->appeared.size(), 1u);
  EXPECT_EQ(inv.current()->etag, etag);
  EXPECT_EQ(inv.current()->profiles->nodes.size(), 7u);
  // The same list again: no impact, no entry.
  const auto count = inv.attempts_recorded();
  inv.set_nodes(testing::nodes(7));
  EXPECT_EQ(inv.attempts_recorded(), count);
}

TEST(ProfileImpactPolicy, BaselineIsTheLastServedRevisionAcrossA503) {
  manual_clock clk;
  inventory inv(limited(100), clk);
  inv.set_nodes(testing::nodes(4));
  ASSERT_TRUE(inv.offer(snap("base", 4, 0), push()).accepted);
  // worker-3 leaves the cluster: the revision names it, 503 (unknownNodes: reject).
  inv.set_nodes(testing::nodes(3));
  EXPECT_EQ(inv.current(), nullptr);
  ASSERT_NE(inv.last_served(), nullptr);
  EXPECT_EQ(inv.last_served()->revision_id, "base");
  const auto r = inv.offer(snap("next", 3, 3), push());
  ASSERT_TRUE(r.accepted) << core::render_text(r.errors);
  // Against what the consumer fetched last (4 Nodes), not against nothing.
  EXPECT_EQ(r.impact->changed_count, 3u);
  EXPECT_EQ(r.impact->removed_count, 1u);
}

TEST(ProfileImpactPolicy, FileSourceRefusalIsReportedAndNotServed) {
  testing::temp_dir dir;
  const auto path = dir / "snapshot.json";
  testing::write_atomic(path, snap("base", nodes, 2));
  registry_config cfg;
  inventory_spec spec;
  spec.config = limited(limit);
  spec.snapshot_path = path;
  spec.kind = source_kind::file;
  cfg.inventories.push_back(std::move(spec));
  cfg.resync_interval = std::chrono::seconds(3600);
  std::vector<attempt> seen;
  std::mutex mu;
  registry_observer obs;
  obs.on_attempt = [&](const std::string&, const attempt& a) {
    std::lock_guard lk(mu);
    seen.push_back(a);
  };
  obs.on_log = [](std::string_view, std::string_view, std::string_view) {};
  registry reg(std::move(cfg), system_clock(), std::move(obs));
  reg.start();
  auto* inv = reg.find("dc");
  ASSERT_NE(inv, nullptr);
  ASSERT_EQ(served_revision(inv), "base");

  testing::write_atomic(path, snap("too-many", nodes, 2 + static_cast<int>(limit) + 1));
  ASSERT_TRUE(eventually([&] { return !inv->impact_refusal().empty(); }));
  EXPECT_EQ(served_revision(inv), "base");
  // The observer hears of the attempt just after it is recorded, on the loop thread.
  EXPECT_TRUE(eventually([&] {
    std::lock_guard lk(mu);
    return !seen.empty() && seen.back().revision_id == "too-many";
  }));
  {
    std::lock_guard lk(mu);
    ASSERT_FALSE(seen.empty());
    EXPECT_TRUE(seen.back().impact_refused);
    EXPECT_EQ(seen.back().revision_id, "too-many");
  }
  const auto status = reg.status_json("dc");
  ASSERT_TRUE(status.has_value());
  EXPECT_NE(status->find("\"impactRefusal\""), std::string::npos);
  const auto history = reg.history_json("dc");
  ASSERT_TRUE(history.has_value());
  EXPECT_NE(history->find("\"impactRefused\":true"), std::string::npos);

  testing::write_atomic(path, snap("within", nodes, 2 + static_cast<int>(limit)));
  ASSERT_TRUE(eventually([&] { return served_revision(inv) == "within"; }));
  EXPECT_TRUE(inv->impact_refusal().empty());
  reg.stop();
}

}  // namespace
}  // namespace topogate::inventory

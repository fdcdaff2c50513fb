// Pushes (H2) through the file store: outcomes, every field error, If-Match, durability
// before acknowledgement, reload on restart, disk errors. (How each outcome is said over
// HTTP, status code and Kubernetes Status body, is test/server/inventory_http_test.cpp.)

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>

#include "inventory/registry.hpp"
#include "test_util.hpp"

namespace topogate::inventory {
namespace {

namespace fs = std::filesystem;
using testing::served_revision;

registry_config push_config(const std::string& store_dir,
                            unknown_nodes_policy policy = unknown_nodes_policy::reject) {
  registry_config cfg;
  inventory_spec spec;
  spec.config = testing::config("dc");
  spec.config.unknown_nodes = policy;
  cfg.inventories.push_back(std::move(spec));
  cfg.store.type = store_config::kind::file;
  cfg.store.directory = store_dir;
  cfg.resync_interval = std::chrono::seconds(3600);
  return cfg;
}

// The ETag a push answer carries (server/inventory_http: the served revision's).
std::string etag(const push_result& r) { return r.served ? r.served->etag : std::string(); }

std::string describe(const push_result& r) {
  return std::string(to_string(r.outcome)) + (r.message.empty() ? "" : ": " + r.message);
}

TEST(Push, FirstIs201ThenIs200WithTheServedETag) {
  testing::temp_dir dir;
  registry reg(push_config(dir / "store"));
  reg.start();
  const auto a = reg.push("dc", testing::snapshot_json("p-1"), std::nullopt, "ci-bot");
  EXPECT_EQ(a.outcome, push_outcome::created) << describe(a);
  auto* inv = reg.find("dc");
  ASSERT_NE(inv->current(), nullptr);
  EXPECT_EQ(etag(a), inv->current()->etag);
  ASSERT_NE(a.candidate, nullptr);
  EXPECT_EQ(a.candidate->revision_id, "p-1");
  EXPECT_EQ(inv->current()->actor, "ci-bot");
  const auto b = reg.push("dc", testing::snapshot_json("p-2"), std::nullopt, "ci-bot");
  EXPECT_EQ(b.outcome, push_outcome::stored) << describe(b);
  EXPECT_EQ(etag(b), inv->current()->etag);
  EXPECT_EQ(served_revision(inv), "p-2");
  reg.stop();
}

TEST(Push, InvalidIs422WithEveryFieldErrorAndNothingChanges) {
  testing::temp_dir dir;
  registry reg(push_config(dir / "store"));
  reg.start();
  ASSERT_EQ(reg.push("dc", testing::snapshot_json("p-1"), std::nullopt, "w").outcome,
            push_outcome::created);
  const auto served_etag = reg.find("dc")->current()->etag;
  // Two independent errors: an undeclared level (S4) on one node, an invalid value (S7) on another.
  const std::string body =
      R"({"apiVersion":"topology.gpustack.ai/v1alpha1","revision":"bad","nodes":{)"
      R"("worker-0":{"topology.gpustack.ai/pod":"p"},)"
      R"("worker-1":{"topology.gpustack.ai/region":"-bad-"}}})";
  const auto a = reg.push("dc", body, std::nullopt, "w");
  ASSERT_EQ(a.outcome, push_outcome::invalid) << describe(a);
  // Every field error, each with its rule and path (the 422 Status body made of them is
  // tested in test/server/inventory_http_test.cpp).
  std::set<std::string> rules;
  std::set<std::string> fields;
  for (const auto& e : a.errors) {
    rules.insert(e.rule);
    fields.insert(e.path);
  }
  EXPECT_TRUE(rules.contains("S4")) << core::render_text(a.errors);
  EXPECT_TRUE(rules.contains("S7")) << core::render_text(a.errors);
  EXPECT_TRUE(fields.contains("nodes[worker-0][topology.gpustack.ai/pod]"))
      << core::render_text(a.errors);
  EXPECT_TRUE(std::any_of(fields.begin(), fields.end(), [](const std::string& f) {
    return f.starts_with("nodes[worker-1]");
  })) << core::render_text(a.errors);
  EXPECT_EQ(a.candidate, nullptr);
  EXPECT_EQ(reg.find("dc")->current()->etag, served_etag);
  reg.stop();
}

TEST(Push, SizeLimitBothSides) {
  testing::temp_dir dir;
  registry reg(push_config(dir / "store"));
  reg.start();
  auto body = testing::snapshot_json("big");
  body.resize(core::max_snapshot_bytes, '\n');
  EXPECT_EQ(reg.push("dc", body, std::nullopt, "w").outcome, push_outcome::created);
  body.push_back('\n');
  EXPECT_EQ(reg.push("dc", body, std::nullopt, "w").outcome, push_outcome::too_large);
  reg.stop();
}

TEST(Push, IfMatchGivesOptimisticConcurrency) {
  testing::temp_dir dir;
  registry reg(push_config(dir / "store"));
  reg.start();
  EXPECT_EQ(reg.push("dc", testing::snapshot_json("p-1"), std::string("*"), "w").outcome,
            push_outcome::precondition_failed)
      << "nothing to match yet";
  const auto first = reg.push("dc", testing::snapshot_json("p-1"), std::nullopt, "w");
  ASSERT_EQ(first.outcome, push_outcome::created);
  const auto first_etag = etag(first);
  ASSERT_FALSE(first_etag.empty());
  const auto second = reg.push("dc", testing::snapshot_json("p-2"), first_etag, "a");
  EXPECT_EQ(second.outcome, push_outcome::stored) << describe(second);
  // A writer that still holds the first ETag lost the race.
  const auto stale = reg.push("dc", testing::snapshot_json("p-3"), first_etag, "b");
  EXPECT_EQ(stale.outcome, push_outcome::precondition_failed) << describe(stale);
  EXPECT_EQ(etag(stale), etag(second));
  EXPECT_FALSE(etag(stale).empty());
  EXPECT_EQ(served_revision(reg.find("dc")), "p-2");
  reg.stop();
}

TEST(Push, UnknownInventoryIs404AndNoStoreIs503) {
  registry_config cfg;
  inventory_spec spec;
  spec.config = testing::config("dc");
  cfg.inventories.push_back(std::move(spec));
  registry reg(std::move(cfg));
  reg.start();
  EXPECT_EQ(reg.push("nope", testing::snapshot_json("p"), std::nullopt, "w").outcome,
            push_outcome::not_found);
  EXPECT_EQ(reg.push("dc", testing::snapshot_json("p"), std::nullopt, "w").outcome,
            push_outcome::unavailable);
  EXPECT_EQ(reg.find("dc")->current(), nullptr);
  EXPECT_FALSE(reg.status_json("nope").has_value());
  EXPECT_FALSE(reg.history_json("nope").has_value());
  EXPECT_TRUE(reg.status_json("dc").has_value());
  EXPECT_TRUE(reg.history_json("dc").has_value());
  reg.stop();
}

TEST(Push, AcknowledgedRevisionIsServedAfterRestart) {
  testing::temp_dir dir;
  std::string etag;
  {
    registry reg(push_config(dir / "store"));
    reg.start();
    ASSERT_EQ(reg.push("dc", testing::snapshot_yaml("durable-1"), std::nullopt, "w").outcome,
              push_outcome::created);
    ASSERT_EQ(
        reg.push("dc", testing::snapshot_yaml("durable-2"), std::nullopt, "ci/bot one").outcome,
        push_outcome::stored);
    etag = reg.find("dc")->current()->etag;
    reg.stop();
  }
  // Nothing but the store directory survives: a new registry serves the revision as soon as
  // the store has answered (start() returns before; the inventory is not ready until then).
  registry reg(push_config(dir / "store"));
  reg.start();
  ASSERT_TRUE(testing::eventually([&] { return reg.inventory_ready("dc").ok(); }));
  auto* inv = reg.find("dc");
  ASSERT_NE(inv->current(), nullptr);
  EXPECT_EQ(inv->current()->revision_id, "durable-2");
  EXPECT_EQ(inv->current()->etag, etag);
  EXPECT_EQ(inv->current()->actor, "ci/bot one");
  EXPECT_EQ(inv->current()->origin, "store");
  EXPECT_TRUE(reg.ready());
  // No temporary file is left behind.
  for (const auto& e : fs::directory_iterator(dir / "store")) {
    EXPECT_EQ(e.path().filename().string().find(".tmp-"), std::string::npos) << e.path();
  }
  reg.stop();
}

TEST(Push, DamagedStoreFileIsNotServed) {
  testing::temp_dir dir;
  {
    registry reg(push_config(dir / "store"));
    reg.start();
    ASSERT_EQ(reg.push("dc", testing::snapshot_json("d-1"), std::nullopt, "w").outcome,
              push_outcome::created);
    reg.stop();
  }
  const auto file = dir / "store/dc.snapshot";
  std::string content;
  {
    auto r = std::ifstream(file);
    content.assign(std::istreambuf_iterator<char>(r), {});
  }
  content[content.size() - 5] ^= 1;
  testing::write_file(file, content);
  registry reg(push_config(dir / "store"));
  reg.start();
  // The store's first load runs in the background: wait for it to report the damaged file.
  ASSERT_TRUE(testing::eventually([&] { return reg.find("dc")->last_attempt().has_value(); }));
  EXPECT_EQ(reg.find("dc")->current(), nullptr);
  EXPECT_FALSE(reg.find("dc")->last_attempt()->note.empty());
  const auto ready = reg.inventory_ready("dc");
  ASSERT_FALSE(ready.ok());
  // The store answered: the inventory waits for a revision, not for the store...
  EXPECT_EQ(ready.error().message.find("waiting for the store"), std::string::npos)
      << ready.error().message;
  // ...and a push replaces the damaged file.
  const auto r = reg.push("dc", testing::snapshot_json("repaired"), std::nullopt, "w");
  EXPECT_EQ(r.outcome, push_outcome::created) << r.message;
  EXPECT_EQ(served_revision(reg.find("dc")), "repaired");
  reg.stop();
  registry again(push_config(dir / "store"));
  again.start();
  EXPECT_TRUE(testing::eventually([&] { return served_revision(again.find("dc")) == "repaired"; }));
  again.stop();
}

TEST(Push, DiskErrorIs503AndTheServedRevisionIsUnchanged) {
  testing::temp_dir dir;
  registry reg(push_config(dir / "store"));
  reg.start();
  ASSERT_EQ(reg.push("dc", testing::snapshot_json("p-1"), std::nullopt, "w").outcome,
            push_outcome::created);
  const auto served_etag = reg.find("dc")->current()->etag;
  // The store directory disappears under the process (an unmounted volume).
  fs::remove_all(dir / "store");
  testing::write_file(dir / "store", "not a directory");
  const auto a = reg.push("dc", testing::snapshot_json("p-2"), std::nullopt, "w");
  EXPECT_EQ(a.outcome, push_outcome::unavailable) << describe(a);
  EXPECT_GE(a.retry_after.count(), 1);
  EXPECT_EQ(reg.find("dc")->current()->etag, served_etag);
  const auto last = reg.find("dc")->last_attempt();
  ASSERT_TRUE(last.has_value());
  EXPECT_FALSE(last->accepted);
  reg.stop();
}

TEST(Push, PruneAcceptsAndReportsVanishedNodes) {
  testing::temp_dir dir;
  auto cfg = push_config(dir / "store", unknown_nodes_policy::prune);
  testing::write_file(dir / "nodes.json", testing::nodes_json(4, 3));
  cfg.inventories[0].nodes_path = dir / "nodes.json";
  registry reg(std::move(cfg));
  reg.start();
  const auto a = reg.push("dc", testing::snapshot_json("p-1"), std::nullopt, "w");
  ASSERT_EQ(a.outcome, push_outcome::created) << describe(a);
  ASSERT_NE(a.candidate, nullptr);
  EXPECT_EQ(a.candidate->pruned_nodes, std::vector<std::string>{"worker-3"});
  EXPECT_EQ(served_revision(reg.find("dc")), "p-1+pruned-1");
  reg.stop();
  // The store keeps the revision as pushed; the reload prunes it again, identically.
  registry again(push_config(dir / "store", unknown_nodes_policy::prune));
  again.start();
  ASSERT_TRUE(testing::eventually([&] { return again.inventory_ready("dc").ok(); }));
  EXPECT_EQ(served_revision(again.find("dc")), "p-1") << "no Node list: nothing to prune";
  again.stop();
}

TEST(Push, StoredRevisionInvalidForTheNodesAtStartIsServedWhenTheyReturn) {
  testing::temp_dir dir;
  {
    registry reg(push_config(dir / "store"));
    reg.start();
    ASSERT_EQ(reg.push("dc", testing::snapshot_json("s-1"), std::nullopt, "w").outcome,
              push_outcome::created);
    reg.stop();
  }
  // The replica restarts while worker-1 is missing from the cluster (reject policy).
  testing::write_file(dir / "nodes.json", testing::nodes_json(4, 1));
  auto cfg = push_config(dir / "store");
  cfg.inventories[0].nodes_path = dir / "nodes.json";
  registry reg(std::move(cfg));
  reg.start();
  auto* inv = reg.find("dc");
  // The store's revision is loaded in the background and rejected against these Nodes.
  ASSERT_TRUE(testing::eventually([&] {
    const auto a = inv->last_attempt();
    return a && a->origin == "store" && !a->accepted;
  }));
  EXPECT_EQ(inv->serve().rev, nullptr);
  testing::write_atomic(dir / "nodes.json", testing::nodes_json(4));
  EXPECT_TRUE(testing::eventually([&] { return served_revision(inv) == "s-1"; }));
  reg.stop();
}

TEST(Push, ObserverSeesEveryAttempt) {
  testing::temp_dir dir;
  std::mutex mu;
  std::vector<std::pair<std::string, bool>> seen;
  registry_observer obs;
  obs.on_attempt = [&](const std::string& inv, const attempt& a) {
    std::lock_guard lk(mu);
    seen.emplace_back(inv, a.accepted);
  };
  obs.on_log = [](std::string_view, std::string_view, std::string_view) {};
  registry reg(push_config(dir / "store"), system_clock(), obs);
  reg.start();
  EXPECT_EQ(reg.push("dc", testing::snapshot_json("p-1"), std::nullopt, "w").outcome,
            push_outcome::created);
  EXPECT_EQ(reg.push("dc", testing::snapshot_bad_level("p-2"), std::nullopt, "w").outcome,
            push_outcome::invalid);
  std::lock_guard lk(mu);
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_TRUE(seen[0].second);
  EXPECT_FALSE(seen[1].second);
  EXPECT_EQ(seen[0].first, "dc");
  reg.stop();
}

}  // namespace
}  // namespace topogate::inventory

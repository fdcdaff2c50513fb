// Pushes (H2) through the file store: status codes, the Kubernetes Status body with every
// field error, If-Match, durability before acknowledgement, reload on restart, disk errors.

#include <gtest/gtest.h>
#include <simdjson.h>

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

registry_config push_config(const std::string& store_dir, unknown_nodes_policy policy = unknown_nodes_policy::reject) {
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

std::string header(const http_answer& a, std::string_view name) {
  for (const auto& [k, v] : a.headers) {
    if (k == name) return v;
  }
  return {};
}

TEST(Push, FirstIs201ThenIs200WithTheServedETag) {
  testing::temp_dir dir;
  registry reg(push_config(dir / "store"));
  reg.start();
  const auto a = reg.push("dc", testing::snapshot_json("p-1"), std::nullopt, "ci-bot");
  EXPECT_EQ(a.status, 201) << a.body;
  auto* inv = reg.find("dc");
  ASSERT_NE(inv->current(), nullptr);
  EXPECT_EQ(header(a, "ETag"), inv->current()->etag);
  EXPECT_EQ(inv->current()->actor, "ci-bot");
  const auto b = reg.push("dc", testing::snapshot_json("p-2"), std::nullopt, "ci-bot");
  EXPECT_EQ(b.status, 200);
  EXPECT_EQ(served_revision(inv), "p-2");
  reg.stop();
}

TEST(Push, InvalidIs422WithEveryFieldErrorAndNothingChanges) {
  testing::temp_dir dir;
  registry reg(push_config(dir / "store"));
  reg.start();
  ASSERT_EQ(reg.push("dc", testing::snapshot_json("p-1"), std::nullopt, "w").status, 201);
  const auto etag = reg.find("dc")->current()->etag;
  // Two independent errors: an undeclared level (S4) on one node, an invalid value (S7) on another.
  const std::string body =
      R"({"apiVersion":"topology.gpustack.ai/v1alpha1","revision":"bad","nodes":{)"
      R"("worker-0":{"topology.gpustack.ai/pod":"p"},)"
      R"("worker-1":{"topology.gpustack.ai/region":"-bad-"}}})";
  const auto a = reg.push("dc", body, std::nullopt, "w");
  ASSERT_EQ(a.status, 422);
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  ASSERT_FALSE(parser.parse(a.body).get(doc)) << a.body;
  EXPECT_EQ(std::string_view(doc["kind"]), "Status");
  EXPECT_EQ(std::string_view(doc["apiVersion"]), "v1");
  EXPECT_EQ(std::string_view(doc["status"]), "Failure");
  EXPECT_EQ(std::string_view(doc["reason"]), "Invalid");
  EXPECT_EQ(int64_t(doc["code"]), 422);
  EXPECT_EQ(std::string_view(doc["details"]["name"]), "dc");
  std::set<std::string> rules;
  std::set<std::string> fields;
  for (auto c : doc["details"]["causes"].get_array()) {
    rules.insert(std::string(std::string_view(c["rule"])));
    fields.insert(std::string(std::string_view(c["field"])));
    EXPECT_TRUE(std::string_view(c["reason"]).starts_with("FieldValue"));
  }
  EXPECT_TRUE(rules.contains("S4"));
  EXPECT_TRUE(rules.contains("S7"));
  EXPECT_TRUE(fields.contains("nodes[worker-0][topology.gpustack.ai/pod]")) << a.body;
  EXPECT_EQ(reg.find("dc")->current()->etag, etag);
  reg.stop();
}

TEST(Push, SizeLimitBothSides) {
  testing::temp_dir dir;
  registry reg(push_config(dir / "store"));
  reg.start();
  auto body = testing::snapshot_json("big");
  body.resize(core::max_snapshot_bytes, '\n');
  EXPECT_EQ(reg.push("dc", body, std::nullopt, "w").status, 201);
  body.push_back('\n');
  EXPECT_EQ(reg.push("dc", body, std::nullopt, "w").status, 413);
  reg.stop();
}

TEST(Push, IfMatchGivesOptimisticConcurrency) {
  testing::temp_dir dir;
  registry reg(push_config(dir / "store"));
  reg.start();
  EXPECT_EQ(reg.push("dc", testing::snapshot_json("p-1"), std::string("*"), "w").status, 412)
      << "nothing to match yet";
  const auto first = reg.push("dc", testing::snapshot_json("p-1"), std::nullopt, "w");
  ASSERT_EQ(first.status, 201);
  const auto etag = header(first, "ETag");
  const auto second = reg.push("dc", testing::snapshot_json("p-2"), etag, "a");
  EXPECT_EQ(second.status, 200);
  // A writer that still holds the first ETag lost the race.
  const auto stale = reg.push("dc", testing::snapshot_json("p-3"), etag, "b");
  EXPECT_EQ(stale.status, 412);
  EXPECT_EQ(header(stale, "ETag"), header(second, "ETag"));
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
  EXPECT_EQ(reg.push("nope", testing::snapshot_json("p"), std::nullopt, "w").status, 404);
  EXPECT_EQ(reg.push("dc", testing::snapshot_json("p"), std::nullopt, "w").status, 503);
  EXPECT_EQ(reg.find("dc")->current(), nullptr);
  EXPECT_EQ(reg.status("nope").status, 404);
  EXPECT_EQ(reg.history("nope").status, 404);
  reg.stop();
}

TEST(Push, AcknowledgedRevisionIsServedAfterRestart) {
  testing::temp_dir dir;
  std::string etag;
  {
    registry reg(push_config(dir / "store"));
    reg.start();
    ASSERT_EQ(reg.push("dc", testing::snapshot_yaml("durable-1"), std::nullopt, "w").status, 201);
    ASSERT_EQ(reg.push("dc", testing::snapshot_yaml("durable-2"), std::nullopt, "ci/bot one").status, 200);
    etag = reg.find("dc")->current()->etag;
    reg.stop();
  }
  // Nothing but the store directory survives: a new registry serves the revision at once.
  registry reg(push_config(dir / "store"));
  reg.start();
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
    ASSERT_EQ(reg.push("dc", testing::snapshot_json("d-1"), std::nullopt, "w").status, 201);
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
  EXPECT_EQ(reg.find("dc")->current(), nullptr);
  EXPECT_FALSE(reg.find("dc")->last_attempt()->note.empty());
  reg.stop();
}

TEST(Push, DiskErrorIs503AndTheServedRevisionIsUnchanged) {
  testing::temp_dir dir;
  registry reg(push_config(dir / "store"));
  reg.start();
  ASSERT_EQ(reg.push("dc", testing::snapshot_json("p-1"), std::nullopt, "w").status, 201);
  const auto etag = reg.find("dc")->current()->etag;
  // The store directory disappears under the process (an unmounted volume).
  fs::remove_all(dir / "store");
  testing::write_file(dir / "store", "not a directory");
  const auto a = reg.push("dc", testing::snapshot_json("p-2"), std::nullopt, "w");
  EXPECT_EQ(a.status, 503);
  EXPECT_EQ(reg.find("dc")->current()->etag, etag);
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
  ASSERT_EQ(a.status, 201) << a.body;
  EXPECT_NE(a.body.find("worker-3"), std::string::npos);
  EXPECT_EQ(served_revision(reg.find("dc")), "p-1+pruned-1");
  reg.stop();
  // The store keeps the revision as pushed; the reload prunes it again, identically.
  registry again(push_config(dir / "store", unknown_nodes_policy::prune));
  again.start();
  EXPECT_EQ(served_revision(again.find("dc")), "p-1") << "no Node list: nothing to prune";
  again.stop();
}

TEST(Push, StoredRevisionInvalidForTheNodesAtStartIsServedWhenTheyReturn) {
  testing::temp_dir dir;
  {
    registry reg(push_config(dir / "store"));
    reg.start();
    ASSERT_EQ(reg.push("dc", testing::snapshot_json("s-1"), std::nullopt, "w").status, 201);
    reg.stop();
  }
  // The replica restarts while worker-1 is missing from the cluster (reject policy).
  testing::write_file(dir / "nodes.json", testing::nodes_json(4, 1));
  auto cfg = push_config(dir / "store");
  cfg.inventories[0].nodes_path = dir / "nodes.json";
  registry reg(std::move(cfg));
  reg.start();
  auto* inv = reg.find("dc");
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
  reg.push("dc", testing::snapshot_json("p-1"), std::nullopt, "w");
  reg.push("dc", testing::snapshot_bad_level("p-2"), std::nullopt, "w");
  std::lock_guard lk(mu);
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_TRUE(seen[0].second);
  EXPECT_FALSE(seen[1].second);
  EXPECT_EQ(seen[0].first, "dc");
  reg.stop();
}

}  // namespace
}  // namespace topogate::inventory

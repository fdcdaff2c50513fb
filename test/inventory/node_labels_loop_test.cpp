// The reconcile loop for a nodeLabels inventory: no snapshot, only the hierarchy check over
// the Node list, re-run when the Node list file changes; its result in status, history and
// readiness; pushes refused.

#include <gtest/gtest.h>

#include <algorithm>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "inventory/registry.hpp"
#include "test_util.hpp"

namespace topogate::inventory {
namespace {

constexpr std::string_view region = "topology.kubernetes.io/region";
constexpr std::string_view zone = "topology.kubernetes.io/zone";
constexpr std::string_view rack = "topology.gpustack.ai/rack";

// Region -> zone -> rack read from the Nodes' labels, GPU workers only.
core::topology_source node_label_source() {
  core::topology_source s;
  s.api_version = "worker.gpustack.ai/v1";
  s.name = "cloud-racks";
  s.levels = {std::string(region), std::string(zone), std::string(rack)};
  core::label_selector sel;
  sel.match_labels = {{"node-role.kubernetes.io/worker", ""}};
  s.node_selector = sel;
  s.node_labels = true;
  return s;
}

using labels_t = std::vector<std::pair<std::string, std::string>>;

std::string nodes_json(const std::vector<std::pair<std::string, labels_t>>& nodes) {
  std::string out = R"({"apiVersion":"v1","kind":"List","items":[)";
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    if (i) out += ',';
    out += R"({"apiVersion":"v1","kind":"Node","metadata":{"name":")" + nodes[i].first +
           R"(","labels":{)";
    out += R"("kubernetes.io/hostname":")" + nodes[i].first + '"';
    for (const auto& [k, v] : nodes[i].second) out += ",\"" + k + "\":\"" + v + '"';
    out += "}}}";
  }
  out += "]}";
  return out;
}

labels_t worker(std::string_view r, std::string_view z, std::string_view k) {
  labels_t l = {{"node-role.kubernetes.io/worker", ""}};
  if (!r.empty()) l.emplace_back(std::string(region), std::string(r));
  if (!z.empty()) l.emplace_back(std::string(zone), std::string(z));
  if (!k.empty()) l.emplace_back(std::string(rack), std::string(k));
  return l;
}

const std::string good = nodes_json({{"worker-a", worker("eu", "a", "r1")},
                                     {"worker-b", worker("eu", "a", "r2")},
                                     {"worker-c", worker("eu", "b", "r3")},
                                     {"control-1", {{std::string(zone), "c"}}}});
// worker-c moved into rack r1 (already in zone a) and worker-d carries a zone without region.
const std::string bad = nodes_json({{"worker-a", worker("eu", "a", "r1")},
                                    {"worker-b", worker("eu", "a", "r2")},
                                    {"worker-c", worker("eu", "b", "r1")},
                                    {"worker-d", worker("", "b", "")},
                                    {"control-1", {{std::string(zone), "c"}}}});

struct fixture {
  testing::temp_dir dir;
  std::string nodes_path = dir / "nodes.json";
  std::vector<std::string> logs;
  std::mutex logs_mu;

  registry_config config(bool allow_empty_start = false) {
    registry_config cfg;
    inventory_spec spec;
    spec.config.name = "cloud-racks";
    spec.config.source = node_label_source();
    spec.kind = source_kind::node_labels;
    spec.config.allow_empty_start = allow_empty_start;
    spec.nodes_path = nodes_path;
    cfg.inventories.push_back(std::move(spec));
    cfg.resync_interval = std::chrono::seconds(3600);  // inotify alone must do it
    return cfg;
  }
  registry_observer observer() {
    registry_observer obs;
    obs.on_log = [this](std::string_view level, std::string_view, std::string_view msg) {
      std::lock_guard lk(logs_mu);
      logs.push_back(std::string(level) + " " + std::string(msg));
    };
    return obs;
  }
};

std::string join(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& l : lines) out += l + "\n";
  return out;
}

std::vector<std::pair<std::string, std::string>> rules_and_paths(const core::error_list& errors) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& e : errors) out.emplace_back(e.rule, e.path);
  return out;
}

TEST(NodeLabelLoop, ChecksEveryNodeListChange) {
  fixture f;
  testing::write_file(f.nodes_path, good);
  registry reg(f.config(), system_clock(), f.observer());
  reg.start();
  ASSERT_TRUE(reg.source_of("cloud-racks")->checks_node_labels());
  const auto first = reg.node_labels("cloud-racks");
  ASSERT_NE(first, nullptr) << "start() reads the Node list synchronously";
  EXPECT_TRUE(first->report.ok()) << core::render_text(first->report.errors);
  EXPECT_EQ(first->checks, 1u);
  EXPECT_EQ(first->report.selected_nodes, 3u);  // control-1 is not selected
  EXPECT_EQ(first->report.total_nodes, 4u);
  EXPECT_EQ(first->nodes_origin, "file:" + f.nodes_path);
  const auto ready = reg.inventory_ready("cloud-racks");
  EXPECT_TRUE(ready.ok()) << ready.error().message;
  EXPECT_TRUE(reg.ready());

  testing::write_atomic(f.nodes_path, bad);
  ASSERT_TRUE(testing::eventually([&] {
    const auto c = reg.node_labels("cloud-racks");
    return c && c->checks == 2;
  }));
  const auto second = reg.node_labels("cloud-racks");
  EXPECT_FALSE(second->report.ok());
  EXPECT_EQ(rules_and_paths(second->report.errors),
            (std::vector<std::pair<std::string, std::string>>{
                {"S8", "nodes[worker-d][topology.kubernetes.io/region]"},
                {"S9", "nodes[worker-c][topology.gpustack.ai/rack]"}}));
  // Findings, not readiness: the replica stays in the Service.
  EXPECT_TRUE(reg.inventory_ready("cloud-racks").ok());

  // The same list again (a rewrite with identical content) is not a change.
  testing::write_atomic(f.nodes_path, bad);
  testing::write_atomic(f.nodes_path, good);
  ASSERT_TRUE(testing::eventually([&] {
    const auto c = reg.node_labels("cloud-racks");
    return c && c->report.ok();
  }));
  EXPECT_EQ(reg.node_labels("cloud-racks")->checks, 3u);

  // History: newest first, each check with its verdict and errors.
  const auto hist = reg.history_json("cloud-racks");
  ASSERT_TRUE(hist.has_value());
  const std::string& h = *hist;
  const auto p1 = h.find("\"revision\":\"node-labels-3\",\"origin\":\"nodes:file:");
  const auto p2 = h.find("\"revision\":\"node-labels-2\"");
  const auto p3 = h.find("\"revision\":\"node-labels-1\"");
  ASSERT_NE(p1, std::string::npos) << h;
  ASSERT_NE(p2, std::string::npos) << h;
  ASSERT_NE(p3, std::string::npos) << h;
  EXPECT_LT(p1, p2);
  EXPECT_LT(p2, p3);
  EXPECT_NE(h.find("\"rules\":[\"S8\",\"S9\"]"), std::string::npos) << h;

  // Status: the last report, and no snapshot.
  const auto status = reg.status_json("cloud-racks");
  ASSERT_TRUE(status.has_value());
  const std::string& s = *status;
  EXPECT_NE(s.find("\"provider\":\"nodeLabels\""), std::string::npos) << s;
  EXPECT_NE(s.find("\"serving\":false"), std::string::npos) << s;
  EXPECT_NE(s.find("\"valid\":true"), std::string::npos) << s;
  EXPECT_NE(s.find("\"checks\":3"), std::string::npos) << s;

  // Logged: one warning for the invalid list naming the rule.
  {
    std::lock_guard lk(f.logs_mu);
    const auto warned = std::count_if(f.logs.begin(), f.logs.end(), [](const std::string& l) {
      return l.starts_with("warn node-label hierarchy check 2") &&
             l.find("[S9]") != std::string::npos;
    });
    EXPECT_EQ(warned, 1) << join(f.logs);
  }
  reg.stop();
}

TEST(NodeLabelLoop, PushesAreRefused) {
  fixture f;
  testing::write_file(f.nodes_path, good);
  registry_config cfg = f.config();
  cfg.store.type = store_config::kind::file;
  cfg.store.directory = f.dir / "store";
  registry reg(std::move(cfg), system_clock(), f.observer());
  reg.start();
  const auto a =
      reg.push("cloud-racks", testing::snapshot_json("rev-1"), std::nullopt, "bearer:cloud-racks");
  // 409 Conflict over HTTP (test/server/inventory_http_test.cpp): here, the outcome and why.
  EXPECT_EQ(a.outcome, push_outcome::not_pushable) << to_string(a.outcome) << ": " << a.message;
  EXPECT_NE(a.message.find("nodeLabels"), std::string::npos) << a.message;
  EXPECT_EQ(reg.find("cloud-racks")->current(), nullptr);
  reg.stop();
}

TEST(NodeLabelLoop, NotReadyUntilTheNodeListIsRead) {
  fixture f;  // no Node list file yet
  registry reg(f.config(), system_clock(), f.observer());
  reg.start();
  const auto ready = reg.inventory_ready("cloud-racks");
  ASSERT_FALSE(ready.ok());
  EXPECT_EQ(ready.error().code, core::errc::unavailable);
  EXPECT_NE(ready.error().message.find(f.nodes_path), std::string::npos) << ready.error().message;
  EXPECT_FALSE(reg.ready());
  EXPECT_EQ(reg.node_labels("cloud-racks"), nullptr);
  testing::write_atomic(f.nodes_path, good);
  EXPECT_TRUE(testing::eventually([&] { return reg.inventory_ready("cloud-racks").ok(); }));
  EXPECT_TRUE(reg.ready());
  reg.stop();

  fixture g;
  registry allowed(g.config(/*allow_empty_start=*/true), system_clock(), g.observer());
  allowed.start();
  EXPECT_TRUE(allowed.inventory_ready("cloud-racks").ok());
  allowed.stop();
}

// A snapshot inventory is not a nodeLabels one, and keeps its own readiness.
TEST(NodeLabelLoop, SnapshotInventoriesUnaffected) {
  testing::temp_dir dir;
  registry_config cfg;
  inventory_spec spec;
  spec.config = testing::config("dc");
  spec.snapshot_path = dir / "snapshot.json";
  spec.kind = source_kind::file;
  cfg.inventories.push_back(std::move(spec));
  testing::write_file(dir / "snapshot.json", testing::snapshot_json("rev-1"));
  registry reg(std::move(cfg));
  reg.start();
  EXPECT_FALSE(reg.source_of("dc")->checks_node_labels());
  EXPECT_EQ(reg.node_labels("dc"), nullptr);
  EXPECT_TRUE(reg.inventory_ready("dc").ok());
  EXPECT_EQ(reg.source_of("missing"), nullptr);
  EXPECT_TRUE(reg.inventory_ready("missing").failed_with(core::errc::not_found));
  reg.stop();
}

}  // namespace
}  // namespace topogate::inventory

// Pushes, file changes, Node-list changes and reads in parallel (run it under the tsan
// preset): no data race, readers only ever see complete validated revisions, and pushes
// that were acknowledged with If-Match form one unbroken chain.

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <thread>

#include "inventory/registry.hpp"
#include "test_util.hpp"

namespace topogate::inventory {
namespace {

TEST(Concurrency, PushesFilesNodesAndReadsInParallel) {
  testing::temp_dir dir;
  const auto snap = dir / "filed.json";
  const auto nodes = dir / "nodes.json";
  testing::write_file(snap, testing::snapshot_json("file-0"));
  testing::write_file(nodes, testing::nodes_json(8));

  registry_config cfg;
  inventory_spec pushed;
  pushed.config = testing::config("pushed");
  pushed.config.unknown_nodes = unknown_nodes_policy::prune;
  pushed.nodes_path = nodes;
  inventory_spec filed;
  filed.config = testing::config("filed");
  filed.snapshot_path = snap;
  filed.kind = source_kind::file;
  filed.nodes_path = nodes;
  cfg.inventories.push_back(std::move(pushed));
  cfg.inventories.push_back(std::move(filed));
  cfg.store.type = store_config::kind::file;
  cfg.store.directory = dir / "store";
  cfg.resync_interval = std::chrono::seconds(1);
  registry_observer quiet;
  std::atomic<int> observed{0};
  quiet.on_log = [](std::string_view, std::string_view, std::string_view) {};
  quiet.on_attempt = [&](const std::string&, const attempt&) { observed.fetch_add(1); };
  registry reg(std::move(cfg), system_clock(), quiet);
  reg.start();

  std::atomic<bool> done{false};
  std::atomic<int> bad{0};
  std::atomic<int> acked_conditional{0};
  std::atomic<int> conflicts{0};
  std::vector<std::thread> threads;
  std::mutex chain_mu;
  std::vector<std::string> matched;  // the ETag each acknowledged conditional push replaced

  // Two conditional writers race on the same inventory: each push that succeeds must have
  // matched the revision served just before it.
  for (int w = 0; w < 2; ++w) {
    threads.emplace_back([&, w] {
      auto* inv = reg.find("pushed");
      for (int i = 0; i < 60; ++i) {
        const auto cur = inv->current();
        std::optional<std::string> tag;
        if (cur) tag = cur->etag;
        const auto a = reg.push(
            "pushed", testing::snapshot_json("w" + std::to_string(w) + "-" + std::to_string(i), 8),
            tag, "writer-" + std::to_string(w));
        if (a.outcome == push_outcome::stored || a.outcome == push_outcome::created) {
          acked_conditional.fetch_add(1);
          if (tag) {
            std::lock_guard lk(chain_mu);
            matched.push_back(*tag);
          }
        } else if (a.outcome == push_outcome::precondition_failed) {
          conflicts.fetch_add(1);
        } else {
          bad.fetch_add(1);
        }
      }
    });
  }
  threads.emplace_back([&] {
    for (int i = 1; i <= 60; ++i)
      testing::write_atomic(snap, testing::snapshot_json("file-" + std::to_string(i)));
  });
  threads.emplace_back([&] {
    for (int i = 0; i < 20; ++i)
      testing::write_atomic(nodes, testing::nodes_json(8, i % 2 == 0 ? 7 : -1));
    testing::write_atomic(nodes, testing::nodes_json(8));
  });
  for (int r = 0; r < 3; ++r) {
    threads.emplace_back([&] {
      while (!done.load()) {
        for (auto* inv : reg.all()) {
          const auto d = inv->serve();
          if (d.rev && d.rev->etag != inventory::etag_of(d.rev->json_body())) bad.fetch_add(1);
          if (!d.rev && d.unavailable_reason.empty()) bad.fetch_add(1);
          (void)inv->history();
          (void)inv->ready();
        }
        if (!reg.status_json("pushed")) bad.fetch_add(1);
        if (!reg.history_json("filed")) bad.fetch_add(1);
        (void)reg.ready();
      }
    });
  }
  for (std::size_t i = 0; i + 3 < threads.size(); ++i) threads[i].join();
  reg.resync();
  EXPECT_TRUE(testing::eventually(
      [&] { return testing::served_revision(reg.find("filed")) == "file-60"; }));
  EXPECT_TRUE(testing::eventually(
      [&] { return reg.find("pushed")->selected_node_count() == std::optional<std::size_t>(8); }));
  done = true;
  for (std::size_t i = threads.size() - 3; i < threads.size(); ++i) threads[i].join();

  EXPECT_EQ(bad.load(), 0);
  EXPECT_GT(acked_conditional.load(), 0);
  EXPECT_EQ(acked_conditional.load() + conflicts.load(), 120);
  EXPECT_GT(observed.load(), 0);
  // No two acknowledged conditional pushes replaced the same revision: none was lost.
  std::sort(matched.begin(), matched.end());
  EXPECT_EQ(std::adjacent_find(matched.begin(), matched.end()), matched.end());
  EXPECT_NE(reg.find("pushed")->current(), nullptr);
  reg.stop();
}

}  // namespace
}  // namespace topogate::inventory

// Inventories whose Node list comes from the Kubernetes API (nodesFromAPI), with the Node
// watch handed to the registry (registry_deps, the seam serve uses) and driven by the test:
// start() does not wait for the first list, the inventory is not ready until it comes, and
// the snapshot file is first read against it. (kube_test.cpp does the same against a real
// kube-apiserver when one is available.)

#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <mutex>

#include "fake_node_watch.hpp"
#include "inventory/registry.hpp"
#include "inventory/store.hpp"
#include "test_util.hpp"

namespace topogate::inventory {
namespace {

struct fixture {
  testing::temp_dir dir;
  fake_node_watch* watch = nullptr;
  std::unique_ptr<registry> reg;

  explicit fixture(unknown_nodes_policy policy) {
    auto cfg = api_fed_config(dir);
    cfg.inventories[0].config.unknown_nodes = policy;
    registry_deps deps;
    auto w = std::make_unique<fake_node_watch>();
    watch = w.get();
    deps.nodes = std::move(w);
    registry_observer quiet;
    quiet.on_log = [](std::string_view, std::string_view, std::string_view) {};
    reg = std::make_unique<registry>(std::move(cfg), std::move(deps), system_clock(), quiet);
  }
  ~fixture() { reg->stop(); }
};

TEST(NodeWatch, TheSnapshotFileWaitsForTheFirstNodeList) {
  fixture f(unknown_nodes_policy::reject);
  f.reg->start();
  EXPECT_EQ(f.watch->starts(), 1);
  auto* inv = f.reg->find("dc");
  const auto ready = f.reg->inventory_ready("dc");
  ASSERT_FALSE(ready.ok());
  EXPECT_NE(ready.error().message.find("first Node list"), std::string::npos)
      << ready.error().message;
  EXPECT_EQ(inv->current(), nullptr)
      << "the file is not read before the Node list (or the grace's end)";

  ASSERT_TRUE(f.watch->deliver(testing::nodes(4)));
  ASSERT_TRUE(testing::eventually([&] { return f.reg->inventory_ready("dc").ok(); }));
  EXPECT_EQ(testing::served_revision(inv), "n-1");
  EXPECT_EQ(inv->selected_node_count(), std::optional<std::size_t>(4));

  // A Node leaves the cluster: the revision names it (unknownNodes: reject), nothing is served.
  ASSERT_TRUE(f.watch->deliver(testing::nodes(4, 3)));
  EXPECT_TRUE(testing::eventually([&] { return inv->serve().rev == nullptr; }));
  ASSERT_TRUE(f.watch->deliver(testing::nodes(4)));
  EXPECT_TRUE(testing::eventually([&] { return testing::served_revision(inv) == "n-1"; }));
}

TEST(NodeWatch, TheFirstReadIsValidatedAgainstTheListFromTheApi) {
  fixture f(unknown_nodes_policy::prune);
  f.reg->start();
  auto* inv = f.reg->find("dc");
  // worker-3 is not in the cluster when the list comes: the first revision served is pruned,
  // and no revision was ever published from the file without the list.
  ASSERT_TRUE(f.watch->deliver(testing::nodes(4, 3)));
  ASSERT_TRUE(testing::eventually([&] { return f.reg->inventory_ready("dc").ok(); }));
  EXPECT_EQ(testing::served_revision(inv), "n-1+pruned-1");
  for (const auto& a : inv->history()) {
    if (a.accepted) {
      EXPECT_EQ(a.pruned_nodes, 1u) << a.revision_id << " from " << a.origin;
    }
  }
}

// A burst of Node changes (a scale-up, a controller relabelling every Node) costs the
// registry one copy of the list per coalescing window, not one per change, and the list it
// applies is the latest.
TEST(NodeWatch, ABurstOfChangesIsCopiedOncePerWindow) {
  fixture f(unknown_nodes_policy::prune);
  f.reg->start();
  auto* inv = f.reg->find("dc");
  std::atomic<int> copies{0};
  ASSERT_TRUE(f.watch->deliver_lazily([] { return testing::nodes(4); }, copies));
  ASSERT_TRUE(testing::eventually([&] { return f.reg->inventory_ready("dc").ok(); }));
  EXPECT_EQ(copies.load(), 1) << "the first list is applied at once";
  constexpr int burst = 200;
  std::atomic<int> latest{4};
  for (int i = 0; i < burst; ++i) {
    // Alternately 4 Nodes and 3: the last change leaves 3 (worker-3 gone).
    latest = i % 2 == 0 ? 3 : 4;
    if (i == burst - 1) latest = 3;
    ASSERT_TRUE(f.watch->deliver_lazily(
        [&latest] { return latest.load() == 3 ? testing::nodes(4, 3) : testing::nodes(4); },
        copies));
  }
  ASSERT_TRUE(testing::eventually([&] { return testing::served_revision(inv) == "n-1+pruned-1"; }));
  EXPECT_LE(copies.load(), 1 + 5) << burst << " changes were copied " << copies.load() << " times";
}

// Changes that cancel out within one window (a Node leaves and is back) give a list equal to
// the one before under a new name. The inventory learns the name: the next list, whose
// changes are named from it, is applied from those changes alone, not compared in full.
TEST(NodeWatch, AListEqualToTheOneBeforeKeepsTheNextChangeIncremental) {
  fixture f(unknown_nodes_policy::prune);
  f.reg->start();
  auto* inv = f.reg->find("dc");
  const auto named = [](core::node_list l, std::uint64_t id, std::uint64_t since,
                        std::vector<std::string> changed) {
    l.id = id;
    l.since = since;
    l.changed = std::move(changed);
    return l;
  };
  ASSERT_TRUE(f.watch->deliver(named(testing::nodes(4), 1, 0, {})));
  ASSERT_TRUE(testing::eventually([&] { return f.reg->inventory_ready("dc").ok(); }));
  EXPECT_EQ(testing::served_revision(inv), "n-1");
  EXPECT_EQ(inv->full_node_comparisons(), 1u) << "the first list is compared in full";

  // worker-3 left and came back within the window: the same Nodes, list 2 (taken before the
  // next change comes, as a window apart).
  std::atomic<int> taken{0};
  ASSERT_TRUE(f.watch->deliver_lazily(
      [&named] { return named(testing::nodes(4), 2, 1, {"worker-3"}); }, taken));
  ASSERT_TRUE(testing::eventually([&] { return taken.load() == 1; }));
  // Then it leaves (list 3, named from list 2), and comes back (list 4).
  ASSERT_TRUE(f.watch->deliver(named(testing::nodes(4, 3), 3, 2, {"worker-3"})));
  ASSERT_TRUE(testing::eventually([&] { return testing::served_revision(inv) == "n-1+pruned-1"; }));
  ASSERT_TRUE(f.watch->deliver(named(testing::nodes(4), 4, 3, {"worker-3"})));
  ASSERT_TRUE(testing::eventually([&] { return testing::served_revision(inv) == "n-1"; }));
  EXPECT_EQ(inv->full_node_comparisons(), 1u)
      << "each list after the first was applied from the Nodes it names";
  EXPECT_EQ(inv->incremental_node_changes(), 2u);

  // A list not named from the last one (a relist) is compared in full, and changes nothing.
  const auto served = inv->serve().rev;
  ASSERT_TRUE(f.watch->deliver(named(testing::nodes(4), 9, 0, {})));
  ASSERT_TRUE(testing::eventually([&] { return inv->full_node_comparisons() == 2u; }));
  EXPECT_EQ(inv->serve().rev, served);
}

// The watch could not be built (serve passes its error along): reported, and the file is
// served without a Node list rather than never.
TEST(NodeWatch, WithoutAWatchTheErrorIsReportedAndTheFileIsReadWithoutNodes) {
  testing::temp_dir dir;
  auto cfg = api_fed_config(dir);
  cfg.resync_interval = registry_config{}.resync_interval;
  registry_deps deps;
  deps.nodes_error = "no Kubernetes API in this test";
  std::mutex mu;
  std::vector<std::string> logs;
  registry_observer obs;
  obs.on_log = [&](std::string_view level, std::string_view, std::string_view msg) {
    std::lock_guard lk(mu);
    logs.push_back(std::string(level) + " " + std::string(msg));
  };
  registry reg(std::move(cfg), std::move(deps), system_clock(), obs);
  reg.start();
  {
    std::lock_guard lk(mu);
    bool reported = false;
    for (const auto& l : logs)
      reported = reported || l.find("no Kubernetes API in this test") != std::string::npos;
    EXPECT_TRUE(reported);
  }
  EXPECT_EQ(testing::served_revision(reg.find("dc")), "n-1");
  EXPECT_EQ(reg.find("dc")->selected_node_count(), std::nullopt);
  reg.stop();
}

}  // namespace
}  // namespace topogate::inventory

// registry::store_available (topogate_store_available): the outcome of the last store call of
// a push-fed inventory. The store is the real file store behind a switch that makes its calls
// fail as an unreachable API server or a broken disk does (errc::unavailable), injected through
// registry_deps, the seam serve uses.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>

#include "inventory/registry.hpp"
#include "inventory/store.hpp"
#include "test_util.hpp"

namespace topogate::inventory {
namespace {

class switchable_store final : public revision_store {
 public:
  explicit switchable_store(std::unique_ptr<revision_store> inner) : inner_(std::move(inner)) {}

  std::atomic<bool> down{false};
  std::atomic<bool> conflict{false};
  std::atomic<bool> loads_down{false};  // reads fail, writes still answer

  [[nodiscard]] std::string describe() const override { return "switchable:" + inner_->describe(); }
  core::result<void> load(const std::string& inv, store_state& out,
                          store_deadline deadline) override {
    if (down || loads_down) return core::fail(core::errc::unavailable, "store down");
    return inner_->load(inv, out, deadline);
  }
  core::result<std::string> save(const std::string& inv, const stored_revision& rev,
                                 const std::string& expected, store_deadline deadline) override {
    if (down) return core::fail(core::errc::unavailable, "store down");
    if (conflict) return core::fail(core::errc::conflict, "another version");
    return inner_->save(inv, rev, expected, deadline);
  }

 private:
  std::unique_ptr<revision_store> inner_;
};

struct fixture {
  testing::temp_dir dir;
  switchable_store* store = nullptr;
  std::unique_ptr<registry> reg;

  explicit fixture(bool down_at_start) {
    registry_config cfg;
    inventory_spec pushed;
    pushed.config = testing::config("pushed");
    cfg.inventories.push_back(std::move(pushed));
    testing::write_file(dir / "snapshot.json", testing::snapshot_json("file-1"));
    inventory_spec file_fed;
    file_fed.config = testing::config("file-fed");
    file_fed.snapshot_path = dir / "snapshot.json";
    file_fed.kind = source_kind::file;
    cfg.inventories.push_back(std::move(file_fed));
    cfg.store.type = store_config::kind::file;
    cfg.store.directory = dir / "store";
    cfg.store.timeout = std::chrono::seconds(5);
    cfg.resync_interval = std::chrono::seconds(3600);
    registry_deps deps = make_file_dependencies(cfg.store);
    auto s = std::make_unique<switchable_store>(std::move(deps.store));
    s->down = down_at_start;
    store = s.get();
    deps.store = std::move(s);
    reg = std::make_unique<registry>(std::move(cfg), std::move(deps));
  }
  ~fixture() { reg->stop(); }

  push_outcome push(const std::string& revision) {
    return reg->push("pushed", testing::snapshot_json(revision), std::nullopt, "w").outcome;
  }
};

TEST(StoreAvailable, FollowsTheLastStoreCallOfAPushFedInventory) {
  fixture f(false);
  // Before the first call nothing is known, and nothing is reported.
  EXPECT_EQ(f.reg->store_available("pushed"), std::nullopt);
  f.reg->start();
  ASSERT_TRUE(testing::eventually(
      [&] { return f.reg->store_available("pushed") == std::optional<bool>(true); }));
  ASSERT_EQ(f.push("p-1"), push_outcome::created);
  EXPECT_EQ(f.reg->store_available("pushed"), std::optional<bool>(true));

  f.store->down = true;
  EXPECT_EQ(f.push("p-2"), push_outcome::unavailable);
  EXPECT_EQ(f.reg->store_available("pushed"), std::optional<bool>(false));

  f.store->down = false;
  EXPECT_EQ(f.push("p-3"), push_outcome::stored);
  EXPECT_EQ(f.reg->store_available("pushed"), std::optional<bool>(true));
}

TEST(StoreAvailable, AConflictIsAnAnswer) {
  fixture f(false);
  f.reg->start();
  ASSERT_EQ(f.push("p-1"), push_outcome::created);
  f.store->conflict = true;
  // With If-Match the conflict is not retried: 412, and the store did answer.
  const auto served = f.reg->find("pushed")->current()->etag;
  const auto r = f.reg->push("pushed", testing::snapshot_json("p-2"), served, "w");
  EXPECT_EQ(r.outcome, push_outcome::precondition_failed);
  EXPECT_EQ(f.reg->store_available("pushed"), std::optional<bool>(true));
}

// Without If-Match a conflict is retried over the store's newest version. When that version
// cannot be read (the API restarting), or the store changes under every retry, nothing is
// written and there is no precondition to have failed: 503, never 412, and the served
// revision stays.
TEST(StoreAvailable, AnUnconditionalPushIsNeverAPreconditionFailure) {
  fixture f(false);
  f.reg->start();
  ASSERT_EQ(f.push("p-1"), push_outcome::created);
  const auto served = f.reg->find("pushed")->current()->etag;
  f.store->conflict = true;
  f.store->loads_down = true;
  EXPECT_EQ(f.push("p-2"), push_outcome::unavailable);
  EXPECT_EQ(f.reg->find("pushed")->current()->etag, served);
  f.store->loads_down = false;
  EXPECT_EQ(f.push("p-3"), push_outcome::unavailable);
  EXPECT_EQ(f.reg->find("pushed")->current()->etag, served);
  // With If-Match the same conflict is a 412.
  EXPECT_EQ(f.reg->push("pushed", testing::snapshot_json("p-4"), served, "w").outcome,
            push_outcome::precondition_failed);
  f.store->conflict = false;
  EXPECT_EQ(f.push("p-5"), push_outcome::stored);
  EXPECT_NE(f.reg->find("pushed")->current()->etag, served);
}

TEST(StoreAvailable, AStoreDownAtStartIsReportedWhileTheFirstLoadIsRetried) {
  fixture f(true);
  f.reg->start();
  ASSERT_TRUE(testing::eventually(
      [&] { return f.reg->store_available("pushed") == std::optional<bool>(false); }));
  EXPECT_FALSE(f.reg->inventory_ready("pushed").ok());
  f.store->down = false;
  // The retry (after 0.5 s) answers.
  ASSERT_TRUE(testing::eventually(
      [&] { return f.reg->store_available("pushed") == std::optional<bool>(true); }));
  // The store answered: the inventory waits for a first push now, no longer for the store.
  ASSERT_TRUE(testing::eventually([&] {
    const auto ready = f.reg->inventory_ready("pushed");
    return !ready.ok() && ready.error().message.find("waiting for the store") == std::string::npos;
  }));
  EXPECT_EQ(f.push("p-1"), push_outcome::created);
  EXPECT_TRUE(f.reg->inventory_ready("pushed").ok());
}

TEST(StoreAvailable, NotReportedForFileFedOrUnknownInventoriesOrWithoutAStore) {
  fixture f(false);
  f.reg->start();
  ASSERT_TRUE(testing::eventually([&] { return f.reg->store_available("pushed").has_value(); }));
  EXPECT_EQ(f.reg->store_available("file-fed"), std::nullopt);
  EXPECT_EQ(f.reg->store_available("nope"), std::nullopt);

  registry_config cfg;
  inventory_spec pushed;
  pushed.config = testing::config("pushed");
  cfg.inventories.push_back(std::move(pushed));
  registry no_store(std::move(cfg));
  no_store.start();
  EXPECT_EQ(no_store.push("pushed", testing::snapshot_json("p-1"), std::nullopt, "w").outcome,
            push_outcome::unavailable);
  EXPECT_EQ(no_store.store_available("pushed"), std::nullopt);
  no_store.stop();
}

}  // namespace
}  // namespace topogate::inventory

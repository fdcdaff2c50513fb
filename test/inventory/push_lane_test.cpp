// Pushes run on their inventory's lane, never on the caller's thread: a store that hangs
// delays only that inventory's pushes, each is answered by store.timeout, at most
// max_pushes_in_progress wait, pushes to one inventory keep their order, and start() does
// not wait for the store. The store is the real file store behind a gate the test opens and
// closes (injected through registry_deps, the seam serve uses); the integration test
// test/integration/test_store_stall.py shows the same with a real hanging API server and a
// frozen filesystem.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <future>
#include <mutex>
#include <set>

#include "inventory/registry.hpp"
#include "inventory/store.hpp"
#include "test/timing.hpp"
#include "test_util.hpp"

namespace topogate::inventory {
namespace {

using namespace std::chrono_literals;
using test_timing::margin_seconds;
using test_timing::scheduling_margin;
using steady = std::chrono::steady_clock;

// A real store whose calls for the inventories in `closed` wait until they are opened: like
// a disk or an API server that hangs. `honour_deadline` false waits past the call's
// deadline too, as a frozen disk does.
class gated_store final : public revision_store {
 public:
  explicit gated_store(std::unique_ptr<revision_store> inner) : inner_(std::move(inner)) {}

  void close(const std::string& inv, bool honour_deadline = true) {
    std::lock_guard lk(mu_);
    closed_.insert(inv);
    honour_ = honour_deadline;
  }
  void open_all() {
    {
      std::lock_guard lk(mu_);
      closed_.clear();
    }
    cv_.notify_all();
  }
  int waiting() {
    std::lock_guard lk(mu_);
    return waiting_;
  }

  [[nodiscard]] std::string describe() const override { return "gated:" + inner_->describe(); }
  core::result<void> load(const std::string& inv, store_state& out,
                          store_deadline deadline) override {
    if (!pass(inv, deadline))
      return core::fail(core::errc::unavailable, "gate closed past the deadline");
    return inner_->load(inv, out, deadline);
  }
  core::result<std::string> save(const std::string& inv, const stored_revision& rev,
                                 const std::string& expected, store_deadline deadline) override {
    if (!pass(inv, deadline))
      return core::fail(core::errc::unavailable, "gate closed past the deadline");
    ++saves;
    return inner_->save(inv, rev, expected, deadline);
  }
  std::atomic<int> saves{0};

 private:
  bool pass(const std::string& inv, store_deadline deadline) {
    std::unique_lock lk(mu_);
    ++waiting_;
    bool ok = true;
    if (honour_) {
      ok = cv_.wait_until(lk, deadline, [&] { return !closed_.contains(inv); });
    } else {
      cv_.wait(lk, [&] { return !closed_.contains(inv); });
    }
    --waiting_;
    return ok;
  }

  std::unique_ptr<revision_store> inner_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::set<std::string> closed_;
  bool honour_ = true;
  int waiting_ = 0;
};

struct fixture {
  testing::temp_dir dir;
  gated_store* store = nullptr;
  std::unique_ptr<registry> reg;

  explicit fixture(std::chrono::milliseconds timeout, std::vector<std::string> names = {"a", "b"}) {
    registry_config cfg;
    for (const auto& n : names) {
      inventory_spec spec;
      spec.config = testing::config(n);
      cfg.inventories.push_back(std::move(spec));
    }
    cfg.store.type = store_config::kind::file;
    cfg.store.directory = dir / "store";
    cfg.store.timeout = timeout;
    cfg.resync_interval = std::chrono::seconds(3600);
    registry_deps deps = make_file_dependencies(cfg.store);
    auto gated = std::make_unique<gated_store>(std::move(deps.store));
    store = gated.get();
    deps.store = std::move(gated);
    reg = std::make_unique<registry>(std::move(cfg), std::move(deps));
  }
  ~fixture() {
    store->open_all();
    reg->stop();
  }
};

// Sends a push and returns a future of its result (the registry answers from its threads).
std::future<push_result> push_later(registry& reg, const std::string& name,
                                    const std::string& revision,
                                    std::optional<std::string> if_match = std::nullopt) {
  auto p = std::make_shared<std::promise<push_result>>();
  auto f = p->get_future();
  reg.push_async({name, testing::snapshot_json(revision), std::move(if_match), "w", std::nullopt},
                 [p](push_result r) { p->set_value(std::move(r)); });
  return f;
}

double seconds_since(steady::time_point t) {
  return std::chrono::duration<double>(steady::now() - t).count();
}

TEST(PushLane, StartDoesNotWaitForTheStoreAndTheInventoryIsNotReadyUntilItAnswers) {
  fixture f(10s);
  f.store->close("a");
  const auto t0 = steady::now();
  f.reg->start();
  // Waiting for the store would take its whole timeout (10 s): the store is closed.
  EXPECT_LT(seconds_since(t0), 10.0);
  ASSERT_TRUE(testing::eventually([&] { return f.store->waiting() == 1; }));
  const auto ready = f.reg->inventory_ready("a");
  ASSERT_FALSE(ready.ok());
  EXPECT_EQ(ready.error().code, core::errc::unavailable);
  EXPECT_NE(ready.error().message.find("waiting for the store gated:file:"), std::string::npos)
      << ready.error().message;
  // Ready, or not ready for another reason than the store.
  const auto store_answered = [&](std::string_view name) {
    const auto r = f.reg->inventory_ready(name);
    return r.ok() || r.error().message.find("waiting for the store") == std::string::npos;
  };
  // The other inventory's store answered (it has no revision: not ready for that reason).
  ASSERT_TRUE(testing::eventually([&] { return store_answered("b"); }));
  f.store->open_all();
  EXPECT_TRUE(testing::eventually([&] { return store_answered("a"); }));
}

TEST(PushLane, AHangingStoreDelaysOnlyItsOwnInventory) {
  fixture f(10s);
  f.reg->start();
  ASSERT_EQ(f.reg->push("a", testing::snapshot_json("a-1"), std::nullopt, "w").outcome,
            push_outcome::created);
  f.store->close("a");
  auto hung = push_later(*f.reg, "a", "a-2");
  ASSERT_TRUE(testing::eventually([&] { return f.store->waiting() == 1; }));
  // Another inventory's push, and reads of the hung one, go on.
  const auto t0 = steady::now();
  EXPECT_EQ(f.reg->push("b", testing::snapshot_json("b-1"), std::nullopt, "w").outcome,
            push_outcome::created);
  EXPECT_EQ(testing::served_revision(f.reg->find("a")), "a-1");
  EXPECT_TRUE(f.reg->status_json("a").has_value());
  // In that order: all of it was done while the hung push was still unanswered (it is
  // answered at the store's 10 s timeout at the earliest).
  EXPECT_LT(seconds_since(t0), 10.0);
  EXPECT_EQ(hung.wait_for(0s), std::future_status::timeout);
  f.store->open_all();
  EXPECT_EQ(hung.get().outcome, push_outcome::stored);
  EXPECT_EQ(testing::served_revision(f.reg->find("a")), "a-2");
}

TEST(PushLane, APushIsAnsweredAtItsDeadlineAndNothingIsStoredOrServed) {
  fixture f(300ms);
  f.reg->start();
  ASSERT_EQ(f.reg->push("a", testing::snapshot_json("a-1"), std::nullopt, "w").outcome,
            push_outcome::created);
  const auto etag = f.reg->find("a")->current()->etag;
  f.store->close("a", /*honour_deadline=*/false);  // a frozen disk: the call itself never returns
  const auto t0 = steady::now();
  auto late = push_later(*f.reg, "a", "a-2");
  // store.timeout is 300 ms; the bound is that plus the margin (test/timing.hpp).
  ASSERT_EQ(late.wait_for(300ms + scheduling_margin), std::future_status::ready);
  const double answered = seconds_since(t0);
  const auto r = late.get();
  EXPECT_EQ(r.outcome, push_outcome::unavailable);
  EXPECT_NE(r.message.find("store.timeout (0.3 s)"), std::string::npos) << r.message;
  EXPECT_GE(r.retry_after.count(), 1);
  EXPECT_GE(answered, 0.25);
  EXPECT_LT(answered, 0.3 + margin_seconds);
  EXPECT_EQ(f.reg->find("a")->current()->etag, etag);
  // The disk comes back after the deadline: the file store gives up before its rename, so
  // what was answered 503 is neither stored nor served; the next push succeeds.
  f.store->open_all();
  EXPECT_EQ(f.reg->push("a", testing::snapshot_json("a-3"), std::nullopt, "w").outcome,
            push_outcome::stored);
  EXPECT_EQ(testing::served_revision(f.reg->find("a")), "a-3");
  const auto hist = f.reg->find("a")->history();
  bool a2_accepted = false;
  for (const auto& h : hist) a2_accepted = a2_accepted || (h.accepted && h.revision_id == "a-2");
  EXPECT_FALSE(a2_accepted);
}

TEST(PushLane, AtMostFourPushesWaitPerInventoryTheNextIsRefusedAtOnce) {
  fixture f(10s);
  f.reg->start();
  ASSERT_EQ(f.reg->push("a", testing::snapshot_json("a-0"), std::nullopt, "w").outcome,
            push_outcome::created);
  f.store->close("a");
  std::vector<std::future<push_result>> waiting;
  for (std::size_t i = 1; i <= max_pushes_in_progress; ++i)
    waiting.push_back(push_later(*f.reg, "a", "a-" + std::to_string(i)));
  ASSERT_TRUE(testing::eventually([&] { return f.store->waiting() == 1; }));
  const auto t0 = steady::now();
  auto refused = push_later(*f.reg, "a", "a-refused");
  // Refused at once, not queued: answered while the four queued are all still waiting
  // (the first of them until the store opens or its 10 s timeout).
  ASSERT_EQ(refused.wait_for(10s), std::future_status::ready);
  EXPECT_LT(seconds_since(t0), 10.0);
  EXPECT_EQ(waiting.front().wait_for(0s), std::future_status::timeout);
  const auto r = refused.get();
  EXPECT_EQ(r.outcome, push_outcome::busy);
  EXPECT_EQ(r.retry_after, 1s);
  // Another inventory is not counted against it.
  EXPECT_EQ(f.reg->push("b", testing::snapshot_json("b-1"), std::nullopt, "w").outcome,
            push_outcome::created);
  f.store->open_all();
  // The four that waited all complete, in the order they came.
  for (auto& w : waiting) EXPECT_EQ(w.get().outcome, push_outcome::stored);
  EXPECT_EQ(testing::served_revision(f.reg->find("a")), "a-4");
  std::vector<std::string> order;
  for (const auto& h : f.reg->find("a")->history()) {
    if (h.accepted) order.push_back(h.revision_id);
  }
  EXPECT_EQ(order, (std::vector<std::string>{"a-0", "a-1", "a-2", "a-3", "a-4"}));
  // A fifth is accepted again once the queue has room.
  EXPECT_EQ(f.reg->push("a", testing::snapshot_json("a-5"), std::nullopt, "w").outcome,
            push_outcome::stored);
}

TEST(PushLane, IfMatchIsJudgedInOrderAgainstWhatTheEarlierPushesPublished) {
  fixture f(10s);
  f.reg->start();
  ASSERT_EQ(f.reg->push("a", testing::snapshot_json("a-1"), std::nullopt, "w").outcome,
            push_outcome::created);
  const auto etag1 = f.reg->find("a")->current()->etag;
  f.store->close("a");
  // Both name the revision served now; the first to arrive wins, the second sees a-2.
  auto first = push_later(*f.reg, "a", "a-2", etag1);
  auto second = push_later(*f.reg, "a", "a-3", etag1);
  ASSERT_TRUE(testing::eventually([&] { return f.store->waiting() == 1; }));
  f.store->open_all();
  EXPECT_EQ(first.get().outcome, push_outcome::stored);
  const auto r = second.get();
  EXPECT_EQ(r.outcome, push_outcome::precondition_failed);
  ASSERT_NE(r.served, nullptr);
  EXPECT_EQ(r.served->revision_id, "a-2");
}

TEST(PushLane, PushesWaitingPastTheirDeadlineAreAnsweredAndNotTriedLater) {
  fixture f(300ms);
  f.reg->start();
  ASSERT_EQ(f.reg->push("a", testing::snapshot_json("a-1"), std::nullopt, "w").outcome,
            push_outcome::created);
  f.store->close("a", /*honour_deadline=*/false);
  auto running = push_later(*f.reg, "a", "a-2");
  ASSERT_TRUE(testing::eventually([&] { return f.store->waiting() == 1; }));
  auto queued = push_later(*f.reg, "a", "a-3");
  EXPECT_EQ(queued.wait_for(300ms + scheduling_margin), std::future_status::ready);
  EXPECT_EQ(queued.get().outcome, push_outcome::unavailable);
  EXPECT_EQ(running.get().outcome, push_outcome::unavailable);
  const int saves_before = f.store->saves.load();
  f.store->open_all();
  // The queued push is recorded as not attempted; only the running one reaches the store.
  ASSERT_TRUE(testing::eventually([&] {
    for (const auto& h : f.reg->find("a")->history()) {
      if (h.note.find("not attempted") != std::string::npos) return true;
    }
    return false;
  }));
  EXPECT_LE(f.store->saves.load() - saves_before, 1);
  EXPECT_EQ(testing::served_revision(f.reg->find("a")), "a-1");
}

TEST(PushLane, StopAnswersQueuedPushesAndReturnsWhileAStoreCallIsBlocked) {
  auto f = std::make_unique<fixture>(10s);
  f->reg->start();
  ASSERT_EQ(f->reg->push("a", testing::snapshot_json("a-1"), std::nullopt, "w").outcome,
            push_outcome::created);
  f->store->close("a", /*honour_deadline=*/false);
  auto running = push_later(*f->reg, "a", "a-2");
  ASSERT_TRUE(testing::eventually([&] { return f->store->waiting() == 1; }));
  auto queued = push_later(*f->reg, "a", "a-3");
  const auto t0 = steady::now();
  EXPECT_FALSE(f->reg->stop(200ms));  // the running call is still blocked
  EXPECT_LT(seconds_since(t0), 0.2 + margin_seconds);
  ASSERT_EQ(queued.wait_for(scheduling_margin), std::future_status::ready);
  const auto q = queued.get();
  EXPECT_EQ(q.outcome, push_outcome::unavailable);
  EXPECT_NE(q.message.find("shutting down"), std::string::npos) << q.message;
  // The blocked call returns once the store does; then the registry can go.
  f->store->open_all();
  EXPECT_EQ(running.wait_for(5s), std::future_status::ready);
  f.reset();
}

}  // namespace
}  // namespace topogate::inventory

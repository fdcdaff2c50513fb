// The store's order, one interleaving at a time: a store that behaves as the Kubernetes API
// does for one ConfigMap per inventory (create refused when the object exists, an update
// refused unless it names the current resourceVersion, 404 when it is gone) and whose watch
// events the test delivers itself, in the order it chooses. No sleeps: after events are
// delivered, a push of an unreadable body (answered on the inventory's lane, behind them)
// marks that the lane has applied them.

#include <gtest/gtest.h>

#include <algorithm>
#include <deque>
#include <map>
#include <mutex>

#include "inventory/registry.hpp"
#include "test_util.hpp"

namespace topogate::inventory {
namespace {

class scripted_store final : public revision_store {
 public:
  [[nodiscard]] std::string describe() const override { return "scripted"; }

  core::result<void> load(const std::string& inv, store_state& out, store_deadline) override {
    std::lock_guard lk(mu_);
    out = {};
    out.as_of = std::to_string(rv_);
    if (const auto it = objects_.find(inv); it != objects_.end()) out.rev = it->second;
    return {};
  }

  core::result<std::string> save(const std::string& inv, const stored_revision& rev,
                                 const std::string& expected, store_deadline) override {
    std::lock_guard lk(mu_);
    const auto it = objects_.find(inv);
    if (expected.empty() && it != objects_.end())
      return core::fail(core::errc::conflict, "already exists");
    if (!expected.empty() && it == objects_.end())
      return core::fail(core::errc::unavailable, "HTTP 404: not found");
    if (!expected.empty() && it->second.version != expected)
      return core::fail(core::errc::conflict, "the object has been modified");
    ++saves;
    return write_locked(inv, rev.json);
  }

  void start_watch(const std::vector<std::string>&, change_fn fn) override {
    std::lock_guard lk(mu_);
    fn_ = std::move(fn);
  }

  // Another replica's write, or an edit by hand: the object changes now, its event waits.
  std::string external_write(const std::string& inv, const std::string& json) {
    std::lock_guard lk(mu_);
    return write_locked(inv, json);
  }
  void external_delete(const std::string& inv) {
    std::lock_guard lk(mu_);
    objects_.erase(inv);
    events_.push_back({inv, store_state{std::nullopt, false, std::to_string(++rv_)}});
  }
  // Delivers the oldest `n` waiting events (all by default), in the store's order.
  void deliver(std::size_t n = ~std::size_t{0}) {
    std::vector<std::pair<std::string, store_state>> batch;
    change_fn fn;
    {
      std::lock_guard lk(mu_);
      while (n-- > 0 && !events_.empty()) {
        batch.push_back(std::move(events_.front()));
        events_.pop_front();
      }
      fn = fn_;
    }
    for (auto& [inv, st] : batch) fn(inv, st);
  }
  [[nodiscard]] std::optional<std::string> held_json(const std::string& inv) {
    std::lock_guard lk(mu_);
    const auto it = objects_.find(inv);
    if (it == objects_.end()) return std::nullopt;
    return it->second.json;
  }
  std::atomic<int> saves{0};

 private:
  std::string write_locked(const std::string& inv, const std::string& json) {
    stored_revision r;
    r.json = json;
    r.version = std::to_string(++rv_);
    r.accepted_at = std::chrono::system_clock::now();
    objects_[inv] = r;
    events_.push_back({inv, store_state{r, false, r.version}});
    return r.version;
  }

  std::mutex mu_;
  long long rv_ = 100;
  std::map<std::string, stored_revision> objects_;
  std::deque<std::pair<std::string, store_state>> events_;
  change_fn fn_;
};

// The Node list, handed over when the test says so (as a watch delivers it).
class scripted_nodes final : public node_watch {
 public:
  explicit scripted_nodes(int n) : initial_(n) {}
  void start(label_filter, std::function<void(list_source)> on_change) override {
    on_change_ = std::move(on_change);
    on_change_(
        [n = initial_] { return std::make_shared<const core::node_list>(testing::nodes(n)); });
  }
  void stop() override {}
  void set(int n) {
    on_change_([n] { return std::make_shared<const core::node_list>(testing::nodes(n)); });
  }

 private:
  int initial_;
  std::function<void(list_source)> on_change_;
};

struct replica {
  scripted_store* store = nullptr;
  scripted_nodes* nodes = nullptr;
  std::unique_ptr<registry> reg;

  explicit replica(int node_count = 4) {
    registry_config cfg;
    inventory_spec spec;
    spec.config = testing::config("dc");
    spec.nodes_from_api = true;
    cfg.inventories.push_back(std::move(spec));
    cfg.store.type = store_config::kind::kubernetes;
    cfg.store.timeout = std::chrono::seconds(10);
    cfg.resync_interval = std::chrono::seconds(3600);
    registry_deps deps;
    auto s = std::make_unique<scripted_store>();
    store = s.get();
    deps.store = std::move(s);
    auto n = std::make_unique<scripted_nodes>(node_count);
    nodes = n.get();
    deps.nodes = std::move(n);
    reg = std::make_unique<registry>(std::move(cfg), std::move(deps));
    reg->start();
  }
  ~replica() { reg->stop(); }

  push_result push(const std::string& json, std::optional<std::string> if_match = std::nullopt) {
    return reg->push("dc", json, std::move(if_match), "writer");
  }
  // Returns once the lane has applied everything posted to it before.
  void settle() {
    const auto r = push("{");
    ASSERT_EQ(r.outcome, push_outcome::invalid) << r.message;
  }
  [[nodiscard]] std::string served() const {
    const auto d = reg->find("dc")->serve();
    return d.rev ? d.rev->revision_id : "(503: " + d.unavailable_reason + ")";
  }
  [[nodiscard]] std::vector<std::string> accepted_from_store() const {
    std::vector<std::string> out;
    for (const auto& a : reg->find("dc")->history())
      if (a.accepted && a.origin == "store") out.push_back(a.revision_id);
    return out;
  }
};

bool is_stored(const push_result& r) {
  return r.outcome == push_outcome::stored || r.outcome == push_outcome::created;
}

TEST(StoreOrder, VersionsAreOrderedAsKubernetesDefinesThem) {
  using detail::version_order;
  EXPECT_EQ(version_order("9", "10"), -1);
  EXPECT_EQ(version_order("10", "9"), 1);
  EXPECT_EQ(version_order("123", "123"), 0);
  EXPECT_EQ(version_order("124", "123"), 1);
  EXPECT_EQ(version_order("99999999999999999999999", "100000000000000000000000"), -1);
  // Not comparable: only equality means something.
  EXPECT_EQ(version_order("", "1"), std::nullopt);
  EXPECT_EQ(version_order("0", "1"), std::nullopt);
  EXPECT_EQ(version_order("012", "12"), std::nullopt);
  EXPECT_EQ(version_order("12a", "12"), std::nullopt);
  EXPECT_EQ(version_order("-1", "1"), std::nullopt);
  EXPECT_EQ(version_order("ab12", "ab12"), std::nullopt);
}

// The lost update: a replica that refused the store's revision (its Node view lacks a Node
// the revision names) accepted a push whose If-Match named the revision it still served,
// and wrote over the acknowledged one.
TEST(StoreOrder, IfMatchIsJudgedAgainstTheStoreNotAnOlderServedRevision) {
  replica a;
  const auto p0 = a.push(testing::snapshot_json("p0"));
  ASSERT_TRUE(is_stored(p0)) << p0.message;
  const auto e0 = p0.served->etag;
  a.store->deliver();  // its own echo

  // Another replica stored p1, which names worker-4 and worker-5; this one does not know them.
  const auto p1 = testing::snapshot_json("p1", 6);
  a.store->external_write("dc", p1);
  a.store->deliver();
  a.settle();
  // Not the older p0 instead: that is a revision the store no longer holds.
  EXPECT_EQ(a.served().rfind("(503: ", 0), 0u) << a.served();
  EXPECT_TRUE(a.reg->store_view("dc")->behind);
  EXPECT_FALSE(a.reg->inventory_ready("dc").ok());

  const auto p2 = a.push(testing::snapshot_json("p2"), e0);
  EXPECT_EQ(p2.outcome, push_outcome::precondition_failed) << p2.message;
  EXPECT_EQ(a.store->held_json("dc"), p1) << "the acknowledged p1 was overwritten";

  // The Node list catches up (the loop applies it, then the lane): p1 is served, and a push
  // naming its ETag succeeds.
  a.nodes->set(6);
  // Served and told as caught up (the view's flag follows the publication at once).
  ASSERT_TRUE(testing::eventually([&] {
    return a.served() == "p1" && !a.reg->store_view("dc")->behind;
  })) << a.served();
  EXPECT_TRUE(a.reg->inventory_ready("dc").ok());
  const auto p3 = a.push(testing::snapshot_json("p3", 6), inventory::etag_of(p1));
  EXPECT_TRUE(is_stored(p3)) << p3.message;
}

// The reversal: the watch echo of the replica's own write v1, arriving after its write v2,
// published v1 again, then v2 once more.
TEST(StoreOrder, EchoesOfOwnWritesNeverTakeTheServedRevisionBack) {
  replica a;
  ASSERT_TRUE(is_stored(a.push(testing::snapshot_json("v1"))));
  ASSERT_TRUE(is_stored(a.push(testing::snapshot_json("v2"))));
  EXPECT_EQ(a.served(), "v2");
  a.store->deliver(1);  // v1's echo, after v2 was acknowledged
  a.settle();
  EXPECT_EQ(a.served(), "v2");
  a.store->deliver();  // v2's echo
  a.settle();
  EXPECT_EQ(a.served(), "v2");
  EXPECT_TRUE(a.accepted_from_store().empty())
      << "published again from the store: " << a.accepted_from_store().front();
}

// Another replica's writes seen late: an event older than what a read already showed is
// ignored too.
TEST(StoreOrder, AnEventOlderThanARecentReadIsIgnored) {
  replica a;
  ASSERT_TRUE(is_stored(a.push(testing::snapshot_json("mine"))));
  a.store->deliver();
  a.store->external_write("dc", testing::snapshot_json("theirs-1"));
  const auto theirs2 = testing::snapshot_json("theirs-2");
  a.store->external_write("dc", theirs2);
  // An If-Match for theirs-2, which this replica has not seen: it reads the store first.
  const auto r = a.push(testing::snapshot_json("after"), inventory::etag_of(theirs2));
  ASSERT_TRUE(is_stored(r)) << r.message;
  a.store->deliver();  // theirs-1, theirs-2 and the echo of "after", all late
  a.settle();
  EXPECT_EQ(a.served(), "after");
  // theirs-2, read for the If-Match. theirs-1 only if the start-up's read of the store ran
  // while theirs-1 was its object (the test does not wait for it), and then before theirs-2:
  // never from its late event, after a read showed theirs-2.
  const auto from_store = a.accepted_from_store();
  EXPECT_LE(from_store.size(), 2u);
  const auto read = std::find(from_store.begin(), from_store.end(), "theirs-2");
  ASSERT_NE(read, from_store.end());
  EXPECT_EQ(std::find(read, from_store.end(), "theirs-1"), from_store.end())
      << "the late event of theirs-1 was applied after a read showed theirs-2";
}

// A refused revision was replayed when the Node list caught up although the store had moved
// past it (to a revision with the bytes the replica served, so nothing was published then).
TEST(StoreOrder, ARefusedRevisionIsNotReplayedOnceTheStoreMovedPastIt) {
  replica a;
  ASSERT_TRUE(is_stored(a.push(testing::snapshot_json("p0"))));
  const auto p0 = *a.store->held_json("dc");  // the bytes the store holds (canonical)
  a.store->deliver();
  a.store->external_write("dc", testing::snapshot_json("p1", 6));  // refused here
  a.store->external_write("dc", p0);                               // p0 again, a newer version
  a.store->deliver();
  a.settle();
  EXPECT_EQ(a.served(), "p0");
  a.nodes->set(6);
  ASSERT_TRUE(testing::eventually([&] { return a.reg->find("dc")->selected_node_count() == 6u; }));
  a.settle();
  EXPECT_EQ(a.served(), "p0") << "the store holds p0; p1 was replayed";
}

// A ConfigMap deleted by hand: it was served on and every later push was 503 (an update of a
// missing object is a 404).
TEST(StoreOrder, ADeletedStoreObjectIsServedAsNothingAndTheNextPushCreatesItAgain) {
  replica a;
  const auto p0 = a.push(testing::snapshot_json("p0"));
  ASSERT_TRUE(is_stored(p0));
  a.store->deliver();
  a.store->external_delete("dc");
  a.store->deliver();
  a.settle();
  EXPECT_EQ(a.reg->find("dc")->serve().rev, nullptr);
  const auto history = a.reg->find("dc")->history();
  EXPECT_TRUE(std::any_of(history.begin(), history.end(), [](const attempt& at) {
    return at.origin == "store" && at.note.find("deleted") != std::string::npos;
  }));
  // Its ETag names nothing the store holds any more.
  EXPECT_EQ(a.push(testing::snapshot_json("stale"), p0.served->etag).outcome,
            push_outcome::precondition_failed);
  const auto again = a.push(testing::snapshot_json("p1"));
  EXPECT_EQ(again.outcome, push_outcome::created) << again.message;
  EXPECT_EQ(a.served(), "p1");
}

// The same found by a read rather than the watch (the events were missed, or a stuck watch
// holds them): the periodic re-read (resyncInterval; SIGHUP here) says there is no object,
// and an event the watch delivers after it, older than that read, changes nothing.
TEST(StoreOrder, APeriodicReadCatchesUpAStuckWatchAndLateEventsChangeNothing) {
  replica a;
  ASSERT_TRUE(is_stored(a.push(testing::snapshot_json("p0"))));
  a.store->deliver();
  a.store->external_write("dc", testing::snapshot_json("p1"));
  a.store->external_delete("dc");
  a.reg->resync();
  ASSERT_TRUE(testing::eventually([&] { return a.reg->find("dc")->serve().rev == nullptr; }))
      << a.served();
  a.store->deliver(1);  // p1's event, older than the read
  a.settle();
  EXPECT_EQ(a.reg->find("dc")->serve().rev, nullptr) << a.served();
  EXPECT_TRUE(a.accepted_from_store().empty());
}

// A push without If-Match is last-writer-wins against whatever the store holds, also when
// this replica refused it.
TEST(StoreOrder, APushWithoutIfMatchReplacesARevisionTheReplicaRefused) {
  replica a;
  ASSERT_TRUE(is_stored(a.push(testing::snapshot_json("p0"))));
  a.store->deliver();
  a.store->external_write("dc", testing::snapshot_json("p1", 6));
  a.store->deliver();
  a.settle();
  const auto r = a.push(testing::snapshot_json("p2"));
  EXPECT_TRUE(is_stored(r)) << r.message;
  EXPECT_EQ(a.served(), "p2");
  EXPECT_FALSE(a.reg->store_view("dc")->behind);
  // If-Match "*" while the replica refuses the store's revision: it cannot judge, so 503.
  a.store->external_write("dc", testing::snapshot_json("p3", 6));
  a.store->deliver();
  a.settle();
  const auto star = a.push(testing::snapshot_json("p4"), "*");
  EXPECT_EQ(star.outcome, push_outcome::unavailable) << star.message;
}

}  // namespace
}  // namespace topogate::inventory

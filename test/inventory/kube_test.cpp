// The kubernetes store and the Node watch against a real kube-apiserver (test/e2e/
// control-plane.sh start; eval "$(test/e2e/control-plane.sh env)"). Skipped when
// TOPOGATE_CP_URL, TOPOGATE_CP_CA and TOPOGATE_CP_ADMIN_TOKEN_FILE are not set.
// Two registries in one process stand for two replicas: they share nothing but the API.

#include "inventory/kube.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <random>
#include <thread>

#include "inventory/registry.hpp"
#include "kube/client.hpp"
#include "test_util.hpp"

namespace topogate::inventory {
namespace {

using testing::eventually;
using testing::served_revision;

struct control_plane {
  std::string url, ca, token_file;
  [[nodiscard]] bool ok() const { return !url.empty() && !ca.empty() && !token_file.empty(); }
};

control_plane cp() {
  auto env = [](const char* n) {
    const char* v = std::getenv(n);
    return v != nullptr ? std::string(v) : std::string();
  };
  return {env("TOPOGATE_CP_URL"), env("TOPOGATE_CP_CA"), env("TOPOGATE_CP_ADMIN_TOKEN_FILE")};
}

store_config kube_store_config(const control_plane& c, const std::string& ns) {
  store_config s;
  s.type = store_config::kind::kubernetes;
  s.kube_namespace = ns;
  s.kube_api_server = c.url;
  s.kube_token_file = c.token_file;
  s.kube_ca_file = c.ca;
  return s;
}

kube::client admin(const control_plane& c) {
  auto ep = kube::resolve_endpoint(api_access(kube_store_config(c, "default")));
  return kube::client(ep ? std::move(*ep) : kube::endpoint{});
}

// The status of the API's answer; 0 when none came.
int status_of(const core::result<kube::response>& r) { return r ? r->status : 0; }
// What to print beside it.
std::string text_of(const core::result<kube::response>& r) {
  return r ? r->body : r.error().message;
}

bool verbose() { return std::getenv("TOPOGATE_TEST_VERBOSE") != nullptr; }

// What serve builds for the registry (kube.hpp): the kubernetes store and, when asked, the
// Node watch. The registry builds neither itself.
registry_deps kube_deps(const registry_config& cfg, bool watch_nodes = false) {
  return make_dependencies(cfg.store, watch_nodes,
                           [](std::string_view level, std::string_view msg) {
                             if (verbose()) {
                               std::fprintf(stderr, "%.*s %.*s\n", static_cast<int>(level.size()),
                                            level.data(), static_cast<int>(msg.size()), msg.data());
                             }
                           });
}

bool published(const push_result& r) {
  return r.outcome == push_outcome::created || r.outcome == push_outcome::stored;
}

std::string describe(const push_result& r) {
  return std::string(to_string(r.outcome)) + (r.message.empty() ? "" : ": " + r.message);
}

std::string etag(const push_result& r) { return r.served ? r.served->etag : std::string(); }

registry_observer quiet() {
  registry_observer o;
  o.on_log = [](std::string_view level, std::string_view inv, std::string_view msg) {
    if (verbose()) {
      std::fprintf(stderr, "%.*s %.*s %.*s\n", static_cast<int>(level.size()), level.data(),
                   static_cast<int>(inv.size()), inv.data(), static_cast<int>(msg.size()),
                   msg.data());
    }
  };
  return o;
}

class KubeStore : public ::testing::Test {
 protected:
  void SetUp() override {
    c_ = cp();
    if (!c_.ok())
      GTEST_SKIP() << "no kube-apiserver (run test/e2e/control-plane.sh start and eval its env)";
    std::random_device rd;
    ns_ = "topogate-inv-" + std::to_string(rd() % 1000000);
    auto client = admin(c_);
    const auto r = client.request(
        "POST", "/api/v1/namespaces",
        R"({"apiVersion":"v1","kind":"Namespace","metadata":{"name":")" + ns_ + R"("}})");
    ASSERT_EQ(status_of(r), 201) << text_of(r);
  }
  void TearDown() override {
    if (!c_.ok()) return;
    auto client = admin(c_);
    static_cast<void>(client.request("DELETE", "/api/v1/namespaces/" + ns_));
  }
  registry_config replica() const {
    registry_config cfg;
    inventory_spec spec;
    spec.config = testing::config("pushed");
    spec.config.allow_empty_start = true;
    cfg.inventories.push_back(std::move(spec));
    cfg.store = kube_store_config(c_, ns_);
    return cfg;
  }
  control_plane c_;
  std::string ns_;
};

TEST_F(KubeStore, PushToOneReplicaIsServedByTheOther) {
  registry a(replica(), kube_deps(replica()), system_clock(), quiet());
  registry b(replica(), kube_deps(replica()), system_clock(), quiet());
  a.start();
  b.start();
  const auto r = a.push("pushed", testing::snapshot_json("k-1"), std::nullopt, "writer");
  ASSERT_EQ(r.outcome, push_outcome::created) << describe(r);
  ASSERT_TRUE(eventually([&] { return served_revision(b.find("pushed")) == "k-1"; }));
  EXPECT_EQ(b.find("pushed")->current()->etag, etag(r));
  EXPECT_EQ(b.find("pushed")->current()->actor, "writer");

  // A snapshot close to 1 MiB goes through binaryData (gzip) and arrives identical.
  auto big = testing::snapshot_json("k-big", 7200);
  ASSERT_LT(big.size(), core::max_snapshot_bytes);
  ASSERT_GT(big.size(), 900u << 10);
  const auto rb = a.push("pushed", big, std::nullopt, "writer");
  ASSERT_EQ(rb.outcome, push_outcome::stored) << describe(rb);
  ASSERT_TRUE(eventually([&] { return served_revision(b.find("pushed")) == "k-big"; }));
  EXPECT_EQ(b.find("pushed")->current()->etag, etag(rb));
  a.stop();
  b.stop();

  // A restarted replica serves the stored revision as soon as the store has answered (start()
  // no longer waits for it; allowEmptyStart: ready means the store answered).
  registry c(replica(), kube_deps(replica()), system_clock(), quiet());
  c.start();
  ASSERT_TRUE(eventually([&] { return c.inventory_ready("pushed").ok(); }));
  EXPECT_EQ(served_revision(c.find("pushed")), "k-big");
  EXPECT_EQ(c.find("pushed")->current()->etag, etag(rb));
  c.stop();
}

TEST_F(KubeStore, ConcurrentConditionalPushesOneWinsTheOtherGets412) {
  registry a(replica(), kube_deps(replica()), system_clock(), quiet());
  registry b(replica(), kube_deps(replica()), system_clock(), quiet());
  a.start();
  b.start();
  const auto first = a.push("pushed", testing::snapshot_json("base"), std::nullopt, "w");
  ASSERT_EQ(first.outcome, push_outcome::created) << describe(first);
  const auto e1 = etag(first);
  ASSERT_TRUE(eventually(
      [&] { return b.find("pushed")->current() && b.find("pushed")->current()->etag == e1; }));
  for (int round = 0; round < 5; ++round) {
    const auto base = a.find("pushed")->current()->etag;
    ASSERT_TRUE(eventually([&] { return b.find("pushed")->current()->etag == base; }));
    push_result ra;
    push_result rb;
    std::thread ta([&] {
      ra = a.push("pushed", testing::snapshot_json("a-" + std::to_string(round)), base, "a");
    });
    std::thread tb([&] {
      rb = b.push("pushed", testing::snapshot_json("b-" + std::to_string(round)), base, "b");
    });
    ta.join();
    tb.join();
    const bool a_won =
        ra.outcome == push_outcome::stored && rb.outcome == push_outcome::precondition_failed;
    const bool b_won =
        rb.outcome == push_outcome::stored && ra.outcome == push_outcome::precondition_failed;
    ASSERT_TRUE(a_won || b_won) << "round " << round << ": A " << describe(ra) << " B "
                                << describe(rb);
    const auto winner = (a_won ? "a-" : "b-") + std::to_string(round);
    // Nothing is lost: both replicas converge on the acknowledged winner.
    EXPECT_TRUE(eventually([&] { return served_revision(a.find("pushed")) == winner; })) << winner;
    EXPECT_TRUE(eventually([&] { return served_revision(b.find("pushed")) == winner; })) << winner;
  }
  a.stop();
  b.stop();
}

TEST_F(KubeStore, UnconditionalPushesFromBothReplicasAllSucceed) {
  registry a(replica(), kube_deps(replica()), system_clock(), quiet());
  registry b(replica(), kube_deps(replica()), system_clock(), quiet());
  a.start();
  b.start();
  std::atomic<int> ok{0};
  std::thread ta([&] {
    for (int i = 0; i < 5; ++i)
      ok += published(
          a.push("pushed", testing::snapshot_json("ua-" + std::to_string(i)), std::nullopt, "a"));
  });
  std::thread tb([&] {
    for (int i = 0; i < 5; ++i)
      ok += published(
          b.push("pushed", testing::snapshot_json("ub-" + std::to_string(i)), std::nullopt, "b"));
  });
  ta.join();
  tb.join();
  EXPECT_EQ(ok.load(), 10) << "without If-Match the last writer wins; no push fails on a conflict";
  // Both converge on the same revision.
  EXPECT_TRUE(eventually([&] {
    const auto x = a.find("pushed")->current();
    const auto y = b.find("pushed")->current();
    return x && y && x->etag == y->etag;
  }));
  a.stop();
  b.stop();
}

// The lost update, on the real API: replica A's Node list (a file, as during a rolling
// configuration change) lacks worker-4, which B's push names. A then must not serve its
// older revision, nor accept a push whose If-Match names it.
TEST_F(KubeStore, AReplicaThatRefusesTheStoredRevisionNeitherServesNorOverwritesTheOlderOne) {
  testing::temp_dir dir;
  testing::write_file(dir / "a-nodes.json", testing::nodes_json(4));
  testing::write_file(dir / "b-nodes.json", testing::nodes_json(5));
  auto with_nodes = [&](const std::string& file) {
    auto cfg = replica();
    cfg.inventories[0].nodes_path = dir / file;
    return cfg;
  };
  registry a(with_nodes("a-nodes.json"), kube_deps(replica()), system_clock(), quiet());
  registry b(with_nodes("b-nodes.json"), kube_deps(replica()), system_clock(), quiet());
  a.start();
  b.start();
  const auto p0 = a.push("pushed", testing::snapshot_json("p0"), std::nullopt, "w");
  ASSERT_EQ(p0.outcome, push_outcome::created) << describe(p0);
  ASSERT_TRUE(eventually([&] { return served_revision(b.find("pushed")) == "p0"; }));
  const auto p1 = b.push("pushed", testing::snapshot_json("p1", 5), etag(p0), "w");
  ASSERT_EQ(p1.outcome, push_outcome::stored) << describe(p1);
  ASSERT_TRUE(eventually([&] { return a.store_view("pushed")->behind; }));
  EXPECT_EQ(a.find("pushed")->current(), nullptr) << served_revision(a.find("pushed"));
  const auto p2 = a.push("pushed", testing::snapshot_json("p2"), etag(p0), "w");
  EXPECT_EQ(p2.outcome, push_outcome::precondition_failed) << describe(p2);
  // B still serves the acknowledged p1; nothing overwrote it.
  EXPECT_EQ(served_revision(b.find("pushed")), "p1");
  // A's Node list catches up: it serves p1.
  testing::write_file(dir / "a-nodes.json", testing::nodes_json(5));
  EXPECT_TRUE(eventually([&] { return served_revision(a.find("pushed")) == "p1"; }));
  EXPECT_FALSE(a.store_view("pushed")->behind);
  a.stop();
  b.stop();
}

// The reversal, on the real API: every store event a lone replica sees is the echo of its own
// write, so none may publish anything (an older echo published after a newer write served
// the older revision again).
TEST_F(KubeStore, ConcurrentPushesToOneReplicaNeverPublishAnEchoAgain) {
  registry a(replica(), kube_deps(replica()), system_clock(), quiet());
  a.start();
  for (int round = 0; round < 10; ++round) {
    push_result r1;
    push_result r2;
    std::thread t1([&] {
      r1 = a.push("pushed", testing::snapshot_json("r-" + std::to_string(round) + "-a"),
                  std::nullopt, "w");
    });
    std::thread t2([&] {
      r2 = a.push("pushed", testing::snapshot_json("r-" + std::to_string(round) + "-b"),
                  std::nullopt, "w");
    });
    t1.join();
    t2.join();
    ASSERT_TRUE(published(r1) && published(r2)) << describe(r1) << " / " << describe(r2);
  }
  // Let the last echoes arrive, then read the history.
  const auto last = a.find("pushed")->current()->revision_id;
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  for (const auto& at : a.find("pushed")->history()) {
    EXPECT_FALSE(at.accepted && at.origin == "store") << "published again: " << at.revision_id;
  }
  EXPECT_EQ(served_revision(a.find("pushed")), last);
  a.stop();
}

// A ConfigMap deleted by hand: both replicas serve nothing (as a new replica would), and the
// next push creates it again.
TEST_F(KubeStore, ADeletedConfigMapIsServedAsNothingAndThePushAfterItCreatesItAgain) {
  registry a(replica(), kube_deps(replica()), system_clock(), quiet());
  registry b(replica(), kube_deps(replica()), system_clock(), quiet());
  a.start();
  b.start();
  ASSERT_EQ(a.push("pushed", testing::snapshot_json("d-1"), std::nullopt, "w").outcome,
            push_outcome::created);
  ASSERT_TRUE(eventually([&] { return served_revision(b.find("pushed")) == "d-1"; }));
  auto client = admin(c_);
  const auto del =
      client.request("DELETE", "/api/v1/namespaces/" + ns_ + "/configmaps/topogate-pushed");
  ASSERT_EQ(status_of(del), 200) << text_of(del);
  EXPECT_TRUE(eventually([&] { return a.find("pushed")->current() == nullptr; }));
  EXPECT_TRUE(eventually([&] { return b.find("pushed")->current() == nullptr; }));
  const auto again = b.push("pushed", testing::snapshot_json("d-2"), std::nullopt, "w");
  EXPECT_EQ(again.outcome, push_outcome::created) << describe(again);
  EXPECT_TRUE(eventually([&] { return served_revision(a.find("pushed")) == "d-2"; }));
  a.stop();
  b.stop();
}

TEST_F(KubeStore, UnreachableApiIs503AndTheServedRevisionStays) {
  registry a(replica(), kube_deps(replica()), system_clock(), quiet());
  a.start();
  const auto first = a.push("pushed", testing::snapshot_json("s-1"), std::nullopt, "w");
  ASSERT_EQ(first.outcome, push_outcome::created) << describe(first);
  a.stop();
  auto cfg = replica();
  cfg.store.kube_api_server = "https://127.0.0.1:1";  // nothing listens there
  auto deps = kube_deps(cfg);
  registry down(std::move(cfg), std::move(deps), system_clock(), quiet());
  down.start();
  const auto r = down.push("pushed", testing::snapshot_json("s-2"), std::nullopt, "w");
  EXPECT_EQ(r.outcome, push_outcome::unavailable) << describe(r);
  EXPECT_GE(r.retry_after.count(), 1);
  EXPECT_EQ(down.find("pushed")->current(), nullptr);
  down.stop();
}

class KubeNodes : public ::testing::Test {
 protected:
  void SetUp() override {
    c_ = cp();
    if (!c_.ok())
      GTEST_SKIP() << "no kube-apiserver (run test/e2e/control-plane.sh start and eval its env)";
    for (int i = 0; i < 3; ++i) delete_node(i);
    for (int i = 0; i < 3; ++i) ASSERT_EQ(create_node(i, "gpu"), 201);
  }
  void TearDown() override {
    if (!c_.ok()) return;
    for (int i = 0; i < 3; ++i) delete_node(i);
  }
  int create_node(int i, const std::string& pool) {
    auto client = admin(c_);
    const auto name = "worker-" + std::to_string(i);
    return status_of(client.request("POST", "/api/v1/nodes",
                                    R"({"apiVersion":"v1","kind":"Node","metadata":{"name":")" +
                                        name + R"(","labels":{"kubernetes.io/hostname":")" + name +
                                        R"(","inv-test/pool":")" + pool + R"("}}})"));
  }
  void delete_node(int i) {
    auto client = admin(c_);
    static_cast<void>(client.request("DELETE", "/api/v1/nodes/worker-" + std::to_string(i)));
  }
  int label_node(int i, const std::string& pool) {
    auto client = admin(c_);
    const auto r = client.request("GET", "/api/v1/nodes/worker-" + std::to_string(i));
    if (status_of(r) != 200) return status_of(r);
    auto body = r->body;
    const auto pos = body.find("\"inv-test/pool\":\"");
    if (pos == std::string::npos) return 0;
    const auto start = pos + 17;
    body.replace(start, body.find('"', start) - start, pool);
    return status_of(client.request("PUT", "/api/v1/nodes/worker-" + std::to_string(i), body));
  }
  registry_config with_nodes(const std::string& snapshot_path, unknown_nodes_policy policy) const {
    registry_config cfg;
    inventory_spec spec;
    spec.config = testing::config("dc");
    spec.config.unknown_nodes = policy;
    core::label_selector sel;
    sel.match_labels = {{"inv-test/pool", "gpu"}};
    spec.config.source.node_selector = sel;
    spec.snapshot_path = snapshot_path;
    spec.kind = source_kind::file;
    spec.nodes_from_api = true;
    cfg.inventories.push_back(std::move(spec));
    cfg.store.kube_api_server = c_.url;
    cfg.store.kube_token_file = c_.token_file;
    cfg.store.kube_ca_file = c_.ca;
    return cfg;
  }
  control_plane c_;
};

// Only the labels a rule reads are kept: a change of any other label (a heartbeat a
// controller stamps) publishes nothing, and the Nodes arrive without their status.
TEST_F(KubeNodes, AChangeOfALabelNoRuleReadsPublishesNothing) {
  const auto cfg = with_nodes("", unknown_nodes_policy::reject);
  std::mutex mu;
  std::condition_variable cv;
  std::vector<core::node_list> seen;
  std::vector<std::string> logged;
  auto watch = make_node_watch(cfg.store, [&](std::string_view level, std::string_view msg) {
    std::lock_guard lk(mu);
    logged.push_back(std::string(level) + " " + std::string(msg));
  });
  ASSERT_TRUE(watch) << watch.error().message;
  (*watch)->start([](std::string_view key) { return key == "inv-test/pool"; },
                  [&](node_watch::list_source current) {
                    std::lock_guard lk(mu);
                    seen.push_back(*current());
                    cv.notify_all();
                  });
  auto wait_for = [&](std::size_t n) {
    std::unique_lock lk(mu);
    return cv.wait_for(lk, std::chrono::seconds(20), [&] { return seen.size() >= n; });
  };
  ASSERT_TRUE(wait_for(1));
  {
    // The list is logged, with the Nodes it found, once: the watch has not failed.
    std::lock_guard lk(mu);
    ASSERT_EQ(logged.size(), 1u);
    const std::string expected =
        "info Node watch: listed " + std::to_string(seen[0].nodes.size()) + " Nodes in ";
    EXPECT_EQ(logged[0].substr(0, expected.size()), expected) << logged[0];
    EXPECT_TRUE(logged[0].ends_with(" ms")) << logged[0];
  }
  auto client = admin(c_);
  // A full update (kube::client sends JSON, not a merge patch), as any controller may write.
  auto relabel = [&](const std::string& key, const std::string& value) {
    const auto r = client.request("GET", "/api/v1/nodes/worker-0");
    if (status_of(r) != 200) return status_of(r);
    auto body = r->body;
    const auto at = body.find("\"labels\":{");
    if (at == std::string::npos) return 0;
    body.insert(at + 10, "\"" + key + "\":\"" + value + "\",");
    return status_of(client.request("PUT", "/api/v1/nodes/worker-0", body));
  };
  std::size_t before = 0;
  {
    std::lock_guard lk(mu);
    before = seen.size();
  }
  for (int i = 0; i < 5; ++i)
    ASSERT_EQ(relabel("example.com/heartbeat-" + std::to_string(i), "x"), 200);
  // A label a rule reads, after them: the watch delivers in order, so once it is seen every
  // heartbeat before it has been processed, and none published.
  ASSERT_EQ(label_node(0, "cpu"), 200);
  ASSERT_TRUE(wait_for(before + 1));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  std::lock_guard lk(mu);
  EXPECT_EQ(seen.size(), before + 1);
  const auto* n = seen.back().find("worker-0");
  ASSERT_NE(n, nullptr);
  ASSERT_EQ(n->labels.size(), 1u) << "kept labels no rule reads";
  EXPECT_EQ(n->labels[0].first, "inv-test/pool");
  EXPECT_EQ(n->labels[0].second, "cpu");
  EXPECT_EQ(logged.size(), 1u) << "listed again: " << logged.back();
  (*watch)->stop();
}

TEST_F(KubeNodes, WatchFollowsCreateLabelAndDelete) {
  testing::temp_dir dir;
  const auto path = dir / "snapshot.json";
  testing::write_file(path, testing::snapshot_json("n-1", 3));
  const auto reject_cfg = with_nodes(path, unknown_nodes_policy::reject);
  const auto prune_cfg = with_nodes(path, unknown_nodes_policy::prune);
  registry reject(reject_cfg, kube_deps(reject_cfg, /*watch_nodes=*/true), system_clock(), quiet());
  registry prune(prune_cfg, kube_deps(prune_cfg, /*watch_nodes=*/true), system_clock(), quiet());
  reject.start();
  prune.start();
  auto* r = reject.find("dc");
  auto* p = prune.find("dc");
  // start() does not wait for the first Node list; the snapshot file waits for it (up to
  // the registry's grace) before it is first read, so the revision is validated against it.
  ASSERT_TRUE(eventually(
      [&] { return reject.inventory_ready("dc").ok() && prune.inventory_ready("dc").ok(); }));
  EXPECT_EQ(served_revision(r), "n-1") << "Nodes are listed before the snapshot is validated";
  EXPECT_EQ(r->selected_node_count(), std::optional<std::size_t>(3));

  // Relabelled out of the nodeSelector: no longer a selected Node.
  ASSERT_EQ(label_node(1, "cpu"), 200);
  EXPECT_TRUE(eventually([&] { return r->serve().rev == nullptr; }));
  EXPECT_TRUE(eventually([&] { return served_revision(p) == "n-1+pruned-1"; }));
  ASSERT_EQ(label_node(1, "gpu"), 200);
  EXPECT_TRUE(eventually([&] { return served_revision(r) == "n-1"; }));
  EXPECT_TRUE(eventually([&] { return served_revision(p) == "n-1"; }));

  delete_node(2);
  EXPECT_TRUE(eventually([&] { return r->serve().rev == nullptr; }));
  EXPECT_TRUE(eventually([&] {
    const auto cur = p->current();
    return cur && cur->revision_id == "n-1+pruned-1" &&
           cur->json_body().find("worker-2") == std::string::npos;
  }));
  ASSERT_EQ(create_node(2, "gpu"), 201);
  EXPECT_TRUE(eventually([&] { return served_revision(r) == "n-1"; }));
  reject.stop();
  prune.stop();
}

// A burst of relevant Node changes turns the reconcile loop once per coalescing window, at its
// end: the window's timer wakes it; neither each change nor the window's opening does.
TEST_F(KubeNodes, ABurstOfNodeChangesTurnsTheLoopOncePerWindow) {
  testing::temp_dir dir;
  const auto path = dir / "snapshot.json";
  testing::write_file(path, testing::snapshot_json("w-1", 3));
  const auto cfg = with_nodes(path, unknown_nodes_policy::prune);
  struct turn {
    std::chrono::steady_clock::time_point at;
    registry_observer::loop_turn what;
  };
  using std::chrono::steady_clock;
  std::mutex mu;
  std::vector<turn> turns;
  auto obs = quiet();
  obs.on_loop_turn = [&](const registry_observer::loop_turn& t) {
    std::lock_guard lk(mu);
    turns.push_back({steady_clock::now(), t});
  };
  registry reg(cfg, kube_deps(cfg, /*watch_nodes=*/true), system_clock(), obs);
  reg.start();
  auto* inv = reg.find("dc");
  ASSERT_TRUE(eventually([&] { return served_revision(inv) == "w-1"; }));
  // The first Node list wakes the loop (the snapshot file waiting for it is read again), and
  // the revision may be served before that turn: counting starts once the loop has turned
  // for it and then stayed quiet for 150 ms.
  ASSERT_TRUE(eventually([&] {
    std::lock_guard lk(mu);
    return std::any_of(turns.begin(), turns.end(), [](const turn& t) { return t.what.woken; }) &&
           steady_clock::now() - turns.back().at >= std::chrono::milliseconds(150);
  }));
  const auto counted_from = steady_clock::now();
  // Five changes that matter (in and out of the nodeSelector), as fast as the API takes them.
  const auto t0 = steady_clock::now();
  for (const auto& [node, pool] : std::vector<std::pair<int, std::string>>{
           {1, "cpu"}, {2, "cpu"}, {1, "gpu"}, {2, "gpu"}, {1, "cpu"}})
    ASSERT_EQ(label_node(node, pool), 200);
  const auto burst = steady_clock::now() - t0;
  ASSERT_TRUE(eventually([&] { return served_revision(inv) == "w-1+pruned-1"; }));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  std::vector<turn> seen;
  {
    std::lock_guard lk(mu);
    for (const turn& t : turns)
      if (t.at >= counted_from) seen.push_back(t);
  }
  reg.stop();  // turns the loop too, after the ones kept
  // No change woke the loop, and each time the window's alarm rang, that turn ended the window
  // (a turn that is neither is the loop's own deadline, such as the drift check's).
  std::vector<std::chrono::steady_clock::time_point> ends;
  for (std::size_t i = 0; i < seen.size(); ++i) {
    const auto& t = seen[i].what;
    EXPECT_FALSE(t.woken) << "turn " << i << " of " << seen.size();
    EXPECT_EQ(t.alarm, t.nodes) << "turn " << i << " of " << seen.size();
    if (t.nodes) ends.push_back(seen[i].at);
  }
  ASSERT_FALSE(ends.empty());
  // A window ends 200 ms after its first change, and the next one opens after that: the ends
  // are that far apart (less a margin for a preempted thread).
  for (std::size_t i = 1; i < ends.size(); ++i)
    EXPECT_GE(ends[i] - ends[i - 1], std::chrono::milliseconds(150))
        << "window ends " << i - 1 << " and " << i << " of " << ends.size();
  // The changes took less than a window: fewer windows than changes shows the coalescing.
  if (burst < std::chrono::milliseconds(200)) {
    EXPECT_LT(ends.size(), 5u);
  }
}

}  // namespace
}  // namespace topogate::inventory

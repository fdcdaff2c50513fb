// Label drift (inventory/drift.hpp): which Nodes differ from the served revision, when one
// counts as drifted (both sides of the grace), and the registry's periodic check through a
// Node list from the API (a fake watch, as node_watch_test.cpp drives it) on a manual clock.
#include "inventory/drift.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <optional>
#include <random>
#include <string>

#include "core/snapshot.hpp"
#include "fake_node_watch.hpp"
#include "inventory/registry.hpp"
#include "test_util.hpp"

namespace topogate::inventory {
namespace {

using namespace std::chrono_literals;

// A Node's labels as the consumer leaves them for `snap` and `rev`: its levels and profile.
core::node_list labelled_as(const revision& rev, const core::snapshot& snap, int n) {
  auto list = testing::nodes(n);
  list.nodes.edit_each([&](core::cluster_node& node) {
    auto& labels = node.labels.edit();
    for (const auto& sn : snap.nodes)
      if (sn.name == node.name)
        for (const auto& l : sn.labels) labels.emplace_back(l.key, l.value);
    if (const auto* a = rev.profiles->find(node.name))
      labels.emplace_back("topology.gpustack.ai/profile", rev.profiles->profile_of(*a).id);
    std::sort(labels.begin(), labels.end());
  });
  return list;
}

// What a tracker is given for `found`: its marks, and its drifts to describe the Nodes a
// report lists.
std::vector<drift_mark> marks_of(const std::vector<node_drift>& found) {
  std::vector<drift_mark> out;
  for (const auto& d : found) out.push_back({d.node, signature_of(d), std::nullopt});
  return out;
}

drift_tracker::describe_fn describer(const std::vector<node_drift>& found) {
  return [found](std::string_view name) {
    for (const auto& d : found)
      if (d.node == name) return d;
    return node_drift{std::string(name), {}};
  };
}

std::shared_ptr<const drift_report> track(drift_tracker& t, const std::vector<node_drift>& found,
                                          std::chrono::system_clock::time_point now,
                                          std::chrono::seconds grace) {
  return t.update(marks_of(found), now, grace, describer(found));
}

void set_label(core::node_list& list, std::string_view node, std::string_view key,
               std::optional<std::string> value) {
  for (std::size_t i = 0; i < list.nodes.size(); ++i) {
    if (list.nodes[i].name != node) continue;
    auto& labels = list.nodes.edit(i).labels.edit();
    std::erase_if(labels, [&](const auto& kv) { return kv.first == key; });
    if (value) labels.emplace_back(std::string(key), *value);
    std::sort(labels.begin(), labels.end());
  }
}

struct served {
  std::unique_ptr<inventory> inv;
  std::shared_ptr<const revision> rev;
  std::shared_ptr<const core::snapshot> snap;
};

// An inventory that knows `n` Nodes (hostname only, so S6 holds) and serves snapshot_json.
served serve_snapshot(int n, const core::node_list& nodes) {
  served s;
  s.inv = std::make_unique<inventory>(testing::config("dc"));
  s.inv->set_nodes(nodes);
  const auto r =
      s.inv->offer(testing::snapshot_json("n-1", n), {"file", "", std::nullopt, std::nullopt});
  EXPECT_TRUE(r.accepted) << core::render_text(r.errors);
  s.rev = s.inv->current();
  s.snap = s.rev ? s.rev->accepted_shared() : nullptr;
  return s;
}

TEST(Drift, NodesLabelledAsTheRevisionSaysHaveNone) {
  auto s = serve_snapshot(4, testing::nodes(4));
  ASSERT_TRUE(s.rev && s.snap);
  const auto nodes = labelled_as(*s.rev, *s.snap, 4);
  EXPECT_TRUE(find_drift(s.inv->config().source, *s.rev, *s.snap, nodes).empty());
}

TEST(Drift, AMissingOrDifferentLevelAndAWrongProfileAreEachNamed) {
  auto s = serve_snapshot(4, testing::nodes(4));
  ASSERT_TRUE(s.rev && s.snap);
  auto nodes = labelled_as(*s.rev, *s.snap, 4);
  set_label(nodes, "worker-1", testing::rack, std::nullopt);           // never applied
  set_label(nodes, "worker-2", testing::zone, std::string("zone-9"));  // overwritten
  set_label(nodes, "worker-3", "topology.gpustack.ai/profile", std::string("fnv64-0"));
  set_label(nodes, "worker-0", "example.com/other", std::string("x"));  // not the consumer's
  const auto d = find_drift(s.inv->config().source, *s.rev, *s.snap, nodes);
  ASSERT_EQ(d.size(), 3u);
  EXPECT_EQ(d[0].node, "worker-1");
  ASSERT_EQ(d[0].labels.size(), 1u);
  EXPECT_EQ(d[0].labels[0].key, testing::rack);
  EXPECT_EQ(d[0].labels[0].want, "rack-0");
  EXPECT_FALSE(d[0].labels[0].present);
  EXPECT_EQ(d[1].node, "worker-2");
  EXPECT_EQ(d[1].labels[0].key, testing::zone);
  EXPECT_EQ(d[1].labels[0].have, "zone-9");
  EXPECT_TRUE(d[1].labels[0].present);
  EXPECT_EQ(d[2].node, "worker-3");
  EXPECT_EQ(d[2].labels[0].key, "topology.gpustack.ai/profile");
  EXPECT_EQ(d[2].labels[0].want,
            s.rev->profiles->profile_of(*s.rev->profiles->find("worker-3")).id);
}

// An inventory (unknownNodes: prune) serving snapshot_json("n-1", 4) while worker-3 is not in
// the cluster: its revision prunes worker-3.
std::unique_ptr<inventory> pruning_worker_3(const inventory_config& cfg) {
  auto inv = std::make_unique<inventory>(cfg);
  inv->set_nodes(testing::nodes(4, 3));
  EXPECT_TRUE(inv->offer(testing::snapshot_json("n-1", 4), {"file", "", std::nullopt, std::nullopt})
                  .accepted);
  return inv;
}

inventory_config pruning_config() {
  inventory_config cfg = testing::config("dc");
  cfg.unknown_nodes = unknown_nodes_policy::prune;
  return cfg;
}

TEST(Drift, APrunedNodeAndANodeNotInTheListAreNotCompared) {
  // worker-3 is not in the cluster: the served revision prunes it.
  const auto cfg = pruning_config();
  const auto inv = pruning_worker_3(cfg);
  const auto rev = inv->current();
  ASSERT_EQ(rev->pruned_nodes, std::vector<std::string>{"worker-3"});
  const auto snap = rev->accepted_shared();
  auto nodes = labelled_as(*rev, *snap, 4);
  // worker-3 exists again, unlabelled, before the next evaluation: it is not served, so not
  // compared; a Node the list lacks is not compared either.
  set_label(nodes, "worker-3", testing::rack, std::nullopt);
  nodes.nodes.erase_if([](const auto& n) { return n.name == "worker-0"; });
  EXPECT_TRUE(find_drift(cfg.source, *rev, *snap, nodes).empty());
}

TEST(DriftTracker, ANodeCountsOnceItDiffersForTheGrace) {
  const auto t0 = std::chrono::system_clock::time_point(std::chrono::seconds(1'800'000'000));
  drift_tracker t;
  node_drift d{"worker-1", {{std::string(testing::rack), "rack-0", "", false}}};
  auto r = track(t, {d}, t0, 60s);
  EXPECT_EQ(r->mismatched, 1u);
  EXPECT_EQ(r->drifted, 0u);
  r = track(t, {d}, t0 + 59s, 60s);
  EXPECT_EQ(r->drifted, 0u) << "one second short of the grace";
  r = track(t, {d}, t0 + 60s, 60s);
  EXPECT_EQ(r->drifted, 1u);
  ASSERT_EQ(r->nodes.size(), 1u);
  EXPECT_EQ(r->nodes[0].since, t0);
  // It differs another way now (a value appeared, still wrong): the grace starts again.
  node_drift other{"worker-1", {{std::string(testing::rack), "rack-0", "rack-7", true}}};
  r = track(t, {other}, t0 + 61s, 60s);
  EXPECT_EQ(r->drifted, 0u);
  EXPECT_EQ(r->mismatched, 1u);
  // Fixed: forgotten; differing again later starts from then.
  r = track(t, {}, t0 + 62s, 60s);
  EXPECT_EQ(r->mismatched, 0u);
  r = track(t, {d}, t0 + 200s, 60s);
  r = track(t, {d}, t0 + 259s, 60s);
  EXPECT_EQ(r->drifted, 0u);
}

// The tracker keeps a digest of each Node's drift, not the drift: drifts that differ only in
// where one value ends and the next begins, or in a label absent against one set to "", are
// told apart all the same (the grace starts again).
TEST(DriftTracker, DriftsThatDifferOnlyInTheirFieldsBoundsOrInAnEmptyValueAreTwo) {
  const auto t0 = std::chrono::system_clock::time_point(std::chrono::seconds(1'800'000'000));
  const std::string rack(testing::rack);
  const std::vector<std::pair<node_drift, node_drift>> pairs{
      {{"w", {{rack, "rack-0", "", false}}}, {"w", {{rack, "rack-0", "", true}}}},
      {{"w", {{rack, "ab", "c", true}}}, {"w", {{rack, "a", "bc", true}}}},
      {{"w", {{rack, "r", "x", true}, {rack + "s", "r", "x", true}}},
       {"w", {{rack, "r", "x", true}}}},
  };
  for (const auto& [a, b] : pairs) {
    drift_tracker t;
    track(t, {a}, t0, 60s);
    auto r = track(t, {a}, t0 + 60s, 60s);
    EXPECT_EQ(r->drifted, 1u) << "the same drift for the grace";
    r = track(t, {b}, t0 + 61s, 60s);
    EXPECT_EQ(r->drifted, 0u) << "another drift starts the grace again";
    ASSERT_EQ(r->mismatched, 1u);
  }
}

TEST(DriftTracker, TheReportListsAtMostItsLimitAndCountsAll) {
  const auto t0 = std::chrono::system_clock::time_point(std::chrono::seconds(1'800'000'000));
  drift_tracker t;
  std::vector<node_drift> many;
  for (std::size_t i = 0; i < drift_report::max_listed + 50; ++i)
    many.push_back(
        {"n-" + std::to_string(1000 + i), {{"topology.gpustack.ai/rack", "r", "", false}}});
  track(t, many, t0, 1s);
  const auto r = track(t, many, t0 + 1s, 1s);
  EXPECT_EQ(r->drifted, drift_report::max_listed + 50);
  EXPECT_EQ(r->nodes.size(), drift_report::max_listed);
}

// age() is the report update() would give for what the last update found: the counts, the
// Nodes listed, their times; a Node first seen at the last update is within the grace.
TEST(DriftTracker, AgingWhatTheLastCheckFoundGivesWhatAnUpdateGives) {
  const auto t0 = std::chrono::system_clock::time_point(std::chrono::seconds(1'800'000'000));
  std::vector<node_drift> found;
  for (std::size_t i = 0; i < drift_report::max_listed + 20; ++i)
    found.push_back(
        {"n-" + std::to_string(1000 + i), {{"topology.gpustack.ai/rack", "r", "", false}}});
  drift_tracker aged;
  drift_tracker updated;
  // Half of them differ since t0, the other half since t0 + 30 s.
  std::vector<node_drift> first(found.begin(), found.begin() + 60);
  track(aged, first, t0, 60s);
  track(updated, first, t0, 60s);
  track(aged, found, t0 + 30s, 60s);
  track(updated, found, t0 + 30s, 60s);
  for (const auto at : {t0 + 59s, t0 + 60s, t0 + 89s, t0 + 90s}) {
    const auto a = aged.age(at, 60s, describer(found));
    const auto u = track(updated, found, at, 60s);
    EXPECT_EQ(a->mismatched, u->mismatched);
    EXPECT_EQ(a->drifted, u->drifted);
    EXPECT_EQ(a->checked_at, at);
    ASSERT_EQ(a->nodes.size(), u->nodes.size());
    for (std::size_t i = 0; i < a->nodes.size(); ++i) {
      EXPECT_EQ(a->nodes[i].drift.node, u->nodes[i].drift.node);
      EXPECT_EQ(a->nodes[i].since, u->nodes[i].since);
    }
  }
  EXPECT_EQ(aged.age(t0 + 59s, 60s, describer(found))->drifted, 0u);
  EXPECT_EQ(aged.age(t0 + 60s, 60s, describer(found))->drifted, 60u);
  EXPECT_EQ(aged.age(t0 + 90s, 60s, describer(found))->drifted, found.size());
  EXPECT_EQ(aged.age(t0 + 90s, 60s, describer(found))->nodes.size(), drift_report::max_listed);
}

std::string describe(const std::vector<node_drift>& found) {
  std::string out;
  for (const auto& d : found) {
    out += d.node + ":";
    for (const auto& l : d.labels)
      out += " " + l.key + "=" + l.want + (l.present ? "/" + l.have : std::string("/-"));
    out += "\n";
  }
  return out;
}

std::string describe(const drift_report& r) {
  std::string out = std::to_string(r.mismatched) + " " + std::to_string(r.drifted) + "\n";
  for (const auto& e : r.nodes)
    out += e.drift.node + " " + std::to_string(e.since.time_since_epoch().count()) + "\n";
  return out;
}

// A check after changes compares again only the Nodes they can affect, and finds what a full
// check finds: random relabels, departures (pruned) and returns of Nodes, each applied to
// the inventory; the tracker fed only the changed names reports as one fed everything.
TEST(Drift, ACheckAfterChangesComparesTheirNodesAndFindsWhatAFullCheckFinds) {
  constexpr int n = 10;  // worker-0 to worker-9: the snapshot lists them by name
  inventory_config cfg = testing::config("dc");
  cfg.unknown_nodes = unknown_nodes_policy::prune;
  inventory inv(cfg);
  inv.set_nodes(testing::nodes(n));
  ASSERT_TRUE(inv.offer(testing::snapshot_json("n-1", n), {"file", "", std::nullopt, std::nullopt})
                  .accepted);
  const auto& src = cfg.source;
  auto rev = inv.current();
  const auto snap = rev->accepted_shared();
  auto list = std::make_shared<const core::node_list>(labelled_as(*rev, *snap, n));
  inv.set_nodes(list);
  rev = inv.current();
  ASSERT_TRUE(rev);

  std::mt19937 rng(2026);
  const auto t0 = std::chrono::system_clock::time_point(std::chrono::seconds(1'800'000'000));
  drift_tracker full_seen;
  drift_tracker changed_seen;
  auto basis = basis_of(*rev, list);
  const auto described = [&](std::string_view name) { return describe_drift(src, basis, name); };
  full_seen.update(find_drift_marks(src, basis), t0, 60s, described);
  changed_seen.update(find_drift_marks(src, basis), t0, 60s, described);
  std::vector<core::cluster_node> away;  // Nodes taken out of the list
  std::size_t compared = 0;
  std::size_t served_shared = 0;
  std::size_t served_built = 0;
  std::size_t most_found = 0;
  std::size_t most_drifted = 0;
  for (int step = 1; step <= 400; ++step) {
    auto next = *list;  // shares every chunk with list
    std::string touched;
    const int op = static_cast<int>(rng() % 6);
    if (op == 4 && next.nodes.size() > n / 2) {
      const std::size_t i = rng() % next.nodes.size();
      touched = next.nodes[i].name;
      away.push_back(next.nodes[i]);
      next.nodes.erase(i);
    } else if (op == 5 && !away.empty()) {
      const std::size_t k = rng() % away.size();
      touched = away[k].name;
      const std::size_t at =
          next.nodes.partition_point([&](const core::cluster_node& c) { return c.name < touched; })
              .index();
      next.nodes.insert(at, away[k]);
      away.erase(away.begin() + static_cast<std::ptrdiff_t>(k));
    } else {
      const std::size_t i = rng() % next.nodes.size();
      touched = next.nodes[i].name;
      const std::string_view keys[] = {testing::rack, testing::zone, "topology.gpustack.ai/profile",
                                       "example.com/other"};
      const auto key = keys[rng() % 4];
      std::optional<std::string> value;
      if (const auto pick = rng() % 3; pick == 1) value = "wrong-" + std::to_string(rng() % 2);
      if (rng() % 3 == 0) {
        // Set back to what the consumer wrote, when it wrote it.
        const auto sd = std::find_if(snap->nodes.begin(), snap->nodes.end(),
                                     [&](const auto& x) { return x.name == touched; });
        for (const auto& l : sd->labels)
          if (l.key == key) value = l.value;
      }
      set_label(next, touched, key, value);
    }
    list = std::make_shared<const core::node_list>(std::move(next));
    inv.set_nodes(list);
    rev = inv.current();
    ASSERT_TRUE(rev) << "step " << step;
    const auto now = t0 + std::chrono::seconds(15 * step);

    const auto changed = drift_changes(basis, *rev, *list);
    ASSERT_TRUE(changed) << "the same accepted snapshot: step " << step;
    EXPECT_LE(changed->size(), 1u) << "step " << step;
    if (!changed->empty()) {
      EXPECT_EQ(changed->front(), touched) << "step " << step;
    }
    compared += changed->size();
    // The index of the served Nodes is shared with the last check's while the pruned Nodes
    // are the same, and built again when they are not; either way as a basis made afresh has it.
    const auto fresh = basis_of(*rev, list);
    auto next_basis = basis_of(*rev, list, &basis);
    ASSERT_EQ(*next_basis.served, *fresh.served) << "step " << step;
    if (next_basis.pruned == basis.pruned) {
      EXPECT_EQ(next_basis.served, basis.served) << "step " << step;
      ++served_shared;
    } else {
      EXPECT_NE(next_basis.served, basis.served) << "step " << step;
      ++served_built;
    }
    basis = std::move(next_basis);
    const auto full = find_drift(src, *rev, *snap, *list);
    auto found = refind_drift_marks(src, basis, changed_seen.take_found(), *changed);
    // The marks name the Nodes a full check finds, each with its drift's signature, and each
    // is described as the full check describes it.
    ASSERT_EQ(found.size(), full.size()) << "step " << step;
    std::vector<node_drift> described_found;
    for (std::size_t k = 0; k < found.size(); ++k) {
      ASSERT_EQ(found[k].node, full[k].node) << "step " << step;
      ASSERT_EQ(found[k].sig, signature_of(full[k])) << "step " << step;
      described_found.push_back(describe_drift(src, basis, found[k].node));
    }
    ASSERT_EQ(describe(described_found), describe(full)) << "step " << step;
    most_found = std::max(most_found, found.size());
    const auto a = full_seen.update(find_drift_marks(src, basis), now, 60s, described);
    const auto b = changed_seen.update(std::move(found), now, 60s, described);
    ASSERT_EQ(describe(*b), describe(*a)) << "step " << step;
    for (const auto& e : a->nodes)
      ASSERT_EQ(describe({e.drift}), describe({describe_drift(src, basis, e.drift.node)}));
    most_drifted = std::max(most_drifted, a->drifted);
  }
  EXPECT_GT(compared, 200u) << "most steps change a Node";
  EXPECT_GT(served_shared, 100u) << "most steps keep the pruned Nodes";
  EXPECT_GT(served_built, 20u) << "some steps prune a Node or serve it again";
  EXPECT_GE(most_found, 4u) << "several Nodes differed at once";
  EXPECT_GE(most_drifted, 2u) << "some of them past the grace";
}

// The pruned Nodes are compared against the revisions, not only the lists: a Node the last
// check's revision pruned and this one serves is compared again even when the list the check
// is given did not change (the revision caught up with a list the last check already had).
TEST(Drift, ANodeServedAgainIsComparedAgainWithTheSameList) {
  const auto cfg = pruning_config();
  const auto inv = pruning_worker_3(cfg);
  const auto pruned = inv->current();
  ASSERT_EQ(pruned->pruned_nodes, std::vector<std::string>{"worker-3"});
  inv->set_nodes(testing::nodes(4));
  const auto served = inv->current();
  ASSERT_TRUE(served->pruned_nodes.empty());
  ASSERT_EQ(served->accepted_decoded, pruned->accepted_decoded);
  const auto snap = served->accepted_shared();
  // Every Node as the consumer labels it for `served`, but worker-3 without its rack.
  auto labelled = labelled_as(*served, *snap, 4);
  set_label(labelled, "worker-3", testing::rack, std::nullopt);
  const auto list = std::make_shared<const core::node_list>(std::move(labelled));

  const auto before = find_drift_marks(cfg.source, basis_of(*pruned, list));
  const auto changed = drift_changes(basis_of(*pruned, list), *served, *list);
  ASSERT_TRUE(changed);
  EXPECT_NE(std::find(changed->begin(), changed->end(), "worker-3"), changed->end());
  const auto basis = basis_of(*served, list);
  const auto after = refind_drift_marks(cfg.source, basis, before, *changed);
  const auto full = find_drift(cfg.source, *served, *snap, *list);
  ASSERT_EQ(after.size(), 1u);
  ASSERT_EQ(full.size(), 1u);
  EXPECT_EQ(after[0].sig, signature_of(full[0]));
  EXPECT_EQ(describe({describe_drift(cfg.source, basis, "worker-3")}), describe(full));
  EXPECT_EQ(after[0].node, "worker-3");
}

// A revision made from another accepted snapshot (a push), or from one that does not list its
// Nodes by name (worker-10 before worker-2), is compared in full.
TEST(Drift, AnotherAcceptedSnapshotOrOneNotListedByNameIsComparedInFull) {
  auto s = serve_snapshot(4, testing::nodes(4));
  ASSERT_TRUE(s.rev && s.snap);
  auto nodes = std::make_shared<const core::node_list>(labelled_as(*s.rev, *s.snap, 4));
  const auto basis = basis_of(*s.rev, nodes);
  ASSERT_TRUE(drift_changes(basis, *s.rev, *nodes));
  EXPECT_TRUE(drift_changes(basis, *s.rev, *nodes)->empty());
  ASSERT_TRUE(
      s.inv->offer(testing::snapshot_json("n-2", 4), {"file", "", std::nullopt, std::nullopt})
          .accepted);
  EXPECT_FALSE(drift_changes(basis, *s.inv->current(), *nodes));

  auto u = serve_snapshot(12, testing::nodes(12));
  ASSERT_TRUE(u.rev && u.snap);
  ASSERT_FALSE(u.rev->accepted_sorted);
  const auto listed = std::make_shared<const core::node_list>(labelled_as(*u.rev, *u.snap, 12));
  EXPECT_FALSE(drift_changes(basis_of(*u.rev, listed), *u.rev, *listed));
}

TEST(DriftRegistry, TheStatusAndTheCountFollowTheNodesAcrossTheGrace) {
  testing::temp_dir dir;
  auto cfg = api_fed_config(dir);
  cfg.inventories[0].drift_grace = 120s;
  registry_deps deps;
  auto w = std::make_unique<fake_node_watch>();
  auto* watch = w.get();
  deps.nodes = std::move(w);
  registry_observer quiet;
  quiet.on_log = [](std::string_view, std::string_view, std::string_view) {};
  testing::manual_clock clk;
  registry reg(std::move(cfg), std::move(deps), clk, quiet);
  reg.start();
  EXPECT_EQ(reg.node_drift("dc"), nullptr) << "no Node list yet";
  ASSERT_TRUE(watch->deliver(testing::nodes(4)));
  ASSERT_TRUE(testing::eventually([&] { return reg.inventory_ready("dc").ok(); }));

  // Each check is made a second after the one before (the clock moves only when told), so a
  // report is known to be the new one by its time.
  const auto check = [&] {
    clk.advance(1s);
    const auto t = clk.now();
    reg.resync();
    return testing::eventually([&] {
      const auto d = reg.node_drift("dc");
      return d && d->checked_at >= t;
    });
  };
  // First the Nodes as the consumer labels them: no drift (a check the registry made on its
  // own while they were still unlabelled is forgotten now).
  const auto rev = reg.find("dc")->current();
  ASSERT_TRUE(watch->deliver(labelled_as(*rev, *rev->accepted_shared(), 4)));
  ASSERT_TRUE(testing::eventually([&] {
    if (!check()) return false;
    return reg.node_drift("dc")->mismatched == 0;
  }));
  // Then their labels gone (NFD removed them): the grace starts at the next check.
  ASSERT_TRUE(watch->deliver(testing::nodes(4)));
  ASSERT_TRUE(testing::eventually([&] {
    if (!check()) return false;
    return reg.node_drift("dc")->mismatched == 4;
  }));
  auto d = reg.node_drift("dc");
  EXPECT_EQ(d->mismatched, 4u);
  EXPECT_EQ(d->drifted, 0u);
  EXPECT_EQ(d->grace, 120s);

  clk.advance(118s);
  ASSERT_TRUE(check());  // 119 s after the first check
  EXPECT_EQ(reg.node_drift("dc")->drifted, 0u);
  ASSERT_TRUE(check());  // 120 s
  d = reg.node_drift("dc");
  EXPECT_EQ(d->drifted, 4u);
  const auto status = reg.status_json("dc");
  ASSERT_TRUE(status);
  EXPECT_NE(status->find(R"("drift":{"checkedAt":)"), std::string::npos) << *status;
  EXPECT_NE(status->find(R"("mismatched":4,"drifted":4,"nodes":[{"name":"worker-0")"),
            std::string::npos)
      << *status;
  EXPECT_NE(status->find(R"({"key":"topology.gpustack.ai/rack","want":"rack-0","have":null})"),
            std::string::npos)
      << *status;

  // The consumer (or NFD) catches up: nothing differs any more.
  ASSERT_TRUE(watch->deliver(labelled_as(*rev, *rev->accepted_shared(), 4)));
  clk.advance(1s);
  ASSERT_TRUE(testing::eventually([&] {
    reg.resync();
    const auto now = reg.node_drift("dc");
    return now && now->mismatched == 0;
  }));
  EXPECT_EQ(reg.node_drift("dc")->drifted, 0u);

  // A new revision moves every Node to another rack while the Node list stays the same: the
  // checks compare again (what the last one found belonged to the revision before).
  auto moved = testing::snapshot_json("n-2", 4);
  for (std::size_t at = moved.find("rack-0"); at != std::string::npos; at = moved.find("rack-0"))
    moved.replace(at, 6, "rack-7");
  testing::write_file(dir / "snapshot.json", moved);
  ASSERT_TRUE(testing::eventually([&] {
    reg.resync();
    const auto cur = reg.find("dc")->current();
    return cur && cur->accepted_revision_id == "n-2";
  }));
  ASSERT_TRUE(testing::eventually([&] {
    if (!check()) return false;
    return reg.node_drift("dc")->mismatched == 4;
  }));
  EXPECT_EQ(reg.node_drift("dc")->drifted, 0u);
  clk.advance(119s);
  ASSERT_TRUE(check());  // the same revision and list, past the grace: aged, not compared
  EXPECT_EQ(reg.node_drift("dc")->drifted, 4u);
  EXPECT_NE(reg.status_json("dc")->find(
                R"({"key":"topology.gpustack.ai/rack","want":"rack-7","have":"rack-0"})"),
            std::string::npos);
  reg.stop();
}

}  // namespace
}  // namespace topogate::inventory

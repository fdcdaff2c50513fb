// What one relevant Node change costs topogate at cluster scale, in process and in parts:
// a Node of N (with the ~20 labels cloud GPU Nodes carry) leaves the inventory's nodeSelector
// or comes back; the registry takes the view's list and the inventory re-evaluates its
// accepted snapshot (min(N, 7000) Nodes, pruned to the Nodes the list has) against it.
//
//   BM_ViewList/N        node_view::list(): the copy the registry takes once per window
//   BM_SelectNodes/N     core::select_nodes over that list (the inventory's selected Nodes
//                        when the list does not name its changes)
//   BM_RelevantChange/N  the whole change: the event applied, the list taken (naming the
//                        Node changed, node_view::take), set_nodes();
//                        a Node leaves the selection, then comes back (mean of the two)
//   BM_NodeLeaves/N      only the departure: the Node is cut from the served rendering
//                        (inventory::evaluate_change), its return is not timed
//   BM_NodeReturns/N     only the return: a Node the snapshot names joins, checked against
//                        a served carrier of each of its values
//   BM_NodeLeavesCold/N  the departure with the CPU's caches emptied before it (64 MiB
//                        written, untimed), as a revision starts in a cluster where other
//                        processes ran since the last one
//   BM_LabelChange/N     a label the rules read changed (the rack a consumer projects) and
//                        nothing served moves: S6 and the profile of that Node only
//   BM_DriftCheck/N/L    one label-drift check of the served revision against the Nodes
//                        (inventory/drift.hpp: basis_of and find_drift_marks, the reconcile
//                        loop's pass when the accepted snapshot changed), the
//                        Nodes unlabelled (L=0: every one drifted) or labelled (L=1: none)
//   BM_DriftRecheck/N/I  a check after one Node changed, every Node drifted, with the
//                        grace tracker: all compared again (I=0) or only the changed (I=1)
//
// The scale benchmark (bench/node_scale.py) measures the same against a real kube-apiserver.

#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "bench/node_cluster.hpp"
#include "core/nodes.hpp"
#include "core/topology_source.hpp"
#include "inventory/drift.hpp"
#include "inventory/inventory.hpp"
#include "inventory/node_view.hpp"

namespace {

using topogate::bench::cluster;
using topogate::bench::snapshot_json;
using topogate::bench::snapshot_nodes;
namespace core = topogate::core;
namespace inv = topogate::inventory;

void BM_ViewList(benchmark::State& state) {
  cluster c(static_cast<std::size_t>(state.range(0)));
  for (auto _ : state) benchmark::DoNotOptimize(c.view.list());
}

void BM_SelectNodes(benchmark::State& state) {
  cluster c(static_cast<std::size_t>(state.range(0)));
  const auto list = c.view.list();
  for (auto _ : state) benchmark::DoNotOptimize(core::select_nodes(list, c.source));
}

// The cluster's inventory with its snapshot accepted, or null with the benchmark skipped.
std::unique_ptr<inv::inventory> inventory_or_skip(cluster& c, benchmark::State& state) {
  auto inventory = c.make_inventory();
  if (!inventory) state.SkipWithError("snapshot refused");
  return inventory;
}

void BM_RelevantChange(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  cluster c(n);
  auto inventory = inventory_or_skip(c, state);
  if (!inventory) return;
  std::size_t k = 0;
  for (auto _ : state) {
    // Out of the selection, then back: two changes, each a new served revision.
    const std::size_t i = (k++ * 7919) % std::min(n, snapshot_nodes);
    for (const char* group : {"cpu", "gpu"}) {
      if (!c.set_group(i, group)) std::abort();
      inventory->set_nodes(c.view.take());
    }
  }
  // Two changes per iteration: the time per change is half the time shown.
  state.SetItemsProcessed(state.iterations() * 2);
}

// Writes a buffer larger than the CPU's last-level cache: what a revision reads next comes
// from memory, as it does in a cluster, where other processes run between two windows.
void empty_caches() {
  static std::vector<std::uint64_t> buffer(std::size_t{64} << 20 >> 3);
  for (std::size_t i = 0; i < buffer.size(); i += 8) buffer[i] += i;
  benchmark::ClobberMemory();
}

// One direction of the selection flip timed, the other not; `cold`: the caches emptied
// (untimed) before the timed one.
void flip_one_way(benchmark::State& state, bool time_leave, bool cold = false) {
  const auto n = static_cast<std::size_t>(state.range(0));
  cluster c(n);
  auto inventory = inventory_or_skip(c, state);
  if (!inventory) return;
  std::size_t k = 0;
  for (auto _ : state) {
    const std::size_t i = (k++ * 7919) % std::min(n, snapshot_nodes);
    for (const bool leave : {true, false}) {
      const bool timed = leave == time_leave;
      if (!timed || cold) state.PauseTiming();
      if (!c.set_group(i, leave ? "cpu" : "gpu")) std::abort();
      if (timed && cold) {
        empty_caches();
        state.ResumeTiming();
      }
      inventory->set_nodes(c.view.take());
      if (!timed) state.ResumeTiming();
    }
  }
  state.SetItemsProcessed(state.iterations());
}

void BM_NodeLeaves(benchmark::State& state) { flip_one_way(state, true); }
void BM_NodeReturns(benchmark::State& state) { flip_one_way(state, false); }
void BM_NodeLeavesCold(benchmark::State& state) { flip_one_way(state, true, true); }

void BM_LabelChange(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  cluster c(n);
  auto inventory = inventory_or_skip(c, state);
  if (!inventory) return;
  const auto served = inventory->current();
  std::vector<bool> moved(std::min(n, snapshot_nodes));
  std::size_t k = 0;
  for (auto _ : state) {
    const std::size_t i = (k * 7919) % moved.size();
    moved[i] = !moved[i];
    if (!c.set_rack(i, moved[i] ? "rack-moved" : "rack-next")) std::abort();
    inventory->set_nodes(c.view.take());
    ++k;
  }
  if (inventory->current() != served)
    state.SkipWithError("a rack label on a Node changed what is served");
  state.SetItemsProcessed(state.iterations());
}

// range(1) 0: the Nodes carry none of the consumer's labels (every served Node drifted);
// 1: they carry what the revision says (none drifted, the usual case).
void BM_DriftCheck(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  cluster c(n);
  auto inventory = inventory_or_skip(c, state);
  if (!inventory) return;
  const auto rev = inventory->current();
  const auto snap = rev->accepted_shared();
  auto list = c.view.list();
  if (state.range(1) == 1) {
    core::node_list::cursor at(list);
    for (const auto& sn : snap->nodes) {
      auto* node = const_cast<core::cluster_node*>(at.find(sn.name));
      if (node == nullptr) continue;
      auto& labels = node->labels.edit();
      for (const auto& l : sn.labels) {
        std::erase_if(labels, [&](const auto& kv) { return kv.first == l.key; });
        labels.emplace_back(l.key, l.value);
      }
      std::sort(labels.begin(), labels.end());
    }
    for (const auto& a : rev->profiles->nodes) {
      auto* node = const_cast<core::cluster_node*>(list.find(a.node));
      auto& labels = node->labels.edit();
      std::erase_if(labels,
                    [](const auto& kv) { return kv.first == "topology.gpustack.ai/profile"; });
      labels.emplace_back("topology.gpustack.ai/profile", rev->profiles->profile_of(a).id);
      std::sort(labels.begin(), labels.end());
    }
  }
  const auto shared = std::make_shared<const core::node_list>(std::move(list));
  std::size_t drifted = 0;
  for (auto _ : state) {
    // The basis (the served Nodes indexed by name) and the marks, as the loop makes them.
    auto found = inv::find_drift_marks(c.source, inv::basis_of(*rev, shared));
    drifted = found.size();
    benchmark::DoNotOptimize(found);
  }
  state.counters["drifted"] = static_cast<double>(drifted);
}

// A check after one Node changed (its rack label, in turn set wrong and back), every served
// Node drifted (the costliest case): range(1) 0 compares every Node again and builds every
// tracker entry (find_drift_marks, drift_tracker::update), 1 only the Nodes the change can
// affect (drift_changes, refind_drift_marks), as the reconcile loop does.
void BM_DriftRecheck(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  const bool incremental = state.range(1) == 1;
  cluster c(n);
  auto inventory = inventory_or_skip(c, state);
  if (!inventory) return;
  const auto rev = inventory->current();
  auto a = std::make_shared<const core::node_list>(c.view.list());
  auto edited = *a;  // shares every chunk but the edited Node's
  const std::size_t at = edited.nodes.size() / 2;
  edited.nodes.edit(at).labels.emplace_back("topology.gpustack.ai/rack", "wrong");
  auto b = std::make_shared<const core::node_list>(std::move(edited));
  const auto t0 = std::chrono::system_clock::time_point(std::chrono::seconds(1'800'000'000));
  inv::drift_tracker tracker;
  auto basis = inv::basis_of(*rev, a);
  const auto describe = [&](std::string_view name) {
    return inv::describe_drift(c.source, basis, name);
  };
  tracker.update(inv::find_drift_marks(c.source, basis), t0, std::chrono::seconds(300), describe);
  int k = 0;
  for (auto _ : state) {
    const auto& list = ++k % 2 == 1 ? b : a;
    const auto now = t0 + std::chrono::seconds(k);
    std::vector<inv::drift_mark> found;
    if (incremental) {
      const auto changed = inv::drift_changes(basis, *rev, *list);
      basis = inv::basis_of(*rev, list, &basis);
      found = inv::refind_drift_marks(c.source, basis, tracker.take_found(), *changed);
    } else {
      basis = inv::basis_of(*rev, list);
      found = inv::find_drift_marks(c.source, basis);
    }
    benchmark::DoNotOptimize(
        tracker.update(std::move(found), now, std::chrono::seconds(300), describe));
  }
  state.counters["drifted"] = static_cast<double>(tracker.found().size());
}

}  // namespace

BENCHMARK(BM_ViewList)->Arg(1000)->Arg(10000)->Arg(20000)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_SelectNodes)->Arg(1000)->Arg(10000)->Arg(20000)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_RelevantChange)->Arg(1000)->Arg(10000)->Arg(20000)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_NodeLeaves)->Arg(1000)->Arg(10000)->Arg(20000)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_NodeReturns)->Arg(1000)->Arg(10000)->Arg(20000)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_NodeLeavesCold)->Arg(1000)->Arg(10000)->Arg(20000)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_LabelChange)->Arg(1000)->Arg(10000)->Arg(20000)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_DriftCheck)
    ->ArgsProduct({{1000, 10000, 20000}, {0, 1}})
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_DriftRecheck)
    ->ArgsProduct({{1000, 10000, 20000}, {0, 1}})
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_MAIN();

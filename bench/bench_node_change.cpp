// What one relevant Node change costs topogate at cluster scale, in process and in parts:
// a Node of N (with the ~20 labels cloud GPU Nodes carry) leaves the inventory's nodeSelector
// or comes back; the registry takes the view's list and the inventory re-evaluates its
// accepted snapshot (min(N, 7000) Nodes, pruned to the Nodes the list has) against it.
//
//   BM_ViewList/N        node_view::list(): the copy the registry takes once per window
//   BM_SelectNodes/N     core::select_nodes over that list (the inventory's selected Nodes)
//   BM_RelevantChange/N  the whole change: the event applied, the list taken, set_nodes()
//
// The scale benchmark (bench/node_scale.py) measures the same against a real kube-apiserver.

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "bench/node_cluster.hpp"
#include "core/nodes.hpp"
#include "core/topology_source.hpp"
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

void BM_RelevantChange(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  cluster c(n);
  auto inventory = c.make_inventory();
  if (!inventory) {
    state.SkipWithError("snapshot refused");
    return;
  }
  std::size_t k = 0;
  for (auto _ : state) {
    // Out of the selection, then back: two changes, each a new served revision.
    const std::size_t i = (k++ * 7919) % std::min(n, snapshot_nodes);
    for (const char* group : {"cpu", "gpu"}) {
      if (!c.set_group(i, group)) std::abort();
      inventory->set_nodes(std::make_shared<const core::node_list>(c.view.list()));
    }
  }
  // Two changes per iteration: the time per change is half the time shown.
  state.SetItemsProcessed(state.iterations() * 2);
}

}  // namespace

BENCHMARK(BM_ViewList)->Arg(1000)->Arg(10000)->Arg(20000)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_SelectNodes)->Arg(1000)->Arg(10000)->Arg(20000)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_RelevantChange)->Arg(1000)->Arg(10000)->Arg(20000)->Unit(benchmark::kMicrosecond);
BENCHMARK_MAIN();

// Snapshot validation throughput against the bare parsers it is built on, on a valid ~1 MiB
// snapshot: region/zone/rack for as many Nodes as fit in 1 MiB of YAML (8062 with the short
// names and values below, the size of inventory the consumer's 1 MiB limit allows).
//
// Goals, as ratios within one run: check_snapshot on JSON <= 3x simdjson's bare DOM parse;
// check_snapshot on YAML <= 1.0x yaml-cpp's YAML::Load.
//
//   cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=Release
//   cmake --build build/release --target bench_validate && build/release/bench/bench_validate

#include <benchmark/benchmark.h>
#include <simdjson.h>
#include <yaml-cpp/yaml.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "bench/corpus.hpp"
#include "core/snapshot.hpp"
#include "core/topology_source.hpp"

namespace {

using namespace topogate::core;
namespace bench = topogate::bench;

// The runbook's webhook source.
const char* webhook_source = R"(apiVersion: worker.gpustack.ai/v1
kind: TopologySource
metadata:
  name: inventory-service
spec:
  nodeSelector: {}
  levels:
    - topology.gpustack.ai/rack
  webhook:
    url: https://topology-inventory.gpustack-system.svc/snapshot
    pollInterval: 1m
    timeout: 10s
    maxStaleness: 5m
    caBundleConfigMapRef:
      namespace: gpustack-system
      name: topology-inventory-ca
    bearerTokenSecretRef:
      namespace: gpustack-system
      name: topology-inventory-token
)";

struct corpus {
  topology_source source;
  snapshot snap;
  std::string json;
  std::string yaml;
};

// bench/corpus.hpp's data-center inventory with short names and values, as many Nodes as
// keep the YAML rendering (the larger one) within 1 MiB: about 8000.
const corpus& data() {
  static const corpus c = [] {
    corpus out;
    source_result src = validate_topology_source_text(bench::data_center_source);
    if (!src.ok()) std::abort();
    out.source = src.source;
    out.snap.api_version = snapshot_api_version;
    out.snap.revision = "inventory-42";
    bench::fill_round_robin(out.snap, {"n%04zu", "r%zu", "z%02zu", "k%03zu"},
                            [](const snapshot& s) { return render_snapshot_yaml(s); });
    out.json = render_snapshot_json(out.snap);
    out.yaml = render_snapshot_yaml(out.snap);
    const snapshot_context ctx{&out.source, nullptr};
    if (!check_snapshot(out.json, ctx).empty() || !check_snapshot(out.yaml, ctx).empty())
      std::abort();
    return out;
  }();
  return c;
}

void set_counters(benchmark::State& state, std::size_t bytes) {
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * bytes));
  state.counters["nodes"] = static_cast<double>(data().snap.nodes.size());
}

void BM_simdjson_dom_parse(benchmark::State& state) {
  const corpus& c = data();
  simdjson::dom::parser parser;
  const simdjson::padded_string padded(c.json);
  for (auto _ : state) {
    simdjson::dom::element root;
    if (parser.parse(padded).get(root)) state.SkipWithError("parse failed");
    benchmark::DoNotOptimize(root);
  }
  set_counters(state, c.json.size());
}
BENCHMARK(BM_simdjson_dom_parse)->Unit(benchmark::kMicrosecond);

// The decoder is the caller's, as in the server: its buffers are reused from run to run.
void BM_check_snapshot_json(benchmark::State& state) {
  const corpus& c = data();
  const snapshot_context ctx{&c.source, nullptr};
  json_decoder decoder;
  for (auto _ : state) {
    error_list errors = check_snapshot(decoder, c.json, ctx);
    if (!errors.empty()) state.SkipWithError("unexpected errors");
    benchmark::DoNotOptimize(errors);
  }
  set_counters(state, c.json.size());
}
BENCHMARK(BM_check_snapshot_json)->Unit(benchmark::kMicrosecond);

void BM_yaml_cpp_load(benchmark::State& state) {
  const corpus& c = data();
  for (auto _ : state) {
    YAML::Node root = YAML::Load(c.yaml);
    benchmark::DoNotOptimize(root);
  }
  set_counters(state, c.yaml.size());
}
BENCHMARK(BM_yaml_cpp_load)->Unit(benchmark::kMillisecond);

void BM_check_snapshot_yaml(benchmark::State& state) {
  const corpus& c = data();
  const snapshot_context ctx{&c.source, nullptr};
  json_decoder decoder;
  for (auto _ : state) {
    error_list errors = check_snapshot(decoder, c.yaml, ctx);
    if (!errors.empty()) state.SkipWithError("unexpected errors");
    benchmark::DoNotOptimize(errors);
  }
  set_counters(state, c.yaml.size());
}
BENCHMARK(BM_check_snapshot_yaml)->Unit(benchmark::kMillisecond);

void BM_decode_snapshot_json(benchmark::State& state) {
  const corpus& c = data();
  json_decoder decoder;
  for (auto _ : state) {
    snapshot_decode_result r = decode_snapshot(decoder, c.json);
    benchmark::DoNotOptimize(r);
  }
  set_counters(state, c.json.size());
}
BENCHMARK(BM_decode_snapshot_json)->Unit(benchmark::kMicrosecond);

void BM_render_snapshot_json(benchmark::State& state) {
  const corpus& c = data();
  for (auto _ : state) {
    std::string out = render_snapshot_json(c.snap);
    benchmark::DoNotOptimize(out);
  }
  set_counters(state, c.json.size());
}
BENCHMARK(BM_render_snapshot_json)->Unit(benchmark::kMicrosecond);

void BM_validate_topology_source_text(benchmark::State& state) {
  const std::string text = webhook_source;
  json_decoder decoder;
  for (auto _ : state) {
    source_result r = validate_topology_source_text(decoder, text);
    if (!r.ok()) state.SkipWithError("unexpected errors");
    benchmark::DoNotOptimize(r);
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * text.size()));
}
BENCHMARK(BM_validate_topology_source_text)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();

// Instruction-count driver for the CI guard (bench/instr_guard.py): validates the ~1 MiB
// JSON snapshot (region/zone/rack for as many Nodes as fit, ~8000) once against its
// TopologySource. Only instr_region() is counted: callgrind runs with
// --collect-atstart=no --toggle-collect=instr_region, so building the corpus and the
// warm-up (the decoder's first buffer allocation) stay out of the figure.
//
//   instr_validate            prints nodes, bytes and the error count (0 expected)

#include <cstdio>
#include <cstdlib>
#include <string>

#include "core/snapshot.hpp"
#include "core/topology_source.hpp"

// Instrumentation on only around the counted call: valgrind runs everything else (corpus
// construction, warm-up) uninstrumented, which keeps the guard fast on a Debug build.
#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#else
#define CALLGRIND_START_INSTRUMENTATION
#define CALLGRIND_STOP_INSTRUMENTATION
#endif

namespace {

using namespace topogate::core;

const char* const source_text = R"(apiVersion: worker.gpustack.ai/v1
kind: TopologySource
metadata:
  name: data-center
spec:
  nodeSelector: {}
  levels:
    - topology.gpustack.ai/region
    - topology.gpustack.ai/zone
    - topology.gpustack.ai/rack
  configMap:
    configMapRef:
      namespace: gpustack-system
      name: topology-inventory
    key: snapshot.yaml
    maxStaleness: 10m
)";

// 4 regions x 4 zones x 16 racks, Nodes spread round-robin, as many as keep the served
// JSON within S10's 1 MiB.
std::string make_snapshot_json() {
  snapshot snap;
  snap.api_version = snapshot_api_version;
  snap.revision = "inventory-42";
  auto add = [&](std::size_t i) {
    const std::size_t rack = i % 256, zone = rack / 16, region = zone / 4;
    char name[32], r[32], z[32], k[32];
    std::snprintf(name, sizeof name, "worker-%05zu", i);
    std::snprintf(r, sizeof r, "region-%zu", region);
    std::snprintf(z, sizeof z, "zone-%zu", zone);
    std::snprintf(k, sizeof k, "rack-%03zu", rack);
    snap.nodes.push_back({name,
                          {{"topology.gpustack.ai/region", r},
                           {"topology.gpustack.ai/zone", z},
                           {"topology.gpustack.ai/rack", k}}});
  };
  std::size_t i = 0;
  add(i++);
  const std::size_t one = render_snapshot_json(snap).size();
  add(i++);
  const std::size_t per = render_snapshot_json(snap).size() - one;
  while (one + i * per < max_snapshot_bytes) add(i++);
  std::string json = render_snapshot_json(snap);
  while (json.size() > max_snapshot_bytes) {
    snap.nodes.pop_back();
    json = render_snapshot_json(snap);
  }
  std::printf("nodes %zu\n", snap.nodes.size());
  return json;
}

}  // namespace

// The counted region; extern "C" and noinline so callgrind's --toggle-collect finds it
// under one stable name whatever the optimisation level.
extern "C" __attribute__((noinline)) std::size_t instr_region(json_decoder& decoder, const std::string& json,
                                                              const snapshot_context& ctx) {
  return check_snapshot(decoder, json, ctx).size();
}

int main() {
  const source_result src = validate_topology_source_text(source_text);
  if (!src.ok()) {
    std::fprintf(stderr, "instr_validate: the TopologySource does not validate\n");
    return 2;
  }
  const std::string json = make_snapshot_json();
  const snapshot_context ctx{&src.source, nullptr};
  json_decoder decoder;
  // Warm-up outside the counted region: the steady state reuses the decoder's buffers.
  if (check_snapshot(decoder, json, ctx).size() != 0) {
    std::fprintf(stderr, "instr_validate: the snapshot does not validate\n");
    return 2;
  }
  CALLGRIND_START_INSTRUMENTATION;
  const std::size_t errors = instr_region(decoder, json, ctx);
  CALLGRIND_STOP_INSTRUMENTATION;
  std::printf("bytes %zu\nerrors %zu\n", json.size(), errors);
  return errors == 0 ? 0 : 2;
}

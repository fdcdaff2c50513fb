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

#include "bench/callgrind.hpp"
#include "bench/corpus.hpp"
#include "core/snapshot.hpp"
#include "core/topology_source.hpp"

namespace {

using namespace topogate::core;
namespace bench = topogate::bench;

std::string make_snapshot_json() {
  snapshot snap;
  snap.api_version = snapshot_api_version;
  snap.revision = "inventory-42";
  bench::fill_round_robin(snap, {"worker-%05zu", "region-%zu", "zone-%zu", "rack-%03zu"},
                          [](const snapshot& s) { return render_snapshot_json(s); });
  std::printf("nodes %zu\n", snap.nodes.size());
  return render_snapshot_json(snap);
}

}  // namespace

// The counted region; extern "C" and noinline so callgrind's --toggle-collect finds it
// under one stable name whatever the optimisation level.
extern "C" __attribute__((noinline)) std::size_t instr_region(json_decoder& decoder,
                                                              const std::string& json,
                                                              const snapshot_context& ctx) {
  return check_snapshot(decoder, json, ctx).size();
}

int main() {
  const source_result src = validate_topology_source_text(bench::data_center_source);
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

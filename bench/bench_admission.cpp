// In-process cost of one admission review: AdmissionReview bytes in, response bytes out,
// through the same function the webhook routes call. The review is the HTTP benchmark's
// (~2.6 KiB, a webhook TopologySource with the metadata the apiserver sends: labels,
// annotations, managedFields), valid and invalid (seven causes).
//
// The server's goal (>= 1.0x nginx's static reply at 32 connections, p99 <= 1 ms) leaves a
// few microseconds of CPU per review for this part.
//
//   cmake --build build/release --target bench_admission && build/release/bench/bench_admission

#include <benchmark/benchmark.h>
#include <simdjson.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <string_view>

#include "admission/review.hpp"
#include "core/document.hpp"

namespace {

using namespace topogate;

// The bodies wrk posts (bench/http/review-*.json) and the instruction guard counts, so the
// three measurements are of the same bytes.
std::string read_review(const char* name) {
  const std::string path = std::string(TOPOGATE_BENCH_DIR "/http/") + name;
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "bench_admission: cannot read %s\n", path.c_str());
    std::exit(2);
  }
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}
const std::string valid_review = read_review("review-valid.json");
const std::string invalid_review = read_review("review-invalid.json");

const admission::request_meta json_meta{std::string_view("application/json"), std::nullopt};

void run(benchmark::State& state, const std::string& body, admission::verdict want) {
  const admission::options opts;
  core::json_decoder decoder;
  {
    const admission::outcome o =
        admission::review(admission::route::topology_sources, body, json_meta, opts, decoder);
    if (o.result != want) {
      state.SkipWithError("unexpected verdict");
      return;
    }
  }
  for (auto _ : state) {
    admission::outcome o =
        admission::review(admission::route::topology_sources, body, json_meta, opts, decoder);
    benchmark::DoNotOptimize(o);
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * body.size()));
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
}

void BM_admission_review_valid(benchmark::State& state) {
  run(state, valid_review, admission::verdict::allowed);
}
BENCHMARK(BM_admission_review_valid)->Unit(benchmark::kMicrosecond);

void BM_admission_review_invalid(benchmark::State& state) {
  run(state, invalid_review, admission::verdict::denied);
}
BENCHMARK(BM_admission_review_invalid)->Unit(benchmark::kMicrosecond);

// The floor: simdjson's bare On Demand walk over every value of the same bytes.
std::size_t walk(simdjson::ondemand::value v) {
  std::size_t n = 1;
  switch (v.type().value_unsafe()) {
    case simdjson::ondemand::json_type::object:
      for (auto f : v.get_object().value_unsafe()) n += walk(f.value().value_unsafe());
      break;
    case simdjson::ondemand::json_type::array:
      for (auto e : v.get_array().value_unsafe()) n += walk(e.value_unsafe());
      break;
    default:
      benchmark::DoNotOptimize(v.raw_json_token());
      break;
  }
  return n;
}

void BM_simdjson_ondemand_walk(benchmark::State& state) {
  simdjson::ondemand::parser parser;
  const simdjson::padded_string padded(valid_review);
  for (auto _ : state) {
    simdjson::ondemand::document doc;
    if (parser.iterate(padded).get(doc)) state.SkipWithError("parse failed");
    simdjson::ondemand::object top;
    if (doc.get_object().get(top)) state.SkipWithError("parse failed");
    std::size_t n = 0;
    for (auto f : top) n += walk(f.value().value_unsafe());
    benchmark::DoNotOptimize(n);
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * valid_review.size()));
}
BENCHMARK(BM_simdjson_ondemand_walk)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();

// In-process cost of one admission review: AdmissionReview bytes in, response bytes out,
// through the same function the webhook routes call. The review is the HTTP benchmark's
// (~2.6 KiB, a webhook TopologySource with the metadata the apiserver sends: labels,
// annotations, managedFields), valid and invalid (four field errors).
//
// The server's goal (>= 1.0x nginx's static reply at 32 connections, p99 <= 1 ms) leaves a
// few microseconds of CPU per review for this part.
//
//   cmake --build build/release --target bench_admission && build/release/bench/bench_admission

#include <benchmark/benchmark.h>
#include <simdjson.h>

#include <cstdlib>
#include <string>
#include <string_view>

#include "admission/review.hpp"
#include "core/document.hpp"

namespace {

using namespace topogate;

// bench/http/run.py admission_review(), byte for byte.
const std::string valid_review =
    R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"705ab4f5-)"
    R"(6393-11e8-b7cc-42010a800002","kind":{"group":"worker.gpustack.ai","version":"v1","kind":)"
    R"("TopologySource"},"resource":{"group":"worker.gpustack.ai","version":"v1","resource":"to)"
    R"(pologysources"},"requestKind":{"group":"worker.gpustack.ai","version":"v1","kind":"Topol)"
    R"(ogySource"},"requestResource":{"group":"worker.gpustack.ai","version":"v1","resource":"t)"
    R"(opologysources"},"name":"inventory-service","operation":"CREATE","userInfo":{"username":)"
    R"("system:serviceaccount:gpustack-system:helm","uid":"b3c1e2d4-0000-4000-8000-000000000001)"
    R"(","groups":["system:serviceaccounts","system:serviceaccounts:gpustack-system","system:au)"
    R"(thenticated"]},"object":{"apiVersion":"worker.gpustack.ai/v1","kind":"TopologySource","m)"
    R"(etadata":{"name":"inventory-service","uid":"2f7a4d36-9c0e-4f57-8f5e-3f1a6b0c9d21","gener)"
    R"(ation":3,"creationTimestamp":"2026-11-01T08:00:00Z","resourceVersion":"918273","labels":)"
    R"({"app.kubernetes.io/managed-by":"helm","app.kubernetes.io/part-of":"gpustack"},"annotati)"
    R"(ons":{"meta.helm.sh/release-name":"gpustack","meta.helm.sh/release-namespace":"gpustack-)"
    R"(system","kubectl.kubernetes.io/last-applied-configuration-hash":"sha256-9f9f9f9f9f9f9f9f)"
    R"(9f9f9f9f9f9f9f9f9f9f9f9f9f9f9f9f9f9f9f9f9f9f9f9f","gpustack.ai/owner":"platform-team@exa)"
    R"(mple.com"},"managedFields":[{"manager":"helm","operation":"Update","apiVersion":"worker.)"
    R"(gpustack.ai/v1","time":"2026-11-01T08:00:00Z","fieldsType":"FieldsV1","fieldsV1":{"f:met)"
    R"(adata":{"f:labels":{".":{},"f:app.kubernetes.io/managed-by":{},"f:app.kubernetes.io/part)"
    R"(-of":{}}},"f:spec":{".":{},"f:levels":{},"f:nodeSelector":{},"f:webhook":{".":{},"f:url")"
    R"(:{},"f:pollInterval":{},"f:timeout":{},"f:maxStaleness":{},"f:caBundleConfigMapRef":{},")"
    R"(f:bearerTokenSecretRef":{}}}}}]},"spec":{"nodeSelector":{"matchLabels":{"node-role.kuber)"
    R"(netes.io/gpu":"true"},"matchExpressions":[{"key":"topology.gpustack.ai/pool","operator":)"
    R"("In","values":["training","inference"]}]},"levels":["topology.gpustack.ai/region","topol)"
    R"(ogy.gpustack.ai/zone","topology.gpustack.ai/block","topology.gpustack.ai/rack"],"webhook)"
    R"(":{"url":"https://topology-inventory.gpustack-system.svc/snapshots/data-center","pollInt)"
    R"(erval":"1m","timeout":"10s","maxStaleness":"5m","caBundleConfigMapRef":{"namespace":"gpu)"
    R"(stack-system","name":"topology-inventory-ca"},"bearerTokenSecretRef":{"namespace":"gpust)"
    R"(ack-system","name":"topology-inventory-token"}}}},"oldObject":null,"dryRun":false,"optio)"
    R"(ns":{"apiVersion":"meta.k8s.io/v1","kind":"CreateOptions","fieldManager":"helm"}}})";

// The same review with a duplicate level (T4), a reserved level key (T5), plain http (T9) and
// a malformed poll interval (T10).
const std::string invalid_review =
    R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"705ab4f5-)"
    R"(6393-11e8-b7cc-42010a800003","kind":{"group":"worker.gpustack.ai","version":"v1","kind":)"
    R"("TopologySource"},"resource":{"group":"worker.gpustack.ai","version":"v1","resource":"to)"
    R"(pologysources"},"requestKind":{"group":"worker.gpustack.ai","version":"v1","kind":"Topol)"
    R"(ogySource"},"requestResource":{"group":"worker.gpustack.ai","version":"v1","resource":"t)"
    R"(opologysources"},"name":"inventory-service","operation":"CREATE","userInfo":{"username":)"
    R"("system:serviceaccount:gpustack-system:helm","uid":"b3c1e2d4-0000-4000-8000-000000000001)"
    R"(","groups":["system:serviceaccounts","system:serviceaccounts:gpustack-system","system:au)"
    R"(thenticated"]},"object":{"apiVersion":"worker.gpustack.ai/v1","kind":"TopologySource","m)"
    R"(etadata":{"name":"inventory-service","uid":"2f7a4d36-9c0e-4f57-8f5e-3f1a6b0c9d21","gener)"
    R"(ation":3,"creationTimestamp":"2026-11-01T08:00:00Z","resourceVersion":"918273","labels":)"
    R"({"app.kubernetes.io/managed-by":"helm","app.kubernetes.io/part-of":"gpustack"},"annotati)"
    R"(ons":{"meta.helm.sh/release-name":"gpustack","meta.helm.sh/release-namespace":"gpustack-)"
    R"(system","kubectl.kubernetes.io/last-applied-configuration-hash":"sha256-9f9f9f9f9f9f9f9f)"
    R"(9f9f9f9f9f9f9f9f9f9f9f9f9f9f9f9f9f9f9f9f9f9f9f9f","gpustack.ai/owner":"platform-team@exa)"
    R"(mple.com"},"managedFields":[{"manager":"helm","operation":"Update","apiVersion":"worker.)"
    R"(gpustack.ai/v1","time":"2026-11-01T08:00:00Z","fieldsType":"FieldsV1","fieldsV1":{"f:met)"
    R"(adata":{"f:labels":{".":{},"f:app.kubernetes.io/managed-by":{},"f:app.kubernetes.io/part)"
    R"(-of":{}}},"f:spec":{".":{},"f:levels":{},"f:nodeSelector":{},"f:webhook":{".":{},"f:url")"
    R"(:{},"f:pollInterval":{},"f:timeout":{},"f:maxStaleness":{},"f:caBundleConfigMapRef":{},")"
    R"(f:bearerTokenSecretRef":{}}}}}]},"spec":{"nodeSelector":{"matchLabels":{"node-role.kuber)"
    R"(netes.io/gpu":"true"},"matchExpressions":[{"key":"topology.gpustack.ai/pool","operator":)"
    R"("In","values":["training","inference"]}]},"levels":["topology.gpustack.ai/region","topol)"
    R"(ogy.gpustack.ai/zone","topology.gpustack.ai/zone","kubernetes.io/hostname"],"webhook":{")"
    R"(url":"http://topology-inventory.gpustack-system.svc/snapshots/data-center","pollInterval)"
    R"(":"1x","timeout":"2m","maxStaleness":"5m","caBundleConfigMapRef":{"namespace":"gpustack-)"
    R"(system","name":"topology-inventory-ca"},"bearerTokenSecretRef":{"namespace":"gpustack-sy)"
    R"(stem","name":"topology-inventory-token"}}}},"oldObject":null,"dryRun":false,"options":{")"
    R"(apiVersion":"meta.k8s.io/v1","kind":"CreateOptions","fieldManager":"helm"}}})";

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

// Reconcile-loop figures: time from a snapshot file change to the new revision being served
// (inotify + debounce + read + validate + render + publish), and push latency for a ~1 MiB
// snapshot through the file store (validate, write, fsync, rename, fsync directory).
//
//   bench_inventory [--dir DIR] [--changes N] [--pushes N]
// DIR should be on the filesystem the store will use in production (fsync cost varies).

#include <stdlib.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "inventory/registry.hpp"

namespace {

using namespace topogate;
using clk = std::chrono::steady_clock;

core::topology_source source() {
  core::topology_source s;
  s.api_version = "worker.gpustack.ai/v1alpha1";
  s.name = "bench";
  s.levels = {"topology.gpustack.ai/region", "topology.gpustack.ai/zone",
              "topology.gpustack.ai/rack"};
  return s;
}

// `n` nodes, 32 per rack, 16 racks per zone, one region: a valid S8/S9 hierarchy.
std::string snapshot(const std::string& revision, int n) {
  std::string out =
      R"({"apiVersion":"topology.gpustack.ai/v1alpha1","revision":")" + revision + R"(","nodes":{)";
  char buf[256];
  for (int i = 0; i < n; ++i) {
    std::snprintf(
        buf, sizeof buf,
        R"(%s"gpu-node-%05d":{"topology.gpustack.ai/region":"region-a","topology.gpustack.ai/zone":"zone-%03d","topology.gpustack.ai/rack":"rack-%04d"})",
        i == 0 ? "" : ",", i, i / 512, i / 32);
    out += buf;
  }
  out += "}}";
  return out;
}

// The largest node count whose snapshot stays within 1 MiB (with room for the revision id).
int nodes_for_one_mib() {
  int n = 7000;
  while (snapshot("bench-000000", n + 100).size() < (1u << 20) - 512) n += 100;
  while (snapshot("bench-000000", n + 1).size() < (1u << 20) - 512) ++n;
  return n;
}

struct stats {
  double p50, p90, p99, max, mean;
};

stats summarize(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  auto at = [&](double q) {
    return v[std::min(v.size() - 1, static_cast<std::size_t>(q * static_cast<double>(v.size())))];
  };
  double sum = 0;
  for (const double x : v) sum += x;
  return {at(0.50), at(0.90), at(0.99), v.back(), sum / static_cast<double>(v.size())};
}

double ms_since(clk::time_point t0) {
  return std::chrono::duration<double, std::milli>(clk::now() - t0).count();
}

void write_atomic(const std::string& path, const std::string& data) {
  const auto tmp = path + ".tmp";
  FILE* f = std::fopen(tmp.c_str(), "wb");
  if (f == nullptr) std::exit(2);
  std::fwrite(data.data(), 1, data.size(), f);
  std::fclose(f);
  std::rename(tmp.c_str(), path.c_str());
}

void file_change_latency(const std::string& dir, int changes, int nodes, const char* label) {
  const auto path = dir + "/snapshot-" + std::to_string(nodes) + ".json";
  write_atomic(path, snapshot("chg-0", nodes));
  inventory::registry_config cfg;
  inventory::inventory_spec spec;
  spec.config.name = "bench";
  spec.config.source = source();
  spec.snapshot_path = path;
  spec.kind = inventory::source_kind::file;
  cfg.inventories.push_back(std::move(spec));
  inventory::registry_observer quiet;
  quiet.on_log = [](std::string_view, std::string_view, std::string_view) {};
  inventory::registry reg(std::move(cfg), inventory::system_clock(), quiet);
  reg.start();
  auto* inv = reg.find("bench");
  std::vector<double> samples;
  for (int i = 1; i <= changes; ++i) {
    const auto rev = "chg-" + std::to_string(i);
    const auto body = snapshot(rev, nodes);
    const auto t0 = clk::now();
    write_atomic(path, body);
    for (;;) {
      const auto cur = inv->current();
      if (cur && cur->revision_id == rev) break;
      if (ms_since(t0) > 10'000) {
        std::fprintf(stderr, "change %d not served within 10 s\n", i);
        std::exit(1);
      }
      std::this_thread::yield();
    }
    samples.push_back(ms_since(t0));
  }
  reg.stop();
  const auto s = summarize(samples);
  std::printf(
      "file change -> served (%s, %zu bytes, %d changes): median %.2f ms, p90 %.2f ms, p99 %.2f "
      "ms, max %.2f ms\n",
      label, snapshot("chg-0", nodes).size(), changes, s.p50, s.p90, s.p99, s.max);
}

void push_latency(const std::string& dir, int pushes, int nodes) {
  inventory::registry_config cfg;
  inventory::inventory_spec spec;
  spec.config.name = "bench";
  spec.config.source = source();
  cfg.inventories.push_back(std::move(spec));
  cfg.store.type = inventory::store_config::kind::file;
  cfg.store.directory = dir + "/store";
  inventory::registry_observer quiet;
  quiet.on_log = [](std::string_view, std::string_view, std::string_view) {};
  inventory::registry reg(std::move(cfg), inventory::system_clock(), quiet);
  reg.start();
  std::vector<std::string> bodies;
  for (int i = 0; i < pushes; ++i)
    bodies.push_back(snapshot("push-" + std::to_string(100000 + i), nodes));
  std::vector<double> total;
  std::vector<double> validate_only;
  auto* inv = reg.find("bench");
  for (int i = 0; i < pushes; ++i) {
    auto t0 = clk::now();
    const auto p = inv->prepare(bodies[static_cast<std::size_t>(i)],
                                {"bench", "", std::nullopt, std::nullopt});
    validate_only.push_back(ms_since(t0));
    if (!p.candidate) {
      std::fprintf(stderr, "bench snapshot invalid: %s\n",
                   core::render_text(p.result.errors).c_str());
      std::exit(1);
    }
    t0 = clk::now();
    const auto a = reg.push("bench", bodies[static_cast<std::size_t>(i)], std::nullopt, "bench");
    total.push_back(ms_since(t0));
    if (a.outcome != inventory::push_outcome::created &&
        a.outcome != inventory::push_outcome::stored) {
      std::fprintf(stderr, "push %d: %s %s %s\n", i,
                   std::string(inventory::to_string(a.outcome)).c_str(), a.message.c_str(),
                   core::render_text(a.errors).c_str());
      std::exit(1);
    }
  }
  reg.stop();
  const auto s = summarize(total);
  const auto v = summarize(validate_only);
  std::printf(
      "push %zu bytes (%d pushes, file store with fsync): p50 %.2f ms, p99 %.2f ms, max %.2f ms, "
      "mean %.2f ms\n",
      bodies.front().size(), pushes, s.p50, s.p99, s.max, s.mean);
  std::printf("  of which decode+validate+render (no store): p50 %.2f ms, p99 %.2f ms\n", v.p50,
              v.p99);
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir;
  int changes = 100;
  int pushes = 100;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--dir") == 0) dir = argv[i + 1];
    if (std::strcmp(argv[i], "--changes") == 0) changes = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--pushes") == 0) pushes = std::atoi(argv[i + 1]);
  }
  bool made = false;
  if (dir.empty()) {
    std::string tmpl = (std::filesystem::temp_directory_path() / "topogate-bench-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) return 2;
    dir = tmpl;
    made = true;
  }
  const int big = nodes_for_one_mib();
  file_change_latency(dir, changes, 64, "small");
  file_change_latency(dir, changes, big, "~1 MiB");
  push_latency(dir, pushes, big);
  if (made) std::filesystem::remove_all(dir);
  return 0;
}

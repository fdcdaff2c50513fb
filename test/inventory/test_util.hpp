#pragma once
// Shared fixtures for the inventory tests: a TopologySource, snapshots, Node lists, a
// manual clock, temporary directories and condition polling with deadlines.

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/nodes.hpp"
#include "core/topology_source.hpp"
#include "inventory/inventory.hpp"
#include "inventory/registry.hpp"

namespace topogate::inventory::testing {

inline constexpr std::string_view region = "topology.gpustack.ai/region";
inline constexpr std::string_view zone = "topology.gpustack.ai/zone";
inline constexpr std::string_view rack = "topology.gpustack.ai/rack";

inline core::topology_source source() {
  core::topology_source s;
  s.api_version = "worker.gpustack.ai/v1alpha1";
  s.name = "dc";
  s.levels = {std::string(region), std::string(zone), std::string(rack)};
  core::webhook_source w;
  w.url = "https://topogate.gpustack-system.svc/snapshots/dc";
  w.poll_interval = "1m";
  w.timeout = "10s";
  w.max_staleness = "10m";
  s.webhook = w;
  return s;
}

inline inventory_config config(std::string name = "dc") {
  inventory_config c;
  c.name = std::move(name);
  c.source = source();
  return c;
}

// One push inventory `inv` with a file store in `store_dir`, resynced rarely.
inline registry_config push_registry(const std::string& store_dir,
                                     inventory_config inv = config()) {
  registry_config cfg;
  inventory_spec spec;
  spec.config = std::move(inv);
  cfg.inventories.push_back(std::move(spec));
  cfg.store.type = store_config::kind::file;
  cfg.store.directory = store_dir;
  cfg.resync_interval = std::chrono::seconds(3600);
  return cfg;
}

// `nodes` worker-0..worker-(n-1), region-a, two zones, racks of four.
inline std::string snapshot_json(std::string_view revision, int n = 4, int skip = -1) {
  std::string out = R"({"apiVersion":"topology.gpustack.ai/v1alpha1","revision":")";
  out += revision;
  out += R"(","nodes":{)";
  bool first = true;
  for (int i = 0; i < n; ++i) {
    if (i == skip) continue;
    if (!first) out += ',';
    first = false;
    out += "\"worker-" + std::to_string(i) + "\":{\"" + std::string(region) + "\":\"region-a\",\"" +
           std::string(zone) + "\":\"zone-" + std::to_string(i / 8 % 2) + "\",\"" +
           std::string(rack) + "\":\"rack-" + std::to_string(i / 4) + "\"}";
  }
  out += "}}";
  return out;
}

inline std::string snapshot_yaml(std::string_view revision) {
  std::string out = "apiVersion: topology.gpustack.ai/v1alpha1\nrevision: ";
  out += revision;
  out += "\nnodes:\n";
  for (int i = 0; i < 4; ++i) {
    out += "  worker-" + std::to_string(i) + ":\n";
    out += "    " + std::string(region) + ": region-a\n";
    out += "    " + std::string(zone) + ": zone-0\n";
    out += "    " + std::string(rack) + ": rack-0\n";
  }
  return out;
}

// An undeclared level key: S4 (and S5 is fine: topology.gpustack.ai/*).
inline std::string snapshot_bad_level(std::string_view revision) {
  return std::string(R"({"apiVersion":"topology.gpustack.ai/v1alpha1","revision":")") +
         std::string(revision) + R"(","nodes":{"worker-0":{"topology.gpustack.ai/pod":"p1"}}})";
}

inline core::node_list nodes(int n, int skip = -1) {
  std::vector<core::cluster_node> sorted;
  for (int i = 0; i < n; ++i) {
    if (i == skip) continue;
    core::cluster_node node;
    node.name = "worker-" + std::to_string(i);
    node.labels = {{"kubernetes.io/hostname", node.name}};
    sorted.push_back(std::move(node));
  }
  std::sort(sorted.begin(), sorted.end(),
            [](const auto& a, const auto& b) { return a.name < b.name; });
  core::node_list list;
  list.nodes = core::chunked_vector<core::cluster_node>(std::move(sorted));
  return list;
}

inline std::string nodes_json(int n, int skip = -1) {
  std::string out = R"({"apiVersion":"v1","kind":"List","items":[)";
  bool first = true;
  for (int i = 0; i < n; ++i) {
    if (i == skip) continue;
    if (!first) out += ',';
    first = false;
    const auto name = "worker-" + std::to_string(i);
    out += R"({"apiVersion":"v1","kind":"Node","metadata":{"name":")" + name +
           R"(","labels":{"kubernetes.io/hostname":")" + name + R"("}}})";
  }
  out += "]}";
  return out;
}

class manual_clock final : public clock {
 public:
  manual_clock()
      : now_(std::chrono::system_clock::time_point(std::chrono::seconds(1'800'000'000))) {}
  [[nodiscard]] std::chrono::system_clock::time_point now() const override {
    std::lock_guard lk(mu_);
    return now_;
  }
  void advance(std::chrono::system_clock::duration d) {
    std::lock_guard lk(mu_);
    now_ += d;
  }

 private:
  mutable std::mutex mu_;
  std::chrono::system_clock::time_point now_;
};

class temp_dir {
 public:
  temp_dir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "topogate-inv-XXXXXX").string();
    path_ = ::mkdtemp(tmpl.data()) != nullptr ? tmpl : std::string();
  }
  ~temp_dir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;
  [[nodiscard]] const std::string& path() const { return path_; }
  [[nodiscard]] std::string operator/(std::string_view p) const {
    return path_ + "/" + std::string(p);
  }

 private:
  std::string path_;
};

inline void write_file(const std::string& path, std::string_view data) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return;
  std::fwrite(data.data(), 1, data.size(), f);
  std::fclose(f);
}

// Write elsewhere, then rename over: what most publishers (and `kubectl cp`, editors) do.
inline void write_atomic(const std::string& path, std::string_view data) {
  const auto tmp = path + ".tmp";
  write_file(tmp, data);
  std::rename(tmp.c_str(), path.c_str());
}

// Polls `cond` until it holds or the deadline passes: events are waited for, never slept on.
inline bool eventually(const std::function<bool()>& cond,
                       std::chrono::milliseconds deadline = std::chrono::seconds(10)) {
  const auto end = std::chrono::steady_clock::now() + deadline;
  while (std::chrono::steady_clock::now() < end) {
    if (cond()) return true;
    std::this_thread::yield();
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return cond();
}

inline std::string served_revision(const inventory* inv) {
  if (inv == nullptr) return {};
  const auto r = inv->current();
  return r ? r->revision_id : std::string();
}

}  // namespace topogate::inventory::testing

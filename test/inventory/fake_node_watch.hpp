#pragma once
// A Node watch the test drives (registry_deps.nodes): what the API's watch thread would hand
// the registry after a list or a change. node_watch_test.cpp and drift_test.cpp use it; the
// real watch against a kube-apiserver is kube_test.cpp's.

#include <atomic>
#include <functional>
#include <mutex>

#include "core/nodes.hpp"
#include "inventory/registry.hpp"
#include "test_util.hpp"

namespace topogate::inventory {

class fake_node_watch final : public node_watch {
 public:
  void start(label_filter, std::function<void(list_source)> on_change) override {
    std::lock_guard lk(mu_);
    on_change_ = std::move(on_change);
    ++starts_;
  }
  void stop() override {
    std::lock_guard lk(mu_);
    on_change_ = nullptr;
  }
  // What the watch thread does after a list or a change.
  bool deliver(core::node_list list) {
    std::function<void(list_source)> fn;
    {
      std::lock_guard lk(mu_);
      fn = on_change_;
    }
    if (!fn) return false;
    fn([l = std::make_shared<const core::node_list>(std::move(list))] { return l; });
    return true;
  }
  int starts() {
    std::lock_guard lk(mu_);
    return starts_;
  }
  // A change whose list is built only when the registry asks for it (as the real watch's
  // is): `copies` counts the lists asked for.
  bool deliver_lazily(std::function<core::node_list()> make, std::atomic<int>& copies) {
    std::function<void(list_source)> fn;
    {
      std::lock_guard lk(mu_);
      fn = on_change_;
    }
    if (!fn) return false;
    fn([make = std::move(make), &copies] {
      ++copies;
      return std::make_shared<const core::node_list>(make());
    });
    return true;
  }

 private:
  std::mutex mu_;
  std::function<void(list_source)> on_change_;
  int starts_ = 0;
};

// One inventory "dc" fed by `dir`/snapshot.json (snapshot_json("n-1", 4)), listing its Nodes
// through the API; resynced once an hour (the tests ask for what they need).
inline registry_config api_fed_config(const testing::temp_dir& dir) {
  testing::write_file(dir / "snapshot.json", testing::snapshot_json("n-1", 4));
  registry_config cfg;
  inventory_spec spec;
  spec.config = testing::config("dc");
  spec.snapshot_path = dir / "snapshot.json";
  spec.kind = source_kind::file;
  spec.nodes_from_api = true;
  cfg.inventories.push_back(std::move(spec));
  cfg.resync_interval = std::chrono::seconds(3600);
  return cfg;
}

}  // namespace topogate::inventory

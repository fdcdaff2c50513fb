#pragma once
// The admission ownership view (`admission.ownershipCheck`, off by default): on a thread of its
// own, list every TopologySource and every Node (metadata only: names and labels) from the
// Kubernetes API each interval, and publish what it read as an immutable snapshot (a
// shared_ptr swapped under a mutex held for the copy only). The TopologySource review reads the
// latest snapshot (admission/ownership.hpp) and never waits for the API: until the first list
// succeeds there is no snapshot and no ownership warning; a failed list keeps the last one.

#include <chrono>
#include <cstddef>
#include <memory>
#include <mutex>

#include "admission/ownership.hpp"
#include "core/result.hpp"
#include "inventory/registry.hpp"
#include "server/config.hpp"
#include "server/periodic.hpp"

namespace topogate::server {

// What serve() starts and stops; the admission path sees it as an admission::ownership_view.
class ownership_watch : public admission::ownership_view {
 public:
  virtual void start() = 0;
  virtual void stop() = 0;
};

// Where a snapshot comes from: the Kubernetes API (cli/ownership_kube.hpp, on kube/'s client,
// handed to serve through serve_hooks) or a test's.
class ownership_lister {
 public:
  virtual ~ownership_lister() = default;
  // Every TopologySource and Node; fails when the API refuses or has not answered by `deadline`.
  virtual core::result<admission::ownership_snapshot> list(
      std::chrono::steady_clock::time_point deadline) = 0;
  // Aborts a list in progress (from another thread); every later one fails at once.
  virtual void cancel() = 0;
};

class ownership_view_loop final : public ownership_watch {
 public:
  ownership_view_loop(ownership_check_config cfg, std::unique_ptr<ownership_lister> lister);
  ~ownership_view_loop() override;
  ownership_view_loop(const ownership_view_loop&) = delete;
  ownership_view_loop& operator=(const ownership_view_loop&) = delete;

  void start() override;  // the first list starts at once
  void stop() override;   // aborts the list in progress, returns once the thread has ended
  [[nodiscard]] std::shared_ptr<const admission::ownership_snapshot> current() const override;
  [[nodiscard]] std::size_t runs() const;  // lists finished so far (tests wait on it)

 private:
  void run_once();

  ownership_check_config cfg_;
  std::unique_ptr<ownership_lister> lister_;
  bool failing_ = false;   // the thread's own: the last list failed (logged once per change)
  mutable std::mutex mu_;  // held only to copy or swap snap_
  std::shared_ptr<const admission::ownership_snapshot> snap_;  // mu_
  periodic_thread worker_;  // last: its thread ends before the members it uses go
};

}  // namespace topogate::server

#pragma once
// The periodic audit (`audit:` in the configuration, off by default): on a thread of its
// own, list every TopologySource and ModelDeployment from the Kubernetes API and re-check
// them with the admission rules (diagnose/audit.hpp), list the Nodes' metadata for the
// ownership conflicts between writing sources, export how many objects violate each rule and
// how many conflicts there are (topogate_audit_*) and log each violating object and each
// conflict when they change.
//
// A run has one deadline (audit.timeout) that bounds every API call of it; a run the API
// does not finish in time fails, is counted and logged, and the next one starts an interval
// later. The I/O threads share nothing with the audit but the metrics registry, so a
// hanging or dead API never delays serving or admission. stop() aborts the call in progress.

#include <chrono>
#include <cstddef>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/result.hpp"
#include "core/topology_source.hpp"
#include "diagnose/audit.hpp"
#include "inventory/registry.hpp"
#include "server/config.hpp"
#include "server/periodic.hpp"

namespace topogate::server {

class metrics;

// What one run found: the report, and the resources the API does not serve (their
// CustomResourceDefinition is not installed: nothing of that kind to check, not a failure).
struct audit_outcome {
  diagnose::audit_report report;
  std::vector<std::string> not_served;  // "topologysources", "modeldeployments"
  // The API refused to list Nodes (403): the report's ownership conflicts are unknown, not none.
  bool nodes_forbidden = false;
};

// Where a run's objects come from: the Kubernetes API (cli/audit_kube.hpp, on kube/'s client,
// handed to serve through serve_hooks) or a test's.
class audit_source {
 public:
  virtual ~audit_source() = default;
  // Lists and checks every object in scope; fails when the API refuses, answers what is not a
  // list, or has not answered by `deadline`.
  virtual core::result<audit_outcome> run(std::chrono::steady_clock::time_point deadline) = 0;
  // Aborts a run in progress (from another thread); every later run fails at once.
  virtual void cancel() = 0;
};

// Remembers the rules each object violated at the last successful run, so that an object is
// logged once per change, not once per run.
class violation_memory {
 public:
  struct change {
    std::string kind, id;                           // id: NAMESPACE/NAME or NAME
    const diagnose::audited_object* now = nullptr;  // nullptr: it violates nothing any more
  };
  // The objects whose rules differ from the last report's (newly violating, other rules, or
  // no longer violating: fixed or deleted), in the report's order, the cleared ones last.
  std::vector<change> update(const diagnose::audit_report& report);

 private:
  std::map<std::string, std::string> last_;  // "KIND id" -> "T4,T9"
};

class audit_loop {
 public:
  audit_loop(audit_config cfg, std::unique_ptr<audit_source> source, metrics& m);
  ~audit_loop();
  audit_loop(const audit_loop&) = delete;
  audit_loop& operator=(const audit_loop&) = delete;

  // Creates the metrics' series and starts the thread; the first run starts at once.
  void start();
  // Aborts the run in progress and returns once the thread has ended.
  void stop();
  // Runs finished so far, successful or not (tests wait on it).
  [[nodiscard]] std::size_t runs() const;

 private:
  void run_once();

  audit_config cfg_;
  std::unique_ptr<audit_source> source_;
  metrics& metrics_;
  violation_memory memory_;                   // the thread's own
  std::vector<std::string> last_not_served_;  // the thread's own
  std::vector<std::string> last_conflicts_;   // the thread's own: described, as last logged
  bool last_nodes_forbidden_ = false;         // the thread's own
  periodic_thread worker_;                    // last: its thread ends before the members it uses go
};

}  // namespace topogate::server

#pragma once
// The Workload answer of a dry run (PUT /snapshots/{name}?dryRun=All) for an inventory with
// `workloadImpact: true`: the cluster's Nodes, Pods and Kueue objects listed from the API (a
// lister the composition root builds on kube/'s client: cli/serve.cpp), and diagnose_change
// (diagnose/change.hpp) for the candidate revision: which admitted Workloads the drain would
// evict, which the new hierarchy admits again, which stay Pending.

#include <chrono>
#include <memory>
#include <string>
#include <string_view>

#include "core/result.hpp"
#include "core/snapshot.hpp"
#include "core/topology_source.hpp"
#include "diagnose/cluster_objects.hpp"
#include "inventory/registry.hpp"
#include "server/config.hpp"
#include "server/router.hpp"

namespace topogate::server {

class cluster_lister {
 public:
  virtual ~cluster_lister() = default;
  // Every object diagnose reads; fails when the API refuses a kind it needs, or has not
  // answered by `deadline`.
  virtual core::result<diagnose::cluster_objects> list(
      std::chrono::steady_clock::time_point deadline) = 0;
};

// The "workloads" member of a dry run's answer: diagnose_change's JSON object, or
// {"error":"..."} when the objects could not be listed.
[[nodiscard]] std::string workload_answer(cluster_lister& lister, const core::topology_source& src,
                                          const core::snapshot& snap,
                                          std::chrono::milliseconds timeout);

// maxStrandedWorkloads' count for the registry (registry_deps::stranded): diagnose_change's
// `stranded` on the objects `lister` lists, its summary line in `summary`; nullopt with why
// when the lists fail or the revision does not validate against them.
[[nodiscard]] decltype(inventory::registry_deps::stranded) stranded_counter(
    cluster_lister& lister, std::chrono::milliseconds timeout);

class workload_impact final : public dry_run_answer {
 public:
  workload_impact(workload_impact_config cfg, std::unique_ptr<cluster_lister> lister,
                  const inventory::registry& reg);
  // For a dry run of an inventory with workloadImpact that produced a candidate (200, or 409
  // past maxProfileChanges); "" otherwise.
  [[nodiscard]] std::string workloads(std::string_view inventory,
                                      const inventory::push_result& r) const override;

 private:
  workload_impact_config cfg_;
  std::unique_ptr<cluster_lister> lister_;
  const inventory::registry& reg_;
};

}  // namespace topogate::server

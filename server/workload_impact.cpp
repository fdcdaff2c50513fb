#include "server/workload_impact.hpp"

#include <algorithm>

#include "core/json_writer.hpp"
#include "diagnose/change.hpp"
#include "inventory/registry.hpp"

namespace topogate::server {

std::string workload_answer(cluster_lister& lister, const core::topology_source& src,
                            const core::snapshot& snap, std::chrono::milliseconds timeout) {
  auto objects = lister.list(std::chrono::steady_clock::now() + timeout);
  if (!objects) {
    std::string out = "{\"error\":";
    core::append_json_string(
        out, "the cluster's objects could not be listed: " + objects.error().message);
    return out + "}";
  }
  auto report = diagnose::diagnose_change(*objects, src, snap);
  // What the lists left out comes first: the answer is built without it.
  report.notes.insert(report.notes.begin(), objects->list_notes.begin(), objects->list_notes.end());
  std::string out = diagnose::render_change_json(report);
  while (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

decltype(inventory::registry_deps::stranded) stranded_counter(cluster_lister& lister,
                                                              std::chrono::milliseconds timeout) {
  return [&lister, timeout](std::string_view, const core::topology_source& src,
                            const core::snapshot& snap,
                            std::string& summary) -> std::optional<std::size_t> {
    auto objects = lister.list(std::chrono::steady_clock::now() + timeout);
    if (!objects) {
      summary = "the cluster's objects could not be listed: " + objects.error().message;
      return std::nullopt;
    }
    const auto r = diagnose::diagnose_change(*objects, src, snap);
    if (!r.ok()) {
      summary = "the revision does not validate against the listed Nodes";
      return std::nullopt;
    }
    summary = diagnose::change_summary(r);
    return r.stranded;
  };
}

workload_impact::workload_impact(workload_impact_config cfg, std::unique_ptr<cluster_lister> lister,
                                 const inventory::registry& reg)
    : cfg_(std::move(cfg)), lister_(std::move(lister)), reg_(reg) {}

std::string workload_impact::workloads(std::string_view inventory,
                                       const inventory::push_result& r) const {
  using inventory::push_outcome;
  if (std::find(cfg_.inventories.begin(), cfg_.inventories.end(), inventory) ==
      cfg_.inventories.end())
    return {};
  if (!r.candidate ||
      (r.outcome != push_outcome::validated && r.outcome != push_outcome::impact_refused))
    return {};
  const inventory::inventory* inv = reg_.find(inventory);
  core::snapshot snap;
  if (inv == nullptr || !r.candidate->accepted_snapshot(snap)) return {};
  return workload_answer(*lister_, inv->config().source, snap, cfg_.timeout);
}

}  // namespace topogate::server

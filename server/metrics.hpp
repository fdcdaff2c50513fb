#pragma once
// Every metric the process exports, on one prometheus-cpp registry serialised by the
// TextSerializer into the /metrics response (no second HTTP server). Label values are
// route patterns, status codes, inventory names and fixed reasons: never a credential,
// never a raw request path.

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <utility>

#include "core/field_error.hpp"

namespace topogate::inventory {
class registry;
struct attempt;
}  // namespace topogate::inventory

namespace topogate::server {

class metrics {
 public:
  metrics();

  void observe_request(std::string_view route, int status, double seconds);
  void in_flight_add(double d) { in_flight_->Increment(d); }
  void connection_opened() { connections_->Increment(); }
  void connection_closed() { connections_->Decrement(); }
  void connection_refused() { connections_refused_->Increment(); }
  void handshake_failure(std::string_view reason);
  void auth_failure(std::string_view inventory, std::string_view reason);
  void admission_decision(std::string_view kind, std::string_view verdict);
  // A denied review: once per distinct rule among its field errors.
  void admission_denial(std::string_view kind, const core::error_list& errors);
  void reconcile_attempt(std::string_view inventory, bool accepted);
  // Profile changes a published revision made, and revisions maxProfileChanges refused.
  void profile_impact(std::string_view inventory, const inventory::attempt& a);
  // A revision refused for breaking a rule, by the rule of its first error.
  void rejection(std::string_view inventory, const inventory::attempt& a);
  void credential_reload(std::string_view kind, bool ok);
  void certificate_expiry(std::string_view certificate, double unix_seconds);

  // The periodic audit (server/audit_loop.hpp). audit_enabled() creates its series: the runs
  // counters and the last-success time at 0, and a violations gauge at 0 for every rule of
  // both kinds (T1-T14, M1-M2).
  void audit_enabled();
  void audit_failed();
  // A successful run: how many objects of each kind violate each rule ({kind, rule} ->
  // objects). Every series the run does not name is set to 0, each gauge once, so that no
  // scrape sees a value that was never the audit's result.
  void audit_succeeded(
      const std::map<std::pair<std::string, std::string>, std::size_t>& objects_by_rule,
      double unix_seconds);
  // A successful run's ownership conflicts (pairs of writing TopologySources); NaN when the
  // run could not list the Nodes (unknown, not none).
  void audit_ownership_conflicts(double pairs);

  // Where topogate_log_lines_dropped_total is read from at each scrape (serve: server/log's
  // log_lines_dropped); without it the counter stays 0.
  void log_drops_from(std::uint64_t (*dropped)() noexcept);

  // Per-inventory gauges are computed at scrape time from the registry.
  void refresh_inventories(const inventory::registry& reg);
  [[nodiscard]] std::string serialize();

  [[nodiscard]] prometheus::Registry& registry() noexcept { return *registry_; }

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Counter>* requests_;
  prometheus::Family<prometheus::Histogram>* durations_;
  prometheus::Gauge* in_flight_;
  prometheus::Gauge* connections_;
  prometheus::Counter* connections_refused_;
  prometheus::Counter* log_dropped_;
  std::mutex log_mu_;
  std::uint64_t (*log_dropped_source_)() noexcept = nullptr;  // log_mu_
  std::uint64_t log_dropped_seen_ = 0;                        // log_mu_
  prometheus::Family<prometheus::Counter>* handshake_failures_;
  prometheus::Family<prometheus::Counter>* auth_failures_;
  prometheus::Family<prometheus::Counter>* admission_;
  prometheus::Family<prometheus::Counter>* reconcile_;
  prometheus::Family<prometheus::Counter>* reloads_;
  prometheus::Family<prometheus::Gauge>* cert_expiry_;
  prometheus::Family<prometheus::Gauge>* revision_info_;
  prometheus::Family<prometheus::Gauge>* snapshot_bytes_;
  prometheus::Family<prometheus::Gauge>* snapshot_max_bytes_;
  prometheus::Family<prometheus::Gauge>* revision_age_;
  prometheus::Family<prometheus::Gauge>* inventory_ready_;
  prometheus::Family<prometheus::Gauge>* nodelabel_errors_;
  prometheus::Family<prometheus::Gauge>* nodelabel_checked_;
  prometheus::Family<prometheus::Counter>* profile_changes_;
  prometheus::Family<prometheus::Counter>* flavor_changes_;
  prometheus::Family<prometheus::Counter>* impact_refusals_;
  prometheus::Family<prometheus::Counter>* stranded_refusals_;
  prometheus::Family<prometheus::Gauge>* profiles_;
  prometheus::Family<prometheus::Counter>* rejections_;
  prometheus::Family<prometheus::Counter>* admission_denials_;
  prometheus::Family<prometheus::Gauge>* staleness_;
  prometheus::Family<prometheus::Gauge>* max_age_;
  prometheus::Family<prometheus::Gauge>* store_available_;
  prometheus::Family<prometheus::Gauge>* store_behind_;
  prometheus::Family<prometheus::Gauge>* store_synced_;
  prometheus::Family<prometheus::Gauge>* nodes_;
  prometheus::Family<prometheus::Gauge>* nodes_drifted_;
  prometheus::Family<prometheus::Gauge>* audit_violations_;
  prometheus::Family<prometheus::Gauge>* audit_last_success_;
  prometheus::Family<prometheus::Gauge>* audit_conflicts_;
  prometheus::Family<prometheus::Counter>* audit_runs_;
  std::mutex audit_mu_;
  std::map<std::pair<std::string, std::string>, prometheus::Gauge*> audit_series_;  // audit_mu_
  std::set<std::string, std::less<>> rejections_initialised_;                       // info_mu_
  std::mutex info_mu_;
  std::map<std::string, prometheus::Gauge*, std::less<>> info_by_inventory_;

  // The per-request series, looked up once per label set: Family::Add builds a label map of
  // fresh strings and hashes it on every call (a few microseconds per request). The
  // families never remove these series, so the pointers stay valid.
  struct route_series {
    prometheus::Histogram* duration = nullptr;
    std::map<int, prometheus::Counter*> by_code;
  };
  std::mutex series_mu_;
  std::map<std::string, route_series, std::less<>> by_route_;
  std::map<std::string, std::map<std::string, prometheus::Counter*, std::less<>>, std::less<>>
      by_decision_;
};

}  // namespace topogate::server

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

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

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
  void reconcile_attempt(std::string_view inventory, bool accepted);
  // Profile changes a published revision made, and revisions maxProfileChanges refused.
  void profile_impact(std::string_view inventory, const inventory::attempt& a);
  void credential_reload(std::string_view kind, bool ok);
  void certificate_expiry(std::string_view certificate, double unix_seconds);

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
  prometheus::Family<prometheus::Counter>* handshake_failures_;
  prometheus::Family<prometheus::Counter>* auth_failures_;
  prometheus::Family<prometheus::Counter>* admission_;
  prometheus::Family<prometheus::Counter>* reconcile_;
  prometheus::Family<prometheus::Counter>* reloads_;
  prometheus::Family<prometheus::Gauge>* cert_expiry_;
  prometheus::Family<prometheus::Gauge>* revision_info_;
  prometheus::Family<prometheus::Gauge>* snapshot_bytes_;
  prometheus::Family<prometheus::Gauge>* revision_age_;
  prometheus::Family<prometheus::Gauge>* inventory_ready_;
  prometheus::Family<prometheus::Gauge>* nodelabel_errors_;
  prometheus::Family<prometheus::Gauge>* nodelabel_checked_;
  prometheus::Family<prometheus::Counter>* profile_changes_;
  prometheus::Family<prometheus::Counter>* flavor_changes_;
  prometheus::Family<prometheus::Counter>* impact_refusals_;
  prometheus::Family<prometheus::Gauge>* profiles_;
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
  std::map<std::string, std::map<std::string, prometheus::Counter*, std::less<>>, std::less<>> by_decision_;
};

}  // namespace topogate::server

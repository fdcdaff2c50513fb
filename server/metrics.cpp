#include "server/metrics.hpp"

#include <prometheus/text_serializer.h>

#include <chrono>

#include "inventory/registry.hpp"

namespace topogate::server {

namespace {
// Request latency buckets from 100 µs (a cached snapshot) to 10 s (a request timeout).
const prometheus::Histogram::BucketBoundaries duration_buckets = {
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
}  // namespace

metrics::metrics() : registry_(std::make_shared<prometheus::Registry>()) {
  auto& r = *registry_;
  requests_ = &prometheus::BuildCounter()
                   .Name("topogate_http_requests_total")
                   .Help("HTTP requests answered, by route pattern and status code.")
                   .Register(r);
  durations_ = &prometheus::BuildHistogram()
                    .Name("topogate_http_request_duration_seconds")
                    .Help("Time from the end of the request header to the response being queued, by route.")
                    .Register(r);
  in_flight_ = &prometheus::BuildGauge()
                    .Name("topogate_http_requests_in_flight")
                    .Help("Requests being processed.")
                    .Register(r)
                    .Add({});
  connections_ = &prometheus::BuildGauge()
                      .Name("topogate_connections_open")
                      .Help("Open client connections.")
                      .Register(r)
                      .Add({});
  connections_refused_ = &prometheus::BuildCounter()
                              .Name("topogate_connections_refused_total")
                              .Help("Connections closed at accept because limits.maxConnections was reached.")
                              .Register(r)
                              .Add({});
  handshake_failures_ = &prometheus::BuildCounter()
                             .Name("topogate_tls_handshake_failures_total")
                             .Help("Failed TLS handshakes, by reason.")
                             .Register(r);
  auth_failures_ = &prometheus::BuildCounter()
                        .Name("topogate_auth_failures_total")
                        .Help("Refused requests, by inventory and reason (missing, wrong, untrusted_certificate, ...).")
                        .Register(r);
  admission_ = &prometheus::BuildCounter()
                    .Name("topogate_admission_decisions_total")
                    .Help("AdmissionReview answers, by kind and verdict (allowed, denied, errored).")
                    .Register(r);
  reconcile_ = &prometheus::BuildCounter()
                    .Name("topogate_reconcile_attempts_total")
                    .Help("Snapshot revisions offered to an inventory, by result (accepted, rejected).")
                    .Register(r);
  reloads_ = &prometheus::BuildCounter()
                  .Name("topogate_credential_reloads_total")
                  .Help("Re-reads of certificates, keys, client CAs and token files, by kind and result.")
                  .Register(r);
  cert_expiry_ = &prometheus::BuildGauge()
                      .Name("topogate_certificate_expiry_timestamp_seconds")
                      .Help("notAfter of each loaded certificate, as a Unix time.")
                      .Register(r);
  revision_info_ = &prometheus::BuildGauge()
                        .Name("topogate_inventory_revision_info")
                        .Help("The revision each inventory serves (value 1).")
                        .Register(r);
  snapshot_bytes_ = &prometheus::BuildGauge()
                         .Name("topogate_inventory_snapshot_bytes")
                         .Help("Size of the served JSON rendering, per inventory.")
                         .Register(r);
  revision_age_ = &prometheus::BuildGauge()
                       .Name("topogate_inventory_revision_age_seconds")
                       .Help("Seconds since the served revision was accepted, per inventory.")
                       .Register(r);
  inventory_ready_ = &prometheus::BuildGauge()
                          .Name("topogate_inventory_ready")
                          .Help("1 when the inventory can answer GET with a revision (or may start empty).")
                          .Register(r);
  profile_changes_ = &prometheus::BuildCounter()
                         .Name("topogate_inventory_profile_changes_total")
                         .Help("Nodes whose topology.gpustack.ai/profile changed or was lost in a published revision, "
                               "by trigger (file, push, store, nodes).")
                         .Register(r);
  flavor_changes_ = &prometheus::BuildCounter()
                        .Name("topogate_inventory_profile_set_changes_total")
                        .Help("Profiles (one ResourceFlavor and Topology each) that appeared or disappeared in a "
                              "published revision, by trigger and change (appeared, disappeared).")
                        .Register(r);
  impact_refusals_ = &prometheus::BuildCounter()
                         .Name("topogate_inventory_impact_refusals_total")
                         .Help("Valid revisions refused by maxProfileChanges without an accepted impact, by trigger.")
                         .Register(r);
  profiles_ = &prometheus::BuildGauge()
                  .Name("topogate_inventory_profiles")
                  .Help("Distinct profiles among the managed Nodes of the served revision.")
                  .Register(r);
  nodelabel_errors_ = &prometheus::BuildGauge()
                           .Name("topogate_nodelabel_hierarchy_errors")
                           .Help("Errors (S7-S9) of the last hierarchy check of a nodeLabels inventory's Node labels.")
                           .Register(r);
  nodelabel_checked_ = &prometheus::BuildGauge()
                            .Name("topogate_nodelabel_last_check_timestamp_seconds")
                            .Help("When a nodeLabels inventory's Node labels were last checked (a Node list change), "
                                  "as a Unix time.")
                            .Register(r);
  prometheus::BuildGauge()
      .Name("topogate_build_info")
      .Help("Build information (value 1).")
      .Register(r)
      .Add({{"version", TOPOGATE_VERSION}})
      .Set(1);
}

void metrics::observe_request(std::string_view route, int status, double seconds) {
  prometheus::Counter* counter = nullptr;
  prometheus::Histogram* duration = nullptr;
  {
    std::lock_guard lock(series_mu_);
    auto it = by_route_.find(route);
    if (it == by_route_.end()) {
      const std::string r(route);
      it = by_route_.emplace(r, route_series{&durations_->Add({{"route", r}}, duration_buckets), {}}).first;
    }
    auto& codes = it->second.by_code;
    auto c = codes.find(status);
    if (c == codes.end()) {
      c = codes.emplace(status, &requests_->Add({{"route", it->first}, {"code", std::to_string(status)}})).first;
    }
    counter = c->second;
    duration = it->second.duration;
  }
  counter->Increment();
  duration->Observe(seconds);
}

void metrics::handshake_failure(std::string_view reason) {
  handshake_failures_->Add({{"reason", std::string(reason)}}).Increment();
}

void metrics::auth_failure(std::string_view inventory, std::string_view reason) {
  auth_failures_->Add({{"inventory", std::string(inventory)}, {"reason", std::string(reason)}}).Increment();
}

void metrics::admission_decision(std::string_view kind, std::string_view verdict) {
  prometheus::Counter* counter = nullptr;
  {
    std::lock_guard lock(series_mu_);
    auto k = by_decision_.find(kind);
    if (k == by_decision_.end()) k = by_decision_.emplace(std::string(kind), decltype(k->second){}).first;
    auto v = k->second.find(verdict);
    if (v == k->second.end()) {
      v = k->second.emplace(std::string(verdict), &admission_->Add({{"kind", k->first}, {"verdict", std::string(verdict)}}))
              .first;
    }
    counter = v->second;
  }
  counter->Increment();
}

void metrics::reconcile_attempt(std::string_view inventory, bool accepted) {
  reconcile_->Add({{"inventory", std::string(inventory)}, {"result", accepted ? "accepted" : "rejected"}})
      .Increment();
}

void metrics::profile_impact(std::string_view inventory, const inventory::attempt& a) {
  if (!a.impact) return;
  // Fixed label values: the origin "file:/path" would put a path in a label.
  const std::string trigger = a.origin.starts_with("file:") ? "file"
                              : a.origin == "push" || a.origin == "store" || a.origin == "nodes"
                                  ? a.origin
                                  : "other";
  const std::string inv(inventory);
  const auto& im = *a.impact;
  if (a.impact_refused) {
    impact_refusals_->Add({{"inventory", inv}, {"trigger", trigger}}).Increment();
    return;
  }
  if (!a.accepted) return;
  profile_changes_->Add({{"inventory", inv}, {"trigger", trigger}}).Increment(static_cast<double>(im.profile_changes()));
  // The first revision a process serves has no baseline: its profiles did not "appear".
  if (im.profiles_before == 0) return;
  flavor_changes_->Add({{"inventory", inv}, {"trigger", trigger}, {"change", "appeared"}})
      .Increment(static_cast<double>(im.appeared.size()));
  flavor_changes_->Add({{"inventory", inv}, {"trigger", trigger}, {"change", "disappeared"}})
      .Increment(static_cast<double>(im.disappeared.size()));
}

void metrics::credential_reload(std::string_view kind, bool ok) {
  reloads_->Add({{"kind", std::string(kind)}, {"result", ok ? "success" : "failure"}}).Increment();
}

void metrics::certificate_expiry(std::string_view certificate, double unix_seconds) {
  cert_expiry_->Add({{"certificate", std::string(certificate)}}).Set(unix_seconds);
}

void metrics::refresh_inventories(const inventory::registry& reg) {
  const auto now = std::chrono::system_clock::now();
  std::lock_guard lock(info_mu_);
  for (const auto* inv : reg.all()) {
    const std::string& name = inv->name();
    const auto rev = inv->current();
    inventory_ready_->Add({{"inventory", name}}).Set(reg.inventory_ready(name) ? 1 : 0);
    if (const auto labels = reg.node_labels(name)) {
      nodelabel_errors_->Add({{"inventory", name}}).Set(static_cast<double>(labels->report.errors.size()));
      nodelabel_checked_->Add({{"inventory", name}})
          .Set(std::chrono::duration<double>(labels->checked_at.time_since_epoch()).count());
    }
    auto it = info_by_inventory_.find(name);
    if (it != info_by_inventory_.end()) {
      revision_info_->Remove(it->second);
      info_by_inventory_.erase(it);
    }
    if (!rev) {
      snapshot_bytes_->Add({{"inventory", name}}).Set(0);
      continue;
    }
    profiles_->Add({{"inventory", name}}).Set(rev->profiles ? static_cast<double>(rev->profiles->profiles.size()) : 0);
    auto& g = revision_info_->Add({{"inventory", name}, {"revision", rev->revision_id}, {"etag", rev->etag}});
    g.Set(1);
    info_by_inventory_.emplace(name, &g);
    snapshot_bytes_->Add({{"inventory", name}}).Set(static_cast<double>(rev->json_body.size()));
    revision_age_->Add({{"inventory", name}})
        .Set(std::chrono::duration<double>(now - rev->accepted_at).count());
  }
}

std::string metrics::serialize() {
  return prometheus::TextSerializer().Serialize(registry_->Collect());
}

}  // namespace topogate::server

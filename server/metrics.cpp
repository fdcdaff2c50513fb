#include "server/metrics.hpp"

#include <prometheus/text_serializer.h>

#include <chrono>
#include <tuple>

#include "core/rules.hpp"
#include "core/snapshot.hpp"
#include "inventory/registry.hpp"

namespace topogate::server {

namespace {
// Request latency buckets from 100 µs (a cached snapshot) to 30 s (the longest admission
// webhook timeout the apiserver allows, so an alert near any timeoutSeconds can see it).
const prometheus::Histogram::BucketBoundaries duration_buckets = {
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
    0.25,   0.5,     1,      2.5,   5,      10,    15,   20,    30};

// Rule ids are label values: only the closed set of the rule table (core/rules.hpp) passes;
// anything else is counted as "other", so a label can never carry input text.
std::string rule_label(std::string_view rule) {
  return core::find_rule(rule) != nullptr ? std::string(rule) : std::string("other");
}
}  // namespace

metrics::metrics() : registry_(std::make_shared<prometheus::Registry>()) {
  auto& r = *registry_;
  requests_ = &prometheus::BuildCounter()
                   .Name("topogate_http_requests_total")
                   .Help("HTTP requests answered, by route pattern and status code.")
                   .Register(r);
  durations_ =
      &prometheus::BuildHistogram()
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
  connections_refused_ =
      &prometheus::BuildCounter()
           .Name("topogate_connections_refused_total")
           .Help("Connections closed at accept because limits.maxConnections was reached.")
           .Register(r)
           .Add({});
  log_dropped_ =
      &prometheus::BuildCounter()
           .Name("topogate_log_lines_dropped_total")
           .Help(
               "Log lines dropped because stderr did not take them (a reader that stopped "
               "reading filled the log's queue).")
           .Register(r)
           .Add({});
  handshake_failures_ = &prometheus::BuildCounter()
                             .Name("topogate_tls_handshake_failures_total")
                             .Help("Failed TLS handshakes, by reason.")
                             .Register(r);
  auth_failures_ = &prometheus::BuildCounter()
                        .Name("topogate_auth_failures_total")
                        .Help(
                            "Refused requests, by inventory and reason (missing, wrong, "
                            "untrusted_certificate, ...).")
                        .Register(r);
  admission_ =
      &prometheus::BuildCounter()
           .Name("topogate_admission_decisions_total")
           .Help("AdmissionReview answers, by kind and verdict (allowed, denied, errored).")
           .Register(r);
  reconcile_ =
      &prometheus::BuildCounter()
           .Name("topogate_reconcile_attempts_total")
           .Help("Snapshot revisions offered to an inventory, by result (accepted, rejected).")
           .Register(r);
  reloads_ =
      &prometheus::BuildCounter()
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
                         .Help(
                             "Size of the served revision's canonical JSON rendering in bytes, "
                             "per inventory (0 while nothing is served).")
                         .Register(r);
  snapshot_max_bytes_ =
      &prometheus::BuildGauge()
           .Name("topogate_inventory_snapshot_max_bytes")
           .Help(
               "The largest snapshot an inventory may serve (S10: the consumer refuses more), in "
               "bytes: topogate_inventory_snapshot_bytes over it is the used fraction.")
           .Register(r);
  revision_age_ = &prometheus::BuildGauge()
                       .Name("topogate_inventory_revision_age_seconds")
                       .Help("Seconds since the served revision was accepted, per inventory.")
                       .Register(r);
  inventory_ready_ =
      &prometheus::BuildGauge()
           .Name("topogate_inventory_ready")
           .Help("1 when the inventory can answer GET with a revision (or may start empty).")
           .Register(r);
  profile_changes_ = &prometheus::BuildCounter()
                          .Name("topogate_inventory_profile_changes_total")
                          .Help(
                              "Nodes whose topology.gpustack.ai/profile changed or was lost in a "
                              "published revision, "
                              "by trigger (file, push, store, nodes).")
                          .Register(r);
  flavor_changes_ =
      &prometheus::BuildCounter()
           .Name("topogate_inventory_profile_set_changes_total")
           .Help(
               "Profiles (one ResourceFlavor and Topology each) that appeared or disappeared in a "
               "published revision, by trigger and change (appeared, disappeared).")
           .Register(r);
  impact_refusals_ = &prometheus::BuildCounter()
                          .Name("topogate_inventory_impact_refusals_total")
                          .Help(
                              "Valid revisions refused by maxProfileChanges without an accepted "
                              "impact, by trigger.")
                          .Register(r);
  stranded_refusals_ = &prometheus::BuildCounter()
                            .Name("topogate_inventory_stranded_refusals_total")
                            .Help(
                                "Valid pushes refused by maxStrandedWorkloads (the admitted "
                                "Workloads the change would leave Pending) without an accepted "
                                "impact.")
                            .Register(r);
  profiles_ = &prometheus::BuildGauge()
                   .Name("topogate_inventory_profiles")
                   .Help("Distinct profiles among the managed Nodes of the served revision.")
                   .Register(r);
  rejections_ =
      &prometheus::BuildCounter()
           .Name("topogate_inventory_rejections_total")
           .Help(
               "Revisions an inventory refused for breaking a rule, by the rule of the first error "
               "(S1..S10).")
           .Register(r);
  admission_denials_ =
      &prometheus::BuildCounter()
           .Name("topogate_admission_denials_total")
           .Help("Denied AdmissionReviews, by kind and rule (each distinct rule of a denial once).")
           .Register(r);
  staleness_ = &prometheus::BuildGauge()
                    .Name("topogate_inventory_staleness_seconds")
                    .Help(
                        "Seconds since the served revision was accepted or last confirmed by its "
                        "source: the "
                        "age maxAge limits.")
                    .Register(r);
  max_age_ = &prometheus::BuildGauge()
                  .Name("topogate_inventory_max_age_seconds")
                  .Help("maxAge of each inventory in seconds (0: no limit).")
                  .Register(r);
  nodes_ = &prometheus::BuildGauge()
                .Name("topogate_inventory_nodes")
                .Help("Nodes in the served revision, per inventory (after any pruning).")
                .Register(r);
  nodes_drifted_ =
      &prometheus::BuildGauge()
           .Name("topogate_inventory_nodes_drifted")
           .Help(
               "Nodes whose topology labels (the levels the consumer writes, the profile label) "
               "have differed from the served revision for at least the inventory's "
               "driftGracePeriod; only for inventories with a Node list.")
           .Register(r);
  store_available_ =
      &prometheus::BuildGauge()
           .Name("topogate_store_available")
           .Help(
               "1 when the last store call of a push-fed inventory got an answer, 0 when the store "
               "was unavailable.")
           .Register(r);
  store_behind_ = &prometheus::BuildGauge()
                       .Name("topogate_store_view_behind")
                       .Help(
                           "1 while the store holds a revision of a push-fed inventory that this "
                           "replica does not serve (it refused it here: its Node view or "
                           "configuration differs); it then answers 503 and is not ready.")
                       .Register(r);
  store_synced_ = &prometheus::BuildGauge()
                       .Name("topogate_store_last_sync_timestamp_seconds")
                       .Help(
                           "When the store last confirmed this replica's view of a push-fed "
                           "inventory (a read, a write or a watch event; a read every "
                           "resyncInterval), as Unix time.")
                       .Register(r);
  nodelabel_errors_ = &prometheus::BuildGauge()
                           .Name("topogate_nodelabel_hierarchy_errors")
                           .Help(
                               "Errors (S7-S9) of the last hierarchy check of a nodeLabels "
                               "inventory's Node labels.")
                           .Register(r);
  nodelabel_checked_ =
      &prometheus::BuildGauge()
           .Name("topogate_nodelabel_last_check_timestamp_seconds")
           .Help(
               "When a nodeLabels inventory's Node labels were last checked (a Node list change), "
               "as a Unix time.")
           .Register(r);
  audit_violations_ =
      &prometheus::BuildGauge()
           .Name("topogate_audit_violations")
           .Help(
               "Objects in the cluster that violate each rule at the last successful audit, by "
               "kind (TopologySource, ModelDeployment) and rule; 0 once none does.")
           .Register(r);
  audit_last_success_ =
      &prometheus::BuildGauge()
           .Name("topogate_audit_last_success_timestamp_seconds")
           .Help("When the periodic audit last completed, as a Unix time (0: not yet).")
           .Register(r);
  audit_conflicts_ = &prometheus::BuildGauge()
                          .Name("topogate_audit_ownership_conflicts")
                          .Help(
                              "Pairs of writing TopologySources in an ownership conflict at the "
                              "last successful audit (NaN: the Nodes could not be listed).")
                          .Register(r);
  audit_runs_ =
      &prometheus::BuildCounter()
           .Name("topogate_audit_runs_total")
           .Help(
               "Periodic audit runs, by result (success, failure: the API did not answer in time, "
               "refused or answered what is not a list).")
           .Register(r);
  // The admission series exist from the start at 0, so that the first errored review is an
  // increase an alert sees (a series born at 1 has no increase).
  for (const char* kind : {"TopologySource", "ModelDeployment", "other"}) {
    auto& by_verdict = by_decision_[kind];
    for (const char* verdict : {"allowed", "denied", "errored"}) {
      if (std::string_view(kind) == "other" && std::string_view(verdict) == "denied") continue;
      by_verdict.emplace(verdict, &admission_->Add({{"kind", kind}, {"verdict", verdict}}));
    }
  }
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
      it =
          by_route_.emplace(r, route_series{&durations_->Add({{"route", r}}, duration_buckets), {}})
              .first;
    }
    auto& codes = it->second.by_code;
    auto c = codes.find(status);
    if (c == codes.end()) {
      c = codes
              .emplace(status,
                       &requests_->Add({{"route", it->first}, {"code", std::to_string(status)}}))
              .first;
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
  auth_failures_->Add({{"inventory", std::string(inventory)}, {"reason", std::string(reason)}})
      .Increment();
}

void metrics::admission_decision(std::string_view kind, std::string_view verdict) {
  prometheus::Counter* counter = nullptr;
  {
    std::lock_guard lock(series_mu_);
    auto k = by_decision_.find(kind);
    if (k == by_decision_.end())
      k = by_decision_.emplace(std::string(kind), decltype(k->second){}).first;
    auto v = k->second.find(verdict);
    if (v == k->second.end()) {
      v = k->second
              .emplace(std::string(verdict),
                       &admission_->Add({{"kind", k->first}, {"verdict", std::string(verdict)}}))
              .first;
    }
    counter = v->second;
  }
  counter->Increment();
}

void metrics::admission_denial(std::string_view kind, const core::error_list& errors) {
  std::set<std::string> rules;
  for (const auto& e : errors) rules.insert(rule_label(e.rule));
  for (const auto& rule : rules)
    admission_denials_->Add({{"kind", std::string(kind)}, {"rule", rule}}).Increment();
}

void metrics::rejection(std::string_view inventory, const inventory::attempt& a) {
  if (a.accepted || a.errors.empty()) return;
  rejections_
      ->Add({{"inventory", std::string(inventory)}, {"rule", rule_label(a.errors.front().rule)}})
      .Increment();
}

void metrics::reconcile_attempt(std::string_view inventory, bool accepted) {
  reconcile_
      ->Add({{"inventory", std::string(inventory)}, {"result", accepted ? "accepted" : "rejected"}})
      .Increment();
}

void metrics::profile_impact(std::string_view inventory, const inventory::attempt& a) {
  if (a.stranded_refused) {
    stranded_refusals_->Add({{"inventory", std::string(inventory)}}).Increment();
    return;
  }
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
  profile_changes_->Add({{"inventory", inv}, {"trigger", trigger}})
      .Increment(static_cast<double>(im.profile_changes()));
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
    snapshot_max_bytes_->Add({{"inventory", name}})
        .Set(static_cast<double>(core::max_snapshot_bytes));
    if (const auto available = reg.store_available(name)) {
      store_available_->Add({{"inventory", name}}).Set(*available ? 1 : 0);
    }
    if (const auto view = reg.store_view(name)) {
      store_behind_->Add({{"inventory", name}}).Set(view->behind ? 1 : 0);
      if (view->synced_at) {
        store_synced_->Add({{"inventory", name}})
            .Set(std::chrono::duration<double>(view->synced_at->time_since_epoch()).count());
      }
    }
    if (const auto* src = reg.source_of(name); src && src->serves_snapshot()) {
      max_age_->Add({{"inventory", name}}).Set(static_cast<double>(inv->config().max_age.count()));
      if (rejections_initialised_.insert(name).second) {
        // Every rule a snapshot can break starts at 0, so that the first refusal after a
        // scrape is an increase Prometheus sees.
        for (const auto& rule : core::rules_of(core::rule_kind::snapshot)) {
          rejections_->Add({{"inventory", name}, {"rule", std::string(rule.id)}});
        }
        // Only file and push revisions are ever refused by maxProfileChanges.
        if (inv->config().max_profile_changes > 0) {
          for (const char* trigger : {"file", "push"})
            impact_refusals_->Add({{"inventory", name}, {"trigger", trigger}});
        }
      }
    }
    if (const auto drift = reg.node_drift(name)) {
      nodes_drifted_->Add({{"inventory", name}}).Set(static_cast<double>(drift->drifted));
    }
    if (const auto labels = reg.node_labels(name)) {
      nodelabel_errors_->Add({{"inventory", name}})
          .Set(static_cast<double>(labels->report.errors.size()));
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
      nodes_->Add({{"inventory", name}}).Set(0);
      // Nothing served, nothing stale: topogate_inventory_ready says it.
      if (const prometheus::Labels l{{"inventory", name}}; staleness_->Has(l))
        staleness_->Remove(&staleness_->Add(l));
      continue;
    }
    profiles_->Add({{"inventory", name}})
        .Set(rev->profiles ? static_cast<double>(rev->profiles->profiles.size()) : 0);
    auto& g = revision_info_->Add(
        {{"inventory", name}, {"revision", rev->revision_id}, {"etag", rev->etag}});
    g.Set(1);
    info_by_inventory_.emplace(name, &g);
    snapshot_bytes_->Add({{"inventory", name}}).Set(static_cast<double>(rev->json_text.size()));
    nodes_->Add({{"inventory", name}}).Set(static_cast<double>(rev->node_count));
    revision_age_->Add({{"inventory", name}})
        .Set(std::chrono::duration<double>(now - rev->accepted_at).count());
    staleness_->Add({{"inventory", name}})
        .Set(std::chrono::duration<double>(now - inv->confirmed_at()).count());
  }
}

void metrics::audit_enabled() {
  audit_runs_->Add({{"result", "success"}});
  audit_runs_->Add({{"result", "failure"}});
  audit_last_success_->Add({}).Set(0);
  audit_conflicts_->Add({}).Set(0);
  std::lock_guard lock(audit_mu_);
  for (const auto kind : {core::rule_kind::topology_source, core::rule_kind::model_deployment}) {
    const std::string kind_label(core::kind_name(kind));
    for (const auto& r : core::rules_of(kind)) {
      const std::string rule(r.id);
      audit_series_.emplace(std::pair{kind_label, rule},
                            &audit_violations_->Add({{"kind", kind_label}, {"rule", rule}}));
    }
  }
}

void metrics::audit_ownership_conflicts(double pairs) { audit_conflicts_->Add({}).Set(pairs); }

void metrics::audit_failed() { audit_runs_->Add({{"result", "failure"}}).Increment(); }

void metrics::audit_succeeded(
    const std::map<std::pair<std::string, std::string>, std::size_t>& objects_by_rule,
    double unix_seconds) {
  // Label values: the two kinds the audit reads, and rule ids as rule_label admits them.
  std::map<std::pair<std::string, std::string>, double> next;
  for (const auto& [key, n] : objects_by_rule) {
    const std::string kind =
        key.first == "TopologySource" || key.first == "ModelDeployment" ? key.first : "other";
    next[{kind, rule_label(key.second)}] += static_cast<double>(n);
  }
  {
    std::lock_guard lock(audit_mu_);
    for (const auto& [key, g] : audit_series_) {
      if (!next.contains(key)) g->Set(0);
    }
    for (const auto& [key, n] : next) {
      auto it = audit_series_.find(key);
      if (it == audit_series_.end()) {
        it = audit_series_
                 .emplace(key, &audit_violations_->Add({{"kind", key.first}, {"rule", key.second}}))
                 .first;
      }
      it->second->Set(n);
    }
  }
  audit_last_success_->Add({}).Set(unix_seconds);
  audit_runs_->Add({{"result", "success"}}).Increment();
}

void metrics::log_drops_from(std::uint64_t (*dropped)() noexcept) {
  std::lock_guard lock(log_mu_);
  log_dropped_source_ = dropped;
}

std::string metrics::serialize() {
  {
    std::lock_guard lock(log_mu_);
    if (log_dropped_source_ != nullptr) {
      // The log's count only grows: the counter follows it by the difference.
      const std::uint64_t now = log_dropped_source_();
      if (now > log_dropped_seen_) {
        log_dropped_->Increment(static_cast<double>(now - log_dropped_seen_));
        log_dropped_seen_ = now;
      }
    }
  }
  return prometheus::TextSerializer().Serialize(registry_->Collect());
}

}  // namespace topogate::server

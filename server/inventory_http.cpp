#include "server/inventory_http.hpp"

#include <string>

#include "core/field_error.hpp"
#include "core/k8s_status.hpp"
#include "core/profile_impact.hpp"
#include "core/snapshot_size.hpp"
#include "core/time.hpp"
#include "inventory/store.hpp"
#include "server/response.hpp"

namespace topogate::server {

namespace {

constexpr std::string_view snapshot_group = "topology.gpustack.ai";
constexpr std::string_view snapshot_kind = "Snapshot";

void add_str(std::string& out, std::string_view key, std::string_view value) {
  core::append_json_string(out, key);
  out.push_back(':');
  core::append_json_string(out, value);
}

void set_etag(response& res, const std::shared_ptr<const inventory::revision>& served) {
  if (served) res.set(http::field::etag, served->etag);
}

// The revision shown in a 200/201: the one served after the push, else the one accepted.
const inventory::revision& shown_revision(const inventory::push_result& r) {
  return r.served ? *r.served : *r.candidate;
}

// The fields every 200/201 ends with: "size", "prunedNodes", "impact", "warnings".
void append_revision_tail(std::string& out, const inventory::push_result& r, std::size_t size,
                          const std::string& size_warning) {
  out += ",\"size\":" + std::to_string(size);
  out += ",\"prunedNodes\":[";
  for (std::size_t i = 0; i < r.candidate->pruned_nodes.size(); ++i) {
    if (i != 0) out.push_back(',');
    core::append_json_string(out, r.candidate->pruned_nodes[i]);
  }
  out += "]";
  if (r.impact) out += ",\"impact\":" + core::render_impact_json(*r.impact);
  out += ",\"warnings\":[";
  if (!size_warning.empty()) core::append_json_string(out, size_warning);
  out += "]}";
}

// {"name","revision","etag","acceptedAt","size","prunedNodes","impact","warnings"}: what was
// published, and the warnings about it (the same as the Warning headers).
std::string stored_body(const inventory::push_result& r, std::string_view name,
                        const std::string& size_warning) {
  const auto& shown = shown_revision(r);
  std::string out = "{";
  add_str(out, "name", name);
  out.push_back(',');
  add_str(out, "revision", shown.revision_id);
  out.push_back(',');
  add_str(out, "etag", shown.etag);
  out.push_back(',');
  add_str(out, "acceptedAt", core::format_rfc3339_ms(r.candidate->accepted_at));
  append_revision_tail(out, r, shown.json_text.size(), size_warning);
  return out;
}

// A dry run's answer (dryRun=All): what the push would publish, nothing stored.
// {"name","dryRun":"All","revision","etag","size","prunedNodes","impact","warnings"}.
std::string dry_run_body(const inventory::push_result& r, std::string_view name,
                         const std::string& size_warning, std::string_view workloads) {
  std::string out = "{";
  add_str(out, "name", name);
  out += ",\"dryRun\":\"All\",";
  add_str(out, "revision", r.candidate->revision_id);
  out.push_back(',');
  add_str(out, "etag", r.candidate->etag);
  append_revision_tail(out, r, r.candidate->json_text.size(), size_warning);
  if (!workloads.empty()) {
    out.pop_back();
    out += ",\"workloads\":" + std::string(workloads) + "}";
  }
  return out;
}

}  // namespace

response inventory_failure(http::status status, std::string_view message, std::string_view name) {
  const core::status_details details{name, snapshot_group, snapshot_kind, nullptr};
  return error_response(status, message, &details);
}

response inventory_not_found(std::string_view name) {
  return inventory_failure(http::status::not_found,
                           "inventory \"" + std::string(name) + "\" not found", name);
}

response push_response(const inventory::push_result& r, std::string_view name,
                       std::string_view workloads) {
  using inventory::push_outcome;
  switch (r.outcome) {
    case push_outcome::created:
    case push_outcome::stored: {
      if (!r.candidate) break;  // the registry always sets it; anything else is a bug, not a 200
      // The size the consumer reads, as topogate_inventory_snapshot_bytes exports it.
      const std::string size_warning = core::snapshot_size_warning(
          shown_revision(r).json_text.size(), "the revision's canonical JSON");
      response res = json_response(
          r.outcome == push_outcome::created ? http::status::created : http::status::ok,
          stored_body(r, name, size_warning));
      set_etag(res, r.served);
      // As the Kubernetes API server warns (kubectl and client-go print it): code 299, no
      // agent, the text quoted; snapshot_size_warning writes neither quotes nor backslashes.
      if (!size_warning.empty()) res.insert(http::field::warning, "299 - \"" + size_warning + "\"");
      return res;
    }
    case push_outcome::validated: {
      if (!r.candidate) break;
      const std::string size_warning = core::snapshot_size_warning(r.candidate->json_text.size(),
                                                                   "the revision's canonical JSON");
      response res =
          json_response(http::status::ok, dry_run_body(r, name, size_warning, workloads));
      if (!size_warning.empty()) res.insert(http::field::warning, "299 - \"" + size_warning + "\"");
      return res;
    }
    case push_outcome::not_found:
      return inventory_not_found(name);
    case push_outcome::not_pushable:
      return inventory_failure(http::status::conflict, r.message, name);
    case push_outcome::too_large:
      return inventory_failure(http::status::payload_too_large, r.message, name);
    case push_outcome::invalid: {
      std::string body;
      core::append_invalid_status(body, snapshot_group, snapshot_kind, name, r.errors, true);
      return json_response(http::status::unprocessable_entity, std::move(body));
    }
    case push_outcome::precondition_failed: {
      response res = inventory_failure(http::status::precondition_failed, r.message, name);
      set_etag(res, r.served);
      return res;
    }
    case push_outcome::impact_refused: {
      // 409, not 422: the revision is valid; it conflicts with the served one under the
      // inventory's policy. A Status with the impact beside it: clients reading only the
      // Status still get the reason.
      const core::status_details details{name, snapshot_group, snapshot_kind, nullptr};
      std::string body =
          core::failure_status(409, status_reason(http::status::conflict), r.message, &details);
      body.pop_back();
      if (r.impact) body += ",\"impact\":" + core::render_impact_json(*r.impact);
      body += ",\"acceptImpact\":{\"header\":\"Topogate-Accept-Impact\",\"value\":";
      core::append_json_string(body, r.impact_baseline_etag);
      body += ",\"maxProfileChanges\":" + std::to_string(r.max_profile_changes) + "}";
      if (!workloads.empty()) body += ",\"workloads\":" + std::string(workloads);
      body += "}";
      response res = json_response(http::status::conflict, std::move(body));
      set_etag(res, r.served);
      return res;
    }
    case push_outcome::unavailable:
    case push_outcome::busy: {
      response res = inventory_failure(http::status::service_unavailable, r.message, name);
      res.set(http::field::retry_after,
              std::to_string(std::max<long long>(1, r.retry_after.count())));
      return res;
    }
  }
  return inventory_failure(http::status::internal_server_error,
                           "the push ended in an outcome without its revision", name);
}

}  // namespace topogate::server

// The JSON documents of GET /snapshots/{name}/status and /history.

#include "core/time.hpp"
#include "inventory/registry.hpp"
#include "inventory/registry_impl.hpp"

namespace topogate::inventory {

namespace {

void append_attempt(std::string& out, const attempt& a, std::size_t max_errors) {
  out.push_back('{');
  add_str(out, "time", core::format_rfc3339_ms(a.at));
  out.push_back(',');
  add_str(out, "revision", a.revision_id);
  out.push_back(',');
  add_str(out, "origin", a.origin);
  out.push_back(',');
  add_str(out, "actor", a.actor);
  out.push_back(',');
  add_str(out, "result", a.accepted ? "accepted" : "rejected");
  if (!a.etag.empty()) {
    out.push_back(',');
    add_str(out, "etag", a.etag);
  }
  if (!a.note.empty()) {
    out.push_back(',');
    add_str(out, "note", a.note);
  }
  if (a.pruned_nodes != 0) out += ",\"prunedNodes\":" + std::to_string(a.pruned_nodes);
  if (a.impact_refused) out += ",\"impactRefused\":true";
  if (a.stranded_workloads)
    out += ",\"strandedWorkloads\":" + std::to_string(*a.stranded_workloads);
  if (a.stranded_refused) out += ",\"strandedRefused\":true";
  if (a.impact) {
    out += ",\"impact\":";
    out += core::render_impact_json(*a.impact, max_errors);
  }
  out += ",\"errorCount\":" + std::to_string(a.errors.size());
  if (!a.errors.empty()) {
    std::set<std::string> rules;
    for (const auto& e : a.errors) rules.insert(e.rule);
    out += ",\"rules\":[";
    bool first = true;
    for (const auto& r : rules) {
      if (!first) out.push_back(',');
      first = false;
      core::append_json_string(out, r);
    }
    out += "],\"errors\":";
    if (a.errors.size() > max_errors) {
      core::error_list head(a.errors.begin(),
                            a.errors.begin() + static_cast<std::ptrdiff_t>(max_errors));
      out += core::render_json(head);
    } else {
      out += core::render_json(a.errors);
    }
  }
  out.push_back('}');
}

}  // namespace

namespace {

// The last label-drift check (drift.hpp): null before the first one or without a Node list.
void append_drift(std::string& out, const drift_report* d) {
  if (d == nullptr) {
    out += "null";
    return;
  }
  out += "{";
  add_str(out, "checkedAt", core::format_rfc3339_ms(d->checked_at));
  out += ",\"graceSeconds\":" + std::to_string(d->grace.count());
  out += ",\"mismatched\":" + std::to_string(d->mismatched);
  out += ",\"drifted\":" + std::to_string(d->drifted);
  out += ",\"nodes\":[";
  for (std::size_t i = 0; i < d->nodes.size(); ++i) {
    const auto& n = d->nodes[i];
    if (i != 0) out.push_back(',');
    out.push_back('{');
    add_str(out, "name", n.drift.node);
    out.push_back(',');
    add_str(out, "since", core::format_rfc3339_ms(n.since));
    out += ",\"labels\":[";
    for (std::size_t j = 0; j < n.drift.labels.size(); ++j) {
      const auto& l = n.drift.labels[j];
      if (j != 0) out.push_back(',');
      out.push_back('{');
      add_str(out, "key", l.key);
      out.push_back(',');
      add_str(out, "want", l.want);
      out += ",\"have\":";
      if (l.present) {
        core::append_json_string(out, l.have);
      } else {
        out += "null";
      }
      out.push_back('}');
    }
    out += "]}";
  }
  out += "]";
  if (d->drifted > d->nodes.size())
    out += ",\"notListed\":" + std::to_string(d->drifted - d->nodes.size());
  out.push_back('}');
}

}  // namespace

std::optional<std::string> registry::status_json(std::string_view name) const {
  const auto& m = *impl_;
  auto* e = m.find(name);
  if (e == nullptr) return std::nullopt;
  if (e->src->checks_node_labels()) return node_label_status(name);
  const auto& inv = *e->inv;
  const auto decision = inv.serve();
  const auto cur = inv.current();
  const auto now = m.clk.now();
  std::string out = "{";
  add_str(out, "name", name);
  const auto ready = inventory_ready(name);
  out += ",\"ready\":";
  out += ready ? "true" : "false";
  if (!ready) {
    out.push_back(',');
    add_str(out, "notReadyReason", ready.error().message);
  }
  out += ",\"serving\":";
  out += decision.rev ? "true" : "false";
  if (!decision.rev) {
    out.push_back(',');
    add_str(out, "unavailableReason", decision.unavailable_reason);
  }
  out += ",\"served\":";
  if (cur) {
    out.push_back('{');
    add_str(out, "revision", cur->revision_id);
    out.push_back(',');
    add_str(out, "etag", cur->etag);
    out.push_back(',');
    add_str(out, "acceptedAt", core::format_rfc3339_ms(cur->accepted_at));
    out.push_back(',');
    add_str(out, "confirmedAt", core::format_rfc3339_ms(inv.confirmed_at()));
    char age[32];
    std::snprintf(age, sizeof age, "%.3f",
                  std::chrono::duration<double>(now - inv.confirmed_at()).count());
    out += ",\"ageSeconds\":";
    out += age;
    out.push_back(',');
    add_str(out, "origin", cur->origin);
    out.push_back(',');
    add_str(out, "actor", cur->actor);
    out += ",\"size\":" + std::to_string(cur->json_text.size());
    out += ",\"nodes\":" + std::to_string(cur->node_count);
    out += ",\"prunedNodes\":[";
    for (std::size_t i = 0; i < cur->pruned_nodes.size(); ++i) {
      if (i != 0) out.push_back(',');
      core::append_json_string(out, cur->pruned_nodes[i]);
    }
    out += "]}";
  } else {
    out += "null";
  }
  out += ",\"lastAttempt\":";
  if (const auto last = inv.last_attempt()) {
    append_attempt(out, *last, 1000);
  } else {
    out += "null";
  }
  const auto& cfg = inv.config();
  out += ",\"maxAgeSeconds\":" + std::to_string(cfg.max_age.count());
  out += ",\"maxProfileChanges\":" + std::to_string(cfg.max_profile_changes);
  if (const auto refusal = inv.impact_refusal(); !refusal.empty()) {
    out.push_back(',');
    add_str(out, "impactRefusal", refusal);
  }
  out.push_back(',');
  add_str(out, "unknownNodes",
          cfg.unknown_nodes == unknown_nodes_policy::prune ? "prune" : "reject");
  out += ",\"nodes\":{";
  const auto count = inv.selected_node_count();
  out += "\"known\":";
  out += count ? "true" : "false";
  if (count) out += ",\"selected\":" + std::to_string(*count);
  out.push_back(',');
  add_str(out, "source",
          !e->spec.nodes_path.empty() ? "file:" + e->spec.nodes_path
          : e->spec.nodes_from_api    ? std::string("kubernetes")
                                      : std::string("none"));
  out += "},\"drift\":";
  append_drift(out, node_drift(name).get());
  out.push_back(',');
  add_str(out, "input", e->src->input(m.store.get()));
  out.push_back('}');
  return out;
}

std::optional<std::string> registry::history_json(std::string_view name) const {
  const auto& m = *impl_;
  auto* e = m.find(name);
  if (e == nullptr) return std::nullopt;
  std::vector<attempt> hist;
  if (const auto* labels = e->src->as_node_labels()) {
    hist = labels->history();
  } else {
    hist = e->inv->history();
  }
  std::string out = "{";
  add_str(out, "name", name);
  out += ",\"items\":[";
  // Newest first, as people read a history.
  for (auto it = hist.rbegin(); it != hist.rend(); ++it) {
    if (it != hist.rbegin()) out.push_back(',');
    append_attempt(out, *it, 20);
  }
  out += "]}";
  return out;
}

}  // namespace topogate::inventory

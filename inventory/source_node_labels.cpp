// The nodeLabels source: each Node list's hierarchy check, its history, its log line and its
// status document.

#include "inventory/source_node_labels.hpp"

#include "core/time.hpp"
#include "inventory/registry_impl.hpp"

namespace topogate::inventory {

std::string node_labels_source::push_refusal(std::string_view name) const {
  // T7: a nodeLabels source is read-only; the Nodes' labels are its only input.
  return "inventory \"" + std::string(name) +
         "\" reads Node labels (nodeLabels source): there is no snapshot to push";
}

std::string node_labels_source::input(const revision_store* /*store*/) const {
  return "nodeLabels";
}

node_labels_source::recorded node_labels_source::record(const core::topology_source& src,
                                                        const core::node_list& nodes,
                                                        std::chrono::system_clock::time_point at,
                                                        std::string nodes_origin,
                                                        std::size_t history_size) {
  auto c = std::make_shared<node_label_check>();
  c->report = core::check_node_labels(src, nodes);
  c->checked_at = at;
  c->nodes_origin = std::move(nodes_origin);
  attempt a;
  a.at = c->checked_at;
  a.origin = "nodes:" + c->nodes_origin;
  a.accepted = c->report.ok();
  a.errors = c->report.errors;
  std::lock_guard lk(mu_);
  c->checks = (latest_ ? latest_->checks : 0) + 1;
  a.revision_id = "node-labels-" + std::to_string(c->checks);
  a.note = summarize(*c);
  latest_ = c;
  history_.push_back(a);
  const std::size_t keep = std::max<std::size_t>(history_size, 1);
  if (history_.size() > keep)
    history_.erase(history_.begin(), history_.end() - static_cast<std::ptrdiff_t>(keep));
  return {std::move(c), std::move(a)};
}

std::shared_ptr<const node_label_check> node_labels_source::latest() const {
  std::lock_guard lk(mu_);
  return latest_;
}

std::vector<attempt> node_labels_source::history() const {
  std::lock_guard lk(mu_);
  return history_;
}

void registry::impl::check_node_labels(entry& e) {
  if (!e.nodes) return;
  auto* nl = e.src->as_node_labels();
  if (nl == nullptr) return;
  const auto [c, a] = nl->record(e.spec.config.source, *e.nodes, clk.now(), nodes_origin(e),
                                 e.spec.config.history_size);
  std::string msg =
      "node-label hierarchy check " + std::to_string(c->checks) + " (" + a.origin + "): " + a.note;
  if (!a.errors.empty()) {
    // A whole cluster mislabelled is thousands of errors: the log names the first ones;
    // /snapshots/{name}/status has every one.
    constexpr std::size_t shown = 20;
    core::error_list head(a.errors.begin(), a.errors.begin() + static_cast<std::ptrdiff_t>(std::min(
                                                                   shown, a.errors.size())));
    std::string listed = core::render_text(head);
    while (!listed.empty() && listed.back() == '\n') listed.pop_back();
    msg += ": " + listed;
    if (a.errors.size() > shown)
      msg += " ... and " + std::to_string(a.errors.size() - shown) + " more";
  }
  log(a.accepted ? "info" : "warn", e.inv->name(), msg);
}

std::string registry::node_label_status(std::string_view name) const {
  const auto& m = *impl_;
  const auto* e = m.find(name);
  const auto c = e->src->as_node_labels()->latest();
  std::string out = "{";
  add_str(out, "name", name);
  out.push_back(',');
  add_str(out, "provider", "nodeLabels");
  out += ",\"ready\":";
  out += inventory_ready(name).ok() ? "true" : "false";
  out += ",\"serving\":false,";
  add_str(out, "unavailableReason",
          "a nodeLabels source is read from the Nodes' labels; topogate serves no snapshot for it");
  out.push_back(',');
  add_str(out, "nodesSource", m.nodes_origin(*e));
  out += ",\"checked\":";
  out += c ? "true" : "false";
  if (c) {
    out += ",\"valid\":";
    out += c->report.ok() ? "true" : "false";
    out.push_back(',');
    add_str(out, "checkedAt", core::format_rfc3339_ms(c->checked_at));
    out += ",\"checks\":" + std::to_string(c->checks);
    out.push_back(',');
    add_str(out, "summary", summarize(*c));
    out += ",\"report\":";
    out += core::render_node_label_report_json(c->report);
  }
  out.push_back('}');
  return out;
}

std::string summarize(const node_label_check& c) {
  const auto& r = c.report;
  std::string out;
  if (r.ok()) {
    out = "valid: ";
  } else {
    std::set<std::string> rules;
    for (const auto& e : r.errors) rules.insert(e.rule);
    out = std::to_string(r.errors.size()) + (r.errors.size() == 1 ? " error (" : " errors (");
    bool first = true;
    for (const auto& rule : rules) {
      if (!first) out += ", ";
      first = false;
      out += rule;
    }
    out += "): the Nodes' labels do not form the declared hierarchy; ";
  }
  out += std::to_string(r.selected_nodes) + " of " + std::to_string(r.total_nodes) +
         " Nodes selected, " + std::to_string(r.profiles.size()) +
         (r.profiles.size() == 1 ? " profile" : " profiles");
  for (const auto& l : r.levels) {
    if (l.verdict == core::nesting::independent)
      out += "; " + l.key + " is independent of the level above";
  }
  return out;
}

}  // namespace topogate::inventory

#include "server/audit_loop.hpp"

#include <algorithm>
#include <exception>
#include <limits>
#include <utility>

#include "core/ownership.hpp"
#include "server/log.hpp"
#include "server/metrics.hpp"

namespace topogate::server {

namespace {

// A log line names the object's rules and its errors (the core redacts credentials in the
// values it shows); a very broken object is summarised rather than logged whole.
constexpr std::size_t max_logged_errors = 8;

std::string join_rules(const std::vector<std::string>& rules) {
  std::string out;
  for (const auto& r : rules) {
    if (!out.empty()) out += ',';
    out += r.empty() ? "-" : r;
  }
  return out;
}

std::string logged_errors(const core::error_list& errors) {
  std::string out;
  for (std::size_t i = 0; i < errors.size() && i < max_logged_errors; ++i) {
    if (i > 0) out += "; ";
    if (!errors[i].rule.empty()) out += "[" + errors[i].rule + "] ";
    errors[i].append_to(out);
  }
  if (errors.size() > max_logged_errors) {
    out += "; and " + std::to_string(errors.size() - max_logged_errors) + " more";
  }
  return out;
}

double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

std::vector<violation_memory::change> violation_memory::update(
    const diagnose::audit_report& report) {
  std::vector<change> out;
  std::map<std::string, std::string> now;
  for (const auto& o : report.violating) {
    std::string key = o.kind + " " + o.id();
    std::string rules = join_rules(o.rules());
    const auto it = last_.find(key);
    if (it == last_.end() || it->second != rules) out.push_back({o.kind, o.id(), &o});
    now.emplace(std::move(key), std::move(rules));
  }
  for (const auto& [key, rules] : last_) {
    if (now.contains(key)) continue;
    const auto space = key.find(' ');
    out.push_back({key.substr(0, space), key.substr(space + 1), nullptr});
  }
  last_ = std::move(now);
  return out;
}

audit_loop::audit_loop(audit_config cfg, std::unique_ptr<audit_source> source, metrics& m)
    : cfg_(std::move(cfg)), source_(std::move(source)), metrics_(m) {}

audit_loop::~audit_loop() { stop(); }

void audit_loop::start() {
  if (worker_.started()) return;
  metrics_.audit_enabled();
  log(log_level::info, "audit: started",
      {{"component", "audit"},
       {"interval_s", std::chrono::duration<double>(cfg_.interval).count()},
       {"timeout_s", std::chrono::duration<double>(cfg_.timeout).count()},
       {"namespaces", cfg_.namespaces.empty() ? std::string("all") : join_rules(cfg_.namespaces)}});
  worker_.start(cfg_.interval, [this] { run_once(); });
}

void audit_loop::stop() {
  worker_.stop([this] { source_->cancel(); });
}

std::size_t audit_loop::runs() const { return worker_.runs(); }

void audit_loop::run_once() {
  const auto started = std::chrono::steady_clock::now();
  core::result<audit_outcome> r = core::fail(core::errc::internal, "no run");
  try {
    r = source_->run(started + cfg_.timeout);
  } catch (const std::exception& e) {
    r = core::fail(core::errc::internal, std::string("audit run failed: ") + e.what());
  }
  // Cut short by stop(): the shutdown's doing, not the API's.
  if (worker_.stopping()) return;
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  if (!r) {
    metrics_.audit_failed();
    // The client's messages name the call and the failure, never a credential.
    log(log_level::warn, "audit: run failed",
        {{"component", "audit"}, {"error", r.error().message}, {"duration_s", seconds}});
    return;
  }
  const auto& report = r->report;
  if (r->not_served != last_not_served_) {
    for (const auto& what : r->not_served) {
      log(log_level::info, "audit: the API serves no " + what + ".worker.gpustack.ai; none checked",
          {{"component", "audit"}});
    }
    last_not_served_ = r->not_served;
  }
  metrics_.audit_succeeded(report.objects_by_rule(), unix_now());
  if (r->nodes_forbidden != last_nodes_forbidden_) {
    log(r->nodes_forbidden ? log_level::warn : log_level::info,
        r->nodes_forbidden
            ? "audit: the API refuses to list nodes; ownership conflicts not checked "
              "(topogate's ServiceAccount needs list on nodes)"
            : "audit: nodes listed again; ownership conflicts checked",
        {{"component", "audit"}});
    last_nodes_forbidden_ = r->nodes_forbidden;
  }
  metrics_.audit_ownership_conflicts(r->nodes_forbidden
                                         ? std::numeric_limits<double>::quiet_NaN()
                                         : static_cast<double>(report.conflicts.size()));
  std::vector<std::string> conflicts;
  for (const auto& c : report.conflicts) conflicts.push_back(core::describe(c));
  if (!r->nodes_forbidden && conflicts != last_conflicts_) {
    for (const auto& c : conflicts)
      if (std::find(last_conflicts_.begin(), last_conflicts_.end(), c) == last_conflicts_.end())
        log(log_level::warn, "audit: ownership conflict",
            {{"component", "audit"}, {"conflict", c}});
    if (conflicts.empty())
      log(log_level::info, "audit: no ownership conflict any more", {{"component", "audit"}});
    last_conflicts_ = std::move(conflicts);
  }
  for (const auto& c : memory_.update(report)) {
    if (c.now == nullptr) {
      log(log_level::info, "audit: object no longer violates any rule (fixed or deleted)",
          {{"component", "audit"}, {"kind", c.kind}, {"object", c.id}});
      continue;
    }
    log(log_level::warn, "audit: object violates rules",
        {{"component", "audit"},
         {"kind", c.kind},
         {"object", c.id},
         {"rules", join_rules(c.now->rules())},
         {"errors", logged_errors(c.now->errors)}});
  }
  log(log_level::debug, "audit: run complete",
      {{"component", "audit"},
       {"checked", report.checked()},
       {"violating", report.violating.size()},
       {"duration_s", seconds}});
}

}  // namespace topogate::server

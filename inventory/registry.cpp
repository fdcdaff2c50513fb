#include "inventory/registry.hpp"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "core/profile_impact.hpp"
#include "core/snapshot.hpp"
#include "inventory/file_source.hpp"
#include "inventory/kube.hpp"
#include "inventory/store.hpp"

namespace topogate::inventory {

namespace {

using steady = std::chrono::steady_clock;

// Events arrive in bursts (a rename is IN_MOVED_FROM + IN_MOVED_TO; a ConfigMap update is
// a dozen entries): re-read once the burst is over.
constexpr auto debounce = std::chrono::milliseconds(10);
// A file that does not validate is read again after this, and only reported when it reads
// the same: a writer still rewriting the file in place is not worth a rejection.
constexpr auto settle = std::chrono::milliseconds(100);
// kubectl get nodes -o json for thousands of Nodes runs to tens of MiB.
constexpr std::size_t max_node_list_bytes = 256u << 20;

std::string_view cause_type(core::error_type t) {
  // apimachinery's field.ErrorType values, which a StatusCause carries as its reason.
  switch (t) {
    case core::error_type::required: return "FieldValueRequired";
    case core::error_type::invalid: return "FieldValueInvalid";
    case core::error_type::forbidden: return "FieldValueForbidden";
    case core::error_type::duplicate: return "FieldValueDuplicate";
    case core::error_type::too_many: return "FieldValueTooMany";
    case core::error_type::not_supported: return "FieldValueNotSupported";
    case core::error_type::too_long: return "FieldValueTooLong";
    case core::error_type::not_found: return "FieldValueNotFound";
  }
  return "FieldValueInvalid";
}

void add_str(std::string& out, std::string_view key, std::string_view value) {
  core::append_json_string(out, key);
  out.push_back(':');
  core::append_json_string(out, value);
}

std::string status_json(int code, std::string_view reason, std::string_view message, std::string_view name,
                        const core::error_list* causes = nullptr) {
  std::string out = R"({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",)";
  add_str(out, "message", message);
  out.push_back(',');
  add_str(out, "reason", reason);
  out += R"(,"details":{)";
  add_str(out, "name", name);
  out += R"(,"group":"topology.gpustack.ai","kind":"Snapshot")";
  if (causes != nullptr) {
    out += R"(,"causes":[)";
    bool first = true;
    for (const auto& e : *causes) {
      if (!first) out.push_back(',');
      first = false;
      out.push_back('{');
      add_str(out, "reason", cause_type(e.type));
      out.push_back(',');
      std::string msg = e.to_string();
      if (msg.starts_with(e.path + ": ")) msg.erase(0, e.path.size() + 2);
      add_str(out, "message", msg);
      out.push_back(',');
      add_str(out, "field", e.path);
      out.push_back(',');
      add_str(out, "rule", e.rule);
      out.push_back(',');
      add_str(out, "type", core::to_string(e.type));
      out.push_back('}');
    }
    out.push_back(']');
  }
  out += R"(},"code":)";
  out += std::to_string(code);
  out.push_back('}');
  return out;
}

http_answer status_answer(int code, std::string_view reason, std::string_view message, std::string_view name,
                          const core::error_list* causes = nullptr) {
  http_answer a;
  a.status = code;
  a.body = status_json(code, reason, message, name, causes);
  return a;
}

std::string invalid_message(std::string_view name, const core::error_list& errors) {
  // apimachinery's NewInvalid: `<Kind> "<name>" is invalid: [e1, e2]`.
  std::string m = "Snapshot \"" + std::string(name) + "\" is invalid: ";
  if (errors.size() != 1) m.push_back('[');
  for (std::size_t i = 0; i < errors.size(); ++i) {
    if (i != 0) m += ", ";
    m += errors[i].to_string();
  }
  if (errors.size() != 1) m.push_back(']');
  return m;
}

void append_attempt(std::string& out, const attempt& a, std::size_t max_errors) {
  out.push_back('{');
  add_str(out, "time", detail::format_time(a.at));
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
      core::error_list head(a.errors.begin(), a.errors.begin() + static_cast<std::ptrdiff_t>(max_errors));
      out += core::render_json(head);
    } else {
      out += core::render_json(a.errors);
    }
  }
  out.push_back('}');
}

// Building a revision from a 1 MiB snapshot leaves a few MiB of freed short strings (the
// decoded snapshot, the pruned copy) interleaved with what the revision keeps. Handing them
// back after each reload measured 2.5 MiB of 60 MiB right after loading 16 inventories of
// 1 MiB (bench/README.md); reloads are rare, so the heap walk is cheap where it happens.
using detail::release_freed_memory;

bool same_nodes(const core::node_list& a, const core::node_list& b) {
  if (a.nodes.size() != b.nodes.size()) return false;
  for (std::size_t i = 0; i < a.nodes.size(); ++i) {
    if (a.nodes[i].name != b.nodes[i].name || a.nodes[i].labels != b.nodes[i].labels) return false;
  }
  return true;
}

}  // namespace

struct registry::impl {
  struct entry {
    inventory_spec spec;
    std::unique_ptr<inventory> inv;
    std::mutex write_mu;  // one writer at a time per inventory: prepare -> persist -> commit

    // Snapshot file source (loop thread only).
    std::string snap_digest;
    std::uint64_t snap_generation = ~std::uint64_t{0};
    bool snap_ok = false;
    std::string snap_etag;
    std::string snap_error;
    std::string pending_invalid_digest;
    // Node-list file (loop thread only).
    std::string nodes_digest;
    std::string nodes_error;
    // Last Node list handed to the inventory (write_mu).
    std::optional<core::node_list> nodes;
    // Store bookkeeping (write_mu).
    std::string store_version;
    std::optional<detail::stored_revision> pending_store;  // rejected at load; retried on Node changes
    // nodeLabels inventories: the last hierarchy check and the checks' history (label_mu).
    mutable std::mutex label_mu;
    std::shared_ptr<const node_label_check> labels;
    std::vector<attempt> label_history;  // newest last
  };

  registry_config cfg;
  const clock& clk;
  registry_observer obs;
  std::vector<std::unique_ptr<entry>> entries;

  std::unique_ptr<detail::revision_store> store;
  std::string store_error;
  std::unique_ptr<detail::node_watch> nodes_api;

  std::thread loop;
  int wake_fd = -1;
  std::atomic<bool> stopping{false};
  std::atomic<bool> resync_requested{false};
  std::atomic<bool> started{false};
  detail::dir_watcher watcher;

  impl(registry_config c, const clock& k, registry_observer o) : cfg(std::move(c)), clk(k), obs(std::move(o)) {
    for (auto& spec : cfg.inventories) {
      auto e = std::make_unique<entry>();
      e->inv = std::make_unique<inventory>(spec.config, clk);
      e->spec = std::move(spec);
      entries.push_back(std::move(e));
    }
    cfg.inventories.clear();
    wake_fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  }

  ~impl() {
    if (wake_fd >= 0) ::close(wake_fd);
  }

  entry* find(std::string_view name) const {
    for (const auto& e : entries) {
      if (e->inv->name() == name) return e.get();
    }
    return nullptr;
  }

  void log(std::string_view level, std::string_view inv, std::string_view message) const {
    if (obs.on_log) {
      obs.on_log(level, inv, message);
      return;
    }
    std::string line = "{";
    add_str(line, "time", detail::format_time(std::chrono::system_clock::now()));
    line.push_back(',');
    add_str(line, "level", level);
    line.push_back(',');
    add_str(line, "component", "inventory");
    if (!inv.empty()) {
      line.push_back(',');
      add_str(line, "inventory", inv);
    }
    line.push_back(',');
    add_str(line, "msg", message);
    line += "}\n";
    std::fwrite(line.data(), 1, line.size(), stderr);
  }

  // Reports the attempts recorded since `before` to the observer and the log.
  void report(entry& e, std::uint64_t before) const {
    const auto now_count = e.inv->attempts_recorded();
    if (now_count <= before) return;
    const auto hist = e.inv->history();
    const auto n = std::min<std::uint64_t>(now_count - before, hist.size());
    for (auto i = hist.size() - n; i < hist.size(); ++i) {
      const auto& a = hist[i];
      if (obs.on_attempt) obs.on_attempt(e.inv->name(), a);
      std::string msg = a.accepted ? "accepted revision " + a.revision_id + " " + a.etag
                                   : "rejected " + (a.revision_id.empty() ? std::string("input") : a.revision_id);
      msg += " from " + a.origin;
      if (!a.note.empty()) msg += ": " + a.note;
      if (a.impact && !a.impact->empty() && !a.impact_refused) msg += " (" + core::summarize_impact(*a.impact) + ")";
      if (!a.errors.empty()) msg += ": " + core::render_text(a.errors);
      log(a.accepted ? (a.note.empty() ? "info" : "warn") : "warn", e.inv->name(), msg);
    }
  }

  void wake() const {
    if (wake_fd < 0) return;
    const std::uint64_t one = 1;
    [[maybe_unused]] const auto n = ::write(wake_fd, &one, sizeof one);
  }

  // --- Node lists -------------------------------------------------------------------------

  void apply_nodes(entry& e, std::optional<core::node_list> list) {
    std::optional<detail::stored_revision> retry;
    {
      std::lock_guard lk(e.write_mu);
      if (e.nodes.has_value() == list.has_value() && (!list || same_nodes(*e.nodes, *list))) return;
      e.nodes = list;
      const auto before = e.inv->attempts_recorded();
      e.inv->set_nodes(std::move(list));
      release_freed_memory();
      report(e, before);
      if (e.spec.config.source.node_labels) check_node_labels(e);
      retry = e.pending_store;
      if (!e.spec.snapshot_path.empty() && !e.snap_ok) {
        // The file was rejected against the old Node list (say, it names a Node that did
        // not exist yet): read it again against the new one.
        resync_requested = true;
        wake();
      }
    }
    // Likewise a stored revision that did not validate when it was loaded.
    if (retry) offer_from_store(e, *retry, true);
  }

  std::string nodes_origin(const entry& e) const {
    return !e.spec.nodes_path.empty() ? "file:" + e.spec.nodes_path : std::string("kubernetes");
  }

  // nodeLabels: the Nodes' own labels are the input, checked again on every Node list
  // change (write_mu held). The consumer reads those labels itself; this only tells what it
  // will find.
  void check_node_labels(entry& e) {
    if (!e.nodes) return;
    auto c = std::make_shared<node_label_check>();
    c->report = core::check_node_labels(e.spec.config.source, *e.nodes);
    c->checked_at = clk.now();
    c->nodes_origin = nodes_origin(e);
    attempt a;
    a.at = c->checked_at;
    a.origin = "nodes:" + c->nodes_origin;
    a.accepted = c->report.ok();
    a.errors = c->report.errors;
    {
      std::lock_guard lk(e.label_mu);
      c->checks = (e.labels ? e.labels->checks : 0) + 1;
      a.revision_id = "node-labels-" + std::to_string(c->checks);
      a.note = summarize(*c);
      e.labels = c;
      e.label_history.push_back(a);
      const std::size_t keep = std::max<std::size_t>(e.spec.config.history_size, 1);
      if (e.label_history.size() > keep)
        e.label_history.erase(e.label_history.begin(),
                              e.label_history.end() - static_cast<std::ptrdiff_t>(keep));
    }
    std::string msg = "node-label hierarchy check " + std::to_string(c->checks) + " (" + a.origin + "): " + a.note;
    if (!a.errors.empty()) {
      // A whole cluster mislabelled is thousands of errors: the log names the first ones;
      // /snapshots/{name}/status has every one.
      constexpr std::size_t shown = 20;
      core::error_list head(a.errors.begin(), a.errors.begin() + static_cast<std::ptrdiff_t>(std::min(shown, a.errors.size())));
      std::string listed = core::render_text(head);
      while (!listed.empty() && listed.back() == '\n') listed.pop_back();
      msg += ": " + listed;
      if (a.errors.size() > shown) msg += " ... and " + std::to_string(a.errors.size() - shown) + " more";
    }
    log(a.accepted ? "info" : "warn", e.inv->name(), msg);
  }

  std::shared_ptr<const node_label_check> labels_of(const entry& e) const {
    std::lock_guard lk(e.label_mu);
    return e.labels;
  }

  void check_nodes_file(entry& e) {
    if (e.spec.nodes_path.empty()) return;
    auto r = detail::read_stable(e.spec.nodes_path, max_node_list_bytes);
    if (!r.ok) {
      // A Node list that cannot be read keeps the last one: Nodes did not vanish because a
      // file did.
      if (r.error != e.nodes_error) log("warn", e.inv->name(), "node list: " + r.error + " (keeping the last list)");
      e.nodes_error = r.error;
      return;
    }
    auto digest = detail::sha256_hex(r.bytes);
    if (digest == e.nodes_digest) return;
    auto parsed = core::parse_node_list(r.bytes);
    if (!parsed.ok()) {
      const auto err = "node list " + e.spec.nodes_path + " is invalid (keeping the last list): " +
                       core::render_text(parsed.errors);
      if (err != e.nodes_error) log("warn", e.inv->name(), err);
      e.nodes_error = err;
      return;
    }
    e.nodes_error.clear();
    e.nodes_digest = std::move(digest);
    apply_nodes(e, std::move(parsed.list));
  }

  // --- Snapshot file sources ----------------------------------------------------------------

  // Returns true when the file should be looked at again after `settle`.
  bool check_snapshot_file(entry& e, bool confirm_invalid) {
    if (e.spec.snapshot_path.empty()) return false;
    auto r = detail::read_source(e.spec.snapshot_path, e.inv->name(), core::max_snapshot_bytes);
    const inventory::offer_options opts{"file:" + (r.resolved_path.empty() ? e.spec.snapshot_path : r.resolved_path),
                                        "", std::nullopt, std::nullopt};
    std::lock_guard lk(e.write_mu);
    if (!r.ok) {
      if (r.error != e.snap_error) {
        const auto before = e.inv->attempts_recorded();
        e.inv->record_failure(opts, r.error + " (keeping the last valid revision)");
        report(e, before);
      }
      e.snap_error = r.error;
      e.snap_digest.clear();
      e.snap_ok = false;
      return false;
    }
    e.snap_error.clear();
    auto digest = detail::sha256_hex(r.bytes);
    const auto generation = e.inv->nodes_generation();
    if (digest == e.snap_digest && (e.snap_ok || generation == e.snap_generation)) {
      // Unchanged and still what the source says: the served revision is fresh. A Node
      // change was already applied to it by set_nodes().
      if (e.snap_ok) e.inv->confirm(e.snap_etag);
      e.snap_generation = generation;
      return false;
    }
    const auto before = e.inv->attempts_recorded();
    auto p = e.inv->prepare(r.bytes, opts);
    if (!p.candidate) {
      if (!confirm_invalid && digest != e.pending_invalid_digest) {
        e.pending_invalid_digest = digest;
        return true;
      }
      e.inv->record_rejection(p, opts);
      e.snap_ok = false;
    } else {
      e.inv->commit(p);
      release_freed_memory();
      const auto cur = e.inv->current();
      e.snap_ok = cur != nullptr;
      e.snap_etag = cur ? cur->etag : std::string();
    }
    e.pending_invalid_digest.clear();
    e.snap_digest = std::move(digest);
    e.snap_generation = generation;
    report(e, before);
    return false;
  }

  // Re-reads every file input; returns true when something asked to be looked at again.
  bool check_all(bool confirm_invalid) {
    for (auto& e : entries) check_nodes_file(*e);
    bool again = false;
    for (auto& e : entries) again = check_snapshot_file(*e, confirm_invalid) || again;
    return again;
  }

  std::map<std::string, std::set<std::string>> all_points() const {
    std::map<std::string, std::set<std::string>> points;
    for (const auto& e : entries) {
      for (const auto* p : {&e->spec.snapshot_path, &e->spec.nodes_path}) {
        if (p->empty()) continue;
        for (auto& [dir, names] : detail::watch_points(*p)) points[dir].insert(names.begin(), names.end());
      }
    }
    return points;
  }

  // Re-arms the watches; when the set changed (a symlink now points elsewhere, a directory
  // came back), reads again so a change between the read and the new watch is not lost.
  void rearm(std::map<std::string, std::set<std::string>>& points, bool& again) {
    auto next = all_points();
    if (next == points) return;
    points = std::move(next);
    watcher.set_points(points);
    again = true;
  }

  // Watches are armed before anything is read, so a change made while a source is being
  // loaded still produces an event.
  std::map<std::string, std::set<std::string>> armed;

  void run_loop() {
    auto points = std::move(armed);
    constexpr auto never = steady::time_point::max();
    auto next_resync = steady::now() + cfg.resync_interval;
    auto dirty_at = never;   // a burst of events is being debounced
    auto settle_at = never;  // an invalid read waits to be confirmed
    while (!stopping.load()) {
      const auto deadline = std::min({next_resync, dirty_at, settle_at});
      const auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - steady::now()).count();
      pollfd fds[2] = {{watcher.fd(), POLLIN, 0}, {wake_fd, POLLIN, 0}};
      const int timeout = static_cast<int>(std::clamp<long long>(wait + 1, 0, 60'000));
      ::poll(fds, 2, timeout);
      if (stopping.load()) break;
      const auto now = steady::now();
      if ((fds[1].revents & POLLIN) != 0) {
        std::uint64_t v = 0;
        [[maybe_unused]] const auto n = ::read(wake_fd, &v, sizeof v);
      }
      if ((fds[0].revents & POLLIN) != 0 && watcher.drain() && dirty_at == never) dirty_at = now + debounce;

      bool full = resync_requested.exchange(false);
      if (now >= next_resync) {
        full = true;
        next_resync = now + cfg.resync_interval;
      }
      bool again = false;
      if (full || now >= dirty_at) {
        dirty_at = never;
        const bool pending = check_all(false);
        if (pending && settle_at == never) settle_at = steady::now() + settle;
        rearm(points, again);
      } else if (now >= settle_at) {
        settle_at = never;
        check_all(true);
        rearm(points, again);
      }
      if (again && dirty_at == never) dirty_at = steady::now();
    }
  }

  // --- Store ------------------------------------------------------------------------------

  void load_from_store(entry& e) {
    std::optional<detail::stored_revision> rev;
    const auto st = store->load(e.inv->name(), rev);
    if (!st.ok()) {
      log("error", e.inv->name(), "store " + store->describe() + ": " + st.message);
      std::lock_guard lk(e.write_mu);
      e.inv->record_failure({"store", "", std::nullopt, std::nullopt}, "store: " + st.message);
      return;
    }
    if (!rev) return;
    offer_from_store(e, *rev, true);
  }

  void offer_from_store(entry& e, const detail::stored_revision& rev, bool initial) {
    std::lock_guard lk(e.write_mu);
    if (!initial && rev.version == e.store_version) return;  // our own write, seen again
    const auto cur = e.inv->accepted();
    if (!initial && cur && !rev.version.empty() && cur->json_body == rev.json) {
      e.store_version = rev.version;
      return;
    }
    const auto before = e.inv->attempts_recorded();
    // The replica that stored it already applied maxProfileChanges (and saw any acceptance).
    // (Initialised here, not assigned afterwards: GCC 12 at -O2 with ASan reports a false
    // -Wmaybe-uninitialized for assigning a string to a disengaged optional.)
    inventory::offer_options opts{"store", rev.actor, std::nullopt, rev.accepted_at, "*"};
    // Validated again: the Node list or the configuration may have changed since.
    auto p = e.inv->prepare(rev.json, opts);
    if (p.candidate) {
      e.inv->commit(p);
      release_freed_memory();
      e.pending_store.reset();
    } else {
      e.inv->record_rejection(p, opts);
      e.pending_store = rev;
    }
    e.store_version = rev.version;
    report(e, before);
  }
};

registry::registry(registry_config cfg, const clock& clk, registry_observer obs)
    : impl_(std::make_unique<impl>(std::move(cfg), clk, std::move(obs))) {}

registry::~registry() { stop(); }

void registry::start() {
  auto& m = *impl_;
  if (m.started.exchange(true)) return;
  m.stopping = false;

  if (m.cfg.store.type == store_config::kind::file) {
    m.store = detail::make_file_store(m.cfg.store.directory, m.store_error);
  } else if (m.cfg.store.type == store_config::kind::kubernetes) {
    m.store = detail::make_kube_store(
        m.cfg.store, [&m](std::string_view level, std::string_view msg) { m.log(level, "", msg); }, m.store_error);
  }
  if (!m.store_error.empty()) m.log("error", "", "store unavailable, pushes will be refused: " + m.store_error);

  // Node lists first: what is loaded next is validated against them.
  const bool any_api = std::any_of(m.entries.begin(), m.entries.end(), [](const auto& e) { return e->spec.nodes_from_api; });
  if (any_api) {
    std::string err;
    m.nodes_api = detail::make_node_watch(m.cfg.store, [&m](std::string_view level, std::string_view msg) { m.log(level, "", msg); }, err);
    if (!m.nodes_api) {
      m.log("error", "", "Kubernetes Node watch unavailable: " + err);
    } else {
      const bool ok = m.nodes_api->start(
          [&m](core::node_list list) {
            for (auto& e : m.entries) {
              if (e->spec.nodes_from_api) m.apply_nodes(*e, list);
            }
          },
          std::chrono::seconds(10));
      if (!ok) m.log("warn", "", "first Node list failed; retrying in the background");
    }
  }
  m.armed = m.all_points();
  m.watcher.set_points(m.armed);
  for (auto& e : m.entries) m.check_nodes_file(*e);

  if (m.store) {
    std::vector<std::string> names;
    for (auto& e : m.entries) {
      if (!e->spec.snapshot_path.empty() || e->spec.config.source.node_labels) continue;
      names.push_back(e->inv->name());
      m.load_from_store(*e);
    }
    m.store->start_watch(names, [&m](const std::string& name, const detail::stored_revision& rev) {
      if (auto* e = m.find(name)) m.offer_from_store(*e, rev, false);
    });
  }
  for (auto& e : m.entries) m.check_snapshot_file(*e, true);
  // A symlink met while loading may have changed the watch set; the loop re-reads then.
  if (m.all_points() != m.armed) m.resync_requested = true;

  m.loop = std::thread([&m] { m.run_loop(); });
}

void registry::stop() {
  auto& m = *impl_;
  if (!m.started.exchange(false)) return;
  m.stopping = true;
  m.wake();
  if (m.loop.joinable()) m.loop.join();
  if (m.store) m.store->stop();
  if (m.nodes_api) m.nodes_api->stop();
}

void registry::resync() {
  impl_->resync_requested = true;
  impl_->wake();
}

inventory* registry::find(std::string_view name) const noexcept {
  auto* e = impl_->find(name);
  return e != nullptr ? e->inv.get() : nullptr;
}

std::vector<inventory*> registry::all() const {
  std::vector<inventory*> out;
  for (const auto& e : impl_->entries) out.push_back(e->inv.get());
  return out;
}

bool registry::ready() const {
  return std::all_of(impl_->entries.begin(), impl_->entries.end(),
                     [this](const auto& e) { return inventory_ready(e->inv->name()); });
}

http_answer registry::push(std::string_view name, std::string_view body, std::optional<std::string> if_match,
                           std::string actor) {
  return push(name, body, std::move(if_match), std::move(actor), std::nullopt);
}

http_answer registry::push(std::string_view name, std::string_view body, std::optional<std::string> if_match,
                           std::string actor, std::optional<std::string> accept_impact) {
  auto& m = *impl_;
  auto* e = m.find(name);
  if (e == nullptr) return status_answer(404, "NotFound", "inventory \"" + std::string(name) + "\" not found", name);
  if (e->spec.config.source.node_labels) {
    // T7: a nodeLabels source is read-only; the Nodes' labels are its only input.
    return status_answer(409, "Conflict",
                         "inventory \"" + std::string(name) +
                             "\" reads Node labels (nodeLabels source): there is no snapshot to push",
                         name);
  }
  if (!e->spec.snapshot_path.empty()) {
    // One input per inventory keeps every replica deterministic: a file and pushes racing
    // would leave replicas serving whichever they saw last.
    return status_answer(409, "Conflict",
                         "inventory \"" + std::string(name) + "\" is fed by " + e->spec.snapshot_path +
                             "; pushes are refused",
                         name);
  }
  if (body.size() > core::max_snapshot_bytes) {
    return status_answer(413, "RequestEntityTooLarge",
                         "snapshot is " + std::to_string(body.size()) + " bytes, more than the 1048576 allowed (S10)",
                         name);
  }
  if (!m.store) {
    return status_answer(503, "ServiceUnavailable",
                         m.store_error.empty() ? "pushes need a store (store.type: file or kubernetes)"
                                               : "store unavailable: " + m.store_error,
                         name);
  }

  std::lock_guard lk(e->write_mu);
  inventory& inv = *e->inv;
  const auto before = inv.attempts_recorded();
  const bool first = inv.accepted() == nullptr;
  inventory::offer_options opts{"push", actor, if_match, std::nullopt};
  opts.accept_impact = std::move(accept_impact);
  auto p = inv.prepare(body, opts);
  if (p.precondition_failed) {
    inv.record_rejection(p, opts);
    m.report(*e, before);
    auto a = status_answer(412, "PreconditionFailed", "If-Match does not match the current revision", name);
    if (const auto cur = inv.current()) a.headers.emplace_back("ETag", cur->etag);
    return a;
  }
  if (p.result.impact_refused) {
    // 409, not 422: the revision is valid; it conflicts with the served one under the
    // inventory's policy, and the same body succeeds once the impact is accepted.
    inv.record_rejection(p, opts);
    m.report(*e, before);
    const auto& im = *p.result.impact;
    const auto limit = inv.config().max_profile_changes;
    auto a = status_answer(409, "Conflict",
                           "revision " + (p.refused ? p.refused->revision_id : std::string()) + " changes the profile of " +
                               std::to_string(im.profile_changes()) + " Node(s) and makes " +
                               std::to_string(im.flavor_changes()) + " profile(s) appear or disappear, more than "
                               "maxProfileChanges " + std::to_string(limit) +
                               "; review the impact and push again with Topogate-Accept-Impact: " +
                               p.result.impact_baseline_etag,
                           name);
    // A Status with the impact beside it: clients reading only the Status still get the reason.
    a.body.pop_back();
    a.body += ",\"impact\":" + core::render_impact_json(im);
    a.body += ",\"acceptImpact\":{\"header\":\"Topogate-Accept-Impact\",\"value\":";
    core::append_json_string(a.body, p.result.impact_baseline_etag);
    a.body += ",\"maxProfileChanges\":" + std::to_string(limit) + "}}";
    if (const auto cur = inv.current()) a.headers.emplace_back("ETag", cur->etag);
    return a;
  }
  if (!p.candidate) {
    inv.record_rejection(p, opts);
    m.report(*e, before);
    return status_answer(422, "Invalid", invalid_message(name, p.result.errors), name, &p.result.errors);
  }

  detail::stored_revision stored;
  if (p.candidate->pruned_nodes.empty()) {
    stored.json = p.candidate->json_body;
  } else if (core::snapshot accepted; p.candidate->accepted_snapshot(accepted)) {
    stored.json = core::render_snapshot_json(accepted);
  } else {
    inv.record_failure(opts, "store: the accepted revision could not be read back");
    m.report(*e, before);
    return status_answer(503, "ServiceUnavailable", "revision not stored, nothing changed", name);
  }
  stored.accepted_at = p.candidate->accepted_at;
  stored.actor = actor;
  std::string new_version;
  auto st = m.store->save(inv.name(), stored, e->store_version, new_version);
  for (int retry = 0; st.value == detail::store_status::code::conflict && !if_match && retry < 8; ++retry) {
    // Without If-Match the writer asked for last-writer-wins: take the store's newest version
    // and write over it. Replicas racing the same way back off a little, differently.
    if (retry > 0) std::this_thread::sleep_for(std::chrono::milliseconds(1 + (retry * 7 + ::getpid()) % 13));
    std::optional<detail::stored_revision> latest;
    if (!m.store->load(inv.name(), latest).ok()) break;
    st = m.store->save(inv.name(), stored, latest ? latest->version : std::string(), new_version);
  }
  if (st.value == detail::store_status::code::conflict) {
    inv.record_failure(opts, "another replica published first (store conflict)");
    m.report(*e, before);
    auto a = status_answer(412, "PreconditionFailed",
                           "another revision was published concurrently; fetch it and retry", name);
    return a;
  }
  if (!st.ok()) {
    inv.record_failure(opts, "store: " + st.message);
    m.report(*e, before);
    return status_answer(503, "ServiceUnavailable", "revision not stored, nothing changed: " + st.message, name);
  }
  inv.commit(p);
  release_freed_memory();
  e->store_version = new_version;
  e->pending_store.reset();
  m.report(*e, before);

  const auto served = inv.current();
  http_answer a;
  a.status = first ? 201 : 200;
  std::string out = "{";
  add_str(out, "name", name);
  out.push_back(',');
  add_str(out, "revision", served ? served->revision_id : p.candidate->revision_id);
  out.push_back(',');
  add_str(out, "etag", served ? served->etag : p.candidate->etag);
  out.push_back(',');
  add_str(out, "acceptedAt", detail::format_time(p.candidate->accepted_at));
  out += ",\"size\":" + std::to_string(served ? served->json_body.size() : p.candidate->json_body.size());
  out += ",\"prunedNodes\":[";
  for (std::size_t i = 0; i < p.candidate->pruned_nodes.size(); ++i) {
    if (i != 0) out.push_back(',');
    core::append_json_string(out, p.candidate->pruned_nodes[i]);
  }
  out += "]";
  // The impact as committed (against the revision served just before), else as prepared.
  const auto last = inv.last_attempt();
  const auto impact = last && last->accepted && last->impact ? last->impact : p.result.impact;
  if (impact) out += ",\"impact\":" + core::render_impact_json(*impact);
  out += "}";
  a.body = std::move(out);
  if (served) a.headers.emplace_back("ETag", served->etag);
  return a;
}

http_answer registry::status(std::string_view name) const {
  const auto& m = *impl_;
  auto* e = m.find(name);
  if (e == nullptr) return status_answer(404, "NotFound", "inventory \"" + std::string(name) + "\" not found", name);
  if (e->spec.config.source.node_labels) return node_label_status(name);
  const auto& inv = *e->inv;
  const auto decision = inv.serve();
  const auto cur = inv.current();
  const auto now = m.clk.now();
  std::string out = "{";
  add_str(out, "name", name);
  out += ",\"ready\":";
  out += inv.ready() ? "true" : "false";
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
    add_str(out, "acceptedAt", detail::format_time(cur->accepted_at));
    out.push_back(',');
    add_str(out, "confirmedAt", detail::format_time(inv.confirmed_at()));
    char age[32];
    std::snprintf(age, sizeof age, "%.3f", std::chrono::duration<double>(now - inv.confirmed_at()).count());
    out += ",\"ageSeconds\":";
    out += age;
    out.push_back(',');
    add_str(out, "origin", cur->origin);
    out.push_back(',');
    add_str(out, "actor", cur->actor);
    out += ",\"size\":" + std::to_string(cur->json_body.size());
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
  add_str(out, "unknownNodes", cfg.unknown_nodes == unknown_nodes_policy::prune ? "prune" : "reject");
  out += ",\"nodes\":{";
  const auto count = inv.selected_node_count();
  out += "\"known\":";
  out += count ? "true" : "false";
  if (count) out += ",\"selected\":" + std::to_string(*count);
  out.push_back(',');
  add_str(out, "source", !e->spec.nodes_path.empty() ? "file:" + e->spec.nodes_path
                         : e->spec.nodes_from_api  ? std::string("kubernetes")
                                                   : std::string("none"));
  out += "},";
  add_str(out, "input", !e->spec.snapshot_path.empty() ? "file:" + e->spec.snapshot_path
                        : m.store                      ? "push:" + m.store->describe()
                                                       : std::string("push (no store)"));
  out.push_back('}');
  http_answer a;
  a.body = std::move(out);
  return a;
}

http_answer registry::history(std::string_view name) const {
  const auto& m = *impl_;
  auto* e = m.find(name);
  if (e == nullptr) return status_answer(404, "NotFound", "inventory \"" + std::string(name) + "\" not found", name);
  std::vector<attempt> hist;
  if (e->spec.config.source.node_labels) {
    std::lock_guard lk(e->label_mu);
    hist = e->label_history;
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
  http_answer a;
  a.body = std::move(out);
  return a;
}

bool registry::reads_node_labels(std::string_view name) const noexcept {
  const auto* e = impl_->find(name);
  return e != nullptr && e->spec.config.source.node_labels;
}

std::shared_ptr<const node_label_check> registry::node_labels(std::string_view name) const {
  const auto* e = impl_->find(name);
  if (e == nullptr || !e->spec.config.source.node_labels) return nullptr;
  return impl_->labels_of(*e);
}

bool registry::inventory_ready(std::string_view name, std::string* why) const {
  const auto* e = impl_->find(name);
  if (e == nullptr) {
    if (why) *why = "no such inventory";
    return false;
  }
  const auto& cfg = e->inv->config();
  if (cfg.source.node_labels) {
    // The hierarchy verdict is a finding, not readiness: a mislabelled Node must not take
    // every replica (and with it the admission webhook) out of the Service.
    if (cfg.allow_empty_start || impl_->labels_of(*e)) return true;
    if (why) *why = "no Node list yet (" + impl_->nodes_origin(*e) + ")";
    return false;
  }
  if (e->inv->ready()) return true;
  if (why) {
    const auto d = e->inv->serve();
    *why = d.unavailable_reason.empty() ? "no valid revision" : d.unavailable_reason;
  }
  return false;
}

http_answer registry::node_label_status(std::string_view name) const {
  const auto& m = *impl_;
  const auto* e = m.find(name);
  const auto c = m.labels_of(*e);
  std::string out = "{";
  add_str(out, "name", name);
  out.push_back(',');
  add_str(out, "provider", "nodeLabels");
  out += ",\"ready\":";
  out += inventory_ready(name) ? "true" : "false";
  out += ",\"serving\":false,";
  add_str(out, "unavailableReason", "a nodeLabels source is read from the Nodes' labels; topogate serves no snapshot for it");
  out.push_back(',');
  add_str(out, "nodesSource", m.nodes_origin(*e));
  out += ",\"checked\":";
  out += c ? "true" : "false";
  if (c) {
    out += ",\"valid\":";
    out += c->report.ok() ? "true" : "false";
    out.push_back(',');
    add_str(out, "checkedAt", detail::format_time(c->checked_at));
    out += ",\"checks\":" + std::to_string(c->checks);
    out.push_back(',');
    add_str(out, "summary", summarize(*c));
    out += ",\"report\":";
    out += core::render_node_label_report_json(c->report);
  }
  out.push_back('}');
  http_answer a;
  a.body = std::move(out);
  return a;
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
  out += std::to_string(r.selected_nodes) + " of " + std::to_string(r.total_nodes) + " Nodes selected, " +
         std::to_string(r.profiles.size()) + (r.profiles.size() == 1 ? " profile" : " profiles");
  for (const auto& l : r.levels) {
    if (l.verdict == core::nesting::independent) out += "; " + l.key + " is independent of the level above";
  }
  return out;
}

}  // namespace topogate::inventory

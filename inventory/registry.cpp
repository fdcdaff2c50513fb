#include "inventory/registry.hpp"

#include "core/time.hpp"
#include "inventory/registry_impl.hpp"

namespace topogate::inventory {

using detail::steady;

// --- registry::impl: inputs, Node lists, the reconcile loop, the store -----------------------

void registry::impl::log(std::string_view level, std::string_view inv,
                         std::string_view message) const {
  if (obs.on_log) {
    obs.on_log(level, inv, message);
    return;
  }
  std::string line = "{";
  add_str(line, "time", core::format_rfc3339_ms(std::chrono::system_clock::now()));
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

void registry::impl::report(entry& e, std::uint64_t before) const {
  for (const auto& a : e.inv->attempts_after(before)) {
    if (obs.on_attempt) obs.on_attempt(e.inv->name(), a);
    std::string msg =
        a.accepted ? "accepted revision " + a.revision_id + " " + a.etag
                   : "rejected " + (a.revision_id.empty() ? std::string("input") : a.revision_id);
    msg += " from " + a.origin;
    if (!a.note.empty()) msg += ": " + a.note;
    if (a.impact && !a.impact->empty() && !a.impact_refused)
      msg += " (" + core::summarize_impact(*a.impact) + ")";
    if (!a.errors.empty()) msg += ": " + core::render_text(a.errors);
    log(a.accepted ? (a.note.empty() ? "info" : "warn") : "warn", e.inv->name(), msg);
  }
}

void registry::impl::apply_nodes(entry& e, std::shared_ptr<const core::node_list> list) {
  {
    std::lock_guard lk(e.write_mu);
    if (e.awaiting_nodes.exchange(false)) {
      // The first Node list: the snapshot file waited for it.
      resync_requested = true;
      wake();
    }
    if ((e.nodes != nullptr) == (list != nullptr) && (!list || same_nodes(*e.nodes, *list))) {
      // Changes that cancelled out within the window (a label set and set back): nothing to
      // evaluate, but the list's name is the one the next list's changes are named from, and
      // an inventory that missed it would compare that next list in full.
      if (list && list->id != 0 && list->id != e.nodes->id) {
        e.nodes = list;
        e.inv->set_nodes(std::move(list));
      }
      return;
    }
    e.nodes = list;
    {
      std::lock_guard dl(e.drift_mu);
      e.drift_nodes = list;
    }
    const auto before = e.inv->attempts_recorded();
    e.inv->set_nodes(std::move(list));
    // The heap walk costs milliseconds on a large heap, and each rendering made after it
    // takes its pages from the kernel again (at 10,000 Nodes, a trim once a second cost a
    // relevant change about a sixth more CPU): a stream of Node changes pays it once every
    // ten seconds at most.
    if (const auto now = steady::now(); now - e.last_trim >= std::chrono::seconds(10)) {
      e.last_trim = now;
      release_freed_memory();
    }
    report(e, before);
    if (e.src->checks_node_labels()) check_node_labels(e);
    if (const auto* fs = e.src->as_file(); fs != nullptr && !fs->ok) {
      // The file was rejected against the old Node list (say, it names a Node that did
      // not exist yet): read it again against the new one.
      resync_requested = true;
      wake();
    }
  }
  // Likewise the store's revision when it did not validate here (on the lane, which owns
  // the store's view): only while it is still the store's current one.
  if (store && uses_store(e)) {
    e.lane.post([this, &e] {
      std::lock_guard lk(e.write_mu);
      const auto& head = push_of(e).head;
      if (head.known && head.state.rev && !head.state.damaged && !head.held) adopt_head(e, "store");
    });
  }
}

void registry::impl::apply_api_nodes(std::shared_ptr<const core::node_list> list) {
  // One list for every inventory that lists Nodes through the API.
  const auto shared = list ? std::move(list) : std::make_shared<const core::node_list>();
  for (auto& e : entries) {
    if (e->spec.nodes_from_api) apply_nodes(*e, shared);
  }
}

void registry::impl::wake_at(steady::time_point due) const {
  if (nodes_timer_fd < 0) {
    wake();
    return;
  }
  // steady_clock is CLOCK_MONOTONIC (libstdc++ on Linux): its time is the timer's.
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(due.time_since_epoch());
  itimerspec at{};
  at.it_value.tv_sec = static_cast<time_t>(ns.count() / 1'000'000'000);
  at.it_value.tv_nsec = static_cast<long>(ns.count() % 1'000'000'000);
  if (at.it_value.tv_sec == 0 && at.it_value.tv_nsec == 0) at.it_value.tv_nsec = 1;  // 0 disarms
  if (::timerfd_settime(nodes_timer_fd, TFD_TIMER_ABSTIME, &at, nullptr) != 0) wake();
}

void registry::impl::on_api_nodes(node_watch::list_source current) {
  {
    std::lock_guard lk(api_nodes_mu);
    if (api_nodes_seen) {
      api_nodes_pending = std::move(current);
      // The first change of a window sets the loop's alarm for its end; the alarm is already
      // set when later changes come.
      if (api_nodes_due == steady::time_point::max()) {
        api_nodes_due = steady::now() + node_coalesce;
        wake_at(api_nodes_due);
      }
      return;
    }
    api_nodes_seen = true;
  }
  // The first list at once: what waits for it (a snapshot file, readiness) should not wait more.
  apply_api_nodes(current());
}

void registry::impl::check_nodes_file(entry& e) {
  if (e.spec.nodes_path.empty()) return;
  auto r = detail::read_stable(e.spec.nodes_path, max_node_list_bytes);
  if (r.ok && r.too_large) {
    // Refused whole: a list cut at the limit can still parse (trailing blanks), and would
    // be a different list.
    r.ok = false;
    r.error = "read " + e.spec.nodes_path + ": larger than " + std::to_string(max_node_list_bytes) +
              " bytes (256 MiB)";
  }
  if (!r.ok) {
    // A Node list that cannot be read keeps the last one: Nodes did not vanish because a
    // file did.
    if (r.error != e.nodes_error)
      log("warn", e.inv->name(), "node list: " + r.error + " (keeping the last list)");
    e.nodes_error = r.error;
    return;
  }
  auto digest = detail::sha256_hex(r.bytes);
  if (digest == e.nodes_digest) return;
  auto parsed = core::parse_node_list(r.bytes);
  if (!parsed.ok()) {
    const auto err = "node list " + e.spec.nodes_path +
                     " is invalid (keeping the last list): " + core::render_text(parsed.errors);
    if (err != e.nodes_error) log("warn", e.inv->name(), err);
    e.nodes_error = err;
    return;
  }
  e.nodes_error.clear();
  e.nodes_digest = std::move(digest);
  apply_nodes(e, std::make_shared<const core::node_list>(std::move(parsed.list)));
}

bool registry::impl::check_all(bool confirm_invalid) {
  for (auto& e : entries) check_nodes_file(*e);
  bool again = false;
  for (auto& e : entries) again = check_snapshot_file(*e, confirm_invalid) || again;
  return again;
}

std::map<std::string, std::set<std::string>> registry::impl::all_points() const {
  std::map<std::string, std::set<std::string>> points;
  for (const auto& e : entries) {
    const std::string* paths[] = {e->src->watched_path(), &e->spec.nodes_path};
    for (const std::string* p : paths) {
      if (p == nullptr || p->empty()) continue;
      for (auto& [dir, names] : detail::watch_points(*p))
        points[dir].insert(names.begin(), names.end());
    }
  }
  return points;
}

void registry::impl::rearm(std::map<std::string, std::set<std::string>>& points, bool& again) {
  auto next = all_points();
  if (next == points) return;
  points = std::move(next);
  watcher.set_points(points);
  again = true;
}

void registry::impl::run_loop() {
  auto points = std::move(armed);
  constexpr auto never = steady::time_point::max();
  auto next_resync = steady::now() + cfg.resync_interval;
  // Files waiting for the first Node list are read when it comes, or at the grace's end.
  if (std::any_of(entries.begin(), entries.end(),
                  [](const auto& e) { return e->awaiting_nodes.load(); })) {
    next_resync = std::min(next_resync, nodes_grace_until);
  }
  auto next_drift = steady::now() + drift_interval();
  auto dirty_at = never;   // a burst of events is being debounced
  auto settle_at = never;  // an invalid read waits to be confirmed
  while (!stopping.load()) {
    steady::time_point nodes_due;
    {
      std::lock_guard lk(api_nodes_mu);
      nodes_due = api_nodes_due;
    }
    const auto deadline = std::min({next_resync, dirty_at, settle_at, nodes_due, next_drift});
    const auto wait =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - steady::now()).count();
    pollfd fds[3] = {{watcher.fd(), POLLIN, 0}, {wake_fd, POLLIN, 0}, {nodes_timer_fd, POLLIN, 0}};
    const int timeout = static_cast<int>(std::clamp<long long>(wait + 1, 0, 60'000));
    ::poll(fds, nodes_timer_fd >= 0 ? 3 : 2, timeout);
    if (stopping.load()) break;
    const auto now = steady::now();
    registry_observer::loop_turn turn;
    turn.woken = (fds[1].revents & POLLIN) != 0;
    turn.alarm = (fds[2].revents & POLLIN) != 0;
    for (const int i : {1, 2}) {
      if ((fds[i].revents & POLLIN) != 0) {
        std::uint64_t v = 0;
        [[maybe_unused]] const auto n = ::read(fds[i].fd, &v, sizeof v);
      }
    }
    if ((fds[0].revents & POLLIN) != 0 && watcher.drain() && dirty_at == never)
      dirty_at = now + debounce;
    // The window's end as it is now: one that opened while the loop slept (its timer woke
    // the loop) is not the one read before the wait.
    node_watch::list_source current;
    {
      std::lock_guard lk(api_nodes_mu);
      if (now >= api_nodes_due) {
        current.swap(api_nodes_pending);
        api_nodes_due = never;
        turn.nodes = true;
      }
    }
    // The list as it is now, copied once for however many changes the window gathered.
    if (current) apply_api_nodes(current());
    if (obs.on_loop_turn) obs.on_loop_turn(turn);

    bool full = resync_requested.exchange(false);
    if (now >= next_resync) {
      full = true;
      next_resync = now + cfg.resync_interval;
    }
    if (full || now >= next_drift) {
      check_drift();
      next_drift = steady::now() + drift_interval();
    }
    if (full && store) {
      // The store too: a watch that is stuck (a proxy holding the stream, a lost event) is
      // caught up within one interval. One read per inventory at a time.
      for (auto& e : entries) {
        if (!uses_store(*e) || push_of(*e).verify_queued.exchange(true)) continue;
        e->lane.post([this, ep = e.get()] { verify_store(*ep); });
      }
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

std::chrono::milliseconds registry::impl::drift_interval() const {
  auto shortest = std::chrono::milliseconds(std::chrono::seconds(300));
  for (const auto& e : entries)
    shortest = std::min<std::chrono::milliseconds>(shortest, e->spec.drift_grace);
  return std::clamp<std::chrono::milliseconds>(shortest / 10, std::chrono::seconds(1),
                                               std::chrono::seconds(30));
}

void registry::impl::check_drift() {
  for (auto& ep : entries) {
    entry& e = *ep;
    if (!e.src->serves_snapshot()) continue;
    std::shared_ptr<const core::node_list> nodes;
    {
      std::lock_guard dl(e.drift_mu);
      nodes = e.drift_nodes;
    }
    if (!nodes) {
      e.drift_seen.clear();
      e.drift_rev.reset();
      e.drift_base = {};
      std::lock_guard dl(e.drift_mu);
      e.drift = nullptr;
      continue;
    }
    // Nothing served: nothing the consumer writes, so nothing to drift from.
    const auto rev = e.inv->current();
    const auto& src = e.spec.config.source;
    const auto now = clk.now();
    const auto describe = [&](std::string_view name) {
      return describe_drift(src, e.drift_base, name);
    };
    std::shared_ptr<const drift_report> report;
    if (rev && rev == e.drift_rev.lock() && nodes == e.drift_base.nodes) {
      report = e.drift_seen.age(now, e.spec.drift_grace, describe);
    } else {
      std::optional<std::vector<std::string>> changed;
      if (rev) changed = drift_changes(e.drift_base, *rev, *nodes);
      e.drift_rev = rev;
      e.drift_base = rev ? basis_of(*rev, nodes, &e.drift_base) : drift_basis{};
      std::vector<drift_mark> found;
      if (changed) {
        found = refind_drift_marks(src, e.drift_base, e.drift_seen.take_found(), *changed);
      } else if (rev) {
        found = find_drift_marks(src, e.drift_base);
      }
      report = e.drift_seen.update(std::move(found), now, e.spec.drift_grace, describe);
    }
    std::lock_guard dl(e.drift_mu);
    e.drift = std::move(report);
  }
}

// --- registry -------------------------------------------------------------------------------

registry_deps make_file_dependencies(const store_config& cfg) {
  registry_deps d;
  if (cfg.type == store_config::kind::file) {
    if (auto s = make_file_store(cfg.directory)) {
      d.store = std::move(*s);
    } else {
      d.store_error = std::move(s).error().message;
    }
  } else if (cfg.type == store_config::kind::kubernetes) {
    d.store_error = "the kubernetes store was not provided (this build has no Kubernetes client)";
  }
  return d;
}

registry::registry(registry_config cfg, registry_deps deps, const clock& clk, registry_observer obs)
    : impl_(std::make_unique<impl>(std::move(cfg), std::move(deps), clk, std::move(obs))) {}

registry::registry(registry_config cfg, const clock& clk, registry_observer obs)
    : registry(cfg, make_file_dependencies(cfg.store), clk, std::move(obs)) {}

registry::~registry() {
  stop();  // ~impl then waits for any store call still blocked
}

void registry::start() {
  auto& m = *impl_;
  if (m.started.exchange(true)) return;
  m.stopping = false;
  if (m.cfg.store.type != store_config::kind::none && !m.store) {
    m.log("error", "", "store unavailable, pushes will be refused: " + m.store_error);
  }

  // Node lists first: what is loaded next is validated against them. The API's list comes on
  // the watch's own thread; a snapshot file that depends on it waits for it (nodes_grace).
  const bool any_api = std::any_of(m.entries.begin(), m.entries.end(),
                                   [](const auto& e) { return e->spec.nodes_from_api; });
  if (any_api) {
    if (!m.nodes_api) {
      m.log("error", "", "Kubernetes Node watch unavailable: " + m.nodes_error);
    } else {
      m.nodes_grace_until = steady::now() + nodes_grace;
      for (auto& e : m.entries) {
        if (e->spec.nodes_from_api) e->awaiting_nodes = true;
      }
      // Only the labels some inventory's rules read are kept (core::reads_node_label).
      std::vector<core::topology_source> sources;
      for (const auto& e : m.entries)
        if (e->spec.nodes_from_api) sources.push_back(e->spec.config.source);
      m.nodes_api->start(
          [sources = std::move(sources)](std::string_view key) {
            return std::any_of(sources.begin(), sources.end(),
                               [&](const auto& src) { return core::reads_node_label(src, key); });
          },
          [&m](node_watch::list_source current) { m.on_api_nodes(std::move(current)); });
    }
  }
  m.armed = m.all_points();
  m.watcher.set_points(m.armed);
  for (auto& e : m.entries) m.check_nodes_file(*e);

  if (m.store) {
    // The store is read on each inventory's lane: nothing here waits for it.
    std::vector<std::string> names;
    for (auto& e : m.entries) {
      if (!m.uses_store(*e)) continue;
      names.push_back(e->inv->name());
      e->lane.post([&m, ep = e.get()] { m.first_load(*ep); });
    }
    m.store->start_watch(names, [&m](const std::string& name, const store_state& st) {
      auto* e = m.find(name);
      if (e == nullptr) return;
      e->lane.post([&m, e, st] {
        // What the store lists or a watch event: the store has answered.
        m.apply_store_state(*e, st, false);
        m.mark_loaded(*e);
      });
    });
  }
  for (auto& e : m.entries) m.check_snapshot_file(*e, true);
  // A symlink met while loading may have changed the watch set; the loop re-reads then.
  if (m.all_points() != m.armed) m.resync_requested = true;

  m.loop = std::thread([&m] { m.run_loop(); });
}

bool registry::stop(std::chrono::milliseconds wait) {
  auto& m = *impl_;
  if (!m.started.exchange(false)) return true;
  m.stopping = true;
  m.wake();
  if (m.loop.joinable()) m.loop.join();
  if (m.nodes_api) m.nodes_api->stop();
  if (m.store) m.store->stop();
  // Queued pushes are dropped (each is answered `unavailable` as its call is destroyed); a
  // push running now finishes its store call first, up to `wait` in all.
  const auto until = steady::now() + wait;
  bool ended = true;
  for (auto& e : m.entries) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - steady::now());
    ended = e->lane.stop(std::max(left, std::chrono::milliseconds(0))) && ended;
  }
  if (ended) m.timers.stop();
  return ended;
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
                     [this](const auto& e) { return inventory_ready(e->inv->name()).ok(); });
}

const source* registry::source_of(std::string_view name) const noexcept {
  const auto* e = impl_->find(name);
  return e != nullptr ? e->src.get() : nullptr;
}

std::shared_ptr<const node_label_check> registry::node_labels(std::string_view name) const {
  const auto* e = impl_->find(name);
  const auto* labels = e != nullptr ? e->src->as_node_labels() : nullptr;
  return labels != nullptr ? labels->latest() : nullptr;
}

std::shared_ptr<const drift_report> registry::node_drift(std::string_view name) const {
  const auto* e = impl_->find(name);
  if (e == nullptr) return nullptr;
  std::lock_guard dl(e->drift_mu);
  return e->drift;
}

std::optional<bool> registry::store_available(std::string_view name) const {
  const auto* e = impl_->find(name);
  if (e == nullptr || !impl_->store || !impl::uses_store(*e)) return std::nullopt;
  return impl::push_of(*e).available();
}

std::optional<registry::store_view_status> registry::store_view(std::string_view name) const {
  const auto* e = impl_->find(name);
  if (e == nullptr || !impl_->store || !impl::uses_store(*e)) return std::nullopt;
  return impl::push_of(*e).view();
}

core::result<void> registry::inventory_ready(std::string_view name) const {
  using core::errc;
  const auto* e = impl_->find(name);
  if (e == nullptr) return core::fail(errc::not_found, "no such inventory");
  const auto& cfg = e->inv->config();
  if (const auto* labels = e->src->as_node_labels()) {
    // The hierarchy verdict is a finding, not readiness: a mislabelled Node must not take
    // every replica (and with it the admission webhook) out of the Service.
    if (cfg.allow_empty_start || labels->latest()) return {};
    return core::fail(errc::unavailable, "no Node list yet (" + impl_->nodes_origin(*e) + ")");
  }
  if (e->awaiting_nodes.load() && !e->inv->current()) {
    return core::fail(errc::unavailable, "waiting for the first Node list from the Kubernetes API");
  }
  if (impl_->store && impl::uses_store(*e) && !impl::push_of(*e).store_loaded.load()) {
    // Until the store answers, this replica cannot know the revision the others serve.
    std::string why = impl::push_of(*e).wait_reason();
    if (why.empty()) why = "waiting for the store " + impl_->store->describe() + " to answer";
    return core::fail(errc::unavailable, std::move(why));
  }
  if (e->inv->ready()) return {};
  const auto d = e->inv->serve();
  return core::fail(errc::unavailable,
                    d.unavailable_reason.empty() ? "no valid revision" : d.unavailable_reason);
}

}  // namespace topogate::inventory

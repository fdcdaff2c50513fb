// The push source: this replica's view of the store's object, learnt from reads, its own
// writes and watch events, and the revision the inventory serves from it. The pushes
// themselves are in push.cpp.

#include "inventory/source_push.hpp"

#include "inventory/registry_impl.hpp"

namespace topogate::inventory {

using detail::steady;

std::string push_source::push_refusal(std::string_view /*name*/) const { return {}; }

std::string push_source::input(const revision_store* store) const {
  return store != nullptr ? "push:" + store->describe() : std::string("push (no store)");
}

bool push_source::set_wait_reason(std::string why) {
  std::lock_guard lk(mu_);
  if (wait_reason_ == why) return false;
  wait_reason_ = std::move(why);
  return true;
}

std::string push_source::wait_reason() const {
  std::lock_guard lk(mu_);
  return wait_reason_;
}

std::optional<bool> push_source::available() const {
  const int answered = store_answered.load();
  if (answered < 0) return std::nullopt;
  return answered == 1;
}

registry::store_view_status push_source::view() const {
  registry::store_view_status v;
  v.behind = store_behind.load();
  if (const auto ms = store_synced_ms.load(); ms > 0) {
    v.synced_at = std::chrono::system_clock::time_point(
        std::chrono::duration_cast<std::chrono::system_clock::duration>(
            std::chrono::milliseconds(ms)));
  }
  return v;
}

bool registry::impl::head_matches(entry& e, std::string_view if_match) {
  std::lock_guard lk(e.write_mu);
  const auto& h = push_of(e).head;
  if (!h.known || !h.state.rev || h.state.damaged) return false;
  if (const auto cur = e.inv->current();
      h.held && cur && inventory::if_match_matches(if_match, &cur->etag))
    return true;
  const auto stored_etag = inventory::etag_of(h.state.rev->json);
  return inventory::if_match_matches(if_match, &stored_etag);
}

bool registry::impl::load_from_store(entry& e, store_deadline deadline) {
  auto& ps = push_of(e);
  if (ps.store_loaded.load()) return true;
  store_state st;
  const auto loaded = store->load(e.inv->name(), st, deadline);
  ps.note_store_call(!loaded.failed_with(core::errc::unavailable));
  if (!loaded.ok() && !loaded.failed_with(core::errc::damaged)) {
    const std::string& message = loaded.error().message;
    const std::string why = "waiting for the store " + store->describe() + ": " + message;
    if (ps.set_wait_reason(why)) {
      log("error", e.inv->name(), "store " + store->describe() + ": " + message);
      std::lock_guard lk(e.write_mu);
      e.inv->record_failure({"store", "", std::nullopt, std::nullopt}, "store: " + message);
    }
    return false;
  }
  // A damaged object is marked loaded before its note is recorded: whoever sees the note
  // (status, a test) must not still be told that the store has not answered (readiness).
  if (st.damaged) mark_loaded(e);
  apply_store_state(e, std::move(st), true);
  mark_loaded(e);
  return true;
}

void registry::impl::mark_loaded(entry& e) {
  auto& ps = push_of(e);
  if (ps.store_loaded.exchange(true)) return;
  ps.clear_wait_reason();
}

void registry::impl::first_load(entry& e) {
  auto& ps = push_of(e);
  if (stopping.load() || load_from_store(e, steady::now() + cfg.store.timeout)) return;
  const auto pause = ps.load_backoff;
  ps.load_backoff = std::min(ps.load_backoff * 2, std::chrono::milliseconds(30'000));
  timers.at(steady::now() + pause, [this, &e] { e.lane.post([this, &e] { first_load(e); }); });
}

void registry::impl::note_synced(entry& e) const {
  auto& ps = push_of(e);
  ps.store_synced_ms.store(
      std::chrono::duration_cast<std::chrono::milliseconds>(clk.now().time_since_epoch()).count());
}

void registry::impl::verify_store(entry& e) {
  auto& ps = push_of(e);
  ps.verify_queued = false;
  if (stopping.load() || !ps.store_loaded.load()) return;
  store_state st;
  const auto loaded = store->load(e.inv->name(), st, steady::now() + cfg.store.timeout);
  ps.note_store_call(!loaded.failed_with(core::errc::unavailable));
  if (loaded.ok() || loaded.failed_with(core::errc::damaged))
    apply_store_state(e, std::move(st), true);
}

void registry::impl::apply_store_state(entry& e, store_state st, bool authoritative) {
  auto& ps = push_of(e);
  std::lock_guard lk(e.write_mu);
  auto& head = ps.head;
  if (!authoritative && head.known) {
    // A watch event: applied only when it is newer than what this replica knows. The echo
    // of this replica's own write, a list after a reconnect, an event a lagging watch
    // delivers after a read that already saw past it: all older or the same, all ignored.
    const auto order = detail::version_order(st.as_of, head.state.as_of);
    if (order ? *order <= 0 : (!st.as_of.empty() && st.as_of == head.state.as_of)) return;
  }
  note_synced(e);
  const bool same_revision = head.known && head.state.rev && st.rev && !head.state.damaged &&
                             !st.damaged && head.state.rev->json == st.rev->json;
  head.known = true;
  head.state.as_of = std::move(st.as_of);
  if (same_revision) {
    // The same revision seen again (its echo, a relist, a periodic read): only its version
    // may be news (a write whose answer did not say it).
    head.state.rev->version = std::move(st.rev->version);
    if (!head.held) adopt_head(e, "store");
    ps.store_behind = !head.held;
    return;
  }
  head.state.rev = std::move(st.rev);
  head.state.damaged = st.damaged;
  const auto before = e.inv->attempts_recorded();
  const bool had = e.inv->accepted() != nullptr;
  if (head.state.damaged) {
    head.held = false;
    const std::string why = "the store's object for this inventory holds no readable revision";
    log("error", e.inv->name(),
        "store " + store->describe() + ": " + why + "; the next push replaces it");
    e.inv->record_failure({"store", "", std::nullopt, std::nullopt}, "store: " + why);
    e.inv->withdraw(why + " (the next push replaces it)");
  } else if (!head.state.rev) {
    head.held = false;
    if (had) {
      // Deleted by hand: every replica then serves what a new one would, nothing. The next
      // push creates the object again.
      const std::string why = "the store's object for this inventory was deleted";
      log("warn", e.inv->name(),
          "store " + store->describe() + ": " + why + "; push to publish again");
      e.inv->record_failure({"store", "", std::nullopt, std::nullopt}, "store: " + why);
      e.inv->withdraw(why + "; push a revision to publish again");
    }
  } else {
    adopt_head(e, "store");
  }
  ps.store_behind = head.state.rev && !head.held;
  report(e, before);
}

void registry::impl::adopt_head(entry& e, const char* origin) {
  auto& ps = push_of(e);
  auto& head = ps.head;
  const auto& rev = *head.state.rev;
  const auto before = e.inv->attempts_recorded();
  // The replica that stored it already applied maxProfileChanges (and saw any acceptance).
  // (Initialised here, not assigned afterwards: GCC 12 at -O2 with ASan reports a false
  // -Wmaybe-uninitialized for assigning a string to a disengaged optional.)
  inventory::offer_options opts{origin, rev.actor, std::nullopt, rev.accepted_at, "*"};
  // Validated again: the Node list or the configuration may differ from the writer's.
  auto p = e.inv->prepare(rev.json, opts);
  if (p.candidate) {
    e.inv->commit(p);
    head.held = true;
  } else {
    e.inv->record_rejection(p, opts);
    // Not an older revision instead: the consumer would see the store's history backwards.
    e.inv->withdraw("the store's current revision is not valid on this replica (" +
                    core::render_text(p.result.errors) +
                    "); nothing is served until a Node change or a push makes a valid one current");
    head.held = false;
  }
  // Told at once with what is served; the heap walk (milliseconds on a large heap) after.
  ps.store_behind = !head.held;
  if (head.held) release_freed_memory();
  report(e, before);
}

}  // namespace topogate::inventory

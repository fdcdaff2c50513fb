// Pushes: queued on the inventory's lane, validated, written to the store with a deadline
// and published there; answered by the lane, or by the deadline, or at shutdown.

#include <future>

#include "inventory/registry.hpp"
#include "inventory/registry_impl.hpp"

namespace topogate::inventory {

using detail::steady;

std::string_view to_string(push_outcome o) noexcept {
  switch (o) {
    case push_outcome::created:
      return "created";
    case push_outcome::stored:
      return "stored";
    case push_outcome::not_found:
      return "not_found";
    case push_outcome::not_pushable:
      return "not_pushable";
    case push_outcome::too_large:
      return "too_large";
    case push_outcome::invalid:
      return "invalid";
    case push_outcome::precondition_failed:
      return "precondition_failed";
    case push_outcome::impact_refused:
      return "impact_refused";
    case push_outcome::validated:
      return "validated";
    case push_outcome::unavailable:
      return "unavailable";
    case push_outcome::busy:
      return "busy";
  }
  return "unavailable";
}

// One push between its arrival and its answer: answered exactly once, by the lane when it
// is done, or by the deadline (store.timeout after arrival), or when dropped at shutdown.
struct registry::impl::push_call {
  std::mutex mu;
  std::function<void(push_result)> done;  // null once answered
  store_deadline deadline;
  std::chrono::milliseconds timeout;

  push_call(std::function<void(push_result)> d, std::chrono::milliseconds t)
      : done(std::move(d)), deadline(steady::now() + t), timeout(t) {}
  ~push_call() {
    push_result r;
    r.message = "the server is shutting down; the revision was not stored";
    r.retry_after = std::chrono::seconds(1);
    answer(std::move(r));
  }
  push_call(const push_call&) = delete;
  push_call& operator=(const push_call&) = delete;

  bool answered() {
    std::lock_guard lk(mu);
    return !done;
  }
  // False when it had already been answered.
  bool answer(push_result r) {
    std::function<void(push_result)> fn;
    {
      std::lock_guard lk(mu);
      fn.swap(done);
    }
    if (!fn) return false;
    fn(std::move(r));
    return true;
  }
};

namespace {
push_result refusal(push_outcome o, std::string message,
                    std::chrono::seconds retry_after = std::chrono::seconds(0)) {
  push_result r;
  r.outcome = o;
  r.message = std::move(message);
  r.retry_after = retry_after;
  return r;
}

}  // namespace

push_result impact_refusal(const inventory& inv, const inventory::prepared& p) {
  const auto& im = *p.result.impact;
  const auto limit = inv.config().max_profile_changes;
  auto r = refusal(push_outcome::impact_refused,
                   "revision " + (p.refused ? p.refused->revision_id : std::string()) +
                       " changes the profile of " + std::to_string(im.profile_changes()) +
                       " Node(s) and makes " + std::to_string(im.flavor_changes()) +
                       " profile(s) appear or disappear, more than "
                       "maxProfileChanges " +
                       std::to_string(limit) +
                       "; review the impact and push again with Topogate-Accept-Impact: " +
                       p.result.impact_baseline_etag);
  r.impact = p.result.impact;
  r.impact_baseline_etag = p.result.impact_baseline_etag;
  r.max_profile_changes = limit;
  r.served = inv.current();
  return r;
}

namespace {

std::string seconds_text(std::chrono::milliseconds d) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g s", std::chrono::duration<double>(d).count());
  return buf;
}
}  // namespace

void registry::push_async(push_request req, std::function<void(push_result)> done) {
  auto& m = *impl_;
  auto* e = m.find(req.name);
  const std::string name = req.name;
  if (e == nullptr)
    return done(refusal(push_outcome::not_found, "inventory \"" + name + "\" not found"));
  if (!e->src->accepts_pushes())
    return done(refusal(push_outcome::not_pushable, e->src->push_refusal(name)));
  if (req.body.size() > core::max_snapshot_bytes) {
    return done(refusal(push_outcome::too_large, "snapshot is " + std::to_string(req.body.size()) +
                                                     " bytes, more than the " +
                                                     std::to_string(core::max_snapshot_bytes) +
                                                     " allowed (S10)"));
  }
  if (!m.store) {
    return done(refusal(push_outcome::unavailable,
                        m.store_error.empty()
                            ? "pushes need a store (store.type: file or kubernetes)"
                            : "store unavailable: " + m.store_error));
  }
  auto call = std::make_shared<impl::push_call>(std::move(done), m.cfg.store.timeout);
  auto shared_req = std::make_shared<push_request>(std::move(req));
  if (!e->lane.try_post_counted([&m, e, call, shared_req] { m.run_push(*e, *call, *shared_req); },
                                max_pushes_in_progress)) {
    call->answer(refusal(push_outcome::busy,
                         std::to_string(max_pushes_in_progress) + " pushes to inventory \"" + name +
                             "\" are already in progress (waiting for the store " +
                             m.store->describe() + "); try again shortly",
                         std::chrono::seconds(1)));
    return;
  }
  m.timers.at(call->deadline, [weak = std::weak_ptr<impl::push_call>(call),
                               desc = m.store->describe()] {
    const auto c = weak.lock();
    if (!c) return;
    c->answer(refusal(
        push_outcome::unavailable,
        "the push did not complete within store.timeout (" + seconds_text(c->timeout) +
            "): the store " + desc +
            " is slow or not answering; the revision is not published unless the store completes "
            "the write (see /snapshots/{name}/status)",
        std::chrono::seconds(std::max<long long>(
            1, std::chrono::duration_cast<std::chrono::seconds>(c->timeout).count()))));
  });
}

push_result registry::push(push_request req) {
  std::promise<push_result> p;
  auto f = p.get_future();
  push_async(std::move(req), [&p](push_result r) { p.set_value(std::move(r)); });
  return f.get();
}

push_result registry::push(std::string_view name, std::string_view body,
                           std::optional<std::string> if_match, std::string actor,
                           std::optional<std::string> accept_impact) {
  return push(push_request{std::string(name), std::string(body), std::move(if_match),
                           std::move(actor), std::move(accept_impact)});
}

std::optional<push_result> registry::impl::stranded_refusal(entry& e, const inventory::prepared& p,
                                                            const push_request& req,
                                                            const inventory::offer_options& opts,
                                                            bool record) {
  inventory& inv = *e.inv;
  const auto limit_set = inv.config().max_stranded_workloads;
  core::snapshot snap;
  if (!limit_set || !stranded || !p.candidate->accepted_snapshot(snap)) return std::nullopt;
  const std::size_t limit = *limit_set;
  std::string summary;
  const auto n = stranded(inv.name(), inv.config().source, snap, summary);
  if (!n) {
    log("warn", inv.name(),
        "maxStrandedWorkloads: the Workloads the revision strands are unknown (" + summary +
            "); not refused");
    return std::nullopt;
  }
  if (*n <= limit) return std::nullopt;
  // Accepted as maxProfileChanges is: "*" or the ETag of the revision served before.
  const std::string& baseline = p.result.impact_baseline_etag;
  // "*" accepts any impact, also that of a first revision (no baseline).
  if (req.accept_impact) {
    std::string_view v = *req.accept_impact;
    while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
    while (!v.empty() && (v.back() == ' ' || v.back() == '\t')) v.remove_suffix(1);
    if (v == "*" || (!baseline.empty() && inventory::if_match_matches(v, &baseline)))
      return std::nullopt;
  }
  if (record) {
    std::lock_guard lk(e.write_mu);
    const auto before = inv.attempts_recorded();
    inv.record_stranded_refusal(p, opts, *n, summary);
    report(e, before);
  }
  auto r = refusal(push_outcome::impact_refused,
                   "revision " + p.candidate->revision_id + " would leave " + std::to_string(*n) +
                       " admitted Workload(s) Pending (" + summary +
                       "), more than maxStrandedWorkloads " + std::to_string(limit) +
                       "; review the impact and push again with Topogate-Accept-Impact: " +
                       (baseline.empty() ? std::string("*") : baseline));
  r.impact = p.result.impact;
  r.impact_baseline_etag = baseline.empty() ? "*" : baseline;
  r.max_profile_changes = inv.config().max_profile_changes;
  r.served = inv.current();
  return r;
}

void registry::impl::run_push(entry& e, push_call& call, const push_request& req) {
  const inventory::offer_options opts{"push", req.actor, req.if_match, std::nullopt,
                                      req.accept_impact};
  if (call.answered()) {
    // store.timeout passed while it waited behind earlier pushes: nothing was tried.
    std::lock_guard lk(e.write_mu);
    const auto before = e.inv->attempts_recorded();
    e.inv->record_failure(
        opts, "not attempted: store.timeout passed while earlier pushes held the store");
    report(e, before);
    return;
  }
  push_result r = store_push(e, call, req, opts);
  const bool published = r.outcome == push_outcome::created || r.outcome == push_outcome::stored;
  e.lane.release_current();
  if (!call.answer(std::move(r)) && published) {
    log("warn", e.inv->name(),
        "the store confirmed a push after it had been answered 503 (store.timeout); the revision "
        "is published, as "
        "the store holds it");
  }
}

push_result registry::impl::store_push(entry& e, push_call& call, const push_request& req,
                                       const inventory::offer_options& opts) {
  inventory& inv = *e.inv;
  auto& ps = push_of(e);
  const std::string& name = req.name;
  if (!load_from_store(e, call.deadline)) {
    return refusal(
        push_outcome::unavailable,
        "store unavailable: the stored revision could not be read (" + ps.wait_reason() + ")",
        std::chrono::seconds(1));
  }
  // If-Match is judged against the store's current revision, as this replica knows it, and
  // the write below is a compare-and-swap on exactly that object version: what the replica
  // happens to serve is never the judge. A mismatch may only mean this replica's view is
  // behind (its watch lags), so the store is read once before a 412 is answered.
  if (req.if_match) {
    if (!head_matches(e, *req.if_match)) {
      store_state st;
      const auto loaded = store->load(name, st, call.deadline);
      ps.note_store_call(!loaded.failed_with(core::errc::unavailable));
      if (!loaded.ok() && !loaded.failed_with(core::errc::damaged)) {
        return refusal(push_outcome::unavailable,
                       "store unavailable: the stored revision could not be read to check "
                       "If-Match (" +
                           loaded.error().message + ")",
                       std::chrono::seconds(1));
      }
      apply_store_state(e, std::move(st), true);
    }
    if (!head_matches(e, *req.if_match)) {
      std::lock_guard lk(e.write_mu);
      const auto before = inv.attempts_recorded();
      inv.record_failure(opts, "If-Match does not match the store's current revision");
      report(e, before);
      auto r = refusal(push_outcome::precondition_failed,
                       "If-Match does not match the current revision");
      r.served = inv.current();
      return r;
    }
    std::lock_guard lk(e.write_mu);
    if (!ps.head.held) {
      // The store's revision matches, but this replica cannot serve it (it refused it): it
      // cannot tell what the push would change, so another replica, or a later try, decides.
      return refusal(push_outcome::unavailable,
                     "this replica does not serve the store's current revision (" +
                         inv.serve().unavailable_reason + "); try again or on another replica",
                     std::chrono::seconds(1));
    }
  }
  const inventory::offer_options checked{opts.origin, opts.actor, std::nullopt, std::nullopt,
                                         opts.accept_impact};
  std::uint64_t before = 0;
  bool first = false;
  inventory::prepared p;
  std::string expected;
  {
    // Validation runs here, on the lane: a 1 MiB body never occupies a request thread.
    std::lock_guard lk(e.write_mu);
    before = inv.attempts_recorded();
    first = inv.accepted() == nullptr;
    p = inv.prepare(req.body, checked);
    if (p.result.impact_refused || !p.candidate) {
      inv.record_rejection(p, opts);
      report(e, before);
    }
    // Replace exactly the object this replica knows (create when it knows none); a conflict
    // then means the store moved on, which the precondition must not overlook.
    if (ps.head.state.rev) expected = ps.head.state.rev->version;
  }
  if (p.result.impact_refused) {
    // Valid, but it conflicts with the served revision under the inventory's policy; the same
    // body succeeds once the impact is accepted.
    return impact_refusal(inv, p);
  }
  if (!p.candidate) {
    auto r = refusal(push_outcome::invalid, "snapshot is invalid");
    r.errors = std::move(p.result.errors);
    return r;
  }

  if (auto refused = stranded_refusal(e, p, req, opts)) return std::move(*refused);

  stored_revision stored;
  if (p.candidate->pruned_nodes.empty()) {
    stored.json = p.candidate->json_body();
  } else if (core::snapshot accepted; p.candidate->accepted_snapshot(accepted)) {
    stored.json = core::render_snapshot_json(accepted);
  } else {
    std::lock_guard lk(e.write_mu);
    inv.record_failure(opts, "store: the accepted revision could not be read back");
    report(e, before);
    return refusal(push_outcome::unavailable, "revision not stored, nothing changed");
  }
  stored.accepted_at = p.candidate->accepted_at;
  stored.actor = req.actor;
  // The store call holds no lock a reader, a Node change or another inventory needs.
  auto saved = store->save(name, stored, expected, call.deadline);
  ps.note_store_call(!saved.failed_with(core::errc::unavailable));
  constexpr int unconditional_retries = 8;
  for (int retry = 0;
       saved.failed_with(core::errc::conflict) && !req.if_match && retry < unconditional_retries;
       ++retry) {
    // Without If-Match the writer asked for last-writer-wins: take the store's newest version
    // and write over it. Replicas racing the same way back off a little, differently.
    if (retry > 0)
      std::this_thread::sleep_for(std::chrono::milliseconds(1 + (retry * 7 + ::getpid()) % 13));
    store_state latest;
    const auto loaded = store->load(name, latest, call.deadline);
    ps.note_store_call(!loaded.failed_with(core::errc::unavailable));
    if (!loaded.ok() && !loaded.failed_with(core::errc::damaged)) {
      // The newest version cannot be read (the API restarting, a timeout): nothing was
      // written, and no precondition was given, so the answer is the store's (503), not 412.
      saved = core::fail(core::errc::unavailable,
                         "the store's newest version could not be read: " + loaded.error().message);
      break;
    }
    saved =
        store->save(name, stored, latest.rev ? latest.rev->version : std::string(), call.deadline);
    ps.note_store_call(!saved.failed_with(core::errc::unavailable));
  }
  std::lock_guard lk(e.write_mu);
  if (saved.failed_with(core::errc::conflict) && req.if_match) {
    inv.record_failure(opts, "another replica published first (store conflict)");
    report(e, before);
    return refusal(push_outcome::precondition_failed,
                   "another revision was published concurrently; fetch it and retry");
  }
  if (saved.failed_with(core::errc::conflict)) {
    // Without If-Match there is no precondition to fail: the store kept changing under every
    // retry. Nothing was written; the writer may send it again.
    inv.record_failure(opts, "store: another version each time it was written (store conflict)");
    report(e, before);
    return refusal(push_outcome::unavailable,
                   "revision not stored, nothing changed: the store changed under each of " +
                       std::to_string(1 + unconditional_retries) + " writes; send it again",
                   std::chrono::seconds(1));
  }
  if (!saved.ok()) {
    const std::string& message = saved.error().message;
    inv.record_failure(opts, "store: " + message);
    report(e, before);
    return refusal(push_outcome::unavailable, "revision not stored, nothing changed: " + message,
                   std::chrono::seconds(1));
  }
  inv.commit(p);
  release_freed_memory();
  // The store's newest state is now this write (a compare-and-swap on the version known
  // before it); its watch echo is older or the same and changes nothing.
  stored.version = std::move(*saved);
  ps.head.known = true;
  ps.head.state = store_state{std::move(stored), false, std::string()};
  ps.head.state.as_of = ps.head.state.rev->version;
  ps.head.held = true;
  ps.store_behind = false;
  note_synced(e);
  report(e, before);

  push_result r;
  r.outcome = first ? push_outcome::created : push_outcome::stored;
  r.served = inv.current();
  r.candidate = p.candidate;
  // The impact as committed (against the revision served just before), else as prepared.
  const auto last = inv.last_attempt();
  r.impact = last && last->accepted && last->impact ? last->impact : p.result.impact;
  return r;
}

}  // namespace topogate::inventory

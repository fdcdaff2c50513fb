// PUT /snapshots/{name}?dryRun=All (registry.hpp, dry_run_async): a push validated on the
// inventory's lane as a push is, and answered without the store, the history or the metrics.

#include <future>

#include "inventory/registry.hpp"
#include "inventory/registry_impl.hpp"

namespace topogate::inventory {

namespace {

push_result answer(push_outcome o, std::string message) {
  push_result r;
  r.outcome = o;
  r.message = std::move(message);
  return r;
}

push_result decide(inventory& inv, std::mutex& write_mu, const push_request& req,
                   inventory::prepared& p) {
  const inventory::offer_options opts{"push", req.actor, std::nullopt, std::nullopt,
                                      req.accept_impact};
  std::lock_guard lk(write_mu);
  if (req.if_match) {
    const auto served = inv.current();
    if (!inventory::if_match_matches(*req.if_match, served ? &served->etag : nullptr)) {
      auto r =
          answer(push_outcome::precondition_failed, "If-Match does not match the current revision");
      r.served = served;
      return r;
    }
  }
  // prepare() only builds the revision a publish would produce: nothing is recorded.
  p = inv.prepare(req.body, opts);
  if (p.result.impact_refused) {
    auto r = impact_refusal(inv, p);
    r.candidate = p.refused;  // what a dry run's Workload answer is about
    return r;
  }
  if (!p.candidate) {
    auto r = answer(push_outcome::invalid, "snapshot is invalid");
    r.errors = p.result.errors;
    return r;
  }
  auto r = answer(push_outcome::validated, {});
  r.candidate = p.candidate;
  r.impact = p.result.impact;
  r.impact_baseline_etag = p.result.impact_baseline_etag;
  r.max_profile_changes = inv.config().max_profile_changes;
  return r;
}

}  // namespace

void registry::dry_run_async(push_request req, std::function<void(push_result)> done) {
  auto* e = impl_->find(req.name);
  if (e == nullptr)
    return done(answer(push_outcome::not_found, "inventory \"" + req.name + "\" not found"));
  if (!e->src->accepts_pushes())
    return done(answer(push_outcome::not_pushable, e->src->push_refusal(req.name)));
  if (req.body.size() > core::max_snapshot_bytes)
    return done(answer(push_outcome::too_large,
                       "snapshot is " + std::to_string(req.body.size()) + " bytes, more than the " +
                           std::to_string(core::max_snapshot_bytes) + " allowed (S10)"));
  // Shared: the lane runs the task once, or drops it unrun at shutdown (the callback then
  // answers unavailable from the destructor).
  struct call {
    std::function<void(push_result)> done;
    ~call() {
      if (!done) return;
      push_result r = answer(push_outcome::unavailable, "the server is shutting down");
      r.retry_after = std::chrono::seconds(1);
      done(std::move(r));
    }
  };
  auto c = std::make_shared<call>();
  c->done = std::move(done);
  auto shared_req = std::make_shared<push_request>(std::move(req));
  auto& m = *impl_;
  const bool queued = e->lane.try_post_counted(
      [&m, e, c, shared_req] {
        inventory::prepared p;
        push_result r = decide(*e->inv, e->write_mu, *shared_req, p);
        // maxStrandedWorkloads, as the push would apply it, nothing recorded.
        if (r.outcome == push_outcome::validated) {
          const inventory::offer_options opts{"push", shared_req->actor, std::nullopt, std::nullopt,
                                              shared_req->accept_impact};
          if (auto refused = m.stranded_refusal(*e, p, *shared_req, opts, false)) {
            r = std::move(*refused);
            r.candidate = p.candidate;
          }
        }
        e->lane.release_current();
        auto fn = std::move(c->done);
        c->done = nullptr;
        fn(std::move(r));
      },
      max_pushes_in_progress);
  if (!queued) {
    auto fn = std::move(c->done);
    c->done = nullptr;
    push_result r = answer(push_outcome::busy, std::to_string(max_pushes_in_progress) +
                                                   " pushes to inventory \"" + e->inv->name() +
                                                   "\" are already in progress; try again shortly");
    r.retry_after = std::chrono::seconds(1);
    fn(std::move(r));
  }
}

push_result registry::dry_run(push_request req) {
  std::promise<push_result> p;
  auto f = p.get_future();
  dry_run_async(std::move(req), [&p](push_result r) { p.set_value(std::move(r)); });
  return f.get();
}

}  // namespace topogate::inventory

// The admission ownership view's loop (its lister on the Kubernetes API is cli/'s).

#include "server/ownership_view.hpp"

#include <exception>
#include <utility>

#include "server/log.hpp"

namespace topogate::server {

namespace {

using clock = std::chrono::steady_clock;

}  // namespace

ownership_view_loop::ownership_view_loop(ownership_check_config cfg,
                                         std::unique_ptr<ownership_lister> lister)
    : cfg_(cfg), lister_(std::move(lister)) {}

ownership_view_loop::~ownership_view_loop() { stop(); }

void ownership_view_loop::start() {
  if (worker_.started()) return;
  log(log_level::info, "ownership view: started",
      {{"component", "ownership-view"},
       {"interval_s", std::chrono::duration<double>(cfg_.interval).count()},
       {"timeout_s", std::chrono::duration<double>(cfg_.timeout).count()}});
  worker_.start(cfg_.interval, [this] { run_once(); });
}

void ownership_view_loop::stop() {
  worker_.stop([this] { lister_->cancel(); });
}

std::shared_ptr<const admission::ownership_snapshot> ownership_view_loop::current() const {
  std::lock_guard lock(mu_);
  return snap_;
}

std::size_t ownership_view_loop::runs() const { return worker_.runs(); }

void ownership_view_loop::run_once() {
  const auto started = clock::now();
  core::result<admission::ownership_snapshot> r = core::fail(core::errc::internal, "no list");
  try {
    r = lister_->list(started + cfg_.timeout);
  } catch (const std::exception& e) {
    r = core::fail(core::errc::internal, std::string("list failed: ") + e.what());
  }
  if (worker_.stopping()) return;
  if (!r) {
    // The last snapshot stays: the cluster rarely changes between two lists.
    if (!failing_) {
      log(log_level::warn, "ownership view: list failed; admission keeps the last view (if any)",
          {{"component", "ownership-view"}, {"error", r.error().message}});
    }
    failing_ = true;
    return;
  }
  const std::size_t sources = r->sources.size();
  const std::size_t nodes = r->nodes.size();
  auto next = std::make_shared<const admission::ownership_snapshot>(std::move(*r));
  bool first = false;
  {
    std::lock_guard lock(mu_);
    first = snap_ == nullptr;
    snap_ = std::move(next);
  }
  log(first || failing_ ? log_level::info : log_level::debug, "ownership view: listed",
      {{"component", "ownership-view"},
       {"topologysources", sources},
       {"nodes", nodes},
       {"duration_s", std::chrono::duration<double>(clock::now() - started).count()}});
  failing_ = false;
}

}  // namespace topogate::server

// The admission ownership view: its loop, and its lister on topogate_kube's client
// (TopologySources in full, Nodes as metadata), every call bounded by the list's deadline.

#include "server/ownership_view.hpp"

#include <exception>
#include <utility>

#include "inventory/kube.hpp"
#include "inventory/kube_client.hpp"
#include "server/kube_list.hpp"
#include "server/log.hpp"

namespace topogate::server {

namespace {

namespace kube = inventory::detail;
using clock = std::chrono::steady_clock;

class kube_ownership_lister final : public ownership_lister {
 public:
  kube_ownership_lister(kube::kube_endpoint ep, std::chrono::milliseconds timeout)
      : calls_(std::move(ep)), timeout_(timeout) {}

  core::result<admission::ownership_snapshot> list(clock::time_point deadline) override {
    return calls_.run<admission::ownership_snapshot>(
        [&](kube::kube_client& client) { return list_all(client, deadline); });
  }

  void cancel() override { calls_.cancel(); }

 private:
  core::result<admission::ownership_snapshot> list_all(kube::kube_client& client,
                                                       clock::time_point deadline) {
    admission::ownership_snapshot snap;
    list_call call;
    call.deadline_name = "admission.ownershipCheck.timeout";
    call.timeout = timeout_;
    call.forbidden_hint = "topogate's ServiceAccount needs list on topologysources and nodes";
    const auto sources = [&](const core::doc_node& page) {
      const core::doc_node* items = page.find("items");
      if (items == nullptr || !items->is_sequence()) return;
      for (const auto& item : items->items)
        if (auto s = core::read_ownership_source(item)) snap.sources.push_back(std::move(*s));
    };
    // The API converts every object to the version asked for: v1 lists them all, and v1alpha1
    // is asked only of an API that does not serve v1. No CRD: no sources, nothing to conflict.
    auto r =
        list_pages(client, "/apis/worker.gpustack.ai/v1/topologysources", deadline, call, sources);
    if (r && *r == listed::not_served)
      r = list_pages(client, "/apis/worker.gpustack.ai/v1alpha1/topologysources", deadline, call,
                     sources);
    if (!r) return std::move(r).error();
    call.accept = metadata_list_accept;
    call.page_size = 500;
    r = list_pages(client, "/api/v1/nodes", deadline, call, [&](const core::doc_node& page) {
      each_node(page, [&](std::string name, node_labels labels) {
        snap.nodes.emplace_back(std::move(name), std::move(labels));
      });
    });
    if (!r) return std::move(r).error();
    return snap;
  }

  cancellable_calls calls_;
  std::chrono::milliseconds timeout_;
};

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

core::result<std::unique_ptr<ownership_lister>> make_kube_ownership_lister(
    const inventory::store_config& api, const ownership_check_config& cfg) {
  auto ep = kube::resolve_endpoint(api);
  if (!ep) return std::move(ep).error();
  return std::unique_ptr<ownership_lister>(
      std::make_unique<kube_ownership_lister>(std::move(*ep), cfg.timeout));
}

}  // namespace topogate::server

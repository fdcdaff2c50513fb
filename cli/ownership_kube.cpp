#include "cli/ownership_kube.hpp"

#include <string>
#include <utility>

#include "core/document.hpp"
#include "core/ownership.hpp"
#include "kube/client.hpp"
#include "kube/list.hpp"

namespace topogate::cli {

namespace {

using clock = std::chrono::steady_clock;

class kube_ownership_lister final : public server::ownership_lister {
 public:
  kube_ownership_lister(kube::endpoint ep, std::chrono::milliseconds timeout)
      : calls_(std::move(ep)), timeout_(timeout) {}

  core::result<admission::ownership_snapshot> list(clock::time_point deadline) override {
    return calls_.run<admission::ownership_snapshot>(
        [&](kube::client& api) { return list_all(api, deadline); });
  }

  void cancel() override { calls_.cancel(); }

 private:
  core::result<admission::ownership_snapshot> list_all(kube::client& api,
                                                       clock::time_point deadline) {
    admission::ownership_snapshot snap;
    kube::list_options call;
    call.page_size = 100;
    call.deadline = deadline;
    call.deadline_name = "admission.ownershipCheck.timeout";
    call.deadline_setting = timeout_;
    call.page_timeout = timeout_;
    call.forbidden_hint = "topogate's ServiceAccount needs list on topologysources and nodes";
    const auto sources = [&](const core::doc_node& page) {
      const core::doc_node* items = page.find("items");
      if (items == nullptr || !items->is_sequence()) return;
      for (const auto& item : items->items)
        if (auto s = core::read_ownership_source(item)) snap.sources.push_back(std::move(*s));
    };
    // The API converts every object to the version asked for: v1 lists them all, and v1alpha1
    // is asked only of an API that does not serve v1. No CRD: no sources, nothing to conflict.
    auto r = kube::list_pages(api, "/apis/worker.gpustack.ai/v1/topologysources", call, sources);
    if (r && *r == kube::listed::not_served)
      r = kube::list_pages(api, "/apis/worker.gpustack.ai/v1alpha1/topologysources", call, sources);
    if (!r) return std::move(r).error();
    call.accept = kube::metadata_list_accept;
    call.page_size = kube::node_list_page;
    r = kube::list_pages(api, "/api/v1/nodes", call, [&](const core::doc_node& page) {
      kube::each_node(page, [&](std::string name, kube::node_labels labels) {
        snap.nodes.emplace_back(std::move(name), std::move(labels));
      });
    });
    if (!r) return std::move(r).error();
    return snap;
  }

  kube::cancellable_calls calls_;
  std::chrono::milliseconds timeout_;
};

}  // namespace

core::result<std::unique_ptr<server::ownership_lister>> make_kube_ownership_lister(
    const kube::api_access& access, const server::ownership_check_config& cfg) {
  auto ep = kube::resolve_endpoint(access);
  if (!ep) return std::move(ep).error();
  return std::unique_ptr<server::ownership_lister>(
      std::make_unique<kube_ownership_lister>(std::move(*ep), cfg.timeout));
}

}  // namespace topogate::cli

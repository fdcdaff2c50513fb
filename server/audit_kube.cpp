// The periodic audit's source: TopologySources and ModelDeployments listed from the
// Kubernetes API through topogate_kube's client, page by page, every call bounded by the
// run's deadline.

#include <mutex>

#include "core/document.hpp"
#include "inventory/kube.hpp"
#include "inventory/kube_client.hpp"
#include "server/audit_loop.hpp"
#include "server/kube_list.hpp"

namespace topogate::server {

namespace {

namespace kube = inventory::detail;
using clock = std::chrono::steady_clock;

class kube_audit_source final : public audit_source {
 public:
  kube_audit_source(kube::kube_endpoint ep, audit_config cfg, core::validation_options validation)
      : calls_(std::move(ep)), namespaces_(std::move(cfg.namespaces)), timeout_(cfg.timeout) {
    opts_.validation = std::move(validation);
    opts_.namespaces = namespaces_;
  }

  core::result<audit_outcome> run(clock::time_point deadline) override {
    return calls_.run<audit_outcome>(
        [&](kube::kube_client& client) { return list_all(client, deadline); });
  }

  void cancel() override { calls_.cancel(); }

 private:
  struct resource {
    std::vector<std::string> paths;     // one per scope, the preferred version's
    std::vector<std::string> fallback;  // the same in v1alpha1
    const char* what;
  };

  core::result<audit_outcome> list_all(kube::kube_client& client, clock::time_point deadline) {
    audit_outcome out;
    constexpr std::string_view base = "/apis/worker.gpustack.ai/";
    std::vector<resource> resources;
    resources.push_back({{std::string(base) + "v1/topologysources"},
                         {std::string(base) + "v1alpha1/topologysources"},
                         "topologysources"});
    resource md{{}, {}, "modeldeployments"};
    if (namespaces_.empty()) {
      md.paths.push_back(std::string(base) + "v1/modeldeployments");
      md.fallback.push_back(std::string(base) + "v1alpha1/modeldeployments");
    } else {
      for (const auto& ns : namespaces_) {
        md.paths.push_back(std::string(base) + "v1/namespaces/" + ns + "/modeldeployments");
        md.fallback.push_back(std::string(base) + "v1alpha1/namespaces/" + ns +
                              "/modeldeployments");
      }
    }
    resources.push_back(std::move(md));

    for (const auto& res : resources) {
      bool served = false;
      for (std::size_t i = 0; i < res.paths.size(); ++i) {
        // The API converts every object to the version asked for: v1 lists them all, and
        // v1alpha1 is asked only of an API that does not serve v1.
        auto listed = list(client, res.paths[i], out.report, deadline);
        if (!listed) return std::move(listed).error();
        if (!*listed) {
          listed = list(client, res.fallback[i], out.report, deadline);
          if (!listed) return std::move(listed).error();
        }
        served = served || *listed;
        // A missing CRD is missing in every namespace.
        if (!*listed) break;
      }
      if (!served) out.not_served.emplace_back(res.what);
    }
    // The Nodes' names and labels, for the ownership conflicts: a 403 is a note, not a failure.
    list_call nodes;
    nodes.deadline_name = "audit.timeout";
    nodes.timeout = timeout_;
    nodes.accept = metadata_list_accept;
    nodes.page_size = 500;
    nodes.tolerate_forbidden = true;
    auto listed_nodes =
        list_pages(client, "/api/v1/nodes", deadline, nodes, [&](const core::doc_node& page) {
          each_node(page, [&](std::string name, node_labels labels) {
            out.report.nodes_seen.emplace_back(std::move(name), std::move(labels));
            ++out.report.nodes;
          });
        });
    if (!listed_nodes) return std::move(listed_nodes).error();
    out.nodes_forbidden = *listed_nodes == listed::forbidden;
    diagnose::finish(out.report);
    return out;
  }

  // Every page of `path` into `report`; false when the API does not serve it (404).
  core::result<bool> list(kube::kube_client& client, const std::string& path,
                          diagnose::audit_report& report, clock::time_point deadline) {
    list_call call;
    call.deadline_name = "audit.timeout";
    call.timeout = timeout_;
    // Small pages: a run holds one page at a time, and a ModelDeployment can be large.
    call.page_size = 100;
    call.forbidden_hint =
        "topogate's ServiceAccount needs list on topologysources and modeldeployments";
    auto r = list_pages(client, path, deadline, call, [&](const core::doc_node& page) {
      diagnose::audit_objects(report, page, opts_);
    });
    if (!r) return std::move(r).error();
    return *r == listed::ok;
  }

  cancellable_calls calls_;
  std::vector<std::string> namespaces_;
  std::chrono::milliseconds timeout_;
  diagnose::audit_options opts_;
};

}  // namespace

core::result<std::unique_ptr<audit_source>> make_kube_audit_source(
    const inventory::store_config& api, const audit_config& cfg,
    const core::validation_options& validation) {
  auto ep = kube::resolve_endpoint(api);
  if (!ep) return std::move(ep).error();
  return std::unique_ptr<audit_source>(
      std::make_unique<kube_audit_source>(std::move(*ep), cfg, validation));
}

}  // namespace topogate::server

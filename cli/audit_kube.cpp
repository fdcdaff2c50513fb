// The audit's lists on the Kubernetes API: TopologySources and ModelDeployments (v1, else
// v1alpha1), then the Nodes' metadata, page by page through kube/'s pager.

#include "cli/audit_kube.hpp"

#include <string>
#include <vector>

#include "core/document.hpp"

namespace topogate::cli {

namespace {

using clock = std::chrono::steady_clock;

struct resource {
  std::vector<std::string> paths;     // one per scope, the preferred version's
  std::vector<std::string> fallback;  // the same in v1alpha1
  const char* what;
};

std::vector<resource> resources(const std::vector<std::string>& namespaces) {
  const std::string base = "/apis/worker.gpustack.ai/";
  std::vector<resource> out;
  out.push_back(
      {{base + "v1/topologysources"}, {base + "v1alpha1/topologysources"}, "topologysources"});
  resource md{{}, {}, "modeldeployments"};
  if (namespaces.empty()) {
    md.paths.push_back(base + "v1/modeldeployments");
    md.fallback.push_back(base + "v1alpha1/modeldeployments");
  } else {
    for (const auto& ns : namespaces) {
      md.paths.push_back(base + "v1/namespaces/" + ns + "/modeldeployments");
      md.fallback.push_back(base + "v1alpha1/namespaces/" + ns + "/modeldeployments");
    }
  }
  out.push_back(std::move(md));
  return out;
}

}  // namespace

core::result<server::audit_outcome> audit_from_api(kube::client& api,
                                                   const diagnose::audit_options& opts,
                                                   const kube::list_options& pages) {
  server::audit_outcome out;
  kube::list_options objects = pages;
  objects.page_size = 100;
  const auto check = [&](const core::doc_node& page) {
    diagnose::audit_objects(out.report, page, opts);
  };
  for (const auto& res : resources(opts.namespaces)) {
    bool served = false;
    for (std::size_t i = 0; i < res.paths.size(); ++i) {
      // The API converts every object to the version asked for: v1 lists them all, and
      // v1alpha1 is asked only of an API that does not serve v1.
      auto listed = kube::list_pages(api, res.paths[i], objects, check);
      if (listed && *listed == kube::listed::not_served)
        listed = kube::list_pages(api, res.fallback[i], objects, check);
      if (!listed) return std::move(listed).error();
      // A missing CRD is missing in every namespace.
      if (*listed == kube::listed::not_served) break;
      served = true;
    }
    if (!served) out.not_served.emplace_back(res.what);
  }
  kube::list_options nodes = pages;
  nodes.accept = kube::metadata_list_accept;
  nodes.page_size = kube::node_list_page;
  nodes.tolerate_forbidden = true;
  auto listed_nodes =
      kube::list_pages(api, "/api/v1/nodes", nodes, [&](const core::doc_node& page) {
        kube::each_node(page, [&](std::string name, kube::node_labels labels) {
          out.report.nodes_seen.emplace_back(std::move(name), std::move(labels));
          ++out.report.nodes;
        });
      });
  if (!listed_nodes) return std::move(listed_nodes).error();
  out.nodes_forbidden = *listed_nodes == kube::listed::forbidden;
  diagnose::finish(out.report);
  return out;
}

namespace {

class kube_audit_source final : public server::audit_source {
 public:
  kube_audit_source(kube::endpoint ep, const server::audit_config& cfg,
                    core::validation_options validation)
      : calls_(std::move(ep)), timeout_(cfg.timeout) {
    opts_.validation = std::move(validation);
    opts_.namespaces = cfg.namespaces;
  }

  core::result<server::audit_outcome> run(clock::time_point deadline) override {
    kube::list_options pages;
    pages.deadline = deadline;
    pages.deadline_name = "audit.timeout";
    pages.deadline_setting = timeout_;
    pages.page_timeout = timeout_;
    pages.forbidden_hint =
        "topogate's ServiceAccount needs list on topologysources and modeldeployments";
    return calls_.run<server::audit_outcome>(
        [&](kube::client& api) { return audit_from_api(api, opts_, pages); });
  }

  void cancel() override { calls_.cancel(); }

 private:
  kube::cancellable_calls calls_;
  std::chrono::milliseconds timeout_;
  diagnose::audit_options opts_;
};

}  // namespace

core::result<std::unique_ptr<server::audit_source>> make_kube_audit_source(
    const kube::api_access& access, const server::audit_config& cfg,
    const core::validation_options& validation) {
  auto ep = kube::resolve_endpoint(access);
  if (!ep) return std::move(ep).error();
  return std::unique_ptr<server::audit_source>(
      std::make_unique<kube_audit_source>(std::move(*ep), cfg, validation));
}

}  // namespace topogate::cli

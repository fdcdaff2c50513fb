// The periodic audit's source: TopologySources and ModelDeployments listed from the
// Kubernetes API through topogate_kube's client, page by page, every call bounded by the
// run's deadline.

#include <mutex>

#include "core/document.hpp"
#include "inventory/kube.hpp"
#include "inventory/kube_client.hpp"
#include "server/audit_loop.hpp"

namespace topogate::server {

namespace {

namespace kube = inventory::detail;
using clock = std::chrono::steady_clock;

// Small pages: a run holds one page at a time, and a ModelDeployment can be large.
constexpr int page_size = 100;

// A page of 100 objects of up to 1.5 MiB each, nested as deep as a ModelDeployment's spec.
core::decode_limits page_limits() {
  core::decode_limits limits;
  limits.max_bytes = 256u << 20;
  limits.max_depth = 128;
  limits.max_expanded_nodes = std::size_t{1} << 26;
  return limits;
}

// The API's answer to a list that did not succeed: the call, the status and, for a Status
// body, its message (the API never echoes the request's credentials there).
std::string api_failure(const std::string& path, const kube::kube_client::response& r) {
  if (r.status == 0) return "GET " + path + ": " + r.error;
  std::string out = "GET " + path + ": HTTP " + std::to_string(r.status);
  const auto d = core::decode_json(r.body);
  if (d.ok()) {
    if (const auto* m = d.root.find("message"); m != nullptr && m->is_scalar()) {
      out += ": " + m->text.substr(0, 300);
    }
  }
  if (r.status == 401) out += " (topogate's API credentials were refused)";
  if (r.status == 403)
    out += " (topogate's ServiceAccount needs list on topologysources and modeldeployments)";
  return out;
}

std::string seconds(std::chrono::milliseconds d) {
  std::string out = std::to_string(d.count() / 1000);
  if (const auto ms = d.count() % 1000; ms != 0) {
    std::string frac = std::to_string(1000 + ms).substr(1);
    while (frac.back() == '0') frac.pop_back();
    out += "." + frac;
  }
  return out + "s";
}

class kube_audit_source final : public audit_source {
 public:
  kube_audit_source(kube::kube_endpoint ep, audit_config cfg, core::validation_options validation)
      : ep_(std::move(ep)), namespaces_(std::move(cfg.namespaces)), timeout_(cfg.timeout) {
    opts_.validation = std::move(validation);
    opts_.namespaces = namespaces_;
  }

  core::result<audit_outcome> run(clock::time_point deadline) override {
    // One client per run, so that cancel() stops exactly the call in progress.
    kube::kube_client client(ep_);
    {
      std::lock_guard lock(mu_);
      if (cancelled_) return core::fail(core::errc::unavailable, "the server is shutting down");
      active_ = &client;
    }
    auto r = list_all(client, deadline);
    std::lock_guard lock(mu_);
    active_ = nullptr;
    return r;
  }

  void cancel() override {
    std::lock_guard lock(mu_);
    cancelled_ = true;
    if (active_ != nullptr) active_->cancel();
  }

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
    diagnose::finish(out.report);
    return out;
  }

  // Every page of `path` into `report`; false when the API does not serve it (404).
  core::result<bool> list(kube::kube_client& client, const std::string& path,
                          diagnose::audit_report& report, clock::time_point deadline) {
    std::string cont;
    do {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock::now());
      if (left.count() <= 0) {
        return core::fail(core::errc::unavailable,
                          "GET " + path + ": the run's deadline (audit.timeout, " +
                              seconds(timeout_) + ") passed before the API answered");
      }
      std::string target = path + "?limit=" + std::to_string(page_size);
      if (!cont.empty()) target += "&continue=" + kube::url_encode(cont);
      const auto r = client.request("GET", target, {}, left);
      if (r.status == 0 && clock::now() >= deadline) {
        return core::fail(core::errc::unavailable,
                          "GET " + path + ": no answer within the run's deadline (audit.timeout, " +
                              seconds(timeout_) + "): " + r.error);
      }
      if (r.status == 404 && cont.empty()) return false;
      if (r.status != 200) return core::fail(core::errc::unavailable, api_failure(path, r));
      const auto d = core::decode_json(r.body, "", page_limits());
      if (!d.ok()) {
        return core::fail(
            core::errc::invalid_argument,
            "GET " + path + ": the answer is not a list: " + d.errors.front().to_string());
      }
      if (const auto* kind = d.root.find("kind");
          kind == nullptr || !kind->is_scalar() || !kind->text.ends_with("List")) {
        return core::fail(core::errc::invalid_argument,
                          "GET " + path + ": the answer is not a list");
      }
      diagnose::audit_objects(report, d.root, opts_);
      const core::doc_node* meta = d.root.find("metadata");
      const core::doc_node* c = meta != nullptr ? meta->find("continue") : nullptr;
      cont = c != nullptr && c->is_scalar() ? c->text : std::string();
    } while (!cont.empty());
    return true;
  }

  kube::kube_endpoint ep_;
  std::vector<std::string> namespaces_;
  std::chrono::milliseconds timeout_;
  diagnose::audit_options opts_;
  std::mutex mu_;
  bool cancelled_ = false;               // mu_
  kube::kube_client* active_ = nullptr;  // mu_
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

// The objects `topogate diagnose` reads, from the Kubernetes API (cli/diagnose_kube.hpp).

#include "cli/diagnose_kube.hpp"

#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include "core/document.hpp"

namespace topogate::cli {

core::result<bool> list_diagnose_path(kube::client& api, diagnose::cluster_objects& objects,
                                      const std::string& path, const kube::list_options& pages,
                                      const std::function<void(const core::error_list&)>& warn) {
  auto listed = kube::list_pages(api, path, pages, [&](const core::doc_node& page) {
    auto errors = diagnose::add_object(objects, page, "");
    for (auto& e : errors) e.path = e.path.empty() ? path : path + ": " + e.path;
    warn(errors);
  });
  if (!listed) return std::move(listed).error();
  return *listed == kube::listed::ok;
}

core::result<void> list_diagnose_objects(kube::client& api, diagnose::cluster_objects& objects,
                                         const kube::list_options& pages, bool nfd_hop,
                                         const std::function<void(const std::string&)>& note,
                                         const std::function<void(const core::error_list&)>& warn) {
  struct resource {
    std::vector<std::string> paths;  // preferred version first
    const char* what;
    // A kind that only refines the answer (Kueue's request adjustments, namespace labels,
    // the NFD hop): a caller not allowed to list it gets a note, not a failure, so an RBAC
    // written before diagnose read it keeps working.
    bool optional = false;
  };
  const std::vector<resource> resources = {
      {{"/api/v1/nodes"}, "nodes"},
      // Terminated Pods request nothing the diagnosis counts; the API leaves them out.
      {{"/api/v1/pods?fieldSelector=" +
        kube::url_encode("status.phase!=Succeeded,status.phase!=Failed")},
       "pods"},
      {{"/apis/kueue.x-k8s.io/v1beta2/topologies", "/apis/kueue.x-k8s.io/v1beta1/topologies"},
       "topologies"},
      {{"/apis/kueue.x-k8s.io/v1beta2/resourceflavors",
        "/apis/kueue.x-k8s.io/v1beta1/resourceflavors"},
       "resourceflavors"},
      {{"/apis/kueue.x-k8s.io/v1beta2/clusterqueues", "/apis/kueue.x-k8s.io/v1beta1/clusterqueues"},
       "clusterqueues"},
      // Cohort objects: their own quota and parents (without them a cohort is its
      // ClusterQueues alone).
      {{"/apis/kueue.x-k8s.io/v1beta2/cohorts", "/apis/kueue.x-k8s.io/v1alpha1/cohorts"},
       "cohorts",
       true},
      {{"/apis/kueue.x-k8s.io/v1beta2/localqueues", "/apis/kueue.x-k8s.io/v1beta1/localqueues"},
       "localqueues"},
      {{"/apis/kueue.x-k8s.io/v1beta2/workloads", "/apis/kueue.x-k8s.io/v1beta1/workloads"},
       "workloads"},
      {{"/apis/worker.gpustack.ai/v1/topologysources",
        "/apis/worker.gpustack.ai/v1alpha1/topologysources"},
       "topologysources"},
      {{"/apis/worker.gpustack.ai/v1/modeldeployments",
        "/apis/worker.gpustack.ai/v1alpha1/modeldeployments"},
       "modeldeployments"},
      // A ClusterQueue's AdmissionChecks, missing or inactive (without them its Active
      // condition says).
      {{"/apis/kueue.x-k8s.io/v1beta2/admissionchecks",
        "/apis/kueue.x-k8s.io/v1beta1/admissionchecks"},
       "admissionchecks",
       true},
      // What Kueue applies to a Workload's Pod template before it counts the requests.
      {{"/api/v1/limitranges"}, "limitranges", true},
      {{"/apis/node.k8s.io/v1/runtimeclasses"}, "runtimeclasses", true},
      // Their labels, for the ClusterQueues' namespaceSelector.
      {{"/api/v1/namespaces"}, "namespaces", true},
      // The NFD hop: what the consumer wrote for writing sources (404: no CRD, a finding).
      {{"/apis/nfd.k8s-sigs.io/v1alpha1/nodefeatures"}, "nodefeatures", true},
  };
  // Only the chain reads the NFD hop, and only for writing sources (listed before).
  const auto wants_nfd = [&] {
    return nfd_hop && std::any_of(objects.sources.begin(), objects.sources.end(),
                                  [](const auto& s) { return s.writes; });
  };
  for (const auto& res : resources) {
    const bool nfd = std::string_view(res.what) == "nodefeatures";
    if (nfd && !wants_nfd()) continue;
    bool found = false;
    bool refused = false;
    for (const auto& p : res.paths) {
      auto listed = list_diagnose_path(api, objects, p, pages, warn);
      if (!listed && res.optional && listed.error().code == core::errc::forbidden) {
        note("not allowed to list " + std::string(res.what) +
             " (HTTP 403): the answer leaves them out (docs/operations.md lists the RBAC)");
        refused = true;
        break;
      }
      if (!listed) return std::move(listed).error();
      found = *listed;
      if (found) break;
    }
    if (found && nfd) objects.node_features_read = true;
    if (!found && !refused) {
      note("the API serves no " + std::string(res.what));
    }
  }
  return {};
}

void list_notes::note(const std::string& text) { notes_.push_back(text); }

void list_notes::warn(const core::error_list& errors) {
  for (const auto& e : errors)
    if (field_errors_++ < max_field_errors)
      notes_.push_back("a listed object is read without a field: " + e.to_string());
}

std::vector<std::string> list_notes::take() {
  std::vector<std::string> out = std::move(notes_);
  notes_.clear();
  if (field_errors_ > max_field_errors)
    out.push_back(std::to_string(field_errors_ - max_field_errors) +
                  " more listed fields are not read (the first " +
                  std::to_string(max_field_errors) + " are named)");
  field_errors_ = 0;
  return out;
}

namespace {

class kube_cluster_lister final : public server::cluster_lister {
 public:
  explicit kube_cluster_lister(kube::endpoint ep) : calls_(std::move(ep)) {}

  core::result<diagnose::cluster_objects> list(
      std::chrono::steady_clock::time_point deadline) override {
    kube::list_options pages;
    pages.deadline = deadline;
    pages.deadline_name = "the dry run's workloadImpact lists";
    pages.forbidden_hint =
        "topogate's ServiceAccount needs list on nodes, pods and Kueue's topologies, "
        "resourceflavors, clusterqueues, localqueues and workloads (the chart's "
        "workloadImpact.rbac)";
    return calls_.run<diagnose::cluster_objects>(
        [&](kube::client& api) -> core::result<diagnose::cluster_objects> {
          diagnose::cluster_objects objects;
          list_notes notes;
          auto listed = list_diagnose_objects(
              api, objects, pages, false, [&](const std::string& n) { notes.note(n); },
              [&](const core::error_list& e) { notes.warn(e); });
          if (!listed) return std::move(listed).error();
          objects.list_notes = notes.take();
          return objects;
        });
  }

 private:
  kube::cancellable_calls calls_;
};

}  // namespace

core::result<std::unique_ptr<server::cluster_lister>> make_kube_cluster_lister(
    const kube::api_access& access) {
  auto ep = kube::resolve_endpoint(access);
  if (!ep) return std::move(ep).error();
  return std::unique_ptr<server::cluster_lister>(
      std::make_unique<kube_cluster_lister>(std::move(*ep)));
}

}  // namespace topogate::cli

#pragma once
// The cluster objects `topogate diagnose` reads, listed from the Kubernetes API (every list
// paged): Nodes, Pods, Kueue's topologies, resourceflavors, clusterqueues, localqueues and
// workloads (v1beta2, else v1beta1), GPUStack's topologysources and modeldeployments,
// LimitRanges, RuntimeClasses, Namespaces and, for the chain's NFD hop, NodeFeatures. Shared by
// the command (cli/diagnose.cpp) and the server's dry-run Workload answer.

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/field_error.hpp"
#include "core/result.hpp"
#include "diagnose/cluster_objects.hpp"
#include "kube/client.hpp"
#include "kube/endpoint.hpp"
#include "kube/list.hpp"
#include "server/workload_impact.hpp"

namespace topogate::cli {

// Every page of `path` added to `objects`, the field errors (their paths under `path`) to
// `warn`; false when the API does not serve it (404).
core::result<bool> list_diagnose_path(kube::client& api, diagnose::cluster_objects& objects,
                                      const std::string& path, const kube::list_options& pages,
                                      const std::function<void(const core::error_list&)>& warn);

// Adds every listed object to `objects`. A kind that only refines the answer and that the
// caller may not list (403), or a kind the API does not serve, is a `note`; field errors go
// to `warn`. `nfd_hop`: NodeFeatures too, when a writing TopologySource was listed.
core::result<void> list_diagnose_objects(kube::client& api, diagnose::cluster_objects& objects,
                                         const kube::list_options& pages, bool nfd_hop,
                                         const std::function<void(const std::string&)>& note,
                                         const std::function<void(const core::error_list&)>& warn);

// The notes of the dry run's lists (cluster_objects::list_notes): each `note` as it is, and
// the first max_field_errors field errors `warn` is given; the rest are counted in one last
// note.
class list_notes {
 public:
  static constexpr std::size_t max_field_errors = 8;
  void note(const std::string& text);
  void warn(const core::error_list& errors);
  [[nodiscard]] std::vector<std::string> take();

 private:
  std::vector<std::string> notes_;
  std::size_t field_errors_ = 0;
};

// The lister of a dry run's Workload answer (server/workload_impact.hpp) on the API `access`
// names: every list of one dry run within its deadline; the kinds that only refine the answer
// are left out when the ServiceAccount may not list them, and the objects' list_notes say so.
core::result<std::unique_ptr<server::cluster_lister>> make_kube_cluster_lister(
    const kube::api_access& access);

}  // namespace topogate::cli

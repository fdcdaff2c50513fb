#pragma once
// The audit on the Kubernetes API, for `topogate audit` (audit.cpp) and the server's periodic
// audit (server/audit_loop.hpp's audit_source, handed to serve by serve.cpp): the same lists,
// the same fallbacks, the same report.

#include <chrono>
#include <memory>

#include "core/result.hpp"
#include "core/topology_source.hpp"
#include "diagnose/audit.hpp"
#include "kube/client.hpp"
#include "kube/endpoint.hpp"
#include "kube/list.hpp"
#include "server/audit_loop.hpp"
#include "server/config.hpp"

namespace topogate::cli {

// Lists every TopologySource, the ModelDeployments of `opts.namespaces` (empty: every
// namespace) and the Nodes' names and labels (for the ownership conflicts), checking each page
// into the outcome's report as it arrives; then finishes the report. `pages` says how each
// list is paged and bounded (its page size applies to the Nodes only: objects come 100 to a
// page, a ModelDeployment can be large). A resource the API does not serve (no CRD) is in
// `not_served`; Nodes the caller may not list (403) are `nodes_forbidden`, not a failure.
core::result<server::audit_outcome> audit_from_api(kube::client& api,
                                                   const diagnose::audit_options& opts,
                                                   const kube::list_options& pages);

// The periodic audit's source on the API `access` names: every run lists with a client of its
// own, every call bounded by the run's deadline (audit.timeout). errc::invalid_argument when
// no API server is known.
core::result<std::unique_ptr<server::audit_source>> make_kube_audit_source(
    const kube::api_access& access, const server::audit_config& cfg,
    const core::validation_options& validation);

}  // namespace topogate::cli

#pragma once
// The admission ownership view's lister on the Kubernetes API (server/ownership_view.hpp's
// ownership_lister, handed to serve by serve.cpp): TopologySources in full, Nodes as metadata,
// every call bounded by the list's deadline (admission.ownershipCheck.timeout).

#include <memory>

#include "core/result.hpp"
#include "kube/endpoint.hpp"
#include "server/config.hpp"
#include "server/ownership_view.hpp"

namespace topogate::cli {

// errc::invalid_argument when no API server is known.
core::result<std::unique_ptr<server::ownership_lister>> make_kube_ownership_lister(
    const kube::api_access& access, const server::ownership_check_config& cfg);

}  // namespace topogate::cli

#pragma once
// The Kubernetes API as topogate uses it: the revision store (one ConfigMap per inventory)
// and the Node list/watch, built by whoever runs the registry (serve) and handed to it
// (registry_deps). Part of the topogate_kube library: a build without the Kubernetes
// client (the fuzz targets) links the registry without it.

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "core/nodes.hpp"
#include "core/result.hpp"
#include "inventory/registry.hpp"
#include "inventory/store.hpp"

namespace topogate::inventory {

using log_fn = std::function<void(std::string_view level, std::string_view message)>;

// One ConfigMap `topogate-<inventory>` per inventory in the namespace, written with
// optimistic concurrency on metadata.resourceVersion and watched. Fails with
// errc::invalid_argument when the configuration does not say where the API is.
core::result<std::unique_ptr<revision_store>> make_kube_store(const store_config& cfg, log_fn log);
core::result<std::unique_ptr<node_watch>> make_node_watch(const store_config& cfg, log_fn log);

// Everything `cfg` asks for: the file or kubernetes store, and a Node watch when
// `watch_nodes` (some inventory lists Nodes through the API). What cannot be built is left
// null with its error, which the registry reports (pushes refused, a log line).
registry_deps make_dependencies(const store_config& cfg, bool watch_nodes, const log_fn& log);

namespace detail {
// A credential obtained when a call is made (a kubeconfig's exec credential plugin): a
// bearer token, a client certificate and key (PEM), or both.
struct kube_credential {
  std::string token;
  std::string client_cert_pem, client_key_pem;
};
// Called before every call with `refresh` false (a cached credential is fine), and once
// more with `refresh` true after the API answered 401 to the credential it gave.
using kube_credential_fn = std::function<core::result<kube_credential>(bool refresh)>;

// Where the API is and how to authenticate: explicit settings, else the in-cluster
// defaults (KUBERNETES_SERVICE_HOST/PORT, the ServiceAccount token and CA). Fails with
// errc::invalid_argument (a URL that is not https://, no API server known).
// Files are re-read for every call (projected tokens and mounted certificates rotate).
struct kube_endpoint {
  std::string host;
  std::string port = "443";
  std::string token_file;  // empty: no bearer token from a file
  std::string ca_file;
  // The rest is what a kubeconfig can carry besides; empty members are unused.
  std::string token;   // a fixed bearer token (token_file wins when both are set)
  std::string ca_pem;  // the CA inline, instead of ca_file
  std::string client_cert_file, client_key_file;  // a client certificate (PEM files)
  std::string client_cert_pem, client_key_pem;    // or inline (PEM)
  std::string tls_server_name;     // the name the API's certificate must carry, and the SNI
  kube_credential_fn credentials;  // its token and certificate win over the fixed ones
};
core::result<kube_endpoint> resolve_endpoint(const store_config& cfg);

// Loads a client certificate (chain) and its private key into an OpenSSL context and checks
// that they belong together; errc::invalid_argument names the problem, never the data.
core::result<void> check_client_identity(std::string_view cert_pem, std::string_view key_pem);
}  // namespace detail

}  // namespace topogate::inventory

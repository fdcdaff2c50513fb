#pragma once
// Where the Kubernetes API is and how a call authenticates to it: explicit settings (a server
// URL, a token file, a CA file), the in-cluster defaults, or what a kubeconfig says
// (kubeconfig.hpp). The client (client.hpp) re-reads every file for every call: projected
// ServiceAccount tokens and mounted certificates rotate.

#include <functional>
#include <string>
#include <string_view>

#include "core/result.hpp"

namespace topogate::kube {

// A credential obtained when a call is made (a kubeconfig's exec credential plugin): a
// bearer token, a client certificate and key (PEM), or both.
struct credential {
  std::string token;
  std::string client_cert_pem, client_key_pem;
};
// Called before every call with `refresh` false (a cached credential is fine), and once
// more with `refresh` true after the API answered 401 to the credential it gave.
using credential_fn = std::function<core::result<credential>(bool refresh)>;

struct endpoint {
  std::string host;
  std::string port = "443";
  std::string token_file;  // empty: no bearer token from a file
  std::string ca_file;
  // The rest is what a kubeconfig can carry besides; empty members are unused.
  std::string token;   // a fixed bearer token (token_file wins when both are set)
  std::string ca_pem;  // the CA inline, instead of ca_file
  std::string client_cert_file, client_key_file;  // a client certificate (PEM files)
  std::string client_cert_pem, client_key_pem;    // or inline (PEM)
  std::string tls_server_name;  // the name the API's certificate must carry, and the SNI
  credential_fn credentials;    // its token and certificate win over the fixed ones
};

// The API as a configuration or the command line names it. Empty members take the
// in-cluster defaults: KUBERNETES_SERVICE_HOST/PORT, the ServiceAccount's token and CA.
struct api_access {
  std::string server;  // https://HOST[:PORT]
  std::string token_file;
  std::string ca_file;
};

// Fails with errc::invalid_argument: a server that is not an https:// URL, or none given
// outside a cluster.
core::result<endpoint> resolve_endpoint(const api_access& access);

// Loads a client certificate (chain) and its private key into an OpenSSL context and checks
// that they belong together; errc::invalid_argument names the problem, never the data.
core::result<void> check_client_identity(std::string_view cert_pem, std::string_view key_pem);

}  // namespace topogate::kube

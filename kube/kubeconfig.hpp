#pragma once
// Kubeconfigs, as kubectl reads them: the files (one, or $KUBECONFIG's list, merged as kubectl
// merges it), a context resolved to its cluster and user, and the credentials clusters issue
// (bearer tokens, client certificates, exec credential plugins). Inline credentials stay in
// memory; nothing here prints a credential. The command line's connection flags (which file,
// which context) are cli/'s (cli/kube_flags.hpp).

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/result.hpp"
#include "kube/client.hpp"
#include "kube/endpoint.hpp"
#include "kube/exec_credential.hpp"

namespace topogate::kube {

// One context of a kubeconfig, resolved: relative paths made absolute against the folder of
// the file that defined the entry, inline data decoded.
struct kubeconfig_target {
  std::string context;         // its name
  std::string namespace_name;  // the context's namespace; empty when it names none
  std::string server;
  std::string ca_file, ca_pem;  // exactly one is set
  std::string tls_server_name;
  std::string token, token_file;  // tokenFile wins when both are set (as in client-go)
  std::string client_cert_file, client_key_file;  // both or neither
  std::string client_cert_pem, client_key_pem;    // both or neither
  std::optional<exec_config> exec;
};

// Reads the kubeconfig `files` (one, or $KUBECONFIG's list: the first file to name a cluster,
// user or context wins, as does the first current-context; missing files of a list are
// skipped) and resolves `context` (empty: the current context). Every field kubectl's
// kubeconfigs use is read; the ones topogate will not honour (insecure-skip-tls-verify,
// proxy-url, auth-provider, basic auth, impersonation) are refused, never ignored.
core::result<kubeconfig_target> load_kubeconfig(const std::vector<std::string>& files,
                                                const std::string& context,
                                                bool files_must_exist = true);

// Where to connect: a kubeconfig's context, or else explicit access (all empty: in-cluster).
struct connect_options {
  std::vector<std::string> kubeconfigs;  // empty: no kubeconfig
  bool kubeconfigs_must_exist = true;    // false for $KUBECONFIG's list
  std::string context;                   // empty: the current context
  api_access access;                     // without a kubeconfig
  exec_run_options exec = default_exec_run_options();
};

struct connection {
  std::optional<client> api;
  std::string context;            // the kubeconfig context used (empty without a kubeconfig)
  std::string default_namespace;  // the context's namespace (kubectl's default for -n)
  std::shared_ptr<exec_credential_source> exec;  // the context's exec plugin, if any
};

// Connects as `o` says (no request is made yet; an exec plugin runs at the first one).
core::result<void> connect(const connect_options& o, connection& out);

}  // namespace topogate::kube

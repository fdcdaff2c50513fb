#pragma once
// How the operations commands (diagnose, audit) reach the Kubernetes API: kubectl's
// connection flags, the kubeconfigs they name (merged as kubectl merges $KUBECONFIG), the
// credentials clusters issue (bearer tokens, client certificates, exec credential plugins),
// and paged LISTs. Inline credentials stay in memory; nothing here prints a credential.

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cli/exec_credential.hpp"
#include "core/document.hpp"
#include "core/result.hpp"
#include "inventory/kube_client.hpp"

namespace topogate::cli {

// Run as kubectl's plugin (the binary called as kubectl-topogate, which `kubectl topogate`
// runs): usage names `kubectl topogate`, and the connection defaults follow kubectl's order
// ($KUBECONFIG, ~/.kube/config, then the Pod's ServiceAccount).
void set_kubectl_plugin(bool on);
[[nodiscard]] bool kubectl_plugin();
// "topogate" or "kubectl topogate", for usage lines and messages.
[[nodiscard]] std::string_view program_name();

struct kube_flags {
  std::string kubeconfig, context, server, token_file, ca_file;
  bool in_cluster = false;
  bool saw_kubeconfig = false;  // --kubeconfig given (not just $KUBECONFIG)
};

// The usage lines for the connection flags.
extern const std::string_view kube_flags_usage;

// True when NAME is a connection flag that takes a value (--kubeconfig, --context, ...).
bool is_kube_value_flag(std::string_view name);
// Records one connection flag; NAME must satisfy is_kube_value_flag or be --in-cluster.
void set_kube_flag(kube_flags& f, std::string_view name, const std::string& value);

// Checks the combination and applies kubectl's defaults when no connection flag was given
// and `offline` is false (in a Pod the ServiceAccount, elsewhere $KUBECONFIG; as kubectl's
// plugin $KUBECONFIG, ~/.kube/config, then the ServiceAccount). Returns a usage error
// message, or nothing.
std::optional<std::string> finish_kube_flags(kube_flags& f, bool offline);

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

struct kube_connection {
  std::optional<inventory::detail::kube_client> client;
  std::string context;            // the kubeconfig context used (empty without a kubeconfig)
  std::string default_namespace;  // the context's namespace (kubectl's default for -n)
  std::shared_ptr<exec_credential_source> exec;  // the context's exec plugin, if any
};

// Connects as the flags say (no request is made yet; an exec plugin runs at the first one).
core::result<void> connect(const kube_flags& f, kube_connection& out);
// The same with explicit options for the exec plugin (tests).
core::result<void> connect(const kube_flags& f, kube_connection& out, const exec_run_options& exec);

// The input files of an offline command, as `kubectl get -o json` wrote them: every
// *.json, *.yaml and *.yml file of `dir` not starting with "." (sorted; none is an error),
// then `files` ("-" is stdin).
core::result<std::vector<std::string>> object_files(const std::string& dir,
                                                    const std::vector<std::string>& files);

// The limits for `kubectl get -o json` output and API lists: hundreds of MiB, deep nesting.
core::decode_limits list_limits();

// Lists one resource, every page (limit=500 with continue), handing each page's decoded List
// to `on_page`. false when the resource is not served (404: its CRD is not installed);
// errc::forbidden when the caller may not list it (403).
core::result<bool> list_resource(inventory::detail::kube_client& client, const std::string& path,
                                 const std::function<void(const core::doc_node&)>& on_page);

bool base64_decode(std::string_view in, std::string& out);

}  // namespace topogate::cli

#pragma once
// Exec credential plugins, as kubectl runs them (a kubeconfig's users[].user.exec, the
// client.authentication.k8s.io ExecCredential exchange): `aws eks get-token`,
// `gke-gcloud-auth-plugin`, `kubelogin`. The plugin runs without a shell, with the
// kubeconfig's args and env added to ours and KUBERNETES_EXEC_INFO describing the request;
// its stderr is ours, its stdout (the ExecCredential) is read up to a size limit and a
// deadline. Messages name the plugin and what is wrong, never what it printed.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/document.hpp"
#include "core/result.hpp"
#include "kube/endpoint.hpp"

namespace topogate::kube {

inline constexpr std::string_view exec_api_v1 = "client.authentication.k8s.io/v1";
inline constexpr std::string_view exec_api_v1beta1 = "client.authentication.k8s.io/v1beta1";

// Whether the plugin may talk to the user on the terminal (exec.interactiveMode).
enum class interactive_mode : std::uint8_t {
  never,         // its stdin is /dev/null
  if_available,  // our stdin when that is a terminal
  always,        // our stdin, which must be a terminal
};

struct exec_config {
  std::string command;  // as written: messages name it (never the args or env values)
  std::vector<std::string> args;
  std::vector<std::pair<std::string, std::string>> env;
  std::string api_version;  // exec_api_v1 or exec_api_v1beta1
  std::string install_hint;
  bool provide_cluster_info = false;
  interactive_mode interactive = interactive_mode::if_available;
  std::string base_dir;      // the kubeconfig's folder: a relative command with a '/' is in it
  std::string cluster_json;  // spec.cluster when provide_cluster_info (exec_cluster_json)
};

// Reads users[].user.exec; `where` names it in messages ("user \"eks\"").
core::result<exec_config> parse_exec_config(const core::doc_node& exec, std::string base_dir,
                                            const std::string& where);

// spec.cluster of KUBERNETES_EXEC_INFO: the server, the CA (base64, as
// certificate-authority-data), tls-server-name, and the cluster's
// client.authentication.k8s.io/exec extension as `config`.
std::string exec_cluster_json(std::string_view server, std::string_view ca_pem,
                              std::string_view tls_server_name, const core::doc_node* config);

// KUBERNETES_EXEC_INFO: an ExecCredential of the configured apiVersion with spec.interactive
// (and spec.cluster when provideClusterInfo).
std::string exec_info_json(const exec_config& cfg, bool interactive);

struct exec_credential {
  std::string token;
  std::string client_cert_pem, client_key_pem;
  std::optional<std::chrono::system_clock::time_point> expires;  // none: valid for the run
};

// The plugin's stdout: an ExecCredential of cfg.api_version with a token, or a client
// certificate and its key (checked to match), or both, and maybe an expirationTimestamp.
core::result<exec_credential> parse_exec_credential(std::string_view output,
                                                    const exec_config& cfg);

struct exec_run_options {
  std::chrono::milliseconds timeout = std::chrono::seconds(60);
  std::size_t max_output = 1u << 20;  // an ExecCredential with a certificate chain is a few KiB
  bool stdin_is_terminal = false;
};
// The defaults, with stdin_is_terminal from isatty(0).
exec_run_options default_exec_run_options();

// Runs the plugin once and returns its stdout. Fails (naming the plugin) when the command is
// not found (with the installHint), interactiveMode Always meets no terminal, it exits non-zero
// or on a signal, prints more than max_output, or has not finished by the timeout (it is
// then killed, with its process group when it had no terminal).
core::result<std::string> run_exec_plugin(const exec_config& cfg, const exec_run_options& opt);

// The credential of one run of topogate: the plugin runs when first asked, again when the
// credential has expired, and again when the caller says the API refused it (401).
class exec_credential_source {
 public:
  using clock_fn = std::function<std::chrono::system_clock::time_point()>;
  exec_credential_source(
      exec_config cfg, exec_run_options opt,
      clock_fn now = [] { return std::chrono::system_clock::now(); });

  core::result<credential> get(bool refresh);
  [[nodiscard]] int runs() const;  // how often the plugin ran

 private:
  exec_config cfg_;
  exec_run_options opt_;
  clock_fn now_;
  mutable std::mutex mu_;
  std::optional<exec_credential> cached_;
  int runs_ = 0;
};

}  // namespace topogate::kube

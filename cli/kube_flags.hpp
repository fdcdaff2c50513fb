#pragma once
// How the operations commands (diagnose, audit) are told where the Kubernetes API is:
// kubectl's connection flags and defaults, kubectl's plugin mode, and the input files of the
// offline form. What the flags name is read and connected to by kube/ (kube/kubeconfig.hpp).

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.hpp"
#include "kube/kubeconfig.hpp"

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

// What the flags say, as kube::connect takes it: --kubeconfig is one file, $KUBECONFIG a list
// whose missing files are skipped.
[[nodiscard]] kube::connect_options connect_options(const kube_flags& f);

// The input files of an offline command, as `kubectl get -o json` wrote them: every
// *.json, *.yaml and *.yml file of `dir` not starting with "." (sorted; none is an error),
// then `files` ("-" is stdin).
core::result<std::vector<std::string>> object_files(const std::string& dir,
                                                    const std::vector<std::string>& files);

}  // namespace topogate::cli

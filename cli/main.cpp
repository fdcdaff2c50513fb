// topogate: wires the command line to its commands; nothing else lives here.
#include <cstdio>
#include <string_view>
#include <vector>

#include "cli/commands.hpp"
#include "cli/kube_flags.hpp"

namespace {

// After "usage: topogate <command> [options]" (or "kubectl topogate ..." as kubectl's plugin).
constexpr std::string_view usage =
    "\n"
    "commands:\n"
    "  serve --config FILE             run the HTTPS server\n"
    "  demo [--dir DIR] [--port PORT]  make certificates and a sample inventory, then serve it\n"
    "  validate topologysource FILE    check a TopologySource (YAML or JSON)\n"
    "  validate snapshot FILE --source TOPOLOGYSOURCE_FILE [--nodes NODES_JSON]\n"
    "  validate modeldeployment FILE   check a ModelDeployment's role topology\n"
    "  validate nodelabels --source TOPOLOGYSOURCE_FILE --nodes NODES_JSON\n"
    "                                  check the hierarchy of the labels Nodes carry\n"
    "  diagnose chain [INPUT]          verify the scheduling chain (runbook checks)\n"
    "  diagnose pending WORKLOAD [INPUT]  the runbook's six Pending checks, per domain\n"
    "  diagnose change --revision FILE [INPUT]  Workloads a revision evicts, which fit again\n"
    "                                  INPUT: --from DIR, -f FILE, --kubeconfig FILE, ...\n"
    "  audit [-n NAMESPACE | -A] [INPUT]  re-check every TopologySource and ModelDeployment\n"
    "  review FILE                     answer an AdmissionReview request (stdout)\n"
    "  version                         print the version\n"
    "\n"
    "kubectl plugin: installed as kubectl-topogate (a link to topogate), so that\n"
    "  kubectl topogate diagnose pending NAME -n NAMESPACE --context CONTEXT\n"
    "uses kubectl's kubeconfig ($KUBECONFIG, ~/.kube/config) and flags\n";

void print_usage(std::FILE* out) {
  const std::string_view p = topogate::cli::program_name();
  std::fprintf(out, "usage: %.*s <command> [options]\n%.*s", static_cast<int>(p.size()), p.data(),
               static_cast<int>(usage.size()), usage.data());
}

// kubectl runs a plugin by its file name, kubectl-<name>: the install's kubectl-topogate link.
bool called_as_kubectl_plugin(std::string_view argv0) {
  const auto slash = argv0.rfind('/');
  return argv0.substr(slash == std::string_view::npos ? 0 : slash + 1) == "kubectl-topogate";
}

}  // namespace

int main(int argc, char** argv) {
  topogate::cli::set_kubectl_plugin(argc > 0 && called_as_kubectl_plugin(argv[0]));
  std::vector<std::string_view> args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "help" || args[0] == "--help" || args[0] == "-h") {
    print_usage(args.empty() ? stderr : stdout);
    return args.empty() ? 2 : 0;
  }
  const std::string_view cmd = args[0];
  const topogate::cli::args rest(args.data() + 1, args.size() - 1);
  if (cmd == "validate") return topogate::cli::run_validate(rest);
  if (cmd == "diagnose") return topogate::cli::run_diagnose(rest);
  if (cmd == "audit") return topogate::cli::run_audit(rest);
  if (cmd == "review") return topogate::cli::run_review(rest);
  if (cmd == "serve") return topogate::cli::run_serve(rest);
  if (cmd == "demo") return topogate::cli::run_demo(rest);
  if (cmd == "version" || cmd == "--version") return topogate::cli::run_version(rest);
  const std::string_view p = topogate::cli::program_name();
  std::fprintf(stderr, "%.*s: unknown command \"%.*s\"\n\n", static_cast<int>(p.size()), p.data(),
               static_cast<int>(cmd.size()), cmd.data());
  print_usage(stderr);
  return 2;
}

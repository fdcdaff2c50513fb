// topogate: wires the command line to its commands; nothing else lives here.
#include <cstdio>
#include <string_view>
#include <vector>

#include "cli/commands.hpp"

namespace {

constexpr std::string_view usage =
    "usage: topogate <command> [options]\n"
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
    "                                  INPUT: --from DIR, -f FILE, --kubeconfig FILE, ...\n"
    "  review FILE                     answer an AdmissionReview request (stdout)\n"
    "  version                         print the version\n";

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string_view> args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "help" || args[0] == "--help" || args[0] == "-h") {
    std::fputs(usage.data(), args.empty() ? stderr : stdout);
    return args.empty() ? 2 : 0;
  }
  const std::string_view cmd = args[0];
  const topogate::cli::args rest(args.data() + 1, args.size() - 1);
  if (cmd == "validate") return topogate::cli::run_validate(rest);
  if (cmd == "diagnose") return topogate::cli::run_diagnose(rest);
  if (cmd == "review") return topogate::cli::run_review(rest);
  if (cmd == "serve") return topogate::cli::run_serve(rest);
  if (cmd == "demo") return topogate::cli::run_demo(rest);
  if (cmd == "version" || cmd == "--version") return topogate::cli::run_version(rest);
  std::fprintf(stderr, "topogate: unknown command \"%.*s\"\n\n%s", static_cast<int>(cmd.size()),
               cmd.data(), usage.data());
  return 2;
}

// topogate audit: re-checks every TopologySource and ModelDeployment already in the cluster
// with the rules admission applies, read from `kubectl get -o json` files or from the
// Kubernetes API. Exit 0 clean, 1 violations found, 2 usage, I/O or API error.
#include "diagnose/audit.hpp"

#include <algorithm>
#include <cstdio>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cli/audit_kube.hpp"
#include "cli/commands.hpp"
#include "cli/kube_flags.hpp"
#include "core/document.hpp"
#include "core/result.hpp"
#include "core/syntax.hpp"
#include "kube/kubeconfig.hpp"
#include "kube/limits.hpp"
#include "util/file.hpp"

namespace topogate::cli {

namespace {

constexpr int exit_clean = 0;
constexpr int exit_violations = 1;
constexpr int exit_usage = 2;

constexpr std::string_view usage_head =
    "\n"
    "Re-checks every TopologySource and ModelDeployment (worker.gpustack.ai) with the rules\n"
    "admission applies (T1-T14, M1-M2): objects created before topogate was installed or\n"
    "admitted while its webhook was down. One line per violation:\n"
    "  KIND NAMESPACE/NAME: RULE path: message\n"
    "then a summary line. Objects of other kinds in the input are ignored.\n"
    "\n"
    "options:\n"
    "  -n, --namespace NS        only ModelDeployments in NS (TopologySources are\n"
    "                            cluster-scoped and always checked)\n"
    "  -A, --all-namespaces      every namespace (the default)\n"
    "  --worker-namespace NS     namespace every reference must use, as admission's\n"
    "                            admission.workerNamespace (default gpustack-system)\n"
    "  --reserved-prefix DOMAIN  also reserve DOMAIN for additionalWritePrefix, as\n"
    "                            admission.extraReservedPrefixes (repeatable)\n"
    "  --output text|json        result format (default text)\n"
    "\n"
    "input (offline: files exactly as `kubectl get KIND -o json` prints them):\n"
    "  --from DIR            every *.json, *.yaml and *.yml file in DIR\n"
    "  -f, --file FILE       one more file (repeatable; a List, a typed list or one object;\n"
    "                        - for stdin)\n"
    "input (online: list the objects from the Kubernetes API):\n";
constexpr std::string_view usage_tail =
    "\n"
    "exit status: 0 no violation, 1 violations found, 2 usage, I/O or API error\n";

std::string usage_text() {
  const std::string p(program_name());
  return "usage:\n  " + p + " audit [-n NAMESPACE | -A] [input] [--output text|json]\n" +
         std::string(usage_head) + std::string(kube_flags_usage) + std::string(usage_tail);
}

void say(std::string_view what, std::string_view message) {
  const std::string_view p = program_name();
  std::fprintf(stderr, "%.*s audit: %.*s%.*s\n", static_cast<int>(p.size()), p.data(),
               static_cast<int>(what.size()), what.data(), static_cast<int>(message.size()),
               message.data());
}

int usage_error(std::string_view message) {
  const std::string usage = usage_text();
  const std::string_view p = program_name();
  std::fprintf(stderr, "%.*s audit: %.*s\n\n%s", static_cast<int>(p.size()), p.data(),
               static_cast<int>(message.size()), message.data(), usage.c_str());
  return exit_usage;
}

int io_error(const std::string& message) {
  say("", message);
  return exit_usage;
}

struct options {
  std::string namespace_;  // -n; empty: every namespace
  bool all_namespaces = false;
  std::string from_dir;
  std::vector<std::string> files;
  kube_flags kube;
  bool json = false;
  diagnose::audit_options audit;
};

std::optional<int> parse_args(args a, options& o) {
  for (std::size_t i = 0; i < a.size(); ++i) {
    const std::string_view arg = a[i];
    if (arg == "-h" || arg == "--help") {
      const std::string usage = usage_text();
      std::fwrite(usage.data(), 1, usage.size(), stdout);
      return exit_clean;
    }
    if (arg.empty() || arg[0] != '-' || arg == "-")
      return usage_error("unexpected argument " + std::string(arg));
    if (arg == "--in-cluster") {
      set_kube_flag(o.kube, arg, {});
      continue;
    }
    if (arg == "-A" || arg == "--all-namespaces") {
      o.all_namespaces = true;
      continue;
    }
    std::string_view name = arg;
    std::optional<std::string_view> value;
    if (const auto eq = arg.find('='); eq != std::string_view::npos && arg.starts_with("--")) {
      name = arg.substr(0, eq);
      value = arg.substr(eq + 1);
    } else if (arg.size() > 2 && arg.starts_with("-n")) {
      // kubectl's shorthand forms -nNAMESPACE and -n=NAMESPACE.
      name = "-n";
      value = arg.substr(arg[2] == '=' ? 3 : 2);
    }
    static constexpr std::string_view valued[] = {
        "--output",           "--from",           "-f", "--file", "-n", "--namespace",
        "--worker-namespace", "--reserved-prefix"};
    if (std::find(std::begin(valued), std::end(valued), name) == std::end(valued) &&
        !is_kube_value_flag(name))
      return usage_error("unknown option " + std::string(arg));
    if (!value) {
      if (i + 1 >= a.size()) return usage_error(std::string(name) + " needs a value");
      value = a[++i];
    }
    const std::string v(*value);
    if (v.empty()) return usage_error(std::string(name) + " must not be empty");
    if (name == "--output") {
      if (v != "json" && v != "text") return usage_error("--output must be text or json");
      o.json = v == "json";
    } else if (name == "--from") {
      o.from_dir = v;
    } else if (name == "-f" || name == "--file") {
      o.files.push_back(v);
    } else if (name == "-n" || name == "--namespace") {
      if (!core::check_dns1123_label(v).empty())
        return usage_error(std::string(name) + " \"" + v + "\" is not a namespace name");
      o.namespace_ = v;
    } else if (name == "--worker-namespace") {
      if (!core::check_dns1123_label(v).empty())
        return usage_error("--worker-namespace \"" + v + "\" is not a namespace name");
      o.audit.validation.worker_namespace = v;
    } else if (name == "--reserved-prefix") {
      o.audit.validation.reserved_prefixes.push_back(v);
    } else {
      set_kube_flag(o.kube, name, v);
    }
  }
  if (o.all_namespaces && !o.namespace_.empty()) return usage_error("-n and -A are exclusive");
  if (!o.namespace_.empty()) o.audit.namespaces.push_back(o.namespace_);
  const bool offline = !o.from_dir.empty() || !o.files.empty();
  if (auto e = finish_kube_flags(o.kube, offline)) return usage_error(*e);
  return std::nullopt;
}

core::result<void> read_offline(const options& o, diagnose::audit_report& report) {
  auto files = object_files(o.from_dir, o.files);
  if (!files) return std::move(files).error();
  for (const auto& f : *files) {
    auto text = util::read_file(f == "-" ? "/dev/stdin" : f, kube::max_dump_bytes);
    if (!text) return std::move(text).error();
    // An undecodable file is an input error; a field error inside an object is a violation.
    const auto d = core::decode_any(*text, "", kube::list_limits(kube::max_dump_bytes));
    if (!d.ok()) {
      const auto& e = d.errors.front();
      return core::fail(core::errc::invalid_argument,
                        (f == "-" ? std::string("stdin") : f) + ": " +
                            (e.path.empty() ? e.to_string().substr(2) : e.to_string()));
    }
    diagnose::audit_objects(report, d.root, o.audit);
  }
  return {};
}

core::result<void> read_online(const options& o, diagnose::audit_report& report) {
  kube::connection conn;
  if (auto r = kube::connect(connect_options(o.kube), conn); !r) return r;
  auto listed = audit_from_api(*conn.api, o.audit, {});
  if (!listed) return std::move(listed).error();
  for (const auto& what : listed->not_served) {
    say("note: ", "the API serves no " + what +
                      ".worker.gpustack.ai (its CustomResourceDefinition is not installed); none "
                      "checked");
  }
  // An identity that may not list Nodes still gets the audit of the rules.
  if (listed->nodes_forbidden) {
    say("note: ",
        "Nodes not listed (the API refused: HTTP 403); ownership conflicts between "
        "TopologySources not checked");
  }
  report = std::move(listed->report);
  return {};
}

}  // namespace

int run_audit(args a) {
  options o;
  if (const auto done = parse_args(a, o)) return *done;
  diagnose::audit_report report;
  const bool offline = !o.from_dir.empty() || !o.files.empty();
  if (offline) {
    if (const auto read = read_offline(o, report); !read) return io_error(read.error().message);
    diagnose::finish(report);
  } else if (const auto read = read_online(o, report); !read) {
    return io_error(read.error().message);
  }
  if (report.ignored > 0) {
    say("note: ", std::to_string(report.ignored) + " object" + (report.ignored == 1 ? "" : "s") +
                      " of other kinds ignored");
  }
  if (report.out_of_scope > 0) {
    say("note: ", std::to_string(report.out_of_scope) + " ModelDeployment" +
                      (report.out_of_scope == 1 ? "" : "s") + " outside namespace " + o.namespace_ +
                      " left out");
  }
  const std::string out =
      o.json ? diagnose::render_audit_json(report) : diagnose::render_audit_text(report);
  std::fwrite(out.data(), 1, out.size(), stdout);
  std::fflush(stdout);
  return report.clean() ? exit_clean : exit_violations;
}

}  // namespace topogate::cli

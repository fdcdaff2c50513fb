// topogate diagnose {chain|pending WORKLOAD}: the runbook's "Verify the scheduling chain" and
// "Diagnose Pending workloads" over the cluster's objects, read from `kubectl get ... -o json`
// files or from the Kubernetes API. Exit 0 clean (chain) / not pending (pending), 1 findings /
// pending, 2 usage, I/O or API error.

#include "diagnose/diagnose.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cli/commands.hpp"
#include "cli/kube_connect.hpp"
#include "core/document.hpp"
#include "core/result.hpp"
#include "diagnose/cluster_objects.hpp"
#include "inventory/kube_client.hpp"
#include "server/file_util.hpp"

namespace topogate::cli {

namespace {

constexpr int exit_clean = 0;
constexpr int exit_findings = 1;
constexpr int exit_usage = 2;

constexpr std::size_t max_file_bytes = 512u << 20;

constexpr std::string_view usage_head =
    "\n"
    "WORKLOAD is a Kueue Workload, NAMESPACE/NAME or NAME: in the -n namespace, else in the\n"
    "kubeconfig context's namespace, else in any namespace.\n"
    "\n"
    "input (offline: files exactly as `kubectl get KIND -o json` prints them):\n"
    "  --from DIR            every *.json, *.yaml and *.yml file in DIR\n"
    "  -f, --file FILE       one more file (repeatable; a List, a typed list or one object)\n"
    "input (online: list the objects from the Kubernetes API):\n";
constexpr std::string_view usage_tail =
    "\n"
    "Read: Nodes, Pods, topologies/resourceflavors/clusterqueues/localqueues/workloads\n"
    "(kueue.x-k8s.io v1beta2 or v1beta1), topologysources and modeldeployments\n"
    "(worker.gpustack.ai), LimitRanges, RuntimeClasses (node.k8s.io) and Namespaces.\n"
    "\n"
    "exit status: chain: 0 complete, 1 findings; pending: 0 the Workload holds a\n"
    "reservation, 1 it is pending (the diagnosis says why); 2 usage, I/O or API error\n";

std::string usage_text() {
  const std::string p(program_name());
  return "usage:\n  " + p + " diagnose chain [input] [--output text|json]\n  " + p +
         " diagnose pending WORKLOAD [-n NAMESPACE] [input] [--output text|json]\n" +
         std::string(usage_head) + std::string(kube_flags_usage) + std::string(usage_tail);
}

// `kubectl get pods -A -o json` on a large cluster runs to hundreds of MiB and deep
// nesting (managed fields); the defaults are for single objects.
core::decode_limits object_limits() { return list_limits(); }

int usage_error(std::string_view message) {
  const std::string usage = usage_text();
  const std::string_view p = program_name();
  std::fprintf(stderr, "%.*s diagnose: %.*s\n\n%s", static_cast<int>(p.size()), p.data(),
               static_cast<int>(message.size()), message.data(), usage.c_str());
  return exit_usage;
}

int io_error(const std::string& message) {
  const std::string_view p = program_name();
  std::fprintf(stderr, "%.*s diagnose: %s\n", static_cast<int>(p.size()), p.data(),
               message.c_str());
  return exit_usage;
}

struct options {
  std::string what;  // chain | pending
  std::string workload_ns, workload_name;
  bool namespace_given = false;  // -n or NAMESPACE/NAME (else the context's namespace applies)
  std::string from_dir;
  std::vector<std::string> files;
  kube_flags kube;
  bool json = false;
};

std::optional<int> parse_args(args a, options& o) {
  std::vector<std::string_view> positional;
  std::string ns;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const std::string_view arg = a[i];
    if (arg == "-h" || arg == "--help") {
      const std::string usage = usage_text();
      std::fwrite(usage.data(), 1, usage.size(), stdout);
      return exit_clean;
    }
    if (arg.empty() || arg[0] != '-') {
      positional.push_back(arg);
      continue;
    }
    if (arg == "--in-cluster") {
      set_kube_flag(o.kube, arg, {});
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
    static constexpr std::string_view valued[] = {"--output", "--from", "-f",
                                                  "--file",   "-n",     "--namespace"};
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
      ns = v;
    } else {
      set_kube_flag(o.kube, name, v);
    }
  }
  if (positional.empty()) return usage_error("missing what to diagnose (chain or pending)");
  o.what = std::string(positional[0]);
  if (o.what == "chain") {
    if (positional.size() > 1) return usage_error("chain takes no WORKLOAD");
  } else if (o.what == "pending") {
    if (positional.size() != 2) return usage_error("pending needs one WORKLOAD");
    std::string w(positional[1]);
    if (const auto slash = w.find('/'); slash != std::string::npos) {
      if (!ns.empty() && ns != w.substr(0, slash))
        return usage_error("-n and NAMESPACE/NAME disagree");
      ns = w.substr(0, slash);
      w.erase(0, slash + 1);
    }
    if (w.empty()) return usage_error("empty WORKLOAD name");
    o.workload_ns = ns;
    o.namespace_given = !ns.empty();
    o.workload_name = w;
  } else {
    return usage_error("unknown diagnosis \"" + o.what + "\" (chain or pending)");
  }
  const bool offline = !o.from_dir.empty() || !o.files.empty();
  if (auto e = finish_kube_flags(o.kube, offline)) return usage_error(*e);
  return std::nullopt;
}

void warn_errors(const core::error_list& errors) {
  const std::string_view p = program_name();
  for (const auto& e : errors)
    std::fprintf(stderr, "%.*s diagnose: warning: %s\n", static_cast<int>(p.size()), p.data(),
                 e.to_string().c_str());
}

core::result<void> read_offline(const options& o, diagnose::cluster_objects& objects) {
  auto files = object_files(o.from_dir, o.files);
  if (!files) return std::move(files).error();
  for (const auto& f : *files) {
    auto text = server::read_file(f == "-" ? "/dev/stdin" : f, max_file_bytes);
    if (!text) return std::move(text).error();
    // An undecodable file is an input error; a field error inside an object is a warning.
    const auto d = core::decode_any(*text, "", object_limits());
    if (!d.ok())
      return core::fail(core::errc::invalid_argument, f + ": " + d.errors.front().to_string());
    auto errors = diagnose::add_object(objects, d.root, "");
    for (auto& e : errors) e.path = e.path.empty() ? f : f + ": " + e.path;
    warn_errors(errors);
  }
  return {};
}

core::result<void> read_online(options& o, diagnose::cluster_objects& objects) {
  kube_connection conn;
  if (auto r = connect(o.kube, conn); !r) return r;
  // kubectl's default namespace: the context's, unless -n (or NAMESPACE/NAME) says otherwise.
  if (!o.namespace_given && !conn.default_namespace.empty()) o.workload_ns = conn.default_namespace;
  auto& client = *conn.client;
  struct resource {
    std::vector<std::string> paths;  // preferred version first
    const char* what;
  };
  const std::vector<resource> resources = {
      {{"/api/v1/nodes"}, "nodes"},
      // Terminated Pods request nothing the diagnosis counts; the API leaves them out.
      {{"/api/v1/pods?fieldSelector=" +
        inventory::detail::url_encode("status.phase!=Succeeded,status.phase!=Failed")},
       "pods"},
      {{"/apis/kueue.x-k8s.io/v1beta2/topologies", "/apis/kueue.x-k8s.io/v1beta1/topologies"},
       "topologies"},
      {{"/apis/kueue.x-k8s.io/v1beta2/resourceflavors",
        "/apis/kueue.x-k8s.io/v1beta1/resourceflavors"},
       "resourceflavors"},
      {{"/apis/kueue.x-k8s.io/v1beta2/clusterqueues", "/apis/kueue.x-k8s.io/v1beta1/clusterqueues"},
       "clusterqueues"},
      {{"/apis/kueue.x-k8s.io/v1beta2/localqueues", "/apis/kueue.x-k8s.io/v1beta1/localqueues"},
       "localqueues"},
      {{"/apis/kueue.x-k8s.io/v1beta2/workloads", "/apis/kueue.x-k8s.io/v1beta1/workloads"},
       "workloads"},
      {{"/apis/worker.gpustack.ai/v1/topologysources",
        "/apis/worker.gpustack.ai/v1alpha1/topologysources"},
       "topologysources"},
      {{"/apis/worker.gpustack.ai/v1/modeldeployments",
        "/apis/worker.gpustack.ai/v1alpha1/modeldeployments"},
       "modeldeployments"},
      // What Kueue applies to a Workload's Pod template before it counts the requests.
      {{"/api/v1/limitranges"}, "limitranges"},
      {{"/apis/node.k8s.io/v1/runtimeclasses"}, "runtimeclasses"},
      // Their labels, for the ClusterQueues' namespaceSelector.
      {{"/api/v1/namespaces"}, "namespaces"},
  };
  for (const auto& res : resources) {
    bool found = false;
    for (const auto& p : res.paths) {
      auto listed = list_resource(client, p, [&](const core::doc_node& page) {
        auto errors = diagnose::add_object(objects, page, "");
        for (auto& e : errors) e.path = e.path.empty() ? p : p + ": " + e.path;
        warn_errors(errors);
      });
      if (!listed) return std::move(listed).error();
      found = *listed;
      if (found) break;
    }
    if (!found) {
      const std::string_view prog = program_name();
      std::fprintf(stderr, "%.*s diagnose: note: the API serves no %s\n",
                   static_cast<int>(prog.size()), prog.data(), res.what);
    }
  }
  return {};
}

}  // namespace

int run_diagnose(args a) {
  options o;
  if (const auto done = parse_args(a, o)) return *done;
  diagnose::cluster_objects objects;
  const bool offline = !o.from_dir.empty() || !o.files.empty();
  if (const auto read = offline ? read_offline(o, objects) : read_online(o, objects); !read) {
    return io_error(read.error().message);
  }

  std::string out;
  int rc = exit_clean;
  if (o.what == "chain") {
    const auto report = diagnose::check_chain(objects);
    out = o.json ? diagnose::render_chain_json(report) : diagnose::render_chain_text(report);
    rc = report.clean() ? exit_clean : exit_findings;
  } else {
    const auto report = diagnose::diagnose_pending(objects, o.workload_ns, o.workload_name);
    if (!report.found) return io_error(report.conclusion);
    out = o.json ? diagnose::render_pending_json(report) : diagnose::render_pending_text(report);
    const auto* w = objects.find_workload(o.workload_ns, o.workload_name);
    rc = w && w->quota_reserved() ? exit_clean : exit_findings;
  }
  std::fwrite(out.data(), 1, out.size(), stdout);
  std::fflush(stdout);
  return rc;
}

}  // namespace topogate::cli

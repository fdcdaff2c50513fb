// topogate diagnose {chain|pending WORKLOAD|change --revision FILE}: the runbook's "Verify the
// scheduling chain", "Diagnose Pending workloads" and the Workload impact of "Change a live
// hierarchy" over the cluster's objects, read from `kubectl get ... -o json`
// files or from the Kubernetes API. Exit 0 clean (chain) / not pending (pending), 1 findings /
// pending, 2 usage, I/O or API error.

#include "diagnose/diagnose.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cli/commands.hpp"
#include "cli/diagnose_kube.hpp"
#include "cli/kube_flags.hpp"
#include "core/document.hpp"
#include "core/result.hpp"
#include "core/snapshot.hpp"
#include "core/syntax.hpp"
#include "core/topology_source.hpp"
#include "diagnose/change.hpp"
#include "diagnose/cluster_objects.hpp"
#include "kube/api_error.hpp"
#include "kube/client.hpp"
#include "kube/kubeconfig.hpp"
#include "kube/limits.hpp"
#include "kube/list.hpp"
#include "util/file.hpp"

namespace topogate::cli {

namespace {

constexpr int exit_clean = 0;
constexpr int exit_findings = 1;
constexpr int exit_usage = 2;

constexpr std::string_view usage_head =
    "\n"
    "WORKLOAD is a Kueue Workload, NAMESPACE/NAME or NAME: in the -n namespace, else in the\n"
    "kubeconfig context's namespace, else in any namespace.\n"
    "\n"
    "input (offline: files exactly as `kubectl get KIND -o json` prints them):\n"
    "  --from DIR            every *.json, *.yaml and *.yml file in DIR\n"
    "  -f, --file FILE       one more file (repeatable; a List, a typed list or one object);\n"
    "                        a file named nodefeatures* says NodeFeatures were dumped, even none\n"
    "NFD hop (chain):\n"
    "  --snapshot [SOURCE=]FILE  the revision topogate serves for a webhook TopologySource\n"
    "                        (SOURCE, else every webhook source; repeatable)\n"
    "  --snapshot-url [SOURCE=]URL  fetch that revision from topogate instead (https://, with\n"
    "                        --snapshot-token-file FILE, a reader's token, and\n"
    "                        --snapshot-ca-file FILE, the CA of its certificate)\n"
    "  --worker-namespace NS the namespace GPUStack writes NodeFeatures in (gpustack-system)\n"
    "change (a candidate revision before it is published):\n"
    "  --revision FILE       the snapshot (topology.gpustack.ai/v1alpha1) to publish\n"
    "  --source FILE         the TopologySource it is for, as it will be (new levels); default:\n"
    "                        the only TopologySource read\n"
    "input (online: list the objects from the Kubernetes API):\n";
constexpr std::string_view usage_tail =
    "\n"
    "Read: Nodes, Pods, topologies/resourceflavors/clusterqueues/localqueues/workloads\n"
    "and admissionchecks (kueue.x-k8s.io v1beta2 or v1beta1), cohorts (v1beta2 or\n"
    "v1alpha1), topologysources and modeldeployments\n"
    "(worker.gpustack.ai), LimitRanges, RuntimeClasses (node.k8s.io), Namespaces,\n"
    "nodefeatures (nfd.k8s-sigs.io) and the ConfigMaps configMap sources name.\n"
    "\n"
    "exit status: chain: 0 complete, 1 findings; pending: 0 the Workload holds a\n"
    "reservation, 1 it is pending (the diagnosis says why); change: 0 no Workload stranded,\n"
    "1 some stranded; 2 usage, I/O or API error, or a revision that does not validate\n";

std::string usage_text() {
  const std::string p(program_name());
  return "usage:\n  " + p + " diagnose chain [input] [--output text|json]\n  " + p +
         " diagnose pending WORKLOAD [-n NAMESPACE] [input] [--output text|json]\n  " + p +
         " diagnose change --revision FILE [--source FILE] [input] [--output text|json]\n" +
         std::string(usage_head) + std::string(kube_flags_usage) + std::string(usage_tail);
}

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
  std::vector<std::pair<std::string, std::string>> snapshots;      // source ("" any) -> file
  std::vector<std::pair<std::string, std::string>> snapshot_urls;  // source ("" any) -> URL
  std::string snapshot_token_file, snapshot_ca_file;
  std::string worker_namespace;
  std::string revision_file, source_file;  // change
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
    static constexpr std::string_view valued[] = {"--output",
                                                  "--from",
                                                  "-f",
                                                  "--file",
                                                  "-n",
                                                  "--namespace",
                                                  "--snapshot",
                                                  "--worker-namespace",
                                                  "--snapshot-url",
                                                  "--snapshot-token-file",
                                                  "--snapshot-ca-file",
                                                  "--revision",
                                                  "--source"};
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
    } else if (name == "--snapshot") {
      const auto eq = v.find('=');
      if (eq == 0 || eq + 1 == v.size()) return usage_error("--snapshot is [SOURCE=]FILE");
      if (eq == std::string::npos)
        o.snapshots.emplace_back("", v);
      else
        o.snapshots.emplace_back(v.substr(0, eq), v.substr(eq + 1));
    } else if (name == "--worker-namespace") {
      o.worker_namespace = v;
    } else if (name == "--snapshot-url") {
      // SOURCE=URL, or the URL alone (it starts with its scheme).
      const auto eq = v.find('=');
      if (eq != std::string::npos && eq > 0 && v.compare(0, 8, "https://") != 0)
        o.snapshot_urls.emplace_back(v.substr(0, eq), v.substr(eq + 1));
      else
        o.snapshot_urls.emplace_back("", v);
    } else if (name == "--snapshot-token-file") {
      o.snapshot_token_file = v;
    } else if (name == "--snapshot-ca-file") {
      o.snapshot_ca_file = v;
    } else if (name == "--revision") {
      o.revision_file = v;
    } else if (name == "--source") {
      o.source_file = v;
    } else {
      set_kube_flag(o.kube, name, v);
    }
  }
  if (positional.empty()) return usage_error("missing what to diagnose (chain, pending or change)");
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
  } else if (o.what == "change") {
    if (positional.size() > 1) return usage_error("change takes no WORKLOAD");
    if (o.revision_file.empty()) return usage_error("change needs --revision FILE");
  } else {
    return usage_error("unknown diagnosis \"" + o.what + "\" (chain, pending or change)");
  }
  if (o.what != "change" && (!o.revision_file.empty() || !o.source_file.empty()))
    return usage_error("--revision and --source are for change");
  if (!o.snapshot_urls.empty() && (o.snapshot_token_file.empty() || o.snapshot_ca_file.empty()))
    return usage_error("--snapshot-url needs --snapshot-token-file and --snapshot-ca-file");
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
    // `kubectl get pods -A -o json` on a large cluster runs to hundreds of MiB and deep
    // nesting (managed fields); the defaults are for single objects.
    auto text = util::read_file(f == "-" ? "/dev/stdin" : f, kube::max_dump_bytes);
    if (!text) return std::move(text).error();
    // An undecodable file is an input error; a field error inside an object is a warning.
    const auto d = core::decode_any(*text, "", kube::list_limits(kube::max_dump_bytes));
    if (!d.ok())
      return core::fail(core::errc::invalid_argument, f + ": " + d.errors.front().to_string());
    auto errors = diagnose::add_object(objects, d.root, "");
    for (auto& e : errors) e.path = e.path.empty() ? f : f + ": " + e.path;
    warn_errors(errors);
    // `kubectl get nodefeatures -A -o json` with none prints an empty List: its file says
    // the dump was made.
    if (std::filesystem::path(f).filename().string().starts_with("nodefeatures"))
      objects.node_features_read = true;
  }
  return {};
}

// The revision topogate serves at `url`, read as a consumer reads it (a reader's bearer
// token, the server's certificate verified against the CA).
core::result<std::string> fetch_snapshot(const options& o, const std::string& url) {
  const auto u = core::parse_url(url);
  if (!u || u->scheme != "https" || u->host.empty() || u->has_user_info)
    return core::fail(core::errc::invalid_argument,
                      "--snapshot-url must be an https:// URL without user info: " + url);
  kube::endpoint ep;
  ep.host = u->host;
  if (!u->port.empty()) ep.port = u->port;
  ep.token_file = o.snapshot_token_file;
  ep.ca_file = o.snapshot_ca_file;
  kube::client client(std::move(ep));
  std::string target = u->path.empty() ? "/" : u->path;
  if (!u->raw_query.empty()) target += "?" + u->raw_query;
  auto r = client.request("GET", target);
  if (!r) return core::fail(core::errc::io, url + ": " + r.error().message);
  if (r->status != 200)
    return core::fail(core::errc::io, url + ": HTTP " + std::to_string(r->status));
  if (r->body.size() > core::max_snapshot_bytes)
    return core::fail(core::errc::io, url + ": the snapshot is larger than 1 MiB");
  return std::move(r->body);
}

// What the NFD hop needs besides the objects: the worker namespace and the revisions given
// for webhook sources.
core::result<void> read_nfd_inputs(const options& o, diagnose::cluster_objects& objects) {
  if (!o.worker_namespace.empty()) objects.worker_namespace = o.worker_namespace;
  for (const auto& [source, file] : o.snapshots) {
    auto text = util::read_file(file, core::max_snapshot_bytes);
    if (!text) return std::move(text).error();
    objects.revision_texts[source] = std::move(*text);
  }
  for (const auto& [source, url] : o.snapshot_urls) {
    auto text = fetch_snapshot(o, url);
    if (!text) return std::move(text).error();
    objects.revision_texts[source] = std::move(*text);
  }
  return {};
}

core::result<void> read_online(options& o, diagnose::cluster_objects& objects) {
  kube::connection conn;
  if (auto r = kube::connect(connect_options(o.kube), conn); !r) return r;
  // kubectl's default namespace: the context's, unless -n (or NAMESPACE/NAME) says otherwise.
  if (!o.namespace_given && !conn.default_namespace.empty()) o.workload_ns = conn.default_namespace;
  auto& api = *conn.api;
  // Only the chain reads the NFD hop, and only for writing sources (listed before).
  const auto nfd_hop = [&] {
    return o.what == "chain" && std::any_of(objects.sources.begin(), objects.sources.end(),
                                            [](const auto& s) { return s.writes; });
  };
  const std::string_view prog = program_name();
  const auto note = [&](const std::string& message) {
    std::fprintf(stderr, "%.*s diagnose: note: %s\n", static_cast<int>(prog.size()), prog.data(),
                 message.c_str());
  };
  if (auto listed = list_diagnose_objects(api, objects, {}, o.what == "chain", note, warn_errors);
      !listed)
    return listed;
  // The ConfigMap each configMap source reads its revision from (one, by name).
  std::vector<std::pair<std::string, std::string>> maps;
  for (const auto& s : objects.sources)
    if (nfd_hop() && !s.config_map_name.empty() && !s.config_map_namespace.empty() &&
        std::find(maps.begin(), maps.end(), std::pair{s.config_map_namespace, s.config_map_name}) ==
            maps.end())
      maps.emplace_back(s.config_map_namespace, s.config_map_name);
  for (const auto& [ns, name] : maps) {
    const std::string p = "/api/v1/namespaces/" + kube::url_encode(ns) +
                          "/configmaps?fieldSelector=" + kube::url_encode("metadata.name=" + name);
    if (auto listed = list_diagnose_path(api, objects, p, {}, warn_errors); !listed) {
      if (listed.error().code != core::errc::forbidden) return std::move(listed).error();
      note("not allowed to read ConfigMap " + ns + "/" + name +
           " (HTTP 403): its revision is not compared");
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
  if (const auto read = read_nfd_inputs(o, objects); !read) return io_error(read.error().message);

  std::string out;
  int rc = exit_clean;
  if (o.what == "change") {
    auto text = util::read_file(o.revision_file, core::max_snapshot_bytes);
    if (!text) return io_error(text.error().message);
    const auto snap = core::decode_snapshot(*text);
    if (!snap.ok())
      return io_error(o.revision_file + ": not a snapshot: " + core::render_text(snap.errors));
    std::optional<core::topology_source> src;
    if (!o.source_file.empty()) {
      auto st = util::read_file(o.source_file, kube::max_dump_bytes);
      if (!st) return io_error(st.error().message);
      const auto d = core::decode_any(*st);
      if (!d.ok()) return io_error(o.source_file + ": " + d.errors.front().to_string());
      auto v = core::validate_topology_source(d.root);
      if (!v.ok()) return io_error(o.source_file + ": " + core::render_text(v.errors));
      src = std::move(v.source);
    } else {
      std::string why;
      src = diagnose::source_of(objects, "", why);
      if (!src) return io_error(why);
    }
    const auto report = diagnose::diagnose_change(objects, *src, snap.value);
    out = o.json ? diagnose::render_change_json(report) : diagnose::render_change_text(report);
    rc = !report.ok() ? exit_usage : report.stranded ? exit_findings : exit_clean;
  } else if (o.what == "chain") {
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

// topogate diagnose {chain|pending WORKLOAD}: the runbook's "Verify the scheduling chain" and
// "Diagnose Pending workloads" over the cluster's objects, read from `kubectl get ... -o json`
// files or from the Kubernetes API. Exit 0 clean (chain) / not pending (pending), 1 findings /
// pending, 2 usage, I/O or API error.
#include <dirent.h>
#include <openssl/evp.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "diagnose/cluster_objects.hpp"
#include "diagnose/diagnose.hpp"
#include "core/document.hpp"
#include "core/result.hpp"
#include "inventory/kube_client.hpp"
#include "cli/commands.hpp"
#include "server/file_util.hpp"

namespace topogate::cli {

namespace {

constexpr int exit_clean = 0;
constexpr int exit_findings = 1;
constexpr int exit_usage = 2;

constexpr std::size_t max_file_bytes = 512u << 20;

constexpr std::string_view usage_text =
    "usage:\n"
    "  topogate diagnose chain [input] [--output text|json]\n"
    "  topogate diagnose pending WORKLOAD [-n NAMESPACE] [input] [--output text|json]\n"
    "\n"
    "WORKLOAD is a Kueue Workload, NAME or NAMESPACE/NAME.\n"
    "\n"
    "input (offline: files exactly as `kubectl get KIND -o json` prints them):\n"
    "  --from DIR            every *.json, *.yaml and *.yml file in DIR\n"
    "  -f, --file FILE       one more file (repeatable; a List, a typed list or one object)\n"
    "input (online: list the objects from the Kubernetes API):\n"
    "  --kubeconfig FILE     the current context's server, CA and token (default $KUBECONFIG)\n"
    "  --context NAME        another context of the kubeconfig\n"
    "  --server URL --token-file FILE --ca-file FILE   explicit API access\n"
    "  --in-cluster          the Pod's ServiceAccount (the default inside a cluster)\n"
    "\n"
    "Read: Nodes, Pods, topologies/resourceflavors/clusterqueues/localqueues/workloads\n"
    "(kueue.x-k8s.io v1beta2 or v1beta1), topologysources and modeldeployments\n"
    "(worker.gpustack.ai).\n"
    "\n"
    "exit status: chain: 0 complete, 1 findings; pending: 0 the Workload holds a\n"
    "reservation, 1 it is pending (the diagnosis says why); 2 usage, I/O or API error\n";

// `kubectl get pods -A -o json` on a large cluster runs to hundreds of MiB and deep
// nesting (managed fields); the defaults are for single objects.
core::decode_limits object_limits() {
  core::decode_limits limits;
  limits.max_bytes = max_file_bytes;
  limits.max_depth = 128;
  limits.max_expanded_nodes = std::size_t{1} << 26;
  return limits;
}

int usage_error(std::string_view message) {
  std::fprintf(stderr, "topogate diagnose: %.*s\n\n%.*s", static_cast<int>(message.size()),
               message.data(), static_cast<int>(usage_text.size()), usage_text.data());
  return exit_usage;
}

int io_error(const std::string& message) {
  std::fprintf(stderr, "topogate diagnose: %s\n", message.c_str());
  return exit_usage;
}

struct options {
  std::string what;  // chain | pending
  std::string workload_ns, workload_name;
  std::string from_dir;
  std::vector<std::string> files;
  std::string kubeconfig, context, server, token_file, ca_file;
  bool in_cluster = false;
  bool json = false;
};

std::optional<int> parse_args(args a, options& o) {
  std::vector<std::string_view> positional;
  std::string ns;
  bool saw_kubeconfig = false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const std::string_view arg = a[i];
    if (arg == "-h" || arg == "--help") {
      std::fwrite(usage_text.data(), 1, usage_text.size(), stdout);
      return exit_clean;
    }
    if (arg.empty() || arg[0] != '-') {
      positional.push_back(arg);
      continue;
    }
    if (arg == "--in-cluster") {
      o.in_cluster = true;
      continue;
    }
    std::string_view name = arg;
    std::optional<std::string_view> value;
    if (const auto eq = arg.find('='); eq != std::string_view::npos && arg.starts_with("--")) {
      name = arg.substr(0, eq);
      value = arg.substr(eq + 1);
    }
    static constexpr std::string_view valued[] = {
        "--output",     "--from",    "-f",       "--file",       "-n",       "--namespace",
        "--kubeconfig", "--context", "--server", "--token-file", "--ca-file"};
    if (std::find(std::begin(valued), std::end(valued), name) == std::end(valued))
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
    } else if (name == "--kubeconfig") {
      o.kubeconfig = v;
      saw_kubeconfig = true;
    } else if (name == "--context") {
      o.context = v;
    } else if (name == "--server") {
      o.server = v;
    } else if (name == "--token-file") {
      o.token_file = v;
    } else {
      o.ca_file = v;
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
    o.workload_name = w;
  } else {
    return usage_error("unknown diagnosis \"" + o.what + "\" (chain or pending)");
  }
  const bool offline = !o.from_dir.empty() || !o.files.empty();
  const bool explicit_api = !o.server.empty() || !o.token_file.empty() || !o.ca_file.empty();
  if (explicit_api && (o.server.empty() || o.token_file.empty() || o.ca_file.empty()))
    return usage_error("--server, --token-file and --ca-file go together");
  const int online_ways =
      (explicit_api ? 1 : 0) + (saw_kubeconfig ? 1 : 0) + (o.in_cluster ? 1 : 0);
  if (online_ways > 1) return usage_error("choose one of --kubeconfig, --server or --in-cluster");
  if (offline && online_ways) return usage_error("read files or the API, not both");
  if (!o.context.empty() && !saw_kubeconfig && std::getenv("KUBECONFIG") == nullptr)
    return usage_error("--context needs a kubeconfig");
  if (!offline && !online_ways) {
    // The defaults kubectl uses: in a Pod the ServiceAccount, elsewhere $KUBECONFIG.
    if (const char* host = std::getenv("KUBERNETES_SERVICE_HOST"); host && *host) {
      o.in_cluster = true;
    } else if (const char* kc = std::getenv("KUBECONFIG"); kc && *kc) {
      o.kubeconfig = kc;
      if (const auto colon = o.kubeconfig.find(':'); colon != std::string::npos)
        o.kubeconfig.erase(colon);
    } else {
      return usage_error(
          "no input: give --from DIR, -f FILE, --kubeconfig FILE or run in a cluster");
    }
  }
  return std::nullopt;
}

void warn_errors(const core::error_list& errors) {
  for (const auto& e : errors)
    std::fprintf(stderr, "topogate diagnose: warning: %s\n", e.to_string().c_str());
}

bool ends_with_any(const std::string& name) {
  return name.ends_with(".json") || name.ends_with(".yaml") || name.ends_with(".yml");
}

core::result<void> read_offline(const options& o, diagnose::cluster_objects& objects) {
  std::vector<std::string> files;
  if (!o.from_dir.empty()) {
    DIR* d = ::opendir(o.from_dir.c_str());
    if (!d) return core::fail(core::errc::io, "cannot open directory " + o.from_dir);
    std::vector<std::string> names;
    while (const dirent* e = ::readdir(d)) {
      const std::string n = e->d_name;
      if (!n.starts_with(".") && ends_with_any(n)) names.push_back(n);
    }
    ::closedir(d);
    std::sort(names.begin(), names.end());
    for (const auto& n : names) files.push_back(o.from_dir + "/" + n);
    if (files.empty())
      return core::fail(core::errc::not_found, "no .json or .yaml files in " + o.from_dir);
  }
  files.insert(files.end(), o.files.begin(), o.files.end());
  for (const auto& f : files) {
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

// Private temporary files for credentials a kubeconfig carries inline (the client reads a
// token and a CA from files); removed when the command ends.
struct temp_files {
  std::vector<std::string> paths;
  ~temp_files() {
    for (const auto& p : paths) ::unlink(p.c_str());
  }
  // The new file's path.
  core::result<std::string> write(std::string_view data) {
    const char* dir = std::getenv("TMPDIR");
    std::string tmpl = std::string(dir && *dir ? dir : "/tmp") + "/topogate-diagnose.XXXXXX";
    const int fd = ::mkstemp(tmpl.data());  // created 0600
    if (fd < 0) return core::fail(core::errc::io, "cannot create a temporary file");
    paths.push_back(tmpl);
    std::size_t off = 0;
    while (off < data.size()) {
      const ssize_t n = ::write(fd, data.data() + off, data.size() - off);
      if (n <= 0) {
        ::close(fd);
        return core::fail(core::errc::io, "cannot write a temporary file");
      }
      off += static_cast<std::size_t>(n);
    }
    ::close(fd);
    return tmpl;
  }
};

bool base64_decode(std::string_view in, std::string& out) {
  std::string clean;
  for (char c : in)
    if (c != '\n' && c != '\r' && c != ' ') clean.push_back(c);
  if (clean.size() % 4 != 0) return false;
  out.assign(clean.size() / 4 * 3, '\0');
  const int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(clean.data()),
                                static_cast<int>(clean.size()));
  if (n < 0) return false;
  std::size_t len = static_cast<std::size_t>(n);
  if (!clean.empty() && clean.back() == '=') --len;
  if (clean.size() > 1 && clean[clean.size() - 2] == '=') --len;
  out.resize(len);
  return true;
}

const core::doc_node* named(const core::doc_node& root, std::string_view list,
                            std::string_view name, std::string_view field) {
  const core::doc_node* items = root.find(list);
  if (!items || !items->is_sequence()) return nullptr;
  for (const auto& item : items->items) {
    const core::doc_node* n = item.find("name");
    if (n && n->text == name) return item.find(field);
  }
  return nullptr;
}

std::string dir_of(const std::string& path) {
  const auto slash = path.rfind('/');
  return slash == std::string::npos ? std::string(".") : path.substr(0, slash);
}

core::result<void> endpoint_from_kubeconfig(const options& o, inventory::store_config& cfg,
                                            temp_files& tmp) {
  const auto invalid = [&](const std::string& what) {
    return core::fail(core::errc::invalid_argument, o.kubeconfig + ": " + what);
  };
  const auto text = server::read_file(o.kubeconfig, 16u << 20);
  if (!text) return text.error();
  const auto d = core::decode_yaml(*text);
  if (!d.ok()) return invalid(d.errors.front().to_string());
  std::string ctx = o.context;
  if (ctx.empty()) {
    const core::doc_node* cur = d.root.find("current-context");
    ctx = cur ? cur->text : "";
  }
  const core::doc_node* context = named(d.root, "contexts", ctx, "context");
  if (!context) return invalid("no context \"" + ctx + "\"");
  const auto field = [](const core::doc_node* n, std::string_view k) {
    const core::doc_node* v = n ? n->find(k) : nullptr;
    return v ? v->text : std::string();
  };
  const core::doc_node* cluster = named(d.root, "clusters", field(context, "cluster"), "cluster");
  const core::doc_node* user = named(d.root, "users", field(context, "user"), "user");
  if (!cluster) return invalid("context \"" + ctx + "\" names no cluster");
  const std::string base = dir_of(o.kubeconfig);
  cfg.kube_api_server = field(cluster, "server");
  if (const std::string ca = field(cluster, "certificate-authority"); !ca.empty()) {
    cfg.kube_ca_file = ca.front() == '/' ? ca : base + "/" + ca;
  } else if (const std::string data = field(cluster, "certificate-authority-data"); !data.empty()) {
    std::string pem;
    if (!base64_decode(data, pem)) return invalid("certificate-authority-data is not base64");
    auto path = tmp.write(pem);
    if (!path) return std::move(path).error();
    cfg.kube_ca_file = std::move(*path);
  } else {
    return invalid("the cluster has no certificate-authority (the API's CA is always verified)");
  }
  if (const std::string tf = field(user, "tokenFile"); !tf.empty()) {
    cfg.kube_token_file = tf.front() == '/' ? tf : base + "/" + tf;
  } else if (const std::string token = field(user, "token"); !token.empty()) {
    auto path = tmp.write(token);
    if (!path) return std::move(path).error();
    cfg.kube_token_file = std::move(*path);
  } else {
    return invalid(
        "the user has no token or tokenFile (client certificates and exec plugins are not "
        "supported)");
  }
  return {};
}

// Lists one resource (all pages) into `objects`; true when it is served. A 404 means the kind is
// not served (its CRD is not installed): false, and not an error.
core::result<bool> list_resource(inventory::detail::kube_client& client, const std::string& path,
                                 diagnose::cluster_objects& objects) {
  std::string cont;
  do {
    std::string target = path + (path.find('?') == std::string::npos ? "?" : "&") + "limit=500";
    if (!cont.empty()) target += "&continue=" + inventory::detail::url_encode(cont);
    const auto r = client.request("GET", target, {}, std::chrono::seconds(60));
    if (r.status == 404) return false;
    if (r.status != 200) {
      return core::fail(
          core::errc::unavailable,
          "GET " + path + ": " +
              (r.status ? "HTTP " + std::to_string(r.status) + " " + r.body.substr(0, 300)
                        : r.error));
    }
    const auto d = core::decode_json(r.body, "", object_limits());
    if (!d.ok()) {
      return core::fail(core::errc::invalid_argument,
                        "GET " + path + ": " + d.errors.front().to_string());
    }
    auto errors = diagnose::add_object(objects, d.root, "");
    for (auto& e : errors) e.path = e.path.empty() ? path : path + ": " + e.path;
    warn_errors(errors);
    const core::doc_node* meta = d.root.find("metadata");
    const core::doc_node* c = meta ? meta->find("continue") : nullptr;
    cont = c ? c->text : "";
  } while (!cont.empty());
  return true;
}

core::result<void> read_online(const options& o, diagnose::cluster_objects& objects) {
  inventory::store_config cfg;
  temp_files tmp;
  if (!o.kubeconfig.empty()) {
    if (auto r = endpoint_from_kubeconfig(o, cfg, tmp); !r) return r;
  } else if (!o.server.empty()) {
    cfg.kube_api_server = o.server;
    cfg.kube_token_file = o.token_file;
    cfg.kube_ca_file = o.ca_file;
  }
  auto ep = inventory::detail::resolve_endpoint(cfg);
  if (!ep) return std::move(ep).error();
  inventory::detail::kube_client client(std::move(*ep));
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
  };
  for (const auto& res : resources) {
    bool found = false;
    for (const auto& p : res.paths) {
      auto listed = list_resource(client, p, objects);
      if (!listed) return std::move(listed).error();
      found = *listed;
      if (found) break;
    }
    if (!found) std::fprintf(stderr, "topogate diagnose: note: the API serves no %s\n", res.what);
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

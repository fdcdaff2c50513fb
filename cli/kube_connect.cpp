#include "cli/kube_connect.hpp"

#include <dirent.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <utility>

#include "server/file_util.hpp"

namespace topogate::cli {

const std::string_view kube_flags_usage =
    "  --kubeconfig FILE     the current context's server, CA and credentials: a token, a client\n"
    "                        certificate or an exec plugin (default $KUBECONFIG)\n"
    "  --context NAME        another context of the kubeconfig\n"
    "  --server URL --token-file FILE --ca-file FILE   explicit API access\n"
    "  --in-cluster          the Pod's ServiceAccount (the default inside a cluster)\n";

namespace {

bool plugin_mode = false;

constexpr std::string_view value_flags[] = {"--kubeconfig", "--context", "--server", "--token-file",
                                            "--ca-file"};

// A kubeconfig file as read: entries' relative paths are relative to its folder.
struct kubeconfig_file {
  std::string path, dir;
  core::doc_node root;
};

struct named_entry {
  const core::doc_node* node = nullptr;  // the entry's `cluster`, `user` or `context` mapping
  const kubeconfig_file* file = nullptr;
  bool listed = false;  // the name is listed (maybe with an empty body)
};

// The first file's entry of that name wins, as kubectl merges $KUBECONFIG.
named_entry find_named(const std::vector<kubeconfig_file>& files, std::string_view list,
                       std::string_view name, std::string_view field) {
  for (const auto& f : files) {
    const core::doc_node* items = f.root.find(list);
    if (!items || !items->is_sequence()) continue;
    for (const auto& item : items->items) {
      const core::doc_node* n = item.find("name");
      if (n && n->text == name) return {item.find(field), &f, true};
    }
  }
  return {};
}

std::string dir_of(const std::string& path) {
  const auto slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? std::string("/") : path.substr(0, slash);
}

std::string text_of(const core::doc_node* n, std::string_view key) {
  const core::doc_node* v = n ? n->find(key) : nullptr;
  return v && v->is_scalar() ? v->text : std::string();
}

bool file_exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

std::string quoted(std::string_view s) { return "\"" + std::string(s) + "\""; }

std::vector<std::string> split_list(const std::string& list) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= list.size()) {
    auto colon = list.find(':', start);
    if (colon == std::string::npos) colon = list.size();
    if (colon > start) out.push_back(list.substr(start, colon - start));
    start = colon + 1;
  }
  return out;
}

std::string home_kubeconfig() {
  const char* home = std::getenv("HOME");
  if (!home || !*home) return {};
  std::string p = std::string(home) + "/.kube/config";
  return file_exists(p) ? p : std::string();
}

// A pair of kubeconfig fields that name one thing as a file or inline (base64): the file's
// path (resolved) or the decoded data. Both at once is refused (kubectl lets the data win,
// which hides a stale path).
core::result<void> file_or_data(const core::doc_node* n, const kubeconfig_file& f,
                                std::string_view file_key, std::string_view data_key,
                                const std::string& where, std::string& file, std::string& data) {
  const std::string path = text_of(n, file_key);
  const std::string b64 = text_of(n, data_key);
  if (!path.empty() && !b64.empty())
    return core::fail(core::errc::invalid_argument, where + " has both " + std::string(file_key) +
                                                        " and " + std::string(data_key) +
                                                        " (keep one)");
  if (!path.empty()) file = server::resolve_path(f.dir, path);
  if (!b64.empty() && !base64_decode(b64, data))
    return core::fail(core::errc::invalid_argument,
                      where + ": " + std::string(data_key) + " is not base64");
  return {};
}

// The cluster's client.authentication.k8s.io/exec extension: `config` for exec plugins.
const core::doc_node* exec_extension(const core::doc_node* cluster) {
  const core::doc_node* ext = cluster ? cluster->find("extensions") : nullptr;
  if (!ext || !ext->is_sequence()) return nullptr;
  for (const auto& e : ext->items)
    if (text_of(&e, "name") == "client.authentication.k8s.io/exec") return e.find("extension");
  return nullptr;
}

}  // namespace

void set_kubectl_plugin(bool on) { plugin_mode = on; }
bool kubectl_plugin() { return plugin_mode; }
std::string_view program_name() { return plugin_mode ? "kubectl topogate" : "topogate"; }

core::result<kubeconfig_target> load_kubeconfig(const std::vector<std::string>& paths,
                                                const std::string& context, bool files_must_exist) {
  std::vector<kubeconfig_file> files;
  for (const auto& p : paths) {
    if (!files_must_exist && !file_exists(p)) continue;
    auto text = server::read_file(p, 16u << 20);
    if (!text) return std::move(text).error();
    auto d = core::decode_yaml(*text);
    if (!d.ok()) {
      // The decoder quotes values; a kubeconfig's values are credentials.
      core::field_error e = d.errors.front();
      e.has_value = false;
      return core::fail(core::errc::invalid_argument, p + ": " + e.to_string());
    }
    if (!d.root.is_mapping() && !d.root.is_null())
      return core::fail(core::errc::invalid_argument, p + ": not a kubeconfig (a YAML mapping)");
    files.push_back({p, dir_of(p), std::move(d.root)});
  }
  std::string all;
  for (const auto& p : paths) all += (all.empty() ? "" : ":") + p;
  if (files.empty())
    return core::fail(core::errc::not_found, "no kubeconfig file exists (" + all + ")");
  const std::string origin = files.size() == 1 ? files.front().path : "$KUBECONFIG (" + all + ")";
  const auto invalid = [](const kubeconfig_file* f, const std::string& what) {
    return core::fail(core::errc::invalid_argument, f->path + ": " + what);
  };

  kubeconfig_target t;
  t.context = context;
  if (t.context.empty()) {
    for (const auto& f : files) {
      if (std::string cur = text_of(&f.root, "current-context"); !cur.empty()) {
        t.context = std::move(cur);
        break;
      }
    }
    if (t.context.empty())
      return core::fail(core::errc::invalid_argument,
                        origin + ": no current-context (give --context)");
  }
  const named_entry ctx = find_named(files, "contexts", t.context, "context");
  if (!ctx.listed)
    return core::fail(core::errc::invalid_argument, origin + ": no context " + quoted(t.context));
  const std::string cluster_name = text_of(ctx.node, "cluster");
  const std::string user_name = text_of(ctx.node, "user");
  t.namespace_name = text_of(ctx.node, "namespace");
  if (cluster_name.empty())
    return invalid(ctx.file, "context " + quoted(t.context) + " names no cluster");
  const named_entry cluster = find_named(files, "clusters", cluster_name, "cluster");
  if (!cluster.listed || !cluster.node)
    return core::fail(core::errc::invalid_argument, origin + ": context " + quoted(t.context) +
                                                        " names cluster " + quoted(cluster_name) +
                                                        ", which is not defined");

  // The cluster.
  const std::string cwhere = "cluster " + quoted(cluster_name);
  t.server = text_of(cluster.node, "server");
  if (t.server.empty()) return invalid(cluster.file, cwhere + " has no server");
  if (text_of(cluster.node, "insecure-skip-tls-verify") == "true")
    return invalid(cluster.file,
                   cwhere +
                       ": insecure-skip-tls-verify is not supported (the API's certificate is "
                       "always verified: give its certificate-authority)");
  if (!text_of(cluster.node, "proxy-url").empty())
    return invalid(cluster.file,
                   cwhere + ": proxy-url is not supported (topogate connects to the API directly)");
  if (auto r = file_or_data(cluster.node, *cluster.file, "certificate-authority",
                            "certificate-authority-data", cluster.file->path + ": " + cwhere,
                            t.ca_file, t.ca_pem);
      !r)
    return std::move(r).error();
  if (t.ca_file.empty() && t.ca_pem.empty())
    return invalid(cluster.file,
                   cwhere +
                       " has no certificate-authority or certificate-authority-data (the API's "
                       "certificate is always verified)");
  t.tls_server_name = text_of(cluster.node, "tls-server-name");

  // The user (a context without one is anonymous).
  if (user_name.empty()) return t;
  const named_entry user = find_named(files, "users", user_name, "user");
  if (!user.listed)
    return core::fail(core::errc::invalid_argument, origin + ": context " + quoted(t.context) +
                                                        " names user " + quoted(user_name) +
                                                        ", which is not defined");
  if (!user.node || user.node->is_null()) return t;
  const std::string uwhere = "user " + quoted(user_name);
  if (user.node->find("auth-provider"))
    return invalid(user.file,
                   uwhere + ": auth-provider is not supported (use an exec credential plugin)");
  if (!text_of(user.node, "username").empty() || !text_of(user.node, "password").empty())
    return invalid(user.file,
                   uwhere + ": basic authentication (username, password) is not supported");
  for (std::string_view as : {"as", "as-uid", "as-groups", "as-user-extra"}) {
    const core::doc_node* v = user.node->find(as);
    if (v && !v->is_null() && !(v->is_scalar() && v->text.empty()) &&
        !(v->is_sequence() && v->items.empty()))
      return invalid(user.file,
                     uwhere + ": impersonation (" + std::string(as) + ") is not supported");
  }
  t.token = text_of(user.node, "token");
  if (const std::string tf = text_of(user.node, "tokenFile"); !tf.empty())
    t.token_file = server::resolve_path(user.file->dir, tf);
  const std::string where = user.file->path + ": " + uwhere;
  if (auto r = file_or_data(user.node, *user.file, "client-certificate", "client-certificate-data",
                            where, t.client_cert_file, t.client_cert_pem);
      !r)
    return std::move(r).error();
  if (auto r = file_or_data(user.node, *user.file, "client-key", "client-key-data", where,
                            t.client_key_file, t.client_key_pem);
      !r)
    return std::move(r).error();
  const bool has_cert = !t.client_cert_file.empty() || !t.client_cert_pem.empty();
  const bool has_key = !t.client_key_file.empty() || !t.client_key_pem.empty();
  if (has_cert != has_key)
    return invalid(
        user.file,
        uwhere + (has_cert ? " has a client certificate but no client-key or client-key-data"
                           : " has a client key but no client-certificate or "
                             "client-certificate-data"));
  if (has_cert) {
    // Read once here so that a wrong pair is a clear error before any request; the client
    // re-reads files for every call.
    std::string cert = t.client_cert_pem, key = t.client_key_pem;
    if (!t.client_cert_file.empty()) {
      auto c = server::read_file(t.client_cert_file, 1u << 20);
      if (!c) return std::move(c).error();
      cert = std::move(*c);
    }
    if (!t.client_key_file.empty()) {
      auto k = server::read_file(t.client_key_file, 1u << 20);
      if (!k) return std::move(k).error();
      key = std::move(*k);
    }
    if (auto ok = inventory::detail::check_client_identity(cert, key); !ok)
      return invalid(user.file, uwhere + ": " + ok.error().message);
    // One of each kind may be a file and the other inline: keep the pair in one form.
    if (t.client_cert_file.empty() != t.client_key_file.empty()) {
      t.client_cert_file.clear();
      t.client_key_file.clear();
      t.client_cert_pem = std::move(cert);
      t.client_key_pem = std::move(key);
    }
  }
  if (const core::doc_node* exec = user.node->find("exec"); exec && !exec->is_null()) {
    if (!t.token.empty() || !t.token_file.empty())
      return invalid(user.file, uwhere + " has both a token and an exec plugin (keep one)");
    auto cfg = parse_exec_config(*exec, user.file->dir, user.file->path + ": " + uwhere);
    if (!cfg) return std::move(cfg).error();
    if (cfg->provide_cluster_info) {
      std::string ca = t.ca_pem;
      if (ca.empty()) {
        auto read = server::read_file(t.ca_file, 1u << 20);
        if (!read) return std::move(read).error();
        ca = std::move(*read);
      }
      cfg->cluster_json =
          exec_cluster_json(t.server, ca, t.tls_server_name, exec_extension(cluster.node));
    }
    t.exec = std::move(*cfg);
  }
  return t;
}

bool is_kube_value_flag(std::string_view name) {
  return std::find(std::begin(value_flags), std::end(value_flags), name) != std::end(value_flags);
}

void set_kube_flag(kube_flags& f, std::string_view name, const std::string& value) {
  if (name == "--in-cluster") {
    f.in_cluster = true;
  } else if (name == "--kubeconfig") {
    f.kubeconfig = value;
    f.saw_kubeconfig = true;
  } else if (name == "--context") {
    f.context = value;
  } else if (name == "--server") {
    f.server = value;
  } else if (name == "--token-file") {
    f.token_file = value;
  } else if (name == "--ca-file") {
    f.ca_file = value;
  }
}

std::optional<std::string> finish_kube_flags(kube_flags& f, bool offline) {
  const bool explicit_api = !f.server.empty() || !f.token_file.empty() || !f.ca_file.empty();
  if (explicit_api && (f.server.empty() || f.token_file.empty() || f.ca_file.empty()))
    return "--server, --token-file and --ca-file go together";
  const int online_ways =
      (explicit_api ? 1 : 0) + (f.saw_kubeconfig ? 1 : 0) + (f.in_cluster ? 1 : 0);
  if (online_ways > 1) return "choose one of --kubeconfig, --server or --in-cluster";
  if (offline && online_ways) return "read files or the API, not both";
  const char* env_kc = std::getenv("KUBECONFIG");
  const bool has_env_kc = env_kc != nullptr && *env_kc != '\0';
  if (offline) {
    if (!f.context.empty() && !has_env_kc) return "--context needs a kubeconfig";
    return std::nullopt;
  }
  if (!online_ways) {
    const char* host = std::getenv("KUBERNETES_SERVICE_HOST");
    const bool in_pod = host != nullptr && *host != '\0';
    if (plugin_mode) {
      // kubectl's order: $KUBECONFIG, ~/.kube/config, then the Pod's ServiceAccount.
      if (has_env_kc) {
        f.kubeconfig = env_kc;
      } else if (std::string home = home_kubeconfig(); !home.empty()) {
        f.kubeconfig = std::move(home);
      } else if (in_pod) {
        f.in_cluster = true;
      } else {
        return "no input: give --from DIR, -f FILE, --kubeconfig FILE, set $KUBECONFIG or create "
               "~/.kube/config";
      }
    } else if (in_pod) {
      f.in_cluster = true;
    } else if (has_env_kc) {
      f.kubeconfig = env_kc;  // the whole list; connect() merges it
    } else {
      return "no input: give --from DIR, -f FILE, --kubeconfig FILE or run in a cluster";
    }
  }
  if (!f.context.empty() && f.kubeconfig.empty()) return "--context needs a kubeconfig";
  return std::nullopt;
}

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

core::result<void> connect(const kube_flags& f, kube_connection& out) {
  return connect(f, out, default_exec_run_options());
}

core::result<void> connect(const kube_flags& f, kube_connection& out,
                           const exec_run_options& exec) {
  inventory::store_config cfg;
  std::optional<kubeconfig_target> target;
  if (!f.kubeconfig.empty()) {
    // --kubeconfig is one file; $KUBECONFIG is a list whose missing files are skipped.
    const auto files =
        f.saw_kubeconfig ? std::vector<std::string>{f.kubeconfig} : split_list(f.kubeconfig);
    auto t = load_kubeconfig(files, f.context, f.saw_kubeconfig);
    if (!t) return std::move(t).error();
    target = std::move(*t);
    cfg.kube_api_server = target->server;
  } else if (!f.server.empty()) {
    cfg.kube_api_server = f.server;
    cfg.kube_token_file = f.token_file;
    cfg.kube_ca_file = f.ca_file;
  }
  auto ep = inventory::detail::resolve_endpoint(cfg);
  if (!ep) return std::move(ep).error();
  if (target) {
    // Only what the kubeconfig says: never the ServiceAccount defaults.
    ep->token_file = target->token_file;
    ep->token = target->token;
    ep->ca_file = target->ca_file;
    ep->ca_pem = target->ca_pem;
    ep->tls_server_name = target->tls_server_name;
    ep->client_cert_file = target->client_cert_file;
    ep->client_key_file = target->client_key_file;
    ep->client_cert_pem = target->client_cert_pem;
    ep->client_key_pem = target->client_key_pem;
    if (target->exec) {
      out.exec = std::make_shared<exec_credential_source>(std::move(*target->exec), exec);
      ep->credentials = [source = out.exec](bool refresh) { return source->get(refresh); };
    }
    out.context = target->context;
    out.default_namespace = target->namespace_name;
  }
  out.client.emplace(std::move(*ep));
  return {};
}

core::result<std::vector<std::string>> object_files(const std::string& dir,
                                                    const std::vector<std::string>& files) {
  std::vector<std::string> out;
  if (!dir.empty()) {
    DIR* d = ::opendir(dir.c_str());
    if (!d) return core::fail(core::errc::io, "cannot open directory " + dir);
    std::vector<std::string> names;
    while (const dirent* e = ::readdir(d)) {
      const std::string n = e->d_name;
      if (!n.starts_with(".") &&
          (n.ends_with(".json") || n.ends_with(".yaml") || n.ends_with(".yml")))
        names.push_back(n);
    }
    ::closedir(d);
    std::sort(names.begin(), names.end());
    for (const auto& n : names) out.push_back(dir + "/" + n);
    if (out.empty()) return core::fail(core::errc::not_found, "no .json or .yaml files in " + dir);
  }
  out.insert(out.end(), files.begin(), files.end());
  return out;
}

core::decode_limits list_limits() {
  core::decode_limits limits;
  limits.max_bytes = 512u << 20;
  limits.max_depth = 128;
  limits.max_expanded_nodes = std::size_t{1} << 26;
  return limits;
}

core::result<bool> list_resource(inventory::detail::kube_client& client, const std::string& path,
                                 const std::function<void(const core::doc_node&)>& on_page) {
  std::string cont;
  do {
    std::string target = path + (path.find('?') == std::string::npos ? "?" : "&") + "limit=500";
    if (!cont.empty()) target += "&continue=" + inventory::detail::url_encode(cont);
    const auto r = client.request("GET", target, {}, std::chrono::seconds(60));
    if (r.status == 404) return false;
    if (r.status != 200) {
      return core::fail(
          r.status == 403 ? core::errc::forbidden : core::errc::unavailable,
          "GET " + path + ": " +
              (r.status ? "HTTP " + std::to_string(r.status) + " " + r.body.substr(0, 300)
                        : r.error));
    }
    const auto d = core::decode_json(r.body, "", list_limits());
    if (!d.ok()) {
      return core::fail(core::errc::invalid_argument,
                        "GET " + path + ": " + d.errors.front().to_string());
    }
    on_page(d.root);
    const core::doc_node* meta = d.root.find("metadata");
    const core::doc_node* c = meta ? meta->find("continue") : nullptr;
    cont = c ? c->text : "";
  } while (!cont.empty());
  return true;
}

}  // namespace topogate::cli

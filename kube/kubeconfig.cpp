#include "kube/kubeconfig.hpp"

#include <sys/stat.h>

#include <utility>

#include "core/document.hpp"
#include "kube/base64.hpp"
#include "kube/limits.hpp"
#include "util/file.hpp"

namespace topogate::kube {

namespace {

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
  if (!path.empty()) file = util::resolve_path(f.dir, path);
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

core::result<kubeconfig_target> load_kubeconfig(const std::vector<std::string>& paths,
                                                const std::string& context, bool files_must_exist) {
  std::vector<kubeconfig_file> files;
  for (const auto& p : paths) {
    if (!files_must_exist && !file_exists(p)) continue;
    auto text = util::read_file(p, max_kubeconfig_bytes);
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
    t.token_file = util::resolve_path(user.file->dir, tf);
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
      auto c = util::read_file(t.client_cert_file, max_credential_bytes);
      if (!c) return std::move(c).error();
      cert = std::move(*c);
    }
    if (!t.client_key_file.empty()) {
      auto k = util::read_file(t.client_key_file, max_credential_bytes);
      if (!k) return std::move(k).error();
      key = std::move(*k);
    }
    if (auto ok = check_client_identity(cert, key); !ok)
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
        auto read = util::read_file(t.ca_file, max_credential_bytes);
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

core::result<void> connect(const connect_options& o, connection& out) {
  api_access access = o.access;
  std::optional<kubeconfig_target> target;
  if (!o.kubeconfigs.empty()) {
    auto t = load_kubeconfig(o.kubeconfigs, o.context, o.kubeconfigs_must_exist);
    if (!t) return std::move(t).error();
    target = std::move(*t);
    access = {target->server, {}, {}};
  }
  auto ep = resolve_endpoint(access);
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
      out.exec = std::make_shared<exec_credential_source>(std::move(*target->exec), o.exec);
      ep->credentials = [source = out.exec](bool refresh) { return source->get(refresh); };
    }
    out.context = target->context;
    out.default_namespace = target->namespace_name;
  }
  out.api.emplace(std::move(*ep));
  return {};
}

}  // namespace topogate::kube

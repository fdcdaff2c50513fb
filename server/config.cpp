#include "server/config.hpp"

#include <yaml-cpp/yaml.h>

#include <set>

#include "core/syntax.hpp"
#include "core/topology_source.hpp"
#include "util/file.hpp"

namespace topogate::server {

namespace {

// Thrown only inside this file, caught in parse_serve_config: configuration is read
// once at startup, never on the request path.
struct config_error {
  std::string message;
};

[[noreturn]] void fail(const std::string& where, const std::string& what) {
  throw config_error{where + ": " + what};
}

void check_keys(const YAML::Node& n, const std::string& where,
                std::initializer_list<std::string_view> known) {
  if (!n.IsMap()) fail(where, "must be a mapping");
  for (const auto& kv : n) {
    const auto k = kv.first.as<std::string>();
    bool ok = false;
    for (auto want : known) ok = ok || k == want;
    if (!ok) fail(where, "unknown key \"" + k + "\"");
  }
}

std::string str(const YAML::Node& n, const std::string& where) {
  if (!n.IsScalar()) fail(where, "must be a string");
  return n.as<std::string>();
}

bool boolean(const YAML::Node& n, const std::string& where) {
  if (!n.IsScalar()) fail(where, "must be true or false");
  const auto s = n.as<std::string>();
  if (s == "true") return true;
  if (s == "false") return false;
  fail(where, "must be true or false, got \"" + s + "\"");
}

std::uint64_t number(const YAML::Node& n, const std::string& where, std::uint64_t max) {
  if (!n.IsScalar()) fail(where, "must be a non-negative integer");
  const auto s = n.as<std::string>();
  if (s.empty() || s.size() > 19 || s.find_first_not_of("0123456789") != std::string::npos) {
    fail(where, "must be a non-negative integer, got \"" + s + "\"");
  }
  const auto v = std::stoull(s);
  if (v > max) fail(where, "must be at most " + std::to_string(max));
  return v;
}

std::chrono::milliseconds duration(const YAML::Node& n, const std::string& where) {
  if (!n.IsScalar()) fail(where, "must be a duration such as 30s");
  const auto s = n.as<std::string>();
  const auto d = core::parse_go_duration(s);
  if (!d)
    fail(where, "\"" + s + "\" is not a duration such as 30s or 1m30s (" + d.error().message + ")");
  if (d->count() < 0) fail(where, "must not be negative");
  return std::chrono::duration_cast<std::chrono::milliseconds>(*d);
}

std::vector<std::string> strings(const YAML::Node& n, const std::string& where) {
  if (!n.IsSequence()) fail(where, "must be a list of strings");
  std::vector<std::string> out;
  for (std::size_t i = 0; i < n.size(); ++i)
    out.push_back(str(n[i], where + "[" + std::to_string(i) + "]"));
  return out;
}

credential_files credentials(const YAML::Node& n, const std::string& where,
                             const std::string& base) {
  check_keys(n, where, {"bearerTokenFiles", "clientCAFile", "allowedSubjects", "allowedSANs"});
  credential_files c;
  if (n["bearerTokenFiles"]) {
    for (auto& f : strings(n["bearerTokenFiles"], where + ".bearerTokenFiles")) {
      c.bearer_token_files.push_back(util::resolve_path(base, f));
    }
    if (c.bearer_token_files.empty())
      fail(where + ".bearerTokenFiles", "must list at least one file");
  }
  if (n["clientCAFile"])
    c.client_ca_file = util::resolve_path(base, str(n["clientCAFile"], where + ".clientCAFile"));
  if (n["allowedSubjects"])
    c.allowed_subjects = strings(n["allowedSubjects"], where + ".allowedSubjects");
  if (n["allowedSANs"]) c.allowed_sans = strings(n["allowedSANs"], where + ".allowedSANs");
  if ((!c.allowed_subjects.empty() || !c.allowed_sans.empty()) && c.client_ca_file.empty()) {
    fail(where, "allowedSubjects/allowedSANs need clientCAFile");
  }
  if (c.empty()) fail(where, "needs bearerTokenFiles or clientCAFile");
  return c;
}

// `metrics:` (server/metrics_auth.hpp). A key of another mode is an error, not ignored: a
// reviewTimeout under tokenfile would suggest a check that does not happen.
metrics_config metrics_settings(const YAML::Node& n, const std::string& base) {
  check_keys(n, "metrics",
             {"auth", "healthPort", "tokenFile", "reviewTimeout", "cacheTTL", "cacheSize",
              "maxConcurrentReviews", "audiences"});
  metrics_config m;
  const std::string auth = n["auth"] ? str(n["auth"], "metrics.auth") : "none";
  if (auth == "none")
    m.auth = metrics_auth_mode::none;
  else if (auth == "tokenfile")
    m.auth = metrics_auth_mode::tokenfile;
  else if (auth == "kubernetes")
    m.auth = metrics_auth_mode::kubernetes;
  else
    fail("metrics.auth", "must be none, tokenfile or kubernetes, got \"" + auth + "\"");
  // Secure metrics are pointless while the plain port answers anyone, and a token sent to it
  // would cross the network in clear text: with auth, only the HTTPS port serves /metrics
  // unless healthPort says otherwise.
  m.health_port = n["healthPort"] ? boolean(n["healthPort"], "metrics.healthPort")
                                  : m.auth == metrics_auth_mode::none;
  if (n["tokenFile"]) {
    if (m.auth != metrics_auth_mode::tokenfile)
      fail("metrics.tokenFile", "is only used with metrics.auth tokenfile");
    m.token_file = util::resolve_path(base, str(n["tokenFile"], "metrics.tokenFile"));
  }
  if (m.auth == metrics_auth_mode::tokenfile && m.token_file.empty()) {
    fail("metrics.tokenFile", "is required with metrics.auth tokenfile");
  }
  for (const char* key :
       {"reviewTimeout", "cacheTTL", "cacheSize", "maxConcurrentReviews", "audiences"}) {
    if (n[key] && m.auth != metrics_auth_mode::kubernetes) {
      fail(std::string("metrics.") + key, "is only used with metrics.auth kubernetes");
    }
  }
  if (n["reviewTimeout"]) {
    m.review_timeout = duration(n["reviewTimeout"], "metrics.reviewTimeout");
    // Past a scraper's own timeout (Prometheus: 10s by default) a late answer helps nobody.
    if (m.review_timeout < std::chrono::milliseconds(100) ||
        m.review_timeout > std::chrono::seconds(30)) {
      fail("metrics.reviewTimeout", "must be between 100ms and 30s");
    }
  }
  if (n["cacheTTL"]) {
    m.cache_ttl = duration(n["cacheTTL"], "metrics.cacheTTL");
    if (m.cache_ttl > std::chrono::hours(1)) fail("metrics.cacheTTL", "must be between 0s and 1h");
  }
  if (n["cacheSize"]) {
    m.cache_size = number(n["cacheSize"], "metrics.cacheSize", 1u << 20);
    if (m.cache_size == 0)
      fail("metrics.cacheSize", "must be at least 1 (cacheTTL: 0s turns the cache off)");
  }
  if (n["maxConcurrentReviews"]) {
    m.max_concurrent_reviews =
        number(n["maxConcurrentReviews"], "metrics.maxConcurrentReviews", 64);
    if (m.max_concurrent_reviews == 0)
      fail("metrics.maxConcurrentReviews", "must be between 1 and 64");
  }
  if (n["audiences"]) {
    m.audiences = strings(n["audiences"], "metrics.audiences");
    if (m.audiences.empty() || m.audiences.size() > 16) {
      fail("metrics.audiences",
           "must list 1 to 16 audiences (leave it out for the API server's own)");
    }
    std::set<std::string> seen;
    for (std::size_t i = 0; i < m.audiences.size(); ++i) {
      const std::string where = "metrics.audiences[" + std::to_string(i) + "]";
      const std::string& a = m.audiences[i];
      if (a.empty() || a.size() > 256) fail(where, "must be 1 to 256 characters");
      for (const char c : a) {
        if (static_cast<unsigned char>(c) <= 0x20 || c == 0x7f)
          fail(where, "must not contain spaces or control characters");
      }
      if (!seen.insert(a).second) fail(where, "\"" + a + "\" is listed twice");
    }
  }
  return m;
}

// `audit:` (server/audit_loop.hpp). Off unless enabled; the other keys are checked either way,
// so that a typo shows before the day the audit is switched on.
audit_config audit_settings(const YAML::Node& n) {
  check_keys(n, "audit", {"enabled", "interval", "timeout", "namespaces"});
  audit_config a;
  if (n["enabled"]) a.enabled = boolean(n["enabled"], "audit.enabled");
  if (n["interval"]) {
    a.interval = duration(n["interval"], "audit.interval");
    // Each run lists every object of two kinds: more often than every second only loads the API.
    if (a.interval < std::chrono::seconds(1) || a.interval > std::chrono::hours(24)) {
      fail("audit.interval", "must be between 1s and 24h");
    }
  }
  if (n["timeout"]) {
    a.timeout = duration(n["timeout"], "audit.timeout");
    if (a.timeout < std::chrono::seconds(1) || a.timeout > std::chrono::minutes(10)) {
      fail("audit.timeout", "must be between 1s and 10m");
    }
  }
  if (const auto ns = n["namespaces"]) {
    if (ns.IsScalar()) {
      if (ns.Scalar() != "all")
        fail("audit.namespaces",
             "must be all or a list of namespaces, got \"" + ns.Scalar() + "\"");
    } else {
      a.namespaces = strings(ns, "audit.namespaces");
      if (a.namespaces.empty())
        fail("audit.namespaces", "must list at least one namespace (or be all)");
      std::set<std::string> seen;
      for (std::size_t i = 0; i < a.namespaces.size(); ++i) {
        const std::string where = "audit.namespaces[" + std::to_string(i) + "]";
        if (!core::check_dns1123_label(a.namespaces[i]).empty()) {
          fail(where, "\"" + a.namespaces[i] + "\" is not a namespace name (a DNS-1123 label)");
        }
        if (!seen.insert(a.namespaces[i]).second)
          fail(where, "\"" + a.namespaces[i] + "\" is listed twice");
      }
    }
  }
  return a;
}

// `admission.ownershipCheck` (server/ownership_view.hpp), checked as `audit:` is.
ownership_check_config ownership_check_settings(const YAML::Node& n) {
  const std::string at = "admission.ownershipCheck";
  check_keys(n, at, {"enabled", "interval", "timeout"});
  ownership_check_config o;
  if (n["enabled"]) o.enabled = boolean(n["enabled"], at + ".enabled");
  if (n["interval"]) {
    o.interval = duration(n["interval"], at + ".interval");
    // Each list reads every Node: more often than every 5s only loads the API.
    if (o.interval < std::chrono::seconds(5) || o.interval > std::chrono::hours(24))
      fail(at + ".interval", "must be between 5s and 24h");
  }
  if (n["timeout"]) {
    o.timeout = duration(n["timeout"], at + ".timeout");
    if (o.timeout < std::chrono::seconds(1) || o.timeout > std::chrono::minutes(10))
      fail(at + ".timeout", "must be between 1s and 10m");
  }
  return o;
}

serve_config parse(const YAML::Node& root, const std::string& base) {
  serve_config cfg;
  if (!root.IsMap()) fail("configuration", "must be a YAML mapping");
  check_keys(root, "configuration",
             {"listen", "tls", "limits", "threads", "admission", "store", "resyncInterval",
              "inventories", "logging", "metrics", "audit"});

  if (auto l = root["listen"]) {
    check_keys(l, "listen", {"address", "port", "healthPort", "healthAddress"});
    if (l["address"]) cfg.address = str(l["address"], "listen.address");
    if (l["port"]) cfg.port = static_cast<unsigned>(number(l["port"], "listen.port", 65535));
    if (l["healthPort"])
      cfg.health_port = static_cast<unsigned>(number(l["healthPort"], "listen.healthPort", 65535));
    if (l["healthAddress"]) cfg.health_address = str(l["healthAddress"], "listen.healthAddress");
  }
  if (cfg.health_address.empty()) cfg.health_address = cfg.address;

  const auto t = root["tls"];
  if (!t) fail("tls", "is required (certFile and keyFile)");
  check_keys(t, "tls",
             {"certFile", "keyFile", "minVersion", "extraCertificates", "sessionTickets"});
  if (!t["certFile"] || !t["keyFile"]) fail("tls", "certFile and keyFile are required");
  cfg.certificates.push_back({util::resolve_path(base, str(t["certFile"], "tls.certFile")),
                              util::resolve_path(base, str(t["keyFile"], "tls.keyFile"))});
  if (auto extra = t["extraCertificates"]) {
    if (!extra.IsSequence()) fail("tls.extraCertificates", "must be a list of {certFile, keyFile}");
    for (std::size_t i = 0; i < extra.size(); ++i) {
      const std::string where = "tls.extraCertificates[" + std::to_string(i) + "]";
      check_keys(extra[i], where, {"certFile", "keyFile"});
      if (!extra[i]["certFile"] || !extra[i]["keyFile"])
        fail(where, "certFile and keyFile are required");
      cfg.certificates.push_back(
          {util::resolve_path(base, str(extra[i]["certFile"], where + ".certFile")),
           util::resolve_path(base, str(extra[i]["keyFile"], where + ".keyFile"))});
    }
  }
  if (t["minVersion"]) {
    cfg.min_tls_version = str(t["minVersion"], "tls.minVersion");
    if (cfg.min_tls_version != "1.2" && cfg.min_tls_version != "1.3") {
      fail("tls.minVersion", "must be \"1.2\" or \"1.3\" (older versions are refused)");
    }
  }

  if (auto st = t["sessionTickets"]) {
    if (!st.IsScalar() || (st.Scalar() != "true" && st.Scalar() != "false")) {
      fail("tls.sessionTickets", "must be true or false");
    }
    cfg.session_tickets = st.Scalar() == "true";
  }

  if (auto l = root["limits"]) {
    check_keys(
        l, "limits",
        {"maxConnections", "headerBytes", "admissionBodyBytes", "pushBodyBytes", "handshakeTimeout",
         "readTimeout", "idleTimeout", "shutdownTimeout", "shutdownDelay"});
    auto& lim = cfg.limits;
    if (l["maxConnections"])
      lim.max_connections = number(l["maxConnections"], "limits.maxConnections", 1u << 20);
    if (l["headerBytes"])
      lim.header_bytes = number(l["headerBytes"], "limits.headerBytes", 1u << 20);
    if (l["admissionBodyBytes"]) {
      lim.admission_body_bytes =
          number(l["admissionBodyBytes"], "limits.admissionBodyBytes", 64u << 20);
    }
    if (l["pushBodyBytes"])
      lim.push_body_bytes = number(l["pushBodyBytes"], "limits.pushBodyBytes", 64u << 20);
    if (l["handshakeTimeout"])
      lim.handshake_timeout = duration(l["handshakeTimeout"], "limits.handshakeTimeout");
    if (l["readTimeout"]) lim.read_timeout = duration(l["readTimeout"], "limits.readTimeout");
    if (l["idleTimeout"]) lim.idle_timeout = duration(l["idleTimeout"], "limits.idleTimeout");
    if (l["shutdownTimeout"])
      lim.shutdown_timeout = duration(l["shutdownTimeout"], "limits.shutdownTimeout");
    if (l["shutdownDelay"]) {
      lim.shutdown_delay = duration(l["shutdownDelay"], "limits.shutdownDelay");
      if (lim.shutdown_delay.count() < 0 || lim.shutdown_delay > std::chrono::minutes(5)) {
        fail("limits.shutdownDelay", "must be between 0s and 5m");
      }
    }
    if (lim.max_connections == 0) fail("limits.maxConnections", "must be at least 1");
    if (lim.header_bytes < 1024) fail("limits.headerBytes", "must be at least 1024");
    for (auto [d, name] : {std::pair{lim.handshake_timeout, "handshakeTimeout"},
                           {lim.read_timeout, "readTimeout"},
                           {lim.idle_timeout, "idleTimeout"}}) {
      if (d.count() <= 0) fail(std::string("limits.") + name, "must be positive");
    }
  }
  cfg.admission.max_body_bytes = cfg.limits.admission_body_bytes;

  if (root["threads"])
    cfg.threads = static_cast<unsigned>(number(root["threads"], "threads", 1024));

  if (auto mt = root["metrics"]) cfg.metrics = metrics_settings(mt, base);
  if (auto au = root["audit"]) cfg.audit = audit_settings(au);

  if (auto l = root["logging"]) {
    check_keys(l, "logging", {"level", "accessLog"});
    if (l["level"]) {
      cfg.log_level = str(l["level"], "logging.level");
      if (cfg.log_level != "debug" && cfg.log_level != "info" && cfg.log_level != "warn" &&
          cfg.log_level != "error") {
        fail("logging.level", "must be debug, info, warn or error");
      }
    }
    if (l["accessLog"]) cfg.access_log = boolean(l["accessLog"], "logging.accessLog");
  }

  auto& vopts = cfg.admission.validation;
  if (auto a = root["admission"]) {
    check_keys(a, "admission",
               {"workerNamespace", "reservedPrefixes", "extraReservedPrefixes", "ownershipCheck"});
    if (auto oc = a["ownershipCheck"]) cfg.ownership_check = ownership_check_settings(oc);
    if (a["workerNamespace"]) {
      vopts.worker_namespace = str(a["workerNamespace"], "admission.workerNamespace");
      if (!core::check_dns1123_label(vopts.worker_namespace).empty()) {
        fail("admission.workerNamespace", "must be a DNS-1123 label");
      }
    }
    if (a["reservedPrefixes"])
      vopts.reserved_prefixes = strings(a["reservedPrefixes"], "admission.reservedPrefixes");
    if (a["extraReservedPrefixes"]) {
      for (auto& p : strings(a["extraReservedPrefixes"], "admission.extraReservedPrefixes")) {
        vopts.reserved_prefixes.push_back(p);
      }
    }
  }

  auto& store = cfg.registry.store;
  if (auto s = root["store"]) {
    check_keys(s, "store",
               {"type", "directory", "namespace", "apiServer", "tokenFile", "caFile", "timeout"});
    const std::string type = s["type"] ? str(s["type"], "store.type") : "none";
    if (type == "none")
      store.type = inventory::store_config::kind::none;
    else if (type == "file")
      store.type = inventory::store_config::kind::file;
    else if (type == "kubernetes")
      store.type = inventory::store_config::kind::kubernetes;
    else
      fail("store.type", "must be none, file or kubernetes, got \"" + type + "\"");
    if (s["directory"])
      store.directory = util::resolve_path(base, str(s["directory"], "store.directory"));
    if (s["namespace"]) store.kube_namespace = str(s["namespace"], "store.namespace");
    if (s["apiServer"]) store.kube_api_server = str(s["apiServer"], "store.apiServer");
    if (s["tokenFile"])
      store.kube_token_file = util::resolve_path(base, str(s["tokenFile"], "store.tokenFile"));
    if (s["caFile"])
      store.kube_ca_file = util::resolve_path(base, str(s["caFile"], "store.caFile"));
    if (s["timeout"]) {
      store.timeout = duration(s["timeout"], "store.timeout");
      // A push waits at most this long: past a webhook client's own patience it helps nobody.
      if (store.timeout < std::chrono::milliseconds(100) ||
          store.timeout > std::chrono::minutes(5)) {
        fail("store.timeout", "must be between 100ms and 5m");
      }
    }
    if (store.type == inventory::store_config::kind::file && store.directory.empty()) {
      fail("store.directory", "is required for store.type file");
    }
  }
  if (root["resyncInterval"]) {
    const auto d = duration(root["resyncInterval"], "resyncInterval");
    if (d.count() <= 0) fail("resyncInterval", "must be positive");
    cfg.registry.resync_interval = std::chrono::duration_cast<std::chrono::seconds>(d);
    if (cfg.registry.resync_interval.count() == 0)
      cfg.registry.resync_interval = std::chrono::seconds(1);
  }

  const auto invs = root["inventories"];
  // No inventories is a webhook-only deployment (the chart's default): admission, health
  // and metrics are served, and every snapshot route answers 404/401.
  if (invs && !invs.IsNull() && !invs.IsSequence())
    fail("inventories", "must be a list of inventories");
  std::set<std::string> names;
  const std::size_t inventory_count = invs && invs.IsSequence() ? invs.size() : 0;
  for (std::size_t i = 0; i < inventory_count; ++i) {
    const auto n = invs[i];
    std::string where = "inventories[" + std::to_string(i) + "]";
    check_keys(n, where,
               {"name", "source", "snapshot", "nodes", "nodesFromAPI", "maxAge", "allowEmptyStart",
                "unknownNodes", "historySize", "readers", "writers", "maxProfileChanges",
                "driftGracePeriod", "workloadImpact", "maxStrandedWorkloads"});
    if (!n["name"]) fail(where, "name is required");
    const std::string name = str(n["name"], where + ".name");
    if (!core::check_dns1123_subdomain(name).empty())
      fail(where + ".name", "must be a DNS-1123 subdomain");
    if (!names.insert(name).second) fail(where + ".name", "\"" + name + "\" is listed twice");
    where = "inventories[" + name + "]";

    inventory::inventory_spec spec;
    spec.config.name = name;
    spec.config.options = vopts;
    if (!n["source"])
      fail(where, "source (the TopologySource file this inventory feeds) is required");
    const std::string source_path = util::resolve_path(base, str(n["source"], where + ".source"));
    const auto text = util::read_file(source_path);
    if (!text) fail(where + ".source", text.error().message);
    auto res = core::validate_topology_source_text(*text, vopts);
    if (!res.ok())
      fail(where + ".source",
           source_path + " is not a valid TopologySource:\n" + core::render_text(res.errors));
    spec.config.source = std::move(res.source);

    if (n["snapshot"])
      spec.snapshot_path = util::resolve_path(base, str(n["snapshot"], where + ".snapshot"));
    if (n["nodes"]) spec.nodes_path = util::resolve_path(base, str(n["nodes"], where + ".nodes"));
    if (n["nodesFromAPI"])
      spec.nodes_from_api = boolean(n["nodesFromAPI"], where + ".nodesFromAPI");
    if (!spec.nodes_path.empty() && spec.nodes_from_api)
      fail(where, "nodes and nodesFromAPI are exclusive");
    if (n["maxAge"]) {
      spec.config.max_age = std::chrono::duration_cast<std::chrono::seconds>(
          duration(n["maxAge"], where + ".maxAge"));
    }
    if (n["driftGracePeriod"]) {
      // How long a Node's labels may differ from the served revision (NFD applying them, a
      // controller overwriting one) before topogate_inventory_nodes_drifted counts it.
      const auto g = std::chrono::duration_cast<std::chrono::seconds>(
          duration(n["driftGracePeriod"], where + ".driftGracePeriod"));
      if (g.count() < 1 || g > std::chrono::hours(24))
        fail(where + ".driftGracePeriod", "must be between 1s and 24h");
      spec.drift_grace = g;
    }
    if (n["allowEmptyStart"])
      spec.config.allow_empty_start = boolean(n["allowEmptyStart"], where + ".allowEmptyStart");
    if (n["unknownNodes"]) {
      const auto p = str(n["unknownNodes"], where + ".unknownNodes");
      if (p == "reject")
        spec.config.unknown_nodes = inventory::unknown_nodes_policy::reject;
      else if (p == "prune")
        spec.config.unknown_nodes = inventory::unknown_nodes_policy::prune;
      else
        fail(where + ".unknownNodes", "must be reject or prune");
    }
    if (n["historySize"])
      spec.config.history_size = number(n["historySize"], where + ".historySize", 10000);
    if (n["maxProfileChanges"]) {
      // 0 (the default) is no limit; see docs/inventory.md "Profile-change impact".
      spec.config.max_profile_changes =
          number(n["maxProfileChanges"], where + ".maxProfileChanges", 1u << 20);
    }

    if (n["workloadImpact"] && boolean(n["workloadImpact"], where + ".workloadImpact")) {
      // The answer reads the cluster's Nodes, Pods and Kueue objects through the API.
      if (!spec.nodes_from_api) fail(where + ".workloadImpact", "needs nodesFromAPI: true");
      cfg.workload_impact.inventories.push_back(name);
    }
    if (n["maxStrandedWorkloads"]) {
      // Absent is no limit, 0 strands none; counted by the Workload answer, so it needs
      // workloadImpact.
      spec.config.max_stranded_workloads =
          number(n["maxStrandedWorkloads"], where + ".maxStrandedWorkloads", 1u << 20);
      if (std::find(cfg.workload_impact.inventories.begin(), cfg.workload_impact.inventories.end(),
                    name) == cfg.workload_impact.inventories.end())
        fail(where + ".maxStrandedWorkloads", "needs workloadImpact: true");
    }

    inventory_auth auth;
    auth.name = name;
    if (!n["readers"])
      fail(where,
           "readers is required (bearerTokenFiles or clientCAFile): snapshots are never served "
           "unauthenticated");
    auth.readers = credentials(n["readers"], where + ".readers", base);
    if (n["writers"]) auth.writers = credentials(n["writers"], where + ".writers", base);
    if (spec.config.source.node_labels) {
      // A nodeLabels source publishes nothing (T7): the inventory checks the labels the Nodes
      // already carry, so a Node list is its only input.
      if (!spec.snapshot_path.empty() || !auth.writers.empty()) {
        fail(where, "feeds a nodeLabels TopologySource, which takes no snapshot and no writers");
      }
      if (spec.nodes_path.empty() && !spec.nodes_from_api) {
        fail(where,
             "feeds a nodeLabels TopologySource: nodes (a Node list file) or nodesFromAPI is "
             "required");
      }
      spec.kind = inventory::source_kind::node_labels;
    } else if (!spec.snapshot_path.empty()) {
      // With writers too (accepted): pushes are then refused, the file being the one input.
      spec.kind = inventory::source_kind::file;
    } else if (auth.writers.empty()) {
      fail(where, "needs a snapshot file/directory or writers (push-only)");
    } else {
      spec.kind = inventory::source_kind::push;
    }
    cfg.auth.push_back(std::move(auth));
    cfg.registry.inventories.push_back(std::move(spec));
  }
  return cfg;
}

}  // namespace

core::result<serve_config> parse_serve_config(std::string_view yaml, const std::string& base_dir) {
  try {
    const YAML::Node root = YAML::Load(std::string(yaml));
    return parse(root, base_dir);
  } catch (const config_error& e) {
    return core::fail(core::errc::invalid_argument, e.message);
  } catch (const YAML::Exception& e) {
    return core::fail(core::errc::invalid_argument,
                      std::string("configuration is not valid YAML: ") + e.what());
  } catch (const std::exception& e) {
    return core::fail(core::errc::invalid_argument, std::string("configuration: ") + e.what());
  }
}

core::result<serve_config> load_serve_config(const std::string& path) {
  auto text = util::read_file(path, 4u << 20);
  if (!text) return std::move(text).error();
  std::string base = ".";
  if (const auto slash = path.rfind('/'); slash != std::string::npos) base = path.substr(0, slash);
  if (base.empty()) base = "/";
  auto cfg = parse_serve_config(*text, base);
  if (cfg) cfg->config_path = path;
  return cfg;
}

}  // namespace topogate::server

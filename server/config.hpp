#pragma once
// `topogate serve --config FILE`: the YAML configuration, documented key by key in
// docs/configuration.md. Parsing is strict (an unknown key is an error) because a typo
// in an authentication block must not silently leave an inventory open or locked.

#include <chrono>
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "admission/review.hpp"
#include "core/result.hpp"
#include "inventory/registry.hpp"
#include "server/auth.hpp"

namespace topogate::server {

struct tls_pair {
  std::string cert_file;  // PEM chain, leaf first
  std::string key_file;
};

struct limits_config {
  std::size_t max_connections = 4096;
  std::size_t header_bytes = 16384;
  std::size_t admission_body_bytes = admission::default_max_body_bytes;
  std::size_t push_body_bytes = 1u << 20;
  std::chrono::milliseconds handshake_timeout{10'000};
  std::chrono::milliseconds read_timeout{30'000};
  std::chrono::milliseconds idle_timeout{90'000};
  std::chrono::milliseconds shutdown_timeout{25'000};
  // Between SIGTERM and the drain: /readyz fails, requests are still served (each response
  // closes its connection) while the Service's endpoints drop the Pod. 0 drains at once.
  std::chrono::milliseconds shutdown_delay{0};
};

enum class metrics_auth_mode { none, tokenfile, kubernetes };

// `metrics:`: who may scrape /metrics (server/metrics_auth.hpp) and on which listeners.
struct metrics_config {
  metrics_auth_mode auth = metrics_auth_mode::none;
  std::string token_file;  // tokenfile: one token a line
  // Whether the plain-HTTP health listener serves /metrics (with the same check). Default:
  // true without auth, false with it.
  bool health_port = true;
  std::chrono::milliseconds review_timeout{5'000};  // kubernetes: TokenReview + SubjectAccessReview
  std::chrono::milliseconds cache_ttl{60'000};  // kubernetes: allowed and refused answers; 0: none
  std::size_t cache_size = 1024;
  std::size_t max_concurrent_reviews = 4;
  // kubernetes: the TokenReview's spec.audiences; a token must be issued for one of them (and
  // the API must say which one it matched). Empty: the API server's own audiences.
  std::vector<std::string> audiences;
};

// `audit:`: the periodic audit of the TopologySources and ModelDeployments already in the
// cluster (server/audit_loop.hpp), off by default.
struct audit_config {
  bool enabled = false;
  std::chrono::milliseconds interval{600'000};  // from the end of one run to the start of the next
  std::chrono::milliseconds timeout{30'000};    // one run, every API call of it included
  std::vector<std::string> namespaces;  // ModelDeployments only in these; empty: every namespace
};

// `admission.ownershipCheck`: the view of the cluster's TopologySources and Nodes behind the
// ownership warning (server/ownership_view.hpp), off by default.
struct ownership_check_config {
  bool enabled = false;
  std::chrono::milliseconds interval{60'000};  // from the end of one list to the start of the next
  std::chrono::milliseconds timeout{10'000};   // one list of sources and Nodes, every call included
};

// `workloadImpact: true` on inventories that list Nodes through the API: a dry run's answer
// also says which admitted Workloads the change evicts and which fit again
// (server/workload_impact.hpp). Off by default (it needs list on Pods and Kueue's objects).
struct workload_impact_config {
  std::vector<std::string> inventories;
  std::chrono::milliseconds timeout{10'000};  // the lists of one dry run, every call included
};

class dry_run_answer;

struct inventory_auth {
  std::string name;
  credential_files readers;
  credential_files writers;
};

struct serve_config {
  std::string config_path;
  std::string address = "0.0.0.0";
  unsigned port = 8443;
  unsigned health_port = 0;             // 0: no plain-HTTP listener
  std::string health_address;           // defaults to address
  std::vector<tls_pair> certificates;   // tls.certFile/keyFile first, then tls.extraCertificates
  std::string min_tls_version = "1.2";  // "1.2" or "1.3"
  bool session_tickets = true;  // tls.sessionTickets: resumption tickets after each full handshake
  limits_config limits;
  unsigned threads = 0;  // 0: one per core
  bool access_log = true;
  std::string log_level = "info";
  admission::options admission;
  ownership_check_config ownership_check;  // admission.ownershipCheck
  metrics_config metrics;
  audit_config audit;
  std::vector<inventory_auth> auth;
  inventory::registry_config registry;
  workload_impact_config workload_impact;
  // Set by serve() when some inventory has workloadImpact (it outlives the server).
  const dry_run_answer* dry_run = nullptr;
};

// `base_dir` resolves relative paths (the configuration file's directory). A configuration
// that is not valid YAML or breaks a rule is errc::invalid_argument, its message naming the key.
core::result<serve_config> parse_serve_config(std::string_view yaml, const std::string& base_dir);
// The file at `path` (at most 4 MiB), parsed; read failures as read_file reports them.
core::result<serve_config> load_serve_config(const std::string& path);

}  // namespace topogate::server

#pragma once
// Every inventory of the process, the inputs that feed them (files, directories, pushes,
// Node lists), the durable store for pushes, and the reconcile loop that keeps what is
// served equal to what the consumer accepts. The server only calls into this; it never
// validates or stores snapshots itself.

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/node_labels.hpp"
#include "inventory/inventory.hpp"

namespace topogate::inventory {

struct store_config {
  enum class kind { none, file, kubernetes } type = kind::none;  // none: pushes refused (503)
  std::string directory;                 // file store
  std::string kube_namespace = "gpustack-system";  // kubernetes store: one ConfigMap per inventory
  std::string kube_api_server;           // empty: in-cluster (KUBERNETES_SERVICE_HOST/PORT)
  std::string kube_token_file;           // empty: the ServiceAccount token
  std::string kube_ca_file;              // empty: the ServiceAccount CA
};

struct inventory_spec {
  inventory_config config;
  std::string snapshot_path;  // file or directory ("" = push-only)
  std::string nodes_path;     // kubectl get nodes -o json file ("" = none)
  bool nodes_from_api = false;  // list+watch Nodes through the Kubernetes API
};

struct registry_config {
  std::vector<inventory_spec> inventories;
  store_config store;
  std::chrono::seconds resync_interval{60};  // periodic full re-read, besides inotify
};

// A transport-independent HTTP answer (the server adds common headers and writes it).
struct http_answer {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  // e.g. ETag
};

// Observer for metrics/logging; every callback may be called from any thread.
struct registry_observer {
  std::function<void(const std::string& inventory, const attempt&)> on_attempt;
  // Reconcile-loop events worth a log line (pruning, read errors, store failures, watch
  // reconnects). level: "info", "warn", "error". Never carries a credential. When unset,
  // one JSON line per event goes to stderr.
  std::function<void(std::string_view level, std::string_view inventory, std::string_view message)> on_log;
};

// nodeLabels inventories (the TopologySource reads labels other components own): nothing
// is served or pushed; the hierarchy check over the selected Nodes' labels, re-run on every
// Node list change.
struct node_label_check {
  core::node_label_report report;
  std::chrono::system_clock::time_point checked_at;
  std::uint64_t checks = 0;  // Node lists checked so far, this one included
  std::string nodes_origin;  // "file:/path" or "kubernetes"
};
// One line for logs, /readyz and the history: "valid: 3 selected Nodes, 1 profile" or
// "2 errors (S8, S9): ...".
[[nodiscard]] std::string summarize(const node_label_check& c);

class registry {
 public:
  explicit registry(registry_config cfg, const clock& clk = system_clock(),
                    registry_observer obs = {});
  ~registry();
  registry(const registry&) = delete;
  registry& operator=(const registry&) = delete;

  // Loads the store and every source once (synchronously), then starts watching.
  void start();
  void stop();
  // SIGHUP: re-read every source now.
  void resync();

  [[nodiscard]] inventory* find(std::string_view name) const noexcept;
  [[nodiscard]] std::vector<inventory*> all() const;
  [[nodiscard]] bool ready() const;

  // PUT /snapshots/{name}: validate, make durable, then publish. 200/201 + ETag,
  // 412 (If-Match mismatch), 413, 422 (every field error), 503 (store unavailable).
  http_answer push(std::string_view name, std::string_view body,
                   std::optional<std::string> if_match, std::string actor);
  // The same, with the Topogate-Accept-Impact header's value ("*" or the served ETag):
  // 409 with the profile-change impact when the inventory's maxProfileChanges refuses it.
  http_answer push(std::string_view name, std::string_view body, std::optional<std::string> if_match,
                   std::string actor, std::optional<std::string> accept_impact);
  // GET /snapshots/{name}/status and /history (JSON documents).
  [[nodiscard]] http_answer status(std::string_view name) const;
  [[nodiscard]] http_answer history(std::string_view name) const;

  // True when `name` is a nodeLabels inventory.
  [[nodiscard]] bool reads_node_labels(std::string_view name) const noexcept;
  // The last hierarchy check of a nodeLabels inventory; null before the first Node list and
  // for other inventories.
  [[nodiscard]] std::shared_ptr<const node_label_check> node_labels(std::string_view name) const;
  // Readiness of one inventory, with the reason when not ready: a valid revision (or
  // allowEmptyStart) for snapshot inventories; a checked Node list (or allowEmptyStart) for
  // nodeLabels ones, whose hierarchy findings never make a replica unready.
  [[nodiscard]] bool inventory_ready(std::string_view name, std::string* why = nullptr) const;

 private:
  [[nodiscard]] http_answer node_label_status(std::string_view name) const;

  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace topogate::inventory

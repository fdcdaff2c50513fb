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
#include "core/result.hpp"
#include "inventory/drift.hpp"
#include "inventory/inventory.hpp"
#include "inventory/source.hpp"
#include "inventory/store.hpp"

namespace topogate::inventory {

struct store_config {
  enum class kind { none, file, kubernetes } type = kind::none;  // none: pushes refused (503)
  std::string directory;                                         // file store
  std::string kube_namespace = "gpustack-system";  // kubernetes store: one ConfigMap per inventory
  std::string kube_api_server;  // empty: in-cluster (KUBERNETES_SERVICE_HOST/PORT)
  std::string kube_token_file;  // empty: the ServiceAccount token
  std::string kube_ca_file;     // empty: the ServiceAccount CA
  // store.timeout: the deadline of every store operation, counted from the push's arrival
  // (waiting behind earlier pushes included). Past it the push is answered `unavailable`.
  std::chrono::milliseconds timeout{5000};
};

struct inventory_spec {
  inventory_config config;
  // What feeds it, named when the configuration is parsed (source.hpp's check_spec: a file
  // source and only it has snapshot_path; a nodeLabels TopologySource is fed by its Nodes).
  source_kind kind = source_kind::push;
  std::string snapshot_path;    // kind file: the file or directory
  std::string nodes_path;       // kubectl get nodes -o json file ("" = none)
  bool nodes_from_api = false;  // list+watch Nodes through the Kubernetes API
  // With a Node list (file or API): how long a Node's labels may differ from the served
  // revision before it counts as drifted (drift.hpp).
  std::chrono::seconds drift_grace{300};
};

struct registry_config {
  std::vector<inventory_spec> inventories;
  store_config store;
  std::chrono::seconds resync_interval{60};  // periodic full re-read, besides inotify
};

// What the registry does I/O through, built by its owner (serve, a test, a fuzz target) and
// handed over: the registry never builds a store or a watch itself.
struct registry_deps {
  std::unique_ptr<revision_store> store;  // null: pushes refused (store_error says why)
  std::string store_error;
  std::unique_ptr<node_watch> nodes;  // for inventories with nodes_from_api
  std::string nodes_error;
  // maxStrandedWorkloads: the admitted Workloads a candidate would leave Pending for
  // inventory `name` (server/workload_impact.hpp), with the answer in words; nullopt with
  // `why` when it cannot tell (the push is then not refused). Called on the inventory's lane.
  // Null: the policy is not applied.
  std::function<std::optional<std::size_t>(std::string_view name, const core::topology_source&,
                                           const core::snapshot&, std::string& summary)>
      stranded;
};
// The file store when `cfg` asks for one (kubernetes needs the Kubernetes client:
// inventory/kube.hpp's make_dependencies); nothing else.
registry_deps make_file_dependencies(const store_config& cfg);

// At most this many pushes per inventory are in progress at once (one running, the rest
// waiting in order); another is refused at once (push_outcome::busy).
inline constexpr std::size_t max_pushes_in_progress = 4;

// A push as the server hands it over (the body is owned: it outlives the request thread).
struct push_request {
  std::string name;
  std::string body;
  std::optional<std::string> if_match;
  std::string actor;  // an identity, never a credential
  // Topogate-Accept-Impact: "*" or the served ETag a refusal reported.
  std::optional<std::string> accept_impact;
};

// Every way a push can end. The server maps these to HTTP (server/inventory_http).
enum class push_outcome {
  created,              // stored and published; the inventory had no revision before
  stored,               // stored and published
  not_found,            // no such inventory
  not_pushable,         // a nodeLabels inventory, or one fed by a file
  too_large,            // over S10's 1 MiB
  invalid,              // the snapshot breaks rules: `errors`
  precondition_failed,  // If-Match does not match, or another replica published first
  impact_refused,       // valid, but over maxProfileChanges without acceptance
  validated,            // dry run (dryRun=All): valid and within the policy; nothing stored
  unavailable,          // no store, the store failed or did not answer within store.timeout
  busy,                 // max_pushes_in_progress already in progress for this inventory
};
[[nodiscard]] std::string_view to_string(push_outcome o) noexcept;

struct push_result {
  push_outcome outcome = push_outcome::unavailable;
  std::string message;                        // why, for every outcome but created/stored
  std::shared_ptr<const revision> served;     // what the inventory serves after the push
  std::shared_ptr<const revision> candidate;  // created/stored: the revision as accepted
  core::error_list errors;                    // invalid
  // created/stored: against the revision served before; impact_refused: the refused impact.
  std::shared_ptr<const core::profile_impact> impact;
  std::string impact_baseline_etag;  // impact_refused: the value that accepts it
  std::size_t max_profile_changes = 0;
  std::chrono::seconds retry_after{0};  // unavailable/busy: when trying again makes sense
};

// Observer for metrics/logging; every callback may be called from any thread.
struct registry_observer {
  std::function<void(const std::string& inventory, const attempt&)> on_attempt;
  // Reconcile-loop events worth a log line (pruning, read errors, store failures, watch
  // reconnects). level: "info", "warn", "error". Never carries a credential. When unset,
  // one JSON line per event goes to stderr.
  std::function<void(std::string_view level, std::string_view inventory, std::string_view message)>
      on_log;
  // Each turn of the reconcile loop, on its thread. Tests count turns with it.
  struct loop_turn {
    bool woken = false;  // its wake-up event woke it: a resync, a file to read again, stop
    bool alarm = false;  // the alarm set for a coalescing window's end rang
    bool nodes = false;  // the turn ended a coalescing window of Node changes
  };
  std::function<void(const loop_turn&)> on_loop_turn;
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
  registry(registry_config cfg, registry_deps deps, const clock& clk = system_clock(),
           registry_observer obs = {});
  // With make_file_dependencies(cfg.store).
  explicit registry(registry_config cfg, const clock& clk = system_clock(),
                    registry_observer obs = {});
  ~registry();
  registry(const registry&) = delete;
  registry& operator=(const registry&) = delete;

  // Reads every file source once, then starts watching; returns without waiting for the
  // store or the Kubernetes API (their inventories are not ready until they answer).
  void start();
  // Stops the watches and the lanes. A lane blocked in a store call the kernel does not
  // return from (a frozen disk) is waited for up to `wait`; false when one still is (the
  // registry must then not be destroyed: the process should exit).
  bool stop(std::chrono::milliseconds wait = std::chrono::seconds(10));
  // SIGHUP: re-read every source now.
  void resync();

  [[nodiscard]] inventory* find(std::string_view name) const noexcept;
  [[nodiscard]] std::vector<inventory*> all() const;
  [[nodiscard]] bool ready() const;

  // PUT /snapshots/{name}: queued on the inventory's lane, then validated, made durable and
  // published there, never on the caller's thread. `done` is called exactly once, from a
  // registry thread (or from this call, for a refusal decided at once): by store.timeout
  // after this call at the latest, however long the store takes.
  void push_async(push_request req, std::function<void(push_result)> done);
  // The same, waiting for the result (tests and tools; never on a request thread).
  push_result push(push_request req);
  push_result push(std::string_view name, std::string_view body,
                   std::optional<std::string> if_match, std::string actor,
                   std::optional<std::string> accept_impact = std::nullopt);
  // PUT /snapshots/{name}?dryRun=All: the push's answer without the push. Validated on the
  // inventory's lane against what it serves (its Node list, its baseline, maxProfileChanges
  // and an acceptance, If-Match against the served ETag), then answered `validated` (with
  // the candidate and its impact), `invalid`, `impact_refused` or `precondition_failed`.
  // Nothing is stored, published, counted or recorded in the history, and the store is not
  // called. `done` as for push_async.
  void dry_run_async(push_request req, std::function<void(push_result)> done);
  push_result dry_run(push_request req);
  // The JSON documents of GET /snapshots/{name}/status and /history; nullopt for an
  // unknown inventory.
  [[nodiscard]] std::optional<std::string> status_json(std::string_view name) const;
  [[nodiscard]] std::optional<std::string> history_json(std::string_view name) const;

  // What feeds inventory `name` and what it can do (serve a snapshot, take pushes, check
  // Node labels); null for a name that is no inventory.
  [[nodiscard]] const source* source_of(std::string_view name) const noexcept;
  // The last hierarchy check of a nodeLabels inventory; null before the first Node list and
  // for other inventories.
  [[nodiscard]] std::shared_ptr<const node_label_check> node_labels(std::string_view name) const;
  // Readiness of one inventory: a valid revision (or allowEmptyStart) for snapshot
  // inventories; a checked Node list (or allowEmptyStart) for nodeLabels ones, whose hierarchy
  // findings never make a replica unready. When not ready, errc::unavailable with the reason
  // (errc::not_found for a name that is no inventory).
  [[nodiscard]] core::result<void> inventory_ready(std::string_view name) const;
  // Whether the last store call (the first load and its retries, each push's load and save)
  // of a push-fed inventory got an answer from the store; nullopt before the first call,
  // without a store, and for inventories fed by a file or by Node labels.
  [[nodiscard]] std::optional<bool> store_available(std::string_view name) const;
  // A push-fed inventory's view of the store: whether the store holds a revision this replica
  // does not serve (it refused it here), and when the store last confirmed the view (a read,
  // a write, a watch event). nullopt where store_available is.
  struct store_view_status {
    bool behind = false;
    std::optional<std::chrono::system_clock::time_point> synced_at;
  };
  [[nodiscard]] std::optional<store_view_status> store_view(std::string_view name) const;
  // The last label-drift check of an inventory with a Node list (drift.hpp); null before the
  // first check, without a Node list, and for nodeLabels inventories.
  [[nodiscard]] std::shared_ptr<const drift_report> node_drift(std::string_view name) const;

 private:
  [[nodiscard]] std::string node_label_status(std::string_view name) const;

  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace topogate::inventory

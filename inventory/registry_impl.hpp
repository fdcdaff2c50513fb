#pragma once
// The registry's inside, shared by its files: registry.cpp (Node lists, the reconcile loop,
// start and stop), the sources' own (source_file.cpp, source_push.cpp: the store's view,
// source_node_labels.cpp), push.cpp (pushes on the lanes) and registry_json.cpp (the status
// and history documents). Internal to inventory/.

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "core/profile_impact.hpp"
#include "core/snapshot.hpp"
#include "inventory/file_watch.hpp"
#include "inventory/lane.hpp"
#include "inventory/registry.hpp"
#include "inventory/source_file.hpp"
#include "inventory/source_node_labels.hpp"
#include "inventory/source_push.hpp"
#include "inventory/store.hpp"

namespace topogate::inventory {

namespace detail {

using steady = std::chrono::steady_clock;

// Events arrive in bursts (a rename is IN_MOVED_FROM + IN_MOVED_TO; a ConfigMap update is
// a dozen entries): re-read once the burst is over.
constexpr auto debounce = std::chrono::milliseconds(10);
// A file that does not validate is read again after this, and only reported when it reads
// the same: a writer still rewriting the file in place is not worth a rejection.
constexpr auto settle = std::chrono::milliseconds(100);
// kubectl get nodes -o json for thousands of Nodes runs to tens of MiB.
constexpr std::size_t max_node_list_bytes = 256u << 20;
// How long a snapshot file whose inventory lists Nodes through the API waits for the first
// list before it is read without one (and validated again when the list comes).
constexpr auto nodes_grace = std::chrono::seconds(10);

inline void add_str(std::string& out, std::string_view key, std::string_view value) {
  core::append_json_string(out, key);
  out.push_back(':');
  core::append_json_string(out, value);
}

inline bool same_nodes(const core::node_list& a, const core::node_list& b) {
  if (b.since != 0 && b.since == a.id) {
    // `b` is `a` but for the Nodes it names as changed: only those are compared.
    for (const std::string& name : b.changed) {
      const core::cluster_node* x = a.find(name);
      const core::cluster_node* y = b.find(name);
      if ((x == nullptr) != (y == nullptr) || (x != nullptr && !(x->labels == y->labels)))
        return false;
    }
    return true;
  }
  if (a.nodes.size() != b.nodes.size()) return false;
  for (std::size_t i = 0; i < a.nodes.size(); ++i) {
    if (a.nodes[i].name != b.nodes[i].name || a.nodes[i].labels != b.nodes[i].labels) return false;
  }
  return true;
}

}  // namespace detail

using detail::add_str;
using detail::debounce;
using detail::max_node_list_bytes;
using detail::nodes_grace;
// Building a revision from a 1 MiB snapshot leaves a few MiB of freed short strings (the
// decoded snapshot, the pruned copy) interleaved with what the revision keeps. Handing them
// back after each reload measured 2.5 MiB of 60 MiB right after loading 16 inventories of
// 1 MiB (bench/README.md); reloads are rare, so the heap walk is cheap where it happens.
using detail::release_freed_memory;
using detail::same_nodes;
using detail::settle;

struct registry::impl {
  using steady = detail::steady;
  struct entry {
    inventory_spec spec;
    std::unique_ptr<inventory> inv;
    std::mutex write_mu;  // one writer at a time per inventory: prepare -> persist -> commit

    // What feeds it, with that kind's state (source_file, source_push, source_node_labels).
    std::unique_ptr<source> src;
    // Node-list file (loop thread only).
    std::string nodes_digest;
    std::string nodes_error;
    // Last Node list handed to the inventory (write_mu), shared with the other inventories
    // that list Nodes through the API.
    std::shared_ptr<const core::node_list> nodes;
    steady::time_point last_trim{};  // the last release_freed_memory() after a Node change
    // A Node list from the API is awaited before the snapshot file is first read (up to
    // nodes_grace), so the first revision is validated against the cluster's Nodes.
    std::atomic<bool> awaiting_nodes{false};
    // Store work in order: pushes, loads, revisions other replicas wrote. Last member: it
    // is destroyed (its thread ended) before anything its tasks use.
    detail::lane lane;
    // Label drift (drift.hpp): the Node list last handed over, for the loop's periodic check
    // (drift_mu, so the check never waits for a writer), the tracker (loop thread only) and
    // the last report (drift_mu).
    mutable std::mutex drift_mu;
    std::shared_ptr<const core::node_list> drift_nodes;
    std::shared_ptr<const drift_report> drift;
    drift_tracker drift_seen;
    // What the last check compared (loop thread only): the same revision and the same list
    // give the same Nodes differing, so a check between changes compares nothing again
    // and only ages what it found; a check after changes compares again only the Nodes
    // they can affect (drift_changes). The revision is weak (its rendering is not kept
    // alive); the basis keeps its pruned names and shares its accepted snapshot, its
    // profiles and the list, from which a report describes the Nodes it lists.
    std::weak_ptr<const revision> drift_rev;
    drift_basis drift_base;
  };

  registry_config cfg;
  const clock& clk;
  registry_observer obs;
  std::vector<std::unique_ptr<entry>> entries;

  std::unique_ptr<revision_store> store;
  std::string store_error;
  std::unique_ptr<node_watch> nodes_api;
  std::string nodes_error;
  decltype(registry_deps::stranded) stranded;  // maxStrandedWorkloads (registry.hpp)
  // The refusal of a valid push by maxStrandedWorkloads (recorded when `record`: not for a
  // dry run); nullopt when it passes (push.cpp). Lane only, write_mu not held.
  std::optional<push_result> stranded_refusal(entry& e, const inventory::prepared& p,
                                              const push_request& req,
                                              const inventory::offer_options& opts,
                                              bool record = true);
  // Node changes from the API after the first list: the watch's source of the list waits
  // here and the loop takes the list from it once node_coalesce after the first change of a
  // burst (a scale-up of a thousand Nodes is a handful of copies and re-evaluations, not a
  // thousand), off the watch's thread.
  std::mutex api_nodes_mu;
  bool api_nodes_seen = false;
  node_watch::list_source api_nodes_pending;
  steady::time_point api_nodes_due = steady::time_point::max();
  void on_api_nodes(node_watch::list_source current);
  void apply_api_nodes(std::shared_ptr<const core::node_list> list);
  steady::time_point nodes_grace_until{};
  detail::timer_queue timers;

  std::thread loop;
  int wake_fd = -1;
  // Rings at a coalescing window's end (api_nodes_due): the watch's thread arms it when a
  // window opens, so the loop, asleep until its own next deadline, is woken once per window,
  // at the end, not also at the opening to learn of it. -1 (timerfd_create failed): the
  // opening wakes the loop through wake_fd instead.
  int nodes_timer_fd = -1;
  std::atomic<bool> stopping{false};
  std::atomic<bool> resync_requested{false};
  std::atomic<bool> started{false};
  detail::dir_watcher watcher;

  impl(registry_config c, registry_deps deps, const clock& k, registry_observer o)
      : cfg(std::move(c)),
        clk(k),
        obs(std::move(o)),
        store(std::move(deps.store)),
        store_error(std::move(deps.store_error)),
        nodes_api(std::move(deps.nodes)),
        nodes_error(std::move(deps.nodes_error)),
        stranded(std::move(deps.stranded)) {
    for (auto& spec : cfg.inventories) {
      auto e = std::make_unique<entry>();
      if (const auto wrong = check_spec(spec); !wrong.empty()) {
        // The configuration names the kind and its fields together (server/config): a spec
        // that contradicts itself is a caller's bug.
        std::fprintf(stderr, "topogate: %s\n", wrong.c_str());
        std::abort();
      }
      e->inv = std::make_unique<inventory>(spec.config, clk);
      e->src = make_source(spec);
      e->spec = std::move(spec);
      entries.push_back(std::move(e));
    }
    cfg.inventories.clear();
    wake_fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    nodes_timer_fd = ::timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
  }

  ~impl() {
    // Lanes first: a task still running uses the store, the timers and the log.
    for (auto& e : entries) e->lane.stop(std::chrono::hours(24 * 365));
    timers.stop();
    if (wake_fd >= 0) ::close(wake_fd);
    if (nodes_timer_fd >= 0) ::close(nodes_timer_fd);
  }

  // A push-fed inventory: its revisions come from pushes and the store.
  static bool uses_store(const entry& e) { return e.src->accepts_pushes(); }
  // The push source of a push-fed inventory (uses_store).
  static push_source& push_of(entry& e) {
    auto* p = e.src->as_push();
    if (p == nullptr) std::abort();  // store work queued for another kind: a bug
    return *p;
  }
  static const push_source& push_of(const entry& e) { return push_of(const_cast<entry&>(e)); }

  entry* find(std::string_view name) const {
    for (const auto& e : entries) {
      if (e->inv->name() == name) return e.get();
    }
    return nullptr;
  }

  void log(std::string_view level, std::string_view inv, std::string_view message) const;

  // Reports the attempts recorded since `before` to the observer and the log.
  void report(entry& e, std::uint64_t before) const;

  void wake() const {
    if (wake_fd < 0) return;
    const std::uint64_t one = 1;
    [[maybe_unused]] const auto n = ::write(wake_fd, &one, sizeof one);
  }

  // Has the loop woken at `due` (a coalescing window's end): by the timer when there is one,
  // else at once, the loop then sleeping until `due` itself.
  void wake_at(steady::time_point due) const;

  // --- Node lists -------------------------------------------------------------------------

  void apply_nodes(entry& e, std::shared_ptr<const core::node_list> list);

  std::string nodes_origin(const entry& e) const {
    return !e.spec.nodes_path.empty() ? "file:" + e.spec.nodes_path : std::string("kubernetes");
  }

  // nodeLabels: the Nodes' own labels are the input, checked again on every Node list
  // change (write_mu held). The consumer reads those labels itself; this only tells what it
  // will find.
  void check_node_labels(entry& e);

  void check_nodes_file(entry& e);

  // --- Snapshot file sources (source_file.cpp) -----------------------------------------------

  // Returns true when the file should be looked at again after `settle`.
  bool check_snapshot_file(entry& e, bool confirm_invalid);

  // Re-reads every file input; returns true when something asked to be looked at again.
  bool check_all(bool confirm_invalid);

  std::map<std::string, std::set<std::string>> all_points() const;

  // Re-arms the watches; when the set changed (a symlink now points elsewhere, a directory
  // came back), reads again so a change between the read and the new watch is not lost.
  void rearm(std::map<std::string, std::set<std::string>>& points, bool& again);

  // Watches are armed before anything is read, so a change made while a source is being
  // loaded still produces an event.
  std::map<std::string, std::set<std::string>> armed;

  void run_loop();

  // Label drift of every inventory with a Node list, at `now` (loop thread).
  void check_drift();
  // How often check_drift runs: a tenth of the shortest grace, between 1 s and 30 s.
  std::chrono::milliseconds drift_interval() const;

  // --- Store (source_push.cpp; every call on the inventory's lane) ---------------------------

  // The store's revision of `e`, once: true when the store answered (with a revision or
  // without one). Lane only.
  bool load_from_store(entry& e, store_deadline deadline);

  void mark_loaded(entry& e);

  // The first load, retried with a growing pause until the store answers. Lane only.
  void first_load(entry& e);

  // Applies what the store holds (a read's answer when `authoritative`, else a watch event,
  // ignored unless newer than what this replica knows) and makes the inventory serve it or,
  // when it does not validate here, nothing. write_mu must not be held. Lane only.
  void apply_store_state(entry& e, store_state st, bool authoritative);
  // Offers head.state.rev to the inventory again (write_mu held). Lane only.
  void adopt_head(entry& e, const char* origin);
  // The periodic re-read of the store (resyncInterval): bounds how stale a replica's view can
  // be when its watch is stuck. Lane only.
  void verify_store(entry& e);
  // If-Match against the store's current revision as this replica knows it: "*" when there
  // is one; otherwise the ETag served for it here, or that of its stored bytes (what every
  // replica that holds it unpruned serves).
  static bool head_matches(entry& e, std::string_view if_match);
  void note_synced(entry& e) const;

  // --- Pushes
  // -------------------------------------------------------------------------------------
  struct push_call;
  void run_push(entry& e, push_call& call, const push_request& req);
  push_result store_push(entry& e, push_call& call, const push_request& req,
                         const inventory::offer_options& opts);
};

// The 409 a push over maxProfileChanges gets (push.cpp), for a push and a dry run alike.
push_result impact_refusal(const inventory& inv, const inventory::prepared& p);

}  // namespace topogate::inventory

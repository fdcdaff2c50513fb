#pragma once
// One inventory: the revision topogate serves for one TopologySource, how it got
// there, and the last attempts. Readers take an immutable revision (a shared_ptr
// swapped under them); nothing is ever served half-built.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/field_error.hpp"
#include "core/nodes.hpp"
#include "core/profile_impact.hpp"
#include "core/snapshot.hpp"
#include "core/topology_source.hpp"
#include "inventory/etag.hpp"

namespace topogate::inventory {

// Injected so staleness and history can be tested without sleeping.
class clock {
 public:
  virtual ~clock() = default;
  [[nodiscard]] virtual std::chrono::system_clock::time_point now() const = 0;
};
const clock& system_clock();

namespace detail {
// Text made on first use and then kept: std::call_once makes concurrent first readers wait
// for the one rendering instead of each making their own.
struct once_text {
  std::once_flag once;
  std::string text;
};

// Hands the pages malloc holds free back to the kernel (glibc's malloc_trim; nothing
// elsewhere). Called after building a revision or a YAML body: decoding a 1 MiB snapshot
// allocates and frees a few MiB of short strings interleaved with what is kept.
void release_freed_memory();
}  // namespace detail

// A published, validated revision. Immutable once built.
//
// Memory is what limits how many inventories one replica carries (16 inventories of 1 MiB
// are the sizing target), so a revision keeps what serving needs and nothing that can be
// rebuilt from it: the JSON body; the YAML body only once someone asks for YAML; the
// accepted snapshot not as a parsed tree (a string per Node name, label key and value, three
// times the size of its JSON) but as json_body itself when that is exactly the snapshot, else
// in a packed form, decoded again on the rare Node-list change that re-validates it.
struct revision {
  std::string revision_id;  // snapshot.revision (suffixed when pruned)
  std::string etag;         // quoted strong ETag: "\"" + hex digest of json_body + "\"" (etag.hpp)
  // The canonical JSON rendering, rendered once, in pieces: a revision made by a Node change
  // shares the bytes of the one it was made from (core::shared_text), not a copy of them.
  core::shared_text json_text;
  // json_text in one buffer: its own when it is one piece, else gathered on the first call
  // (once per revision, thread-safe) and kept for the revision's lifetime. The snapshot route
  // serves json_text's pieces instead (server/shared_body.hpp): a reader gathers nothing.
  [[nodiscard]] const std::string& json_body() const;
  // The same as YAML: rendered from json_body on the first call (once per revision, never
  // per request, thread-safe), then kept for the revision's lifetime.
  [[nodiscard]] const std::string& yaml_body() const;
  std::string accepted_revision_id;  // snapshot.revision as accepted (before any pruning)
  std::size_t node_count = 0;        // Nodes in json_body
  // The snapshot as accepted (before any pruning), in document order. False only when the
  // revision's own bytes no longer decode, which the inventory never builds.
  [[nodiscard]] bool accepted_snapshot(core::snapshot& out) const;
  std::chrono::system_clock::time_point accepted_at;
  std::string origin;  // "file:/path", "push", "store"
  std::string actor;   // who pushed (identity, never a credential), empty for files
  // Snapshot nodes left out because the Node list no longer has them (unknownNodes: prune);
  // json_body/yaml_body then render the pruned snapshot under revision_id.
  std::vector<std::string> pruned_nodes;
  // The profile of every managed Node once this revision is projected (the served, pruned
  // snapshot over the selected Nodes). Never null for a revision built by the inventory.
  std::shared_ptr<const core::profile_assignment> profiles;
  // The accepted snapshot packed (length-prefixed strings in document order) when json_body
  // is not exactly it (pruned, or the input's Nodes or labels were not in canonical order)
  // and it is not kept decoded (accepted_decoded); null when one of those gives it back.
  // Shared by the revisions derived from it.
  std::shared_ptr<const std::string> accepted_packed;
  // The accepted snapshot decoded, kept while the inventory knows the cluster's Nodes (each
  // Node change re-evaluates it: decoding it again each time cost more than the rules);
  // null otherwise. Shared by the revisions derived from it.
  std::shared_ptr<const core::snapshot> accepted_decoded;
  // accepted_decoded, or the accepted snapshot decoded now; null when it does not decode.
  [[nodiscard]] std::shared_ptr<const core::snapshot> accepted_shared() const;
  // What lets a Node change be applied to this revision alone (inventory::set_nodes), set
  // when the inventory knew its Nodes: where each served Node's member starts in json_body
  // (core::render_snapshot_json), and whether the accepted snapshot lists its Nodes by name
  // (strictly increasing).
  std::shared_ptr<const std::vector<std::uint32_t>> members;
  bool accepted_sorted = false;
  bool accepted_canonical = false;  // and each Node's labels by key (json_body decodes to it)
  // json_body's chunked digest (the ETag), kept with `members`: a Node change re-hashes only
  // the bytes it changed.
  std::shared_ptr<const body_digest> digest;
  // For each level but the first, each value's first carrier among the Nodes served when
  // the revision was last evaluated in full (its index in accepted_decoded's Nodes, whose
  // strings the keys view). What a Node joining is checked against (S9).
  struct level_carriers {
    std::vector<std::unordered_map<std::string_view, std::uint32_t>> by_level;
  };
  std::shared_ptr<const level_carriers> carriers;
  // Copies of a revision share the YAML rendering and json_body (a copy is the same revision).
  std::shared_ptr<detail::once_text> yaml_cache = std::make_shared<detail::once_text>();
  std::shared_ptr<detail::once_text> json_cache = std::make_shared<detail::once_text>();
};

// One accept/reject decision, kept in a bounded history.
struct attempt {
  std::chrono::system_clock::time_point at;
  std::string revision_id;
  std::string origin;
  std::string actor;
  bool accepted = false;
  std::string etag;              // when accepted
  core::error_list errors;       // when rejected
  std::string note;              // why, when the errors do not say it (412, pruning, Node change)
  std::size_t pruned_nodes = 0;  // Nodes left out of the served revision (unknownNodes: prune)
  // Profile-change impact against the revision served before (the baseline); null when none
  // was computed (invalid input, failures).
  std::shared_ptr<const core::profile_impact> impact;
  bool impact_refused = false;  // valid, but over max_profile_changes without acceptance
  // maxStrandedWorkloads: the admitted Workloads the revision would leave Pending, when
  // counted (a push to an inventory with the policy); refused over the limit.
  std::optional<std::size_t> stranded_workloads;
  bool stranded_refused = false;
};

enum class unknown_nodes_policy { reject, prune };

struct inventory_config {
  std::string name;
  core::topology_source source;
  core::validation_options options;
  std::chrono::seconds max_age{0};  // 0 = no limit
  bool allow_empty_start = false;
  unknown_nodes_policy unknown_nodes = unknown_nodes_policy::reject;
  std::size_t history_size = 32;
  // maxProfileChanges: a file or push revision is refused when more than this many Nodes
  // change or lose their profile, or more than this many profiles appear or disappear,
  // unless the offer accepts the impact. 0 = no limit. Node-list changes are never refused.
  std::size_t max_profile_changes = 0;
  // maxStrandedWorkloads: a push is refused when the admitted Workloads it would leave
  // Pending (registry_deps::stranded) are more than this, unless it accepts the impact
  // (0: none may be stranded). nullopt (absent) = no limit.
  std::optional<std::size_t> max_stranded_workloads;
};

struct offer_result {
  bool accepted = false;
  core::error_list errors;                 // every rule violated (S1..S10)
  std::shared_ptr<const revision> served;  // the revision served after the offer
  // Impact of the candidate against the baseline (the last revision served); null when invalid.
  std::shared_ptr<const core::profile_impact> impact;
  std::string impact_baseline_etag;  // the baseline's ETag ("" when nothing was served yet)
  bool impact_refused = false;       // refused by max_profile_changes (errors empty)
};

// What a GET should answer right now.
struct serve_decision {
  std::shared_ptr<const revision> rev;  // null => 503
  std::string unavailable_reason;       // set when rev is null
};

class inventory {
 public:
  inventory(inventory_config cfg, const clock& clk = system_clock());

  [[nodiscard]] const inventory_config& config() const noexcept { return cfg_; }
  [[nodiscard]] const std::string& name() const noexcept { return cfg_.name; }

  // Lock-free for readers in the sense that matters: a short critical section to copy
  // a shared_ptr, never held while a body is written to a socket.
  [[nodiscard]] std::shared_ptr<const revision> current() const;
  [[nodiscard]] serve_decision serve() const;  // applies max_age
  [[nodiscard]] bool ready() const;            // has a revision or allow_empty_start

  // Validates `bytes` with the core against the source and the known Nodes; publishes
  // atomically when valid. `if_match` (an ETag) makes it conditional: on mismatch
  // nothing changes and `precondition_failed` is set.
  struct offer_options {
    std::string origin;
    std::string actor;
    std::optional<std::string> if_match;
    // When the revision was first acknowledged (a reload from the store keeps its age).
    std::optional<std::chrono::system_clock::time_point> accepted_at;
    // Accepts the profile-change impact past max_profile_changes: "*" or the ETag of the
    // baseline the impact was computed against (If-Match syntax, strong comparison).
    std::optional<std::string> accept_impact = {};
  };
  offer_result offer(std::string_view bytes, const offer_options& o);
  // Builds the revision a publish would produce, without publishing (for durable
  // stores: persist first, then commit()).
  struct prepared {
    offer_result result;
    std::shared_ptr<const revision> candidate;  // null when invalid
    bool precondition_failed = false;
    std::uint64_t nodes_generation = 0;       // the Node list the candidate was validated against
    std::shared_ptr<const revision> refused;  // the valid candidate max_profile_changes refused
  };
  prepared prepare(std::string_view bytes, const offer_options& o) const;
  void commit(const prepared& p);
  void record_rejection(const prepared& p, const offer_options& o);
  // A valid push refused by max_stranded_workloads: `stranded` Workloads, `summary` in words.
  void record_stranded_refusal(const prepared& p, const offer_options& o, std::size_t stranded,
                               const std::string& summary);
  // An attempt that failed before validation (unreadable file, store write failed).
  void record_failure(const offer_options& o, std::string note);
  // The revision is no longer the input's (a store object deleted, damaged, or replaced by
  // one that does not validate here): nothing is served, 503 with `reason`, until a new one
  // is committed. Records no attempt; the caller does.
  void withdraw(std::string reason);

  // Off: every Node change evaluates the accepted snapshot again in full (the reference the
  // differential test compares the incremental path with); on by default. Before any use.
  void set_incremental_node_changes(bool on) { delta_ = on; }
  // Node changes decided from the served revision alone (evaluate_change), not evaluated in full.
  [[nodiscard]] std::uint64_t incremental_node_changes() const noexcept {
    return delta_count_.load(std::memory_order_relaxed);
  }
  // Node lists compared with the selected Nodes in full (the first, a relist, or one whose
  // changes the source did not name since the list before), not from their named changes.
  [[nodiscard]] std::uint64_t full_node_comparisons() const noexcept {
    return full_count_.load(std::memory_order_relaxed);
  }

  // Replaces the Node list (nullopt = unknown) and re-validates the served revision.
  void set_nodes(std::optional<core::node_list> nodes);
  // The same for a list shared with others (null = unknown): without a nodeSelector the
  // inventory keeps the shared list itself, not a copy.
  void set_nodes(std::shared_ptr<const core::node_list> nodes);

  [[nodiscard]] std::vector<attempt> history() const;
  [[nodiscard]] std::optional<attempt> last_attempt() const;

  // The source re-read the bytes that produced `etag` and they are still valid: the served
  // revision is fresh again (max_age counts from the last confirmation, not from the first
  // acceptance, so an unchanged file does not expire). No history entry.
  void confirm(std::string_view etag);
  // The revision as accepted (before pruning), even while nothing is servable.
  [[nodiscard]] std::shared_ptr<const revision> accepted() const;
  [[nodiscard]] std::chrono::system_clock::time_point confirmed_at() const;
  // Number of selected Nodes, nullopt while the Node list is unknown.
  [[nodiscard]] std::optional<std::size_t> selected_node_count() const;
  [[nodiscard]] std::uint64_t nodes_generation() const;
  // Number of attempts ever recorded (history() keeps the last history_size of them).
  [[nodiscard]] std::uint64_t attempts_recorded() const;
  // The attempts recorded after the first `count` (those history() still keeps), oldest
  // first: what a caller that saw attempts_recorded() == count has not seen, without a copy
  // of the whole history.
  [[nodiscard]] std::vector<attempt> attempts_after(std::uint64_t count) const;
  // Why the last file or push revision was refused by max_profile_changes, while it has not
  // been followed by a published one ("" otherwise).
  [[nodiscard]] std::string impact_refusal() const;
  // The revision the consumer saw last (current(), or the last one served before a 503).
  [[nodiscard]] std::shared_ptr<const revision> last_served() const;

  // The ETag of a body (body_digest), as every replica computes it.
  [[nodiscard]] static std::string etag_of(std::string_view json_body);
  // RFC 9110 §13.1.1 If-Match with strong comparison: "*" matches any current revision,
  // otherwise a comma-separated list of entity tags (weak tags never match).
  [[nodiscard]] static bool if_match_matches(std::string_view header,
                                             const std::string* current_etag);

 private:
  inventory_config cfg_;
  const clock& clock_;
  mutable std::mutex mu_;
  std::shared_ptr<const revision> current_;
  std::vector<attempt> history_;  // ring, newest last

  struct evaluation {
    std::shared_ptr<revision> rev;  // null when invalid
    core::error_list errors;
    // evaluate_change only: what is served stays exactly as it is (rev is null).
    bool unchanged = false;
  };
  // The Nodes that differ between two selected lists (before, after; null = absent), in
  // name order; `many` when there are more than `most` (the list then stops there).
  struct node_diff {
    std::vector<std::pair<const core::cluster_node*, const core::cluster_node*>> changes;
    bool many = false;
  };
  [[nodiscard]] static node_diff diff_nodes(const core::node_list& before,
                                            const core::node_list& after, std::size_t most);
  // The selection of `all` and its diff with `before` (the selection of the list `all` names
  // as its base, node_list::since) from the Nodes `all` names as changed alone. Null when
  // no selected Node differs (the selection is `before`'s).
  [[nodiscard]] std::shared_ptr<const core::node_list> select_changed(
      const std::shared_ptr<const core::node_list>& all, const core::node_list& before,
      node_diff& diff) const;
  // The one deterministic function from (accepted snapshot, selected Nodes, policy) to
  // what is served, shared by offers and Node changes so every replica agrees.
  // `from` (may be null) is the revision `snap` was unpacked from: its packed form is reused.
  // `decoded` (may be null) is `snap` itself, shared: kept as the revision's accepted_decoded
  // when there is a Node list.
  [[nodiscard]] evaluation evaluate(const core::snapshot& snap,
                                    const std::shared_ptr<const core::node_list>& selected,
                                    const revision* from = nullptr,
                                    std::shared_ptr<const core::snapshot> decoded = nullptr) const;
  // evaluate(snap, after, base) computed from `cur`, which is evaluate(snap, before, base),
  // for a change of a few Nodes: a label changed on a Node (S6 for it, its profile), a Node
  // left (pruned from the rendering without rendering the others) or a Node the snapshot
  // does not describe joined. Nullopt when it cannot be decided so (a Node the snapshot
  // names joined, S6 fails, the policy rejects unknown Nodes, many Nodes changed, `cur` was
  // not evaluated against `before`): evaluate() decides then, as it would anyway.
  // `profiles` is what evaluate(snap, before) assigns (cur's own profiles may keep level
  // values an unnoticed change since moved).
  [[nodiscard]] std::optional<evaluation> evaluate_change(
      const revision& cur, const revision& base, const node_diff& diff,
      const std::shared_ptr<const core::node_list>& after,
      const std::shared_ptr<const core::profile_assignment>& profiles) const;
  // Whether the Nodes `joined` (described by `snap`, pruned from cur) may be served beside
  // cur's; false when that cannot be told without the full evaluation.
  [[nodiscard]] bool joins_hold(const revision& cur, const core::snapshot& snap,
                                const std::vector<const core::snapshot_node*>& joined,
                                const std::shared_ptr<const core::node_list>& after) const;
  bool delta_ = true;
  std::atomic<std::uint64_t> delta_count_{0};
  std::atomic<std::uint64_t> full_count_{0};
  // current_ (its bytes) and delta_profiles_ are exactly what evaluate() gives for the
  // selected Nodes delta_nodes_; null when that is not known. Writers only (write_mu_).
  std::shared_ptr<const core::node_list> delta_nodes_;
  std::shared_ptr<const core::profile_assignment> delta_profiles_;
  void set_delta(std::shared_ptr<const core::node_list> nodes,
                 std::shared_ptr<const core::profile_assignment> profiles);
  void push_history(attempt a);  // mu_ held

  mutable std::mutex write_mu_;  // serialises writers (commit, set_nodes); readers never take it
  std::shared_ptr<const revision> base_;  // as accepted; current_ is base_, pruned, or null
  std::shared_ptr<const core::node_list> selected_;  // the selected Nodes, null = unknown
  std::uint64_t nodes_seen_ = 0;  // the id of the list selected_ was selected from (0: none)
  std::uint64_t generation_ = 0;
  std::uint64_t attempts_ = 0;
  std::chrono::system_clock::time_point confirmed_at_{};
  std::string unavailable_reason_ = "no valid revision yet";
  // Baseline of every impact: what the consumer fetched last, even while a 503 is served.
  std::shared_ptr<const revision> last_served_;
  std::string impact_refusal_;
};

}  // namespace topogate::inventory

#pragma once
// Durable stores for pushed revisions (H2): a revision is acknowledged only once the store
// says it is durable. The registry never builds a store itself: whoever runs it (serve, a
// test, a fuzz target) builds one and hands it over (registry_deps in registry.hpp).
//
// Every call may block on I/O (a disk, the Kubernetes API) and so is made on an inventory's
// own lane thread (inventory/lane.hpp), never on a request thread, and with a deadline:
// a store answers `unavailable` once it has passed, or as soon after as its I/O allows.
//
// A store call fails with one of three codes, and callers decide by them (a push answers
// 412 for a conflict and 503 when the store is unavailable; a damaged revision is recorded
// and replaced by the next push):
//   errc::conflict     save only: the store holds another version than `expected_version`
//   errc::unavailable  no answer (I/O error, unreachable API, past the deadline); retrying may help
//   errc::damaged      load only: the store answered, but what it holds for the inventory is
//                      no revision (a damaged file, a foreign ConfigMap); `out` then has only
//                      its version, and the next write replaces it

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/nodes.hpp"
#include "core/result.hpp"

namespace topogate::inventory {

struct stored_revision {
  std::string json;  // canonical JSON of the accepted snapshot (before any pruning)
  std::chrono::system_clock::time_point accepted_at{};
  std::string actor;
  std::string version;  // store version: resourceVersion (kubernetes), digest (file)
};

// What the store holds for one inventory at one point of its history: a read's answer or a
// watch event. `as_of` places it in the store's order (kubernetes: the read's list
// resourceVersion, or the event's); the registry applies a state only when it is newer than
// the one it knows, so a watch event that arrives late (the echo of an older write) never
// takes the served revision back.
struct store_state {
  std::optional<stored_revision> rev;  // nullopt: no object (never written, or deleted)
  bool damaged = false;  // the object holds no readable revision: `rev` has only its version
  std::string as_of;     // "" when the store cannot tell
};

namespace detail {
// The order of two store versions where the store defines one: -1, 0 or 1. Kubernetes
// resourceVersions are comparable as decimal integers without leading zeros (KEP-5504,
// stable since Kubernetes 1.35; etcd's revisions before that); anything else (a file store's
// digest, "") is nullopt: only equality means something.
std::optional<int> version_order(std::string_view a, std::string_view b);
}  // namespace detail

using store_deadline = std::chrono::steady_clock::time_point;

class revision_store {
 public:
  virtual ~revision_store() = default;
  [[nodiscard]] virtual std::string describe() const = 0;
  // The last acknowledged revision of `inventory` (`out.rev` nullopt when there is none),
  // read from the store itself, not from a cache: what any later read will see at least.
  // Fails with unavailable or damaged (then `out` is a damaged state).
  virtual core::result<void> load(const std::string& inventory, store_state& out,
                                  store_deadline deadline) = 0;
  // Durable when it succeeds; the value is the new version (empty when the store could not
  // tell it). `expected_version` (empty: none known) makes the write conditional where the
  // store supports it (conflict on mismatch). Past `deadline` a store gives up before its
  // commit point (the rename, the API request) and answers unavailable.
  virtual core::result<std::string> save(const std::string& inventory, const stored_revision& rev,
                                         const std::string& expected_version,
                                         store_deadline deadline) = 0;
  // Every change of an inventory's object (another replica's write, this one's own write
  // seen again, an edit or a deletion by hand), in the store's order, and each object again
  // after a relist. Called from the store's own threads.
  using change_fn = std::function<void(const std::string& inventory, const store_state&)>;
  virtual void start_watch(const std::vector<std::string>& /*inventories*/, change_fn /*fn*/) {}
  virtual void stop() {}
};

// The longest a Node change from the API waits to be applied with the ones after it (the
// registry's coalescing window, opened by the first change after a quiet time).
inline constexpr std::chrono::milliseconds node_coalesce{200};

// The Node list from the Kubernetes API, for inventories with `nodes_from_api`.
class node_watch {
 public:
  virtual ~node_watch() = default;
  // Which label keys to keep (null: all). Every rule reads only a few keys of a Node
  // (core::reads_node_label); keeping only those makes a change to any other label (a
  // heartbeat, a controller's stamp) cost a decode and a comparison, and no publication.
  using label_filter = std::function<bool(std::string_view key)>;
  // The list as it is when called (any thread, any time, also after stop()): a change hands
  // this over instead of a copy, so a burst of changes costs one copy per time its taker
  // applies them (the registry: once per coalescing window), not one per change.
  using list_source = std::function<std::shared_ptr<const core::node_list>()>;
  // Starts listing and watching on its own thread and returns at once; calls `on_change`
  // (from that thread) after the first list and after every change of a Node's name or
  // kept labels (labels filtered by `keep`).
  virtual void start(label_filter keep, std::function<void(list_source)> on_change) = 0;
  virtual void stop() = 0;
};

// One file per inventory in `directory`: temp file, fsync, rename, fsync(directory). Fails
// with errc::invalid_argument (no directory configured, not a directory) or errc::io (it
// cannot be created or written to).
core::result<std::unique_ptr<revision_store>> make_file_store(const std::string& directory);

namespace detail {
// Lower-case hex SHA-256.
std::string sha256_hex(std::string_view bytes);
}  // namespace detail

}  // namespace topogate::inventory

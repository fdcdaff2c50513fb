#pragma once
// Durable stores for pushed revisions (H2): a revision is acknowledged only once the store
// says it is durable. Internal to inventory/.

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "inventory/registry.hpp"

namespace topogate::inventory::detail {

struct stored_revision {
  std::string json;  // canonical JSON of the accepted snapshot (before any pruning)
  std::chrono::system_clock::time_point accepted_at{};
  std::string actor;
  std::string version;  // store version: resourceVersion (kubernetes), digest (file)
};

struct store_status {
  enum class code { ok, conflict, unavailable } value = code::ok;
  std::string message;
  [[nodiscard]] bool ok() const noexcept { return value == code::ok; }
};

class revision_store {
 public:
  virtual ~revision_store() = default;
  [[nodiscard]] virtual std::string describe() const = 0;
  // The last acknowledged revision of `inventory`, nullopt in `out` when there is none.
  virtual store_status load(const std::string& inventory, std::optional<stored_revision>& out) = 0;
  // Durable when it returns ok. `expected_version` (empty: none known) makes the write
  // conditional where the store supports it (conflict on mismatch).
  virtual store_status save(const std::string& inventory, const stored_revision& rev,
                            const std::string& expected_version, std::string& new_version) = 0;
  // Revisions written by other replicas. Called from the store's own threads.
  using change_fn = std::function<void(const std::string& inventory, const stored_revision&)>;
  virtual void start_watch(const std::vector<std::string>& /*inventories*/, change_fn /*fn*/) {}
  virtual void stop() {}
};

// One file per inventory in `directory`: temp file, fsync, rename, fsync(directory).
std::unique_ptr<revision_store> make_file_store(const std::string& directory, std::string& error);
// One ConfigMap `topogate-<inventory>` per inventory in the namespace, written with
// optimistic concurrency on metadata.resourceVersion and watched.
std::unique_ptr<revision_store> make_kube_store(
    const store_config& cfg, std::function<void(std::string_view level, std::string_view message)> log,
    std::string& error);

// Lower-case hex SHA-256.
std::string sha256_hex(std::string_view bytes);
// RFC 3339 UTC with milliseconds ("2026-11-29T18:12:05.123Z").
std::string format_time(std::chrono::system_clock::time_point t);
std::optional<std::chrono::system_clock::time_point> parse_time(std::string_view s);

}  // namespace topogate::inventory::detail

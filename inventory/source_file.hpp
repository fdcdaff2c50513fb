#pragma once
// The file source: a snapshot file or directory, read by the reconcile loop on every change
// (inotify) and every resyncInterval. Its state is the loop's view of the file. Internal to
// inventory/.

#include <cstdint>
#include <string>

#include "inventory/source.hpp"

namespace topogate::inventory {

class file_source final : public source {
 public:
  explicit file_source(std::string path) : path_(std::move(path)) {}

  [[nodiscard]] source_kind kind() const noexcept override { return source_kind::file; }
  [[nodiscard]] const std::string* watched_path() const noexcept override { return &path_; }
  [[nodiscard]] std::string push_refusal(std::string_view name) const override;
  [[nodiscard]] std::string input(const revision_store* store) const override;
  [[nodiscard]] file_source* as_file() noexcept override { return this; }

  [[nodiscard]] const std::string& path() const noexcept { return path_; }

  // What the file held when last read (loop thread, under the inventory's write_mu).
  std::string digest;
  std::uint64_t generation = ~std::uint64_t{0};  // the Node list it was validated against
  bool ok = false;                               // it is the served revision
  std::string etag;
  std::string error;                   // the last read error, reported once
  std::string pending_invalid_digest;  // invalid once: read again after `settle` to confirm

 private:
  std::string path_;
};

}  // namespace topogate::inventory

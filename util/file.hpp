#pragma once
// Files at the process edge: reading a configuration, a kubeconfig, a credential or an input
// (bounded, so a wrong path such as a device or a huge log fails instead of filling memory);
// writing one atomically and durably (the demo's files, the file store's revisions); telling
// whether one changed.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/result.hpp"

namespace topogate::util {

// The whole file. Fails with errc::io (the message names the path and errno) or, past
// `max_bytes`, errc::too_large.
core::result<std::string> read_file(const std::string& path, std::size_t max_bytes = 64u << 20);

// `path` resolved against `base_dir` unless absolute.
[[nodiscard]] std::string resolve_path(std::string_view base_dir, std::string_view path);

struct atomic_write_options {
  atomic_write_options() = default;
  explicit atomic_write_options(unsigned file_mode) : mode(file_mode) {}

  unsigned mode = 0600;  // of the new file (0600 for keys, tokens and stored revisions)
  // The temporary file, in the same directory as the target; empty: "<path>.tmp.<pid>".
  // Created exclusively (O_EXCL) when named, so two writers never share one.
  std::string temp_path;
  // Checked after the data is durable and before the rename, the commit point: a write that
  // took past it (a disk that stalled in fsync) is abandoned, and the target is untouched.
  std::optional<std::chrono::steady_clock::time_point> deadline;
};

// Writes `data` to a temporary file, fsyncs it, renames it over `path` and fsyncs the
// directory: readers see the old file or the new one, never a part, and once this returns
// the new file survives a crash. On failure the temporary file is removed and the target
// is as it was. Fails with errc::io (the message names the step, the path and errno), or
// errc::unavailable when the deadline passed.
core::result<void> write_file_atomic(const std::string& path, std::string_view data,
                                     const atomic_write_options& options = {});

// What a change watcher compares: stat() follows symlinks, so a Kubernetes Secret
// volume's `..data` swap shows up as a new inode even when size and mtime match.
struct file_signature {
  std::uint64_t dev = 0, ino = 0, size = 0;
  std::int64_t mtime_ns = 0;
  bool exists = false;
  friend bool operator==(const file_signature&, const file_signature&) = default;
};
[[nodiscard]] file_signature signature_of(const std::string& path);

}  // namespace topogate::util

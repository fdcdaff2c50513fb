#pragma once
// Small file helpers for the process edge (configuration, credentials, demo files).

#include <cstdint>
#include <string>
#include <string_view>

#include "core/result.hpp"
#include "util/file.hpp"

namespace topogate::server {

// The bounded read and path resolution are util/'s (the Kubernetes client reads kubeconfigs
// and credentials with them too); named here for the server's own callers.
using util::read_file;
using util::resolve_path;

// Write to a temporary file in the same directory, fsync, rename: readers never see a
// partial file. `mode` applies to the new file (0600 for keys and tokens). Fails with errc::io.
core::result<void> write_file_atomic(const std::string& path, std::string_view data, unsigned mode);

// What a change watcher compares: stat() follows symlinks, so a Kubernetes Secret
// volume's `..data` swap shows up as a new inode even when size and mtime match.
struct file_signature {
  std::uint64_t dev = 0, ino = 0, size = 0;
  std::int64_t mtime_ns = 0;
  bool exists = false;
  friend bool operator==(const file_signature&, const file_signature&) = default;
};
[[nodiscard]] file_signature signature_of(const std::string& path);

}  // namespace topogate::server

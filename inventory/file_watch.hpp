#pragma once
// Reading snapshot and Node-list files the way they are published in practice: a plain
// file replaced by rename, a file rewritten in place, a Kubernetes ConfigMap volume (the
// kubelet swaps a `..data` symlink), a git-sync checkout (a symlink to a worktree is
// swapped). Internal to inventory/.

#include <cstddef>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace topogate::inventory::detail {

struct file_read {
  bool ok = false;
  std::string bytes;
  std::string error;          // "read /x: No such file or directory", when !ok
  std::string resolved_path;  // the file actually read (a directory source picks one)
  bool too_large = false;     // more than the cap: bytes holds cap + 1 bytes
};

// Reads a whole file, at most `cap` + 1 bytes (so the caller can report S10 on the size),
// retrying while the file changes under the read (size, mtime or inode differ before and
// after), so a writer that is still writing is not mistaken for the content.
file_read read_stable(const std::string& path, std::size_t cap);

// A directory source holds one snapshot: `<inventory>.{json,yaml,yml}`, else
// `snapshot.{json,yaml,yml}`, else the only *.json/*.yaml/*.yml file not starting with '.'
// (ConfigMap volumes keep their own bookkeeping in dot entries).
file_read read_source(const std::string& path, const std::string& inventory_name, std::size_t cap);

// The directories whose entries decide what `path` resolves to, each with the entry names
// that matter: every component of the path and of every symlink met on the way. A change
// to any of them (a rename, a symlink swap, a directory removed and recreated) can change
// the file `path` designates.
std::map<std::string, std::set<std::string>> watch_points(const std::string& path);

// inotify over a changing set of directories; names filter the events of each directory.
class dir_watcher {
 public:
  dir_watcher();
  ~dir_watcher();
  dir_watcher(const dir_watcher&) = delete;
  dir_watcher& operator=(const dir_watcher&) = delete;

  [[nodiscard]] int fd() const noexcept { return fd_; }
  [[nodiscard]] bool ok() const noexcept { return fd_ >= 0; }
  // Replaces the watched set. Directories that do not exist are skipped (their parent,
  // also in the set, reports their creation).
  void set_points(const std::map<std::string, std::set<std::string>>& points);
  // Drains pending events; true when one concerned a watched name (or a watched directory
  // itself went away / the queue overflowed).
  bool drain();

 private:
  int fd_ = -1;
  std::map<int, std::string> dir_by_wd_;
  std::map<std::string, std::set<std::string>> points_;
};

}  // namespace topogate::inventory::detail

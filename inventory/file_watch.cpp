#include "inventory/file_watch.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <deque>
#include <system_error>

#include "core/result.hpp"

namespace topogate::inventory::detail {

namespace {

bool same_version(const struct stat& a, const struct stat& b) {
  return a.st_ino == b.st_ino && a.st_dev == b.st_dev && a.st_size == b.st_size &&
         a.st_mtim.tv_sec == b.st_mtim.tv_sec && a.st_mtim.tv_nsec == b.st_mtim.tv_nsec;
}

std::string join_path(const std::string& dir, const std::string& name) {
  if (dir.empty() || dir == "/") return "/" + name;
  return dir + "/" + name;
}

std::string parent_of(const std::string& p) {
  const auto slash = p.find_last_of('/');
  if (slash == std::string::npos || slash == 0) return "/";
  return p.substr(0, slash);
}

std::deque<std::string> split_path(const std::string& p) {
  std::deque<std::string> out;
  std::size_t i = 0;
  while (i <= p.size()) {
    const auto j = p.find('/', i);
    const auto part = p.substr(i, j == std::string::npos ? std::string::npos : j - i);
    if (!part.empty()) out.push_back(part);
    if (j == std::string::npos) break;
    i = j + 1;
  }
  return out;
}

std::string absolute(const std::string& p) {
  if (!p.empty() && p.front() == '/') return p;
  std::array<char, PATH_MAX> buf{};
  if (::getcwd(buf.data(), buf.size()) == nullptr) return "/" + p;
  return join_path(buf.data(), p);
}

}  // namespace

file_read read_stable(const std::string& path, std::size_t cap) {
  file_read r;
  r.resolved_path = path;
  // A writer rewriting the file in place shows up as a size or mtime change across our
  // read; a few retries ride out a write in progress without spinning forever.
  for (int tries = 0; tries < 8; ++tries) {
    r = file_read{};
    r.resolved_path = path;
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      r.error = "read " + path + ": " + core::errno_text(errno);
      return r;
    }
    struct stat before {};
    struct stat after {};
    if (::fstat(fd, &before) != 0) {
      r.error = "stat " + path + ": " + core::errno_text(errno);
      ::close(fd);
      return r;
    }
    if (!S_ISREG(before.st_mode)) {
      r.error = "read " + path + ": not a regular file";
      ::close(fd);
      return r;
    }
    const std::size_t want = cap + 1;
    r.bytes.resize(std::min<std::size_t>(want, static_cast<std::size_t>(before.st_size) + 1));
    std::size_t got = 0;
    bool failed = false;
    for (;;) {
      if (got == r.bytes.size()) {
        if (r.bytes.size() >= want) break;
        r.bytes.resize(std::min(want, r.bytes.size() * 2 + 4096));
      }
      const auto n = ::read(fd, r.bytes.data() + got, r.bytes.size() - got);
      if (n < 0) {
        if (errno == EINTR) continue;
        r.error = "read " + path + ": " + core::errno_text(errno);
        failed = true;
        break;
      }
      if (n == 0) break;
      got += static_cast<std::size_t>(n);
    }
    r.bytes.resize(got);
    const bool stat_ok = ::fstat(fd, &after) == 0;
    ::close(fd);
    if (failed) return r;
    r.too_large = got > cap;
    const bool stable = stat_ok && same_version(before, after) &&
                        (r.too_large || got == static_cast<std::size_t>(after.st_size));
    r.ok = true;
    if (stable) return r;
  }
  return r;  // still changing: the content decides (validation rejects a torn file)
}

file_read read_source(const std::string& path, const std::string& inventory_name, std::size_t cap) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    file_read r;
    r.error = "read " + path + ": " + core::errno_text(errno);
    return r;
  }
  if (!S_ISDIR(st.st_mode)) return read_stable(path, cap);

  DIR* d = ::opendir(path.c_str());
  if (d == nullptr) {
    file_read r;
    r.error = "read " + path + ": " + core::errno_text(errno);
    return r;
  }
  std::vector<std::string> names;
  while (const dirent* e = ::readdir(d)) {
    std::string n = e->d_name;
    if (n.empty() || n.front() == '.') continue;
    const bool ext = n.ends_with(".json") || n.ends_with(".yaml") || n.ends_with(".yml");
    if (!ext) continue;
    struct stat fst {};
    if (::stat(join_path(path, n).c_str(), &fst) != 0 || !S_ISREG(fst.st_mode)) continue;
    names.push_back(std::move(n));
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());

  std::string chosen;
  for (const auto* stem : {inventory_name.c_str(), "snapshot"}) {
    for (const auto* ext : {".json", ".yaml", ".yml"}) {
      const std::string want = std::string(stem) + ext;
      if (chosen.empty() && std::binary_search(names.begin(), names.end(), want)) chosen = want;
    }
  }
  if (chosen.empty() && names.size() == 1) chosen = names.front();
  if (chosen.empty()) {
    file_read r;
    r.error = names.empty()
                  ? "read " + path + ": no *.json, *.yaml or *.yml snapshot file in directory"
                  : "read " + path + ": several snapshot files and none named " + inventory_name +
                        ".{json,yaml,yml} or snapshot.{json,yaml,yml}";
    return r;
  }
  return read_stable(join_path(path, chosen), cap);
}

std::map<std::string, std::set<std::string>> watch_points(const std::string& path) {
  std::map<std::string, std::set<std::string>> points;
  auto queue = split_path(absolute(path));
  std::string cur = "/";
  int links = 0;
  while (!queue.empty()) {
    const std::string comp = queue.front();
    queue.pop_front();
    if (comp == ".") continue;
    if (comp == "..") {
      cur = parent_of(cur);
      continue;
    }
    points[cur].insert(comp);
    const std::string next = join_path(cur, comp);
    struct stat st {};
    if (::lstat(next.c_str(), &st) != 0) break;  // its creation shows up in `cur`
    if (S_ISLNK(st.st_mode)) {
      if (++links > 40) break;  // ELOOP, as the kernel would say
      std::array<char, PATH_MAX> buf{};
      const auto n = ::readlink(next.c_str(), buf.data(), buf.size() - 1);
      if (n <= 0) break;
      const std::string target(buf.data(), static_cast<std::size_t>(n));
      if (target.front() == '/') cur.assign(1, '/');
      auto parts = split_path(target);
      queue.insert(queue.begin(), parts.begin(), parts.end());
      continue;
    }
    cur = next;
  }
  // A directory source: its entries (file names and ConfigMap dot entries) all matter.
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) points[cur].insert("*");
  return points;
}

dir_watcher::dir_watcher() : fd_(::inotify_init1(IN_NONBLOCK | IN_CLOEXEC)) {}

dir_watcher::~dir_watcher() {
  if (fd_ >= 0) ::close(fd_);
}

void dir_watcher::set_points(const std::map<std::string, std::set<std::string>>& points) {
  if (fd_ < 0) return;
  constexpr std::uint32_t mask = IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_MODIFY |
                                 IN_CLOSE_WRITE | IN_ATTRIB | IN_DELETE_SELF | IN_MOVE_SELF |
                                 IN_ONLYDIR;
  std::map<int, std::string> next;
  for (const auto& [dir, names] : points) {
    const int wd = ::inotify_add_watch(fd_, dir.c_str(), mask);
    if (wd >= 0) next[wd] = dir;
  }
  for (const auto& [wd, dir] : dir_by_wd_) {
    if (!next.contains(wd)) ::inotify_rm_watch(fd_, wd);
  }
  dir_by_wd_ = std::move(next);
  points_ = points;
}

bool dir_watcher::drain() {
  if (fd_ < 0) return false;
  bool relevant = false;
  alignas(inotify_event) std::array<char, 16384> buf{};
  for (;;) {
    const auto n = ::read(fd_, buf.data(), buf.size());
    if (n <= 0) break;
    std::size_t off = 0;
    while (off + sizeof(inotify_event) <= static_cast<std::size_t>(n)) {
      inotify_event ev{};
      std::copy_n(buf.data() + off, sizeof ev, reinterpret_cast<char*>(&ev));
      std::string name;
      if (ev.len > 0)
        name.assign(buf.data() + off + sizeof(inotify_event),
                    ::strnlen(buf.data() + off + sizeof(inotify_event), ev.len));
      off += sizeof(inotify_event) + ev.len;
      if ((ev.mask & (IN_Q_OVERFLOW | IN_IGNORED | IN_DELETE_SELF | IN_MOVE_SELF)) != 0) {
        relevant = true;
        continue;
      }
      const auto it = dir_by_wd_.find(ev.wd);
      if (it == dir_by_wd_.end()) continue;
      const auto pit = points_.find(it->second);
      if (pit == points_.end()) continue;
      if (pit->second.contains("*") || pit->second.contains(name)) relevant = true;
    }
  }
  return relevant;
}

}  // namespace topogate::inventory::detail

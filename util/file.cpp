#include "util/file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

namespace topogate::util {

namespace {
// Read errno first: the cleanup after a failure (close) may change it.
core::error io_error(const std::string& what, const std::string& path) {
  return core::fail(core::errc::io, what + " " + path + ": " + core::errno_text(errno));
}

// Closes `fd` keeping errno: the failure being reported is the step before.
core::error io_error_closing(int fd, const std::string& what, const std::string& path) {
  auto e = io_error(what, path);
  ::close(fd);
  return e;
}

std::string directory_of(const std::string& path) {
  const auto slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}
}  // namespace

core::result<void> write_file_atomic(const std::string& path, std::string_view data,
                                     const atomic_write_options& options) {
  const bool named = !options.temp_path.empty();
  const std::string tmp = named ? options.temp_path : path + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | (named ? O_EXCL : O_TRUNC),
                        options.mode);
  if (fd < 0) return io_error("cannot create", tmp);
  const auto written = [&]() -> core::result<void> {
    // The mode asked for, whatever the umask and whatever an earlier leftover had.
    if (::fchmod(fd, options.mode) != 0) return io_error_closing(fd, "cannot chmod", tmp);
    for (std::string_view rest = data; !rest.empty();) {
      const ssize_t n = ::write(fd, rest.data(), rest.size());
      if (n < 0) {
        if (errno == EINTR) continue;
        return io_error_closing(fd, "cannot write", tmp);
      }
      rest.remove_prefix(static_cast<std::size_t>(n));
    }
    // fsync before rename: otherwise a crash can leave the new name pointing at an empty
    // file. The descriptor is closed whichever of the two fails.
    if (::fsync(fd) != 0) return io_error_closing(fd, "cannot sync", tmp);
    if (::close(fd) != 0) return io_error("cannot close", tmp);
    if (options.deadline && std::chrono::steady_clock::now() >= *options.deadline) {
      return core::fail(
          core::errc::unavailable,
          "the write to " + path + " did not complete in time (abandoned before the rename)");
    }
    if (::rename(tmp.c_str(), path.c_str()) != 0) return io_error("cannot rename to", path);
    return {};
  }();
  if (!written) {
    ::unlink(tmp.c_str());
    return written;
  }
  // The rename is durable only once the directory entry is.
  const std::string dir = directory_of(path);
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) return io_error("cannot open the directory", dir);
  if (::fsync(dfd) != 0) return io_error_closing(dfd, "cannot sync the directory", dir);
  ::close(dfd);
  return {};
}

file_signature signature_of(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return {};
  file_signature s;
  s.dev = static_cast<std::uint64_t>(st.st_dev);
  s.ino = static_cast<std::uint64_t>(st.st_ino);
  s.size = static_cast<std::uint64_t>(st.st_size);
  s.mtime_ns = static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  s.exists = true;
  return s;
}

core::result<std::string> read_file(const std::string& path, std::size_t max_bytes) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return io_error("cannot open", path);
  std::string out;
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      auto e = io_error("cannot read", path);
      ::close(fd);
      return e;
    }
    if (n == 0) break;
    out.append(buf, static_cast<std::size_t>(n));
    if (out.size() > max_bytes) {
      ::close(fd);
      return core::fail(core::errc::too_large,
                        path + " is larger than " + std::to_string(max_bytes) + " bytes");
    }
  }
  ::close(fd);
  return out;
}

std::string resolve_path(std::string_view base_dir, std::string_view path) {
  if (path.empty() || path.front() == '/' || base_dir.empty()) return std::string(path);
  std::string out(base_dir);
  if (out.back() != '/') out.push_back('/');
  out += path;
  return out;
}

}  // namespace topogate::util

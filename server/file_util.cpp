#include "server/file_util.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace topogate::server {

namespace {
// Read errno first: the cleanup after a failure (close, unlink) may change it.
core::error io_error(const std::string& what, const std::string& path) {
  return core::fail(core::errc::io, what + " " + path + ": " + core::errno_text(errno));
}
}  // namespace

core::result<void> write_file_atomic(const std::string& path, std::string_view data,
                                     unsigned mode) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0) return io_error("cannot create", tmp);
  ::fchmod(fd, mode);
  std::size_t off = 0;
  while (off < data.size()) {
    const ssize_t n = ::write(fd, data.data() + off, data.size() - off);
    if (n < 0) {
      if (errno == EINTR) continue;
      auto e = io_error("cannot write", tmp);
      ::close(fd);
      ::unlink(tmp.c_str());
      return e;
    }
    off += static_cast<std::size_t>(n);
  }
  // fsync before rename: otherwise a crash can leave the new name pointing at an empty file.
  // The descriptor is closed whichever of the two fails.
  if (::fsync(fd) != 0) {
    auto e = io_error("cannot sync", tmp);
    ::close(fd);
    ::unlink(tmp.c_str());
    return e;
  }
  if (::close(fd) != 0) {
    auto e = io_error("cannot close", tmp);
    ::unlink(tmp.c_str());
    return e;
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    auto e = io_error("cannot rename to", path);
    ::unlink(tmp.c_str());
    return e;
  }
  // The rename is durable only once the directory entry is.
  const auto slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? std::string(".")
                          : slash == 0               ? std::string("/")
                                                     : path.substr(0, slash);
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) return io_error("cannot open the directory", dir);
  if (::fsync(dfd) != 0) {
    auto e = io_error("cannot sync the directory", dir);
    ::close(dfd);
    return e;
  }
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

}  // namespace topogate::server

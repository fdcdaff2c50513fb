#include "server/file_util.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace topogate::server {

namespace {
std::string errno_text(const std::string& what, const std::string& path) {
  return what + " " + path + ": " + std::strerror(errno);
}
}  // namespace

bool read_file(const std::string& path, std::string& out, std::string* error, std::size_t max_bytes) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (error) *error = errno_text("cannot open", path);
    return false;
  }
  out.clear();
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (error) *error = errno_text("cannot read", path);
      ::close(fd);
      return false;
    }
    if (n == 0) break;
    out.append(buf, static_cast<std::size_t>(n));
    if (out.size() > max_bytes) {
      if (error) *error = path + " is larger than " + std::to_string(max_bytes) + " bytes";
      ::close(fd);
      return false;
    }
  }
  ::close(fd);
  return true;
}

bool write_file_atomic(const std::string& path, std::string_view data, unsigned mode, std::string* error) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0) {
    if (error) *error = errno_text("cannot create", tmp);
    return false;
  }
  ::fchmod(fd, mode);
  std::size_t off = 0;
  while (off < data.size()) {
    const ssize_t n = ::write(fd, data.data() + off, data.size() - off);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (error) *error = errno_text("cannot write", tmp);
      ::close(fd);
      ::unlink(tmp.c_str());
      return false;
    }
    off += static_cast<std::size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    if (error) *error = errno_text("cannot sync", tmp);
    ::unlink(tmp.c_str());
    return false;
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    if (error) *error = errno_text("cannot rename to", path);
    ::unlink(tmp.c_str());
    return false;
  }
  return true;
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

std::string resolve_path(std::string_view base_dir, std::string_view path) {
  if (path.empty() || path.front() == '/' || base_dir.empty()) return std::string(path);
  std::string out(base_dir);
  if (out.back() != '/') out.push_back('/');
  out += path;
  return out;
}

}  // namespace topogate::server

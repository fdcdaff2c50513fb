#include "util/file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

namespace topogate::util {

namespace {
// Read errno first: the cleanup after a failure (close) may change it.
core::error io_error(const std::string& what, const std::string& path) {
  return core::fail(core::errc::io, what + " " + path + ": " + core::errno_text(errno));
}
}  // namespace

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

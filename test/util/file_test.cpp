// util/file: the bounded read, on both sides of its limit, and path resolution.

#include "util/file.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

namespace topogate::util {
namespace {

TEST(ReadFile, HoldsItsLimitOnBothSides) {
  char tmpl[] = "/tmp/topogate-util-file-XXXXXX";
  const int fd = ::mkstemp(tmpl);
  ASSERT_GE(fd, 0);
  ::close(fd);
  const std::string path = tmpl;
  std::ofstream(path, std::ios::binary) << std::string(100, 'a');
  const auto at = read_file(path, 100);
  ASSERT_TRUE(at);
  EXPECT_EQ(at->size(), 100u);
  const auto over = read_file(path, 99);
  ASSERT_FALSE(over);
  EXPECT_EQ(over.error().code, core::errc::too_large);
  ::unlink(path.c_str());
  const auto missing = read_file(path, 10);
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code, core::errc::io);
  EXPECT_NE(missing.error().message.find(path), std::string::npos) << missing.error().message;
}

TEST(ResolvePath, RelativeToTheBaseUnlessAbsolute) {
  EXPECT_EQ(resolve_path("/etc/topogate", "token"), "/etc/topogate/token");
  EXPECT_EQ(resolve_path("/etc/topogate/", "sub/token"), "/etc/topogate/sub/token");
  EXPECT_EQ(resolve_path("/etc/topogate", "/abs/token"), "/abs/token");
  EXPECT_EQ(resolve_path("", "token"), "token");
  EXPECT_EQ(resolve_path("/etc", ""), "");
}

}  // namespace
}  // namespace topogate::util

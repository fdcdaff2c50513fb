// server/file_util: the atomic write (demo files, written once and read
// by people and scripts).

#include "server/file_util.hpp"

#include <dirent.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

namespace topogate::server {
namespace {

struct temp_dir {
  std::string path;
  temp_dir() {
    char tmpl[] = "/tmp/topogate-file-util-XXXXXX";
    path = ::mkdtemp(tmpl);
  }
  ~temp_dir() {
    if (DIR* d = ::opendir(path.c_str())) {
      while (const dirent* e = ::readdir(d)) {
        const std::string n = e->d_name;
        if (n != "." && n != "..") ::unlink((path + "/" + n).c_str());
      }
      ::closedir(d);
    }
    ::rmdir(path.c_str());
  }
  [[nodiscard]] std::size_t entries() const {
    std::size_t n = 0;
    if (DIR* d = ::opendir(path.c_str())) {
      while (const dirent* e = ::readdir(d))
        n += std::string(e->d_name) != "." && std::string(e->d_name) != "..";
      ::closedir(d);
    }
    return n;
  }
};

TEST(FileUtil, AtomicWriteCreatesAndReplacesWithTheMode) {
  temp_dir d;
  const std::string path = d.path + "/key.pem";
  ASSERT_TRUE(write_file_atomic(path, "first", 0600));
  ASSERT_TRUE(write_file_atomic(path, "second, longer", 0600));
  const auto back = read_file(path, 1024);
  ASSERT_TRUE(back);
  EXPECT_EQ(*back, "second, longer");
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(d.entries(), 1u);  // no temporary file left beside it
}

TEST(FileUtil, AtomicWriteIntoAMissingDirectoryFailsAndLeavesNothing) {
  temp_dir d;
  const auto w = write_file_atomic(d.path + "/absent/file", "x", 0644);
  ASSERT_FALSE(w);
  EXPECT_NE(w.error().message.find("cannot create"), std::string::npos) << w.error().message;
  EXPECT_EQ(d.entries(), 0u);
}

TEST(FileUtil, AtomicWriteOfARelativePathSyncsTheWorkingDirectory) {
  temp_dir d;
  char cwd[4096];
  ASSERT_NE(::getcwd(cwd, sizeof cwd), nullptr);
  ASSERT_EQ(::chdir(d.path.c_str()), 0);
  const auto w = write_file_atomic("relative.txt", "here", 0644);
  ASSERT_EQ(::chdir(cwd), 0);
  ASSERT_TRUE(w) << w.error().message;
  const auto back = read_file(d.path + "/relative.txt", 16);
  ASSERT_TRUE(back);
  EXPECT_EQ(*back, "here");
}

}  // namespace
}  // namespace topogate::server

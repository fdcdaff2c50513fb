// util/file: the atomic write (the demo's files; the file store's revisions, with a deadline
// before the rename) and the change signature the certificate and token watchers compare.

#include <dirent.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <string>

#include "util/file.hpp"

namespace topogate::util {
namespace {

struct temp_dir {
  std::string path;
  temp_dir() {
    char tmpl[] = "/tmp/topogate-atomic-write-XXXXXX";
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

TEST(AtomicWrite, CreatesAndReplacesWithTheMode) {
  temp_dir d;
  const std::string path = d.path + "/key.pem";
  ASSERT_TRUE(write_file_atomic(path, "first", atomic_write_options(0600)));
  ASSERT_TRUE(write_file_atomic(path, "second, longer", atomic_write_options(0600)));
  const auto back = read_file(path, 1024);
  ASSERT_TRUE(back);
  EXPECT_EQ(*back, "second, longer");
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(d.entries(), 1u);  // no temporary file left beside it
}

TEST(AtomicWrite, IntoAMissingDirectoryFailsAndLeavesNothing) {
  temp_dir d;
  const auto w = write_file_atomic(d.path + "/absent/file", "x", atomic_write_options(0644));
  ASSERT_FALSE(w);
  EXPECT_NE(w.error().message.find("cannot create"), std::string::npos) << w.error().message;
  EXPECT_EQ(d.entries(), 0u);
}

TEST(AtomicWrite, OfARelativePathSyncsTheWorkingDirectory) {
  temp_dir d;
  char cwd[4096];
  ASSERT_NE(::getcwd(cwd, sizeof cwd), nullptr);
  ASSERT_EQ(::chdir(d.path.c_str()), 0);
  const auto w = write_file_atomic("relative.txt", "here", atomic_write_options(0644));
  ASSERT_EQ(::chdir(cwd), 0);
  ASSERT_TRUE(w) << w.error().message;
  const auto back = read_file(d.path + "/relative.txt", 16);
  ASSERT_TRUE(back);
  EXPECT_EQ(*back, "here");
}

TEST(AtomicWrite, TheModeHoldsWhateverTheUmask) {
  temp_dir d;
  const auto old = ::umask(0077);
  const auto w = write_file_atomic(d.path + "/ca.crt", "pem", atomic_write_options(0644));
  ::umask(old);
  ASSERT_TRUE(w) << w.error().message;
  struct stat st {};
  ASSERT_EQ(::stat((d.path + "/ca.crt").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u);
}

// Both sides of the deadline: before it the write lands; past it (checked after the data is
// durable, before the rename) the target keeps its old content and nothing is left beside it.
TEST(AtomicWrite, ADeadlineAbandonsTheWriteBeforeTheRename) {
  temp_dir d;
  const std::string path = d.path + "/inv.snapshot";
  ASSERT_TRUE(write_file_atomic(path, "old", {}));
  atomic_write_options in_time;
  in_time.deadline = std::chrono::steady_clock::now() + std::chrono::minutes(1);
  ASSERT_TRUE(write_file_atomic(path, "new", in_time));
  EXPECT_EQ(*read_file(path, 16), "new");

  atomic_write_options late;
  late.temp_path = d.path + "/.inv.snapshot.tmp-1";
  late.deadline = std::chrono::steady_clock::now() - std::chrono::milliseconds(1);
  const auto w = write_file_atomic(path, "newer", late);
  ASSERT_FALSE(w);
  EXPECT_EQ(w.error().code, core::errc::unavailable);
  EXPECT_NE(w.error().message.find("abandoned before the rename"), std::string::npos)
      << w.error().message;
  EXPECT_EQ(*read_file(path, 16), "new");
  EXPECT_EQ(d.entries(), 1u);
}

// A named temporary file is created exclusively: a second writer with the same name fails
// instead of writing into the first one's file, and the first one's file is left alone.
TEST(AtomicWrite, ANamedTemporaryFileIsNeverShared) {
  temp_dir d;
  const std::string tmp = d.path + "/.x.tmp-7";
  std::ofstream(tmp) << "another writer's";
  atomic_write_options named;
  named.temp_path = tmp;
  const auto w = write_file_atomic(d.path + "/x", "mine", named);
  ASSERT_FALSE(w);
  EXPECT_EQ(w.error().code, core::errc::io);
  EXPECT_EQ(*read_file(tmp, 64), "another writer's");
  EXPECT_FALSE(signature_of(d.path + "/x").exists);
}

TEST(FileSignature, ChangesWithTheContentAndTheInode) {
  temp_dir d;
  const std::string path = d.path + "/token";
  EXPECT_FALSE(signature_of(path).exists);
  ASSERT_TRUE(write_file_atomic(path, "a", {}));
  const auto first = signature_of(path);
  EXPECT_TRUE(first.exists);
  EXPECT_EQ(signature_of(path), first);
  // Same size, and possibly the same mtime: the rename gives a new inode.
  ASSERT_TRUE(write_file_atomic(path, "b", {}));
  const auto second = signature_of(path);
  EXPECT_NE(second, first);
  EXPECT_NE(second.ino, first.ino);
}

}  // namespace
}  // namespace topogate::util

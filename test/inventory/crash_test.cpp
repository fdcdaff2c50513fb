// Crash consistency of the file store: a child process pushes revisions in a loop and
// prints each acknowledgement; the parent SIGKILLs it at random moments, then checks that a
// fresh registry on the same store serves the last acknowledged revision or a later one (the
// child may have made one more durable without having printed it), never a partial file.
//
// The child is this test binary again (CrashChild.PushLoop, which only runs when
// TOPOGATE_CRASH_STORE is set), so the kill hits a real process with real fsyncs.

#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <random>
#include <string>

#include "inventory/registry.hpp"
#include "test_util.hpp"

extern char** environ;

namespace topogate::inventory {
namespace {

constexpr int nodes_per_revision = 256;

registry_config crash_config(const std::string& store) {
  registry_config cfg;
  inventory_spec spec;
  spec.config = testing::config("dc");
  cfg.inventories.push_back(std::move(spec));
  cfg.store.type = store_config::kind::file;
  cfg.store.directory = store;
  return cfg;
}

long revision_number(const std::string& id) {
  const auto dash = id.rfind('-');
  return dash == std::string::npos ? 0 : std::strtol(id.c_str() + dash + 1, nullptr, 10);
}

TEST(CrashChild, PushLoop) {
  const char* store = std::getenv("TOPOGATE_CRASH_STORE");
  if (store == nullptr) GTEST_SKIP() << "only runs as the child of CrashConsistency";
  registry_observer quiet;
  quiet.on_log = [](std::string_view, std::string_view, std::string_view) {};
  // allowEmptyStart: ready as soon as the store has answered (start() does not wait for
  // it), with or without a revision; the loop continues from what the store holds.
  auto cfg = crash_config(store);
  cfg.inventories[0].config.allow_empty_start = true;
  registry reg(std::move(cfg), system_clock(), quiet);
  reg.start();
  if (!testing::eventually([&] { return reg.inventory_ready("dc").ok(); })) std::_Exit(5);
  long n = revision_number(testing::served_revision(reg.find("dc")));
  for (;;) {
    ++n;
    const auto a =
        reg.push("dc", testing::snapshot_json("crash-" + std::to_string(n), nodes_per_revision),
                 std::nullopt, "crash-test");
    if (a.outcome != push_outcome::created && a.outcome != push_outcome::stored) std::_Exit(3);
    const auto line = "ack " + std::to_string(n) + "\n";
    if (::write(1, line.data(), line.size()) != static_cast<ssize_t>(line.size())) std::_Exit(4);
  }
}

TEST(CrashConsistency, KillNineWhilePushing) {
  testing::temp_dir dir;
  const auto store = dir / "store";
  std::mt19937 rng(12345);
  const int kills =
      std::getenv("TOPOGATE_CRASH_KILLS") ? std::atoi(std::getenv("TOPOGATE_CRASH_KILLS")) : 20;
  int survived = 0;
  long last_ack = 0;
  long total_acks = 0;
  for (int k = 0; k < kills; ++k) {
    int out[2];
    ASSERT_EQ(::pipe(out), 0);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    posix_spawn_file_actions_addclose(&fa, out[0]);
    std::string filter = "--gtest_filter=CrashChild.PushLoop";
    std::string exe = "/proc/self/exe";
    char* argv[] = {exe.data(), filter.data(), nullptr};
    std::vector<std::string> env_s;
    for (char** e = environ; *e != nullptr; ++e) env_s.emplace_back(*e);
    env_s.push_back("TOPOGATE_CRASH_STORE=" + store);
    std::vector<char*> envp;
    for (auto& s : env_s) envp.push_back(s.data());
    envp.push_back(nullptr);
    pid_t pid = 0;
    ASSERT_EQ(posix_spawn(&pid, "/proc/self/exe", &fa, nullptr, argv, envp.data()), 0);
    posix_spawn_file_actions_destroy(&fa);
    ::close(out[1]);

    // Let it acknowledge a random number of pushes (0..40 after the first), then kill it
    // mid-stream: the kill lands anywhere in write, fsync, rename or the directory fsync.
    const int target = std::uniform_int_distribution<int>(1, 40)(rng);
    std::string buf;
    int acks_this_run = 0;
    char chunk[4096];
    while (acks_this_run < target) {
      const auto n = ::read(out[0], chunk, sizeof chunk);
      if (n <= 0) break;
      buf.append(chunk, static_cast<std::size_t>(n));
      std::size_t pos = 0;
      while ((pos = buf.find('\n')) != std::string::npos) {
        const auto line = buf.substr(0, pos);
        buf.erase(0, pos + 1);
        if (line.starts_with("ack ")) {
          last_ack = std::strtol(line.c_str() + 4, nullptr, 10);
          ++acks_this_run;
          ++total_acks;
        }
      }
    }
    ::kill(pid, SIGKILL);
    // Acknowledgements already written before the kill count too.
    for (;;) {
      const auto n = ::read(out[0], chunk, sizeof chunk);
      if (n <= 0) break;
      buf.append(chunk, static_cast<std::size_t>(n));
    }
    std::size_t pos = 0;
    while ((pos = buf.find('\n')) != std::string::npos) {
      const auto line = buf.substr(0, pos);
      buf.erase(0, pos + 1);
      if (line.starts_with("ack ")) {
        last_ack = std::strtol(line.c_str() + 4, nullptr, 10);
        ++total_acks;
      }
    }
    ::close(out[0]);
    int wstatus = 0;
    ::waitpid(pid, &wstatus, 0);
    ASSERT_TRUE(WIFSIGNALED(wstatus)) << "child exited on its own: " << wstatus;

    registry_observer quiet;
    quiet.on_log = [](std::string_view, std::string_view, std::string_view) {};
    registry reg(crash_config(store), system_clock(), quiet);
    reg.start();
    // The store is read in the background: wait (bounded) for the revision it holds.
    testing::eventually([&] { return !testing::served_revision(reg.find("dc")).empty(); });
    const auto served = testing::served_revision(reg.find("dc"));
    reg.stop();
    const long n = revision_number(served);
    const bool ok = !served.empty() && n >= last_ack && n <= last_ack + 1;
    EXPECT_TRUE(ok) << "kill " << k << ": served '" << served << "', last acknowledged "
                    << last_ack;
    if (ok) ++survived;
    last_ack = std::max(last_ack, n);  // the next child continues from what is served
  }
  std::printf("crash consistency: survived %d of %d SIGKILLs (%ld acknowledged pushes)\n", survived,
              kills, total_acks);
  RecordProperty("kills_survived", survived);
  RecordProperty("kills", kills);
  EXPECT_EQ(survived, kills);
}

}  // namespace
}  // namespace topogate::inventory

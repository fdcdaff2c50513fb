// File and directory sources under the ways files really change: atomic rename, a
// ConfigMap volume's `..data` swap, a git-sync worktree swap, truncate-and-rewrite in place,
// a directory deleted and recreated. While they change, a reader checks that whatever is
// served is always one complete, valid revision.

#include <gtest/gtest.h>
#include <simdjson.h>

#include <atomic>
#include <filesystem>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "inventory/registry.hpp"
#include "inventory/registry_impl.hpp"
#include "test/timing.hpp"
#include "test_util.hpp"

namespace topogate::inventory {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using testing::eventually;
using testing::served_revision;

registry_config file_config(const std::string& path, const std::string& nodes_path = {}) {
  registry_config cfg;
  inventory_spec spec;
  spec.config = testing::config("dc");
  spec.snapshot_path = path;
  spec.kind = source_kind::file;
  spec.nodes_path = nodes_path;
  cfg.inventories.push_back(std::move(spec));
  cfg.resync_interval = std::chrono::seconds(3600);  // inotify alone must do it
  return cfg;
}

// Reads continuously while the test changes files; records anything that is not a complete,
// validated revision (the JSON body must parse and carry the revision id it claims).
class watchdog {
 public:
  explicit watchdog(const inventory* inv) : inv_(inv), thread_([this] { run(); }) {}
  ~watchdog() { stop(); }
  void stop() {
    done_ = true;
    if (thread_.joinable()) thread_.join();
  }
  [[nodiscard]] int bad() const { return bad_.load(); }
  [[nodiscard]] int reads() const { return reads_.load(); }

 private:
  void run() {
    simdjson::dom::parser parser;
    while (!done_) {
      const auto r = inv_->current();
      if (!r) continue;
      ++reads_;
      simdjson::dom::element doc;
      std::string_view rev;
      const bool ok = !parser.parse(r->json_body()).get(doc) && !doc["revision"].get(rev) &&
                      rev == r->revision_id && r->etag == inventory::etag_of(r->json_body());
      if (!ok) ++bad_;
    }
  }
  const inventory* inv_;
  std::atomic<bool> done_{false};
  std::atomic<int> bad_{0};
  std::atomic<int> reads_{0};
  std::thread thread_;
};

TEST(FileSource, AtomicRenameSeriesEndsOnTheLastRevision) {
  testing::temp_dir dir;
  const auto path = dir / "snapshot.json";
  testing::write_file(path, testing::snapshot_json("rev-0"));
  registry reg(file_config(path));
  reg.start();
  auto* inv = reg.find("dc");
  ASSERT_EQ(served_revision(inv), "rev-0") << "start() loads synchronously";
  watchdog w(inv);
  for (int i = 1; i <= 50; ++i)
    testing::write_atomic(path, testing::snapshot_json("rev-" + std::to_string(i)));
  EXPECT_TRUE(eventually([&] { return served_revision(inv) == "rev-50"; }));
  w.stop();
  EXPECT_EQ(w.bad(), 0);
  reg.stop();
}

TEST(FileSource, TruncateAndRewriteInPlaceNeverServesATornFile) {
  testing::temp_dir dir;
  const auto path = dir / "snapshot.json";
  testing::write_file(path, testing::snapshot_json("rev-0", 64));
  registry reg(file_config(path));
  reg.start();
  auto* inv = reg.find("dc");
  ASSERT_EQ(served_revision(inv), "rev-0");
  watchdog w(inv);
  for (int i = 1; i <= 20; ++i) {
    const auto body = testing::snapshot_json("rev-" + std::to_string(i), 64);
    // Truncate, then write in two halves with a flush between: readers can see all three states.
    FILE* f = std::fopen(path.c_str(), "wb");
    ASSERT_NE(f, nullptr);
    std::fwrite(body.data(), 1, body.size() / 2, f);
    std::fflush(f);
    std::fwrite(body.data() + body.size() / 2, 1, body.size() - body.size() / 2, f);
    std::fclose(f);
  }
  EXPECT_TRUE(eventually([&] { return served_revision(inv) == "rev-20"; }));
  w.stop();
  EXPECT_EQ(w.bad(), 0);
  reg.stop();
}

// The kubelet's AtomicWriter: files live in a timestamped directory, `..data` points at it,
// and each key is a symlink `key -> ..data/key`. An update writes a new directory and renames
// a new `..data` symlink over the old one.
class configmap_volume {
 public:
  explicit configmap_volume(std::string root) : root_(std::move(root)) {
    fs::create_directories(root_);
  }
  void publish(std::string_view key, std::string_view content) {
    const auto ts = root_ + "/..2026_" + std::to_string(++n_);
    fs::create_directory(ts);
    testing::write_file(ts + "/" + std::string(key), content);
    const auto tmp_link = root_ + "/..data_tmp";
    fs::create_directory_symlink(fs::path(ts).filename(), tmp_link);
    fs::rename(tmp_link, root_ + "/..data");
    const auto key_link = root_ + "/" + std::string(key);
    if (!fs::is_symlink(key_link)) fs::create_symlink("..data/" + std::string(key), key_link);
    if (!old_.empty()) fs::remove_all(old_);
    old_ = ts;
  }

 private:
  std::string root_;
  std::string old_;
  int n_ = 0;
};

TEST(FileSource, ConfigMapVolumeDataSymlinkSwap) {
  testing::temp_dir dir;
  configmap_volume vol(dir / "cm");
  vol.publish("snapshot.yaml", testing::snapshot_yaml("cm-0"));
  for (const bool as_directory : {false, true}) {
    registry reg(file_config(as_directory ? dir / "cm" : dir / "cm/snapshot.yaml"));
    reg.start();
    auto* inv = reg.find("dc");
    EXPECT_TRUE(eventually([&] { return served_revision(inv).starts_with("cm-"); }));
    watchdog w(inv);
    for (int i = 1; i <= 10; ++i) {
      const auto rev = "cm-" + std::to_string(i) + (as_directory ? "d" : "f");
      vol.publish("snapshot.yaml", testing::snapshot_yaml(rev));
      EXPECT_TRUE(eventually([&] { return served_revision(inv) == rev; })) << rev;
    }
    w.stop();
    EXPECT_EQ(w.bad(), 0);
    reg.stop();
  }
}

TEST(FileSource, GitSyncWorktreeSymlinkSwap) {
  testing::temp_dir dir;
  // git-sync: <root>/<link> -> .worktrees/<hash>, swapped by renaming a new symlink over it.
  const auto root = dir / "git";
  fs::create_directories(root + "/.worktrees");
  auto checkout = [&](int n) {
    const auto wt = root + "/.worktrees/" + std::to_string(1000 + n);
    fs::create_directories(wt + "/inventory");
    testing::write_file(wt + "/inventory/dc.json",
                        testing::snapshot_json("git-" + std::to_string(n)));
    fs::create_directory_symlink(".worktrees/" + std::to_string(1000 + n), root + "/link.tmp");
    fs::rename(root + "/link.tmp", root + "/link");
  };
  checkout(0);
  registry reg(file_config(root + "/link/inventory/dc.json"));
  reg.start();
  auto* inv = reg.find("dc");
  ASSERT_EQ(served_revision(inv), "git-0");
  watchdog w(inv);
  for (int i = 1; i <= 10; ++i) {
    checkout(i);
    EXPECT_TRUE(eventually([&] { return served_revision(inv) == "git-" + std::to_string(i); }))
        << i;
    fs::remove_all(root + "/.worktrees/" + std::to_string(1000 + i - 1));
  }
  w.stop();
  EXPECT_EQ(w.bad(), 0);
  reg.stop();
}

TEST(FileSource, DirectoryDeletedAndRecreated) {
  testing::temp_dir dir;
  const auto sub = dir / "inv";
  fs::create_directory(sub);
  testing::write_file(sub + "/snapshot.json", testing::snapshot_json("dir-0"));
  registry reg(file_config(sub + "/snapshot.json"));
  reg.start();
  auto* inv = reg.find("dc");
  ASSERT_EQ(served_revision(inv), "dir-0");
  for (int i = 1; i <= 5; ++i) {
    fs::remove_all(sub);
    // The file is gone: the last valid revision stays, and the failure is recorded.
    EXPECT_TRUE(eventually([&] {
      const auto a = inv->last_attempt();
      return a && !a->accepted && a->errors.empty() && !a->note.empty();
    }));
    EXPECT_EQ(served_revision(inv), "dir-" + std::to_string(i - 1));
    fs::create_directory(sub);
    testing::write_atomic(sub + "/snapshot.json",
                          testing::snapshot_json("dir-" + std::to_string(i)));
    EXPECT_TRUE(eventually([&] { return served_revision(inv) == "dir-" + std::to_string(i); }))
        << i;
  }
  reg.stop();
}

TEST(FileSource, InvalidInputMidStreamKeepsTheLastValidRevision) {
  testing::temp_dir dir;
  const auto path = dir / "snapshot.json";
  testing::write_file(path, testing::snapshot_json("ok-1"));
  registry reg(file_config(path));
  reg.start();
  auto* inv = reg.find("dc");
  ASSERT_EQ(served_revision(inv), "ok-1");
  const auto etag = inv->current()->etag;

  testing::write_atomic(path, testing::snapshot_bad_level("bad-2"));
  ASSERT_TRUE(eventually([&] {
    const auto a = inv->last_attempt();
    return a && !a->accepted && !a->errors.empty();
  }));
  const auto a = inv->last_attempt();
  EXPECT_TRUE(std::any_of(a->errors.begin(), a->errors.end(),
                          [](const auto& e) { return e.rule == "S4"; }));
  EXPECT_EQ(inv->current()->etag, etag);
  // /status shows the served revision and the rejected attempt with its rules.
  const auto st = reg.status_json("dc");
  ASSERT_TRUE(st.has_value());
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  ASSERT_FALSE(parser.parse(*st).get(doc)) << *st;
  EXPECT_EQ(std::string_view(doc["served"]["revision"]), "ok-1");
  EXPECT_EQ(std::string_view(doc["lastAttempt"]["result"]), "rejected");
  EXPECT_EQ(std::string_view(doc["lastAttempt"]["rules"].at(0)), "S4");

  testing::write_atomic(path, testing::snapshot_json("ok-3"));
  EXPECT_TRUE(eventually([&] { return served_revision(inv) == "ok-3"; }));
  const auto h = reg.history_json("dc");
  ASSERT_TRUE(h.has_value());
  ASSERT_FALSE(parser.parse(*h).get(doc)) << *h;
  simdjson::dom::array items;
  ASSERT_FALSE(doc["items"].get(items));
  ASSERT_GE(items.size(), 3u);
  EXPECT_EQ(std::string_view(items.at(0)["revision"]), "ok-3");
  EXPECT_EQ(std::string_view(items.at(1)["result"]), "rejected");
  reg.stop();
}

TEST(FileSource, UnchangedContentMakesNoNewRevision) {
  testing::temp_dir dir;
  const auto path = dir / "snapshot.json";
  testing::write_file(path, testing::snapshot_json("same"));
  auto cfg = file_config(path);
  registry reg(std::move(cfg));
  reg.start();
  auto* inv = reg.find("dc");
  const auto attempts = inv->attempts_recorded();
  for (int i = 0; i < 5; ++i) testing::write_atomic(path, testing::snapshot_json("same"));
  reg.resync();
  // A marker inventory change proves the loop processed the rewrites before we look.
  testing::write_atomic(path, testing::snapshot_json("next"));
  ASSERT_TRUE(eventually([&] { return served_revision(inv) == "next"; }));
  EXPECT_EQ(inv->attempts_recorded(), attempts + 1);
  reg.stop();
}

TEST(FileSource, NodeListFileChangesRevalidateTheServedRevision) {
  testing::temp_dir dir;
  const auto path = dir / "snapshot.json";
  const auto nodes = dir / "nodes.json";
  testing::write_file(nodes, testing::nodes_json(4));
  testing::write_file(path, testing::snapshot_json("n-1"));
  registry reg(file_config(path, nodes));
  reg.start();
  auto* inv = reg.find("dc");
  ASSERT_EQ(served_revision(inv), "n-1");
  ASSERT_EQ(inv->selected_node_count(), std::optional<std::size_t>(4));

  testing::write_atomic(nodes, testing::nodes_json(4, 0));
  ASSERT_TRUE(eventually([&] { return inv->serve().rev == nullptr; }));
  EXPECT_FALSE(reg.ready());
  testing::write_atomic(nodes, "not json at all: [");  // a broken list keeps the last one
  testing::write_atomic(nodes, testing::nodes_json(4));
  EXPECT_TRUE(eventually([&] { return served_revision(inv) == "n-1"; }));
  EXPECT_TRUE(reg.ready());
  reg.stop();
}

TEST(FileSource, SnapshotWaitingForANodeIsServedOnceTheNodeExists) {
  testing::temp_dir dir;
  const auto path = dir / "snapshot.json";
  const auto nodes = dir / "nodes.json";
  testing::write_file(nodes, testing::nodes_json(3));
  testing::write_file(path, testing::snapshot_json("late-1", 4));  // names worker-3
  registry reg(file_config(path, nodes));
  reg.start();
  auto* inv = reg.find("dc");
  EXPECT_EQ(inv->current(), nullptr);
  const auto last = inv->last_attempt();
  ASSERT_TRUE(last.has_value());
  EXPECT_TRUE(std::any_of(last->errors.begin(), last->errors.end(),
                          [](const auto& e) { return e.rule == "S3"; }));
  // Only the Node list changes; the snapshot file is not touched.
  testing::write_atomic(nodes, testing::nodes_json(4));
  EXPECT_TRUE(eventually([&] { return served_revision(inv) == "late-1"; }));
  reg.stop();
}

TEST(FileSource, PeriodicResyncCatchesWhatInotifyCannotSee) {
  testing::temp_dir dir;
  const auto path = dir / "snapshot.json";
  testing::write_file(path, testing::snapshot_json("r-1"));
  registry reg(file_config(path));
  reg.start();
  auto* inv = reg.find("dc");
  ASSERT_EQ(served_revision(inv), "r-1");
  reg.resync();  // SIGHUP: must not change anything, must not crash
  testing::write_atomic(path, testing::snapshot_json("r-2"));
  reg.resync();
  EXPECT_TRUE(eventually([&] { return served_revision(inv) == "r-2"; }));
  reg.stop();
}

TEST(FileSource, PushesToAFileInventoryAreRefused) {
  testing::temp_dir dir;
  const auto path = dir / "snapshot.json";
  testing::write_file(path, testing::snapshot_json("f-1"));
  auto cfg = file_config(path);
  cfg.store.type = store_config::kind::file;
  cfg.store.directory = dir / "store";
  registry reg(std::move(cfg));
  reg.start();
  EXPECT_EQ(reg.push("dc", testing::snapshot_json("p-1"), std::nullopt, "writer").outcome,
            push_outcome::not_pushable);
  EXPECT_EQ(served_revision(reg.find("dc")), "f-1");
  reg.stop();
}

std::string padded(std::string json, std::size_t size) {
  json.resize(size, ' ');
  return json;
}

struct log_lines {
  std::mutex mu;
  std::vector<std::string> lines;
  bool has(std::string_view part) {
    std::lock_guard lk(mu);
    for (const auto& l : lines) {
      if (l.find(part) != std::string::npos) return true;
    }
    return false;
  }
};

// The Node-list file's size limit (inventory/registry_impl.hpp: max_node_list_bytes,
// 256 MiB) at its own value: a list of exactly that size is read and applied, one byte
// more is refused with the last list kept. The lists are padded with trailing blanks,
// which JSON allows, so that a file cut at the limit would still parse.
TEST(FileSource, NodeListOfExactlyTheSizeLimitIsReadOneByteMoreIsRefused) {
  constexpr std::size_t limit = detail::max_node_list_bytes;
  static_assert(limit == 256u << 20);
  testing::temp_dir dir;
  const auto path = dir / "snapshot.json";
  const auto nodes = dir / "nodes.json";
  testing::write_file(nodes, padded(testing::nodes_json(4), limit));
  testing::write_file(path, testing::snapshot_json("n-1"));
  log_lines logs;
  registry_observer obs;
  obs.on_log = [&](std::string_view, std::string_view, std::string_view msg) {
    std::lock_guard lk(logs.mu);
    logs.lines.emplace_back(msg);
  };
  registry reg(file_config(path, nodes), system_clock(), obs);
  reg.start();
  auto* inv = reg.find("dc");
  // At the limit: read, parsed, applied.
  ASSERT_EQ(testing::served_revision(inv), "n-1");
  ASSERT_EQ(inv->selected_node_count(), std::optional<std::size_t>(4));

  // One byte more, with Node 0 gone: refused before it is parsed, so the snapshot that
  // names Node 0 is still served (applying the list would withdraw it).
  const auto wait = std::chrono::seconds(10) + test_timing::scheduling_margin;
  testing::write_atomic(nodes, padded(testing::nodes_json(4, 0), limit + 1));
  ASSERT_TRUE(testing::eventually([&] { return logs.has("larger than 268435456 bytes"); }, wait));
  EXPECT_TRUE(logs.has("keeping the last list"));
  EXPECT_EQ(testing::served_revision(inv), "n-1");
  EXPECT_EQ(inv->selected_node_count(), std::optional<std::size_t>(4));

  // The same list at the limit is applied: the snapshot naming Node 0 is withdrawn.
  testing::write_atomic(nodes, padded(testing::nodes_json(4, 0), limit));
  EXPECT_TRUE(testing::eventually([&] { return inv->serve().rev == nullptr; }, wait));
  reg.stop();
}

}  // namespace
}  // namespace topogate::inventory

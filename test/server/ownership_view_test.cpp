// admission.ownershipCheck: the configuration, and the view's loop (server/ownership_view.hpp)
// with a lister of the test's: no snapshot until a list succeeds, a failed list keeps the
// last one, and current() never waits for a list in progress.
#include "server/ownership_view.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

#include "test/inventory/test_util.hpp"

namespace topogate::server {
namespace {

using namespace std::chrono_literals;
using clock = std::chrono::steady_clock;

core::result<serve_config> parse(const std::string& yaml) {
  return parse_serve_config("tls: {certFile: tls.crt, keyFile: tls.key}\n" + yaml, "/nonexistent");
}

TEST(OwnershipCheckConfig, OffByDefaultEveryKeyAndTheRanges) {
  auto cfg = parse("");
  ASSERT_TRUE(cfg) << cfg.error().message;
  EXPECT_FALSE(cfg->ownership_check.enabled);
  EXPECT_EQ(cfg->ownership_check.interval, 60s);
  EXPECT_EQ(cfg->ownership_check.timeout, 10s);
  cfg = parse("admission: {ownershipCheck: {enabled: true, interval: 2m, timeout: 5s}}\n");
  ASSERT_TRUE(cfg) << cfg.error().message;
  EXPECT_TRUE(cfg->ownership_check.enabled);
  EXPECT_EQ(cfg->ownership_check.interval, 120s);
  EXPECT_EQ(cfg->ownership_check.timeout, 5s);
  for (const auto& [yaml, key] : {std::pair{"{interval: 4s}", "admission.ownershipCheck.interval"},
                                  std::pair{"{interval: 25h}", "admission.ownershipCheck.interval"},
                                  std::pair{"{timeout: 500ms}", "admission.ownershipCheck.timeout"},
                                  std::pair{"{timeout: 11m}", "admission.ownershipCheck.timeout"},
                                  std::pair{"{enabled: maybe}", "admission.ownershipCheck.enabled"},
                                  std::pair{"{namespaces: [a]}", "admission.ownershipCheck"}}) {
    const auto bad = parse(std::string("admission: {ownershipCheck: ") + yaml + "}\n");
    ASSERT_FALSE(bad) << yaml;
    EXPECT_NE(bad.error().message.find(key), std::string::npos) << bad.error().message;
  }
}

// Answers each list as the test says: a snapshot, a failure, or a hang until cancel().
class scripted_lister final : public ownership_lister {
 public:
  enum class next { answer, fail, hang };
  std::atomic<next> mode{next::answer};
  std::atomic<int> calls{0};

  core::result<admission::ownership_snapshot> list(clock::time_point) override {
    ++calls;
    if (mode == next::fail) return core::fail(core::errc::unavailable, "GET: refused");
    if (mode == next::hang) {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [this] { return cancelled_; });
      return core::fail(core::errc::unavailable, "cancelled");
    }
    admission::ownership_snapshot s;
    s.nodes.push_back({"gpu-" + std::to_string(calls.load()), {}});
    return s;
  }
  void cancel() override {
    std::lock_guard lock(mu_);
    cancelled_ = true;
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool cancelled_ = false;
};

using inventory::testing::eventually;

TEST(OwnershipView, PublishesEachListAndKeepsTheLastOnAFailure) {
  auto lister = std::make_unique<scripted_lister>();
  auto* l = lister.get();
  ownership_view_loop view({true, 10ms, 1s}, std::move(lister));
  EXPECT_EQ(view.current(), nullptr);
  view.start();
  ASSERT_TRUE(eventually([&] { return view.runs() >= 2; }));
  l->mode = scripted_lister::next::fail;
  const auto failing_from = view.runs() + 1;  // the run in progress may still answer
  ASSERT_TRUE(eventually([&] { return view.runs() >= failing_from + 1; }));
  const auto kept = view.current();
  ASSERT_NE(kept, nullptr);
  EXPECT_EQ(kept->nodes.at(0).first.rfind("gpu-", 0), 0u);
  ASSERT_TRUE(eventually([&] { return view.runs() >= failing_from + 3; }));
  EXPECT_EQ(view.current(), kept);  // failed lists publish nothing
  view.stop();
}

TEST(OwnershipView, AHangingListNeverDelaysCurrent) {
  auto lister = std::make_unique<scripted_lister>();
  lister->mode = scripted_lister::next::hang;
  auto* l = lister.get();
  ownership_view_loop view({true, 5s, 1s}, std::move(lister));
  view.start();
  ASSERT_TRUE(eventually([&] { return l->calls.load() >= 1; }));
  const auto before = clock::now();
  for (int i = 0; i < 1000; ++i) EXPECT_EQ(view.current(), nullptr);
  EXPECT_LT(clock::now() - before, 100ms);
  const auto stopping = clock::now();
  view.stop();  // cancels the hanging list
  EXPECT_LT(clock::now() - stopping, 2s);
}

}  // namespace
}  // namespace topogate::server

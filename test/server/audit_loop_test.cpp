// The periodic audit's loop (server/audit_loop): what each run does to the metrics (a fixed
// object drops its rule to 0, a failed run keeps the last result and counts), when an object
// is logged (once per change), and that stop() aborts a run the API never answers.
#include "server/audit_loop.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <thread>

#include "server/metrics.hpp"
#include "test/timing.hpp"

namespace topogate::server {
namespace {

using namespace std::chrono_literals;
using clock = std::chrono::steady_clock;

diagnose::audited_object object(std::string kind, std::string ns, std::string name,
                                std::vector<std::string> rules) {
  diagnose::audited_object o;
  o.kind = std::move(kind);
  o.namespace_ = std::move(ns);
  o.name = std::move(name);
  for (auto& r : rules) o.errors.push_back(core::invalid(std::move(r), "spec.x", "v", "bad"));
  return o;
}

diagnose::audit_report report(std::vector<diagnose::audited_object> violating) {
  diagnose::audit_report r;
  r.topology_sources = 3;
  r.model_deployments = 2;
  r.violating = std::move(violating);
  diagnose::finish(r);
  return r;
}

// A source whose runs the test hands out one at a time: run() waits for the next result;
// cancel() ends a waiting run (and every later one) with a failure.
class scripted_source final : public audit_source {
 public:
  void push(core::result<audit_outcome> r) {
    {
      std::lock_guard lock(mu_);
      queue_.push_back(std::move(r));
    }
    cv_.notify_all();
  }
  core::result<audit_outcome> run(clock::time_point) override {
    std::unique_lock lock(mu_);
    ++started_;
    cv_.wait(lock, [&] { return cancelled_ || !queue_.empty(); });
    if (cancelled_) return core::fail(core::errc::unavailable, "cancelled");
    auto r = std::move(queue_.front());
    queue_.pop_front();
    return r;
  }
  void cancel() override {
    {
      std::lock_guard lock(mu_);
      cancelled_ = true;
    }
    cv_.notify_all();
  }
  std::size_t started() {
    std::lock_guard lock(mu_);
    return started_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<core::result<audit_outcome>> queue_;
  bool cancelled_ = false;
  std::size_t started_ = 0;
};

template <class F>
bool wait_until(F done, std::chrono::milliseconds limit = 5000ms) {
  const auto deadline = clock::now() + limit;
  while (!done()) {
    if (clock::now() > deadline) return false;
    std::this_thread::sleep_for(2ms);
  }
  return true;
}

// The sample's value in the text exposition, or nullopt when the series is absent.
std::optional<double> sample(metrics& m, const std::string& series) {
  const std::string text = m.serialize();
  std::size_t at = 0;
  while ((at = text.find(series + " ", at)) != std::string::npos) {
    if (at == 0 || text[at - 1] == '\n') return std::stod(text.substr(at + series.size() + 1));
    at += series.size();
  }
  return std::nullopt;
}

const std::string t4 = R"(topogate_audit_violations{kind="TopologySource",rule="T4"})";
const std::string t9 = R"(topogate_audit_violations{kind="TopologySource",rule="T9"})";
const std::string m1 = R"(topogate_audit_violations{kind="ModelDeployment",rule="M1"})";
const std::string ok_runs = R"(topogate_audit_runs_total{result="success"})";
const std::string failed_runs = R"(topogate_audit_runs_total{result="failure"})";
const std::string last_success = "topogate_audit_last_success_timestamp_seconds";

audit_config fast() {
  audit_config c;
  c.enabled = true;
  c.interval = 1ms;
  c.timeout = 1s;
  return c;
}

TEST(AuditLoop, NoSeriesUntilEnabledThenEveryRuleAtZero) {
  metrics m;
  EXPECT_FALSE(sample(m, t4));
  EXPECT_FALSE(sample(m, ok_runs));
  auto src = std::make_unique<scripted_source>();
  audit_loop loop(fast(), std::move(src), m);
  loop.start();
  EXPECT_EQ(sample(m, t4), 0);
  EXPECT_EQ(sample(m, R"(topogate_audit_violations{kind="TopologySource",rule="T14"})"), 0);
  EXPECT_EQ(sample(m, R"(topogate_audit_violations{kind="ModelDeployment",rule="M2"})"), 0);
  EXPECT_FALSE(sample(m, R"(topogate_audit_violations{kind="TopologySource",rule="T15"})"));
  EXPECT_EQ(sample(m, ok_runs), 0);
  EXPECT_EQ(sample(m, failed_runs), 0);
  EXPECT_EQ(sample(m, last_success), 0);
  loop.stop();
}

TEST(AuditLoop, ViolationsFollowEachSuccessfulRunAndAFailureKeepsTheLast) {
  metrics m;
  auto owned = std::make_unique<scripted_source>();
  auto* src = owned.get();
  audit_loop loop(fast(), std::move(owned), m);
  loop.start();

  // Two sources break T4, one of them T9 too; a deployment breaks M1 twice (one object).
  audit_outcome first;
  first.report = report({object("TopologySource", "", "a", {"T4", "T9"}),
                         object("TopologySource", "", "b", {"T4"}),
                         object("ModelDeployment", "ns", "m", {"M1", "M1"})});
  src->push(first);
  ASSERT_TRUE(wait_until([&] { return loop.runs() >= 1; }));
  EXPECT_EQ(sample(m, t4), 2);
  EXPECT_EQ(sample(m, t9), 1);
  EXPECT_EQ(sample(m, m1), 1);
  EXPECT_EQ(sample(m, ok_runs), 1);
  EXPECT_EQ(sample(m, failed_runs), 0);
  const double first_success = *sample(m, last_success);
  EXPECT_GT(first_success, 1.7e9);

  // The API fails: the counts stay those of the last successful run.
  src->push(core::fail(core::errc::unavailable, "GET /apis/...: read: timed out"));
  ASSERT_TRUE(wait_until([&] { return loop.runs() >= 2; }));
  EXPECT_EQ(sample(m, failed_runs), 1);
  EXPECT_EQ(sample(m, ok_runs), 1);
  EXPECT_EQ(sample(m, t4), 2);
  EXPECT_EQ(sample(m, last_success), first_success);

  // `a` fixed (T9 gone), the deployment fixed: those rules drop to 0, T4 counts `b` alone.
  audit_outcome second;
  second.report = report({object("TopologySource", "", "b", {"T4"})});
  src->push(second);
  ASSERT_TRUE(wait_until([&] { return loop.runs() >= 3; }));
  EXPECT_EQ(sample(m, t4), 1);
  EXPECT_EQ(sample(m, t9), 0);
  EXPECT_EQ(sample(m, m1), 0);
  EXPECT_EQ(sample(m, ok_runs), 2);
  EXPECT_GE(*sample(m, last_success), first_success);

  // Everything fixed.
  src->push(audit_outcome{report({}), {}});
  ASSERT_TRUE(wait_until([&] { return loop.runs() >= 4; }));
  EXPECT_EQ(sample(m, t4), 0);
  // A rule id outside the closed set is exported as "other", never as the text it carried.
  audit_outcome odd;
  odd.report = report({object("TopologySource", "", "x", {"T4; drop"})});
  src->push(odd);
  ASSERT_TRUE(wait_until([&] { return loop.runs() >= 5; }));
  EXPECT_EQ(sample(m, R"(topogate_audit_violations{kind="TopologySource",rule="other"})"), 1);
  loop.stop();
}

// Two writing sources on the rack level over one shared Node, and a nodeLabels source.
audit_outcome conflicting(bool nodes_forbidden) {
  audit_outcome o;
  auto& r = o.report;
  r.topology_sources = 3;
  for (const char* name : {"rack-a", "rack-b", "labels"})
    r.sources_seen.push_back(
        {name, {"topology.gpustack.ai/rack"}, std::nullopt, std::string_view(name) != "labels"});
  if (!nodes_forbidden) {
    r.nodes_seen.push_back({"gpu-1", {}});
    r.nodes = 1;
  }
  o.nodes_forbidden = nodes_forbidden;
  diagnose::finish(r);
  return o;
}

TEST(AuditLoop, OwnershipConflictsAreExportedAndUnknownWhenNodesMayNotBeListed) {
  const std::string conflicts = "topogate_audit_ownership_conflicts";
  metrics m;
  EXPECT_FALSE(sample(m, conflicts));
  auto owned = std::make_unique<scripted_source>();
  auto* src = owned.get();
  audit_loop loop(fast(), std::move(owned), m);
  loop.start();
  EXPECT_EQ(sample(m, conflicts), 0);
  src->push(conflicting(false));
  ASSERT_TRUE(wait_until([&] { return loop.runs() >= 1; }));
  EXPECT_EQ(sample(m, conflicts), 1);
  // A 403 on nodes: the run succeeds, the conflicts are unknown (NaN), not 0.
  src->push(conflicting(true));
  ASSERT_TRUE(wait_until([&] { return loop.runs() >= 2; }));
  EXPECT_EQ(sample(m, ok_runs), 2);
  EXPECT_EQ(sample(m, failed_runs), 0);
  const auto unknown = sample(m, conflicts);
  ASSERT_TRUE(unknown);
  EXPECT_TRUE(std::isnan(*unknown));
  src->push(audit_outcome{report({}), {}});
  ASSERT_TRUE(wait_until([&] { return loop.runs() >= 3; }));
  EXPECT_EQ(sample(m, conflicts), 0);
  loop.stop();
}

TEST(AuditLoop, StopAbortsARunTheApiNeverAnswersWithoutCountingIt) {
  metrics m;
  auto owned = std::make_unique<scripted_source>();
  auto* src = owned.get();
  audit_config c = fast();
  c.timeout = 1h;
  audit_loop loop(c, std::move(owned), m);
  loop.start();
  ASSERT_TRUE(wait_until([&] { return src->started() >= 1; }));
  const auto t0 = clock::now();
  loop.stop();
  // Far from the run's 1 h timeout: the margin of test/timing.hpp.
  EXPECT_LT(clock::now() - t0, test_timing::scheduling_margin);
  EXPECT_EQ(sample(m, failed_runs), 0);
  EXPECT_EQ(sample(m, ok_runs), 0);
}

TEST(AuditLoop, TheNextRunWaitsTheInterval) {
  metrics m;
  auto owned = std::make_unique<scripted_source>();
  auto* src = owned.get();
  audit_config c = fast();
  c.interval = 1h;
  audit_loop loop(c, std::move(owned), m);
  loop.start();
  src->push(audit_outcome{report({}), {}});
  ASSERT_TRUE(wait_until([&] { return loop.runs() >= 1; }));
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(src->started(), 1u);
  const auto t0 = clock::now();
  loop.stop();  // waiting out the interval (1 h) ends at once too
  EXPECT_LT(clock::now() - t0, test_timing::scheduling_margin);
}

TEST(ViolationMemory, AnObjectIsReportedOncePerChange) {
  violation_memory mem;
  auto first = report(
      {object("TopologySource", "", "a", {"T4"}), object("ModelDeployment", "ns", "m", {"M1"})});
  auto changes = mem.update(first);
  ASSERT_EQ(changes.size(), 2u);
  EXPECT_EQ(changes[0].id, "ns/m");
  EXPECT_EQ(changes[1].id, "a");
  // The same again: nothing to say.
  EXPECT_TRUE(mem.update(first).empty());
  // The same rules with other errors (another path) are no change either.
  auto moved = report({object("TopologySource", "", "a", {"T4", "T4"}),
                       object("ModelDeployment", "ns", "m", {"M1"})});
  EXPECT_TRUE(mem.update(moved).empty());
  // `a` breaks T9 too; `m` is fixed.
  auto next = report({object("TopologySource", "", "a", {"T9", "T4"})});
  changes = mem.update(next);
  ASSERT_EQ(changes.size(), 2u);
  EXPECT_EQ(changes[0].kind, "TopologySource");
  EXPECT_EQ(changes[0].id, "a");
  ASSERT_NE(changes[0].now, nullptr);
  EXPECT_EQ(changes[0].now->rules(), (std::vector<std::string>{"T4", "T9"}));
  EXPECT_EQ(changes[1].kind, "ModelDeployment");
  EXPECT_EQ(changes[1].id, "ns/m");
  EXPECT_EQ(changes[1].now, nullptr);
  // A namespace's object and a cluster-scoped one of the same name are different objects.
  changes = mem.update(report({object("TopologySource", "", "a", {"T4", "T9"}),
                               object("ModelDeployment", "a", "a", {"M1"})}));
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0].id, "a/a");
}

}  // namespace
}  // namespace topogate::server

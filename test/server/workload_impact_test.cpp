// The Workload answer of a dry run (server/workload_impact.hpp): given for an inventory with
// workloadImpact and a dry run that produced a candidate, from the objects the lister returns
// (diagnose_change's JSON); an error object when the lists fail; nothing otherwise.

#include "server/workload_impact.hpp"

#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "core/document.hpp"
#include "inventory/registry.hpp"
#include "server/metrics.hpp"
#include "test/diagnose/fixtures.hpp"
#include "test/inventory/test_util.hpp"

namespace topogate::server {
namespace {

namespace inv = inventory;
namespace t = inventory::testing;

class fake_lister final : public cluster_lister {
 public:
  explicit fake_lister(std::optional<diagnose::cluster_objects> objects)
      : objects_(std::move(objects)) {}
  core::result<diagnose::cluster_objects> list(std::chrono::steady_clock::time_point) override {
    ++calls;
    if (!objects_) return core::fail(core::errc::forbidden, "nodes is forbidden");
    return *objects_;
  }
  int calls = 0;

 private:
  std::optional<diagnose::cluster_objects> objects_;
};

// worker-0..3, as the test snapshot names them.
diagnose::cluster_objects four_nodes() {
  diagnose::cluster_objects c;
  for (int i = 0; i < 4; ++i) {
    diagnose::k8s_node n;
    n.name = "worker-" + std::to_string(i);
    n.labels = {{"kubernetes.io/hostname", n.name}};
    n.allocatable = {{"cpu", 4000}, {"pods", 110}};
    c.nodes.push_back(std::move(n));
  }
  return c;
}

TEST(WorkloadImpact, AnsweredForItsInventoriesDryRunsWithACandidate) {
  t::temp_dir dir;
  inv::registry_observer quiet;
  quiet.on_log = [](std::string_view, std::string_view, std::string_view) {};
  inv::registry reg(t::push_registry(dir / "store"), inv::system_clock(), quiet);
  reg.start();
  auto owned = std::make_unique<fake_lister>(four_nodes());
  fake_lister& lister = *owned;
  workload_impact_config cfg;
  cfg.inventories = {"dc"};
  const workload_impact impact(cfg, std::move(owned), reg);

  const auto dry = reg.dry_run({"dc", t::snapshot_json("p-1"), std::nullopt, "w", {}});
  ASSERT_EQ(dry.outcome, inv::push_outcome::validated) << dry.message;
  const std::string answer = impact.workloads("dc", dry);
  EXPECT_EQ(lister.calls, 1);
  EXPECT_NE(answer.find("\"revision\":\"p-1\""), std::string::npos) << answer;
  EXPECT_NE(answer.find("\"valid\":true"), std::string::npos) << answer;
  EXPECT_NE(answer.find("\"summary\":{\"evicted\":0,\"admittedAgain\":0,\"stranded\":0}"),
            std::string::npos)
      << answer;
  EXPECT_TRUE(core::decode_any(answer).ok()) << answer;

  // Another inventory, or a dry run without a candidate: nothing, and no list.
  EXPECT_EQ(impact.workloads("other", dry), "");
  const auto bad = reg.dry_run({"dc", "nodes: 3", std::nullopt, "w", {}});
  ASSERT_EQ(bad.outcome, inv::push_outcome::invalid);
  EXPECT_EQ(impact.workloads("dc", bad), "");
  EXPECT_EQ(lister.calls, 1);
}

TEST(WorkloadImpact, ListsThatFailAreAnError) {
  fake_lister lister(std::nullopt);
  const auto snap = core::decode_snapshot(t::snapshot_json("p-1"));
  ASSERT_TRUE(snap.ok());
  const std::string answer =
      workload_answer(lister, t::source(), snap.value, std::chrono::seconds(1));
  EXPECT_EQ(answer,
            "{\"error\":\"the cluster's objects could not be listed: nodes is forbidden\"}");
}

// The runbook's zone -> zone + rack change on the change-zone-rack objects: the same answer
// as `diagnose change`.
TEST(WorkloadImpact, ZoneToRackChange) {
  using diagnose::testing::fixtures;
  using diagnose::testing::slurp;
  fake_lister lister(diagnose::testing::load("change-zone-rack"));
  const auto src_doc = core::decode_any(slurp(fixtures() / "change-zone-rack-source.json"));
  ASSERT_TRUE(src_doc.ok());
  const auto src = core::validate_topology_source(src_doc.root);
  ASSERT_TRUE(src.ok());
  const auto snap = core::decode_snapshot(slurp(fixtures() / "change-zone-rack-revision.yaml"));
  ASSERT_TRUE(snap.ok());
  const std::string answer =
      workload_answer(lister, src.source, snap.value, std::chrono::seconds(1));
  EXPECT_NE(answer.find("\"summary\":{\"evicted\":2,\"admittedAgain\":1,\"stranded\":1}"),
            std::string::npos)
      << answer;
}

// What the lists left out (a kind not allowed, a field not read) leads the answer's notes: the
// answer is built without it. Without such notes, none.
TEST(WorkloadImpact, ListNotesLeadTheAnswersNotes) {
  const auto snap = core::decode_snapshot(t::snapshot_json("p-1"));
  ASSERT_TRUE(snap.ok());
  auto objects = four_nodes();
  fake_lister plain(objects);
  const std::string without =
      workload_answer(plain, t::source(), snap.value, std::chrono::seconds(1));
  EXPECT_NE(without.find("\"notes\":[\"no ClusterQueue's"), std::string::npos) << without;
  objects.list_notes = {"not allowed to list cohorts (HTTP 403)", "a field"};
  fake_lister noted(objects);
  const std::string with = workload_answer(noted, t::source(), snap.value, std::chrono::seconds(1));
  EXPECT_NE(
      with.find(
          "\"notes\":[\"not allowed to list cohorts (HTTP 403)\",\"a field\",\"no ClusterQueue's"),
      std::string::npos)
      << with;
  EXPECT_TRUE(core::decode_any(with).ok()) << with;
}

// A push refused by maxStrandedWorkloads is counted once, apart from maxProfileChanges'.
TEST(WorkloadImpact, StrandedRefusalsAreCounted) {
  metrics m;
  inventory::attempt a;
  a.origin = "push";
  a.stranded_workloads = 2;
  a.stranded_refused = true;
  m.profile_impact("dc", a);
  const std::string text = m.serialize();
  EXPECT_NE(text.find("topogate_inventory_stranded_refusals_total{inventory=\"dc\"} 1"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("topogate_inventory_impact_refusals_total{inventory=\"dc\""),
            std::string::npos);
  a.stranded_refused = false;  // counted, published: not a refusal
  m.profile_impact("dc", a);
  EXPECT_NE(m.serialize().find("topogate_inventory_stranded_refusals_total{inventory=\"dc\"} 1"),
            std::string::npos);
}

}  // namespace
}  // namespace topogate::server

// The metrics the chart's alerts are written against (helm/topogate/files/alerts.yaml):
// rejections by rule, admission denials by rule, staleness against maxAge and the store's
// availability, read back from the text /metrics serves.

#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>

#include "core/snapshot_size.hpp"
#include "inventory/registry.hpp"
#include "server/metrics.hpp"
#include "server/router.hpp"
#include "test/inventory/test_util.hpp"
#include "test/server/sized_snapshot.hpp"

namespace topogate::server {
namespace {

namespace invtest = inventory::testing;

// The value of the series `name` whose labels include every one of `labels`; nullopt when
// there is none.
std::optional<double> sample(const std::string& text, std::string_view name,
                             const std::map<std::string, std::string>& labels = {}) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    const auto brace = line.find_first_of("{ ");
    if (line.compare(0, brace, name) != 0 || brace != name.size()) continue;
    bool all = true;
    for (const auto& [k, v] : labels)
      all = all && line.find(k + "=\"" + v + "\"") != std::string::npos;
    if (all) return std::stod(line.substr(line.rfind(' ') + 1));
  }
  return std::nullopt;
}

core::field_error error(std::string rule) {
  return core::invalid(std::move(rule), "nodes.worker-0", "x");
}

TEST(AlertMetrics, AdmissionDenialsCountEachDistinctRuleOnceAndOnlyRuleIdsAsLabels) {
  metrics m;
  m.admission_denial("TopologySource", {error("T4"), error("T4"), error("T13")});
  m.admission_denial("TopologySource", {error("T4")});
  // Never a label made of input text, nor an id shaped like a rule that is none (M9).
  m.admission_denial("ModelDeployment", {error("M1\"}"), error(""), error("M9")});
  const auto text = m.serialize();
  EXPECT_EQ(sample(text, "topogate_admission_denials_total",
                   {{"kind", "TopologySource"}, {"rule", "T4"}}),
            2);
  EXPECT_EQ(sample(text, "topogate_admission_denials_total",
                   {{"kind", "TopologySource"}, {"rule", "T13"}}),
            1);
  EXPECT_EQ(sample(text, "topogate_admission_denials_total",
                   {{"kind", "ModelDeployment"}, {"rule", "other"}}),
            1);
  EXPECT_EQ(text.find("M1\\\""), std::string::npos);
  EXPECT_EQ(text.find("\"M9\""), std::string::npos);
}

TEST(AlertMetrics, AdmissionDecisionSeriesStartAtZero) {
  metrics m;
  const auto text = m.serialize();
  for (const char* kind : {"TopologySource", "ModelDeployment"}) {
    for (const char* verdict : {"allowed", "denied", "errored"}) {
      EXPECT_EQ(sample(text, "topogate_admission_decisions_total",
                       {{"kind", kind}, {"verdict", verdict}}),
                0)
          << kind << " " << verdict;
    }
  }
  EXPECT_EQ(sample(text, "topogate_admission_decisions_total",
                   {{"kind", "other"}, {"verdict", "errored"}}),
            0);
  m.admission_decision("TopologySource", "errored");
  EXPECT_EQ(sample(m.serialize(), "topogate_admission_decisions_total",
                   {{"kind", "TopologySource"}, {"verdict", "errored"}}),
            1);
}

TEST(AlertMetrics, ARejectedRevisionIsCountedByTheRuleOfItsFirstError) {
  metrics m;
  inventory::attempt rejected;
  rejected.errors = {error("S7"), error("S4")};
  m.rejection("dc", rejected);
  m.rejection("dc", rejected);
  inventory::attempt accepted;
  accepted.accepted = true;
  m.rejection("dc", accepted);
  inventory::attempt failed;  // unreadable file, store failure: no rule was broken
  failed.note = "store: down";
  m.rejection("dc", failed);
  const auto text = m.serialize();
  EXPECT_EQ(
      sample(text, "topogate_inventory_rejections_total", {{"inventory", "dc"}, {"rule", "S7"}}),
      2);
  EXPECT_EQ(
      sample(text, "topogate_inventory_rejections_total", {{"inventory", "dc"}, {"rule", "S4"}}),
      std::nullopt);
  EXPECT_EQ(sample(text, "topogate_inventory_rejections_total", {{"rule", "other"}}), std::nullopt);
}

class RegistryMetrics : public ::testing::Test {
 protected:
  void SetUp() override {
    invtest::write_file(dir_ / "snapshot.json", invtest::snapshot_json("file-1"));
    inventory::registry_config cfg;
    inventory::inventory_spec file_fed;
    file_fed.config = invtest::config("file-fed");
    file_fed.config.max_age = std::chrono::seconds(90);
    file_fed.config.max_profile_changes = 2;
    file_fed.snapshot_path = dir_ / "snapshot.json";
    file_fed.kind = inventory::source_kind::file;
    cfg.inventories.push_back(std::move(file_fed));
    inventory::inventory_spec pushed;
    pushed.config = invtest::config("pushed");
    cfg.inventories.push_back(std::move(pushed));
    cfg.store.type = inventory::store_config::kind::file;
    cfg.store.directory = dir_ / "store";
    cfg.resync_interval = std::chrono::seconds(3600);
    reg_ = std::make_unique<inventory::registry>(std::move(cfg), clock_);
    reg_->start();
  }
  void TearDown() override { reg_->stop(); }

  std::string scrape() {
    m_.refresh_inventories(*reg_);
    return m_.serialize();
  }

  invtest::temp_dir dir_;
  invtest::manual_clock clock_;
  metrics m_;
  std::unique_ptr<inventory::registry> reg_;
};

TEST_F(RegistryMetrics, MaxAgeStalenessAndRuleCountersStartingAtZero) {
  ASSERT_TRUE(invtest::eventually([&] { return reg_->store_available("pushed").has_value(); }));
  const auto text = scrape();
  EXPECT_EQ(sample(text, "topogate_inventory_max_age_seconds", {{"inventory", "file-fed"}}), 90);
  EXPECT_EQ(sample(text, "topogate_inventory_max_age_seconds", {{"inventory", "pushed"}}), 0);
  // Nothing served yet: no staleness.
  EXPECT_EQ(sample(text, "topogate_inventory_staleness_seconds", {{"inventory", "pushed"}}),
            std::nullopt);
  EXPECT_TRUE(sample(text, "topogate_inventory_staleness_seconds", {{"inventory", "file-fed"}})
                  .has_value());
  for (int i = 1; i <= 10; ++i) {
    const std::string rule = "S" + std::to_string(i);
    EXPECT_EQ(sample(text, "topogate_inventory_rejections_total",
                     {{"inventory", "file-fed"}, {"rule", rule}}),
              0)
        << rule;
    EXPECT_EQ(sample(text, "topogate_inventory_rejections_total",
                     {{"inventory", "pushed"}, {"rule", rule}}),
              0)
        << rule;
  }
  // maxProfileChanges refusals start at 0 where there is a limit, and do not exist without one.
  for (const char* trigger : {"file", "push"}) {
    EXPECT_EQ(sample(text, "topogate_inventory_impact_refusals_total",
                     {{"inventory", "file-fed"}, {"trigger", trigger}}),
              0);
  }
  EXPECT_EQ(sample(text, "topogate_inventory_impact_refusals_total", {{"inventory", "pushed"}}),
            std::nullopt);
  EXPECT_EQ(sample(text, "topogate_store_available", {{"inventory", "pushed"}}), 1);
  // The file's four Nodes; nothing pushed yet.
  EXPECT_EQ(sample(text, "topogate_inventory_nodes", {{"inventory", "file-fed"}}), 4);
  EXPECT_EQ(sample(text, "topogate_inventory_nodes", {{"inventory", "pushed"}}), 0);
  // A file-fed inventory makes no store call.
  EXPECT_EQ(sample(text, "topogate_store_available", {{"inventory", "file-fed"}}), std::nullopt);
}

TEST_F(RegistryMetrics, SnapshotBytesAgainstTheLimitOnBothSidesOfTheAlertFraction) {
  auto text = scrape();
  // Every inventory states the limit; nothing pushed is 0 bytes.
  for (const char* inv : {"file-fed", "pushed"}) {
    EXPECT_EQ(sample(text, "topogate_inventory_snapshot_max_bytes", {{"inventory", inv}}), 1048576)
        << inv;
  }
  EXPECT_EQ(sample(text, "topogate_inventory_snapshot_bytes", {{"inventory", "pushed"}}), 0);
  EXPECT_EQ(sample(text, "topogate_inventory_snapshot_bytes", {{"inventory", "file-fed"}}),
            static_cast<double>(reg_->find("file-fed")->current()->json_text.size()));
  // What TopogateInventoryNearSizeLimit divides (alert above 0.9 by default), just under and
  // just over 0.9 of 1 MiB.
  for (const std::size_t bytes :
       {core::snapshot_size_warning_bytes, core::snapshot_size_warning_bytes + 1}) {
    const auto r = reg_->push(
        "pushed", server::testing::snapshot_json_of_size(bytes, "size-" + std::to_string(bytes)),
        std::nullopt, "w");
    ASSERT_TRUE(r.outcome == inventory::push_outcome::created ||
                r.outcome == inventory::push_outcome::stored)
        << r.message;
    text = scrape();
    const auto got = sample(text, "topogate_inventory_snapshot_bytes", {{"inventory", "pushed"}});
    const auto max =
        sample(text, "topogate_inventory_snapshot_max_bytes", {{"inventory", "pushed"}});
    ASSERT_TRUE(got && max);
    EXPECT_EQ(*got, static_cast<double>(bytes));
    EXPECT_EQ(*got / *max > 0.9, bytes > core::snapshot_size_warning_bytes) << bytes;
  }
}

TEST_F(RegistryMetrics, StalenessCountsFromTheLastConfirmationNotTheFirstAcceptance) {
  const auto* inv = reg_->find("file-fed");
  ASSERT_NE(inv->current(), nullptr);
  const auto accepted = inv->current()->accepted_at;
  // The file is read again a minute later and still says the same: confirmed, not re-accepted.
  clock_.advance(std::chrono::seconds(60));
  reg_->resync();
  ASSERT_TRUE(invtest::eventually(
      [&] { return inv->confirmed_at() == accepted + std::chrono::seconds(60); }));
  ASSERT_EQ(inv->current()->accepted_at, accepted);
  const auto text = scrape();
  const auto staleness =
      sample(text, "topogate_inventory_staleness_seconds", {{"inventory", "file-fed"}});
  const auto age =
      sample(text, "topogate_inventory_revision_age_seconds", {{"inventory", "file-fed"}});
  ASSERT_TRUE(staleness && age);
  // Both read the same instant of the system clock against the inventory's (manual) times.
  EXPECT_NEAR(*age - *staleness, 60.0, 1e-3);
}

TEST(AlertMetrics, TheRouterCountsADeniedReviewByRule) {
  std::ifstream f(std::string(TOPOGATE_SOURCE_DIR) +
                  "/test/integration/fixtures/admission/denied.json");
  std::stringstream body;
  body << f.rdbuf();
  ASSERT_FALSE(body.str().empty());
  metrics m;
  health_state health;
  router_context ctx;
  ctx.m = &m;
  ctx.health = &health;
  request req{http::verb::post, "/validate/topologysources", 11};
  req.set(http::field::content_type, "application/json");
  req.body() = body.str();
  req.prepare_payload();
  request_info info;
  const auto res = handle(req, {}, ctx, info);
  ASSERT_EQ(res.result(), http::status::ok);
  ASSERT_EQ(info.detail, "denied");
  const auto text = m.serialize();
  EXPECT_EQ(sample(text, "topogate_admission_decisions_total",
                   {{"kind", "TopologySource"}, {"verdict", "denied"}}),
            1);
  // The fixture breaks at least one T rule; every series carries a rule id.
  bool any = false;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (!line.starts_with("topogate_admission_denials_total{")) continue;
    any = true;
    EXPECT_NE(line.find("kind=\"TopologySource\""), std::string::npos) << line;
    EXPECT_NE(line.find("rule=\"T"), std::string::npos) << line;
  }
  EXPECT_TRUE(any) << text;
}

}  // namespace
}  // namespace topogate::server

// inventories[].maxProfileChanges: absent is no limit; a non-negative integer up to 2^20.
// inventories[].driftGracePeriod: absent is 5m; a duration from 1s to 24h.
// inventories[].workloadImpact: absent or false is off; true needs nodesFromAPI.
// inventories[].maxStrandedWorkloads: absent is no limit, 0 strands none; it needs workloadImpact.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <utility>

#include "server/config.hpp"

namespace topogate::server {
namespace {

class ImpactConfig : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("topogate-impact-config-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    std::ofstream(dir_ / "source.yaml") << R"(apiVersion: worker.gpustack.ai/v1
kind: TopologySource
metadata: {name: data-center}
spec:
  levels: [topology.gpustack.ai/zone, topology.gpustack.ai/rack]
  webhook:
    url: https://topogate.gpustack-system.svc/snapshots/dc
    pollInterval: 1m
    timeout: 10s
    maxStaleness: 5m
    bearerTokenSecretRef: {namespace: gpustack-system, name: token}
)";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  core::result<serve_config> parse(const std::string& extra) {
    const std::string yaml = R"(
tls: {certFile: tls.crt, keyFile: tls.key}
inventories:
  - name: dc
    source: source.yaml
    snapshot: snap.yaml
    readers: {bearerTokenFiles: [token]}
)" + extra;
    return parse_serve_config(yaml, dir_.string());
  }
  std::filesystem::path dir_;
};

TEST_F(ImpactConfig, AbsentMeansNoLimit) {
  const auto cfg = parse("");
  ASSERT_TRUE(cfg) << cfg.error().message;
  EXPECT_EQ(cfg->registry.inventories[0].config.max_profile_changes, 0u);
}

TEST_F(ImpactConfig, NonNegativeIntegerUpToTheMaximum) {
  auto cfg = parse("    maxProfileChanges: 3\n");
  ASSERT_TRUE(cfg) << cfg.error().message;
  EXPECT_EQ(cfg->registry.inventories[0].config.max_profile_changes, 3u);
  cfg = parse("    maxProfileChanges: 1048576\n");
  ASSERT_TRUE(cfg) << cfg.error().message;
  EXPECT_EQ(cfg->registry.inventories[0].config.max_profile_changes, 1048576u);
  cfg = parse("    maxProfileChanges: 1048577\n");
  ASSERT_FALSE(cfg);
  EXPECT_NE(cfg.error().message.find("maxProfileChanges"), std::string::npos);
}

TEST_F(ImpactConfig, NegativeOrNotANumberIsAnError) {
  for (const char* bad : {"-1", "two", "1.5", "[1]"}) {
    const auto cfg = parse(std::string("    maxProfileChanges: ") + bad + "\n");
    ASSERT_FALSE(cfg) << bad;
    EXPECT_NE(cfg.error().message.find("inventories[dc].maxProfileChanges"), std::string::npos)
        << bad << ": " << cfg.error().message;
  }
}

TEST_F(ImpactConfig, DriftGracePeriodFromOneSecondToADay) {
  auto cfg = parse("");
  ASSERT_TRUE(cfg) << cfg.error().message;
  EXPECT_EQ(cfg->registry.inventories[0].drift_grace, std::chrono::minutes(5));
  for (const auto& [text, want] :
       {std::pair{"1s", std::chrono::seconds(1)}, std::pair{"90s", std::chrono::seconds(90)},
        std::pair{"24h", std::chrono::seconds(24 * 3600)}}) {
    cfg = parse(std::string("    driftGracePeriod: ") + text + "\n");
    ASSERT_TRUE(cfg) << text << ": " << cfg.error().message;
    EXPECT_EQ(cfg->registry.inventories[0].drift_grace, want) << text;
  }
  for (const char* bad : {"0s", "500ms", "24h1s", "-1m", "soon"}) {
    cfg = parse(std::string("    driftGracePeriod: ") + bad + "\n");
    ASSERT_FALSE(cfg) << bad;
    EXPECT_NE(cfg.error().message.find("driftGracePeriod"), std::string::npos)
        << bad << ": " << cfg.error().message;
  }
}

TEST_F(ImpactConfig, WorkloadImpactNeedsNodesFromAPI) {
  auto cfg = parse("");
  ASSERT_TRUE(cfg) << cfg.error().message;
  EXPECT_TRUE(cfg->workload_impact.inventories.empty());
  cfg = parse("    workloadImpact: false\n");
  ASSERT_TRUE(cfg) << cfg.error().message;
  EXPECT_TRUE(cfg->workload_impact.inventories.empty());
  cfg = parse("    workloadImpact: true\n");
  ASSERT_FALSE(cfg);
  EXPECT_NE(cfg.error().message.find("inventories[dc].workloadImpact"), std::string::npos)
      << cfg.error().message;
  EXPECT_NE(cfg.error().message.find("nodesFromAPI"), std::string::npos) << cfg.error().message;
  cfg = parse("    nodesFromAPI: true\n    workloadImpact: true\n");
  ASSERT_TRUE(cfg) << cfg.error().message;
  EXPECT_EQ(cfg->workload_impact.inventories, std::vector<std::string>{"dc"});
}

TEST_F(ImpactConfig, MaxStrandedWorkloadsNeedsWorkloadImpact) {
  auto cfg = parse("");
  ASSERT_TRUE(cfg) << cfg.error().message;
  EXPECT_FALSE(cfg->registry.inventories[0].config.max_stranded_workloads.has_value());
  cfg = parse("    maxStrandedWorkloads: 0\n");
  ASSERT_FALSE(cfg);  // a limit of 0 is a limit: it needs workloadImpact as well
  cfg = parse("    maxStrandedWorkloads: 2\n");
  ASSERT_FALSE(cfg);
  EXPECT_NE(cfg.error().message.find("inventories[dc].maxStrandedWorkloads"), std::string::npos)
      << cfg.error().message;
  cfg = parse("    nodesFromAPI: true\n    workloadImpact: true\n    maxStrandedWorkloads: 2\n");
  ASSERT_TRUE(cfg) << cfg.error().message;
  EXPECT_EQ(cfg->registry.inventories[0].config.max_stranded_workloads,
            std::optional<std::size_t>(2));
  cfg = parse("    nodesFromAPI: true\n    workloadImpact: true\n    maxStrandedWorkloads: 0\n");
  ASSERT_TRUE(cfg) << cfg.error().message;
  EXPECT_EQ(cfg->registry.inventories[0].config.max_stranded_workloads,
            std::optional<std::size_t>(0));
  cfg = parse("    nodesFromAPI: true\n    workloadImpact: true\n    maxStrandedWorkloads: -1\n");
  EXPECT_FALSE(cfg);
}

}  // namespace
}  // namespace topogate::server

// inventories[].maxProfileChanges: absent is no limit; a non-negative integer up to 2^20.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "server/config.hpp"

namespace topogate::server {
namespace {

class ImpactConfig : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("topogate-impact-config-" + std::to_string(::getpid()));
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
  std::optional<serve_config> parse(const std::string& extra, std::string* err) {
    const std::string yaml = R"(
tls: {certFile: tls.crt, keyFile: tls.key}
inventories:
  - name: dc
    source: source.yaml
    snapshot: snap.yaml
    readers: {bearerTokenFiles: [token]}
)" + extra;
    return parse_serve_config(yaml, dir_.string(), err);
  }
  std::filesystem::path dir_;
};

TEST_F(ImpactConfig, AbsentMeansNoLimit) {
  std::string err;
  const auto cfg = parse("", &err);
  ASSERT_TRUE(cfg) << err;
  EXPECT_EQ(cfg->registry.inventories[0].config.max_profile_changes, 0u);
}

TEST_F(ImpactConfig, NonNegativeIntegerUpToTheMaximum) {
  std::string err;
  auto cfg = parse("    maxProfileChanges: 3\n", &err);
  ASSERT_TRUE(cfg) << err;
  EXPECT_EQ(cfg->registry.inventories[0].config.max_profile_changes, 3u);
  cfg = parse("    maxProfileChanges: 1048576\n", &err);
  ASSERT_TRUE(cfg) << err;
  EXPECT_EQ(cfg->registry.inventories[0].config.max_profile_changes, 1048576u);
  err.clear();
  EXPECT_FALSE(parse("    maxProfileChanges: 1048577\n", &err));
  EXPECT_NE(err.find("maxProfileChanges"), std::string::npos);
}

TEST_F(ImpactConfig, NegativeOrNotANumberIsAnError) {
  for (const char* bad : {"-1", "two", "1.5", "[1]"}) {
    std::string err;
    EXPECT_FALSE(parse(std::string("    maxProfileChanges: ") + bad + "\n", &err)) << bad;
    EXPECT_NE(err.find("inventories[dc].maxProfileChanges"), std::string::npos) << bad << ": " << err;
  }
}

}  // namespace
}  // namespace topogate::server

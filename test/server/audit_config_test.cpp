// `audit:` in the configuration: off by default, every key checked with a message naming it,
// both ends of every range.
#include <gtest/gtest.h>

#include <string>

#include "server/config.hpp"

namespace topogate::server {
namespace {

using namespace std::chrono_literals;

// A webhook-only configuration (no inventory, so no file is read).
core::result<serve_config> parse(const std::string& audit) {
  return parse_serve_config("tls: {certFile: tls.crt, keyFile: tls.key}\n" + audit, "/nonexistent");
}

std::string error_of(const std::string& audit) {
  auto cfg = parse(audit);
  return cfg ? std::string("(parsed)") : cfg.error().message;
}

TEST(AuditConfig, OffByDefault) {
  auto cfg = parse("");
  ASSERT_TRUE(cfg) << cfg.error().message;
  EXPECT_FALSE(cfg->audit.enabled);
  EXPECT_EQ(cfg->audit.interval, 10min);
  EXPECT_EQ(cfg->audit.timeout, 30s);
  EXPECT_TRUE(cfg->audit.namespaces.empty());
}

TEST(AuditConfig, EveryKey) {
  auto cfg = parse(
      "audit: {enabled: true, interval: 2m30s, timeout: 45s, namespaces: [team-a, team-b]}\n");
  ASSERT_TRUE(cfg) << cfg.error().message;
  EXPECT_TRUE(cfg->audit.enabled);
  EXPECT_EQ(cfg->audit.interval, 150s);
  EXPECT_EQ(cfg->audit.timeout, 45s);
  EXPECT_EQ(cfg->audit.namespaces, (std::vector<std::string>{"team-a", "team-b"}));
  cfg = parse("audit: {enabled: true, namespaces: all}\n");
  ASSERT_TRUE(cfg) << cfg.error().message;
  EXPECT_TRUE(cfg->audit.namespaces.empty());
  // Disabled, the other keys are still checked (and kept).
  cfg = parse("audit: {enabled: false, interval: 1h}\n");
  ASSERT_TRUE(cfg) << cfg.error().message;
  EXPECT_FALSE(cfg->audit.enabled);
  EXPECT_EQ(cfg->audit.interval, 1h);
}

TEST(AuditConfig, BothEndsOfEveryRange) {
  EXPECT_TRUE(parse("audit: {interval: 1s}\n"));
  EXPECT_EQ(error_of("audit: {interval: 999ms}\n"), "audit.interval: must be between 1s and 24h");
  EXPECT_TRUE(parse("audit: {interval: 24h}\n"));
  EXPECT_EQ(error_of("audit: {interval: 24h0m1s}\n"), "audit.interval: must be between 1s and 24h");
  EXPECT_TRUE(parse("audit: {timeout: 1s}\n"));
  EXPECT_EQ(error_of("audit: {timeout: 999ms}\n"), "audit.timeout: must be between 1s and 10m");
  EXPECT_TRUE(parse("audit: {timeout: 10m}\n"));
  EXPECT_EQ(error_of("audit: {timeout: 10m1s}\n"), "audit.timeout: must be between 1s and 10m");
}

TEST(AuditConfig, Rejections) {
  EXPECT_EQ(error_of("audit: {enabled: yes}\n"),
            "audit.enabled: must be true or false, got \"yes\"");
  EXPECT_EQ(error_of("audit: {intervall: 1m}\n"), "audit: unknown key \"intervall\"");
  EXPECT_EQ(error_of("audit: true\n"), "audit: must be a mapping");
  EXPECT_EQ(error_of("audit: {interval: 10}\n").substr(0, 33),
            "audit.interval: \"10\" is not a dur");
  EXPECT_EQ(error_of("audit: {namespaces: some}\n"),
            "audit.namespaces: must be all or a list of namespaces, got \"some\"");
  EXPECT_EQ(error_of("audit: {namespaces: []}\n"),
            "audit.namespaces: must list at least one namespace (or be all)");
  EXPECT_EQ(error_of("audit: {namespaces: [ok, Not_OK]}\n"),
            "audit.namespaces[1]: \"Not_OK\" is not a namespace name (a DNS-1123 label)");
  EXPECT_EQ(error_of("audit: {namespaces: [a, b, a]}\n"),
            "audit.namespaces[2]: \"a\" is listed twice");
}

}  // namespace
}  // namespace topogate::server

// TopologySource rules T9-T11 (the webhook's URL, durations and their order), and JSON
// against YAML: rule, type and path of every error.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "core/syntax.hpp"
#include "core/topology_source.hpp"
#include "core/topology_source_internal.hpp"
#include "test/core/topology_source_support.hpp"

namespace topogate::core {
namespace {

using namespace test;

// ---------------------------------------------------------------------------------------
// T9: webhook URL

struct url_case {
  std::string url;
  bool valid;
};

class T9 : public ::testing::TestWithParam<url_case> {};

TEST_P(T9, AbsoluteHttpsUrl) {
  const auto& c = GetParam();
  webhook_fields f;
  f.url = c.url;
  const auto r = validate_both(webhook_source_text(f));
  if (c.valid) {
    EXPECT_TRUE(r.ok()) << c.url << "\n" << dump(r);
  } else {
    EXPECT_TRUE(has_error(r.errors, "T9", error_type::invalid, "spec.webhook.url") ||
                has_error(r.errors, "T9", error_type::required, "spec.webhook.url"))
        << c.url << "\n"
        << dump(r);
    EXPECT_EQ(rules_of(r.errors), std::set<std::string>{"T9"}) << dump(r);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Table, T9,
    ::testing::Values(url_case{"https://inventory.example.com/snapshot", true},
                      url_case{"HTTPS://x", true}, url_case{"HtTpS://x/", true},
                      url_case{"https://x#", true}, url_case{"https://x:8443/a?b=c", true},
                      url_case{"https://[::1]:8443/", true}, url_case{"https://10.0.0.1/", true},
                      url_case{"https://@x", false}, url_case{"https://user@x/", false},
                      url_case{"https://user:pw@x/", false}, url_case{"https://x#f", false},
                      url_case{"https://:443/x", false}, url_case{"http://x/", false},
                      url_case{"http://", false}, url_case{"https://", false},
                      url_case{"https:///x", false}, url_case{"https:x", false},
                      url_case{"/snapshot", false}, url_case{"x.example.com/snapshot", false},
                      url_case{"", false}, url_case{"https://x y/", false},
                      url_case{"https://x%zz/", false}, url_case{"https://x\\t/", false},
                      url_case{"https://[::1/", false}, url_case{"ftp://x/", false},
                      url_case{"https://x:port/", false}));

TEST(T9, UserInfoIsNeverEchoed) {
  webhook_fields f;
  f.url = "https://admin:hunter2@x/?token=s3cr3t&a=1";
  const auto r = validate_both(webhook_source_text(f));
  ASSERT_FALSE(r.ok());
  const std::string all = render_text(r.errors) + render_json(r.errors);
  EXPECT_EQ(all.find("hunter2"), std::string::npos) << all;
  EXPECT_EQ(all.find("s3cr3t"), std::string::npos) << all;
  for (const auto& w : r.warnings) EXPECT_EQ(w.find("s3cr3t"), std::string::npos);
}

TEST(T9, CredentialsRedactedEvenWhenTheUrlDoesNotParse) {
  for (const std::string url :
       {"https://admin:hunter2@x y/", "http://admin:hunter2@[::1/?password=hunter2",
        "https://admin:hunter2@x/%zz", "https://x/?sig=hunter2#frag"}) {
    webhook_fields f;
    f.url = url;
    const auto r = validate_both(webhook_source_text(f));
    ASSERT_FALSE(r.ok()) << url;
    EXPECT_TRUE(has_error(r.errors, "T9", error_type::invalid, "spec.webhook.url")) << url;
    const std::string all = render_text(r.errors) + render_json(r.errors);
    EXPECT_EQ(all.find("hunter2"), std::string::npos) << all;
    for (const auto& w : r.warnings) EXPECT_EQ(w.find("hunter2"), std::string::npos) << w;
  }
}

TEST(Json, SameVerdictAsYaml) {
  const auto yaml = validate_both(node_labels_source("[a/b, a/b, kubernetes.io/hostname]"));
  const auto json = validate_both(
      R"({"apiVersion":"worker.gpustack.ai/v1","kind":"TopologySource","metadata":{"name":"test"},)"
      R"("spec":{"levels":["a/b","a/b","kubernetes.io/hostname"],"nodeLabels":{}}})");
  ASSERT_EQ(yaml.errors.size(), json.errors.size()) << dump(yaml) << dump(json);
  for (std::size_t i = 0; i < yaml.errors.size(); ++i) {
    EXPECT_EQ(yaml.errors[i].rule, json.errors[i].rule);
    EXPECT_EQ(yaml.errors[i].path, json.errors[i].path);
    EXPECT_EQ(yaml.errors[i].type, json.errors[i].type);
  }
  const auto levels_number = validate_both(
      R"({"apiVersion":"worker.gpustack.ai/v1","kind":"TopologySource","metadata":{"name":"test"},)"
      R"("spec":{"levels":["a/b",42],"nodeLabels":{}}})");
  EXPECT_TRUE(has_error(levels_number.errors, "T2", error_type::invalid, "spec.levels[1]"))
      << dump(levels_number);
}

TEST(T9, MissingOrNonStringUrl) {
  webhook_fields f;
  const auto text = webhook_source_text(f);
  const auto missing = validate_both(
      with_spec("  levels: [topology.gpustack.ai/rack]\n  webhook:\n    pollInterval: 1m\n    "
                "timeout: 10s\n    maxStaleness: 5m\n" +
                f.auth));
  // The empty URL to the consumer, which reports it as invalid.
  EXPECT_TRUE(has_error(missing.errors, "T9", error_type::invalid, "spec.webhook.url"))
      << dump(missing);
  f.url = "";
  const auto empty = validate_both(webhook_source_text(f));
  EXPECT_TRUE(has_error(empty.errors, "T9", error_type::invalid, "spec.webhook.url"))
      << dump(empty);
  const auto number =
      validate_both(with_spec("  levels: [topology.gpustack.ai/rack]\n  webhook:\n "
                              "   url: 42\n    pollInterval: 1m\n    timeout: 10s\n"
                              "    maxStaleness: 5m\n" +
                              f.auth));
  EXPECT_TRUE(has_error(number.errors, "T9", error_type::invalid, "spec.webhook.url"))
      << dump(number);
}

// T9 skips parse_url for the URLs its fast path calls plain. Every URL it calls plain must be
// one the full parse accepts as https with a host and no user information, fragment or query
// (all that T9 checks; T9 itself returns before its checks for such a URL, so it is the
// parse that is compared, not T9's verdict); the generated URLs mix clean
// pieces with the characters that change what Go's url.Parse makes of a URL (user
// information, a port, a query, a fragment, escapes, brackets, white space, control and
// non-ASCII bytes) and start with near misses of "https://".
TEST(T9, FastPathPassesOnlyUrlsTheFullParseFindsClean) {
  std::mt19937 rng(20261201);
  const auto pick = [&](std::string_view from) { return from[rng() % from.size()]; };
  const auto chance = [&](unsigned percent) { return rng() % 100 < percent; };
  const std::string alnum = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  const std::string special = ".-_~/:@?#%[]!$&'()*+,;= \t\x80\xc3\xa9\xe2\xff";
  const std::string host_chars = alnum + ".-";
  const std::string path_chars = alnum + "/-._~";
  // Each URL's pieces draw from their clean characters, and with a chance of `noise` percent
  // per character (none, a little or much, per URL) from anything, half of the time a
  // special character.
  unsigned noise = 0;
  const auto piece = [&](std::string_view clean, std::size_t max_length) {
    std::string out;
    for (std::size_t n = rng() % (max_length + 1); n > 0; --n) {
      out.push_back(!chance(noise) ? pick(clean) : chance(50) ? pick(special) : pick(alnum));
    }
    return out;
  };
  const std::vector<std::string_view> prefixes = {
      "https://",  "https://",  "https://",   "https://",  "https://", "https://", "https://",
      "https://",  "HTTPS://",  "Https://",   "http://",   "https:",   "https:/",  "//",
      "https:///", "https://@", "https://u@", "https://[", "ftp://",   "",         "https//"};
  const auto https = [](std::string_view scheme) {
    std::string lower(scheme);
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return lower == "https";
  };

  std::size_t plain = 0, not_plain = 0, with_port = 0, with_path = 0, port_or_path = 0;
  for (int i = 0; i < 200000; ++i) {
    std::string url(prefixes[rng() % prefixes.size()]);
    noise = std::array{0u, 3u, 12u}[rng() % 3];
    if (chance(5)) {
      url += piece(special, 30);
    } else {
      url += piece(host_chars, 12);
      if (chance(30)) url += ":" + piece("0123456789", 6);
      if (chance(60)) url += "/" + piece(path_chars, 20);
      if (chance(5)) url += piece(special, 4);
    }
    if (!detail::plain_https_url(url)) {
      ++not_plain;
      continue;
    }
    ++plain;
    const auto parsed = parse_url(url);
    ASSERT_TRUE(parsed.ok()) << url << ": " << parsed.error().message;
    ASSERT_TRUE(https(parsed->scheme)) << url;
    ASSERT_NE(parsed->host, "") << url;
    ASSERT_FALSE(parsed->has_user_info) << url;
    ASSERT_EQ(parsed->fragment, "") << url;
    ASSERT_EQ(parsed->raw_query, "") << url;
    with_port += !parsed->port.empty();
    with_path += !parsed->path.empty();
    port_or_path += !parsed->port.empty() || !parsed->path.empty();
  }
  // Both answers are common, and the plain URLs are not mostly bare hosts (the seed gives
  // 48110 plain, 11903 with a port, 27116 with a path, 32243 with either; 151890 not plain).
  const std::string counts = std::to_string(plain) + " plain (" + std::to_string(with_port) +
                             " with a port, " + std::to_string(with_path) + " with a path), " +
                             std::to_string(not_plain) + " not plain";
  EXPECT_GT(plain, 30000u) << counts;
  EXPECT_GT(not_plain, 100000u) << counts;
  EXPECT_GT(with_port, 8000u) << counts;
  EXPECT_GT(with_path, 18000u) << counts;
  EXPECT_GT(port_or_path * 2, plain) << counts;
}

// ---------------------------------------------------------------------------------------
// T10, T11: webhook durations

TEST(T10, EachDurationRequiredAndPositive) {
  for (const std::string field : {"pollInterval", "timeout", "maxStaleness"}) {
    for (const std::string bad : {"0s", "0", "-10s", "10", "1d", ""}) {
      webhook_fields f;
      std::string* target = field == "pollInterval" ? &f.poll
                            : field == "timeout"    ? &f.timeout
                                                    : &f.stale;
      *target = bad;
      if (field == "pollInterval") f.timeout = "1ns";  // keep T11 out of the way
      const auto r = validate_both(webhook_source_text(f));
      EXPECT_TRUE(has_error(r.errors, "T10", error_type::invalid, "spec.webhook." + field))
          << field << "=" << bad << "\n"
          << dump(r);
      EXPECT_EQ(rules_of(r.errors), std::set<std::string>{"T10"}) << field << "=" << bad << "\n"
                                                                  << dump(r);
    }
  }
  const auto missing = validate_both(
      with_spec("  levels: [topology.gpustack.ai/rack]\n  webhook:\n    url: https://x/\n"
                "    bearerTokenSecretRef: {namespace: gpustack-system, name: t}\n"));
  // Unset is the zero duration to the consumer: Invalid ("must be positive").
  EXPECT_TRUE(has_error(missing.errors, "T10", error_type::invalid, "spec.webhook.pollInterval"));
  EXPECT_TRUE(has_error(missing.errors, "T10", error_type::invalid, "spec.webhook.timeout"));
  EXPECT_TRUE(has_error(missing.errors, "T10", error_type::invalid, "spec.webhook.maxStaleness"));
}

TEST(T10, JsonNumberIsNotADuration) {
  const std::string json =
      R"({"apiVersion":"worker.gpustack.ai/v1","kind":"TopologySource","metadata":{"name":"j"},
  "spec":{"levels":["topology.gpustack.ai/rack"],"webhook":{"url":"https://x/","pollInterval":60,"timeout":"10s",
  "maxStaleness":"5m","bearerTokenSecretRef":{"namespace":"gpustack-system","name":"t"}}}})";
  const auto r = validate_both(json);
  EXPECT_TRUE(has_error(r.errors, "T10", error_type::invalid, "spec.webhook.pollInterval"))
      << dump(r);
  EXPECT_EQ(r.errors.size(), 1u) << dump(r);
}

struct order_case {
  std::string poll, timeout;
  bool valid;
};

class T11 : public ::testing::TestWithParam<order_case> {};

TEST_P(T11, TimeoutNotAbovePollInterval) {
  const auto& c = GetParam();
  webhook_fields f;
  f.poll = c.poll;
  f.timeout = c.timeout;
  f.stale = "1h";
  const auto r = validate_both(webhook_source_text(f));
  if (c.valid) {
    EXPECT_TRUE(r.ok()) << c.poll << " " << c.timeout << dump(r);
  } else {
    EXPECT_TRUE(has_error(r.errors, "T11", error_type::invalid, "spec.webhook.timeout")) << dump(r);
    EXPECT_EQ(rules_of(r.errors), std::set<std::string>{"T11"});
  }
}

INSTANTIATE_TEST_SUITE_P(
    Table, T11,
    ::testing::Values(order_case{"1m", "1m", true}, order_case{"1m", "60s", true},
                      order_case{"1m", "60000000000ns", true},
                      order_case{"1m", "60000000001ns", false},
                      order_case{"1m", "1m0.000000001s", false},
                      order_case{"1m", "59.999999999s", true}, order_case{"30s", "1m", false},
                      order_case{"1h", "59m", true}, order_case{"1.5h", "90m", true},
                      order_case{"10s", "10001ms", false}));

TEST(Warnings, MaxStalenessShorterThanPollInterval) {
  webhook_fields f;
  f.poll = "1m";
  f.timeout = "10s";
  f.stale = "30s";
  const auto r = validate_both(webhook_source_text(f));
  EXPECT_TRUE(r.ok()) << dump(r);
  ASSERT_EQ(r.warnings.size(), 1u);
  f.stale = "1m";  // equal is fine
  EXPECT_TRUE(validate_both(webhook_source_text(f)).warnings.empty());
}

}  // namespace
}  // namespace topogate::core

// RFC 3339 times (core/time.hpp): what Kubernetes writes (an ExecCredential's
// expirationTimestamp, metav1.Time) is read, and what topogate writes reads back.
#include "core/time.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string_view>

namespace topogate::core {
namespace {

TEST(Time, ParsesRfc3339AsKubernetesWritesIt) {
  using std::chrono::system_clock;
  const auto at = [](std::string_view s) -> std::optional<std::int64_t> {
    auto t = parse_rfc3339(s);
    if (!t) return std::nullopt;
    return std::chrono::duration_cast<std::chrono::milliseconds>(t->time_since_epoch()).count();
  };
  EXPECT_EQ(at("1970-01-01T00:00:00Z"), 0);
  EXPECT_EQ(at("1970-01-01t00:00:01z"), 1000);
  EXPECT_EQ(at("1970-01-01T00:00:00.25Z"), 250);
  EXPECT_EQ(at("1970-01-01T00:00:00.123456789Z"), 123);
  EXPECT_EQ(at("1970-01-01T01:00:00+01:00"), 0);
  EXPECT_EQ(at("1969-12-31T23:30:00-00:30"), 0);
  EXPECT_EQ(at("2030-01-02T03:04:05Z"), 1893553445000);
  for (const char* bad :
       {"", "2030-01-02", "2030-01-02T03:04:05", "2030-01-02T03:04:05+0100", "2030-13-02T03:04:05Z",
        "2030-02-30T03:04:05Z", "2030-01-02T24:00:00Z", "2030-01-02T03:04:05.Z",
        "2030-01-02T03:04:05Zjunk", "30-01-02T03:04:05Z", "2030-01-02T03:04:05+01:60"}) {
    EXPECT_FALSE(parse_rfc3339(bad)) << bad;
  }
}

TEST(Time, WritesUtcWithMillisecondsAndReadsItBack) {
  using namespace std::chrono;
  const auto at = [](std::int64_t ms) { return system_clock::time_point(milliseconds(ms)); };
  EXPECT_EQ(format_rfc3339_ms(at(0)), "1970-01-01T00:00:00.000Z");
  EXPECT_EQ(format_rfc3339_ms(at(1893553445007)), "2030-01-02T03:04:05.007Z");
  // Before 1970 the fraction still counts up from the second before.
  EXPECT_EQ(format_rfc3339_ms(at(-1)), "1969-12-31T23:59:59.999Z");
  for (const std::int64_t ms : {std::int64_t{0}, std::int64_t{1893553445007}, std::int64_t{-1},
                                std::int64_t{1796422310476}}) {
    const auto back = parse_rfc3339(format_rfc3339_ms(at(ms)));
    ASSERT_TRUE(back) << ms;
    EXPECT_EQ(duration_cast<milliseconds>(back->time_since_epoch()).count(), ms);
  }
}

TEST(Time, SecondsTextAsSettingsAreWritten) {
  using namespace std::chrono_literals;
  EXPECT_EQ(seconds_text(30s), "30s");
  EXPECT_EQ(seconds_text(1500ms), "1.5s");
  EXPECT_EQ(seconds_text(300ms), "0.3s");
  EXPECT_EQ(seconds_text(1001ms), "1.001s");
  EXPECT_EQ(seconds_text(0ms), "0s");
}

}  // namespace
}  // namespace topogate::core

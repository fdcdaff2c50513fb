// Syntax primitives against apimachinery's validators and Go's time/net/url parsers.
// Expected durations and URL parts were produced by Go's own time.ParseDuration,
// Duration.String and net/url.Parse (Go 1.26).
#include "core/syntax.hpp"

#include <gtest/gtest.h>

#include <random>
#include <string>

namespace topogate::core {
namespace {

std::string repeat(char c, std::size_t n) { return std::string(n, c); }

// A DNS-1123 subdomain of exactly n bytes: 63-byte labels joined by dots.
std::string subdomain_of_length(std::size_t n) {
  std::string out;
  while (out.size() < n) {
    if (!out.empty()) out.push_back('.');
    const std::size_t room = n - out.size();
    out += std::string(std::min<std::size_t>(room, 63), 'a');
  }
  // A trailing '.' would be invalid; the loop never leaves one for n > 0.
  return out;
}

struct name_case {
  std::string input;
  bool valid;
};

class QualifiedName : public ::testing::TestWithParam<name_case> {};

TEST_P(QualifiedName, CheckAndPredicateAgree) {
  const auto& c = GetParam();
  EXPECT_EQ(check_qualified_name(c.input).empty(), c.valid) << c.input;
  EXPECT_EQ(is_qualified_name(c.input), c.valid) << c.input;
}

INSTANTIATE_TEST_SUITE_P(
    Table, QualifiedName,
    ::testing::Values(
        name_case{"topology.kubernetes.io/zone", true}, name_case{"zone", true},
        name_case{"MyName", true}, name_case{"my.name", true}, name_case{"123-abc", true},
        name_case{"a", true}, name_case{"a_b", true}, name_case{"example.com/MyName", true},
        name_case{"fabric.topograph.run/tier-1", true}, name_case{"", false},
        name_case{"/x", false}, name_case{"x/", false}, name_case{"/", false},
        name_case{"a/b/c", false}, name_case{"-a", false}, name_case{"a-", false},
        name_case{"_a", false}, name_case{"a.", false}, name_case{"a b", false},
        name_case{"a:b", false}, name_case{"Example.com/x", false},  // prefix is lowercase only
        name_case{"example..com/x", false}, name_case{"-example.com/x", false},
        name_case{"example.com-/x", false}, name_case{"ex_ample.com/x", false},
        name_case{"example.com/-x", false}, name_case{"\xc3\xa9", false},
        name_case{repeat('a', 63), true}, name_case{repeat('a', 64), false},
        name_case{"p/" + repeat('a', 63), true}, name_case{"p/" + repeat('a', 64), false},
        name_case{subdomain_of_length(253) + "/x", true},
        name_case{subdomain_of_length(254) + "/x", false}));

TEST(QualifiedName, EmptyPrefixAndNameReportBothParts) {
  EXPECT_EQ(check_qualified_name("/").size(), 3u);  // prefix empty, name empty, name regex
  EXPECT_EQ(check_qualified_name("a/b/c").size(), 1u);
  EXPECT_EQ(check_qualified_name(repeat('a', 64)).size(), 1u);  // only the length
  EXPECT_EQ(check_qualified_name(subdomain_of_length(254) + "/x").size(), 1u);
}

class LabelValue : public ::testing::TestWithParam<name_case> {};

TEST_P(LabelValue, CheckAndPredicateAgree) {
  const auto& c = GetParam();
  EXPECT_EQ(check_label_value(c.input).empty(), c.valid) << c.input;
  EXPECT_EQ(is_label_value(c.input), c.valid) << c.input;
}

INSTANTIATE_TEST_SUITE_P(
    Table, LabelValue,
    ::testing::Values(name_case{"", true}, name_case{"zone-a", true}, name_case{"MyValue", true},
                      name_case{"my_value", true}, name_case{"12345", true},
                      name_case{"1.50", true}, name_case{"a", true}, name_case{"-a", false},
                      name_case{"a-", false}, name_case{"a/b", false}, name_case{"a b", false},
                      name_case{" a", false}, name_case{"a\n", false}, name_case{"\xc3\xa9", false},
                      name_case{repeat('a', 63), true}, name_case{repeat('a', 64), false}));

class Subdomain : public ::testing::TestWithParam<name_case> {};

TEST_P(Subdomain, CheckAndPredicateAgree) {
  const auto& c = GetParam();
  EXPECT_EQ(check_dns1123_subdomain(c.input).empty(), c.valid) << c.input;
  EXPECT_EQ(is_dns1123_subdomain(c.input), c.valid) << c.input;
}

INSTANTIATE_TEST_SUITE_P(
    Table, Subdomain,
    ::testing::Values(name_case{"example.com", true}, name_case{"gpustack-system", true},
                      name_case{"a", true}, name_case{"0", true}, name_case{"a-b.c-d", true},
                      name_case{"", false}, name_case{"A", false}, name_case{"a_b", false},
                      name_case{".a", false}, name_case{"a.", false}, name_case{"a..b", false},
                      name_case{"-a", false}, name_case{"a-.b", false}, name_case{"a.-b", false},
                      name_case{repeat('a', 64), true},  // labels are not length-limited here
                      name_case{subdomain_of_length(253), true},
                      name_case{subdomain_of_length(254), false}));

// The predicates check names of 16 to 64 bytes on byte-class masks and the others byte by
// byte; check_*() answers a name the predicate accepts at once, and detail::*_errors() goes
// byte by byte. Names of every length from 1 to 70, mostly of valid bytes with a few others
// sprinkled in (so that both answers come up at every length), must get the same answer
// from the predicates, the byte-wise checks and check_*().
TEST(NamePredicates, AgreeWithTheChecksAtEveryLength) {
  std::mt19937 rng(20261201);
  constexpr std::string_view usual = "abcxyz0189";
  constexpr std::string_view other = ".-_/AZ \x80\xc3";
  std::size_t accepted[3] = {}, refused[3] = {};
  for (std::size_t n = 1; n <= 70; ++n) {
    for (int round = 0; round < 400; ++round) {
      std::string s(n, 'a');
      for (char& c : s) c = usual[rng() % usual.size()];
      const std::size_t sprinkle = rng() % 4;
      for (std::size_t k = 0; k < sprinkle; ++k) s[rng() % n] = other[rng() % other.size()];
      const bool qualified = is_qualified_name(s), value = is_label_value(s),
                 subdomain = is_dns1123_subdomain(s);
      ASSERT_EQ(qualified, detail::qualified_name_errors(s).empty()) << s;
      ASSERT_EQ(value, detail::label_value_errors(s).empty()) << s;
      ASSERT_EQ(subdomain, detail::dns1123_subdomain_errors(s).empty()) << s;
      ASSERT_EQ(qualified, check_qualified_name(s).empty()) << s;
      ASSERT_EQ(value, check_label_value(s).empty()) << s;
      ASSERT_EQ(subdomain, check_dns1123_subdomain(s).empty()) << s;
      (qualified ? accepted : refused)[0]++;
      (value ? accepted : refused)[1]++;
      (subdomain ? accepted : refused)[2]++;
    }
  }
  for (int i = 0; i < 3; ++i) {
    EXPECT_GT(accepted[i], 1000u) << i;
    EXPECT_GT(refused[i], 1000u) << i;
  }
}

TEST(Dns1123Label, Boundaries) {
  EXPECT_TRUE(check_dns1123_label("my-name").empty());
  EXPECT_TRUE(check_dns1123_label(repeat('a', 63)).empty());
  EXPECT_EQ(check_dns1123_label(repeat('a', 64)).size(), 1u);
  EXPECT_FALSE(check_dns1123_label("a.b").empty());
  EXPECT_FALSE(check_dns1123_label("").empty());
  EXPECT_FALSE(check_dns1123_label("-a").empty());
  EXPECT_FALSE(check_dns1123_label("A").empty());
}

// HTTP's OWS is spaces and tabs only: a CR, LF or other white space is part of the value.
TEST(TrimOws, SpacesAndTabsOnly) {
  EXPECT_EQ(trim_ows(" \t\"abc\", W/\"d\" \t"), "\"abc\", W/\"d\"");
  EXPECT_EQ(trim_ows("token"), "token");
  EXPECT_EQ(trim_ows(" \t "), "");
  EXPECT_EQ(trim_ows(""), "");
  EXPECT_EQ(trim_ows("\rtoken\n"), "\rtoken\n");
  EXPECT_EQ(trim_ows("\vx\f"), "\vx\f");
  EXPECT_EQ(trim_ows("\xc2\xa0x"), "\xc2\xa0x");
  EXPECT_EQ(trim_ows("a b"), "a b");
  static_assert(trim_ows("  x ") == "x");
}

TEST(TrimSpace, GoWhiteSpace) {
  EXPECT_EQ(trim_space("  x  "), "x");
  EXPECT_EQ(trim_space("\t\n\v\f\rx\r\n"), "x");
  EXPECT_EQ(trim_space("\xc2\xa0x\xc2\xa0"), "x");          // U+00A0
  EXPECT_EQ(trim_space("\xc2\x85x"), "x");                  // U+0085
  EXPECT_EQ(trim_space("\xe1\x9a\x80x"), "x");              // U+1680
  EXPECT_EQ(trim_space("\xe2\x80\x80x\xe2\x80\x8a"), "x");  // U+2000, U+200A
  EXPECT_EQ(trim_space("\xe2\x80\xa8x\xe2\x80\xa9"), "x");  // U+2028, U+2029
  EXPECT_EQ(trim_space("\xe2\x80\xafx\xe2\x81\x9f"), "x");  // U+202F, U+205F
  EXPECT_EQ(trim_space("\xe3\x80\x80x\xe3\x80\x80"), "x");  // U+3000
  EXPECT_EQ(trim_space("\xe2\x80\x8bx"), "\xe2\x80\x8bx");  // U+200B is not white space
  EXPECT_EQ(trim_space("\xef\xbb\xbfx"), "\xef\xbb\xbfx");  // nor U+FEFF
  EXPECT_EQ(trim_space("\xa0x"), "\xa0x");                  // invalid UTF-8 is kept
  EXPECT_EQ(trim_space("x\xc2"), "x\xc2");
  EXPECT_EQ(trim_space("a b"), "a b");
  EXPECT_TRUE(is_blank(""));
  EXPECT_TRUE(is_blank(" \t\xc2\xa0\xe2\x80\x83"));
  EXPECT_FALSE(is_blank(" x "));
}

struct duration_case {
  std::string input;
  bool ok;
  long long ns;
  std::string formatted;  // Go's Duration.String() of the result
};

class GoDuration : public ::testing::TestWithParam<duration_case> {};

TEST_P(GoDuration, MatchesGo) {
  const auto& c = GetParam();
  const auto d = parse_go_duration(c.input);
  ASSERT_EQ(d.ok(), c.ok) << c.input << " " << (d ? "" : d.error().message);
  if (c.ok) {
    EXPECT_EQ(d->count(), c.ns) << c.input;
    EXPECT_EQ(format_go_duration(*d), c.formatted) << c.input;
  } else {
    EXPECT_EQ(d.error().code, errc::invalid_argument);
    EXPECT_EQ(d.error().message.rfind("time: ", 0), 0u) << d.error().message;
  }
}

INSTANTIATE_TEST_SUITE_P(
    GoTable, GoDuration,
    ::testing::Values(
        duration_case{"0", true, 0LL, "0s"}, duration_case{"+0", true, 0LL, "0s"},
        duration_case{"-0", true, 0LL, "0s"}, duration_case{"", false, 0, ""},
        duration_case{".", false, 0, ""}, duration_case{"1", false, 0, ""},
        duration_case{"1d", false, 0, ""}, duration_case{".s", false, 0, ""},
        duration_case{"1.s", true, 1000000000LL, "1s"},
        duration_case{".5s", true, 500000000LL, "500ms"},
        duration_case{"1h2m3.5s", true, 3723500000000LL, "1h2m3.5s"},
        duration_case{"-1.5h", true, -5400000000000LL, "-1h30m0s"},
        duration_case{"1\xc2\xb5s", true, 1000LL, "1\xc2\xb5s"},  // U+00B5
        duration_case{"1\xce\xbcs", true, 1000LL, "1\xc2\xb5s"},  // U+03BC
        duration_case{"1us", true, 1000LL, "1\xc2\xb5s"},
        duration_case{"9223372036854775807ns", true, 9223372036854775807LL,
                      "2562047h47m16.854775807s"},
        duration_case{"9223372036854775808ns", false, 0, ""},
        duration_case{"-9223372036854775808ns", true, (-9223372036854775807LL - 1),
                      "-2562047h47m16.854775808s"},
        duration_case{"-9223372036854775809ns", false, 0, ""},
        duration_case{"2562047h", true, 9223369200000000000LL, "2562047h0m0s"},
        duration_case{"2562048h", false, 0, ""},
        duration_case{"2562047h47m16.854775807s", true, 9223372036854775807LL,
                      "2562047h47m16.854775807s"},
        duration_case{"2562047h47m16.854775808s", false, 0, ""},
        duration_case{"1.0000000000000000000001s", true, 1000000000LL, "1s"},
        duration_case{"0.3333333333333333333h", true, 1200000000000LL, "20m0s"},
        duration_case{"1.9999999999999999999999s", true, 2000000000LL, "2s"},
        duration_case{"00", false, 0, ""}, duration_case{"0s", true, 0LL, "0s"},
        duration_case{"1h1h", true, 7200000000000LL, "2h0m0s"}, duration_case{"1e3s", false, 0, ""},
        duration_case{"1 s", false, 0, ""}, duration_case{" 1s", false, 0, ""},
        duration_case{"1s ", false, 0, ""}, duration_case{"+5m", true, 300000000000LL, "5m0s"},
        duration_case{"-.5s", true, -500000000LL, "-500ms"}, duration_case{"1..5s", false, 0, ""},
        duration_case{"1.5.5s", false, 0, ""}, duration_case{"0.000000001s", true, 1LL, "1ns"},
        duration_case{"0.0000000001s", true, 0LL, "0s"}, duration_case{"1.5ns", true, 1LL, "1ns"},
        duration_case{"3.7us", true, 3700LL, "3.7\xc2\xb5s"},
        duration_case{"99999999999999999999ns", false, 0, ""},
        duration_case{"1.1h", true, 3960000000000LL, "1h6m0s"},
        duration_case{"0.1h", true, 360000000000LL, "6m0s"},
        duration_case{"12.345678901234567890h", true, 44444444044444LL, "12h20m44.444044444s"},
        duration_case{"1.2.3s", false, 0, ""}, duration_case{"1m-1s", false, 0, ""},
        duration_case{"1S", false, 0, ""}, duration_case{"1H", false, 0, ""},
        duration_case{"10000000000000000000000s", false, 0, ""},
        duration_case{".000000000000000000000000000001h", true, 0LL, "0s"},
        duration_case{"-", false, 0, ""}, duration_case{"+", false, 0, ""},
        duration_case{"0x1s", false, 0, ""}, duration_case{"1ms1", false, 0, ""},
        duration_case{"5m0s", true, 300000000000LL, "5m0s"}));

TEST(GoDuration, ErrorKinds) {
  EXPECT_EQ(parse_go_duration("1").error().message, "time: missing unit in duration \"1\"");
  EXPECT_EQ(parse_go_duration("1d").error().message, "time: unknown unit \"d\" in duration \"1d\"");
  EXPECT_EQ(parse_go_duration("2562048h").error().message, "time: invalid duration \"2562048h\"");
  EXPECT_TRUE(parse_go_duration("1d").failed_with(errc::invalid_argument));
  EXPECT_TRUE(parse_go_duration("1s").ok());
}

TEST(GoDurationFormat, SubSecondUnits) {
  using std::chrono::nanoseconds;
  EXPECT_EQ(format_go_duration(nanoseconds{0}), "0s");
  EXPECT_EQ(format_go_duration(nanoseconds{1}), "1ns");
  EXPECT_EQ(format_go_duration(nanoseconds{999}), "999ns");
  EXPECT_EQ(format_go_duration(nanoseconds{1'100}), "1.1\xc2\xb5s");
  EXPECT_EQ(format_go_duration(nanoseconds{1'500'000}), "1.5ms");
  EXPECT_EQ(format_go_duration(nanoseconds{1'000'000'000}), "1s");
  EXPECT_EQ(format_go_duration(nanoseconds{90'000'000'000}), "1m30s");
  EXPECT_EQ(format_go_duration(nanoseconds{-1}), "-1ns");
  EXPECT_EQ(format_go_duration(nanoseconds{3'600'000'000'001}), "1h0m0.000000001s");
}

struct url_case {
  std::string input;
  bool ok = true;
  std::string host, port;
  bool user = false;
  std::string fragment, query, path;
};

url_case bad(std::string input) {
  url_case c;
  c.input = std::move(input);
  c.ok = false;
  return c;
}

class GoUrl : public ::testing::TestWithParam<url_case> {};

TEST_P(GoUrl, MatchesGo) {
  const auto& c = GetParam();
  const auto u = parse_url(c.input);
  ASSERT_EQ(u.ok(), c.ok) << c.input << " " << (u ? "" : u.error().message);
  if (!c.ok) {
    EXPECT_EQ(u.error().code, errc::invalid_argument);
    EXPECT_FALSE(u.error().message.empty());
    return;
  }
  EXPECT_EQ(u->host, c.host) << c.input;
  EXPECT_EQ(u->port, c.port) << c.input;
  EXPECT_EQ(u->has_user_info, c.user) << c.input;
  EXPECT_EQ(u->fragment, c.fragment) << c.input;
  EXPECT_EQ(u->raw_query, c.query) << c.input;
  EXPECT_EQ(u->path, c.path) << c.input;
}

INSTANTIATE_TEST_SUITE_P(
    GoTable, GoUrl,
    ::testing::Values(
        url_case{"https://@x", true, "x", "", true, "", "", ""},
        url_case{"https://x#", true, "x", "", false, "", "", ""},
        url_case{"https://x#f", true, "x", "", false, "f", "", ""},
        url_case{"HTTPS://x", true, "x", "", false, "", "", ""},
        url_case{"https://:443/x", true, "", "443", false, "", "", "/x"},
        url_case{"http://", true, "", "", false, "", "", ""},
        url_case{"/x", true, "", "", false, "", "", "/x"},
        url_case{"x", true, "", "", false, "", "", "x"},
        url_case{"https://x", true, "x", "", false, "", "", ""},
        url_case{"https://[::1]:8443/p?q=1", true, "::1", "8443", false, "", "q=1", "/p"},
        bad("https://[::1"), bad("https://[1.2.3.4]/"), bad("https://x y/"),
        url_case{"https://x/a b", true, "x", "", false, "", "", "/a b"}, bad("https://x\n/"),
        bad("https://x\x7f/"), bad("https://x%41/"),
        url_case{"https://x%c3%a9/", true, "x\xc3\xa9", "", false, "", "", "/"},
        bad("https://x%zz/"), bad("https://x/%zz"),
        url_case{"https://u:p@x/", true, "x", "", true, "", "", "/"}, bad("https://x:1:2/"),
        bad("https://x:abc/"), url_case{"https:x", true, "", "", false, "", "", ""},
        url_case{"https:///x", true, "", "", false, "", "", "/x"},
        url_case{"https://x?", true, "x", "", false, "", "", ""},
        url_case{"https://[fe80::1%25en0]:1/", true, "fe80::1%en0", "1", false, "", "", "/"},
        bad("https://[fe80::1%25]/"), bad("https://a[b]/"),
        url_case{"https://x:/", true, "x", "", false, "", "", "/"}, bad("https://x#a%zz"),
        url_case{"https://\xc3\xbc.example/", true, "\xc3\xbc.example", "", false, "", "", "/"},
        bad("https://x^y/"),
        url_case{"https://[::ffff:1.2.3.4]/", true, "::ffff:1.2.3.4", "", false, "", "", "/"},
        bad("https://[1:2:3:4:5:6:7::8]/"), bad("https://[1:2:3:4:5:6:7:8:9]/"),
        url_case{"https://[::]/", true, "::", "", false, "", "", "/"}, bad("https://[1::2::3]/"),
        bad("https://[01.2.3.4]/"), bad("https://[::1.2.3.04]/"), bad("://x"),
        url_case{"a:b/c:d", true, "", "", false, "", "", ""},
        url_case{"ab/c:d", true, "", "", false, "", "", "ab/c:d"}));

TEST(GoUrl, SchemeKeptAsWritten) {
  const auto u = parse_url("HTTPS://x/");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->scheme, "HTTPS");
}

}  // namespace
}  // namespace topogate::core

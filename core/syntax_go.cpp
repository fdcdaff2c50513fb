// Go's strings.TrimSpace, time.ParseDuration and time.Duration.String, with the results and
// the error messages of the Go consumer.

#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

#include "syntax.hpp"
#include "syntax_internal.hpp"

namespace topogate::core {

// ---------------------------------------------------------------------------------------
// strings.TrimSpace

namespace {

// Length of the Unicode white-space character at the start of s (0 if none). Invalid
// UTF-8 is never white space, as Go decodes it to U+FFFD.
std::size_t leading_space_len(std::string_view s) noexcept {
  if (s.empty()) return 0;
  const auto b0 = static_cast<unsigned char>(s[0]);
  if (b0 == ' ' || (b0 >= '\t' && b0 <= '\r')) return 1;
  if (b0 == 0xc2 && s.size() >= 2) {
    const auto b1 = static_cast<unsigned char>(s[1]);
    if (b1 == 0x85 || b1 == 0xa0) return 2;  // U+0085, U+00A0
    return 0;
  }
  if (s.size() < 3) return 0;
  const auto b1 = static_cast<unsigned char>(s[1]);
  const auto b2 = static_cast<unsigned char>(s[2]);
  if (b0 == 0xe1 && b1 == 0x9a && b2 == 0x80) return 3;  // U+1680
  if (b0 == 0xe2 && b1 == 0x80 &&
      ((b2 >= 0x80 && b2 <= 0x8a) || b2 == 0xa8 || b2 == 0xa9 || b2 == 0xaf))
    return 3;                                            // U+2000..U+200A, U+2028, U+2029, U+202F
  if (b0 == 0xe2 && b1 == 0x81 && b2 == 0x9f) return 3;  // U+205F
  if (b0 == 0xe3 && b1 == 0x80 && b2 == 0x80) return 3;  // U+3000
  return 0;
}

// Same, for the character that ends s.
std::size_t trailing_space_len(std::string_view s) noexcept {
  if (s.empty()) return 0;
  const auto last = static_cast<unsigned char>(s.back());
  if (last < 0x80) return (last == ' ' || (last >= '\t' && last <= '\r')) ? 1 : 0;
  if (s.size() >= 2 && leading_space_len(s.substr(s.size() - 2)) == 2) return 2;
  if (s.size() >= 3 && leading_space_len(s.substr(s.size() - 3)) == 3) return 3;
  return 0;
}

}  // namespace

std::string_view trim_space(std::string_view s) noexcept {
  while (const std::size_t n = leading_space_len(s)) s.remove_prefix(n);
  while (const std::size_t n = trailing_space_len(s)) s.remove_suffix(n);
  return s;
}

// ---------------------------------------------------------------------------------------
// time.ParseDuration / Duration.String

namespace detail {

// Go's time package quotes the input in its errors.
std::string go_quote(std::string_view s) {
  std::string out = "\"";
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(ch);
    } else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out.push_back(ch);
    }
  }
  out.push_back('"');
  return out;
}

}  // namespace detail

namespace {

using detail::go_quote;

constexpr std::uint64_t two_63 = std::uint64_t{1} << 63;

std::uint64_t unit_ns(std::string_view u) noexcept {
  if (u == "ns") return 1;
  // "us", "µs" (U+00B5 micro sign) and "μs" (U+03BC Greek mu) are all microseconds in Go.
  if (u == "us" || u == "\xc2\xb5s" || u == "\xce\xbcs") return 1'000;
  if (u == "ms") return 1'000'000;
  if (u == "s") return 1'000'000'000;
  if (u == "m") return 60'000'000'000;
  if (u == "h") return 3'600'000'000'000;
  return 0;
}

constexpr bool is_digit(char c) noexcept { return c >= '0' && c <= '9'; }

}  // namespace

result<std::chrono::nanoseconds> parse_go_duration(std::string_view s) {
  const std::string_view orig = s;
  auto invalid = [&](std::string_view what) {
    return fail(errc::invalid_argument, "time: " + std::string(what) + " " + go_quote(orig));
  };
  bool neg = false;
  if (!s.empty() && (s[0] == '-' || s[0] == '+')) {
    neg = s[0] == '-';
    s.remove_prefix(1);
  }
  // Go accepts a bare "0" (with an optional sign) as the one unit-less duration.
  if (s == "0") return std::chrono::nanoseconds{0};
  if (s.empty()) return invalid("invalid duration");

  std::uint64_t d = 0;
  while (!s.empty()) {
    if (!(s[0] == '.' || is_digit(s[0]))) return invalid("invalid duration");

    // Integer part; overflow past 2^63 is an error, as in Go's leadingInt.
    std::uint64_t v = 0;
    std::size_t i = 0;
    for (; i < s.size() && is_digit(s[i]); ++i) {
      if (v > two_63 / 10) return invalid("invalid duration");
      v = v * 10 + static_cast<std::uint64_t>(s[i] - '0');
      if (v > two_63) return invalid("invalid duration");
    }
    const bool pre = i > 0;
    s.remove_prefix(i);

    // Fraction: digits past what fits are dropped (not rounded), and the scale is
    // built by repeated multiplication, so the float arithmetic below equals Go's.
    std::uint64_t f = 0;
    double scale = 1;
    bool post = false;
    if (!s.empty() && s[0] == '.') {
      s.remove_prefix(1);
      bool overflow = false;
      std::size_t j = 0;
      for (; j < s.size() && is_digit(s[j]); ++j) {
        if (overflow) continue;
        if (f > (two_63 - 1) / 10) {
          overflow = true;
          continue;
        }
        const std::uint64_t y = f * 10 + static_cast<std::uint64_t>(s[j] - '0');
        if (y > two_63) {
          overflow = true;
          continue;
        }
        f = y;
        scale *= 10;
      }
      post = j > 0;
      s.remove_prefix(j);
    }
    if (!pre && !post) return invalid("invalid duration");  // ".s", "-.s"

    std::size_t u = 0;
    while (u < s.size() && s[u] != '.' && !is_digit(s[u])) ++u;
    if (u == 0) return invalid("missing unit in duration");
    const std::string_view unit_text = s.substr(0, u);
    s.remove_prefix(u);
    const std::uint64_t unit = unit_ns(unit_text);
    if (unit == 0) return invalid("unknown unit " + go_quote(unit_text) + " in duration");

    if (v > two_63 / unit) return invalid("invalid duration");
    v *= unit;
    if (f > 0) {
      // Nanosecond-exact for fractions of an hour in float64, truncated like Go's uint64().
      v += static_cast<std::uint64_t>(static_cast<double>(f) * (static_cast<double>(unit) / scale));
      if (v > two_63) return invalid("invalid duration");
    }
    d += v;
    if (d > two_63) return invalid("invalid duration");
  }
  if (neg) {
    // d <= 2^63 here; -2^63 is representable.
    if (d == two_63) return std::chrono::nanoseconds{INT64_MIN};
    return std::chrono::nanoseconds{-static_cast<std::int64_t>(d)};
  }
  if (d > two_63 - 1) return invalid("invalid duration");
  return std::chrono::nanoseconds{static_cast<std::int64_t>(d)};
}

namespace {

// Writes the fraction of v / 10^prec, without trailing zeros, into the end of buf; returns
// the new start and v / 10^prec.
std::size_t fmt_frac(char* buf, std::size_t w, std::uint64_t& v, int prec) {
  bool print = false;
  for (int i = 0; i < prec; ++i) {
    const auto digit = static_cast<char>(v % 10);
    print = print || digit != 0;
    if (print) buf[--w] = static_cast<char>('0' + digit);
    v /= 10;
  }
  if (print) buf[--w] = '.';
  return w;
}

std::size_t fmt_int(char* buf, std::size_t w, std::uint64_t v) {
  if (v == 0) {
    buf[--w] = '0';
    return w;
  }
  while (v > 0) {
    buf[--w] = static_cast<char>('0' + v % 10);
    v /= 10;
  }
  return w;
}

}  // namespace

std::string format_go_duration(std::chrono::nanoseconds d) {
  std::array<char, 40> arr{};
  char* buf = arr.data();
  std::size_t w = arr.size();
  const std::int64_t n = d.count();
  const bool neg = n < 0;
  std::uint64_t u = neg ? (~static_cast<std::uint64_t>(n) + 1) : static_cast<std::uint64_t>(n);

  if (u < 1'000'000'000) {
    // Below one second Go switches to the largest fitting sub-second unit ("1.5ms").
    int prec = 0;
    buf[--w] = 's';
    if (u == 0) {
      buf[--w] = '0';
      return std::string(buf + w, arr.size() - w);
    }
    if (u < 1'000) {
      buf[--w] = 'n';
    } else if (u < 1'000'000) {
      prec = 3;
      buf[--w] = '\xb5';  // U+00B5 micro sign, as Go prints it
      buf[--w] = '\xc2';
    } else {
      prec = 6;
      buf[--w] = 'm';
    }
    w = fmt_frac(buf, w, u, prec);
    w = fmt_int(buf, w, u);
  } else {
    buf[--w] = 's';
    w = fmt_frac(buf, w, u, 9);
    w = fmt_int(buf, w, u % 60);
    u /= 60;
    if (u > 0) {
      buf[--w] = 'm';
      w = fmt_int(buf, w, u % 60);
      u /= 60;
      // Go stops at hours: days have different lengths.
      if (u > 0) {
        buf[--w] = 'h';
        w = fmt_int(buf, w, u);
      }
    }
  }
  if (neg) buf[--w] = '-';
  return std::string(buf + w, arr.size() - w);
}

}  // namespace topogate::core

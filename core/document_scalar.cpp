// Scalars: yaml.v3's resolve() (the tag a scalar gets: null, bool, int in every base Go and
// yaml.v3 read, float, timestamp, or str), !!binary's base64, and the JSON number grammar.
// The text of a scalar is always kept as written; only its tag is decided here.

#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "document_internal.hpp"

namespace topogate::core::detail {
namespace {

// Go's strconv.ParseInt(s, 0, 64) or ParseUint(s, 0, 64) succeeding (yaml.v3 tries both).
bool go_parses_as_int(std::string_view s) noexcept {
  if (s.empty()) return false;
  bool neg = false, sign = false;
  if (s[0] == '+' || s[0] == '-') {
    neg = s[0] == '-';
    sign = true;
    s.remove_prefix(1);
    if (s.empty()) return false;
  }
  unsigned base = 10;
  if (s[0] == '0') {
    const char p = s.size() >= 3 ? static_cast<char>(s[1] | 0x20) : '\0';
    if (p == 'b') {
      base = 2;
      s.remove_prefix(2);
    } else if (p == 'o') {
      base = 8;
      s.remove_prefix(2);
    } else if (p == 'x') {
      base = 16;
      s.remove_prefix(2);
    } else {
      base = 8;
      s.remove_prefix(1);
    }
  }
  std::uint64_t v = 0;
  for (char c : s) {
    unsigned d;
    if (c >= '0' && c <= '9')
      d = static_cast<unsigned>(c - '0');
    else if ((c | 0x20) >= 'a' && (c | 0x20) <= 'f')
      d = static_cast<unsigned>((c | 0x20) - 'a' + 10);
    else
      return false;
    if (d >= base) return false;
    if (__builtin_mul_overflow(v, base, &v) || __builtin_add_overflow(v, d, &v)) return false;
  }
  constexpr std::uint64_t i64_max = 0x7fffffffffffffffULL;
  if (neg) return v <= i64_max + 1;
  if (sign) return v <= i64_max;  // ParseUint takes no sign
  return true;
}

// `^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$` and finite (Go's ParseFloat
// reports a range error, and yaml.v3 then falls back to a string, for an overflow).
bool yaml_style_float(std::string_view s) {
  std::size_t i = 0;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
  if (i < s.size() && s[i] == '.') {
    ++i;
    const std::size_t start = i;
    while (i < s.size() && is_digit(s[i])) ++i;
    if (i == start) return false;
  } else {
    const std::size_t start = i;
    while (i < s.size() && is_digit(s[i])) ++i;
    if (i == start) return false;
    if (i < s.size() && s[i] == '.') {
      ++i;
      while (i < s.size() && is_digit(s[i])) ++i;
    }
  }
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
    const std::size_t start = i;
    while (i < s.size() && is_digit(s[i])) ++i;
    if (i == start) return false;
  }
  if (i != s.size()) return false;
  const std::string copy(s);
  errno = 0;
  const double v = std::strtod(copy.c_str(), nullptr);
  return !std::isinf(v);
}

int days_in(int month, int year) {
  static constexpr int days[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  if (month == 2 && ((year % 4 == 0 && year % 100 != 0) || year % 400 == 0)) return 29;
  return days[month - 1];
}

// One or two digits, like Go's time.Parse for the layout elements 1, 2, 15, 4 and 5.
bool take_num(std::string_view& s, int& out, bool fixed2) {
  if (s.empty() || !is_digit(s[0])) return false;
  out = s[0] - '0';
  std::size_t n = 1;
  if (s.size() > 1 && is_digit(s[1])) {
    out = out * 10 + (s[1] - '0');
    n = 2;
  } else if (fixed2) {
    return false;
  }
  s.remove_prefix(n);
  return true;
}

// yaml.v3's parseTimestamp: the layouts 2006-1-2T15:4:5.999999999Z07:00 (also with `t`),
// "2006-1-2 15:4:5.999999999" and 2006-1-2, with Go's range checks.
bool is_timestamp(std::string_view s) {
  if (s.size() < 5) return false;
  for (int i = 0; i < 4; ++i)
    if (!is_digit(s[static_cast<std::size_t>(i)])) return false;
  if (s[4] != '-') return false;
  const int year = (s[0] - '0') * 1000 + (s[1] - '0') * 100 + (s[2] - '0') * 10 + (s[3] - '0');
  s.remove_prefix(5);
  int month = 0, day = 0;
  if (!take_num(s, month, false) || month < 1 || month > 12) return false;
  if (s.empty() || s[0] != '-') return false;
  s.remove_prefix(1);
  if (!take_num(s, day, false)) return false;
  if (day < 1 || day > days_in(month, year)) return false;
  if (s.empty()) return true;
  const char sep = s[0];
  if (sep != 'T' && sep != 't' && sep != ' ') return false;
  s.remove_prefix(1);
  int hour = 0, minute = 0, second = 0;
  if (!take_num(s, hour, false) || hour > 23) return false;
  if (s.empty() || s[0] != ':') return false;
  s.remove_prefix(1);
  if (!take_num(s, minute, false) || minute > 59) return false;
  if (s.empty() || s[0] != ':') return false;
  s.remove_prefix(1);
  if (!take_num(s, second, false) || second > 59) return false;
  if (s.size() >= 2 && (s[0] == '.' || s[0] == ',') && is_digit(s[1])) {
    s.remove_prefix(1);
    while (!s.empty() && is_digit(s[0])) s.remove_prefix(1);
  }
  if (sep == ' ') return s.empty();
  if (s == "Z") return true;
  if (s.size() != 6 || (s[0] != '+' && s[0] != '-') || s[3] != ':') return false;
  std::string_view hh = s.substr(1, 2), mm = s.substr(4, 2);
  int h = 0, m = 0;
  if (!take_num(hh, h, true) || !take_num(mm, m, true)) return false;
  return h <= 24 && m <= 60;
}

}  // namespace

resolved resolve_text(std::string_view in, bool try_timestamp) {
  char hint = 'N';
  if (!in.empty()) {
    const char c = in[0];
    if (c == '+' || c == '-')
      hint = 'S';
    else if (is_digit(c))
      hint = 'D';
    else if (c == '.')
      hint = '.';
    else if (std::string_view("yYnNtTfFoO~").find(c) != std::string_view::npos)
      hint = 'M';
    else
      return resolved::str;
  }
  if (in.empty() || in == "~" || in == "null" || in == "Null" || in == "NULL")
    return resolved::null;
  if (in == "true" || in == "True" || in == "TRUE" || in == "false" || in == "False" ||
      in == "FALSE")
    return resolved::bool_;
  if (in == ".nan" || in == ".NaN" || in == ".NAN" || in == ".inf" || in == ".Inf" ||
      in == ".INF" || in == "+.inf" || in == "+.Inf" || in == "+.INF" || in == "-.inf" ||
      in == "-.Inf" || in == "-.INF")
    return resolved::float_;
  switch (hint) {
    case 'M':
      return resolved::str;
    case '.':
      return yaml_style_float(in) ? resolved::float_ : resolved::str;
    default:
      break;
  }
  if (try_timestamp && is_timestamp(in)) return resolved::timestamp;
  std::string plain;
  plain.reserve(in.size());
  for (char c : in)
    if (c != '_') plain.push_back(c);
  if (go_parses_as_int(plain)) return resolved::int_;
  if (yaml_style_float(plain)) return resolved::float_;
  // yaml.v3's own binary and octal spellings, tried after Go's base-prefix parsing.
  std::string_view p = plain;
  auto digits_in_base = [](std::string_view d, unsigned base, bool allow_sign) {
    if (allow_sign && !d.empty() && (d[0] == '+' || d[0] == '-')) d.remove_prefix(1);
    if (d.empty() || d.size() > 64) return false;
    for (char c : d)
      if (c < '0' || static_cast<unsigned>(c - '0') >= base) return false;
    return true;
  };
  if (p.substr(0, 2) == "0b")
    return digits_in_base(p.substr(2), 2, true) ? resolved::int_ : resolved::str;
  if (p.substr(0, 3) == "-0b")
    return digits_in_base(p.substr(3), 2, false) ? resolved::int_ : resolved::str;
  if (p.substr(0, 2) == "0o")
    return digits_in_base(p.substr(2), 8, true) ? resolved::int_ : resolved::str;
  if (p.substr(0, 3) == "-0o")
    return digits_in_base(p.substr(3), 8, false) ? resolved::int_ : resolved::str;
  return resolved::str;
}

doc_node::scalar_tag to_scalar_tag(resolved r) {
  switch (r) {
    case resolved::int_:
      return doc_node::scalar_tag::int_;
    case resolved::float_:
      return doc_node::scalar_tag::float_;
    case resolved::bool_:
      return doc_node::scalar_tag::bool_;
    case resolved::timestamp:
      return doc_node::scalar_tag::timestamp;
    case resolved::null:
    case resolved::str:
      return doc_node::scalar_tag::str;
  }
  return doc_node::scalar_tag::str;
}

std::string_view short_name(resolved r) {
  switch (r) {
    case resolved::str:
      return "!!str";
    case resolved::null:
      return "!!null";
    case resolved::bool_:
      return "!!bool";
    case resolved::int_:
      return "!!int";
    case resolved::float_:
      return "!!float";
    case resolved::timestamp:
      return "!!timestamp";
  }
  return "!!str";
}

// Go's base64.StdEncoding.DecodeString: CR and LF are skipped, padding is required.
bool decode_base64(std::string_view in, std::string& out) {
  auto value_of = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
  };
  out.clear();
  int quad[4];
  int n = 0, pad = 0;
  bool done = false;
  for (char c : in) {
    if (c == '\r' || c == '\n') continue;
    if (done) return false;
    if (c == '=') {
      if (n < 2) return false;
      quad[n++] = 0;
      ++pad;
    } else {
      if (pad) return false;
      const int v = value_of(c);
      if (v < 0) return false;
      quad[n++] = v;
    }
    if (n == 4) {
      const std::uint32_t bits = (static_cast<std::uint32_t>(quad[0]) << 18) |
                                 (static_cast<std::uint32_t>(quad[1]) << 12) |
                                 (static_cast<std::uint32_t>(quad[2]) << 6) |
                                 static_cast<std::uint32_t>(quad[3]);
      out.push_back(static_cast<char>((bits >> 16) & 0xff));
      if (pad < 2) out.push_back(static_cast<char>((bits >> 8) & 0xff));
      if (pad < 1) out.push_back(static_cast<char>(bits & 0xff));
      if (pad) done = true;
      n = 0;
    }
  }
  return n == 0;
}

doc_node::scalar_tag resolve_plain(std::string_view text, bool* is_null) noexcept {
  resolved r = resolved::str;
  try {
    r = resolve_text(text, true);
  } catch (...) {  // std::string allocation only
    r = resolved::str;
  }
  if (is_null) *is_null = r == resolved::null;
  return to_scalar_tag(r);
}

bool is_json_number(std::string_view t) noexcept {
  std::size_t i = 0;
  if (i < t.size() && t[i] == '-') ++i;
  if (i >= t.size()) return false;
  if (t[i] == '0') {
    ++i;
  } else if (t[i] >= '1' && t[i] <= '9') {
    while (i < t.size() && is_digit(t[i])) ++i;
  } else {
    return false;
  }
  if (i < t.size() && t[i] == '.') {
    ++i;
    const std::size_t s = i;
    while (i < t.size() && is_digit(t[i])) ++i;
    if (i == s) return false;
  }
  if (i < t.size() && (t[i] == 'e' || t[i] == 'E')) {
    ++i;
    if (i < t.size() && (t[i] == '+' || t[i] == '-')) ++i;
    const std::size_t s = i;
    while (i < t.size() && is_digit(t[i])) ++i;
    if (i == s) return false;
  }
  return i == t.size();
}

}  // namespace topogate::core::detail

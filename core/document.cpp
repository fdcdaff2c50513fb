#include "document.hpp"

#include <emmintrin.h>
#include <immintrin.h>
#include <simdjson.h>
#include <yaml-cpp/depthguard.h>
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/exceptions.h>
#include <yaml-cpp/mark.h>
#include <yaml-cpp/parser.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <istream>
#include <new>
#include <streambuf>

#include "document_internal.hpp"

namespace topogate::core {

doc_node::doc_node() noexcept = default;
doc_node::doc_node(const doc_node&) = default;
doc_node::doc_node(doc_node&&) noexcept = default;
doc_node& doc_node::operator=(const doc_node&) = default;
doc_node& doc_node::operator=(doc_node&&) noexcept = default;
doc_node::~doc_node() = default;

const doc_node* doc_node::find(std::string_view key) const noexcept {
  if (k != kind::mapping) return nullptr;
  // Validators look up a handful of short keys in every object: compared inline.
  for (const auto& [name, value] : map)
    if (detail::same(name, key)) return &value;
  return nullptr;
}

std::string_view doc_node::kind_name() const noexcept {
  switch (k) {
    case kind::null:
      return "!!null";
    case kind::sequence:
      return "!!seq";
    case kind::mapping:
      return "!!map";
    case kind::scalar:
      break;
  }
  switch (tag) {
    case scalar_tag::str:
      return "!!str";
    case scalar_tag::int_:
      return "!!int";
    case scalar_tag::float_:
      return "!!float";
    case scalar_tag::bool_:
      return "!!bool";
    case scalar_tag::timestamp:
      return "!!timestamp";
    case scalar_tag::binary:
      return "!!binary";
    case scalar_tag::other:
      return "!!str";
  }
  return "!!str";
}

namespace detail {
namespace {

// A CR not followed by LF: a line break to yaml.v3, as LF and CR LF are.
bool lone_cr_at(std::string_view text, std::size_t i) noexcept {
  return text[i] == '\r' && (i + 1 == text.size() || text[i + 1] != '\n');
}

// yaml.v3's line number (1-based) of the byte at `offset`: LF, CR LF and a lone CR each end
// a line.
std::size_t line_of(std::string_view text, std::size_t offset) {
  std::size_t line = 1;
  for (std::size_t i = 0; i < std::min(offset, text.size()); ++i)
    if (text[i] == '\n' || lone_cr_at(text, i)) ++line;
  return line;
}

// `text` with every lone CR turned into LF, in `out`; false (and `out` untouched) when it
// has none.
bool lone_crs_as_lf(std::string_view text, std::string& out) {
  for (std::size_t i = text.find('\r'); i != std::string_view::npos; i = text.find('\r', i + 1)) {
    if (!lone_cr_at(text, i)) continue;
    out.assign(text);
    for (std::size_t j = i; j < out.size(); ++j)
      if (lone_cr_at(out, j)) out[j] = '\n';
    return true;
  }
  return false;
}

std::string at_line(std::size_t line, std::string_view msg) {
  std::string out = "line " + std::to_string(line) + ": ";
  out += msg;
  return out;
}

bool is_digit(char c) noexcept { return c >= '0' && c <= '9'; }

// ---------------------------------------------------------------------------------------
// yaml.v3 resolve(): the tag a scalar gets. The text itself is always kept as written.

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

enum class resolved : std::uint8_t { str, null, bool_, int_, float_, timestamp };

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

}  // namespace

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

// ---------------------------------------------------------------------------------------
// Character-level checks yaml.v3 makes before and while scanning.

namespace {

bool cpu_has_avx2();

// check_yaml_characters' test of plain bytes (printable ASCII, tab, LF, CR) 32 at a time,
// where the CPU has AVX2 (chosen at run time); returns the end of the plain run from `i`,
// rounded down to a block.
__attribute__((target("avx2"))) std::size_t avx2_printable_run(const unsigned char* p,
                                                               std::size_t n, std::size_t i) {
  const __m256i c20 = _mm256_set1_epi8(0x20), c7f = _mm256_set1_epi8(0x7f),
                nl = _mm256_set1_epi8('\n'), cr = _mm256_set1_epi8('\r'),
                tab = _mm256_set1_epi8('\t');
  for (; i + 32 <= n; i += 32) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i));
    // Signed compare: bytes >= 0x80 are negative, so they count as "below 0x20" too.
    const __m256i low = _mm256_cmpgt_epi8(c20, v);
    const __m256i ok_ws = _mm256_or_si256(
        _mm256_or_si256(_mm256_cmpeq_epi8(v, nl), _mm256_cmpeq_epi8(v, cr)),
        _mm256_cmpeq_epi8(v, tab));
    const __m256i bad =
        _mm256_or_si256(_mm256_andnot_si256(ok_ws, low), _mm256_cmpeq_epi8(v, c7f));
    if (_mm256_movemask_epi8(bad) != 0) break;
  }
  return i;
}

}  // namespace

std::string check_yaml_characters(std::string_view text, bool* has_line_separators) {
  bool separators = false;
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  const std::size_t n = text.size();
  std::size_t i = 0;
  const __m128i c20 = _mm_set1_epi8(0x20), c7f = _mm_set1_epi8(0x7f), nl = _mm_set1_epi8('\n'),
                cr = _mm_set1_epi8('\r'), tab = _mm_set1_epi8('\t');
  auto fail = [&](std::size_t at, std::string_view what) {
    if (has_line_separators) *has_line_separators = separators;
    return at_line(line_of(text, at), what);
  };
  const bool avx2 = cpu_has_avx2();
  while (i < n) {
    if (avx2 && i + 32 <= n) {
      if (const std::size_t run = avx2_printable_run(p, n, i); run != i) {
        i = run;
        continue;
      }
    }
    if (i + 16 <= n) {
      const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + i));
      // Signed compare: bytes >= 0x80 are negative, so they count as "below 0x20" too.
      const __m128i low = _mm_cmplt_epi8(v, c20);
      const __m128i ok_ws = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, nl), _mm_cmpeq_epi8(v, cr)),
                                         _mm_cmpeq_epi8(v, tab));
      const __m128i bad = _mm_or_si128(_mm_andnot_si128(ok_ws, low), _mm_cmpeq_epi8(v, c7f));
      if (_mm_movemask_epi8(bad) == 0) {
        i += 16;
        continue;
      }
    }
    const unsigned char c = p[i];
    if (c < 0x80) {
      if ((c < 0x20 && c != '\t' && c != '\n' && c != '\r') || c == 0x7f)
        return fail(i, "control characters are not allowed");
      ++i;
      continue;
    }
    std::size_t len = 0;
    std::uint32_t cp = 0;
    if (c >= 0xc2 && c <= 0xdf) {
      len = 2;
      cp = c & 0x1fu;
    } else if (c >= 0xe0 && c <= 0xef) {
      len = 3;
      cp = c & 0x0fu;
    } else if (c >= 0xf0 && c <= 0xf4) {
      len = 4;
      cp = c & 0x07u;
    } else
      return fail(i, "invalid leading UTF-8 octet");
    if (i + len > n) return fail(i, "incomplete UTF-8 octet sequence");
    for (std::size_t j = 1; j < len; ++j) {
      const unsigned char cc = p[i + j];
      if ((cc & 0xc0) != 0x80) return fail(i, "invalid trailing UTF-8 octet");
      cp = (cp << 6) | (cc & 0x3fu);
    }
    if ((len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000))
      return fail(i, "invalid length of a UTF-8 sequence");
    if ((cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff)
      return fail(i, "invalid Unicode character");
    const bool printable = cp == 0x85 || (cp >= 0xa0 && cp <= 0xd7ff) ||
                           (cp >= 0xe000 && cp <= 0xfffd) || cp >= 0x10000;
    if (!printable) return fail(i, "control characters are not allowed");
    if (cp == 0x85 || cp == 0x2028 || cp == 0x2029) separators = true;
    i += len;
  }
  if (has_line_separators) *has_line_separators = separators;
  return {};
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

namespace {

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if ((c | 0x20) >= 'a' && (c | 0x20) <= 'f') return (c | 0x20) - 'a' + 10;
  return -1;
}

// Checks the escapes of one double-quoted scalar starting at `open` (the quote). yaml.v3
// knows 0 a b t TAB n v f r e SPACE " ' \ N _ L P x u U and escaped line breaks; `\/` (JSON)
// is unknown to it, and \x \u \U may not name a surrogate or pass U+10FFFF.
std::string check_double_quoted(std::string_view text, std::size_t open) {
  std::size_t i = open + 1;
  while (i < text.size()) {
    const char c = text[i];
    if (c == '"') return {};
    if (c != '\\') {
      ++i;
      continue;
    }
    if (i + 1 >= text.size()) break;
    const char e = text[i + 1];
    int digits = 0;
    switch (e) {
      case '0':
      case 'a':
      case 'b':
      case 't':
      case '\t':
      case 'n':
      case 'v':
      case 'f':
      case 'r':
      case 'e':
      case ' ':
      case '"':
      case '\'':
      case '\\':
      case 'N':
      case '_':
      case 'L':
      case 'P':
      case '\n':
      case '\r':
        i += 2;
        continue;
      case 'x':
        digits = 2;
        break;
      case 'u':
        digits = 4;
        break;
      case 'U':
        digits = 8;
        break;
      default:
        if (static_cast<unsigned char>(e) >= 0x80) {
          // U+0085, U+2028, U+2029 are line breaks for yaml.v3; anything else is unknown.
          const std::string_view rest = text.substr(i + 1, 3);
          if (rest.substr(0, 2) == "\xc2\x85" || rest == "\xe2\x80\xa8" || rest == "\xe2\x80\xa9") {
            i += 1 + (rest[0] == '\xc2' ? 2 : 3);
            continue;
          }
        }
        return at_line(line_of(text, i), "found unknown escape character");
    }
    std::uint32_t cp = 0;
    for (int d = 0; d < digits; ++d) {
      const std::size_t at = i + 2 + static_cast<std::size_t>(d);
      const int v = at < text.size() ? hex_value(text[at]) : -1;
      if (v < 0) return at_line(line_of(text, i), "did not find expected hexdecimal number");
      cp = (cp << 4) | static_cast<std::uint32_t>(v);
    }
    if ((cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff)
      return at_line(line_of(text, i), "found invalid Unicode character escape code");
    i += 2 + static_cast<std::size_t>(digits);
  }
  // No closing quote: yaml-cpp takes a scalar cut off by the end of the text (after a line
  // break) as it stands; yaml.v3 does not.
  return at_line(line_of(text, text.size()), "found unexpected end of stream");
}

// As check_double_quoted, for a single-quoted scalar (where '' is a quote): only its end.
std::string check_single_quoted(std::string_view text, std::size_t open) {
  for (std::size_t i = open + 1; i < text.size(); ++i) {
    if (text[i] != '\'') continue;
    if (i + 1 < text.size() && text[i + 1] == '\'') {
      ++i;
      continue;
    }
    return {};
  }
  return at_line(line_of(text, text.size()), "found unexpected end of stream");
}

}  // namespace

std::string check_json_as_yaml(std::string_view text) {
  // Before the first token yaml.v3 is in block context, where a tab cannot start a token.
  for (char c : text) {
    if (c == ' ' || c == '\n' || c == '\r') continue;
    if (c == '\t') return "line 1: found character that cannot start any token";
    break;
  }
  std::size_t i = 0;
  while ((i = text.find('\\', i)) != std::string_view::npos) {
    // In valid JSON a backslash only occurs inside a string; find that string's opening
    // quote is not needed: the escape itself is what yaml.v3 judges.
    if (i + 1 >= text.size()) break;
    const char e = text[i + 1];
    if (e == '/') return at_line(line_of(text, i), "found unknown escape character");
    if (e == 'u') {
      std::uint32_t cp = 0;
      for (std::size_t d = 0; d < 4; ++d) {
        const int v = i + 2 + d < text.size() ? hex_value(text[i + 2 + d]) : -1;
        if (v < 0) return at_line(line_of(text, i), "did not find expected hexdecimal number");
        cp = (cp << 4) | static_cast<std::uint32_t>(v);
      }
      if (cp >= 0xd800 && cp <= 0xdfff)
        return at_line(line_of(text, i), "found invalid Unicode character escape code");
      i += 6;
      continue;
    }
    i += 2;
  }
  return {};
}

namespace {

// The plain-byte test of copy_plain_json over 16-byte blocks from `i` (i >= 1); `prev` holds
// the bytes one position earlier, for "`:` right after white space".
bool sse_plain(const unsigned char* p, char* out, std::size_t n, std::size_t& i) {
  const __m128i c7e = _mm_set1_epi8(0x7e), zero = _mm_setzero_si128(), bs = _mm_set1_epi8('\\'),
                colon = _mm_set1_epi8(':'), space = _mm_set1_epi8(' '), tab = _mm_set1_epi8('\t'),
                nl = _mm_set1_epi8('\n'), cr = _mm_set1_epi8('\r');
  __m128i bad = zero;
  for (; i + 16 <= n; i += 16) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + i));
    const __m128i prev = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + i - 1));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), v);
    // Signed compares: bytes >= 0x80 are negative (below zero), only 0x7f is above 0x7e.
    const __m128i high = _mm_or_si128(_mm_cmpgt_epi8(v, c7e), _mm_cmpgt_epi8(zero, v));
    const __m128i prev_ws =
        _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(prev, space), _mm_cmpeq_epi8(prev, tab)),
                     _mm_or_si128(_mm_cmpeq_epi8(prev, nl), _mm_cmpeq_epi8(prev, cr)));
    bad = _mm_or_si128(bad, _mm_or_si128(_mm_or_si128(high, _mm_cmpeq_epi8(v, bs)),
                                         _mm_and_si128(_mm_cmpeq_epi8(v, colon), prev_ws)));
  }
  return _mm_movemask_epi8(bad) == 0;
}

// AVX2 where the CPU has it (chosen at run time; the rest of the build stays baseline x86-64).
__attribute__((target("avx2"))) bool avx2_plain(const unsigned char* p, char* out, std::size_t n,
                                                std::size_t& i) {
  const __m256i c7e = _mm256_set1_epi8(0x7e), zero = _mm256_setzero_si256(),
                bs = _mm256_set1_epi8('\\'), colon = _mm256_set1_epi8(':'),
                space = _mm256_set1_epi8(' '), tab = _mm256_set1_epi8('\t'),
                nl = _mm256_set1_epi8('\n'), cr = _mm256_set1_epi8('\r');
  __m256i bad = zero;
  for (; i + 32 <= n; i += 32) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i));
    const __m256i prev = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i - 1));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), v);
    const __m256i high = _mm256_or_si256(_mm256_cmpgt_epi8(v, c7e), _mm256_cmpgt_epi8(zero, v));
    const __m256i prev_ws = _mm256_or_si256(
        _mm256_or_si256(_mm256_cmpeq_epi8(prev, space), _mm256_cmpeq_epi8(prev, tab)),
        _mm256_or_si256(_mm256_cmpeq_epi8(prev, nl), _mm256_cmpeq_epi8(prev, cr)));
    bad = _mm256_or_si256(bad,
                          _mm256_or_si256(_mm256_or_si256(high, _mm256_cmpeq_epi8(v, bs)),
                                          _mm256_and_si256(_mm256_cmpeq_epi8(v, colon), prev_ws)));
  }
  return _mm256_movemask_epi8(bad) == 0;
}

// libgcc fills in the CPU model before main; reading it is a load and a test.
bool cpu_has_avx2() { return __builtin_cpu_supports("avx2"); }

}  // namespace

bool copy_plain_json(std::string_view text, char* out) noexcept {
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  const std::size_t n = text.size();
  if (n == 0) return false;
  out[0] = text[0];
  // Byte 0 is the caller's '{' (after spaces or newlines); control characters inside
  // strings are refused by simdjson itself.
  if (p[0] >= 0x7f || p[0] == '\\') return false;
  std::size_t i = 1;
  if (cpu_has_avx2() && !avx2_plain(p, out, n, i)) return false;
  if (!sse_plain(p, out, n, i)) return false;
  for (; i < n; ++i) {
    const unsigned char c = p[i];
    out[i] = static_cast<char>(c);
    if (c >= 0x7f || c == '\\') return false;
    if (c == ':' && (p[i - 1] == ' ' || p[i - 1] == '\t' || p[i - 1] == '\n' || p[i - 1] == '\r'))
      return false;
  }
  return true;
}

json_scan scan_json_for_yaml(std::string_view text) noexcept {
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  const std::size_t n = text.size();
  for (std::size_t k = 0; k < n; ++k) {
    const unsigned char c = p[k];
    if (c == ' ' || c == '\n' || c == '\r') continue;
    if (c == '\t') return json_scan::refuse;
    break;
  }
  json_scan verdict = json_scan::ok;
  std::size_t skip_until = 0;  // bytes consumed by an escape sequence
  // Handles one byte that is not plain printable ASCII; returns the next position.
  auto special = [&](std::size_t i, bool& refuse) -> std::size_t {
    const unsigned char c = p[i];
    if (c == '\\') {
      if (i + 1 >= n) return i + 1;
      const char e = static_cast<char>(p[i + 1]);
      if (e == '/') {
        refuse = true;
        return n;
      }
      if (e == 'u') {
        std::uint32_t cp = 0;
        for (std::size_t d = 0; d < 4; ++d) {
          const int v = i + 2 + d < n ? hex_value(static_cast<char>(p[i + 2 + d])) : -1;
          if (v < 0) {
            refuse = true;
            return n;
          }
          cp = (cp << 4) | static_cast<std::uint32_t>(v);
        }
        if (cp >= 0xd800 && cp <= 0xdfff) {
          refuse = true;
          return n;
        }
        return i + 6;
      }
      return i + 2;
    }
    if (c == ':') {
      std::size_t j = i, ws = 0;
      while (j > 0 && (p[j - 1] == ' ' || p[j - 1] == '\t')) {
        --j;
        ++ws;
      }
      if (j == 0 || p[j - 1] == '\n' || p[j - 1] == '\r') {
        refuse = true;
        return n;
      }
      if (ws > 64) verdict = json_scan::exact;
      return i + 1;
    }
    if (c < 0x80) {
      if ((c < 0x20 && c != '\t' && c != '\n' && c != '\r') || c == 0x7f) {
        refuse = true;
        return n;
      }
      return i + 1;
    }
    std::size_t len = 0;
    std::uint32_t cp = 0;
    if (c >= 0xc2 && c <= 0xdf) {
      len = 2;
      cp = c & 0x1fu;
    } else if (c >= 0xe0 && c <= 0xef) {
      len = 3;
      cp = c & 0x0fu;
    } else if (c >= 0xf0 && c <= 0xf4) {
      len = 4;
      cp = c & 0x07u;
    }
    if (len == 0 || i + len > n) {
      refuse = true;
      return n;
    }
    for (std::size_t j = 1; j < len; ++j) {
      if ((p[i + j] & 0xc0) != 0x80) {
        refuse = true;
        return n;
      }
      cp = (cp << 6) | (p[i + j] & 0x3fu);
    }
    const bool printable = cp == 0x85 || (cp >= 0xa0 && cp <= 0xd7ff) ||
                           (cp >= 0xe000 && cp <= 0xfffd) || cp >= 0x10000;
    if ((len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) || !printable) {
      refuse = true;
      return n;
    }
    return i + len;
  };
  const __m128i c20 = _mm_set1_epi8(0x20), c7f = _mm_set1_epi8(0x7f), nl = _mm_set1_epi8('\n'),
                cr = _mm_set1_epi8('\r'), tab = _mm_set1_epi8('\t'), bs = _mm_set1_epi8('\\'),
                colon = _mm_set1_epi8(':'), space = _mm_set1_epi8(' ');
  std::size_t i = 0;
  bool refuse = false;
  unsigned prev_ws_carry = 0;
  while (i < n) {
    if (i + 16 <= n) {
      const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + i));
      const __m128i low = _mm_cmplt_epi8(v, c20);  // also every byte >= 0x80 (signed)
      const __m128i ok_ws = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, nl), _mm_cmpeq_epi8(v, cr)),
                                         _mm_cmpeq_epi8(v, tab));
      const __m128i odd = _mm_or_si128(_mm_andnot_si128(ok_ws, low), _mm_cmpeq_epi8(v, c7f));
      // A `:` matters only after white space (the key may then be on an earlier line or
      // too far away); the bit for "previous byte is white space" crosses blocks.
      const __m128i ws = _mm_or_si128(ok_ws, _mm_cmpeq_epi8(v, space));
      const unsigned ws_bits = static_cast<unsigned>(_mm_movemask_epi8(ws));
      const unsigned prev_ws = ((ws_bits << 1) | prev_ws_carry) & 0xffffu;
      prev_ws_carry = (ws_bits >> 15) & 1u;
      const unsigned colon_bits =
          static_cast<unsigned>(_mm_movemask_epi8(_mm_cmpeq_epi8(v, colon)));
      const unsigned odd_bits = static_cast<unsigned>(_mm_movemask_epi8(odd));
      unsigned mark_bits =
          static_cast<unsigned>(_mm_movemask_epi8(_mm_cmpeq_epi8(v, bs))) | (colon_bits & prev_ws);
      if (odd_bits == 0) {
        while (mark_bits) {
          const std::size_t at = i + static_cast<std::size_t>(__builtin_ctz(mark_bits));
          mark_bits &= mark_bits - 1;
          if (at < skip_until) continue;
          skip_until = special(at, refuse);
          if (refuse) return json_scan::refuse;
        }
        i += 16;
        continue;
      }
      // Byte by byte up to the end of this block (a sequence may run past it).
      const std::size_t end = i + 16;
      if (i < skip_until) i = skip_until;
      while (i < end) {
        const unsigned char c = p[i];
        if (c >= 0x20 && c < 0x7f && c != '\\' && c != ':') {
          ++i;
          continue;
        }
        if (c == '\t' || c == '\n' || c == '\r') {
          ++i;
          continue;
        }
        i = special(i, refuse);
        if (refuse) return json_scan::refuse;
      }
      skip_until = i;
      prev_ws_carry =
          (p[i - 1] == ' ' || p[i - 1] == '\t' || p[i - 1] == '\n' || p[i - 1] == '\r') ? 1u : 0u;
      continue;
    }
    if (i < skip_until) {
      i = skip_until;
      continue;
    }
    const unsigned char c = p[i];
    if ((c >= 0x20 && c < 0x7f && c != '\\' && c != ':') || c == '\t' || c == '\n' || c == '\r') {
      ++i;
      continue;
    }
    i = special(i, refuse);
    if (refuse) return json_scan::refuse;
  }
  return verdict;
}

bool json_key_fits_yaml(std::string_view text, std::size_t open) {
  std::size_t i = open + 1;
  while (i < text.size() && text[i] != '"') i += text[i] == '\\' ? 2 : 1;
  ++i;
  while (i < text.size() && (text[i] == ' ' || text[i] == '\t')) ++i;
  if (i >= text.size() || text[i] != ':') return false;
  if (i - open <= 1024) return true;
  std::size_t chars = 0;
  for (std::size_t j = open; j < i; ++j)
    if ((static_cast<unsigned char>(text[j]) & 0xc0) != 0x80) ++chars;
  return chars <= 1024;
}

namespace {

// ---------------------------------------------------------------------------------------
// YAML: yaml-cpp's event parser into doc_node, with yaml.v3's semantics layered on top.

// Zero-copy std::istream over the input.
class view_streambuf : public std::streambuf {
 public:
  explicit view_streambuf(std::string_view s) {
    char* b = const_cast<char*>(s.data());
    setg(b, b, b + s.size());
  }
};

// Thrown from the event handler to stop yaml-cpp after a fatal decode error; caught in
// decode_yaml_styled before it leaves the decoder.
struct abort_parse {};

bool identifier_like(std::string_view k) {
  auto alpha = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; };
  if (k.empty() || !alpha(k[0])) return false;
  return std::all_of(k.begin(), k.end(), [&](char c) { return alpha(c) || is_digit(c); });
}

}  // namespace

void append_path_key(std::string& out, std::string_view key, bool top, path_style style) {
  if (top)
    out = child(out, key);
  else if (style == path_style::generic && identifier_like(key))
    out = child(out, key);
  else
    out = core::key(out, key);
}

namespace {

// yaml.v3's alias budget (decode.go allowedAliasRatio): most of a small document may come
// from aliases, a shrinking share of a large one.
double allowed_alias_ratio(std::size_t decode_count) {
  constexpr double low = 400000, high = 4000000;
  const auto d = static_cast<double>(decode_count);
  if (d <= low) return 0.99;
  if (d >= high) return 0.10;
  return 0.99 - 0.89 * ((d - low) / (high - low));
}

class tree_builder final : public YAML::EventHandler {
 public:
  tree_builder(std::string_view text, std::string_view rule, const decode_limits& limits,
               path_style style, bool line_separators)
      // yaml-cpp's marks count from after a byte-order mark.
      : text_(text.substr(text.substr(0, 3) == "\xef\xbb\xbf" ? 3 : 0)),
        rule_(rule),
        limits_(limits),
        style_(style),
        separators_(line_separators) {}

  doc_node root;
  error_list errors;
  bool saw_document = false;

  void OnDocumentStart(const YAML::Mark&) override { saw_document = true; }
  void OnDocumentEnd() override {}

  void OnAnchor(const YAML::Mark&, const std::string& name) override { anchor_name_ = name; }

  void OnNull(const YAML::Mark& mark, YAML::anchor_t anchor) override {
    if (skip_depth_) return;
    if (flow_node_missing(mark, true)) fatal(mark, "did not find expected node content");
    if (block_key_missing(mark)) fatal(mark, "did not find expected key");
    if (block_colon_missing(mark)) fatal(mark, "could not find expected ':'");
    if (expecting_key()) {
      // A null key: yaml.v3 cannot decode it into a string and drops the entry, but still
      // compares its literal text with the other keys.
      std::string raw = literal_null_at(mark);
      begin_key(std::move(raw), mark, /*dropped=*/true, /*merge=*/false);
      if (anchor) store_scalar_anchor(anchor, doc_node{});
      return;
    }
    doc_node* n = place(mark);
    if (anchor) store_anchor(anchor, *n, 1, 0);
  }

  void OnScalar(const YAML::Mark& mark, const std::string& tag, YAML::anchor_t anchor,
                const std::string& value) override {
    if (skip_depth_) return;
    if (tag == "?" && flow_node_missing(mark, false))
      fatal(mark, "did not find expected node content");
    doc_node scalar;
    bool is_null = false;
    resolve_scalar(mark, tag, value, scalar, is_null);
    const bool merge = (tag == "?" && value == "<<") || tag == "tag:yaml.org,2002:merge";
    if (expecting_key()) {
      if (is_null) {
        begin_key(value, mark, true, false);
      } else {
        begin_key(std::move(scalar.text), mark, false, merge);
      }
      if (anchor) store_scalar_anchor(anchor, is_null ? doc_node{} : scalar);
      return;
    }
    doc_node* n = place(mark);
    if (!is_null) {
      n->k = doc_node::kind::scalar;
      n->tag = scalar.tag;
      n->text = std::move(scalar.text);
    }
    if (anchor) store_anchor(anchor, *n, 1, 0);
  }

  void OnAlias(const YAML::Mark& mark, YAML::anchor_t anchor) override {
    if (skip_depth_) return;
    if (anchor >= anchors_.size() || !anchors_[anchor].complete) {
      if (discarding()) {  // never decoded by yaml.v3, so never expanded
        place(mark);
        return;
      }
      fatal(mark, "anchor '" + name_of(anchor) + "' value contains itself");
    }
    const anchor_entry& a = anchors_[anchor];
    charge_alias(mark, a.size);
    if (frames_.size() + a.height > limits_.max_depth)
      fatal(mark, "document nesting exceeds the depth limit");
    if (expecting_key()) {
      if (a.node.is_null()) {
        begin_key("", mark, true, false);
      } else if (a.node.is_scalar()) {
        begin_key(a.node.text, mark, false, false);
      } else {
        fatal(mark, "invalid map key: a " + std::string(a.node.kind_name()) + " cannot be a key");
      }
      return;
    }
    if (!frames_.empty()) frames_.back().height = std::max(frames_.back().height, a.height + 1);
    doc_node* n = place(mark);
    const std::size_t line = n->line;
    *n = a.node;
    n->line = line;
  }

  void OnSequenceStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor,
                       YAML::EmitterStyle::value style) override {
    if (skip_depth_) {
      ++skip_depth_;
      return;
    }
    open_collection(mark, doc_node::kind::sequence, anchor, style == YAML::EmitterStyle::Flow);
  }
  void OnSequenceEnd() override {
    if (skip_depth_) {
      --skip_depth_;
      return;
    }
    close_collection();
  }

  void OnMapStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor,
                  YAML::EmitterStyle::value style) override {
    if (skip_depth_) {
      ++skip_depth_;
      return;
    }
    open_collection(mark, doc_node::kind::mapping, anchor, style == YAML::EmitterStyle::Flow);
  }
  void OnMapEnd() override {
    if (skip_depth_) {
      --skip_depth_;
      return;
    }
    finish_mapping();
    close_collection();
  }

  // The path of the innermost open location, rendered per path_style.
  std::string current_path() const { return path_of(frames_.size()); }

  // The path through the outermost `count` open collections.
  std::string path_of(std::size_t count) const {
    std::string out;
    for (std::size_t i = 0; i < count; ++i) {
      const frame& f = frames_[i];
      if (f.node->is_sequence()) {
        if (f.node->items.empty()) break;
        out = index(out, f.node->items.size() - 1);
      } else {
        if (!f.has_key || f.node->map.empty()) break;
        if (i + 1 == frames_.size() && !f.value_pending) break;
        append_key(out, key_text(f), i == 0);
      }
    }
    return out;
  }

 private:
  struct entry_info {
    std::size_t line = 0;
    bool dropped = false;
    bool merge = false;
    std::string raw;  // literal text of a dropped (null) key, for duplicate detection
  };
  struct frame {
    doc_node* node = nullptr;
    YAML::anchor_t anchor = 0;
    std::size_t count_at_start = 0;
    std::size_t height = 1;
    bool discard = false;  // inside the value of a dropped (null) key
    bool flow = false;     // a flow collection ([...] or {...})
    int key_pos = -1;      // where the pending key starts (yaml-cpp's mark)
    bool has_key = false;  // a key was read and its value is pending or being built
    bool value_pending = false;
    std::size_t entries_begin = 0;  // mappings: entries_[entries_begin + i] describes map[i]
  };
  struct anchor_entry {
    doc_node node;
    std::size_t size = 0;
    std::size_t height = 0;
    bool complete = false;
  };

  std::string_view key_text(const frame& f) const {
    const std::size_t i = f.node->map.size() - 1;
    const entry_info& e = entries_[f.entries_begin + i];
    return e.dropped ? std::string_view(e.raw) : std::string_view(f.node->map[i].first);
  }

  void append_key(std::string& out, std::string_view key, bool top) const {
    append_path_key(out, key, top, style_);
  }

  // Building the value of a dropped (null) key, which yaml.v3 skips: decode-time checks
  // (tags, merges, duplicates, self-references) do not apply there.
  bool discarding() const {
    if (frames_.empty()) return false;
    const frame& f = frames_.back();
    if (f.discard) return true;
    return f.node->is_mapping() && f.value_pending && !entries_.empty() && entries_.back().dropped;
  }

  bool expecting_key() const {
    return !frames_.empty() && frames_.back().node->is_mapping() && !frames_.back().value_pending;
  }

  [[noreturn]] void fatal(const YAML::Mark& mark, std::string_view msg) {
    fatal_at(current_path(), mark, msg);
  }
  [[noreturn]] void fatal_at(std::string path, const YAML::Mark& mark, std::string_view msg) {
    errors.push_back(invalid(std::string(rule_), std::move(path), "",
                             at_line(static_cast<std::size_t>(mark.line) + 1, msg)));
    errors.back().has_value = false;
    throw abort_parse{};
  }

  std::string name_of(YAML::anchor_t anchor) const {
    if (anchor < anchors_.size() && !anchor_names_[anchor].empty()) return anchor_names_[anchor];
    return std::to_string(anchor);
  }

  // Where yaml.v3 finds no node in a flow collection and yaml-cpp reads one: an empty entry
  // ("[a,,b]", "[,]", "{,}", "{: x}"), which yaml-cpp reads as a null key or item starting
  // at a ',' or ':', and a plain scalar starting with ':' ("[:b]", "{a: :b}"), which
  // yaml.v3 reads as a value indicator there. A null value ("{a: , b: 1}", "{a, b}") is
  // fine, and so is an explicit key ("{? , a: 1}").
  bool flow_node_missing(const YAML::Mark& mark, bool null_node) const {
    if (frames_.empty() || !frames_.back().flow || mark.pos < 0) return false;
    const auto at = static_cast<std::size_t>(mark.pos);
    if (at >= text_.size()) return false;
    if (!null_node) return text_[at] == ':';
    const frame& f = frames_.back();
    if (f.node->is_mapping() && f.value_pending) return false;
    if (text_[at] != ',' && text_[at] != ':') return false;
    return !after_explicit_key(at);
  }

  // True when only white space separates `at` from a '?' before it: the null there is an
  // explicit key's ("? , a: 1", "?\n: x"), which yaml.v3 reads too.
  bool after_explicit_key(std::size_t at) const {
    std::size_t i = at;
    while (i > 0 && (text_[i - 1] == ' ' || text_[i - 1] == '\t' || text_[i - 1] == '\n' ||
                     text_[i - 1] == '\r'))
      --i;
    return i > 0 && text_[i - 1] == '?';
  }

  // A block mapping's line without its key (": x", ":"): yaml.v3 finds no key there, where
  // yaml-cpp reads a null key starting at the ':'. An explicit "? " key is not this.
  bool block_key_missing(const YAML::Mark& mark) const {
    if (!expecting_key() || frames_.back().flow || mark.pos < 0) return false;
    const auto at = static_cast<std::size_t>(mark.pos);
    if (at >= text_.size() || text_[at] != ':') return false;
    return !after_explicit_key(at);
  }

  // A block mapping's key without its ':' ("a: 1\nb"): yaml.v3 finds no ':' after it, where
  // yaml-cpp reads the key with a null value that starts where the key does (a value left
  // empty after "b:" starts after the ':', and so does that of an explicit "? b" key).
  bool block_colon_missing(const YAML::Mark& mark) const {
    if (frames_.empty() || mark.pos < 0) return false;
    const frame& f = frames_.back();
    return f.node->is_mapping() && !f.flow && f.value_pending && f.key_pos == mark.pos;
  }

  std::string literal_null_at(const YAML::Mark& mark) const {
    if (mark.pos < 0 || static_cast<std::size_t>(mark.pos) >= text_.size()) return {};
    const std::string_view rest = text_.substr(static_cast<std::size_t>(mark.pos));
    for (std::string_view w : {"null", "Null", "NULL", "~"})
      if (rest.substr(0, w.size()) == w) return std::string(w);
    return {};
  }

  void charge_alias(const YAML::Mark& mark, std::size_t size) {
    if (count_ + size > limits_.max_expanded_nodes) {
      fatal(mark, "document exceeds " + std::to_string(limits_.max_expanded_nodes) +
                      " nodes after alias expansion");
    }
    count_ += size;
    alias_count_ += size;
    if (alias_count_ > 100 && count_ > 1000 &&
        static_cast<double>(alias_count_) / static_cast<double>(count_) >
            allowed_alias_ratio(count_)) {
      fatal(mark, "document contains excessive aliasing");
    }
  }

  // Counts one more node, within the limit.
  void charge(const YAML::Mark& mark) {
    if (count_ >= limits_.max_expanded_nodes) {
      fatal(mark, "document exceeds " + std::to_string(limits_.max_expanded_nodes) + " nodes");
    }
    ++count_;
  }

  void begin_key(std::string key, const YAML::Mark& mark, bool dropped, bool merge) {
    charge(mark);
    frame& f = frames_.back();
    entry_info info;
    info.line = static_cast<std::size_t>(mark.line) + 1;
    info.dropped = dropped;
    info.merge = merge;
    if (dropped) info.raw = std::move(key);
    entries_.push_back(std::move(info));
    f.node->map.emplace_back(dropped ? std::string() : std::move(key), doc_node{});
    f.has_key = true;
    f.value_pending = true;
    f.key_pos = mark.pos;
  }

  // The slot for the next value: the root, the next sequence item, or the pending map value.
  doc_node* place(const YAML::Mark& mark) {
    charge(mark);
    doc_node* n = nullptr;
    if (frames_.empty()) {
      n = &root;
    } else {
      frame& f = frames_.back();
      if (f.node->is_sequence()) {
        n = &f.node->items.emplace_back();
      } else {
        n = &f.node->map.back().second;
        f.value_pending = false;
      }
    }
    n->line = static_cast<std::size_t>(mark.line) + 1;
    return n;
  }

  void open_collection(const YAML::Mark& mark, doc_node::kind k, YAML::anchor_t anchor, bool flow) {
    if (expecting_key()) {
      if (discarding()) {
        // A complex key inside a value yaml.v3 never decodes: skip it, keep its value slot.
        begin_key("", mark, true, false);
        skip_depth_ = 1;
        return;
      }
      fatal(mark, std::string("invalid map key: a ") +
                      (k == doc_node::kind::mapping ? "!!map" : "!!seq") + " cannot be a key");
    }
    if (frames_.size() >= limits_.max_depth) {
      // Reported at the collection that is one level too deep (the next item of a sequence,
      // or the pending value of a key), as the JSON decoder reports it.
      const bool in_sequence = !frames_.empty() && frames_.back().node->is_sequence();
      fatal_at(in_sequence ? index(path_of(frames_.size() - 1), frames_.back().node->items.size())
                           : current_path(),
               mark, "document nesting exceeds " + std::to_string(limits_.max_depth) + " levels");
    }
    const bool discard = discarding();
    doc_node* n = place(mark);
    n->k = k;
    frame f;
    f.discard = discard;
    // Inside a flow collection everything is flow (yaml-cpp reports the single-pair mapping
    // of "[a: b]" as block).
    f.flow = flow || (!frames_.empty() && frames_.back().flow);
    f.node = n;
    f.anchor = anchor;
    f.count_at_start = count_;
    f.entries_begin = entries_.size();
    if (anchor) anchor_name_for(anchor);
    frames_.push_back(std::move(f));
  }

  void close_collection() {
    frame f = frames_.back();
    frames_.pop_back();
    entries_.resize(f.entries_begin);
    if (!frames_.empty()) frames_.back().height = std::max(frames_.back().height, f.height + 1);
    if (f.anchor) store_anchor(f.anchor, *f.node, count_ - f.count_at_start + 1, f.height);
  }

  void anchor_name_for(YAML::anchor_t anchor) {
    if (anchor >= anchors_.size()) {
      anchors_.resize(anchor + 1);
      anchor_names_.resize(anchor + 1);
    }
    anchor_names_[anchor] = anchor_name_;
  }

  void store_scalar_anchor(YAML::anchor_t anchor, const doc_node& n) {
    store_anchor(anchor, n, 1, 0);
  }

  void store_anchor(YAML::anchor_t anchor, const doc_node& n, std::size_t size,
                    std::size_t height) {
    anchor_name_for(anchor);
    anchor_entry& a = anchors_[anchor];
    a.node = n;
    a.size = size;
    a.height = height;
    a.complete = true;
  }

  void resolve_scalar(const YAML::Mark& mark, const std::string& tag, const std::string& value,
                      doc_node& out, bool& is_null) {
    out.k = doc_node::kind::scalar;
    out.line = static_cast<std::size_t>(mark.line) + 1;
    is_null = false;
    if (tag == "?") {
      if (separators_ && (value.find("\xc2\x85") != std::string::npos ||
                          value.find("\xe2\x80\xa8") != std::string::npos ||
                          value.find("\xe2\x80\xa9") != std::string::npos)) {
        fatal(mark,
              "a line separator (U+0085, U+2028, U+2029) in a plain scalar is a line break "
              "for YAML 1.1 decoders");
      }
      const resolved r = resolve_text(value, true);
      is_null = r == resolved::null;
      out.tag = to_scalar_tag(r);
      out.text = value;
      return;
    }
    check_quoted(mark);
    if (tag == "!") {
      out.tag = doc_node::scalar_tag::str;
      out.text = value;
      return;
    }
    constexpr std::string_view core_prefix = "tag:yaml.org,2002:";
    if (tag.size() > 1 && tag[0] == '!' && tag.find('!', 1) != std::string::npos) {
      fatal(mark, "found undefined tag handle");
    }
    if (std::string_view(tag).substr(0, core_prefix.size()) != core_prefix) {
      out.tag = doc_node::scalar_tag::other;
      out.text = value;
      return;
    }
    const std::string_view name = std::string_view(tag).substr(core_prefix.size());
    if (name == "binary") {
      if (!decode_base64(value, out.text) && !discarding())
        fatal(mark, "!!binary value contains invalid base64 data");
      out.tag = doc_node::scalar_tag::binary;
      return;
    }
    resolved want;
    if (name == "str") {
      out.tag = doc_node::scalar_tag::str;
      out.text = value;
      return;
    }
    if (name == "bool")
      want = resolved::bool_;
    else if (name == "int")
      want = resolved::int_;
    else if (name == "float")
      want = resolved::float_;
    else if (name == "null")
      want = resolved::null;
    else if (name == "timestamp")
      want = resolved::timestamp;
    else {
      out.tag = doc_node::scalar_tag::other;
      out.text = value;
      return;
    }
    resolved got = resolve_text(value, want == resolved::timestamp);
    if (want == resolved::float_ && got == resolved::int_) got = resolved::float_;
    if (got != want && !discarding()) {
      std::string shown = value;
      fatal(mark, "cannot decode " + std::string(short_name(got)) + " `" + shown + "` as a " +
                      std::string(short_name(want)));
    }
    is_null = want == resolved::null;
    out.tag = to_scalar_tag(want);
    out.text = value;
  }

  // yaml-cpp accepts the JSON escape `\/` in double-quoted scalars, and a quoted scalar the
  // end of the text cuts off after a line break; yaml.v3 does neither.
  void check_quoted(const YAML::Mark& mark) {
    if (mark.pos < 0) return;
    std::size_t i = static_cast<std::size_t>(mark.pos);
    // Skip node properties (anchor, tag) and the white space and comments around them.
    while (i < text_.size()) {
      const char c = text_[i];
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
        ++i;
      } else if (c == '#') {
        while (i < text_.size() && text_[i] != '\n') ++i;
      } else if (c == '&' || c == '!') {
        while (i < text_.size() && text_[i] != ' ' && text_[i] != '\t' && text_[i] != '\n' &&
               text_[i] != '\r')
          ++i;
      } else {
        break;
      }
    }
    if (i >= text_.size() || (text_[i] != '"' && text_[i] != '\'')) return;
    std::string problem =
        text_[i] == '"' ? check_double_quoted(text_, i) : check_single_quoted(text_, i);
    if (!problem.empty()) {
      errors.push_back(invalid(std::string(rule_), current_path(), "", std::move(problem)));
      errors.back().has_value = false;
      throw abort_parse{};
    }
  }

  void finish_mapping() {
    frame& f = frames_.back();
    // yaml.v3 never decodes the value of a dropped key, so it finds no errors inside it.
    if (f.discard) return;
    auto& map = f.node->map;
    entry_info* entries = entries_.data() + f.entries_begin;
    // yaml.v3 refuses a key written twice in one mapping (decode.go: "mapping key already
    // defined"); merged keys are exempt, explicit ones win over them.
    const std::size_t n = map.size();
    auto report = [&](std::size_t first, std::size_t second, std::string_view shown) {
      std::string path = current_path_without_key();
      if (!entries[second].dropped) append_key(path, shown, frames_.size() == 1);
      std::string msg = "mapping key \"" + std::string(shown) + "\" already defined at line " +
                        std::to_string(entries[first].line);
      field_error e = duplicate(std::string(rule_), std::move(path), shown);
      e.detail = at_line(entries[second].line, msg);
      errors.push_back(std::move(e));
    };
    auto text_of = [&](std::size_t i) -> std::string_view {
      return entries[i].dropped ? std::string_view(entries[i].raw) : std::string_view(map[i].first);
    };
    if (n <= 16) {
      for (std::size_t i = 1; i < n; ++i)
        for (std::size_t j = 0; j < i; ++j)
          if (entries[i].dropped == entries[j].dropped && text_of(i) == text_of(j)) {
            report(j, i, text_of(i));
            break;
          }
    } else {
      string_index seen, seen_null;
      seen.reset(n);
      for (std::size_t i = 0; i < n; ++i) {
        auto& idx = entries[i].dropped ? seen_null : seen;
        const auto [first, inserted] = idx.insert(text_of(i), static_cast<std::uint32_t>(i));
        if (!inserted) report(first, i, text_of(i));
      }
    }
    bool has_special = false;
    for (std::size_t i = 0; i < n; ++i)
      if (entries[i].dropped || entries[i].merge) has_special = true;
    if (!has_special) return;
    // Pull out merge values and dropped entries, keep explicit entries in order.
    std::vector<doc_node> merges;
    std::size_t w = 0;
    for (std::size_t i = 0; i < n; ++i) {
      if (entries[i].merge) {
        merges.push_back(std::move(map[i].second));
        continue;
      }
      if (entries[i].dropped) continue;
      if (w != i) map[w] = std::move(map[i]);
      ++w;
    }
    map.resize(w);
    if (merges.empty()) return;
    // yaml.v3 applies only the last `<<` (two are a duplicate key, reported above).
    doc_node src = std::move(merges.back());
    std::vector<doc_node*> sources;
    if (src.is_mapping()) {
      sources.push_back(&src);
    } else if (src.is_sequence()) {
      for (auto& item : src.items) {
        if (!item.is_mapping()) merge_error();
        sources.push_back(&item);
      }
    } else {
      merge_error();
    }
    string_index present;
    present.reset(map.size() + 8);
    for (std::size_t i = 0; i < map.size(); ++i)
      present.insert(map[i].first, static_cast<std::uint32_t>(i));
    // Earlier keys win: explicit ones, then each source in order.
    std::vector<std::pair<std::string, doc_node>> added;
    for (doc_node* s : sources) {
      for (auto& [k, v] : s->map) {
        if (present.find(k)) continue;
        // The index views the source's key, which stays put (only the value moves out);
        // a view of the copy in `added` would dangle when `added` reallocates.
        present.insert(k, 0);
        added.emplace_back(k, std::move(v));
      }
    }
    for (auto& kv : added) map.push_back(std::move(kv));
  }

  [[noreturn]] void merge_error() {
    YAML::Mark m;
    m.line = static_cast<int>(frames_.back().node->line) - 1;
    fatal(m, "map merge requires map or sequence of maps as the value");
  }

  std::string current_path_without_key() const {
    std::string out;
    for (std::size_t i = 0; i + 1 < frames_.size(); ++i) {
      const frame& f = frames_[i];
      if (f.node->is_sequence()) {
        out = index(out, f.node->items.size() - 1);
      } else {
        append_key(out, key_text(f), i == 0);
      }
    }
    return out;
  }

  std::string_view text_;
  std::string_view rule_;
  const decode_limits& limits_;
  path_style style_;
  bool separators_;
  std::vector<frame> frames_;
  std::vector<entry_info> entries_;
  std::vector<anchor_entry> anchors_;
  std::vector<std::string> anchor_names_;
  std::string anchor_name_;
  std::size_t count_ = 0;
  std::size_t alias_count_ = 0;
  std::size_t skip_depth_ = 0;  // > 0 while skipping a complex key yaml.v3 never decodes
};

// Directives and the region before the first token, where yaml-cpp is more lenient than
// yaml.v3: only `%YAML 1.1` is accepted (once), a directive must be followed by `---`, and a
// tab cannot start a line there.
std::string check_prologue(std::string_view text) {
  std::size_t i = 0;
  if (text.substr(0, 3) == "\xef\xbb\xbf") i = 3;
  bool yaml_directive = false, any_directive = false;
  std::size_t line = 1;
  while (i < text.size()) {
    std::size_t eol = text.find('\n', i);
    if (eol == std::string_view::npos) eol = text.size();
    std::string_view l = text.substr(i, eol - i);
    if (!l.empty() && l.back() == '\r') l.remove_suffix(1);
    const std::size_t first = l.find_first_not_of(" \t");
    if (first != std::string_view::npos &&
        l.substr(0, first).find('\t') != std::string_view::npos && l[first] != '#') {
      return at_line(line, "found character that cannot start any token");
    }
    if (first == std::string_view::npos || l[first] == '#') {
      if (first != std::string_view::npos &&
          l.substr(0, first).find('\t') != std::string_view::npos)
        return at_line(line, "found character that cannot start any token");
      if (first == std::string_view::npos && l.find('\t') != std::string_view::npos)
        return at_line(line, "found character that cannot start any token");
      i = eol + 1;
      ++line;
      continue;
    }
    if (l[0] == '%') {
      any_directive = true;
      if (l.substr(0, 5) == "%YAML" && (l.size() == 5 || l[5] == ' ' || l[5] == '\t')) {
        if (yaml_directive) return at_line(line, "found duplicate %YAML directive");
        yaml_directive = true;
        std::string_view v = l.substr(5);
        const std::size_t b = v.find_first_not_of(" \t");
        v = b == std::string_view::npos ? std::string_view() : v.substr(b);
        const std::size_t e = v.find_first_of(" \t#");
        v = v.substr(0, e);
        if (v != "1.1") return at_line(line, "found incompatible YAML document");
      }
      i = eol + 1;
      ++line;
      continue;
    }
    if (any_directive &&
        !(l.substr(0, 3) == "---" && (l.size() == 3 || l[3] == ' ' || l[3] == '\t'))) {
      return at_line(line, "did not find expected <document start>");
    }
    break;
  }
  return {};
}

decode_result fail_with(std::string_view rule, std::string detail) {
  decode_result r;
  field_error e = invalid(std::string(rule), "", "", std::move(detail));
  e.has_value = false;
  r.errors.push_back(std::move(e));
  return r;
}

}  // namespace

decode_result decode_yaml_styled(std::string_view text, std::string_view rule_id,
                                 const decode_limits& limits, path_style style) {
  if (text.size() > limits.max_bytes) {
    decode_result r;
    r.errors.push_back(too_long(std::string(rule_id), "", text.size(), limits.max_bytes));
    return r;
  }
  // yaml.v3 reads a lone CR as a line break, like LF and CR LF; yaml-cpp knows only the
  // other two and would make the CR part of a token. Such a text is decoded with each lone
  // CR turned into LF, which is the same document for yaml.v3, line numbers included (in
  // scalars yaml.v3 itself turns every line break into LF).
  std::string unified;
  if (lone_crs_as_lf(text, unified)) text = unified;
  bool separators = false;
  if (std::string problem = check_yaml_characters(text, &separators); !problem.empty())
    return fail_with(rule_id, std::move(problem));
  if (std::string problem = check_prologue(text); !problem.empty())
    return fail_with(rule_id, std::move(problem));

  tree_builder builder(text, rule_id, limits, style, separators);
  view_streambuf buf(text);
  std::istream in(&buf);
  try {
    YAML::Parser parser(in);
    if (!parser.HandleNextDocument(builder) || !builder.saw_document) {
      return fail_with(rule_id,
                       "the document is empty (no YAML content, only white space or comments)");
    }
    if (builder.errors.empty()) {
      // The consumer decodes exactly one document: even an empty second one (a trailing
      // `---`) is an error, while a trailing `...` ends the first document cleanly.
      tree_builder rest(text, rule_id, limits, style, separators);
      if (parser.HandleNextDocument(rest)) {
        return fail_with(rule_id, "more than one YAML document (a second `---` document)");
      }
    }
  } catch (const abort_parse&) {
  } catch (const YAML::Exception& e) {
    decode_result r;
    field_error fe = invalid(
        std::string(rule_id), builder.current_path(), "",
        e.mark.is_null() ? e.msg : at_line(static_cast<std::size_t>(e.mark.line) + 1, e.msg));
    fe.has_value = false;
    r.errors.push_back(std::move(fe));
    return r;
  } catch (const std::bad_alloc&) {
    return fail_with(rule_id, "document too large to decode");
  } catch (const std::exception& e) {
    return fail_with(rule_id, e.what());
  }
  decode_result r;
  r.errors = std::move(builder.errors);
  if (r.errors.empty()) r.root = std::move(builder.root);
  return r;
}

}  // namespace detail

decode_result decode_yaml(std::string_view text, std::string_view rule_id,
                          const decode_limits& limits) {
  return detail::decode_yaml_styled(text, rule_id, limits, detail::path_style::generic);
}

// ---------------------------------------------------------------------------------------
// JSON: simdjson On Demand (error codes only) into the same tree.

json_decoder::json_decoder() : state_(std::make_unique<detail::decoder_state>()) {}
json_decoder::~json_decoder() = default;
json_decoder::json_decoder(json_decoder&&) noexcept = default;
json_decoder& json_decoder::operator=(json_decoder&&) noexcept = default;

namespace detail {

simdjson::padded_string_view decoder_state::pad(std::vector<char>& into, std::string_view text) {
  if (into.size() < text.size() + simdjson::SIMDJSON_PADDING)
    into.resize(text.size() + simdjson::SIMDJSON_PADDING);
  if (!text.empty()) std::memcpy(into.data(), text.data(), text.size());
  std::memset(into.data() + text.size(), 0, simdjson::SIMDJSON_PADDING);
  return simdjson::padded_string_view(into.data(), text.size(), into.size());
}

std::string render_path(const std::vector<path_segment>& segments, path_style style) {
  std::string out;
  for (std::size_t i = 0; i < segments.size(); ++i) {
    const path_segment& seg = segments[i];
    if (seg.is_index) {
      out.push_back('[');
      out += std::to_string(seg.index);
      out.push_back(']');
    } else {
      append_path_key(out, seg.key, i == 0, style);
    }
  }
  return out;
}

}  // namespace detail

namespace {

// Builds the tree with the decoder's stacks: each collection's children are gathered at
// their depth and moved into a vector of the final size, one allocation per collection.
// The location is kept as segments and rendered only for an error.
class json_builder {
 public:
  json_builder(detail::decoder_state& st, std::string_view text, const char* base,
               std::string_view rule, const decode_limits& limits, detail::path_style style)
      : st_(st), text_(text), base_(base), rule_(rule), limits_(limits), style_(style) {
    st_.path.clear();
  }

  error_list errors;
  // False when the text is not JSON that simdjson accepts (the caller then asks YAML).
  bool json_ok = true;

  bool value(simdjson::ondemand::value v, doc_node& out, std::size_t depth) {
    if (++count_ > limits_.max_expanded_nodes) return limit("document exceeds the node limit");
    simdjson::ondemand::json_type t;
    if (v.type().get(t)) return not_json();
    switch (t) {
      case simdjson::ondemand::json_type::object: {
        simdjson::ondemand::object obj;
        if (v.get_object().get(obj)) return not_json();
        return object(obj, out, depth);
      }
      case simdjson::ondemand::json_type::array: {
        simdjson::ondemand::array arr;
        if (v.get_array().get(arr)) return not_json();
        return array(arr, out, depth);
      }
      case simdjson::ondemand::json_type::string: {
        std::string_view s;
        if (v.get_string().get(s)) return not_json();
        out.k = doc_node::kind::scalar;
        out.tag = doc_node::scalar_tag::str;
        out.text = s;
        return true;
      }
      case simdjson::ondemand::json_type::number: {
        std::string_view raw = v.raw_json_token();
        while (!raw.empty() && (raw.back() == ' ' || raw.back() == '\n' || raw.back() == '\r' ||
                                raw.back() == '\t'))
          raw.remove_suffix(1);
        if (!detail::is_json_number(raw)) return not_json();
        out.k = doc_node::kind::scalar;
        out.tag = detail::resolve_plain(raw, nullptr);
        out.text = raw;
        return true;
      }
      case simdjson::ondemand::json_type::boolean: {
        bool b;
        if (v.get_bool().get(b)) return not_json();
        out.k = doc_node::kind::scalar;
        out.tag = doc_node::scalar_tag::bool_;
        out.text = b ? "true" : "false";
        return true;
      }
      case simdjson::ondemand::json_type::null: {
        bool is_null = false;
        if (v.is_null().get(is_null) || !is_null) return not_json();
        out.k = doc_node::kind::null;
        return true;
      }
    }
    return not_json();
  }

  bool object(simdjson::ondemand::object obj, doc_node& out, std::size_t depth) {
    if (depth >= limits_.max_depth) return limit("document nesting exceeds the depth limit");
    out.k = doc_node::kind::mapping;
    if (st_.maps.size() <= depth) st_.maps.resize(depth + 1);
    st_.maps[depth].clear();
    for (auto field_result : obj) {
      simdjson::ondemand::field field;
      if (std::move(field_result).get(field)) return not_json();
      const char* raw = field.key().raw();
      const auto open = static_cast<std::size_t>(raw - base_) - 1;
      std::string_view key;
      if (field.unescaped_key().get(key)) return not_json();
      if (!key_fits_yaml(open, key.size())) return not_json();
      if (++count_ > limits_.max_expanded_nodes) return limit("document exceeds the node limit");
      // Deeper levels may grow `maps` itself; the children's storage does not move.
      auto& kids = st_.maps[depth];
      kids.emplace_back(std::string(key), doc_node{});
      st_.path.push_back({key, 0, false});
      if (!value(field.value(), kids.back().second, depth + 1)) return false;
      st_.path.pop_back();
    }
    auto& kids = st_.maps[depth];
    out.map.reserve(kids.size());
    for (auto& entry : kids) out.map.emplace_back(std::move(entry));
    kids.clear();
    check_duplicates(out);
    return true;
  }

  bool array(simdjson::ondemand::array arr, doc_node& out, std::size_t depth) {
    if (depth >= limits_.max_depth) return limit("document nesting exceeds the depth limit");
    out.k = doc_node::kind::sequence;
    if (st_.items.size() <= depth) st_.items.resize(depth + 1);
    st_.items[depth].clear();
    for (auto item_result : arr) {
      simdjson::ondemand::value item;
      if (std::move(item_result).get(item)) return not_json();
      auto& kids = st_.items[depth];
      st_.path.push_back({{}, kids.size(), true});
      if (!value(item, kids.emplace_back(), depth + 1)) return false;
      st_.path.pop_back();
    }
    auto& kids = st_.items[depth];
    out.items.reserve(kids.size());
    for (auto& item : kids) out.items.emplace_back(std::move(item));
    kids.clear();
    return true;
  }

 private:
  bool not_json() {
    json_ok = false;
    return false;
  }
  // The usual key has no escape and its `:` right after the closing quote: then its raw
  // text is `n` bytes and yaml.v3's limit (1024 characters to the `:`) is a length check.
  bool key_fits_yaml(std::size_t open, std::size_t n) const {
    const std::size_t end = open + 1 + n;
    if (n + 2 <= 1024 && end + 1 < text_.size() && text_[end] == '"' && text_[end + 1] == ':' &&
        std::memchr(text_.data() + open + 1, '\\', n) == nullptr)
      return true;
    return detail::json_key_fits_yaml(text_, open);
  }
  bool limit(std::string_view msg) {
    field_error e =
        invalid(std::string(rule_), detail::render_path(st_.path, style_), "", std::string(msg));
    e.has_value = false;
    errors.push_back(std::move(e));
    return false;
  }
  void check_duplicates(const doc_node& m) {
    const std::size_t n = m.map.size();
    auto report = [&](std::size_t i) {
      const std::string path = detail::render_path(st_.path, style_);
      std::string p = path;
      detail::append_path_key(p, m.map[i].first, path.empty(), style_);
      field_error e = duplicate(std::string(rule_), std::move(p), m.map[i].first);
      e.detail = "mapping key \"" + m.map[i].first + "\" already defined";
      errors.push_back(std::move(e));
    };
    if (n <= 16) {
      for (std::size_t i = 1; i < n; ++i)
        for (std::size_t j = 0; j < i; ++j)
          if (m.map[i].first == m.map[j].first) {
            report(i);
            break;
          }
      return;
    }
    detail::string_index seen;
    seen.reset(n);
    for (std::size_t i = 0; i < n; ++i)
      if (!seen.insert(m.map[i].first, static_cast<std::uint32_t>(i)).second) report(i);
  }

  detail::decoder_state& st_;
  std::string_view text_;
  const char* base_;
  std::string_view rule_;
  const decode_limits& limits_;
  detail::path_style style_;
  std::size_t count_ = 0;
};

// The admission path's builder: the same acceptance rules as json_builder, but it writes
// into the tree the previous document left in the decoder, assigning keys and scalars into
// strings and vectors that keep their capacity, so that a stream of similar documents
// (AdmissionReview objects) costs no allocation, no move and no destruction per node. It
// reports no errors: any document json_builder would not accept without error makes it
// return false, and the caller asks decode_json for the exact verdict.
class reuse_builder {
 public:
  reuse_builder(std::string_view text, const char* base, const decode_limits& limits)
      : text_(text),
        base_(base),
        limits_(limits),
        escapes_(std::memchr(text.data(), '\\', text.size()) != nullptr) {}

  bool object(simdjson::ondemand::object obj, doc_node& out, std::size_t depth) {
    if (depth >= limits_.max_depth) return false;
    become(out, doc_node::kind::mapping);
    auto& m = out.map;
    std::size_t n = 0;
    for (auto field_result : obj) {
      simdjson::ondemand::field field;
      if (std::move(field_result).get(field)) return false;
      const char* raw = field.key().raw();
      const auto open = static_cast<std::size_t>(raw - base_) - 1;
      std::string_view key;
      if (field.unescaped_key().get(key)) return false;
      if (!key_fits_yaml(open, key.size())) return false;
      if (++count_ > limits_.max_expanded_nodes) return false;
      if (n < m.size())
        set_text(m[n].first, key);
      else
        m.emplace_back(std::piecewise_construct, std::forward_as_tuple(key), std::forward_as_tuple());
      // Only this child's subtree changes while it is built: `m` itself stays put.
      if (!value(field.value(), m[n].second, depth + 1)) return false;
      ++n;
    }
    if (n < m.size()) m.erase(m.begin() + static_cast<std::ptrdiff_t>(n), m.end());
    return unique_keys(m);
  }

 private:
  bool value(simdjson::ondemand::value v, doc_node& out, std::size_t depth) {
    if (++count_ > limits_.max_expanded_nodes) return false;
    simdjson::ondemand::json_type t;
    if (v.type().get(t)) return false;
    switch (t) {
      case simdjson::ondemand::json_type::object: {
        simdjson::ondemand::object obj;
        if (v.get_object().get(obj)) return false;
        return object(obj, out, depth);
      }
      case simdjson::ondemand::json_type::array: {
        simdjson::ondemand::array arr;
        if (v.get_array().get(arr)) return false;
        return array(arr, out, depth);
      }
      case simdjson::ondemand::json_type::string: {
        std::string_view s;
        if (v.get_string().get(s)) return false;
        scalar(out, doc_node::scalar_tag::str, s);
        return true;
      }
      case simdjson::ondemand::json_type::number: {
        std::string_view raw = v.raw_json_token();
        while (!raw.empty() && (raw.back() == ' ' || raw.back() == '\n' || raw.back() == '\r' ||
                                raw.back() == '\t'))
          raw.remove_suffix(1);
        if (!detail::is_json_number(raw)) return false;
        scalar(out, detail::resolve_plain(raw, nullptr), raw);
        return true;
      }
      case simdjson::ondemand::json_type::boolean: {
        bool b;
        if (v.get_bool().get(b)) return false;
        scalar(out, doc_node::scalar_tag::bool_, b ? "true" : "false");
        return true;
      }
      case simdjson::ondemand::json_type::null: {
        bool is_null = false;
        if (v.is_null().get(is_null) || !is_null) return false;
        become(out, doc_node::kind::null);
        return true;
      }
    }
    return false;
  }

  bool array(simdjson::ondemand::array arr, doc_node& out, std::size_t depth) {
    if (depth >= limits_.max_depth) return false;
    become(out, doc_node::kind::sequence);
    auto& items = out.items;
    std::size_t n = 0;
    for (auto item_result : arr) {
      simdjson::ondemand::value item;
      if (std::move(item_result).get(item)) return false;
      if (n == items.size()) items.emplace_back();
      if (!value(item, items[n], depth + 1)) return false;
      ++n;
    }
    if (n < items.size()) items.erase(items.begin() + static_cast<std::ptrdiff_t>(n), items.end());
    return true;
  }

  // Every member is set, whatever the node held for the previous document.
  static void become(doc_node& n, doc_node::kind k) {
    n.k = k;
    n.tag = doc_node::scalar_tag::str;
    n.line = 0;
    n.text.clear();
    if (k != doc_node::kind::mapping && !n.map.empty()) n.map.clear();
    if (k != doc_node::kind::sequence && !n.items.empty()) n.items.clear();
  }
  // Keys, and many values, repeat from one review to the next: comparing is cheaper than
  // assigning.
  static void set_text(std::string& s, std::string_view text) {
    if (!detail::same(s, text)) s.assign(text.data(), text.size());
  }
  static void scalar(doc_node& n, doc_node::scalar_tag tag, std::string_view text) {
    n.k = doc_node::kind::scalar;
    n.tag = tag;
    n.line = 0;
    if (!n.map.empty()) n.map.clear();
    if (!n.items.empty()) n.items.clear();
    set_text(n.text, text);
  }

  // As json_builder::key_fits_yaml (a text without any backslash has no escaped key).
  bool key_fits_yaml(std::size_t open, std::size_t n) const {
    const std::size_t end = open + 1 + n;
    if (n + 2 <= 1024 && end + 1 < text_.size() && text_[end] == '"' && text_[end + 1] == ':' &&
        (!escapes_ || std::memchr(text_.data() + open + 1, '\\', n) == nullptr))
      return true;
    return detail::json_key_fits_yaml(text_, open);
  }

  bool unique_keys(const std::vector<std::pair<std::string, doc_node>>& m) {
    const std::size_t n = m.size();
    if (n <= 16) {
      for (std::size_t i = 1; i < n; ++i)
        for (std::size_t j = 0; j < i; ++j)
          if (detail::same(m[i].first, m[j].first)) return false;
      return true;
    }
    seen_.reset(n);
    for (std::size_t i = 0; i < n; ++i)
      if (!seen_.insert(m[i].first, static_cast<std::uint32_t>(i)).second) return false;
    return true;
  }

  std::string_view text_;
  const char* base_;
  const decode_limits& limits_;
  bool escapes_;
  std::size_t count_ = 0;
  detail::string_index seen_;
};

// The byte-wise judge of what follows the root, for a root whose span On Demand could not
// find.
bool only_white_space_after_root(std::string_view text) {
  std::size_t i = text.find_first_not_of(" \t\r\n");
  std::size_t depth = 0;
  for (; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '"') {
      for (++i; i < text.size() && text[i] != '"'; ++i)
        if (text[i] == '\\') ++i;
    } else if (c == '{' || c == '[') {
      ++depth;
    } else if (c == '}' || c == ']') {
      if (--depth == 0) break;
    }
  }
  if (i >= text.size()) return false;
  return text.find_first_not_of(" \t\r\n", i + 1) == std::string_view::npos;
}

}  // namespace

// Decodes JSON; `json_ok` is false when simdjson (or the JSON-as-YAML rules) refuse the text.
decode_result detail::decode_json_styled(decoder_state& state, std::string_view text,
                                         std::string_view rule_id, const decode_limits& limits,
                                         path_style style, bool& json_ok) {
  json_ok = true;
  decode_result r;
  if (text.size() > limits.max_bytes) {
    r.errors.push_back(too_long(std::string(rule_id), "", text.size(), limits.max_bytes));
    return r;
  }
  if (std::string p = detail::check_yaml_characters(text, nullptr); !p.empty()) {
    json_ok = false;
    return detail::fail_with(rule_id, std::move(p));
  }
  if (std::string p = detail::check_json_as_yaml(text); !p.empty()) {
    json_ok = false;
    return detail::fail_with(rule_id, std::move(p));
  }
  const simdjson::padded_string_view padded = state.pad(text);
  simdjson::ondemand::document doc;
  if (state.parser.iterate(padded).get(doc)) {
    json_ok = false;
    return detail::fail_with(rule_id, "invalid JSON");
  }
  json_builder b(state, text, padded.data(), rule_id, limits, style);
  // On Demand does not look past the root value. The root's raw span (found by hopping over
  // the structural index, then rewound) ends where the next token starts, or at the end of
  // the text: only white space may follow it. When the span cannot be found (the root is
  // malformed somewhere) the document is parsed again and the builder meets the problem
  // where the byte-wise scan below is the judge, as it is for every other error.
  bool tail_ok = true;
  bool ok = false;
  auto root = [&](auto get, auto build, simdjson::ondemand::document& d) {
    auto collection = get(d);
    if (collection.error()) return false;
    auto c = std::move(collection).value_unsafe();
    std::string_view span;
    if (!c.raw_json().get(span) && !c.reset().error()) {
      const auto end = static_cast<std::size_t>(span.data() + span.size() - padded.data());
      tail_ok = end >= text.size() ||
                text.find_first_not_of(" \t\r\n", end) == std::string_view::npos;
      return build(c);
    }
    simdjson::ondemand::document again;
    if (state.parser.iterate(padded).get(again)) return false;
    auto retry = get(again);
    if (retry.error()) return false;
    auto c2 = std::move(retry).value_unsafe();
    const bool built = build(c2);
    tail_ok = !built || only_white_space_after_root(text);
    return built;
  };
  simdjson::ondemand::json_type t;
  if (doc.type().get(t)) {
    b.json_ok = false;
  } else if (t == simdjson::ondemand::json_type::object) {
    ok = root([](simdjson::ondemand::document& d) { return d.get_object(); },
              [&](simdjson::ondemand::object& o) { return b.object(o, r.root, 0); }, doc);
  } else if (t == simdjson::ondemand::json_type::array) {
    ok = root([](simdjson::ondemand::document& d) { return d.get_array(); },
              [&](simdjson::ondemand::array& a) { return b.array(a, r.root, 0); }, doc);
  } else {
    b.json_ok = false;  // a bare scalar: let YAML decide
  }
  if (ok && !tail_ok) b.json_ok = false;
  if (!ok) {
    // Children of the collections left open stay in the stacks; drop them now.
    for (auto& m : state.maps) m.clear();
    for (auto& i : state.items) i.clear();
    if (b.errors.empty()) b.json_ok = false;
  }
  json_ok = b.json_ok;
  if (!json_ok) {
    r.root = doc_node{};
    return detail::fail_with(rule_id, "invalid JSON");
  }
  if (!b.errors.empty()) {
    // A decode error (a duplicate key, a limit): yaml.v3 names its line, which this
    // decoder does not track. The text is a YAML document with the same meaning (the checks
    // above hold), so the YAML decoder, which tracks lines, reports the same errors with them.
    decode_result lined = decode_yaml_styled(text, rule_id, limits, style);
    if (!lined.errors.empty()) return lined;
  }
  r.errors = std::move(b.errors);
  if (!r.errors.empty()) r.root = doc_node{};
  return r;
}

bool detail::json_text_acceptable(std::string_view text, const decode_limits& limits) {
  return text.size() <= limits.max_bytes && detail::check_yaml_characters(text, nullptr).empty() &&
         detail::check_json_as_yaml(text).empty();
}

bool detail::build_object_reusing(decoder_state& state, simdjson::ondemand::object& obj,
                                  std::string_view rest, const decode_limits& limits) {
  reuse_builder b(rest, rest.data(), limits);
  return b.object(obj, state.tree, 0);
}

bool detail::decode_json_object_reusing(decoder_state& state, std::string_view text,
                                        const decode_limits& limits) {
  // decode_json_styled's checks of the text, in the same order.
  if (!json_text_acceptable(text, limits)) return false;
  const simdjson::padded_string_view padded = state.pad(text);
  simdjson::ondemand::document doc;
  if (state.parser.iterate(padded).get(doc)) return false;
  simdjson::ondemand::json_type t;
  if (doc.type().get(t) || t != simdjson::ondemand::json_type::object) return false;
  simdjson::ondemand::object obj;
  if (doc.get_object().get(obj)) return false;
  // As decode_json_styled: only white space may follow the root's span.
  std::string_view span;
  if (obj.raw_json().get(span) || obj.reset().error()) return false;
  const auto end = static_cast<std::size_t>(span.data() + span.size() - padded.data());
  if (end < text.size() && text.find_first_not_of(" \t\r\n", end) != std::string_view::npos)
    return false;
  reuse_builder b(text, padded.data(), limits);
  return b.object(obj, state.tree, 0);
}

decode_result decode_json(json_decoder& decoder, std::string_view text, std::string_view rule_id,
                          const decode_limits& limits) {
  bool json_ok = true;
  return detail::decode_json_styled(decoder.state(), text, rule_id, limits,
                                    detail::path_style::generic, json_ok);
}

decode_result decode_json(std::string_view text, std::string_view rule_id,
                          const decode_limits& limits) {
  json_decoder decoder;
  return decode_json(decoder, text, rule_id, limits);
}

namespace {

bool looks_like_json(std::string_view text, const decode_limits& limits) {
  const std::size_t first = text.find_first_not_of(" \t\r\n");
  return first != std::string_view::npos && (text[first] == '{' || text[first] == '[') &&
         text.size() <= limits.max_bytes;
}

}  // namespace

decode_result decode_any(json_decoder& decoder, std::string_view text, std::string_view rule_id,
                         const decode_limits& limits) {
  if (looks_like_json(text, limits)) {
    bool json_ok = true;
    decode_result r = detail::decode_json_styled(decoder.state(), text, rule_id, limits,
                                                 detail::path_style::generic, json_ok);
    if (json_ok) return r;
  }
  return decode_yaml(text, rule_id, limits);
}

decode_result decode_any(std::string_view text, std::string_view rule_id,
                         const decode_limits& limits) {
  if (!looks_like_json(text, limits)) return decode_yaml(text, rule_id, limits);
  json_decoder decoder;
  return decode_any(decoder, text, rule_id, limits);
}

}  // namespace topogate::core

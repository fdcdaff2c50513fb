#include "syntax.hpp"

#include <array>
#include <cstdio>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace topogate::core {

namespace {

// The texts apimachinery (k8s.io/apimachinery/pkg/util/validation) uses, so a message
// from topogate reads like the one the API server would print.
constexpr std::string_view qualified_name_fmt = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
constexpr std::string_view qualified_name_msg =
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character";
constexpr std::string_view label_value_fmt = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?";
constexpr std::string_view label_value_msg =
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or "
    "'.', and must start and end with an alphanumeric character";
constexpr std::string_view dns1123_label_fmt = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
constexpr std::string_view dns1123_label_msg =
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and "
    "must start and end with an alphanumeric character";
constexpr std::string_view dns1123_subdomain_fmt =
    "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
constexpr std::string_view dns1123_subdomain_msg =
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
    "'.', and must start and end with an alphanumeric character";

// `lead` and `tail` go before and after the message, in the same allocation (a caller
// prefixing a message would otherwise move it along a copy).
std::string regex_error(std::string_view msg, std::string_view fmt,
                        std::initializer_list<std::string_view> examples,
                        std::string_view lead = {}, std::string_view tail = {}) {
  std::string out;
  std::size_t size = lead.size() + msg.size() + fmt.size() + tail.size() + 48;
  for (auto ex : examples) size += ex.size() + 8;
  out.reserve(size);
  out += lead;
  out += msg;
  if (examples.size() != 0) {
    out += " (e.g. ";
    bool first = true;
    for (auto ex : examples) {
      if (!first) out += ", or ";
      first = false;
      out += '\'';
      out += ex;
      out += '\'';
    }
    out += ", regex used for validation is '";
  } else {
    out += " (regex used for validation is '";
  }
  out += fmt;
  out += "')";
  out += tail;
  return out;
}

std::string max_len_error(std::size_t n, std::string_view lead = {}) {
  constexpr std::string_view head = "must be no more than ", end = " characters";
  const std::string digits = std::to_string(n);
  std::string out;
  out.reserve(lead.size() + head.size() + digits.size() + end.size());
  out += lead;
  out += head;
  out += digits;
  out += end;
  return out;
}

// One table lookup per byte: these run for every label key and value of every snapshot.
enum char_class : std::uint8_t {
  cls_alnum = 1,        // [A-Za-z0-9]
  cls_lower_alnum = 2,  // [a-z0-9]
  cls_name_extra = 4,   // [-_.]
};

constexpr std::array<std::uint8_t, 256> char_classes = [] {
  std::array<std::uint8_t, 256> t{};
  for (int c = 'a'; c <= 'z'; ++c) t[static_cast<std::size_t>(c)] = cls_alnum | cls_lower_alnum;
  for (int c = '0'; c <= '9'; ++c) t[static_cast<std::size_t>(c)] = cls_alnum | cls_lower_alnum;
  for (int c = 'A'; c <= 'Z'; ++c) t[static_cast<std::size_t>(c)] = cls_alnum;
  for (char c : {'-', '_', '.'}) t[static_cast<std::size_t>(c)] = cls_name_extra;
  return t;
}();

constexpr bool has_class(char c, std::uint8_t cls) noexcept {
  return (char_classes[static_cast<unsigned char>(c)] & cls) != 0;
}
constexpr bool is_alnum(char c) noexcept { return has_class(c, cls_alnum); }

// ([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9] — non-empty.
bool matches_qualified_name_part(std::string_view s) noexcept {
  if (s.empty() || !is_alnum(s.front()) || !is_alnum(s.back())) return false;
  for (char c : s) {
    if (!has_class(c, cls_alnum | cls_name_extra)) return false;
  }
  return true;
}

// [a-z0-9]([-a-z0-9]*[a-z0-9])? — non-empty; no length limit (the caller checks that).
bool matches_dns1123_label(std::string_view s) noexcept {
  if (s.empty() || !has_class(s.front(), cls_lower_alnum) ||
      !has_class(s.back(), cls_lower_alnum)) {
    return false;
  }
  for (char c : s) {
    if (!has_class(c, cls_lower_alnum) && c != '-') return false;
  }
  return true;
}

// Labels of the above joined by single dots, in one pass; the total length is the
// caller's concern.
bool matches_dns1123_subdomain(std::string_view s) noexcept {
  char prev = '.';  // as if a label had just ended
  for (char c : s) {
    if (c == '.') {
      if (prev == '.' || prev == '-') return false;  // empty label, or one ending in '-'
    } else if (c == '-') {
      if (prev == '.') return false;  // a label starting with '-'
    } else if (!has_class(c, cls_lower_alnum)) {
      return false;
    }
    prev = c;
  }
  return prev != '.' && prev != '-';  // also rejects the empty string
}

// check_dns1123_subdomain's messages, each after `lead`, appended to errs.
void add_dns1123_subdomain_errors(std::vector<std::string>& errs, std::string_view s,
                                  std::string_view lead) {
  if (s.size() > max_dns1123_subdomain_length)
    errs.push_back(max_len_error(max_dns1123_subdomain_length, lead));
  if (!matches_dns1123_subdomain(s))
    errs.push_back(regex_error(dns1123_subdomain_msg, dns1123_subdomain_fmt, {"example.com"}, lead));
}

}  // namespace

std::vector<std::string> detail::dns1123_subdomain_errors(std::string_view s) {
  std::vector<std::string> errs;
  add_dns1123_subdomain_errors(errs, s, {});
  return errs;
}

std::vector<std::string> check_dns1123_label(std::string_view s) {
  std::vector<std::string> errs;
  if (s.size() > max_dns1123_label_length) errs.push_back(max_len_error(max_dns1123_label_length));
  if (!matches_dns1123_label(s))
    errs.push_back(regex_error(dns1123_label_msg, dns1123_label_fmt, {"my-name", "123-abc"}));
  return errs;
}

std::vector<std::string> detail::qualified_name_errors(std::string_view key) {
  // apimachinery splits on every '/': more than one makes the whole key malformed.
  std::vector<std::string> errs;
  std::string_view name = key;
  const std::size_t slash = key.find('/');
  if (slash != std::string_view::npos) {
    if (key.find('/', slash + 1) != std::string_view::npos) {
      errs.push_back(regex_error(
          qualified_name_msg, qualified_name_fmt, {"MyName", "my.name", "123-abc"},
          "a qualified name ",
          " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"));
      return errs;
    }
    const std::string_view prefix = key.substr(0, slash);
    name = key.substr(slash + 1);
    if (prefix.empty()) {
      errs.emplace_back("prefix part must be non-empty");
    } else {
      add_dns1123_subdomain_errors(errs, prefix, "prefix part ");
    }
  }
  if (name.empty()) {
    errs.emplace_back("name part must be non-empty");
  } else if (name.size() > max_label_name_length) {
    errs.push_back(max_len_error(max_label_name_length, "name part "));
  }
  if (!matches_qualified_name_part(name)) {
    errs.push_back(regex_error(qualified_name_msg, qualified_name_fmt,
                               {"MyName", "my.name", "123-abc"}, "name part "));
  }
  return errs;
}

std::vector<std::string> detail::label_value_errors(std::string_view value) {
  std::vector<std::string> errs;
  if (value.size() > max_label_value_length) errs.push_back(max_len_error(max_label_value_length));
  if (!value.empty() && !matches_qualified_name_part(value))
    errs.push_back(regex_error(label_value_msg, label_value_fmt, {"MyValue", "my_value", "12345"}));
  return errs;
}

#if defined(__SSE2__)
namespace {

// The fast predicates test names of 16 to 64 bytes (most label keys, and many names) on bit
// masks of their byte classes, sixteen bytes at a time; shorter ones (most label values) are
// cheaper byte by byte, and longer ones take the byte-wise matchers above too. Bit i of each
// mask stands for byte i.
struct name_masks {
  std::uint64_t lower_alnum = 0;  // [a-z0-9]
  std::uint64_t upper = 0;        // [A-Z]
  std::uint64_t dot = 0, dash = 0, underscore = 0, slash = 0;
};

constexpr std::size_t mask_bytes = 64;
constexpr bool masked(std::size_t n) noexcept { return n >= 16 && n <= mask_bytes; }

constexpr std::uint64_t low_bits(std::size_t n) noexcept {
  return n >= 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << n) - 1;
}

// The masks of `s`, which holds 16 to 64 bytes (masked()).
name_masks classify(std::string_view s) noexcept {
  name_masks m;
  const std::size_t n = s.size();
  const __m128i a1 = _mm_set1_epi8('a' - 1), z1 = _mm_set1_epi8('z' + 1),
                d1 = _mm_set1_epi8('0' - 1), n1 = _mm_set1_epi8('9' + 1),
                u1 = _mm_set1_epi8('A' - 1), uz = _mm_set1_epi8('Z' + 1), dot = _mm_set1_epi8('.'),
                dash = _mm_set1_epi8('-'), under = _mm_set1_epi8('_'), slash = _mm_set1_epi8('/');
  // Signed compares: bytes >= 0x80 are negative and fall in none of the ranges.
  const auto range = [](__m128i v, __m128i below, __m128i above) {
    return _mm_and_si128(_mm_cmpgt_epi8(v, below), _mm_cmplt_epi8(v, above));
  };
  const auto bits = [](__m128i v) {
    return static_cast<std::uint64_t>(static_cast<unsigned>(_mm_movemask_epi8(v)) & 0xffffu);
  };
  // Bytes [at, at + 16) read from `v`, of which the first `skip` are not ours (already seen).
  const auto add = [&](__m128i v, std::size_t at, std::size_t skip) {
    const auto place = [&](std::uint64_t b) { return (b >> skip) << at; };
    m.lower_alnum |= place(bits(_mm_or_si128(range(v, a1, z1), range(v, d1, n1))));
    m.upper |= place(bits(range(v, u1, uz)));
    m.dot |= place(bits(_mm_cmpeq_epi8(v, dot)));
    m.dash |= place(bits(_mm_cmpeq_epi8(v, dash)));
    m.underscore |= place(bits(_mm_cmpeq_epi8(v, under)));
    m.slash |= place(bits(_mm_cmpeq_epi8(v, slash)));
  };
  std::size_t at = 0;
  for (; at + 16 <= n; at += 16)
    add(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s.data() + at)), at, 0);
  if (at < n) {
    // The last sixteen bytes (n >= 16), overlapping those already seen.
    add(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s.data() + n - 16)), at, 16 - (n - at));
  }
  return m;
}

// The bytes [from, from + n) of masks taken over the whole text.
name_masks slice(const name_masks& m, std::size_t from, std::size_t n) noexcept {
  const std::uint64_t keep = low_bits(n);
  const auto cut = [&](std::uint64_t x) { return from >= 64 ? 0 : (x >> from) & keep; };
  return {cut(m.lower_alnum), cut(m.upper), cut(m.dot), cut(m.dash), cut(m.underscore),
          cut(m.slash)};
}

// matches_dns1123_subdomain on n bytes: only [a-z0-9.-], alphanumeric at both ends, and no
// '.' followed by '.' or '-', no '-' followed by '.' (every label non-empty, starting and
// ending with an alphanumeric).
bool subdomain_bits(const name_masks& m, std::size_t n) noexcept {
  if (n == 0) return false;
  const std::uint64_t all = low_bits(n);
  if ((m.lower_alnum | m.dot | m.dash) != all) return false;
  if ((m.lower_alnum & 1) == 0 || ((m.lower_alnum >> (n - 1)) & 1) == 0) return false;
  return (m.dot & ((m.dot | m.dash) >> 1)) == 0 && (m.dash & (m.dot >> 1)) == 0;
}

// matches_qualified_name_part on n bytes: only [-A-Za-z0-9_.], alphanumeric at both ends.
bool name_part_bits(const name_masks& m, std::size_t n) noexcept {
  if (n == 0) return false;
  const std::uint64_t alnum = m.lower_alnum | m.upper;
  if ((alnum | m.dot | m.dash | m.underscore) != low_bits(n)) return false;
  return (alnum & 1) != 0 && ((alnum >> (n - 1)) & 1) != 0;
}

}  // namespace
#endif

bool is_qualified_name(std::string_view key) noexcept {
#if defined(__SSE2__)
  if (masked(key.size())) {
    const name_masks m = classify(key);
    if (m.slash == 0) return key.size() <= max_label_name_length && name_part_bits(m, key.size());
    const auto slash = static_cast<std::size_t>(__builtin_ctzll(m.slash));
    if ((m.slash & (m.slash - 1)) != 0) return false;  // a second '/'
    const std::size_t name_size = key.size() - slash - 1;
    return subdomain_bits(slice(m, 0, slash), slash) && name_size <= max_label_name_length &&
           name_part_bits(slice(m, slash + 1, name_size), name_size);
  }
#endif
  std::string_view name = key;
  const std::size_t slash = key.find('/');
  if (slash != std::string_view::npos) {
    const std::string_view prefix = key.substr(0, slash);
    name = key.substr(slash + 1);
    if (prefix.size() > max_dns1123_subdomain_length || !matches_dns1123_subdomain(prefix))
      return false;
    if (name.find('/') != std::string_view::npos) return false;
  }
  return name.size() <= max_label_name_length && matches_qualified_name_part(name);
}

bool is_label_value(std::string_view value) noexcept {
#if defined(__SSE2__)
  if (masked(value.size())) {
    return value.size() <= max_label_value_length && name_part_bits(classify(value), value.size());
  }
#endif
  return value.size() <= max_label_value_length &&
         (value.empty() || matches_qualified_name_part(value));
}

bool is_dns1123_subdomain(std::string_view s) noexcept {
#if defined(__SSE2__)
  if (masked(s.size())) return subdomain_bits(classify(s), s.size());
#endif
  return s.size() <= max_dns1123_subdomain_length && matches_dns1123_subdomain(s);
}

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

namespace {

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

bool fail(std::string* error, std::string msg) {
  if (error) *error = std::move(msg);
  return false;
}

constexpr bool is_digit(char c) noexcept { return c >= '0' && c <= '9'; }

}  // namespace

std::optional<std::chrono::nanoseconds> parse_go_duration(std::string_view s, std::string* error) {
  const std::string_view orig = s;
  auto invalid = [&](std::string_view what) {
    fail(error, "time: " + std::string(what) + " " + go_quote(orig));
    return std::nullopt;
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

// ---------------------------------------------------------------------------------------
// net/url.Parse

namespace {

// s.rfind(c), with a forward memchr first: most hosts hold no '[', '@' or ':', and
// string_view's rfind walks back byte by byte.
std::size_t last_of(std::string_view s, char c) noexcept {
  if (s.empty() || std::memchr(s.data(), c, s.size()) == nullptr) return std::string_view::npos;
  return s.rfind(c);
}

constexpr bool is_hex(char c) noexcept {
  return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}
constexpr unsigned hex_value(char c) noexcept {
  if (is_digit(c)) return static_cast<unsigned>(c - '0');
  if (c >= 'a' && c <= 'f') return static_cast<unsigned>(c - 'a' + 10);
  return static_cast<unsigned>(c - 'A' + 10);
}

// Characters net/url leaves unescaped in a host (RFC 3986 reg-name, plus ':' for the
// port, '[' ']' for IP literals and '<' '>' '"', which Go tolerates there).
constexpr bool host_char_ok(char c) noexcept {
  if (is_alnum(c)) return true;
  switch (c) {
    case '-':
    case '_':
    case '.':
    case '~':
    case '!':
    case '$':
    case '&':
    case '\'':
    case '(':
    case ')':
    case '*':
    case '+':
    case ',':
    case ';':
    case '=':
    case ':':
    case '[':
    case ']':
    case '<':
    case '>':
    case '"':
      return true;
    default:
      return false;
  }
}

// Bytes a host holds as they are: what host_char_ok allows, and every non-ASCII byte.
constexpr std::array<bool, 256> host_plain = [] {
  std::array<bool, 256> t{};
  for (int c = 0; c < 256; ++c)
    t[static_cast<std::size_t>(c)] = c >= 0x80 || (c != '%' && host_char_ok(static_cast<char>(c)));
  return t;
}();

enum class escape_mode { path, host, zone, user_password, fragment };

// Go's unescape(): every '%' needs two hex digits; in a host a %-escape may only encode a
// non-ASCII byte (or be "%25"), and raw ASCII that a host may not contain is rejected.
bool unescape(std::string_view s, escape_mode mode, std::string& out, std::string* error) {
  // Most URLs have no escape and nothing a host may not hold: checked, then copied at once.
  const bool host_like = mode == escape_mode::host || mode == escape_mode::zone;
  bool plain = false;
  if (!host_like) {
    plain = s.find('%') == std::string_view::npos;
  } else {
    std::size_t i = 0;
    while (i < s.size() && host_plain[static_cast<unsigned char>(s[i])]) ++i;
    plain = i == s.size();
  }
  if (plain) {
    out.assign(s.data(), s.size());
    return true;
  }
  out.clear();
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size();) {
    const char c = s[i];
    if (c == '%') {
      if (i + 2 >= s.size() || !is_hex(s[i + 1]) || !is_hex(s[i + 2])) {
        return fail(error, "invalid URL escape " + go_quote(s.substr(i, 3)));
      }
      const auto v = static_cast<unsigned char>(hex_value(s[i + 1]) << 4 | hex_value(s[i + 2]));
      const bool is_pct25 = s.substr(i, 3) == "%25";
      if (mode == escape_mode::host && hex_value(s[i + 1]) < 8 && !is_pct25) {
        return fail(error, "invalid URL escape " + go_quote(s.substr(i, 3)));
      }
      if (mode == escape_mode::zone && !is_pct25 && v != ' ' &&
          !host_char_ok(static_cast<char>(v))) {
        return fail(error, "invalid URL escape " + go_quote(s.substr(i, 3)));
      }
      out.push_back(static_cast<char>(v));
      i += 3;
      continue;
    }
    if ((mode == escape_mode::host || mode == escape_mode::zone) &&
        static_cast<unsigned char>(c) < 0x80 && !host_char_ok(c)) {
      return fail(error, "invalid character " + go_quote(s.substr(i, 1)) + " in host name");
    }
    out.push_back(c);
    ++i;
  }
  return true;
}

// ":" followed by digits, or nothing.
bool valid_optional_port(std::string_view port) noexcept {
  if (port.empty()) return true;
  if (port[0] != ':') return false;
  for (char c : port.substr(1)) {
    if (!is_digit(c)) return false;
  }
  return true;
}

// netip.ParseAddr's dotted quad: four decimal octets, no leading zeros.
bool parse_ipv4_fields(std::string_view s) noexcept {
  int val = 0;
  int fields = 0;
  int digits = 0;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (is_digit(c)) {
      if (digits == 1 && val == 0) return false;
      val = val * 10 + (c - '0');
      ++digits;
      if (val > 255) return false;
    } else if (c == '.') {
      if (i == 0 || i == s.size() - 1 || s[i - 1] == '.') return false;
      if (fields == 3) return false;
      ++fields;
      val = 0;
      digits = 0;
    } else {
      return false;
    }
  }
  return fields == 3;
}

// netip.ParseAddr restricted to what may sit inside brackets: an IPv6 address (optionally
// with a non-empty zone); IPv4 or anything else is refused.
bool is_bracketable_ipv6(std::string_view in) noexcept {
  for (char c : in) {
    if (c == '.' || c == '%') return false;  // IPv4 (Is4 is refused) or a zone with no address
    if (c == ':') break;
  }
  if (in.find(':') == std::string_view::npos) return false;
  std::string_view s = in;
  if (const std::size_t pct = s.find('%'); pct != std::string_view::npos) {
    if (pct + 1 == s.size()) return false;  // zone must be non-empty
    s = s.substr(0, pct);
  }
  int groups = 0;  // 16-bit groups parsed (Go counts bytes; same thing, halved)
  bool ellipsis = false;
  if (s.size() >= 2 && s[0] == ':' && s[1] == ':') {
    ellipsis = true;
    s.remove_prefix(2);
    if (s.empty()) return true;
  }
  while (groups < 8) {
    std::size_t off = 0;
    unsigned acc = 0;
    for (; off < s.size() && is_hex(s[off]); ++off) {
      if (off > 3) return false;
      acc = (acc << 4) + hex_value(s[off]);
    }
    if (off == 0) return false;
    if (off < s.size() && s[off] == '.') {
      // A trailing dotted quad replaces the last two groups.
      if (!ellipsis && groups != 6) return false;
      if (groups + 2 > 8) return false;
      if (!parse_ipv4_fields(s)) return false;
      s = {};
      groups += 2;
      break;
    }
    ++groups;
    s.remove_prefix(off);
    if (s.empty()) break;
    if (s[0] != ':' || s.size() == 1) return false;
    s.remove_prefix(1);
    if (s[0] == ':') {
      if (ellipsis) return false;
      ellipsis = true;
      s.remove_prefix(1);
      if (s.empty()) break;
    }
  }
  if (!s.empty()) return false;
  if (groups < 8) return ellipsis;
  return !ellipsis;  // "::" must stand for at least one group
}

// Go's parseHost: host[:port] or [ipv6]:port, then the host-mode unescape.
bool parse_host(std::string_view scheme_lower, std::string_view host, std::string& out,
                std::string* error) {
  const std::size_t open = last_of(host, '[');
  if (open != std::string_view::npos && open > 0) return fail(error, "invalid IP-literal");
  if (open == 0) {
    const std::size_t close = host.rfind(']');
    if (close == std::string_view::npos) return fail(error, "missing ']' in host");
    const std::string_view colon_port = host.substr(close + 1);
    if (!valid_optional_port(colon_port)) {
      return fail(error, "invalid port " + go_quote(colon_port) + " after host");
    }
    const std::string_view hostname = host.substr(1, close - 1);
    std::string unescaped;
    const std::size_t zone = hostname.find("%25");
    if (zone != std::string_view::npos) {
      std::string host_part;
      std::string zone_part;
      if (!unescape(hostname.substr(0, zone), escape_mode::host, host_part, error)) return false;
      if (!unescape(hostname.substr(zone), escape_mode::zone, zone_part, error)) return false;
      unescaped = host_part + zone_part;
    } else if (!unescape(hostname, escape_mode::host, unescaped, error)) {
      return false;
    }
    if (!is_bracketable_ipv6(unescaped)) return fail(error, "invalid host: " + go_quote(unescaped));
    out = "[" + unescaped + "]" + std::string(colon_port);
    return true;
  }
  if (const std::size_t first = host.find(':'); first != std::string_view::npos) {
    std::size_t i = first;
    // Go refuses extra colons in http(s) hosts; other schemes keep the last one as the port.
    if (scheme_lower != "http" && scheme_lower != "https") i = host.rfind(':');
    const std::string_view colon_port = host.substr(i);
    if (!valid_optional_port(colon_port)) {
      return fail(error, "invalid port " + go_quote(colon_port) + " after host");
    }
  }
  return unescape(host, escape_mode::host, out, error);
}

// RFC 3986 userinfo characters (Go also tolerates '@' inside it).
bool valid_userinfo(std::string_view s) noexcept {
  for (char c : s) {
    if (is_alnum(c)) continue;
    switch (c) {
      case '-':
      case '.':
      case '_':
      case ':':
      case '~':
      case '!':
      case '$':
      case '&':
      case '\'':
      case '(':
      case ')':
      case '*':
      case '+':
      case ',':
      case ';':
      case '=':
      case '%':
      case '@':
        continue;
      default:
        return false;
    }
  }
  return true;
}

std::string to_lower_ascii(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

}  // namespace

std::optional<parsed_url> parse_url(std::string_view raw, std::string* error) {
  parsed_url url;
  const std::size_t hash = raw.find('#');
  std::string_view u = raw.substr(0, hash);
  const std::string_view frag =
      hash == std::string_view::npos ? std::string_view{} : raw.substr(hash + 1);

  for (char c : u) {
    const auto b = static_cast<unsigned char>(c);
    if (b < 0x20 || b == 0x7f) {
      fail(error, "net/url: invalid control character in URL");
      return std::nullopt;
    }
  }
  if (u == "*") {
    url.path = "*";
  } else {
    // Scheme: [a-zA-Z][a-zA-Z0-9+.-]* followed by ':'.
    std::string_view rest = u;
    for (std::size_t i = 0; i < u.size(); ++i) {
      const char c = u[i];
      if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) continue;
      if (is_digit(c) || c == '+' || c == '-' || c == '.') {
        if (i == 0) break;
        continue;
      }
      if (c == ':') {
        if (i == 0) {
          fail(error, "missing protocol scheme");
          return std::nullopt;
        }
        url.scheme = std::string(u.substr(0, i));
        rest = u.substr(i + 1);
      }
      break;
    }
    const std::string scheme_lower = to_lower_ascii(url.scheme);

    const std::size_t q = rest.find('?');
    if (q != std::string_view::npos) {
      url.raw_query = std::string(rest.substr(q + 1));
      rest = rest.substr(0, q);
    }

    bool opaque = false;
    if (rest.empty() || rest[0] != '/') {
      if (!url.scheme.empty()) {
        opaque = true;  // "https:host/path": a rootless, opaque URL with no host
      } else {
        const std::string_view segment = rest.substr(0, rest.find('/'));
        if (segment.find(':') != std::string_view::npos) {
          fail(error, "first path segment in URL cannot contain colon");
          return std::nullopt;
        }
      }
    }
    if (!opaque) {
      if ((!url.scheme.empty() || rest.substr(0, 3) != "///") && rest.substr(0, 2) == "//") {
        std::string_view authority = rest.substr(2);
        rest = {};
        if (const std::size_t slash = authority.find('/'); slash != std::string_view::npos) {
          rest = authority.substr(slash);
          authority = authority.substr(0, slash);
        }
        const std::size_t at = last_of(authority, '@');
        std::string host;
        if (!parse_host(scheme_lower,
                        at == std::string_view::npos ? authority : authority.substr(at + 1), host,
                        error)) {
          return std::nullopt;
        }
        if (at != std::string_view::npos) {
          const std::string_view userinfo = authority.substr(0, at);
          if (!valid_userinfo(userinfo)) {
            fail(error, "net/url: invalid userinfo");
            return std::nullopt;
          }
          std::string scratch;
          const std::size_t colon = userinfo.find(':');
          if (!unescape(userinfo.substr(0, colon), escape_mode::user_password, scratch, error))
            return std::nullopt;
          if (colon != std::string_view::npos &&
              !unescape(userinfo.substr(colon + 1), escape_mode::user_password, scratch, error)) {
            return std::nullopt;
          }
          url.has_user_info = true;
        }
        // Hostname()/Port(): a trailing ":digits" is the port; brackets are dropped.
        std::string_view h = host;
        if (const std::size_t colon = last_of(h, ':');
            colon != std::string_view::npos && valid_optional_port(h.substr(colon))) {
          url.port = std::string(h.substr(colon + 1));
          h = h.substr(0, colon);
        }
        if (h.size() >= 2 && h.front() == '[' && h.back() == ']') h = h.substr(1, h.size() - 2);
        if (h.size() == host.size()) url.host = std::move(host);
        else url.host = std::string(h);
      }
      if (!unescape(rest, escape_mode::path, url.path, error)) return std::nullopt;
    }
  }
  if (!frag.empty() && !unescape(frag, escape_mode::fragment, url.fragment, error))
    return std::nullopt;
  return url;
}

}  // namespace topogate::core

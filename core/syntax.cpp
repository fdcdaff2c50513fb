// apimachinery's name rules (IsQualifiedName, IsValidLabelValue, IsDNS1123Subdomain,
// IsDNS1123Label) with its messages, and the fast predicates the hot paths ask first. Go's
// strings.TrimSpace and durations are in syntax_go.cpp, net/url in syntax_url.cpp.

#include "syntax.hpp"

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "syntax_internal.hpp"

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

// One table lookup per byte (syntax_internal.hpp): these run for every label key and value
// of every snapshot.
using detail::cls_alnum;
using detail::cls_lower_alnum;
using detail::cls_name_extra;
using detail::has_class;
using detail::is_alnum;

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
    errs.push_back(
        regex_error(dns1123_subdomain_msg, dns1123_subdomain_fmt, {"example.com"}, lead));
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
  return {cut(m.lower_alnum), cut(m.upper),      cut(m.dot),
          cut(m.dash),        cut(m.underscore), cut(m.slash)};
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

}  // namespace topogate::core

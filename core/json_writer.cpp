#include "core/json_writer.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <iterator>

#include "core/json_writer_internal.hpp"

namespace topogate::core {

using json_detail::append_json_go_quoted_escaped;
using json_detail::plain_prefix;
#if defined(__SSE2__)
using json_detail::not_plain_mask;
#else
using json_detail::plain_bytes;
#endif

namespace {

// Valid runes Go's strconv.IsPrint calls not printable and that Unicode assigns (Go 1.21+,
// Unicode 15.0): the space separators but U+0020, the line and paragraph separators, the
// C1 controls, the format characters and the private-use planes. Sorted, disjoint.
struct rune_range {
  std::uint32_t first, last;
};
constexpr rune_range go_not_printable[] = {
    {0x80, 0xa0},       {0xad, 0xad},       {0x600, 0x605},       {0x61c, 0x61c},
    {0x6dd, 0x6dd},     {0x70f, 0x70f},     {0x890, 0x891},       {0x8e2, 0x8e2},
    {0x1680, 0x1680},   {0x180e, 0x180e},   {0x2000, 0x200f},     {0x2028, 0x202f},
    {0x205f, 0x2064},   {0x2066, 0x206f},   {0x3000, 0x3000},     {0xe000, 0xf8ff},
    {0xfeff, 0xfeff},   {0xfff9, 0xfffb},   {0x110bd, 0x110bd},   {0x110cd, 0x110cd},
    {0x13430, 0x1343f}, {0x1bca0, 0x1bca3}, {0x1d173, 0x1d17a},   {0xe0001, 0xe0001},
    {0xe0020, 0xe007f}, {0xf0000, 0xffffd}, {0x100000, 0x10fffd},
};

bool go_printable(std::uint32_t cp) noexcept {
  const auto* it =
      std::upper_bound(std::begin(go_not_printable), std::end(go_not_printable), cp,
                       [](std::uint32_t c, const rune_range& r) { return c < r.first; });
  return it == std::begin(go_not_printable) || cp > std::prev(it)->last;
}

// The length of the UTF-8 sequence starting p[0] (n bytes available) as Go's
// utf8.DecodeRuneInString accepts it, its code point in `cp`; 0 when Go decodes an error
// (an invalid or cut-off sequence, an overlong form, a surrogate, beyond U+10FFFF).
std::size_t go_decode_rune(const unsigned char* p, std::size_t n, std::uint32_t& cp) noexcept {
  const unsigned c = p[0];
  std::size_t len = 0;
  unsigned lo = 0x80, hi = 0xbf;  // the second byte's range
  if (c >= 0xc2 && c <= 0xdf) {
    len = 2;
    cp = c & 0x1f;
  } else if (c >= 0xe0 && c <= 0xef) {
    len = 3;
    cp = c & 0x0f;
    if (c == 0xe0) lo = 0xa0;
    if (c == 0xed) hi = 0x9f;
  } else if (c >= 0xf0 && c <= 0xf4) {
    len = 4;
    cp = c & 0x07;
    if (c == 0xf0) lo = 0x90;
    if (c == 0xf4) hi = 0x8f;
  }
  if (len == 0 || n < len || p[1] < lo || p[1] > hi) return 0;
  for (std::size_t j = 1; j < len; ++j) {
    if ((p[j] & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (p[j] & 0x3f);
  }
  return len;
}

}  // namespace

// Go's %q for a string (strconv.Quote): printable runes as they are, \a \b \f \n \r \t \v,
// \" and \\, other ASCII controls and each byte of an invalid sequence as \xXX, other runes
// that are not printable as \uXXXX or \UXXXXXXXX. One difference is left: Go also escapes the
// code points Unicode leaves unassigned (some 700 ranges); they pass through here.
void append_go_quoted(std::string& out, std::string_view s) {
  static constexpr char hex[] = "0123456789abcdef";
  out.push_back('"');
  const auto* const p = reinterpret_cast<const unsigned char*>(s.data());
  for (std::size_t i = 0; i < s.size(); ++i) {
    // Runs of bytes that go out as they are, appended at once (a non-ASCII byte ends a
    // JSON-plain run, and is looked at below).
    if (const std::size_t run = plain_prefix(s.data() + i, s.size() - i); run != 0) {
      out.append(s.data() + i, run);
      i += run - 1;
      continue;
    }
    const unsigned c = p[i];
    switch (c) {
      case '"':
        out += "\\\"";
        continue;
      case '\\':
        out += "\\\\";
        continue;
      case '\a':
        out += "\\a";
        continue;
      case '\b':
        out += "\\b";
        continue;
      case '\f':
        out += "\\f";
        continue;
      case '\n':
        out += "\\n";
        continue;
      case '\r':
        out += "\\r";
        continue;
      case '\t':
        out += "\\t";
        continue;
      case '\v':
        out += "\\v";
        continue;
      default:
        break;
    }
    std::uint32_t cp = 0;
    const std::size_t len = c < 0x80 ? 0 : go_decode_rune(p + i, s.size() - i, cp);
    if (len == 0) {
      // An ASCII control or DEL, or a byte Go cannot decode.
      const char esc[] = {'\\', 'x', hex[c >> 4], hex[c & 0xf]};
      out.append(esc, sizeof esc);
    } else if (go_printable(cp)) {
      out.append(s.data() + i, len);  // UTF-8 passes through
      i += len - 1;
    } else {
      const int digits = cp < 0x10000 ? 4 : 8;
      out += digits == 4 ? "\\u" : "\\U";
      for (int shift = 4 * (digits - 1); shift >= 0; shift -= 4)
        out.push_back(hex[(cp >> shift) & 0xf]);
      i += len - 1;
    }
  }
  out.push_back('"');
}

// append_json_go_quoted for a text with something to escape: apart, so that the callers'
// plain case (nearly every name and value) stays small.
[[gnu::noinline]] void json_detail::append_json_go_quoted_escaped(std::string& out,
                                                                  std::string_view s) {
  std::string quoted;
  append_go_quoted(quoted, s);
  append_json_chars(out, quoted);
}

namespace {

// append_json_chars from the first byte that is not plain on. Apart, so that a text with
// nothing to escape (most names, paths and rule ids) does not pay for setting up its buffer.
[[gnu::noinline]] void append_json_escaped(std::string& out, std::string_view s) {
  static constexpr char hex[] = "0123456789abcdef";
  // The output is assembled in a stack buffer and appended in blocks: messages quote values
  // and patterns, and one append per escape would cost more than the escaping itself.
  constexpr std::size_t block = 512;
  char buf[block + 32];  // one 16-byte store or one escape may start below `block`
  std::size_t w = 0;
  const auto u_escape = [&](std::uint32_t cp) {
    buf[w++] = '\\';
    buf[w++] = 'u';
    for (int shift = 12; shift >= 0; shift -= 4) buf[w++] = hex[(cp >> shift) & 0xf];
  };
  const char* const p = s.data();
  const std::size_t n = s.size();
  std::size_t i = 0;
  while (i < n) {
    if (w >= block) {
      out.append(buf, w);
      w = 0;
    }
    // A run of bytes that go out as they are: printable ASCII other than '"' and '\\'.
#if defined(__SSE2__)
    {
      // Sixteen bytes are stored whatever they hold; the first byte that is not plain ends
      // the run exactly, and what was stored past it is overwritten. The last bytes (and a
      // short text) are read from a zeroed copy: a zero byte is not plain, so the run stops
      // at the end of the text.
      __m128i v;
      if (i + 16 <= n) {
        v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + i));
      } else {
        alignas(16) char tail[16] = {};
        std::memcpy(tail, p + i, n - i);
        v = _mm_load_si128(reinterpret_cast<const __m128i*>(tail));
      }
      _mm_storeu_si128(reinterpret_cast<__m128i*>(buf + w), v);
      const unsigned mask = not_plain_mask(v);
      if (mask == 0) {
        i += 16;
        w += 16;
        continue;
      }
      const auto k = static_cast<std::size_t>(__builtin_ctz(mask));
      i += k;
      w += k;
      if (i >= n) break;
    }
#else
    {
      const std::size_t stop = std::min(n, i + 16);
      while (i < stop && plain_bytes[static_cast<unsigned char>(p[i])]) buf[w++] = p[i++];
      if (i == stop) continue;
    }
#endif
    const auto c = static_cast<unsigned char>(p[i]);
    if (c < 0x80) {
      switch (c) {
        case '"':
          buf[w++] = '\\';
          buf[w++] = '"';
          break;
        case '\\':
          buf[w++] = '\\';
          buf[w++] = '\\';
          break;
        case '\n':
          buf[w++] = '\\';
          buf[w++] = 'n';
          break;
        case '\r':
          buf[w++] = '\\';
          buf[w++] = 'r';
          break;
        case '\t':
          buf[w++] = '\\';
          buf[w++] = 't';
          break;
        default:
          if (c < 0x20 || c == 0x7f)
            u_escape(c);
          else
            buf[w++] = static_cast<char>(c);
      }
      ++i;
      continue;
    }
    // Decode one UTF-8 sequence, strictly (no overlongs, no surrogates, <= U+10FFFF).
    std::size_t len = 0;
    std::uint32_t cp = 0;
    if (c >= 0xc2 && c <= 0xdf) {
      len = 2;
      cp = c & 0x1f;
    } else if (c >= 0xe0 && c <= 0xef) {
      len = 3;
      cp = c & 0x0f;
    } else if (c >= 0xf0 && c <= 0xf4) {
      len = 4;
      cp = c & 0x07;
    }
    bool ok = len != 0 && i + len <= n;
    for (std::size_t j = 1; ok && j < len; ++j) {
      const auto cc = static_cast<unsigned char>(p[i + j]);
      if ((cc & 0xc0) != 0x80) ok = false;
      cp = (cp << 6) | (cc & 0x3f);
    }
    if (ok) {
      if ((len == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
          (len == 4 && (cp < 0x10000 || cp > 0x10ffff)))
        ok = false;
    }
    if (!ok) {
      u_escape(0xfffd);
      ++i;
      continue;
    }
    if ((cp >= 0x80 && cp <= 0x9f) || cp == 0x2028 || cp == 0x2029 || cp == 0xfeff ||
        cp == 0xfffe || cp == 0xffff) {
      u_escape(cp);
    } else {
      std::memcpy(buf + w, p + i, len);
      w += len;
    }
    i += len;
  }
  out.append(buf, w);
}

}  // namespace

void append_json_chars(std::string& out, std::string_view s) {
  // Escapes whatever YAML would refuse raw (the consumer decodes JSON with a YAML
  // parser): C0 and C1 controls, DEL, U+2028/9 for JavaScript readers, and invalid UTF-8
  // (replaced by U+FFFD so the output is always valid).
  //
  // Most texts (names, paths, rule ids) need no escape: appended at once.
  const std::size_t lead = plain_prefix(s.data(), s.size());
  out.append(s.data(), lead);
  if (lead != s.size()) append_json_escaped(out, s.substr(lead));
}

void append_json_string(std::string& out, std::string_view s) {
  out.push_back('"');
  append_json_chars(out, s);
  out.push_back('"');
}

void append_json_go_quoted(std::string& out, std::string_view s) {
  if (plain_prefix(s.data(), s.size()) == s.size()) {
    // Go quotes a plain text as it is, and JSON escapes only its quotes (appended with their
    // length known: strlen would cost as much as the copy of a short name).
    constexpr std::string_view quote = R"(\")";
    out.append(quote);
    out.append(s);
    out.append(quote);
    return;
  }
  append_json_go_quoted_escaped(out, s);
}

}  // namespace topogate::core

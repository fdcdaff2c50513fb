// The decoder's byte-scanning loops: yaml.v3's character rules over a whole input
// (check_yaml_characters), and the snapshot fast path's one-pass copy and scan of JSON
// (copy_plain_json, scan_json_for_yaml). SSE2, part of baseline x86-64, everywhere; AVX2 where
// the CPU has it, chosen at run time and compiled for it alone (target("avx2")), so the rest
// of the build stays baseline x86-64.

#include <emmintrin.h>
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "document_internal.hpp"

namespace topogate::core::detail {
namespace {

// libgcc fills in the CPU model before main; reading it is a load and a test.
bool cpu_has_avx2() { return __builtin_cpu_supports("avx2"); }

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
    const __m256i ok_ws =
        _mm256_or_si256(_mm256_or_si256(_mm256_cmpeq_epi8(v, nl), _mm256_cmpeq_epi8(v, cr)),
                        _mm256_cmpeq_epi8(v, tab));
    const __m256i bad = _mm256_or_si256(_mm256_andnot_si256(ok_ws, low), _mm256_cmpeq_epi8(v, c7f));
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

}  // namespace topogate::core::detail

#pragma once
// The JSON writer's fast path, shared by the writers that build on it (core/json_writer.cpp,
// core/field_error.cpp): inline, as it runs on every name, path and value written.

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace topogate::core::json_detail {

// Bytes that go out as they are: printable ASCII other than '"' and '\\'.
constexpr std::array<bool, 256> plain_bytes = [] {
  std::array<bool, 256> t{};
  for (int c = 0x20; c < 0x7f; ++c) t[static_cast<std::size_t>(c)] = c != '"' && c != '\\';
  return t;
}();

#if defined(__SSE2__)
// Bit i set when byte i of v is not plain (plain_bytes). Signed compare: bytes >= 0x80 are
// negative, so they count as "below 0x20" too.
[[gnu::always_inline]] inline unsigned not_plain_mask(__m128i v) noexcept {
  const __m128i below = _mm_cmplt_epi8(v, _mm_set1_epi8(0x20));
  const __m128i del = _mm_cmpeq_epi8(v, _mm_set1_epi8(0x7f));
  const __m128i quote = _mm_cmpeq_epi8(v, _mm_set1_epi8('"'));
  const __m128i backslash = _mm_cmpeq_epi8(v, _mm_set1_epi8('\\'));
  return static_cast<unsigned>(
      _mm_movemask_epi8(_mm_or_si128(_mm_or_si128(below, del), _mm_or_si128(quote, backslash))));
}
#endif

// The length of the run of plain bytes that starts s.
[[gnu::always_inline]] inline std::size_t plain_prefix(const char* p, std::size_t n) noexcept {
  std::size_t i = 0;
#if defined(__SSE2__)
  const auto bad_mask = [](const char* at) {
    return not_plain_mask(_mm_loadu_si128(reinterpret_cast<const __m128i*>(at)));
  };
  for (; i + 16 <= n; i += 16) {
    if (const unsigned m = bad_mask(p + i)) return i + static_cast<std::size_t>(__builtin_ctz(m));
  }
  if (i != n && n >= 16) {
    // The last sixteen bytes, overlapping the ones already seen (all plain).
    const unsigned m = bad_mask(p + n - 16) >> (16 - (n - i));
    return m ? i + static_cast<std::size_t>(__builtin_ctz(m)) : n;
  }
  if (n >= 8 && n < 16) {
    // Most paths and rule ids: the first eight bytes and the last eight (overlapping) in
    // one register, instead of a lookup per byte.
    std::uint64_t head, tail;
    std::memcpy(&head, p, 8);
    std::memcpy(&tail, p + n - 8, 8);
    const unsigned m =
        not_plain_mask(_mm_set_epi64x(static_cast<long long>(tail), static_cast<long long>(head)));
    if (m & 0xffu) return static_cast<std::size_t>(__builtin_ctz(m));
    // The last eight bytes start at n - 8; those before 8 were seen plain already.
    return m ? n - 8 + static_cast<std::size_t>(__builtin_ctz(m >> 8)) : n;
  }
#endif
  while (i < n && plain_bytes[static_cast<unsigned char>(p[i])]) ++i;
  return i;
}

// append_json_go_quoted for a text with something to escape (the plain case is inline at
// the callers).
void append_json_go_quoted_escaped(std::string& out, std::string_view s);

}  // namespace topogate::core::json_detail

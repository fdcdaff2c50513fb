#pragma once
// What the syntax checkers share: syntax.cpp (apimachinery's names), syntax_go.cpp (Go's
// strings.TrimSpace and durations) and syntax_url.cpp (Go's net/url). Included only by them.

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>

namespace topogate::core::detail {

// One table lookup per byte: these run for every label key and value of every snapshot.
enum char_class : std::uint8_t {
  cls_alnum = 1,        // [A-Za-z0-9]
  cls_lower_alnum = 2,  // [a-z0-9]
  cls_name_extra = 4,   // [-_.]
};

inline constexpr std::array<std::uint8_t, 256> char_classes = [] {
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

// The input as Go's time and net/url packages quote it in their errors.
[[nodiscard]] std::string go_quote(std::string_view s);

}  // namespace topogate::core::detail

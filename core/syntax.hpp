#pragma once
// Syntax primitives, exactly as Kubernetes apimachinery validates them
// (IsQualifiedName, IsValidLabelValue, IsDNS1123Subdomain) and as Go's
// time.ParseDuration parses durations. Each returns the list of problems as detail
// strings (empty = valid), like apimachinery's validation functions.

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "result.hpp"

namespace topogate::core {

inline constexpr std::size_t max_label_name_length = 63;
inline constexpr std::size_t max_label_value_length = 63;
inline constexpr std::size_t max_dns1123_subdomain_length = 253;
inline constexpr std::size_t max_dns1123_label_length = 63;

// Fast predicates for hot paths (snapshot validation); same answers as the checks below.
[[nodiscard]] bool is_qualified_name(std::string_view key) noexcept;
[[nodiscard]] bool is_label_value(std::string_view value) noexcept;
[[nodiscard]] bool is_dns1123_subdomain(std::string_view s) noexcept;

namespace detail {
// The messages for a name its predicate refused, worked out byte by byte.
[[nodiscard]] std::vector<std::string> qualified_name_errors(std::string_view key);
[[nodiscard]] std::vector<std::string> label_value_errors(std::string_view value);
[[nodiscard]] std::vector<std::string> dns1123_subdomain_errors(std::string_view s);
}  // namespace detail

// apimachinery's messages, one per way the name breaks its rule; none for a valid name (the
// usual case: answered by the predicate, here inline, before anything is built). A label key
// is a qualified name; a label value may be empty.
[[nodiscard]] inline std::vector<std::string> check_qualified_name(std::string_view key) {
  return is_qualified_name(key) ? std::vector<std::string>{} : detail::qualified_name_errors(key);
}
[[nodiscard]] inline std::vector<std::string> check_label_value(std::string_view value) {
  return is_label_value(value) ? std::vector<std::string>{} : detail::label_value_errors(value);
}
[[nodiscard]] inline std::vector<std::string> check_dns1123_subdomain(std::string_view s) {
  return is_dns1123_subdomain(s) ? std::vector<std::string>{} : detail::dns1123_subdomain_errors(s);
}
[[nodiscard]] std::vector<std::string> check_dns1123_label(std::string_view s);

// Go's strings.TrimSpace (Unicode White_Space: ASCII space, \t\n\v\f\r, U+0085, U+00A0,
// U+1680, U+2000..U+200A, U+2028, U+2029, U+202F, U+205F, U+3000).
[[nodiscard]] std::string_view trim_space(std::string_view s) noexcept;
[[nodiscard]] inline bool is_blank(std::string_view s) noexcept { return trim_space(s).empty(); }
// HTTP's optional whitespace (RFC 9110 OWS: spaces and horizontal tabs) around a header value
// or a list element.
[[nodiscard]] constexpr std::string_view trim_ows(std::string_view s) noexcept {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// Go time.ParseDuration; on failure errc::invalid_argument with Go's message
// ("time: invalid duration \"1d\"").
[[nodiscard]] result<std::chrono::nanoseconds> parse_go_duration(std::string_view s);

// Go time.Duration.String() ("1m30s", "10s", "0s"), for messages.
[[nodiscard]] std::string format_go_duration(std::chrono::nanoseconds d);

// Go net/url.Parse result, reduced to what T9 needs.
struct parsed_url {
  std::string scheme;  // as written
  std::string host;    // hostname without port or brackets
  std::string port;
  bool has_user_info = false;  // even empty: "https://@x"
  std::string fragment;        // after '#', empty for a bare trailing '#'
  std::string raw_query;
  std::string path;
};
// On failure errc::invalid_argument with net/url's message ("missing protocol scheme").
[[nodiscard]] result<parsed_url> parse_url(std::string_view s);

}  // namespace topogate::core

// Syntax primitives: label keys and values, DNS-1123 names, Go durations, URLs.
// Properties beyond "no crash":
// - each fast predicate agrees with its checking function (both are used in production:
//   the predicates on the snapshot hot path, the checks for messages);
// - both agree with apimachinery's regular expressions (k8s.io/apimachinery's
//   pkg/util/validation, which the consumer calls), evaluated by std::regex;
// - a parsed duration formats (Go's Duration.String) to text that parses to the same value.
#include <cstddef>
#include <cstdint>
#include <regex>
#include <string>
#include <string_view>

#include "core/syntax.hpp"
#include "fuzz_common.hpp"

namespace {

using namespace topogate;

// apimachinery's patterns (pkg/util/validation): DNS-1123 labels and subdomains, qualified names.
const std::regex& dns_label_re() {
  static const std::regex re("[a-z0-9]([-a-z0-9]*[a-z0-9])?");
  return re;
}
const std::regex& dns_subdomain_re() {
  static const std::regex re("[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*");
  return re;
}
const std::regex& label_name_re() {
  static const std::regex re("([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]");
  return re;
}
const std::regex& label_value_re() {
  static const std::regex re("(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?");
  return re;
}

bool ref_subdomain(std::string_view s) {
  return s.size() <= core::max_dns1123_subdomain_length &&
         std::regex_match(s.begin(), s.end(), dns_subdomain_re());
}
bool ref_label(std::string_view s) {
  return s.size() <= core::max_dns1123_label_length &&
         std::regex_match(s.begin(), s.end(), dns_label_re());
}
bool ref_label_value(std::string_view s) {
  return s.size() <= core::max_label_value_length &&
         std::regex_match(s.begin(), s.end(), label_value_re());
}
bool ref_qualified_name(std::string_view s) {
  std::string_view name = s;
  const auto slash = s.find('/');
  if (slash != std::string_view::npos) {
    const std::string_view prefix = s.substr(0, slash);
    name = s.substr(slash + 1);
    if (prefix.empty() || !ref_subdomain(prefix)) return false;
  }
  return !name.empty() && name.size() <= core::max_label_name_length &&
         std::regex_match(name.begin(), name.end(), label_name_re());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view s(reinterpret_cast<const char*>(data), size);

  const bool key_ok = core::check_qualified_name(s).empty();
  fuzz::check(key_ok == core::is_qualified_name(s), "check_qualified_name vs is_qualified_name", s);
  const bool value_ok = core::check_label_value(s).empty();
  fuzz::check(value_ok == core::is_label_value(s), "check_label_value vs is_label_value", s);
  const bool sub_ok = core::check_dns1123_subdomain(s).empty();
  fuzz::check(sub_ok == core::is_dns1123_subdomain(s),
              "check_dns1123_subdomain vs is_dns1123_subdomain", s);
  const bool label_ok = core::check_dns1123_label(s).empty();

  // std::regex recurses per character; bound the length so the reference cannot overflow
  // the stack (every limit checked is at most 253 + 1 + 63 bytes anyway).
  if (s.size() <= 400) {
    fuzz::check(key_ok == ref_qualified_name(s), "qualified name vs SPEC regex", s);
    fuzz::check(value_ok == ref_label_value(s), "label value vs SPEC regex", s);
    fuzz::check(sub_ok == ref_subdomain(s), "DNS-1123 subdomain vs SPEC regex", s);
    fuzz::check(label_ok == ref_label(s), "DNS-1123 label vs SPEC regex", s);
  }

  const std::string_view trimmed = core::trim_space(s);
  fuzz::check(trimmed.size() <= s.size() && trimmed.data() >= s.data() &&
                  trimmed.data() + trimmed.size() <= s.data() + s.size(),
              "trim_space returns a view inside its input", s);
  fuzz::check(core::trim_space(trimmed) == trimmed, "trim_space is idempotent", s);

  if (const auto d = core::parse_go_duration(s)) {
    const std::string text = core::format_go_duration(*d);
    const auto again = core::parse_go_duration(text);
    fuzz::check(
        again.ok() && *again == *d, "format_go_duration output parses back to the same value",
        std::string(s) + " -> " + text + " " + (again ? std::string() : again.error().message));
  } else {
    fuzz::check(!d.error().message.empty(), "a rejected duration has a message", s);
  }

  if (const auto u = core::parse_url(s)) {
    fuzz::check(u->host.size() <= s.size() && u->scheme.size() <= s.size(),
                "URL parts are bounded by the input", s);
  } else {
    fuzz::check(!u.error().message.empty(), "a rejected URL has a message", s);
  }
  return 0;
}

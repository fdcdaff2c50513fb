// doc_node, the public decoding entry points, and the error paths both decoders render.
// The rest of the decoder, by file:
//   document_yaml.cpp         YAML through yaml-cpp's events into the tree (tree_builder,
//                             declared in document_yaml_internal.hpp)
//   document_yaml_rules.cpp   the rules yaml.v3 layers on those events
//   document_json.cpp         JSON through simdjson On Demand into the same tree, and the
//                             admission path's reusing decoder (json_reuse.hpp)
//   document_scalar.cpp       yaml.v3's scalar resolution, !!binary, JSON numbers
//   document_text_checks.cpp  yaml.v3's rules on the text that the parsers do not enforce
//   document_scan.cpp         the byte-scanning loops (SSE2; AVX2 when the CPU has it)
// document_internal.hpp declares what these files share with each other and with the
// snapshot and node readers.

#include "document.hpp"

#include <algorithm>
#include <string>

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

decode_result fail_with(std::string_view rule, std::string detail) {
  decode_result r;
  field_error e = invalid(std::string(rule), "", "", std::move(detail));
  e.has_value = false;
  r.errors.push_back(std::move(e));
  return r;
}

}  // namespace detail

decode_result decode_yaml(std::string_view text, std::string_view rule_id,
                          const decode_limits& limits) {
  return detail::decode_yaml_styled(text, rule_id, limits, detail::path_style::generic);
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

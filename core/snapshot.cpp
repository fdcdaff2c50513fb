// Snapshots: decoding (S1, S10 as received) into views, by a fast path straight from
// simdjson's DOM or by the exact, yaml.v3-faithful decoder, and the public entry points. The
// rules S1-S10 are in snapshot_rules.cpp, the rendering in snapshot_render.cpp.

#include "snapshot.hpp"

#include <simdjson.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "document_internal.hpp"
#include "snapshot_internal.hpp"

namespace topogate::core {
namespace {

using detail::error_sink;
using detail::label_path;
using detail::label_ref;
using detail::node_path;
using detail::node_ref;
using detail::snapshot_ref;
using detail::validate_ref;

bool small_duplicate(const label_ref* labels, std::uint32_t count) {
  for (std::uint32_t i = 1; i < count; ++i)
    for (std::uint32_t j = 0; j < i; ++j)
      if (detail::same(labels[i].key, labels[j].key)) return true;
  return false;
}

// ---------------------------------------------------------------------------------------
// Fast path: JSON straight from simdjson's DOM into views, for the common shape only
// (known fields, string/null/bool values, no duplicates, short keys). Anything else returns
// false and the exact decoder decides, so both paths give the same answer for the same text.

// yaml.v3 reads a key longer than 1024 characters (quotes and escapes included) differently;
// a short unescaped key cannot reach that even fully escaped.
constexpr std::size_t fast_key_limit = 150;

// a < b in byte order (std::string_view's order), without a library call for short names.
bool bytes_less(std::string_view a, std::string_view b) noexcept {
  const std::size_t n = std::min(a.size(), b.size());
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    std::uint64_t x, y;
    std::memcpy(&x, a.data() + i, 8);
    std::memcpy(&y, b.data() + i, 8);
    if (x != y) return __builtin_bswap64(x) < __builtin_bswap64(y);
  }
  for (; i < n; ++i) {
    const auto x = static_cast<unsigned char>(a[i]), y = static_cast<unsigned char>(b[i]);
    if (x != y) return x < y;
  }
  return a.size() < b.size();
}

// simdjson's DOM tape read directly (its documented layout: one 64-bit word per scalar, the
// type in the top byte; strings as an offset into the string buffer holding a 32-bit length
// and the bytes; '{' and '[' carrying the index just past their closing word; numbers two
// words). The element API re-derives the same facts per call; a snapshot has ~30 000 entries.
class tape_view {
 public:
  explicit tape_view(const simdjson::dom::document& doc) noexcept
      : tape_(doc.tape.get()), strings_(doc.string_buf.get()) {}
  [[gnu::always_inline]] [[nodiscard]] char type(std::size_t i) const noexcept {
    return static_cast<char>(tape_[i] >> 56);
  }
  [[gnu::always_inline]] [[nodiscard]] std::string_view string(std::size_t i) const noexcept {
    const std::size_t offset = tape_[i] & 0x00ffffffffffffffULL;
    std::uint32_t length = 0;
    std::memcpy(&length, strings_ + offset, sizeof length);
    return {reinterpret_cast<const char*>(strings_ + offset + sizeof length), length};
  }
  // Entries of the object or array at i (saturated at 2^24 - 1: a capacity hint only).
  [[nodiscard]] std::size_t count(std::size_t i) const noexcept {
    return static_cast<std::size_t>((tape_[i] >> 32) & 0xffffffULL);
  }
  // The index of the element after the one at i.
  [[gnu::always_inline]] [[nodiscard]] std::size_t after(std::size_t i) const noexcept {
    switch (type(i)) {
      case '{':
      case '[':
        return static_cast<std::uint32_t>(tape_[i]);
      case 'l':
      case 'u':
      case 'd':
        return i + 2;
      default:
        return i + 1;
    }
  }
  // A string, null or bool as the consumer's string field reads it; false for anything else
  // (numbers keep their literal text: the exact path has it).
  [[gnu::always_inline]] bool scalar_text(std::size_t i, std::string_view& out) const noexcept {
    switch (type(i)) {
      case '"':
        out = string(i);
        return true;
      case 'n':
        out = {};
        return true;
      case 't':
        out = "true";
        return true;
      case 'f':
        out = "false";
        return true;
      default:
        return false;
    }
  }

 private:
  const std::uint64_t* tape_;
  const std::uint8_t* strings_;
};

// The caller's decoder holds the parser's tape and string buffers and the padded input copy.
bool decode_fast_json(detail::decoder_state& s, std::string_view text, snapshot_ref& out) {
  const std::size_t first = text.find_first_not_of(" \r\n");
  if (first == std::string_view::npos || text[first] != '{') return false;
  if (s.buffer.size() < text.size() + simdjson::SIMDJSON_PADDING)
    s.buffer.resize(text.size() + simdjson::SIMDJSON_PADDING);
  // One pass copies the text into the padded buffer and rules out what needs a closer look.
  if (!detail::copy_plain_json(text, s.buffer.data())) {
    if (detail::scan_json_for_yaml(text) != detail::json_scan::ok) return false;
    std::memcpy(s.buffer.data(), text.data(), text.size());
  }
  std::memset(s.buffer.data() + text.size(), 0, simdjson::SIMDJSON_PADDING);
  simdjson::dom::element root;
  if (s.dom.parse(s.buffer.data(), text.size(), false).get(root)) return false;
  const tape_view t(s.dom.doc);
  // Word 0 is the root marker; the document's value starts at word 1.
  if (t.type(1) != '{') return false;
  bool seen_api = false, seen_rev = false, seen_nodes = false;
  for (std::size_t ki = 2; t.type(ki) != '}';) {
    const std::string_view k = t.string(ki);
    const std::size_t vi = ki + 1;
    ki = t.after(vi);
    if (k == "apiVersion") {
      if (seen_api || !t.scalar_text(vi, out.api_version)) return false;
      seen_api = true;
    } else if (k == "revision") {
      if (seen_rev || !t.scalar_text(vi, out.revision)) return false;
      seen_rev = true;
    } else if (k == "nodes") {
      if (seen_nodes) return false;
      seen_nodes = true;
      if (t.type(vi) == 'n') continue;
      if (t.type(vi) != '{') return false;
      const std::size_t n = t.count(vi);
      out.nodes.reserve(n);
      out.labels.reserve(n * 4);
      // Duplicate names: none while names ascend (exports and topogate's own rendering are
      // sorted); from the first name out of order on, every name is checked by hash.
      detail::string_index names;
      bool ascending = true;
      std::string_view previous;
      for (std::size_t ni = vi + 1; t.type(ni) != '}';) {
        const std::string_view name = t.string(ni);
        const std::size_t ei = ni + 1;
        ni = t.after(ei);
        if (name.size() > fast_key_limit) return false;
        if (ascending && !out.nodes.empty() && !bytes_less(previous, name)) {
          ascending = false;
          names.reset(n);
          for (const node_ref& seen : out.nodes) names.insert(seen.name, 0);
        }
        if (!ascending && !names.insert(name, 0).second) return false;
        previous = name;
        node_ref node;
        node.name = name;
        node.first = static_cast<std::uint32_t>(out.labels.size());
        if (t.type(ei) != 'n') {
          if (t.type(ei) != '{') return false;
          for (std::size_t li = ei + 1; t.type(li) != '}';) {
            const std::string_view lk = t.string(li);
            if (lk.size() > fast_key_limit) return false;
            std::string_view value;
            if (!t.scalar_text(li + 1, value)) return false;
            out.labels.push_back({lk, value});
            li = t.after(li + 1);
          }
        }
        node.count = static_cast<std::uint32_t>(out.labels.size()) - node.first;
        if (node.count > 16) {
          detail::string_index keys;
          keys.reset(node.count);
          for (std::uint32_t i = 0; i < node.count; ++i)
            if (!keys.insert(out.labels[node.first + i].key, 0).second) return false;
        } else if (small_duplicate(out.labels.data() + node.first, node.count)) {
          return false;
        }
        out.nodes.push_back(node);
      }
    } else {
      return false;
    }
  }
  return true;
}

// ---------------------------------------------------------------------------------------
// Exact path: the yaml.v3-faithful tree, walked like yaml.v3 decodes into the consumer's
// struct {apiVersion string; revision string; nodes map[string]map[string]string}.

void type_error(error_sink& sink, std::string path, const doc_node& n, std::string_view want) {
  field_error e = invalid("S1", std::move(path), "",
                          "line " + std::to_string(n.line) + ": cannot unmarshal " +
                              std::string(n.kind_name()) + " into " + std::string(want));
  e.has_value = false;
  sink.add(std::move(e));
}

// False when the root itself is not a mapping (nothing decoded).
bool walk_tree(const doc_node& root, snapshot_ref& out, error_sink& sink) {
  if (root.is_null()) return true;
  if (!root.is_mapping()) {
    type_error(sink, "", root, "a snapshot (a mapping)");
    return false;
  }
  for (const auto& [name, value] : root.map) {
    if (name == "apiVersion" || name == "revision") {
      std::string_view& field = name == "apiVersion" ? out.api_version : out.revision;
      if (value.is_scalar())
        field = value.text;
      else if (!value.is_null())
        type_error(sink, name, value, "string");
    } else if (name == "nodes") {
      if (value.is_null()) continue;
      if (!value.is_mapping()) {
        type_error(sink, "nodes", value, "map[string]map[string]string");
        continue;
      }
      out.nodes.reserve(value.map.size());
      for (const auto& [node_name, entry] : value.map) {
        node_ref node;
        node.name = node_name;
        node.first = static_cast<std::uint32_t>(out.labels.size());
        if (entry.is_mapping()) {
          for (const auto& [label_key, label_value] : entry.map) {
            if (label_value.is_scalar() || label_value.is_null()) {
              out.labels.push_back({label_key, label_value.text});
            } else {
              type_error(sink, label_path(node_name, label_key), label_value, "string");
            }
          }
        } else if (!entry.is_null()) {
          type_error(sink, node_path(node_name), entry, "map[string]string");
        }
        node.count = static_cast<std::uint32_t>(out.labels.size()) - node.first;
        out.nodes.push_back(node);
      }
    } else {
      field_error e =
          forbidden("S1", std::string(name),
                    "unknown field: a snapshot has only apiVersion, revision and nodes");
      sink.add(std::move(e));
    }
  }
  return true;
}

// Decodes into `out`; the bytes stay valid while `tree` (and the decoder) is untouched.
// Returns false when nothing could be decoded (a size, syntax or duplicate-key error); type
// errors in single fields still leave the rest decoded.
bool decode_ref(detail::decoder_state& state, std::string_view text, snapshot_ref& out,
                doc_node& tree, error_sink& sink) {
  if (text.size() > max_snapshot_bytes) {
    field_error e = too_long("S10", "", text.size(), max_snapshot_bytes);
    e.detail =
        "a snapshot is at most 1 MiB (1048576 bytes) as received; the consumer's reader "
        "refuses a larger body (has " +
        std::to_string(text.size()) + ")";
    sink.add(std::move(e));
    return false;
  }
  if (decode_fast_json(state, text, out)) return true;
  out = snapshot_ref{};
  decode_limits limits;
  limits.max_bytes = max_snapshot_bytes;
  decode_result r;
  const std::size_t first = text.find_first_not_of(" \r\n");
  bool json_ok = false;
  if (first != std::string_view::npos && (text[first] == '{' || text[first] == '[')) {
    r = detail::decode_json_styled(state, text, "S1", limits, detail::path_style::snapshot,
                                   json_ok);
  }
  if (!json_ok) r = detail::decode_yaml_styled(text, "S1", limits, detail::path_style::snapshot);
  if (!r.ok()) {
    for (auto& e : r.errors) sink.add(std::move(e));
    return false;
  }
  tree = std::move(r.root);
  if (!json_ok) return walk_tree(tree, out, sink);
  // The JSON decoder does not track lines, and a type error names the node's line as yaml.v3
  // does: on one, the text (a YAML document with the same meaning) is decoded again by the
  // YAML decoder and walked for the messages.
  error_list type_errors;
  error_sink probe(type_errors);
  if (walk_tree(tree, out, probe) && probe.empty()) return true;
  out = snapshot_ref{};
  r = detail::decode_yaml_styled(text, "S1", limits, detail::path_style::snapshot);
  if (!r.ok()) {
    for (auto& e : r.errors) sink.add(std::move(e));
    return false;
  }
  tree = std::move(r.root);
  return walk_tree(tree, out, sink);
}
snapshot to_snapshot(const snapshot_ref& r) {
  snapshot s;
  s.api_version = r.api_version;
  s.revision = r.revision;
  s.nodes.reserve(r.nodes.size());
  for (const node_ref& n : r.nodes) {
    snapshot_node& out = s.nodes.emplace_back();
    out.name = n.name;
    out.labels.reserve(n.count);
    for (std::uint32_t i = 0; i < n.count; ++i) {
      const label_ref& l = r.labels[n.first + i];
      out.labels.push_back({std::string(l.key), std::string(l.value)});
    }
  }
  return s;
}

snapshot_ref to_ref(const snapshot& s) {
  snapshot_ref r;
  r.api_version = s.api_version;
  r.revision = s.revision;
  r.nodes.reserve(s.nodes.size());
  for (const snapshot_node& n : s.nodes) {
    node_ref& out = r.nodes.emplace_back();
    out.name = n.name;
    out.first = static_cast<std::uint32_t>(r.labels.size());
    for (const snapshot_label& l : n.labels) r.labels.push_back({l.key, l.value});
    out.count = static_cast<std::uint32_t>(n.labels.size());
  }
  return r;
}

}  // namespace

snapshot_decode_result decode_snapshot(json_decoder& decoder, std::string_view text) {
  snapshot_decode_result result;
  error_sink sink(result.errors);
  snapshot_ref ref;
  doc_node tree;
  decode_ref(decoder.state(), text, ref, tree, sink);
  sink.finish();
  if (result.errors.empty()) result.value = to_snapshot(ref);
  return result;
}

error_list validate_snapshot(const snapshot& snap, const snapshot_context& ctx) {
  error_list errors;
  error_sink sink(errors);
  validate_ref(to_ref(snap), ctx, sink, /*check_duplicates=*/true);
  sink.finish();
  return errors;
}

error_list check_snapshot(json_decoder& decoder, std::string_view text,
                          const snapshot_context& ctx) {
  error_list errors;
  error_sink sink(errors);
  snapshot_ref ref;
  doc_node tree;
  // Fields that decoded are validated even when another field had a type error: every
  // error is reported, not the first.
  if (decode_ref(decoder.state(), text, ref, tree, sink))
    validate_ref(ref, ctx, sink, /*check_duplicates=*/false);
  sink.finish();
  return errors;
}

snapshot_decode_result decode_snapshot(std::string_view text) {
  json_decoder decoder;
  return decode_snapshot(decoder, text);
}

error_list check_snapshot(std::string_view text, const snapshot_context& ctx) {
  json_decoder decoder;
  return check_snapshot(decoder, text, ctx);
}

}  // namespace topogate::core

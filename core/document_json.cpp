// JSON: simdjson On Demand (error codes only) into the same tree as the YAML decoder, with
// yaml.v3's view of JSON layered on: its character and escape rules, its limit on a key's
// length, duplicate keys. Two builders: json_builder for decode_json (a document with a
// decode error is decoded again as YAML, which names the error's line as yaml.v3 does), and
// reuse_builder for the reusing decoders of json_reuse.hpp (the admission path), which build
// into the tree the previous document left in the decoder.

#include <simdjson.h>

#include <cstring>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "document.hpp"
#include "document_internal.hpp"
#include "json_reuse.hpp"

namespace topogate::core {

json_decoder::json_decoder() : state_(std::make_unique<detail::decoder_state>()) {}
json_decoder::~json_decoder() = default;
json_decoder::json_decoder(json_decoder&&) noexcept = default;
json_decoder& json_decoder::operator=(json_decoder&&) noexcept = default;

namespace detail {

simdjson::padded_string_view decoder_state::pad(std::vector<char>& into, std::string_view text) {
  if (into.size() < text.size() + simdjson::SIMDJSON_PADDING)
    into.resize(text.size() + simdjson::SIMDJSON_PADDING);
  if (!text.empty()) std::memcpy(into.data(), text.data(), text.size());
  std::memset(into.data() + text.size(), 0, simdjson::SIMDJSON_PADDING);
  return simdjson::padded_string_view(into.data(), text.size(), into.size());
}

}  // namespace detail

namespace {

// Builds the tree with the decoder's stacks: each collection's children are gathered at
// their depth and moved into a vector of the final size, one allocation per collection.
// The location is kept as segments and rendered only for an error.
class json_builder {
 public:
  json_builder(detail::decoder_state& st, std::string_view text, const char* base,
               std::string_view rule, const decode_limits& limits, detail::path_style style)
      : st_(st), text_(text), base_(base), rule_(rule), limits_(limits), style_(style) {
    st_.path.clear();
  }

  error_list errors;
  // False when the text is not JSON that simdjson accepts (the caller then asks YAML).
  bool json_ok = true;

  bool value(simdjson::ondemand::value v, doc_node& out, std::size_t depth) {
    if (++count_ > limits_.max_expanded_nodes) return limit("document exceeds the node limit");
    simdjson::ondemand::json_type t;
    if (v.type().get(t)) return not_json();
    switch (t) {
      case simdjson::ondemand::json_type::object: {
        simdjson::ondemand::object obj;
        if (v.get_object().get(obj)) return not_json();
        return object(obj, out, depth);
      }
      case simdjson::ondemand::json_type::array: {
        simdjson::ondemand::array arr;
        if (v.get_array().get(arr)) return not_json();
        return array(arr, out, depth);
      }
      case simdjson::ondemand::json_type::string: {
        std::string_view s;
        if (v.get_string().get(s)) return not_json();
        out.k = doc_node::kind::scalar;
        out.tag = doc_node::scalar_tag::str;
        out.text = s;
        return true;
      }
      case simdjson::ondemand::json_type::number: {
        std::string_view raw = v.raw_json_token();
        while (!raw.empty() && (raw.back() == ' ' || raw.back() == '\n' || raw.back() == '\r' ||
                                raw.back() == '\t'))
          raw.remove_suffix(1);
        if (!detail::is_json_number(raw)) return not_json();
        out.k = doc_node::kind::scalar;
        out.tag = detail::resolve_plain(raw, nullptr);
        out.text = raw;
        return true;
      }
      case simdjson::ondemand::json_type::boolean: {
        bool b;
        if (v.get_bool().get(b)) return not_json();
        out.k = doc_node::kind::scalar;
        out.tag = doc_node::scalar_tag::bool_;
        out.text = b ? "true" : "false";
        return true;
      }
      case simdjson::ondemand::json_type::null: {
        bool is_null = false;
        if (v.is_null().get(is_null) || !is_null) return not_json();
        out.k = doc_node::kind::null;
        return true;
      }
    }
    return not_json();
  }

  bool object(simdjson::ondemand::object obj, doc_node& out, std::size_t depth) {
    if (depth >= limits_.max_depth) return limit("document nesting exceeds the depth limit");
    out.k = doc_node::kind::mapping;
    if (st_.maps.size() <= depth) st_.maps.resize(depth + 1);
    st_.maps[depth].clear();
    for (auto field_result : obj) {
      simdjson::ondemand::field field;
      if (std::move(field_result).get(field)) return not_json();
      const char* raw = field.key().raw();
      const auto open = static_cast<std::size_t>(raw - base_) - 1;
      std::string_view key;
      if (field.unescaped_key().get(key)) return not_json();
      if (!key_fits_yaml(open, key.size())) return not_json();
      if (++count_ > limits_.max_expanded_nodes) return limit("document exceeds the node limit");
      // Deeper levels may grow `maps` itself; the children's storage does not move.
      auto& kids = st_.maps[depth];
      kids.emplace_back(std::string(key), doc_node{});
      st_.path.push_back({key, 0, false});
      if (!value(field.value(), kids.back().second, depth + 1)) return false;
      st_.path.pop_back();
    }
    auto& kids = st_.maps[depth];
    out.map.reserve(kids.size());
    for (auto& entry : kids) out.map.emplace_back(std::move(entry));
    kids.clear();
    check_duplicates(out);
    return true;
  }

  bool array(simdjson::ondemand::array arr, doc_node& out, std::size_t depth) {
    if (depth >= limits_.max_depth) return limit("document nesting exceeds the depth limit");
    out.k = doc_node::kind::sequence;
    if (st_.items.size() <= depth) st_.items.resize(depth + 1);
    st_.items[depth].clear();
    for (auto item_result : arr) {
      simdjson::ondemand::value item;
      if (std::move(item_result).get(item)) return not_json();
      auto& kids = st_.items[depth];
      st_.path.push_back({{}, kids.size(), true});
      if (!value(item, kids.emplace_back(), depth + 1)) return false;
      st_.path.pop_back();
    }
    auto& kids = st_.items[depth];
    out.items.reserve(kids.size());
    for (auto& item : kids) out.items.emplace_back(std::move(item));
    kids.clear();
    return true;
  }

 private:
  bool not_json() {
    json_ok = false;
    return false;
  }
  // The usual key has no escape and its `:` right after the closing quote: then its raw
  // text is `n` bytes and yaml.v3's limit (1024 characters to the `:`) is a length check.
  bool key_fits_yaml(std::size_t open, std::size_t n) const {
    const std::size_t end = open + 1 + n;
    if (n + 2 <= 1024 && end + 1 < text_.size() && text_[end] == '"' && text_[end + 1] == ':' &&
        std::memchr(text_.data() + open + 1, '\\', n) == nullptr)
      return true;
    return detail::json_key_fits_yaml(text_, open);
  }
  bool limit(std::string_view msg) {
    field_error e =
        invalid(std::string(rule_), detail::render_path(st_.path, style_), "", std::string(msg));
    e.has_value = false;
    errors.push_back(std::move(e));
    return false;
  }
  void check_duplicates(const doc_node& m) {
    const std::size_t n = m.map.size();
    auto report = [&](std::size_t i) {
      const std::string path = detail::render_path(st_.path, style_);
      std::string p = path;
      detail::append_path_key(p, m.map[i].first, path.empty(), style_);
      field_error e = duplicate(std::string(rule_), std::move(p), m.map[i].first);
      e.detail = "mapping key \"" + m.map[i].first + "\" already defined";
      errors.push_back(std::move(e));
    };
    if (n <= 16) {
      for (std::size_t i = 1; i < n; ++i)
        for (std::size_t j = 0; j < i; ++j)
          if (m.map[i].first == m.map[j].first) {
            report(i);
            break;
          }
      return;
    }
    detail::string_index seen;
    seen.reset(n);
    for (std::size_t i = 0; i < n; ++i)
      if (!seen.insert(m.map[i].first, static_cast<std::uint32_t>(i)).second) report(i);
  }

  detail::decoder_state& st_;
  std::string_view text_;
  const char* base_;
  std::string_view rule_;
  const decode_limits& limits_;
  detail::path_style style_;
  std::size_t count_ = 0;
};

// The admission path's builder: the same acceptance rules as json_builder, but it writes
// into the tree the previous document left in the decoder, assigning keys and scalars into
// strings and vectors that keep their capacity, so that a stream of similar documents
// (AdmissionReview objects) costs no allocation, no move and no destruction per node. It
// reports no errors: any document json_builder would not accept without error makes it
// return false, and the caller asks decode_json for the exact verdict.
class reuse_builder {
 public:
  reuse_builder(std::string_view text, const char* base, const decode_limits& limits)
      : text_(text),
        base_(base),
        limits_(limits),
        escapes_(std::memchr(text.data(), '\\', text.size()) != nullptr) {}

  bool object(simdjson::ondemand::object obj, doc_node& out, std::size_t depth) {
    if (depth >= limits_.max_depth) return false;
    become(out, doc_node::kind::mapping);
    auto& m = out.map;
    std::size_t n = 0;
    for (auto field_result : obj) {
      simdjson::ondemand::field field;
      if (std::move(field_result).get(field)) return false;
      const char* raw = field.key().raw();
      const auto open = static_cast<std::size_t>(raw - base_) - 1;
      std::string_view key;
      if (field.unescaped_key().get(key)) return false;
      if (!key_fits_yaml(open, key.size())) return false;
      if (++count_ > limits_.max_expanded_nodes) return false;
      if (n < m.size())
        set_text(m[n].first, key);
      else
        m.emplace_back(std::piecewise_construct, std::forward_as_tuple(key),
                       std::forward_as_tuple());
      // Only this child's subtree changes while it is built: `m` itself stays put.
      if (!value(field.value(), m[n].second, depth + 1)) return false;
      ++n;
    }
    if (n < m.size()) m.erase(m.begin() + static_cast<std::ptrdiff_t>(n), m.end());
    return unique_keys(m);
  }

 private:
  bool value(simdjson::ondemand::value v, doc_node& out, std::size_t depth) {
    if (++count_ > limits_.max_expanded_nodes) return false;
    simdjson::ondemand::json_type t;
    if (v.type().get(t)) return false;
    switch (t) {
      case simdjson::ondemand::json_type::object: {
        simdjson::ondemand::object obj;
        if (v.get_object().get(obj)) return false;
        return object(obj, out, depth);
      }
      case simdjson::ondemand::json_type::array: {
        simdjson::ondemand::array arr;
        if (v.get_array().get(arr)) return false;
        return array(arr, out, depth);
      }
      case simdjson::ondemand::json_type::string: {
        std::string_view s;
        if (v.get_string().get(s)) return false;
        scalar(out, doc_node::scalar_tag::str, s);
        return true;
      }
      case simdjson::ondemand::json_type::number: {
        std::string_view raw = v.raw_json_token();
        while (!raw.empty() && (raw.back() == ' ' || raw.back() == '\n' || raw.back() == '\r' ||
                                raw.back() == '\t'))
          raw.remove_suffix(1);
        if (!detail::is_json_number(raw)) return false;
        scalar(out, detail::resolve_plain(raw, nullptr), raw);
        return true;
      }
      case simdjson::ondemand::json_type::boolean: {
        bool b;
        if (v.get_bool().get(b)) return false;
        scalar(out, doc_node::scalar_tag::bool_, b ? "true" : "false");
        return true;
      }
      case simdjson::ondemand::json_type::null: {
        bool is_null = false;
        if (v.is_null().get(is_null) || !is_null) return false;
        become(out, doc_node::kind::null);
        return true;
      }
    }
    return false;
  }

  bool array(simdjson::ondemand::array arr, doc_node& out, std::size_t depth) {
    if (depth >= limits_.max_depth) return false;
    become(out, doc_node::kind::sequence);
    auto& items = out.items;
    std::size_t n = 0;
    for (auto item_result : arr) {
      simdjson::ondemand::value item;
      if (std::move(item_result).get(item)) return false;
      if (n == items.size()) items.emplace_back();
      if (!value(item, items[n], depth + 1)) return false;
      ++n;
    }
    if (n < items.size()) items.erase(items.begin() + static_cast<std::ptrdiff_t>(n), items.end());
    return true;
  }

  // Every member is set, whatever the node held for the previous document.
  static void become(doc_node& n, doc_node::kind k) {
    n.k = k;
    n.tag = doc_node::scalar_tag::str;
    n.line = 0;
    n.text.clear();
    if (k != doc_node::kind::mapping && !n.map.empty()) n.map.clear();
    if (k != doc_node::kind::sequence && !n.items.empty()) n.items.clear();
  }
  // Keys, and many values, repeat from one review to the next: comparing is cheaper than
  // assigning.
  static void set_text(std::string& s, std::string_view text) {
    if (!detail::same(s, text)) s.assign(text.data(), text.size());
  }
  static void scalar(doc_node& n, doc_node::scalar_tag tag, std::string_view text) {
    n.k = doc_node::kind::scalar;
    n.tag = tag;
    n.line = 0;
    if (!n.map.empty()) n.map.clear();
    if (!n.items.empty()) n.items.clear();
    set_text(n.text, text);
  }

  // As json_builder::key_fits_yaml (a text without any backslash has no escaped key).
  bool key_fits_yaml(std::size_t open, std::size_t n) const {
    const std::size_t end = open + 1 + n;
    if (n + 2 <= 1024 && end + 1 < text_.size() && text_[end] == '"' && text_[end + 1] == ':' &&
        (!escapes_ || std::memchr(text_.data() + open + 1, '\\', n) == nullptr))
      return true;
    return detail::json_key_fits_yaml(text_, open);
  }

  bool unique_keys(const std::vector<std::pair<std::string, doc_node>>& m) {
    const std::size_t n = m.size();
    if (n <= 16) {
      for (std::size_t i = 1; i < n; ++i)
        for (std::size_t j = 0; j < i; ++j)
          if (detail::same(m[i].first, m[j].first)) return false;
      return true;
    }
    seen_.reset(n);
    for (std::size_t i = 0; i < n; ++i)
      if (!seen_.insert(m[i].first, static_cast<std::uint32_t>(i)).second) return false;
    return true;
  }

  std::string_view text_;
  const char* base_;
  const decode_limits& limits_;
  bool escapes_;
  std::size_t count_ = 0;
  detail::string_index seen_;
};

// The byte-wise judge of what follows the root, for a root whose span On Demand could not
// find.
bool only_white_space_after_root(std::string_view text) {
  std::size_t i = text.find_first_not_of(" \t\r\n");
  std::size_t depth = 0;
  for (; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '"') {
      for (++i; i < text.size() && text[i] != '"'; ++i)
        if (text[i] == '\\') ++i;
    } else if (c == '{' || c == '[') {
      ++depth;
    } else if (c == '}' || c == ']') {
      if (--depth == 0) break;
    }
  }
  if (i >= text.size()) return false;
  return text.find_first_not_of(" \t\r\n", i + 1) == std::string_view::npos;
}

}  // namespace

// Decodes JSON; `json_ok` is false when simdjson (or the JSON-as-YAML rules) refuse the text.
decode_result detail::decode_json_styled(decoder_state& state, std::string_view text,
                                         std::string_view rule_id, const decode_limits& limits,
                                         path_style style, bool& json_ok) {
  json_ok = true;
  decode_result r;
  if (text.size() > limits.max_bytes) {
    r.errors.push_back(too_long(std::string(rule_id), "", text.size(), limits.max_bytes));
    return r;
  }
  if (std::string p = detail::check_yaml_characters(text, nullptr); !p.empty()) {
    json_ok = false;
    return detail::fail_with(rule_id, std::move(p));
  }
  if (std::string p = detail::check_json_as_yaml(text); !p.empty()) {
    json_ok = false;
    return detail::fail_with(rule_id, std::move(p));
  }
  const simdjson::padded_string_view padded = state.pad(text);
  simdjson::ondemand::document doc;
  if (state.parser.iterate(padded).get(doc)) {
    json_ok = false;
    return detail::fail_with(rule_id, "invalid JSON");
  }
  json_builder b(state, text, padded.data(), rule_id, limits, style);
  // On Demand does not look past the root value. The root's raw span (found by hopping over
  // the structural index, then rewound) ends where the next token starts, or at the end of
  // the text: only white space may follow it. When the span cannot be found (the root is
  // malformed somewhere) the document is parsed again and the builder meets the problem
  // where the byte-wise scan below is the judge, as it is for every other error.
  bool tail_ok = true;
  bool ok = false;
  auto root = [&](auto get, auto build, simdjson::ondemand::document& d) {
    auto collection = get(d);
    if (collection.error()) return false;
    auto c = std::move(collection).value_unsafe();
    std::string_view span;
    if (!c.raw_json().get(span) && !c.reset().error()) {
      const auto end = static_cast<std::size_t>(span.data() + span.size() - padded.data());
      tail_ok =
          end >= text.size() || text.find_first_not_of(" \t\r\n", end) == std::string_view::npos;
      return build(c);
    }
    simdjson::ondemand::document again;
    if (state.parser.iterate(padded).get(again)) return false;
    auto retry = get(again);
    if (retry.error()) return false;
    auto c2 = std::move(retry).value_unsafe();
    const bool built = build(c2);
    tail_ok = !built || only_white_space_after_root(text);
    return built;
  };
  simdjson::ondemand::json_type t;
  if (doc.type().get(t)) {
    b.json_ok = false;
  } else if (t == simdjson::ondemand::json_type::object) {
    ok = root([](simdjson::ondemand::document& d) { return d.get_object(); },
              [&](simdjson::ondemand::object& o) { return b.object(o, r.root, 0); }, doc);
  } else if (t == simdjson::ondemand::json_type::array) {
    ok = root([](simdjson::ondemand::document& d) { return d.get_array(); },
              [&](simdjson::ondemand::array& a) { return b.array(a, r.root, 0); }, doc);
  } else {
    b.json_ok = false;  // a bare scalar: let YAML decide
  }
  if (ok && !tail_ok) b.json_ok = false;
  if (!ok) {
    // Children of the collections left open stay in the stacks; drop them now.
    for (auto& m : state.maps) m.clear();
    for (auto& i : state.items) i.clear();
    if (b.errors.empty()) b.json_ok = false;
  }
  json_ok = b.json_ok;
  if (!json_ok) {
    r.root = doc_node{};
    return detail::fail_with(rule_id, "invalid JSON");
  }
  if (!b.errors.empty()) {
    // A decode error (a duplicate key, a limit): yaml.v3 names its line, which this
    // decoder does not track. The text is a YAML document with the same meaning (the checks
    // above hold), so the YAML decoder, which tracks lines, reports the same errors with them.
    decode_result lined = decode_yaml_styled(text, rule_id, limits, style);
    if (!lined.errors.empty()) return lined;
  }
  r.errors = std::move(b.errors);
  if (!r.errors.empty()) r.root = doc_node{};
  return r;
}

simdjson::error_code iterate_envelope(json_decoder& decoder, std::string_view text,
                                      simdjson::ondemand::document& doc, std::string_view& copy) {
  detail::decoder_state& st = decoder.state();
  const simdjson::padded_string_view padded = st.pad(st.outer, text);
  copy = std::string_view(padded.data(), text.size());
  return st.outer_parser.iterate(padded).get(doc);
}

bool json_text_acceptable(std::string_view text, const decode_limits& limits) {
  return text.size() <= limits.max_bytes && detail::check_yaml_characters(text, nullptr).empty() &&
         detail::check_json_as_yaml(text).empty();
}

bool build_object_reusing(json_decoder& decoder, simdjson::ondemand::object& obj,
                          std::string_view rest, const decode_limits& limits) {
  reuse_builder b(rest, rest.data(), limits);
  return b.object(obj, decoder.state().tree, 0);
}

bool decode_object_reusing(json_decoder& decoder, std::string_view text,
                           const decode_limits& limits) {
  detail::decoder_state& state = decoder.state();
  // decode_json_styled's checks of the text, in the same order.
  if (!json_text_acceptable(text, limits)) return false;
  const simdjson::padded_string_view padded = state.pad(text);
  simdjson::ondemand::document doc;
  if (state.parser.iterate(padded).get(doc)) return false;
  simdjson::ondemand::json_type t;
  if (doc.type().get(t) || t != simdjson::ondemand::json_type::object) return false;
  simdjson::ondemand::object obj;
  if (doc.get_object().get(obj)) return false;
  // As decode_json_styled: only white space may follow the root's span.
  std::string_view span;
  if (obj.raw_json().get(span) || obj.reset().error()) return false;
  const auto end = static_cast<std::size_t>(span.data() + span.size() - padded.data());
  if (end < text.size() && text.find_first_not_of(" \t\r\n", end) != std::string_view::npos)
    return false;
  reuse_builder b(text, padded.data(), limits);
  return b.object(obj, state.tree, 0);
}

const doc_node& reused_tree(const json_decoder& decoder) noexcept { return decoder.state().tree; }

void release_reused_tree(json_decoder& decoder) noexcept { decoder.state().tree = doc_node{}; }

}  // namespace topogate::core

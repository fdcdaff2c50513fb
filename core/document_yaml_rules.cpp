// yaml.v3's rules layered on yaml-cpp's events (tree_builder, document_yaml_internal.hpp):
// where yaml-cpp reads a node that yaml.v3 does not find (an empty flow entry, a block key
// without its ':' or a ':' without its key), how a scalar's tag is resolved and checked
// (with the escapes and the end of a quoted scalar), and what yaml.v3 makes of a finished
// mapping (duplicate keys, `<<` merges).

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "document_internal.hpp"
#include "document_yaml_internal.hpp"

namespace topogate::core::detail {

// Where yaml.v3 finds no node in a flow collection and yaml-cpp reads one: an empty entry
// ("[a,,b]", "[,]", "{,}", "{: x}"), which yaml-cpp reads as a null key or item starting
// at a ',' or ':', and a plain scalar starting with ':' ("[:b]", "{a: :b}"), which
// yaml.v3 reads as a value indicator there. A null value ("{a: , b: 1}", "{a, b}") is
// fine, and so is an explicit key ("{? , a: 1}").
bool tree_builder::flow_node_missing(const YAML::Mark& mark, bool null_node) const {
  if (frames_.empty() || !frames_.back().flow || mark.pos < 0) return false;
  const auto at = static_cast<std::size_t>(mark.pos);
  if (at >= text_.size()) return false;
  if (!null_node) return text_[at] == ':';
  const frame& f = frames_.back();
  if (f.node->is_mapping() && f.value_pending) return false;
  if (text_[at] != ',' && text_[at] != ':') return false;
  return !after_explicit_key(at);
}

// True when only white space separates `at` from a '?' before it: the null there is an
// explicit key's ("? , a: 1", "?\n: x"), which yaml.v3 reads too.
bool tree_builder::after_explicit_key(std::size_t at) const {
  std::size_t i = at;
  while (i > 0 && (text_[i - 1] == ' ' || text_[i - 1] == '\t' || text_[i - 1] == '\n' ||
                   text_[i - 1] == '\r'))
    --i;
  return i > 0 && text_[i - 1] == '?';
}

// A block mapping's line without its key (": x", ":"): yaml.v3 finds no key there, where
// yaml-cpp reads a null key starting at the ':'. An explicit "? " key is not this.
bool tree_builder::block_key_missing(const YAML::Mark& mark) const {
  if (!expecting_key() || frames_.back().flow || mark.pos < 0) return false;
  const auto at = static_cast<std::size_t>(mark.pos);
  if (at >= text_.size() || text_[at] != ':') return false;
  return !after_explicit_key(at);
}

// A block mapping's key without its ':' ("a: 1\nb"): yaml.v3 finds no ':' after it, where
// yaml-cpp reads the key with a null value that starts where the key does (a value left
// empty after "b:" starts after the ':', and so does that of an explicit "? b" key).
bool tree_builder::block_colon_missing(const YAML::Mark& mark) const {
  if (frames_.empty() || mark.pos < 0) return false;
  const frame& f = frames_.back();
  return f.node->is_mapping() && !f.flow && f.value_pending && f.key_pos == mark.pos;
}

std::string tree_builder::literal_null_at(const YAML::Mark& mark) const {
  if (mark.pos < 0 || static_cast<std::size_t>(mark.pos) >= text_.size()) return {};
  const std::string_view rest = text_.substr(static_cast<std::size_t>(mark.pos));
  for (std::string_view w : {"null", "Null", "NULL", "~"})
    if (rest.substr(0, w.size()) == w) return std::string(w);
  return {};
}

void tree_builder::resolve_scalar(const YAML::Mark& mark, const std::string& tag,
                                  const std::string& value, doc_node& out, bool& is_null) {
  out.k = doc_node::kind::scalar;
  out.line = static_cast<std::size_t>(mark.line) + 1;
  is_null = false;
  if (tag == "?") {
    if (separators_ && (value.find("\xc2\x85") != std::string::npos ||
                        value.find("\xe2\x80\xa8") != std::string::npos ||
                        value.find("\xe2\x80\xa9") != std::string::npos)) {
      fatal(mark,
            "a line separator (U+0085, U+2028, U+2029) in a plain scalar is a line break "
            "for YAML 1.1 decoders");
    }
    const resolved r = resolve_text(value, true);
    is_null = r == resolved::null;
    out.tag = to_scalar_tag(r);
    out.text = value;
    return;
  }
  check_quoted(mark);
  if (tag == "!") {
    out.tag = doc_node::scalar_tag::str;
    out.text = value;
    return;
  }
  constexpr std::string_view core_prefix = "tag:yaml.org,2002:";
  if (tag.size() > 1 && tag[0] == '!' && tag.find('!', 1) != std::string::npos) {
    fatal(mark, "found undefined tag handle");
  }
  if (std::string_view(tag).substr(0, core_prefix.size()) != core_prefix) {
    out.tag = doc_node::scalar_tag::other;
    out.text = value;
    return;
  }
  const std::string_view name = std::string_view(tag).substr(core_prefix.size());
  if (name == "binary") {
    if (!decode_base64(value, out.text) && !discarding())
      fatal(mark, "!!binary value contains invalid base64 data");
    out.tag = doc_node::scalar_tag::binary;
    return;
  }
  resolved want;
  if (name == "str") {
    out.tag = doc_node::scalar_tag::str;
    out.text = value;
    return;
  }
  if (name == "bool")
    want = resolved::bool_;
  else if (name == "int")
    want = resolved::int_;
  else if (name == "float")
    want = resolved::float_;
  else if (name == "null")
    want = resolved::null;
  else if (name == "timestamp")
    want = resolved::timestamp;
  else {
    out.tag = doc_node::scalar_tag::other;
    out.text = value;
    return;
  }
  resolved got = resolve_text(value, want == resolved::timestamp);
  if (want == resolved::float_ && got == resolved::int_) got = resolved::float_;
  if (got != want && !discarding()) {
    std::string shown = value;
    fatal(mark, "cannot decode " + std::string(short_name(got)) + " `" + shown + "` as a " +
                    std::string(short_name(want)));
  }
  is_null = want == resolved::null;
  out.tag = to_scalar_tag(want);
  out.text = value;
}

// yaml-cpp accepts the JSON escape `\/` in double-quoted scalars, and a quoted scalar the
// end of the text cuts off after a line break; yaml.v3 does neither.
void tree_builder::check_quoted(const YAML::Mark& mark) {
  if (mark.pos < 0) return;
  std::size_t i = static_cast<std::size_t>(mark.pos);
  // Skip node properties (anchor, tag) and the white space and comments around them.
  while (i < text_.size()) {
    const char c = text_[i];
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      ++i;
    } else if (c == '#') {
      while (i < text_.size() && text_[i] != '\n') ++i;
    } else if (c == '&' || c == '!') {
      while (i < text_.size() && text_[i] != ' ' && text_[i] != '\t' && text_[i] != '\n' &&
             text_[i] != '\r')
        ++i;
    } else {
      break;
    }
  }
  if (i >= text_.size() || (text_[i] != '"' && text_[i] != '\'')) return;
  std::string problem =
      text_[i] == '"' ? check_double_quoted(text_, i) : check_single_quoted(text_, i);
  if (!problem.empty()) {
    errors.push_back(invalid(std::string(rule_), current_path(), "", std::move(problem)));
    errors.back().has_value = false;
    throw abort_parse{};
  }
}

void tree_builder::finish_mapping() {
  frame& f = frames_.back();
  // yaml.v3 never decodes the value of a dropped key, so it finds no errors inside it.
  if (f.discard) return;
  auto& map = f.node->map;
  entry_info* entries = entries_.data() + f.entries_begin;
  // yaml.v3 refuses a key written twice in one mapping (decode.go: "mapping key already
  // defined"); merged keys are exempt, explicit ones win over them.
  const std::size_t n = map.size();
  auto report = [&](std::size_t first, std::size_t second, std::string_view shown) {
    std::string path = current_path_without_key();
    if (!entries[second].dropped) append_key(path, shown, frames_.size() == 1);
    std::string msg = "mapping key \"" + std::string(shown) + "\" already defined at line " +
                      std::to_string(entries[first].line);
    field_error e = duplicate(std::string(rule_), std::move(path), shown);
    e.detail = at_line(entries[second].line, msg);
    errors.push_back(std::move(e));
  };
  auto text_of = [&](std::size_t i) -> std::string_view {
    return entries[i].dropped ? std::string_view(entries[i].raw) : std::string_view(map[i].first);
  };
  if (n <= 16) {
    for (std::size_t i = 1; i < n; ++i)
      for (std::size_t j = 0; j < i; ++j)
        if (entries[i].dropped == entries[j].dropped && text_of(i) == text_of(j)) {
          report(j, i, text_of(i));
          break;
        }
  } else {
    string_index seen, seen_null;
    seen.reset(n);
    for (std::size_t i = 0; i < n; ++i) {
      auto& idx = entries[i].dropped ? seen_null : seen;
      const auto [first, inserted] = idx.insert(text_of(i), static_cast<std::uint32_t>(i));
      if (!inserted) report(first, i, text_of(i));
    }
  }
  bool has_special = false;
  for (std::size_t i = 0; i < n; ++i)
    if (entries[i].dropped || entries[i].merge) has_special = true;
  if (!has_special) return;
  // Pull out merge values and dropped entries, keep explicit entries in order.
  std::vector<doc_node> merges;
  std::size_t w = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (entries[i].merge) {
      merges.push_back(std::move(map[i].second));
      continue;
    }
    if (entries[i].dropped) continue;
    if (w != i) map[w] = std::move(map[i]);
    ++w;
  }
  map.resize(w);
  if (merges.empty()) return;
  // yaml.v3 applies only the last `<<` (two are a duplicate key, reported above).
  doc_node src = std::move(merges.back());
  std::vector<doc_node*> sources;
  if (src.is_mapping()) {
    sources.push_back(&src);
  } else if (src.is_sequence()) {
    for (auto& item : src.items) {
      if (!item.is_mapping()) merge_error();
      sources.push_back(&item);
    }
  } else {
    merge_error();
  }
  string_index present;
  present.reset(map.size() + 8);
  for (std::size_t i = 0; i < map.size(); ++i)
    present.insert(map[i].first, static_cast<std::uint32_t>(i));
  // Earlier keys win: explicit ones, then each source in order.
  std::vector<std::pair<std::string, doc_node>> added;
  for (doc_node* s : sources) {
    for (auto& [k, v] : s->map) {
      if (present.find(k)) continue;
      // The index views the source's key, which stays put (only the value moves out);
      // a view of the copy in `added` would dangle when `added` reallocates.
      present.insert(k, 0);
      added.emplace_back(k, std::move(v));
    }
  }
  for (auto& kv : added) map.push_back(std::move(kv));
}

void tree_builder::merge_error() {
  YAML::Mark m;
  m.line = static_cast<int>(frames_.back().node->line) - 1;
  fatal(m, "map merge requires map or sequence of maps as the value");
}

}  // namespace topogate::core::detail

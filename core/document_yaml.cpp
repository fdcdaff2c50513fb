// YAML: yaml-cpp's event parser into doc_node. tree_builder (document_yaml_internal.hpp)
// follows the events: collections open and close, keys and values are placed, anchors are
// stored and aliases expanded within yaml.v3's budget, and the location is kept for error
// paths. The rules yaml.v3 layers on top of the events are in document_yaml_rules.cpp.

#include <yaml-cpp/depthguard.h>
#include <yaml-cpp/exceptions.h>
#include <yaml-cpp/parser.h>

#include <algorithm>
#include <istream>
#include <new>
#include <streambuf>
#include <string>

#include "document_internal.hpp"
#include "document_yaml_internal.hpp"

namespace topogate::core::detail {
namespace {

// Zero-copy std::istream over the input.
class view_streambuf : public std::streambuf {
 public:
  explicit view_streambuf(std::string_view s) {
    char* b = const_cast<char*>(s.data());
    setg(b, b, b + s.size());
  }
};

// yaml.v3's alias budget (decode.go allowedAliasRatio): most of a small document may come
// from aliases, a shrinking share of a large one.
double allowed_alias_ratio(std::size_t decode_count) {
  constexpr double low = 400000, high = 4000000;
  const auto d = static_cast<double>(decode_count);
  if (d <= low) return 0.99;
  if (d >= high) return 0.10;
  return 0.99 - 0.89 * ((d - low) / (high - low));
}

// yaml-cpp decodes the escapes \N and \_ of a double-quoted scalar to the single bytes 0x85
// and 0xA0; yaml.v3 decodes them to U+0085 and U+00A0, in UTF-8. The text is valid UTF-8
// (checked before parsing), so such a byte outside a multi-byte sequence comes from one of
// those escapes. Returns whether `value` was rewritten into `out`.
bool utf8_from_latin1_escapes(const std::string& value, std::string& out) {
  const auto* p = reinterpret_cast<const unsigned char*>(value.data());
  const std::size_t n = value.size();
  std::size_t i = 0;
  while (i < n && p[i] < 0x80) ++i;
  if (i == n) return false;
  bool rewritten = false;
  out.assign(value, 0, i);
  while (i < n) {
    const unsigned char b = p[i];
    const std::size_t len = b >= 0xf0 && b <= 0xf4  ? 4
                            : b >= 0xe0             ? 3
                            : b >= 0xc2 && b < 0xe0 ? 2
                                                    : 1;
    bool sequence = len > 1 && i + len <= n;
    for (std::size_t k = 1; sequence && k < len; ++k) sequence = (p[i + k] & 0xc0) == 0x80;
    if (sequence) {
      out.append(value, i, len);
      i += len;
    } else if (b == 0x85 || b == 0xa0) {
      out.push_back(static_cast<char>(0xc2));
      out.push_back(static_cast<char>(b));
      rewritten = true;
      ++i;
    } else {
      out.push_back(static_cast<char>(b));
      ++i;
    }
  }
  return rewritten;
}

}  // namespace

void tree_builder::OnNull(const YAML::Mark& mark, YAML::anchor_t anchor) {
  if (skip_depth_) return;
  if (flow_node_missing(mark, true)) fatal(mark, "did not find expected node content");
  if (block_key_missing(mark)) fatal(mark, "did not find expected key");
  if (block_colon_missing(mark)) fatal(mark, "could not find expected ':'");
  if (expecting_key()) {
    // A null key: yaml.v3 cannot decode it into a string and drops the entry, but still
    // compares its literal text with the other keys.
    std::string raw = literal_null_at(mark);
    begin_key(std::move(raw), mark, /*dropped=*/true, /*merge=*/false);
    if (anchor) store_scalar_anchor(anchor, doc_node{});
    return;
  }
  doc_node* n = place(mark);
  if (anchor) store_anchor(anchor, *n, 1, 0);
}

void tree_builder::OnScalar(const YAML::Mark& mark, const std::string& tag, YAML::anchor_t anchor,
                            const std::string& raw_value) {
  if (skip_depth_) return;
  std::string utf8;
  const std::string& value = utf8_from_latin1_escapes(raw_value, utf8) ? utf8 : raw_value;
  if (tag == "?" && flow_node_missing(mark, false))
    fatal(mark, "did not find expected node content");
  doc_node scalar;
  bool is_null = false;
  resolve_scalar(mark, tag, value, scalar, is_null);
  const bool merge = (tag == "?" && value == "<<") || tag == "tag:yaml.org,2002:merge";
  if (expecting_key()) {
    if (is_null) {
      begin_key(value, mark, true, false);
    } else {
      begin_key(std::move(scalar.text), mark, false, merge);
    }
    if (anchor) store_scalar_anchor(anchor, is_null ? doc_node{} : scalar);
    return;
  }
  doc_node* n = place(mark);
  if (!is_null) {
    n->k = doc_node::kind::scalar;
    n->tag = scalar.tag;
    n->text = std::move(scalar.text);
  }
  if (anchor) store_anchor(anchor, *n, 1, 0);
}

void tree_builder::OnAlias(const YAML::Mark& mark, YAML::anchor_t anchor) {
  if (skip_depth_) return;
  if (anchor >= anchors_.size() || !anchors_[anchor].complete) {
    if (discarding()) {  // never decoded by yaml.v3, so never expanded
      place(mark);
      return;
    }
    fatal(mark, "anchor '" + name_of(anchor) + "' value contains itself");
  }
  const anchor_entry& a = anchors_[anchor];
  charge_alias(mark, a.size);
  if (frames_.size() + a.height > limits_.max_depth)
    fatal(mark, "document nesting exceeds the depth limit");
  if (expecting_key()) {
    if (a.node.is_null()) {
      begin_key("", mark, true, false);
    } else if (a.node.is_scalar()) {
      begin_key(a.node.text, mark, false, false);
    } else {
      fatal(mark, "invalid map key: a " + std::string(a.node.kind_name()) + " cannot be a key");
    }
    return;
  }
  if (!frames_.empty()) frames_.back().height = std::max(frames_.back().height, a.height + 1);
  doc_node* n = place(mark);
  const std::size_t line = n->line;
  *n = a.node;
  n->line = line;
}

void tree_builder::OnSequenceStart(const YAML::Mark& mark, const std::string&,
                                   YAML::anchor_t anchor, YAML::EmitterStyle::value style) {
  if (skip_depth_) {
    ++skip_depth_;
    return;
  }
  open_collection(mark, doc_node::kind::sequence, anchor, style == YAML::EmitterStyle::Flow);
}

void tree_builder::OnSequenceEnd() {
  if (skip_depth_) {
    --skip_depth_;
    return;
  }
  close_collection();
}

void tree_builder::OnMapStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor,
                              YAML::EmitterStyle::value style) {
  if (skip_depth_) {
    ++skip_depth_;
    return;
  }
  open_collection(mark, doc_node::kind::mapping, anchor, style == YAML::EmitterStyle::Flow);
}

void tree_builder::OnMapEnd() {
  if (skip_depth_) {
    --skip_depth_;
    return;
  }
  finish_mapping();
  close_collection();
}

// The path through the outermost `count` open collections.
std::string tree_builder::path_of(std::size_t count) const {
  std::string out;
  for (std::size_t i = 0; i < count; ++i) {
    const frame& f = frames_[i];
    if (f.node->is_sequence()) {
      if (f.node->items.empty()) break;
      out = index(out, f.node->items.size() - 1);
    } else {
      if (!f.has_key || f.node->map.empty()) break;
      if (i + 1 == frames_.size() && !f.value_pending) break;
      append_key(out, key_text(f), i == 0);
    }
  }
  return out;
}

std::string_view tree_builder::key_text(const frame& f) const {
  const std::size_t i = f.node->map.size() - 1;
  const entry_info& e = entries_[f.entries_begin + i];
  return e.dropped ? std::string_view(e.raw) : std::string_view(f.node->map[i].first);
}

void tree_builder::fatal_at(std::string path, const YAML::Mark& mark, std::string_view msg) {
  errors.push_back(invalid(std::string(rule_), std::move(path), "",
                           at_line(static_cast<std::size_t>(mark.line) + 1, msg)));
  errors.back().has_value = false;
  throw abort_parse{};
}

std::string tree_builder::name_of(YAML::anchor_t anchor) const {
  if (anchor < anchors_.size() && !anchor_names_[anchor].empty()) return anchor_names_[anchor];
  return std::to_string(anchor);
}

std::string tree_builder::current_path_without_key() const {
  std::string out;
  for (std::size_t i = 0; i + 1 < frames_.size(); ++i) {
    const frame& f = frames_[i];
    if (f.node->is_sequence()) {
      out = index(out, f.node->items.size() - 1);
    } else {
      append_key(out, key_text(f), i == 0);
    }
  }
  return out;
}

void tree_builder::charge_alias(const YAML::Mark& mark, std::size_t size) {
  if (count_ + size > limits_.max_expanded_nodes) {
    fatal(mark, "document exceeds " + std::to_string(limits_.max_expanded_nodes) +
                    " nodes after alias expansion");
  }
  count_ += size;
  alias_count_ += size;
  if (alias_count_ > 100 && count_ > 1000 &&
      static_cast<double>(alias_count_) / static_cast<double>(count_) >
          allowed_alias_ratio(count_)) {
    fatal(mark, "document contains excessive aliasing");
  }
}

// Counts one more node, within the limit.
void tree_builder::charge(const YAML::Mark& mark) {
  if (count_ >= limits_.max_expanded_nodes) {
    fatal(mark, "document exceeds " + std::to_string(limits_.max_expanded_nodes) + " nodes");
  }
  ++count_;
}

void tree_builder::begin_key(std::string key, const YAML::Mark& mark, bool dropped, bool merge) {
  charge(mark);
  frame& f = frames_.back();
  entry_info info;
  info.line = static_cast<std::size_t>(mark.line) + 1;
  info.dropped = dropped;
  info.merge = merge;
  if (dropped) info.raw = std::move(key);
  entries_.push_back(std::move(info));
  f.node->map.emplace_back(dropped ? std::string() : std::move(key), doc_node{});
  f.has_key = true;
  f.value_pending = true;
  f.key_pos = mark.pos;
}

// The slot for the next value: the root, the next sequence item, or the pending map value.
doc_node* tree_builder::place(const YAML::Mark& mark) {
  charge(mark);
  doc_node* n = nullptr;
  if (frames_.empty()) {
    n = &root;
  } else {
    frame& f = frames_.back();
    if (f.node->is_sequence()) {
      n = &f.node->items.emplace_back();
    } else {
      n = &f.node->map.back().second;
      f.value_pending = false;
    }
  }
  n->line = static_cast<std::size_t>(mark.line) + 1;
  return n;
}

void tree_builder::open_collection(const YAML::Mark& mark, doc_node::kind k, YAML::anchor_t anchor,
                                   bool flow) {
  if (expecting_key()) {
    if (discarding()) {
      // A complex key inside a value yaml.v3 never decodes: skip it, keep its value slot.
      begin_key("", mark, true, false);
      skip_depth_ = 1;
      return;
    }
    fatal(mark, std::string("invalid map key: a ") +
                    (k == doc_node::kind::mapping ? "!!map" : "!!seq") + " cannot be a key");
  }
  if (frames_.size() >= limits_.max_depth) {
    // Reported at the collection that is one level too deep (the next item of a sequence,
    // or the pending value of a key), as the JSON decoder reports it.
    const bool in_sequence = !frames_.empty() && frames_.back().node->is_sequence();
    fatal_at(in_sequence ? index(path_of(frames_.size() - 1), frames_.back().node->items.size())
                         : current_path(),
             mark, "document nesting exceeds " + std::to_string(limits_.max_depth) + " levels");
  }
  const bool discard = discarding();
  doc_node* n = place(mark);
  n->k = k;
  frame f;
  f.discard = discard;
  // Inside a flow collection everything is flow (yaml-cpp reports the single-pair mapping
  // of "[a: b]" as block).
  f.flow = flow || (!frames_.empty() && frames_.back().flow);
  f.node = n;
  f.anchor = anchor;
  f.count_at_start = count_;
  f.entries_begin = entries_.size();
  if (anchor) anchor_name_for(anchor);
  frames_.push_back(std::move(f));
}

void tree_builder::close_collection() {
  frame f = frames_.back();
  frames_.pop_back();
  entries_.resize(f.entries_begin);
  if (!frames_.empty()) frames_.back().height = std::max(frames_.back().height, f.height + 1);
  if (f.anchor) store_anchor(f.anchor, *f.node, count_ - f.count_at_start + 1, f.height);
}

void tree_builder::anchor_name_for(YAML::anchor_t anchor) {
  if (anchor >= anchors_.size()) {
    anchors_.resize(anchor + 1);
    anchor_names_.resize(anchor + 1);
  }
  anchor_names_[anchor] = anchor_name_;
}

void tree_builder::store_scalar_anchor(YAML::anchor_t anchor, const doc_node& n) {
  store_anchor(anchor, n, 1, 0);
}

void tree_builder::store_anchor(YAML::anchor_t anchor, const doc_node& n, std::size_t size,
                                std::size_t height) {
  anchor_name_for(anchor);
  anchor_entry& a = anchors_[anchor];
  a.node = n;
  a.size = size;
  a.height = height;
  a.complete = true;
}

decode_result decode_yaml_styled(std::string_view text, std::string_view rule_id,
                                 const decode_limits& limits, path_style style) {
  if (text.size() > limits.max_bytes) {
    decode_result r;
    r.errors.push_back(too_long(std::string(rule_id), "", text.size(), limits.max_bytes));
    return r;
  }
  // yaml.v3 reads a lone CR as a line break, like LF and CR LF; yaml-cpp knows only the
  // other two and would make the CR part of a token. Such a text is decoded with each lone
  // CR turned into LF, which is the same document for yaml.v3, line numbers included (in
  // scalars yaml.v3 itself turns every line break into LF).
  std::string unified;
  if (lone_crs_as_lf(text, unified)) text = unified;
  bool separators = false;
  if (std::string problem = check_yaml_characters(text, &separators); !problem.empty())
    return fail_with(rule_id, std::move(problem));
  if (std::string problem = check_prologue(text); !problem.empty())
    return fail_with(rule_id, std::move(problem));

  tree_builder builder(text, rule_id, limits, style, separators);
  view_streambuf buf(text);
  std::istream in(&buf);
  try {
    YAML::Parser parser(in);
    if (!parser.HandleNextDocument(builder) || !builder.saw_document) {
      return fail_with(rule_id,
                       "the document is empty (no YAML content, only white space or comments)");
    }
    if (builder.errors.empty()) {
      // The consumer decodes exactly one document: even an empty second one (a trailing
      // `---`) is an error, while a trailing `...` ends the first document cleanly.
      tree_builder rest(text, rule_id, limits, style, separators);
      if (parser.HandleNextDocument(rest)) {
        return fail_with(rule_id, "more than one YAML document (a second `---` document)");
      }
    }
  } catch (const abort_parse&) {
  } catch (const YAML::Exception& e) {
    decode_result r;
    field_error fe = invalid(
        std::string(rule_id), builder.current_path(), "",
        e.mark.is_null() ? e.msg : at_line(static_cast<std::size_t>(e.mark.line) + 1, e.msg));
    fe.has_value = false;
    r.errors.push_back(std::move(fe));
    return r;
  } catch (const std::bad_alloc&) {
    return fail_with(rule_id, "document too large to decode");
  } catch (const std::exception& e) {
    return fail_with(rule_id, e.what());
  }
  decode_result r;
  r.errors = std::move(builder.errors);
  if (r.errors.empty()) r.root = std::move(builder.root);
  return r;
}

}  // namespace topogate::core::detail

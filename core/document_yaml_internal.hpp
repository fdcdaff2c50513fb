#pragma once
// The YAML decoder's tree builder, a yaml-cpp event handler. Its members are defined in two
// files: document_yaml.cpp follows the events (collections, keys and values, anchors and
// aliases, the location for error paths) and decodes a document; document_yaml_rules.cpp holds
// the rules yaml.v3 layers on top of them. Included only by those two files.

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/mark.h>

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "document.hpp"
#include "document_internal.hpp"
#include "field_error.hpp"

namespace topogate::core::detail {

// Thrown from the event handler to stop yaml-cpp after a fatal decode error; caught in
// decode_yaml_styled before it leaves the decoder.
struct abort_parse {};

// yaml-cpp's events into doc_node, with yaml.v3's semantics layered on top.
class tree_builder final : public YAML::EventHandler {
 public:
  tree_builder(std::string_view text, std::string_view rule, const decode_limits& limits,
               path_style style, bool line_separators)
      // yaml-cpp's marks count from after a byte-order mark.
      : text_(text.substr(text.substr(0, 3) == "\xef\xbb\xbf" ? 3 : 0)),
        rule_(rule),
        limits_(limits),
        style_(style),
        separators_(line_separators) {}

  doc_node root;
  error_list errors;
  bool saw_document = false;

  void OnDocumentStart(const YAML::Mark&) override { saw_document = true; }
  void OnDocumentEnd() override {}

  void OnAnchor(const YAML::Mark&, const std::string& name) override { anchor_name_ = name; }

  void OnNull(const YAML::Mark& mark, YAML::anchor_t anchor) override;
  void OnScalar(const YAML::Mark& mark, const std::string& tag, YAML::anchor_t anchor,
                const std::string& value) override;
  void OnAlias(const YAML::Mark& mark, YAML::anchor_t anchor) override;
  void OnSequenceStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor,
                       YAML::EmitterStyle::value style) override;
  void OnSequenceEnd() override;
  void OnMapStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor,
                  YAML::EmitterStyle::value style) override;
  void OnMapEnd() override;

  // The path of the innermost open location, rendered per path_style.
  std::string current_path() const { return path_of(frames_.size()); }
  // The path through the outermost `count` open collections.
  std::string path_of(std::size_t count) const;

 private:
  struct entry_info {
    std::size_t line = 0;
    bool dropped = false;
    bool merge = false;
    std::string raw;  // literal text of a dropped (null) key, for duplicate detection
  };
  struct frame {
    doc_node* node = nullptr;
    YAML::anchor_t anchor = 0;
    std::size_t count_at_start = 0;
    std::size_t height = 1;
    bool discard = false;  // inside the value of a dropped (null) key
    bool flow = false;     // a flow collection ([...] or {...})
    int key_pos = -1;      // where the pending key starts (yaml-cpp's mark)
    bool has_key = false;  // a key was read and its value is pending or being built
    bool value_pending = false;
    std::size_t entries_begin = 0;  // mappings: entries_[entries_begin + i] describes map[i]
  };
  struct anchor_entry {
    doc_node node;
    std::size_t size = 0;
    std::size_t height = 0;
    bool complete = false;
  };

  // Used by both files.
  void append_key(std::string& out, std::string_view key, bool top) const {
    append_path_key(out, key, top, style_);
  }

  // Building the value of a dropped (null) key, which yaml.v3 skips: decode-time checks
  // (tags, merges, duplicates, self-references) do not apply there.
  bool discarding() const {
    if (frames_.empty()) return false;
    const frame& f = frames_.back();
    if (f.discard) return true;
    return f.node->is_mapping() && f.value_pending && !entries_.empty() && entries_.back().dropped;
  }

  bool expecting_key() const {
    return !frames_.empty() && frames_.back().node->is_mapping() && !frames_.back().value_pending;
  }

  [[noreturn]] void fatal(const YAML::Mark& mark, std::string_view msg) {
    fatal_at(current_path(), mark, msg);
  }
  [[noreturn]] void fatal_at(std::string path, const YAML::Mark& mark, std::string_view msg);

  // The tree and the location (document_yaml.cpp).
  std::string_view key_text(const frame& f) const;
  std::string name_of(YAML::anchor_t anchor) const;
  std::string current_path_without_key() const;
  void charge_alias(const YAML::Mark& mark, std::size_t size);
  void charge(const YAML::Mark& mark);
  void begin_key(std::string key, const YAML::Mark& mark, bool dropped, bool merge);
  doc_node* place(const YAML::Mark& mark);
  void open_collection(const YAML::Mark& mark, doc_node::kind k, YAML::anchor_t anchor, bool flow);
  void close_collection();
  void anchor_name_for(YAML::anchor_t anchor);
  void store_scalar_anchor(YAML::anchor_t anchor, const doc_node& n);
  void store_anchor(YAML::anchor_t anchor, const doc_node& n, std::size_t size, std::size_t height);

  // yaml.v3's rules (document_yaml_rules.cpp): where yaml-cpp reads a node yaml.v3 does not
  // find, scalar tags and quoted scalars, and what a finished mapping becomes.
  bool flow_node_missing(const YAML::Mark& mark, bool null_node) const;
  bool after_explicit_key(std::size_t at) const;
  bool block_key_missing(const YAML::Mark& mark) const;
  bool block_colon_missing(const YAML::Mark& mark) const;
  std::string literal_null_at(const YAML::Mark& mark) const;
  void resolve_scalar(const YAML::Mark& mark, const std::string& tag, const std::string& value,
                      doc_node& out, bool& is_null);
  void check_quoted(const YAML::Mark& mark);
  void finish_mapping();
  [[noreturn]] void merge_error();

  std::string_view text_;
  std::string_view rule_;
  const decode_limits& limits_;
  path_style style_;
  bool separators_;
  std::vector<frame> frames_;
  std::vector<entry_info> entries_;
  std::vector<anchor_entry> anchors_;
  std::vector<std::string> anchor_names_;
  std::string anchor_name_;
  std::size_t count_ = 0;
  std::size_t alias_count_ = 0;
  std::size_t skip_depth_ = 0;  // > 0 while skipping a complex key yaml.v3 never decodes
};

}  // namespace topogate::core::detail

#pragma once
// A decoded YAML/JSON document, faithful to what the Go consumer sees through
// gopkg.in/yaml.v3: scalars keep their literal text, tags are resolved the way yaml.v3
// resolves them, aliases are expanded (bounded), `<<` merge keys are applied, and
// duplicate keys, a second document, an empty document and `%YAML 1.2` are errors.
// JSON is decoded with simdjson into the same tree (JSON is YAML), with the same rules.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "field_error.hpp"

namespace topogate::core {

struct doc_node {
  enum class kind : std::uint8_t { null, scalar, sequence, mapping };
  // How a scalar was resolved (yaml.v3's resolve()); the literal text is kept either way.
  enum class scalar_tag : std::uint8_t { str, int_, float_, bool_, timestamp, binary, other };

  kind k = kind::null;
  scalar_tag tag = scalar_tag::str;
  std::string text;                                   // scalar literal text (binary: decoded)
  std::vector<doc_node> items;                        // sequence
  std::vector<std::pair<std::string, doc_node>> map;  // mapping, in document order, keys unique
  std::size_t line = 0;                               // 1-based, 0 when unknown

  // Defined out of line: `map` holds doc_node by value, so the members that destroy or copy
  // it need the complete type (libc++ and clang's libstdc++ checks insist on it).
  doc_node() noexcept;
  doc_node(const doc_node&);
  doc_node(doc_node&&) noexcept;
  doc_node& operator=(const doc_node&);
  doc_node& operator=(doc_node&&) noexcept;
  ~doc_node();

  [[nodiscard]] bool is_null() const noexcept { return k == kind::null; }
  [[nodiscard]] bool is_scalar() const noexcept { return k == kind::scalar; }
  [[nodiscard]] bool is_mapping() const noexcept { return k == kind::mapping; }
  [[nodiscard]] bool is_sequence() const noexcept { return k == kind::sequence; }
  // Mapping lookup; nullptr when absent or not a mapping.
  [[nodiscard]] const doc_node* find(std::string_view key) const noexcept;
  // yaml.v3 decoding into a Go string: scalar literal text, null -> "".
  [[nodiscard]] std::string_view as_string() const noexcept { return text; }
  [[nodiscard]] std::string_view kind_name() const noexcept;  // "!!map", "!!seq", "!!str", ...
};

namespace detail {
struct decoder_state;
}

// Reusable parsing state for JSON: simdjson's parsers with their index and string buffers,
// a padded copy of the input, and the decoder's working stacks. The core keeps no state of
// its own; a caller that decodes many documents keeps one of these (per thread: one object
// must not be used by two threads at once) so that the buffers are allocated, and their
// pages faulted in, once instead of per document. A moved-from decoder may only be assigned
// to or destroyed.
class json_decoder {
 public:
  json_decoder();
  ~json_decoder();
  json_decoder(json_decoder&&) noexcept;
  json_decoder& operator=(json_decoder&&) noexcept;
  json_decoder(const json_decoder&) = delete;
  json_decoder& operator=(const json_decoder&) = delete;

  // The state itself is the core's own (document_internal.hpp); callers use the decoder
  // through the decode functions and json_reuse.hpp.
  [[nodiscard]] detail::decoder_state& state() noexcept { return *state_; }
  [[nodiscard]] const detail::decoder_state& state() const noexcept { return *state_; }

 private:
  std::unique_ptr<detail::decoder_state> state_;
};

struct decode_limits {
  std::size_t max_bytes = 8u << 20;           // input size
  std::size_t max_depth = 64;                 // nesting of collections
  std::size_t max_expanded_nodes = 1u << 20;  // after alias/merge expansion ("billion laughs")
};

struct decode_result {
  doc_node root;
  error_list errors;  // rule "S1"-style errors are tagged by the caller; here rule = rule_id
  [[nodiscard]] bool ok() const noexcept { return errors.empty(); }
};

// Decodes one YAML (or JSON) document. `rule_id` tags the errors (S1 for snapshots,
// "" for objects). Never throws.
decode_result decode_yaml(std::string_view text, std::string_view rule_id = "",
                          const decode_limits& limits = {});
// Decodes JSON with simdjson; same tree and error rules as decode_yaml.
decode_result decode_json(json_decoder& decoder, std::string_view text,
                          std::string_view rule_id = "", const decode_limits& limits = {});
// JSON when the first non-blank byte is '{' or '[' and simdjson accepts it, else YAML.
decode_result decode_any(json_decoder& decoder, std::string_view text,
                         std::string_view rule_id = "", const decode_limits& limits = {});
// The same with a decoder of their own (allocated for this one call).
decode_result decode_json(std::string_view text, std::string_view rule_id = "",
                          const decode_limits& limits = {});
decode_result decode_any(std::string_view text, std::string_view rule_id = "",
                         const decode_limits& limits = {});

}  // namespace topogate::core

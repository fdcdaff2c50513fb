#pragma once
// Pieces of the document decoder shared among its files (document*.cpp; document.cpp says
// which holds what) and with the snapshot fast path (snapshot.cpp), the node-list reader
// (nodes.cpp) and the TopologySource checks (topology_source.cpp). Included only by
// core/*.cpp: not part of the public core interface.

#include <simdjson.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "document.hpp"
#include "field_error.hpp"

namespace topogate::core::detail {

// How decode errors name a location: `generic` renders identifier-like keys as `.key` and
// others as `[key]`; `snapshot` renders every key below the top level as `[key]`, so that
// decode errors use the same paths as the snapshot rules (`nodes[worker-a][key]`).
enum class path_style : std::uint8_t { generic, snapshot };

// One step of a location while decoding: a mapping key (a view into the parser's string
// buffer) or a sequence index. Paths are rendered from these only when an error needs one.
struct path_segment {
  std::string_view key;
  std::size_t index = 0;
  bool is_index = false;
};

// What a json_decoder holds (document.hpp). Every member is reused from call to call for its
// capacity.
struct decoder_state {
  simdjson::ondemand::parser parser;  // decode_json
  simdjson::dom::parser dom;          // the snapshot fast path
  std::vector<char> buffer;           // padded input copy for both
  // A second parser and buffer for a caller that decodes part of a document it parsed
  // itself (an AdmissionReview's request.object): its views stay valid across decode_json.
  simdjson::ondemand::parser outer_parser;
  std::vector<char> outer;
  // The JSON tree builder's working stacks: one list of finished children per depth, so
  // that every mapping and sequence is allocated once, at its final size.
  std::vector<std::vector<std::pair<std::string, doc_node>>> maps;
  std::vector<std::vector<doc_node>> items;
  std::vector<path_segment> path;
  // The tree the reusing decoders (json_reuse.hpp) build into. Its strings and vectors keep
  // their capacity from one document to the next, so that similar documents cost no
  // allocation.
  doc_node tree;

  // A padded copy of `text` in `into` (buffer or outer), valid until that buffer is reused.
  static simdjson::padded_string_view pad(std::vector<char>& into, std::string_view text);
  simdjson::padded_string_view pad(std::string_view text) { return pad(buffer, text); }
};

// ---- The two decoders (document_yaml.cpp, document_json.cpp) and what both use (document.cpp)

decode_result decode_yaml_styled(std::string_view text, std::string_view rule_id,
                                 const decode_limits& limits, path_style style);
// `json_ok` is false when the text is not JSON that both simdjson and yaml.v3's scanner
// accept; the caller then hands it to the YAML decoder for the verdict.
decode_result decode_json_styled(decoder_state& state, std::string_view text,
                                 std::string_view rule_id, const decode_limits& limits,
                                 path_style style, bool& json_ok);

// A decode_result holding one error with neither a path nor a value.
decode_result fail_with(std::string_view rule, std::string detail);

// Appends one mapping key to a path in the given style.
void append_path_key(std::string& out, std::string_view key, bool top, path_style style);
// Renders a path from its segments, as append_path_key and core::index would build it.
std::string render_path(const std::vector<path_segment>& segments, path_style style);

// ---- The text as yaml.v3 reads it (document_text_checks.cpp, document_scan.cpp)

[[nodiscard]] inline bool is_digit(char c) noexcept { return c >= '0' && c <= '9'; }
// The value of a hexadecimal digit, -1 for any other character.
[[nodiscard]] inline int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if ((c | 0x20) >= 'a' && (c | 0x20) <= 'f') return (c | 0x20) - 'a' + 10;
  return -1;
}

// yaml.v3's line number (1-based) of the byte at `offset`: LF, CR LF and a lone CR each end
// a line.
std::size_t line_of(std::string_view text, std::size_t offset);
// "line N: msg", as yaml.v3 words an error.
std::string at_line(std::size_t line, std::string_view msg);
// `text` with every lone CR turned into LF, in `out`; false (and `out` untouched) when it
// has none.
bool lone_crs_as_lf(std::string_view text, std::string& out);

// The escapes and the end of the double-quoted scalar whose opening quote is at `open`, and
// the end of a single-quoted one: what yaml-cpp takes and yaml.v3 refuses (`\/`, a surrogate
// escape, a scalar the end of the text cuts off). Empty when acceptable, else the message.
std::string check_double_quoted(std::string_view text, std::size_t open);
std::string check_single_quoted(std::string_view text, std::size_t open);

// Directives and the region before the first token, where yaml-cpp is more lenient than
// yaml.v3. Empty when acceptable, else the message.
std::string check_prologue(std::string_view text);

// What gopkg.in/yaml.v3's reader accepts before any parsing: strict UTF-8 (no overlongs,
// surrogates or code points past U+10FFFF) and only YAML-printable characters (tab, LF, CR,
// 0x20-0x7E, U+0085, U+00A0-U+D7FF, U+E000-U+FFFD, U+10000+). Returns an empty string when
// acceptable, else a message with the line number. `has_line_separators` reports U+0085,
// U+2028 or U+2029, which YAML 1.1 (yaml.v3) treats as line breaks and YAML 1.2 does not.
std::string check_yaml_characters(std::string_view text, bool* has_line_separators);

// yaml.v3 reads a JSON document with its YAML scanner, which refuses a few things JSON allows:
// the `\/` escape, escaped UTF-16 surrogates (`\ud83d`), an implicit key longer than 1024
// characters or not on the same line as its `:`, and a tab before the first token. Returns an
// empty string when the JSON text is also acceptable YAML for these rules.
std::string check_json_as_yaml(std::string_view text);

// A JSON key (opening quote at byte `open` of `text`) is also a YAML simple key: its `:` on
// the same line and at most 1024 characters after the key's start (yaml.v3 scannerc.go).
[[nodiscard]] bool json_key_fits_yaml(std::string_view text, std::size_t open);

// One pass over JSON text for the snapshot fast path: the character rules of
// check_yaml_characters, the escape rules of check_json_as_yaml, and every structural `:`
// on its key's line. `exact` means the text needs the exact (slower) JSON path to decide
// (white space before a `:` too long to rule out yaml.v3's 1024-character key limit);
// `refuse` means it is not JSON that yaml.v3 reads the same way.
enum class json_scan : std::uint8_t { ok, exact, refuse };
[[nodiscard]] json_scan scan_json_for_yaml(std::string_view text) noexcept;

// Copies `text` to `out` (text.size() bytes) and reports whether every byte is plain: below
// 0x7f, no backslash, no `:` right after white space. Plain JSON that simdjson accepts is read
// by yaml.v3 the same way; anything else needs scan_json_for_yaml. `out` may be partly
// written when this returns false.
[[nodiscard]] bool copy_plain_json(std::string_view text, char* out) noexcept;

// ---- Scalars (document_scalar.cpp)

// What yaml.v3's resolve() makes of a scalar's text.
enum class resolved : std::uint8_t { str, null, bool_, int_, float_, timestamp };
// yaml.v3 resolve("", text); timestamps only when `try_timestamp` (a !!timestamp tag asks for
// one, a plain scalar tries).
[[nodiscard]] resolved resolve_text(std::string_view text, bool try_timestamp);
[[nodiscard]] doc_node::scalar_tag to_scalar_tag(resolved r);
// "!!int", "!!null", ...: how yaml.v3 names the tag in its messages.
[[nodiscard]] std::string_view short_name(resolved r);
// Go's base64.StdEncoding.DecodeString (!!binary): CR and LF are skipped, padding is required.
bool decode_base64(std::string_view in, std::string& out);

// yaml.v3 resolve("", text) for a plain scalar: the tag it would get (null included).
[[nodiscard]] doc_node::scalar_tag resolve_plain(std::string_view text, bool* is_null) noexcept;

// Literal text of a JSON number token, checked against the JSON grammar (RFC 8259 §6).
[[nodiscard]] bool is_json_number(std::string_view token) noexcept;

// ---- Short strings on hot paths

// Byte equality for short strings without a library call (label keys, values, names).
[[nodiscard]] inline __attribute__((always_inline)) bool same_bytes(const char* a, const char* b,
                                                                    std::size_t n) noexcept {
  std::uint64_t x, y;
  const auto word = [](const char* p) {
    std::uint64_t w;
    std::memcpy(&w, p, 8);
    return w;
  };
  // Up to 32 bytes (most label keys): overlapping words, one branch.
  if (n >= 8 && n <= 16) return ((word(a) ^ word(b)) | (word(a + n - 8) ^ word(b + n - 8))) == 0;
  if (n > 16 && n <= 32)
    return ((word(a) ^ word(b)) | (word(a + 8) ^ word(b + 8)) |
            (word(a + n - 16) ^ word(b + n - 16)) | (word(a + n - 8) ^ word(b + n - 8))) == 0;
  if (n >= 8) {
    std::size_t i = 0;
    for (; i + 8 <= n; i += 8) {
      std::memcpy(&x, a + i, 8);
      std::memcpy(&y, b + i, 8);
      if (x != y) return false;
    }
    if (i == n) return true;
    // The last, overlapping word covers the tail.
    std::memcpy(&x, a + n - 8, 8);
    std::memcpy(&y, b + n - 8, 8);
    return x == y;
  }
  if (n >= 4) {
    std::uint32_t u, v, w, z;
    std::memcpy(&u, a, 4);
    std::memcpy(&v, b, 4);
    std::memcpy(&w, a + n - 4, 4);
    std::memcpy(&z, b + n - 4, 4);
    return u == v && w == z;
  }
  for (std::size_t i = 0; i < n; ++i)
    if (a[i] != b[i]) return false;
  return true;
}
[[nodiscard]] inline __attribute__((always_inline)) bool same(std::string_view a,
                                                              std::string_view b) noexcept {
  return a.size() == b.size() && same_bytes(a.data(), b.data(), a.size());
}

// Open-addressing index from string views to 32-bit values. The caller keeps the viewed
// bytes alive. Used for duplicate detection and interning on hot paths, where a node-based
// std::unordered_map would allocate once per entry.
class string_index {
 public:
  void reset(std::size_t expected);
  // Inserts key -> value unless present; returns the stored value and whether it was inserted.
  std::pair<std::uint32_t, bool> insert(std::string_view key, std::uint32_t value);
  [[nodiscard]] const std::uint32_t* find(std::string_view key) const noexcept;
  [[nodiscard]] std::size_t size() const noexcept { return entries_.size(); }

  [[nodiscard]] static std::uint64_t hash(std::string_view s) noexcept {
    // 8 bytes at a time, multiply-xorshift mixing: keys are short (label keys, node names).
    std::uint64_t h = 0x9e3779b97f4a7c15ULL ^ (s.size() * 0xff51afd7ed558ccdULL);
    const char* p = s.data();
    std::size_t n = s.size();
    while (n >= 8) {
      std::uint64_t w;
      std::memcpy(&w, p, 8);
      h = (h ^ w) * 0xbf58476d1ce4e5b9ULL;
      h ^= h >> 31;
      p += 8;
      n -= 8;
    }
    if (n) {
      std::uint64_t w = 0;
      std::memcpy(&w, p, n);
      h = (h ^ w) * 0x94d049bb133111ebULL;
      h ^= h >> 29;
    }
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 32;
    return h;
  }

 private:
  struct entry {
    const char* data;
    std::uint32_t len;
    std::uint32_t value;
  };
  // A slot is (upper 32 hash bits << 32) | (entry index + 1); 0 is empty. Eight bytes per
  // slot keep probing within cache for thousands of keys.
  std::vector<std::uint64_t> slots_;
  std::vector<entry> entries_;
  std::size_t mask_ = 0;
  void grow();
  void place(std::uint64_t h, std::uint32_t entry_index);
};

inline void string_index::reset(std::size_t expected) {
  std::size_t cap = 16;
  while (cap < expected * 2) cap <<= 1;
  slots_.assign(cap, 0);
  entries_.clear();
  entries_.reserve(expected);
  mask_ = cap - 1;
}

inline void string_index::place(std::uint64_t h, std::uint32_t entry_index) {
  std::size_t i = h & mask_;
  while (slots_[i]) i = (i + 1) & mask_;
  slots_[i] = (h & 0xffffffff00000000ULL) | (static_cast<std::uint64_t>(entry_index) + 1);
}

inline void string_index::grow() {
  const std::size_t cap = slots_.empty() ? 16 : slots_.size() * 2;
  slots_.assign(cap, 0);
  mask_ = cap - 1;
  for (std::uint32_t i = 0; i < entries_.size(); ++i)
    place(hash(std::string_view(entries_[i].data, entries_[i].len)), i);
}

inline std::pair<std::uint32_t, bool> string_index::insert(std::string_view key,
                                                           std::uint32_t value) {
  if ((entries_.size() + 1) * 2 > slots_.size()) grow();
  const std::uint64_t h = hash(key);
  const std::uint64_t tag = h & 0xffffffff00000000ULL;
  std::size_t i = h & mask_;
  while (const std::uint64_t slot = slots_[i]) {
    if ((slot & 0xffffffff00000000ULL) == tag) {
      const entry& e = entries_[(slot & 0xffffffffULL) - 1];
      if (e.len == key.size() && same_bytes(e.data, key.data(), key.size()))
        return {e.value, false};
    }
    i = (i + 1) & mask_;
  }
  entries_.push_back(entry{key.data(), static_cast<std::uint32_t>(key.size()), value});
  slots_[i] = tag | entries_.size();
  return {value, true};
}

inline const std::uint32_t* string_index::find(std::string_view key) const noexcept {
  if (slots_.empty()) return nullptr;
  const std::uint64_t h = hash(key);
  const std::uint64_t tag = h & 0xffffffff00000000ULL;
  std::size_t i = h & mask_;
  while (const std::uint64_t slot = slots_[i]) {
    if ((slot & 0xffffffff00000000ULL) == tag) {
      const entry& e = entries_[(slot & 0xffffffffULL) - 1];
      if (e.len == key.size() && same_bytes(e.data, key.data(), key.size())) return &e.value;
    }
    i = (i + 1) & mask_;
  }
  return nullptr;
}

}  // namespace topogate::core::detail

#pragma once
// Pieces of the document decoder shared with the snapshot fast path (snapshot.cpp) and
// the node-list reader (nodes.cpp). Not part of the public core interface.

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

decode_result decode_yaml_styled(std::string_view text, std::string_view rule_id,
                                 const decode_limits& limits, path_style style);
// `json_ok` is false when the text is not JSON that both simdjson and yaml.v3's scanner
// accept; the caller then hands it to the YAML decoder for the verdict.
decode_result decode_json_styled(std::string_view text, std::string_view rule_id,
                                 const decode_limits& limits, path_style style, bool& json_ok);

// Appends one mapping key to a path in the given style.
void append_path_key(std::string& out, std::string_view key, bool top, path_style style);

// Reusable per-thread simdjson state.
struct json_scratch {
  simdjson::ondemand::parser parser;
  std::vector<char> buffer;
  // A padded copy of `text` in `buffer`, valid until the next call.
  simdjson::padded_string_view pad(std::string_view text);
};
json_scratch& thread_json_scratch();

// A JSON key (opening quote at byte `open` of `text`) is also a YAML simple key: its `:` on
// the same line and at most 1024 characters after the key's start (yaml.v3 scannerc.go).
[[nodiscard]] bool json_key_fits_yaml(std::string_view text, std::size_t open);

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

// One pass over JSON text for the snapshot fast path: the character rules of
// check_yaml_characters, the escape rules of check_json_as_yaml, and every structural `:`
// on its key's line. `exact` means the text needs the exact (slower) JSON path to decide
// (white space before a `:` too long to rule out yaml.v3's 1024-character key limit);
// `refuse` means it is not JSON that yaml.v3 reads the same way.
enum class json_scan : std::uint8_t { ok, exact, refuse };
[[nodiscard]] json_scan scan_json_for_yaml(std::string_view text) noexcept;

// Literal text of a JSON number token, checked against the JSON grammar (RFC 8259 §6).
[[nodiscard]] bool is_json_number(std::string_view token) noexcept;

// yaml.v3 resolve("", text) for a plain scalar: the tag it would get (null included).
[[nodiscard]] doc_node::scalar_tag resolve_plain(std::string_view text, bool* is_null) noexcept;

// Open-addressing index from string views to 32-bit values. The caller keeps the viewed
// bytes alive. Used for duplicate detection and interning on hot paths, where a node-based
// std::unordered_map would allocate once per entry.
class string_index {
 public:
  void reset(std::size_t expected);
  // Inserts key -> value unless present; returns the stored value and whether it was inserted.
  std::pair<std::uint32_t, bool> insert(std::string_view key, std::uint32_t value);
  [[nodiscard]] const std::uint32_t* find(std::string_view key) const noexcept;
  [[nodiscard]] std::size_t size() const noexcept { return size_; }

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
  struct slot {
    const char* data = nullptr;
    std::uint32_t len = 0;
    std::uint32_t value = 0;
    std::uint64_t hash = 0;
  };
  std::vector<slot> slots_;
  std::size_t mask_ = 0;
  std::size_t size_ = 0;
  void grow();
};

inline void string_index::reset(std::size_t expected) {
  std::size_t cap = 16;
  while (cap < expected * 2) cap <<= 1;
  slots_.assign(cap, slot{});
  mask_ = cap - 1;
  size_ = 0;
}

inline void string_index::grow() {
  std::vector<slot> old;
  old.swap(slots_);
  const std::size_t cap = old.empty() ? 16 : old.size() * 2;
  slots_.assign(cap, slot{});
  mask_ = cap - 1;
  for (const slot& s : old) {
    if (!s.data) continue;
    std::size_t i = s.hash & mask_;
    while (slots_[i].data) i = (i + 1) & mask_;
    slots_[i] = s;
  }
}

inline std::pair<std::uint32_t, bool> string_index::insert(std::string_view key,
                                                           std::uint32_t value) {
  if (slots_.empty() || (size_ + 1) * 2 > slots_.size()) grow();
  const std::uint64_t h = hash(key);
  std::size_t i = h & mask_;
  // A non-null pointer marks a used slot, even for an empty key.
  const char* data = key.data() ? key.data() : "";
  while (slots_[i].data) {
    const slot& s = slots_[i];
    if (s.hash == h && s.len == key.size() &&
        (key.empty() || std::memcmp(s.data, data, key.size()) == 0))
      return {s.value, false};
    i = (i + 1) & mask_;
  }
  slots_[i] = slot{data, static_cast<std::uint32_t>(key.size()), value, h};
  ++size_;
  return {value, true};
}

inline const std::uint32_t* string_index::find(std::string_view key) const noexcept {
  if (slots_.empty()) return nullptr;
  const std::uint64_t h = hash(key);
  std::size_t i = h & mask_;
  while (slots_[i].data) {
    const slot& s = slots_[i];
    if (s.hash == h && s.len == key.size() &&
        (key.empty() || std::memcmp(s.data, key.data(), key.size()) == 0))
      return &s.value;
    i = (i + 1) & mask_;
  }
  return nullptr;
}

}  // namespace topogate::core::detail

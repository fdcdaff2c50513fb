#include "snapshot.hpp"

#include <simdjson.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <tuple>

#include "document_internal.hpp"
#include "hierarchy_internal.hpp"
#include "syntax.hpp"

namespace topogate::core {
namespace {

// ---------------------------------------------------------------------------------------
// A snapshot as views: what decoding produces and validation reads. The bytes live in the
// decoder's tree, simdjson's string buffer, or a `snapshot`, for as long as the call lasts;
// no label costs a heap allocation.

struct label_ref {
  std::string_view key;
  std::string_view value;
};

struct node_ref {
  std::string_view name;
  std::uint32_t first = 0;  // into snapshot_ref::labels
  std::uint32_t count = 0;
};

struct snapshot_ref {
  std::string_view api_version;
  std::string_view revision;
  std::vector<node_ref> nodes;
  std::vector<label_ref> labels;
};

// Every error, up to a cap: hostile input must not turn into an unbounded error list.
class error_sink {
 public:
  static constexpr std::size_t cap = 1000;

  explicit error_sink(error_list& out) : out_(out) {}

  // True when there is room for another error of `rule`; counts it otherwise.
  bool room(std::string_view rule) {
    if (out_.size() < cap) return true;
    if (suppressed_++ == 0) first_suppressed_ = rule;
    return false;
  }
  void add(field_error e) {
    if (room(e.rule)) out_.push_back(std::move(e));
  }
  [[nodiscard]] bool empty() const noexcept { return out_.empty() && suppressed_ == 0; }
  void finish() {
    if (suppressed_ == 0) return;
    field_error e = too_many(first_suppressed_, "nodes", cap + suppressed_, cap);
    e.detail = std::to_string(suppressed_) + " more errors not shown";
    out_.push_back(std::move(e));
    suppressed_ = 0;
  }

 private:
  error_list& out_;
  std::size_t suppressed_ = 0;
  std::string first_suppressed_;
};

std::string node_path(std::string_view name) { return key("nodes", name); }
std::string label_path(std::string_view name, std::string_view k) {
  return detail::node_label_path(name, k);
}

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
  [[gnu::always_inline]] [[nodiscard]] char type(std::size_t i) const noexcept { return static_cast<char>(tape_[i] >> 56); }
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

// ---------------------------------------------------------------------------------------
// Validation (S1 apiVersion, S2-S10) over views.

// Canonical JSON rendering size, computed without rendering (order does not change it).
std::size_t json_string_size(std::string_view s) {
  bool plain = true;
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u >= 0x7f || c == '"' || c == '\\') {
      plain = false;
      break;
    }
  }
  if (plain) return s.size() + 2;
  std::string tmp;
  append_json_string(tmp, s);
  return tmp.size();
}

// The value of `key` on node `n` (error messages only).
std::string_view value_of(const snapshot_ref& s, const node_ref& n, std::string_view key) {
  for (std::uint32_t i = 0; i < n.count; ++i)
    if (s.labels[n.first + i].key == key) return s.labels[n.first + i].value;
  return {};
}

std::string join_tuple(const std::vector<std::string>& levels, const snapshot_ref& s,
                       const node_ref& n, std::size_t count) {
  std::string out = "{";
  for (std::size_t i = 0; i < count; ++i) detail::append_tuple_entry(out, i == 0, levels[i], value_of(s, n, levels[i]));
  out += '}';
  return out;
}

// is_dns1123_subdomain eight bytes at a time: a Node name is mostly [a-z0-9], and only its
// '-' and '.' need a look at their neighbours. Same answer for every input.
bool dns1123_subdomain_words(std::string_view s) noexcept {
  if constexpr (std::endian::native != std::endian::little) return is_dns1123_subdomain(s);
  if (s.empty() || s.size() > max_dns1123_subdomain_length) return is_dns1123_subdomain(s);
  constexpr std::uint64_t ones = 0x0101010101010101ULL, high = 0x8080808080808080ULL;
  // High bit of each byte set when the byte (below 0x80) is within [lo, hi].
  const auto within = [](std::uint64_t w, std::uint64_t lo, std::uint64_t hi) {
    return ((w | high) - ones * lo) & ~((w | high) - ones * (hi + 1)) & high;
  };
  const std::size_t n = s.size();
  for (std::size_t i = 0; i < n; i += 8) {
    const std::size_t m = std::min<std::size_t>(8, n - i);
    std::uint64_t w = 0;
    if (m == 8) {
      std::memcpy(&w, s.data() + i, 8);
    } else if (n >= 8) {
      // The tail as the last whole word, shifted down to its first m bytes.
      std::memcpy(&w, s.data() + n - 8, 8);
      w >>= 8 * (8 - m);
    } else {
      for (std::size_t j = 0; j < m; ++j)
        w |= std::uint64_t{static_cast<unsigned char>(s[i + j])} << (8 * j);
    }
    const std::uint64_t live = m == 8 ? high : high & ((std::uint64_t{1} << (8 * m)) - 1);
    if (w & high) return is_dns1123_subdomain(s);
    const std::uint64_t alnum = within(w, 'a', 'z') | within(w, '0', '9');
    const std::uint64_t special = within(w, '-', '.');  // '-' and '.' are adjacent
    if (((alnum | special) & live) != live) return false;
    for (std::uint64_t sp = special & live; sp; sp &= sp - 1) {
      const std::size_t at = i + static_cast<std::size_t>(__builtin_ctzll(sp)) / 8;
      const char prev = at == 0 ? '.' : s[at - 1];
      if (s[at] == '.' ? (prev == '.' || prev == '-') : prev == '.') return false;
    }
  }
  return s.back() != '.' && s.back() != '-';
}

constexpr std::uint32_t none = UINT32_MAX;

void validate_ref(const snapshot_ref& s, const snapshot_context& ctx, error_sink& sink,
                  bool check_duplicates) {
  if (s.api_version.empty()) {
    sink.add(required("S1", "apiVersion", "must be " + std::string(snapshot_api_version)));
  } else if (s.api_version != snapshot_api_version) {
    sink.add(not_supported("S1", "apiVersion", s.api_version, {std::string(snapshot_api_version)}));
  }
  if (is_blank(s.revision)) {
    sink.add(required("S2", "revision", "must not be empty or white space"));
  }

  const topology_source* src = ctx.source;
  const std::vector<std::string> no_levels;
  const std::vector<std::string>& levels = src ? src->levels : no_levels;
  const std::size_t L = levels.size();
  const std::size_t N = s.nodes.size();
  detail::string_index level_index;
  level_index.reset(L + 1);
  for (std::size_t i = 0; i < L; ++i) level_index.insert(levels[i], static_cast<std::uint32_t>(i));
  std::vector<char> level_publishable(L, 1);
  std::vector<std::size_t> level_json_size(L);
  for (std::size_t i = 0; i < L; ++i) {
    if (src) level_publishable[i] = is_publishable_key(levels[i], *src);
    level_json_size[i] = json_string_size(levels[i]);
  }

  node_list selected;
  if (ctx.nodes && src) selected = select_nodes(*ctx.nodes, *src);

  if (check_duplicates) {
    detail::string_index names;
    names.reset(N);
    for (const node_ref& n : s.nodes) {
      if (!names.insert(n.name, 0).second && sink.room("S1"))
        sink.add(duplicate("S1", node_path(n.name), n.name));
      for (std::uint32_t i = 1; i < n.count; ++i)
        for (std::uint32_t j = 0; j < i; ++j)
          if (s.labels[n.first + i].key == s.labels[n.first + j].key) {
            if (sink.room("S1"))
              sink.add(duplicate("S1", label_path(n.name, s.labels[n.first + i].key),
                                 s.labels[n.first + i].key));
            break;
          }
    }
  }

  // Each distinct value of a level is interned once: S7 is decided once per value, and S9
  // compares ancestors by id. The JSON rendering size (S10) is summed on the way: strings
  // known to be valid names or label values need no escaping.
  struct value_info {
    std::uint32_t first_node = 0;  // the first node carrying it (document order)
    bool valid = false;
    bool conflict = false;  // seen under two different ancestor tuples
  };
  std::vector<detail::string_index> value_index(L);
  std::vector<std::vector<value_info>> values(L);
  for (std::size_t i = 0; i < L; ++i) {
    value_index[i].reset(N / 8 + 16);
    values[i].reserve(N / 8 + 16);
  }
  // Per node and level: the interned value id and the label carrying it (none when absent).
  std::vector<std::uint32_t> value_id(N * L, none);
  // Inventories list neighbouring Nodes together: a level's value often repeats the previous
  // node's, which then needs no hashing.
  std::vector<std::string_view> last_value(L);
  std::vector<std::uint32_t> last_id(L, none);
  std::array<std::uint32_t, 32> predicted;
  predicted.fill(none);
  std::size_t rendered = std::string_view(R"({"apiVersion":,"revision":,"nodes":{}})").size() +
                         json_string_size(s.api_version) + json_string_size(s.revision) +
                         (N ? N - 1 : 0);

  // The levels a node carries without a gap from the first: S9 applies to those.
  std::vector<std::uint8_t> chain_length(N);
  auto chain = [&](std::uint32_t ni) -> std::size_t { return chain_length[ni]; };
  bool any_conflict = false;

  // Raw views of the per-level tables for the hot loop (none of them grows in it).
  const std::string* const level_keys = levels.data();
  const char* const publishable_of = level_publishable.data();
  const std::size_t* const json_size_of = level_json_size.data();
  const label_ref* const all_labels = s.labels.data();
  std::uint32_t* const ids = value_id.data();
  for (std::uint32_t ni = 0; ni < N; ++ni) {
    const node_ref& n = s.nodes[ni];
    bool plain_name = false;
    // S3: a known, selected Node; without a node list, a DNS-1123 subdomain name.
    if (ctx.nodes && src) {
      if (!selected.find(n.name) && sink.room("S3")) {
        const bool exists = ctx.nodes->find(n.name) != nullptr;
        sink.add(not_found("S3", node_path(n.name), n.name,
                           exists ? "the Node is not selected by the source's nodeSelector"
                                  : "no Node with this name exists in the cluster"));
      }
    } else if (dns1123_subdomain_words(n.name)) {
      plain_name = true;
    } else if (sink.room("S3")) {
      std::string detail = "a node name must be a DNS-1123 subdomain";
      const auto problems = check_dns1123_subdomain(n.name);
      if (!problems.empty()) detail = problems.front();
      sink.add(invalid("S3", node_path(n.name), n.name, std::move(detail)));
    }
    rendered += (plain_name ? n.name.size() + 2 : json_string_size(n.name)) + 3;
    if (n.count) rendered += n.count - 1;
    for (std::uint32_t li = 0; li < n.count; ++li) {
      const label_ref& l = all_labels[n.first + li];
      // Nodes of one inventory list their labels in the same order: the level found at this
      // position for the previous node is tried before hashing.
      std::uint32_t level = none;
      const std::uint32_t guess = li < predicted.size() ? predicted[li] : none;
      if (guess != none && detail::same(level_keys[guess], l.key)) {
        level = guess;
      } else if (const std::uint32_t* found = level_index.find(l.key)) {
        level = *found;
        if (li < predicted.size()) predicted[li] = level;
      }
      if (src) {
        const bool publishable =
            level != none ? publishable_of[level] != 0 : is_publishable_key(l.key, *src);
        if (level == none && sink.room("S4"))
          sink.add(invalid("S4", label_path(n.name, l.key), l.key,
                           "not a level of this TopologySource (spec.levels)"));
        if (!publishable && sink.room("S5"))
          sink.add(forbidden("S5", label_path(n.name, l.key),
                             "this source may not publish this key (only topology.gpustack.ai/* "
                             "except /profile, its additionalWritePrefix, and the read-only "
                             "parents topology.kubernetes.io/region and /zone)"));
      }
      bool valid_value;
      if (level != none) {
        const std::size_t slot = static_cast<std::size_t>(ni) * L + level;
        auto& infos = values[level];
        std::uint32_t id = last_id[level];
        if (id == none || !detail::same(last_value[level], l.value)) {
          bool inserted = false;
          std::tie(id, inserted) =
              value_index[level].insert(l.value, static_cast<std::uint32_t>(infos.size()));
          if (inserted) infos.push_back({ni, !l.value.empty() && is_label_value(l.value), false});
          last_value[level] = l.value;
          last_id[level] = id;
        }
        ids[slot] = id;
        valid_value = infos[id].valid;
        rendered += json_size_of[level] + 1;
      } else {
        valid_value = !l.value.empty() && is_label_value(l.value);
        rendered += json_string_size(l.key) + 1;
      }
      rendered += valid_value ? l.value.size() + 2 : json_string_size(l.value);
      if (!valid_value && sink.room("S7"))
        sink.add(detail::domain_value_error(label_path(n.name, l.key), l.value));
    }
    // S8 (parent chain) and the S9 screen, once this node's levels are known.
    if (src && L) {
      const std::uint32_t* mine = ids + static_cast<std::size_t>(ni) * L;
      std::size_t deepest = L;
      for (std::size_t i = L; i-- > 0;)
        if (mine[i] != none) {
          deepest = i;
          break;
        }
      std::size_t k = 0;
      while (k < L && mine[k] != none) ++k;
      chain_length[ni] = static_cast<std::uint8_t>(std::min<std::size_t>(k, 255));
      if (deepest != L) {
        for (std::size_t i = 0; i < deepest; ++i) {
          if (mine[i] == none && sink.room("S8"))
            sink.add(detail::missing_parent_error(label_path(n.name, levels[i]), levels[deepest], levels[i]));
        }
        // Against the first node carrying the same value (earlier in the document, so its
        // chain is known): a different ancestor tuple marks the value for the exact pass.
        for (std::size_t i = 1; i < k; ++i) {
          value_info& info = values[i][mine[i]];
          if (info.first_node == ni || info.conflict) continue;
          const std::uint32_t* theirs = ids + static_cast<std::size_t>(info.first_node) * L;
          bool same_parents = chain(info.first_node) > i;
          for (std::size_t j = 0; j < i && same_parents; ++j) same_parents = mine[j] == theirs[j];
          if (!same_parents) {
            info.conflict = true;
            any_conflict = true;
          }
        }
      }
    }
  }

  // S9 for values seen under two ancestor tuples (rare: errors only).
  if (src && L) {
    if (any_conflict) {
      // Like the consumer, which visits nodes in name order: the smallest name carrying a
      // value (with its full ancestor chain) sets its parents; every other tuple is an error.
      for (std::size_t i = 1; i < L; ++i) {
        std::vector<std::uint32_t> rep(values[i].size(), none);
        for (std::uint32_t ni = 0; ni < N; ++ni) {
          const std::uint32_t id = value_id[static_cast<std::size_t>(ni) * L + i];
          if (id == none || !values[i][id].conflict || chain(ni) <= i) continue;
          if (rep[id] == none || s.nodes[ni].name < s.nodes[rep[id]].name) rep[id] = ni;
        }
        for (std::uint32_t ni = 0; ni < N; ++ni) {
          const std::size_t base = static_cast<std::size_t>(ni) * L;
          const std::uint32_t id = value_id[base + i];
          if (id == none || !values[i][id].conflict || chain(ni) <= i || rep[id] == ni) continue;
          const std::size_t rbase = static_cast<std::size_t>(rep[id]) * L;
          if (std::equal(value_id.begin() + static_cast<std::ptrdiff_t>(base),
                         value_id.begin() + static_cast<std::ptrdiff_t>(base + i),
                         value_id.begin() + static_cast<std::ptrdiff_t>(rbase)))
            continue;
          if (!sink.room("S9")) continue;
          const std::string_view value = value_of(s, s.nodes[ni], levels[i]);
          sink.add(detail::parent_conflict_error(label_path(s.nodes[ni].name, levels[i]), value,
                                                 join_tuple(levels, s, s.nodes[rep[id]], i),
                                                 s.nodes[rep[id]].name, join_tuple(levels, s, s.nodes[ni], i)));
        }
      }
    }
  }

  // S6 last, as the consumer checks it only once everything else holds.
  if (sink.empty() && ctx.nodes && src) {
    for (const node_ref& n : s.nodes) {
      const cluster_node* node = ctx.nodes->find(n.name);
      for (std::uint32_t li = 0; li < n.count; ++li) {
        const label_ref& l = s.labels[n.first + li];
        if (!is_read_only_parent(l.key)) continue;
        const std::string* current = node ? node->label(l.key) : nullptr;
        if (current && *current == l.value) continue;
        if (!sink.room("S6")) continue;
        sink.add(invalid(
            "S6", label_path(n.name, l.key), l.value,
            current
                ? "a read-only parent must equal the Node's label, which is \"" + *current + "\""
                : std::string("a read-only parent must equal the Node's label, and "
                              "the Node has no such label")));
      }
    }
  }
  // S10: the served (canonical JSON) body is at most 1 MiB too.
  if (rendered > max_snapshot_bytes) {
    field_error e = too_long("S10", "", rendered, max_snapshot_bytes);
    e.detail = "topogate's JSON rendering of this snapshot is " + std::to_string(rendered) +
               " bytes; the consumer's reader refuses more than 1048576";
    sink.add(std::move(e));
  }
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

// Nodes by name, and each node's labels by key: Go's encoding/json order for maps.
std::vector<std::pair<const snapshot_node*, std::vector<const snapshot_label*>>> sorted_view(
    const snapshot& snap) {
  std::vector<std::pair<const snapshot_node*, std::vector<const snapshot_label*>>> out;
  out.reserve(snap.nodes.size());
  for (const snapshot_node& n : snap.nodes) {
    auto& entry = out.emplace_back(&n, std::vector<const snapshot_label*>{});
    entry.second.reserve(n.labels.size());
    for (const snapshot_label& l : n.labels) entry.second.push_back(&l);
    std::sort(entry.second.begin(), entry.second.end(),
              [](const snapshot_label* a, const snapshot_label* b) { return a->key < b->key; });
  }
  std::sort(out.begin(), out.end(),
            [](const auto& a, const auto& b) { return a.first->name < b.first->name; });
  return out;
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

namespace {

// Non-zero when a byte of `w` is not plain: below 0x20, 0x7f or above, a quote or a
// backslash. Each test is the exact "some byte is zero / below n" word trick.
constexpr std::uint64_t special_bytes(std::uint64_t w) noexcept {
  constexpr std::uint64_t ones = 0x0101010101010101ULL, highs = 0x8080808080808080ULL;
  auto zero_byte = [](std::uint64_t v) { return (v - ones) & ~v & highs; };
  return ((w - ones * 0x20) & ~w & highs) | (w & highs) | zero_byte(w ^ (ones * '"')) |
         zero_byte(w ^ (ones * '\\')) | zero_byte(w ^ (ones * 0x7f));
}

// Writes the canonical JSON into a buffer sized for the common case (every string plain:
// printable ASCII without a quote or a backslash, rendered as itself between quotes), so
// each piece is a few word copies; a string that needs escaping grows the buffer.
class json_writer {
 public:
  explicit json_writer(std::size_t estimate) {
    out_.resize(estimate);
    p_ = out_.data();
  }
  void raw(std::string_view s) {
    room(s.size());
    std::memcpy(p_, s.data(), s.size());
    p_ += s.size();
  }
  void raw(char c) {
    room(1);
    *p_++ = c;
  }
  void string(std::string_view s) {
    // Eight bytes at a time: each word is checked and stored whole (the buffer keeps eight
    // spare bytes; what lands past the string is overwritten by the next piece).
    const std::size_t n = s.size();
    room(n + 2 + 8);
    char* q = p_ + 1;
    std::uint64_t bad = 0;
    std::size_t i = 0;
    for (; i + 8 <= n; i += 8) {
      std::uint64_t w;
      std::memcpy(&w, s.data() + i, 8);
      bad |= special_bytes(w);
      std::memcpy(q + i, &w, 8);
    }
    if (i < n) {
      // The tail padded with 'a', which is plain.
      std::uint64_t w = 0x6161616161616161ULL;
      std::memcpy(&w, s.data() + i, n - i);
      bad |= special_bytes(w);
      std::memcpy(q + i, &w, 8);
    }
    if (bad != 0) {
      std::string escaped;
      append_json_string(escaped, s);
      raw(escaped);
      return;
    }
    *p_ = '"';
    q[n] = '"';
    p_ = q + n + 1;
  }
  std::string finish() && {
    out_.resize(static_cast<std::size_t>(p_ - out_.data()));
    return std::move(out_);
  }

 private:
  void room(std::size_t n) {
    const auto used = static_cast<std::size_t>(p_ - out_.data());
    if (used + n <= out_.size()) return;
    out_.resize(std::max(out_.size() * 2, used + n));
    p_ = out_.data() + used;
  }
  std::string out_;
  char* p_;
};

// Go's encoding/json writes map keys sorted; a snapshot decoded from a rendering (the usual
// case) is in order already, which one comparison per node confirms.
std::vector<std::uint32_t> name_order(const snapshot& snap) {
  std::vector<std::uint32_t> order(snap.nodes.size());
  for (std::uint32_t i = 0; i < order.size(); ++i) order[i] = i;
  for (std::size_t i = 1; i < snap.nodes.size(); ++i) {
    if (!(snap.nodes[i - 1].name < snap.nodes[i].name)) {
      std::sort(order.begin(), order.end(), [&](std::uint32_t a, std::uint32_t b) {
        return snap.nodes[a].name < snap.nodes[b].name;
      });
      break;
    }
  }
  return order;
}

}  // namespace

std::string render_snapshot_json(const snapshot& snap) {
  // Exact for plain strings: quotes, `:` and `,` around every name, key and value.
  std::size_t estimate = 64 + snap.api_version.size() + snap.revision.size();
  for (const snapshot_node& n : snap.nodes) {
    estimate += n.name.size() + 5;
    for (const snapshot_label& l : n.labels) estimate += l.key.size() + l.value.size() + 6;
  }
  json_writer w(estimate);
  w.raw(R"({"apiVersion":)");
  w.string(snap.api_version);
  w.raw(R"(,"revision":)");
  w.string(snap.revision);
  w.raw(R"(,"nodes":{)");
  bool first_node = true;
  std::vector<const snapshot_label*> many;
  for (const std::uint32_t ni : name_order(snap)) {
    const snapshot_node& node = snap.nodes[ni];
    if (!first_node) w.raw(',');
    first_node = false;
    w.string(node.name);
    w.raw(":{");
    // Labels by key; a node has a handful, sorted in place by insertion.
    std::array<const snapshot_label*, 16> few;
    const snapshot_label** labels = few.data();
    const std::size_t count = node.labels.size();
    if (count > few.size()) {
      many.resize(count);
      labels = many.data();
    }
    if (count > few.size()) {
      for (std::size_t i = 0; i < count; ++i) labels[i] = &node.labels[i];
      std::sort(labels, labels + count, [](const snapshot_label* a, const snapshot_label* b) {
        return a->key < b->key;
      });
    } else {
      for (std::size_t i = 0; i < count; ++i) {
        const snapshot_label* l = &node.labels[i];
        std::size_t j = i;
        for (; j > 0 && l->key < labels[j - 1]->key; --j) labels[j] = labels[j - 1];
        labels[j] = l;
      }
    }
    for (std::size_t i = 0; i < count; ++i) {
      if (i) w.raw(',');
      w.string(labels[i]->key);
      w.raw(':');
      w.string(labels[i]->value);
    }
    w.raw('}');
  }
  w.raw("}}");
  return std::move(w).finish();
}

std::string render_snapshot_yaml(const snapshot& snap) {
  // Block YAML with every string double-quoted (JSON escaping is valid YAML escaping), so
  // no value is re-typed by a YAML reader.
  std::string out;
  out.reserve(64 + snap.nodes.size() * 128);
  out += "apiVersion: ";
  append_json_string(out, snap.api_version);
  out += "\nrevision: ";
  append_json_string(out, snap.revision);
  const auto view = sorted_view(snap);
  if (view.empty()) {
    out += "\nnodes: {}\n";
    return out;
  }
  out += "\nnodes:\n";
  for (const auto& [node, labels] : view) {
    out += "  ";
    append_json_string(out, node->name);
    if (labels.empty()) {
      out += ": {}\n";
      continue;
    }
    out += ":\n";
    for (const snapshot_label* l : labels) {
      out += "    ";
      append_json_string(out, l->key);
      out += ": ";
      append_json_string(out, l->value);
      out += '\n';
    }
  }
  return out;
}

}  // namespace topogate::core

#include "snapshot.hpp"

#include <simdjson.h>

#include <algorithm>
#include <cstring>

#include "document_internal.hpp"
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
  return key(node_path(name), k);
}

bool small_duplicate(const label_ref* labels, std::uint32_t count) {
  for (std::uint32_t i = 1; i < count; ++i)
    for (std::uint32_t j = 0; j < i; ++j)
      if (labels[i].key == labels[j].key) return true;
  return false;
}

// ---------------------------------------------------------------------------------------
// Fast path: JSON straight from simdjson's DOM into views, for the common shape only
// (known fields, string/null/bool values, no duplicates, short keys). Anything else returns
// false and the exact decoder decides, so both paths give the same answer for the same text.

struct dom_scratch {
  simdjson::dom::parser parser;
  std::vector<char> buffer;
};

dom_scratch& thread_dom_scratch() {
  // Reused per thread: the parser's tape and string buffers and a padded input copy.
  thread_local dom_scratch scratch;
  return scratch;
}

// yaml.v3 reads a key longer than 1024 characters (quotes and escapes included) differently;
// a short unescaped key cannot reach that even fully escaped.
constexpr std::size_t fast_key_limit = 150;

bool scalar_text(simdjson::dom::element e, std::string_view& out) {
  switch (e.type()) {
    case simdjson::dom::element_type::STRING:
      return !e.get_string().get(out);
    case simdjson::dom::element_type::NULL_VALUE:
      out = {};
      return true;
    case simdjson::dom::element_type::BOOL: {
      bool b = false;
      if (e.get_bool().get(b)) return false;
      out = b ? "true" : "false";
      return true;
    }
    default:
      return false;  // numbers keep their literal text: the exact path has it
  }
}

bool decode_fast_json(std::string_view text, snapshot_ref& out) {
  const std::size_t first = text.find_first_not_of(" \r\n");
  if (first == std::string_view::npos || text[first] != '{') return false;
  if (detail::scan_json_for_yaml(text) != detail::json_scan::ok) return false;
  dom_scratch& s = thread_dom_scratch();
  if (s.buffer.size() < text.size() + simdjson::SIMDJSON_PADDING)
    s.buffer.resize(text.size() + simdjson::SIMDJSON_PADDING);
  std::memcpy(s.buffer.data(), text.data(), text.size());
  std::memset(s.buffer.data() + text.size(), 0, simdjson::SIMDJSON_PADDING);
  simdjson::dom::element root;
  if (s.parser.parse(s.buffer.data(), text.size(), false).get(root)) return false;
  simdjson::dom::object top;
  if (root.get_object().get(top)) return false;
  bool seen_api = false, seen_rev = false, seen_nodes = false;
  for (auto [k, v] : top) {
    if (k == "apiVersion") {
      if (seen_api || !scalar_text(v, out.api_version)) return false;
      seen_api = true;
    } else if (k == "revision") {
      if (seen_rev || !scalar_text(v, out.revision)) return false;
      seen_rev = true;
    } else if (k == "nodes") {
      if (seen_nodes) return false;
      seen_nodes = true;
      if (v.is_null()) continue;
      simdjson::dom::object nodes;
      if (v.get_object().get(nodes)) return false;
      const std::size_t n = nodes.size();
      out.nodes.reserve(n);
      out.labels.reserve(n * 4);
      detail::string_index names;
      names.reset(n);
      for (auto [name, entry] : nodes) {
        if (name.size() > fast_key_limit) return false;
        if (!names.insert(name, 0).second) return false;
        node_ref node;
        node.name = name;
        node.first = static_cast<std::uint32_t>(out.labels.size());
        if (!entry.is_null()) {
          simdjson::dom::object labels;
          if (entry.get_object().get(labels)) return false;
          for (auto [lk, lv] : labels) {
            if (lk.size() > fast_key_limit) return false;
            std::string_view value;
            if (!scalar_text(lv, value)) return false;
            out.labels.push_back({lk, value});
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

// Decodes into `out`; the bytes stay valid while `tree` (and this thread's simdjson
// scratch) is untouched. Returns false when nothing could be decoded (a size, syntax or
// duplicate-key error); type errors in single fields still leave the rest decoded.
bool decode_ref(std::string_view text, snapshot_ref& out, doc_node& tree, error_sink& sink) {
  if (text.size() > max_snapshot_bytes) {
    field_error e = too_long("S10", "", text.size(), max_snapshot_bytes);
    e.detail =
        "a snapshot is at most 1 MiB (1048576 bytes) as received; the consumer's reader "
        "refuses a larger body (has " +
        std::to_string(text.size()) + ")";
    sink.add(std::move(e));
    return false;
  }
  if (decode_fast_json(text, out)) return true;
  out = snapshot_ref{};
  decode_limits limits;
  limits.max_bytes = max_snapshot_bytes;
  decode_result r;
  const std::size_t first = text.find_first_not_of(" \r\n");
  bool json_ok = false;
  if (first != std::string_view::npos && (text[first] == '{' || text[first] == '[')) {
    r = detail::decode_json_styled(text, "S1", limits, detail::path_style::snapshot, json_ok);
  }
  if (!json_ok) r = detail::decode_yaml_styled(text, "S1", limits, detail::path_style::snapshot);
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

std::size_t rendered_size(const snapshot_ref& s) {
  // {"apiVersion":A,"revision":R,"nodes":{N:{K:V,...},...}}
  std::size_t size = std::string_view(R"({"apiVersion":,"revision":,"nodes":{}})").size();
  size += json_string_size(s.api_version) + json_string_size(s.revision);
  if (!s.nodes.empty()) size += s.nodes.size() - 1;  // commas between nodes
  for (const node_ref& n : s.nodes) {
    size += json_string_size(n.name) + 3;  // :{}
    if (n.count) size += n.count - 1;      // commas between labels
    for (std::uint32_t i = 0; i < n.count; ++i) {
      const label_ref& l = s.labels[n.first + i];
      size += json_string_size(l.key) + 1 + json_string_size(l.value);
    }
  }
  return size;
}

std::string join_tuple(const std::vector<std::string>& levels, const std::string_view* values,
                       std::size_t count) {
  std::string out = "{";
  for (std::size_t i = 0; i < count; ++i) {
    if (i) out += ", ";
    out += levels[i];
    out += '=';
    out += values[i];
  }
  out += '}';
  return out;
}

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
  detail::string_index level_index;
  level_index.reset(L + 1);
  for (std::size_t i = 0; i < L; ++i) level_index.insert(levels[i], static_cast<std::uint32_t>(i));
  std::vector<char> level_publishable(L, 1);
  if (src)
    for (std::size_t i = 0; i < L; ++i) level_publishable[i] = is_publishable_key(levels[i], *src);

  node_list selected;
  if (ctx.nodes && src) selected = select_nodes(*ctx.nodes, *src);

  if (check_duplicates) {
    detail::string_index names;
    names.reset(s.nodes.size());
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

  // Per level, each distinct value: its representative node (the smallest name carrying it,
  // as the consumer visits nodes in name order) and whether the value is valid (S7).
  struct value_info {
    std::uint32_t rep = 0;
    std::int8_t valid = -1;
  };
  std::vector<detail::string_index> value_index(L);
  std::vector<std::vector<value_info>> values(L);
  for (std::size_t i = 0; i < L; ++i) value_index[i].reset(s.nodes.size() / 4 + 16);
  // values_of[node * L + level]: the node's value at that level ("" when absent).
  std::vector<std::string_view> values_of(s.nodes.size() * L);
  std::vector<std::uint32_t> value_id(s.nodes.size() * L, 0);
  std::vector<std::uint32_t> present_mask(s.nodes.size(), 0);  // levels beyond 32 are rare
  std::vector<std::uint64_t> wide_mask;
  const bool wide = L > 32;

  for (std::uint32_t ni = 0; ni < s.nodes.size(); ++ni) {
    const node_ref& n = s.nodes[ni];
    // S3: a known, selected Node; without a node list, a DNS-1123 subdomain name.
    if (ctx.nodes && src) {
      if (!selected.find(n.name)) {
        if (sink.room("S3")) {
          const bool exists = ctx.nodes->find(n.name) != nullptr;
          sink.add(not_found("S3", node_path(n.name), n.name,
                             exists ? "the Node is not selected by the source's nodeSelector"
                                    : "no Node with this name exists in the cluster"));
        }
      }
    } else if (!is_dns1123_subdomain(n.name)) {
      if (sink.room("S3")) {
        std::string detail = "a node name must be a DNS-1123 subdomain";
        const auto problems = check_dns1123_subdomain(n.name);
        if (!problems.empty()) detail = problems.front();
        sink.add(invalid("S3", node_path(n.name), n.name, std::move(detail)));
      }
    }
    std::uint32_t guess = 0;
    for (std::uint32_t li = 0; li < n.count; ++li) {
      const label_ref& l = s.labels[n.first + li];
      // Labels usually come in level order: try the next level before hashing.
      std::uint32_t level = UINT32_MAX;
      if (guess < L && levels[guess] == l.key) {
        level = guess;
      } else if (const std::uint32_t* found = level_index.find(l.key)) {
        level = *found;
      }
      if (level != UINT32_MAX) guess = level + 1;
      if (src) {
        if (level == UINT32_MAX) {
          if (sink.room("S4"))
            sink.add(invalid("S4", label_path(n.name, l.key), l.key,
                             "not a level of this TopologySource (spec.levels)"));
          if (!is_publishable_key(l.key, *src) && sink.room("S5"))
            sink.add(forbidden("S5", label_path(n.name, l.key),
                               "this source may not publish this key (only topology.gpustack.ai/* "
                               "except /profile, its additionalWritePrefix, and the read-only "
                               "parents topology.kubernetes.io/region and /zone)"));
        } else if (!level_publishable[level] && sink.room("S5")) {
          sink.add(forbidden("S5", label_path(n.name, l.key),
                             "this source may not publish this key (only topology.gpustack.ai/* "
                             "except /profile, its additionalWritePrefix, and the read-only "
                             "parents topology.kubernetes.io/region and /zone)"));
        }
      }
      // S7, once per distinct value of a level.
      bool valid_value;
      if (level != UINT32_MAX) {
        const std::size_t slot = static_cast<std::size_t>(ni) * L + level;
        values_of[slot] = l.value;
        if (wide) {
          if (wide_mask.empty()) wide_mask.assign(s.nodes.size(), 0);
          wide_mask[ni] |= std::uint64_t{1} << level;
        } else {
          present_mask[ni] |= std::uint32_t{1} << level;
        }
        auto& infos = values[level];
        const auto [id, inserted] =
            value_index[level].insert(l.value, static_cast<std::uint32_t>(infos.size()));
        if (inserted) infos.push_back({ni, -1});
        value_info& info = infos[id];
        value_id[slot] = id;
        if (info.valid < 0) info.valid = !l.value.empty() && is_label_value(l.value) ? 1 : 0;
        valid_value = info.valid == 1;
        if (s.nodes[info.rep].name > n.name) info.rep = ni;
      } else {
        valid_value = !l.value.empty() && is_label_value(l.value);
      }
      if (!valid_value && sink.room("S7")) {
        std::string detail = "a label value must be non-empty";
        if (!l.value.empty()) {
          const auto problems = check_label_value(l.value);
          detail = problems.empty() ? "invalid label value" : problems.front();
        }
        sink.add(invalid("S7", label_path(n.name, l.key), l.value, std::move(detail)));
      }
    }
  }

  // S8 and S9, per node, over the declared levels.
  if (src && L) {
    for (std::uint32_t ni = 0; ni < s.nodes.size(); ++ni) {
      const node_ref& n = s.nodes[ni];
      auto has = [&](std::size_t level) {
        return wide ? (wide_mask.empty() ? false : ((wide_mask[ni] >> level) & 1) != 0)
                    : ((present_mask[ni] >> level) & 1) != 0;
      };
      std::size_t deepest = L;
      for (std::size_t i = L; i-- > 0;)
        if (has(i)) {
          deepest = i;
          break;
        }
      if (deepest == L) continue;
      for (std::size_t i = 0; i < deepest; ++i) {
        if (!has(i) && sink.room("S8")) {
          sink.add(required("S8", label_path(n.name, levels[i]),
                            "the node carries " + levels[deepest] + " but not its parent level " +
                                levels[i] + " (a node may omit a fine suffix, never a parent)"));
        }
      }
      const std::string_view* mine = values_of.data() + static_cast<std::size_t>(ni) * L;
      for (std::size_t i = 1; i <= deepest && has(i); ++i) {
        if (!has(i - 1)) break;
        const value_info& info = values[i][value_id[static_cast<std::size_t>(ni) * L + i]];
        if (info.rep == ni) continue;
        const std::string_view* theirs = values_of.data() + static_cast<std::size_t>(info.rep) * L;
        bool same = true;
        for (std::size_t j = 0; j < i && same; ++j) same = mine[j] == theirs[j];
        if (!same && sink.room("S9")) {
          sink.add(invalid("S9", label_path(n.name, levels[i]), mine[i],
                           "this value is already under " + join_tuple(levels, theirs, i) +
                               " on node " + std::string(s.nodes[info.rep].name) +
                               "; here it is under " + join_tuple(levels, mine, i) +
                               " (a child value belongs to exactly one parent)"));
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
  if (const std::size_t size = rendered_size(s); size > max_snapshot_bytes) {
    field_error e = too_long("S10", "", size, max_snapshot_bytes);
    e.detail = "topogate's JSON rendering of this snapshot is " + std::to_string(size) +
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

snapshot_decode_result decode_snapshot(std::string_view text) {
  snapshot_decode_result result;
  error_sink sink(result.errors);
  snapshot_ref ref;
  doc_node tree;
  decode_ref(text, ref, tree, sink);
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

error_list check_snapshot(std::string_view text, const snapshot_context& ctx) {
  error_list errors;
  error_sink sink(errors);
  snapshot_ref ref;
  doc_node tree;
  // Fields that decoded are validated even when another field had a type error: every
  // error is reported, not the first.
  if (decode_ref(text, ref, tree, sink)) validate_ref(ref, ctx, sink, /*check_duplicates=*/false);
  sink.finish();
  return errors;
}

std::string render_snapshot_json(const snapshot& snap) {
  std::string out;
  out.reserve(64 + snap.nodes.size() * 96);
  out += R"({"apiVersion":)";
  append_json_string(out, snap.api_version);
  out += R"(,"revision":)";
  append_json_string(out, snap.revision);
  out += R"(,"nodes":{)";
  bool first_node = true;
  for (const auto& [node, labels] : sorted_view(snap)) {
    if (!first_node) out += ',';
    first_node = false;
    append_json_string(out, node->name);
    out += ":{";
    for (std::size_t i = 0; i < labels.size(); ++i) {
      if (i) out += ',';
      append_json_string(out, labels[i]->key);
      out += ':';
      append_json_string(out, labels[i]->value);
    }
    out += '}';
  }
  out += "}}";
  return out;
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

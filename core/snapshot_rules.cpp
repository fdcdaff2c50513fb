// The snapshot rules over a decoded snapshot: S1 (apiVersion, duplicates), S2 (revision), S3
// (node names or selected Nodes), S4-S5 (levels and publishable keys), S6 (read-only parents
// against the Nodes), S7-S9 (the hierarchy: values, parents, one parent per value) and S10
// (the size of topogate's own rendering), in one pass over the labels where it can.

#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "document_internal.hpp"
#include "hierarchy_internal.hpp"
#include "snapshot.hpp"
#include "snapshot_internal.hpp"
#include "syntax.hpp"

namespace topogate::core::detail {
namespace {

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
  for (std::size_t i = 0; i < count; ++i)
    detail::append_tuple_entry(out, i == 0, levels[i], value_of(s, n, levels[i]));
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
}  // namespace

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

  // S3 asks whether the Node exists and the source selects it: a lookup in the list and a
  // match of that Node's labels, not a copy of the selected Nodes per validation.
  // Snapshots list their Nodes sorted: a cursor makes the pass's lookups linear.
  std::optional<node_list::cursor> lookup;
  if (ctx.nodes) lookup.emplace(*ctx.nodes);
  auto is_selected = [&](const cluster_node* node) {
    return node != nullptr &&
           (ctx.nodes_selected || !src->node_selector || src->node_selector->matches(node->labels));
  };

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
      const cluster_node* node = lookup->find(n.name);
      if (!is_selected(node) && sink.room("S3")) {
        const bool exists = node != nullptr;
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
            sink.add(detail::missing_parent_error(label_path(n.name, levels[i]), levels[deepest],
                                                  levels[i]));
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
                                                 s.nodes[rep[id]].name,
                                                 join_tuple(levels, s, s.nodes[ni], i)));
        }
      }
    }
  }

  // S6 last, as the consumer checks it only once everything else holds.
  if (sink.empty() && ctx.nodes && src) {
    node_list::cursor s6_lookup(*ctx.nodes);
    for (const node_ref& n : s.nodes) {
      const cluster_node* node = s6_lookup.find(n.name);
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

}  // namespace topogate::core::detail

namespace topogate::core {

bool read_only_parents_match(const snapshot_node& n, const cluster_node* node) {
  // The condition validate_ref's S6 pass reports on, for one Node.
  for (const snapshot_label& l : n.labels) {
    if (!is_read_only_parent(l.key)) continue;
    const std::string* current = node != nullptr ? node->label(l.key) : nullptr;
    if (current == nullptr || *current != l.value) return false;
  }
  return true;
}

}  // namespace topogate::core

// topogate's renderings of a snapshot, as it serves them: canonical JSON (keys sorted as Go's
// encoding/json sorts map keys, YAML-safe escaping) and the same content as block YAML.

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "field_error.hpp"
#include "snapshot.hpp"

namespace topogate::core {
namespace {

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
  [[nodiscard]] std::size_t size() const noexcept {
    return static_cast<std::size_t>(p_ - out_.data());
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

// One Node's member of "nodes": "name":{labels by key}.
void write_member(json_writer& w, const snapshot_node& node,
                  std::vector<const snapshot_label*>& many) {
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
    std::sort(labels, labels + count,
              [](const snapshot_label* a, const snapshot_label* b) { return a->key < b->key; });
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

}  // namespace

std::string render_snapshot_json(const snapshot& snap) {
  return render_snapshot_json(snap, nullptr);
}

std::string render_snapshot_json(const snapshot& snap, std::vector<std::uint32_t>* members) {
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
  if (members != nullptr) {
    members->clear();
    members->reserve(snap.nodes.size() + 1);
  }
  for (const std::uint32_t ni : name_order(snap)) {
    const snapshot_node& node = snap.nodes[ni];
    if (!first_node) w.raw(',');
    first_node = false;
    if (members != nullptr) members->push_back(static_cast<std::uint32_t>(w.size()));
    write_member(w, node, many);
  }
  if (members != nullptr) members->push_back(static_cast<std::uint32_t>(w.size()));
  w.raw("}}");
  return std::move(w).finish();
}

shared_text splice_rendered_nodes(
    const shared_text& body, const std::vector<std::uint32_t>& members,
    const std::vector<std::size_t>& drop,
    const std::vector<std::pair<std::size_t, const snapshot_node*>>& insert,
    std::string_view api_version, std::string_view revision,
    std::vector<std::uint32_t>* members_out, std::vector<copied_bytes>* copied) {
  const std::size_t n = members.empty() ? 0 : members.size() - 1;
  // The header and the Nodes rendered anew go through the writer; the kept runs of the old
  // rendering are appended as they are (no buffer of the whole size filled first).
  json_writer head(revision.size() + api_version.size() + 64);
  head.raw(R"({"apiVersion":)");
  head.string(api_version);
  head.raw(R"(,"revision":)");
  head.string(revision);
  head.raw(R"(,"nodes":{)");
  std::string fresh;  // the inserted members, one after the other
  std::vector<std::size_t> fresh_at;
  if (!insert.empty()) {
    std::size_t estimate = 16;
    for (const auto& [at, node] : insert) {
      estimate += node->name.size() + 8;
      for (const snapshot_label& l : node->labels) estimate += l.key.size() + l.value.size() + 6;
    }
    json_writer w(estimate);
    std::vector<const snapshot_label*> many;
    for (const auto& [at, node] : insert) {
      fresh_at.push_back(w.size());
      write_member(w, *node, many);
    }
    fresh_at.push_back(w.size());
    fresh = std::move(w).finish();
  }
  const std::string header = std::move(head).finish();
  shared_text::builder out;
  out.reserve_own(header.size() + fresh.size() + 2 * (insert.size() + drop.size()) + 4);
  out.append(header);
  const auto copy = [&](std::size_t from, std::size_t to) {
    if (copied != nullptr && to > from) {
      if (!copied->empty() && copied->back().to == from &&
          copied->back().at + (from - copied->back().from) == out.size())
        copied->back().to = to;
      else
        copied->push_back({from, to, out.size()});
    }
    out.append(body, from, to - from);
  };
  if (copied != nullptr) {
    copied->clear();
    // The header as it was (the same revision id): its bytes count as copied.
    if (body.equal_at(0, header)) copied->push_back({0, out.size(), 0});
  }
  if (members_out != nullptr) {
    members_out->clear();
    members_out->reserve(n + insert.size() + 1);
  }
  bool first_node = true;
  const auto comma = [&] {
    if (!first_node) out.push_back(',');
    first_node = false;
  };
  std::size_t d = 0;  // next drop
  std::size_t e = 0;  // next insert
  std::size_t k = 0;  // next member of the old rendering
  while (k < n || e < insert.size()) {
    if (e < insert.size() && insert[e].first <= k) {
      comma();
      if (members_out != nullptr) members_out->push_back(static_cast<std::uint32_t>(out.size()));
      out.append(std::string_view(fresh).substr(fresh_at[e], fresh_at[e + 1] - fresh_at[e]));
      ++e;
      continue;
    }
    while (d < drop.size() && drop[d] < k) ++d;
    if (d < drop.size() && drop[d] == k) {
      ++k;
      continue;
    }
    // A run of kept members is copied whole, with the commas between them, up to the next
    // drop or insert.
    std::size_t run_end = d < drop.size() ? std::min(drop[d], n) : n;
    if (e < insert.size()) run_end = std::min(run_end, insert[e].first);
    // Member i spans [members[i], members[i + 1] - 1) (the next one's comma), the last one
    // [members[n - 1], members[n]).
    const std::size_t from = members[k];
    const std::size_t to = run_end < n ? members[run_end] - 1 : members[n];
    comma();
    if (members_out != nullptr) {
      // Every offset of the run moved by the same amount (modulo 2^32: each result fits). A
      // plain loop over the reserved array, which the compiler vectorizes: at 7,000 members
      // a push_back per member was a sixth of a Node change's CPU.
      const auto shift = static_cast<std::uint32_t>(out.size() - from);
      const std::size_t base = members_out->size();
      members_out->resize(base + (run_end - k));
      std::uint32_t* dst = members_out->data() + base;
      const std::uint32_t* src = members.data() + k;
      for (std::size_t i = 0; i < run_end - k; ++i) dst[i] = src[i] + shift;
    }
    copy(from, to);
    k = run_end;
  }
  if (members_out != nullptr) members_out->push_back(static_cast<std::uint32_t>(out.size()));
  if (n < members.size() && body.size() == members[n] + std::size_t{2} &&
      body.equal_at(members[n], "}}"))
    copy(members[n], body.size());
  else
    out.append("}}");
  return std::move(out).finish();
}

std::string splice_rendered_nodes(
    std::string_view body, const std::vector<std::uint32_t>& members,
    const std::vector<std::size_t>& drop,
    const std::vector<std::pair<std::size_t, const snapshot_node*>>& insert,
    std::string_view api_version, std::string_view revision,
    std::vector<std::uint32_t>* members_out, std::vector<copied_bytes>* copied) {
  return splice_rendered_nodes(shared_text(std::string(body)), members, drop, insert, api_version,
                               revision, members_out, copied)
      .str();
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

#pragma once
// What the snapshot's files share: snapshot.cpp (decoding and the entry points),
// snapshot_rules.cpp (S1-S10) and snapshot_render.cpp. Included only by them.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "field_error.hpp"
#include "hierarchy_internal.hpp"
#include "snapshot.hpp"

namespace topogate::core::detail {

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

inline std::string node_path(std::string_view name) { return key("nodes", name); }
inline std::string label_path(std::string_view name, std::string_view k) {
  return detail::node_label_path(name, k);
}

// S1 (apiVersion) and S2-S10 over a decoded snapshot (snapshot_rules.cpp). With
// `check_duplicates`, also S1's duplicate node names and label keys, which decoding refuses
// already but a snapshot built in code may hold.
void validate_ref(const snapshot_ref& s, const snapshot_context& ctx, error_sink& sink,
                  bool check_duplicates);

}  // namespace topogate::core::detail

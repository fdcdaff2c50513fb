#pragma once
// What inventory.cpp, node_change.cpp and drift.cpp share, internal to the inventory library.

#include <memory>
#include <string>
#include <vector>

#include "core/snapshot.hpp"
#include "core/topology_source.hpp"
#include "inventory/inventory.hpp"

namespace topogate::inventory::detail {

// The accepted snapshot as length-prefixed strings in document order (revision::accepted_packed).
[[nodiscard]] std::string pack(const core::snapshot& s);
// Whether the snapshot lists its Nodes by name, strictly increasing.
[[nodiscard]] bool names_increasing(const core::snapshot& s);
// Each value's first served carrier per level but the first (`gone`: the pruned Nodes, sorted
// as the snapshot is).
[[nodiscard]] std::shared_ptr<const revision::level_carriers> carriers_of(
    const core::topology_source& src, const core::snapshot& snap,
    const std::vector<std::string>& gone);

// One pass over two chunked sequences (core::chunked_vector) sorted by `key`, each key once:
// `differ(x, y)` for each entry that only one has (the other null) or that both have and that
// is not `same` in both, in key order, until it returns false. Chunks both share are skipped
// when `skip_shared` (their entries are then the same by construction). Node lists and profile
// assignments are compared this way.
template <class Seq, class Key, class Same, class Differ>
void walk_differences(const Seq& a, const Seq& b, bool skip_shared, Key key, Same same,
                      Differ differ) {
  auto i = a.begin();
  auto j = b.begin();
  const auto i_end = a.end();
  const auto j_end = b.end();
  while (i != i_end && j != j_end) {
    if (skip_shared && i.shares_chunk_with(j)) {
      i.skip_chunk();
      j.skip_chunk();
      continue;
    }
    // The sequences mostly hold the same keys at the same places: one comparison of equal
    // keys, the order asked only where they differ.
    const auto& x = *i;
    const auto& y = *j;
    if (key(x) == key(y)) {
      ++i;
      ++j;
      if (!same(x, y) && !differ(&x, &y)) return;
    } else if (key(x) < key(y)) {
      ++i;
      if (!differ(&x, nullptr)) return;
    } else {
      ++j;
      if (!differ(nullptr, &y)) return;
    }
  }
  for (; i != i_end; ++i)
    if (!differ(&*i, nullptr)) return;
  for (; j != j_end; ++j)
    if (!differ(nullptr, &*j)) return;
}

}  // namespace topogate::inventory::detail

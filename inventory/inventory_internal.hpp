#pragma once
// What inventory.cpp and node_change.cpp share, internal to the inventory library.

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

}  // namespace topogate::inventory::detail

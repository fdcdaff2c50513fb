#pragma once
// How close a snapshot is to S10's limit (max_snapshot_bytes, the consumer's): past
// snapshot_size_warning_bytes the push answer and `topogate validate snapshot` warn, as the
// chart's TopogateInventoryNearSizeLimit alert does from topogate_inventory_snapshot_bytes,
// so that a growing cluster is split into inventories before its revisions are refused.

#include <cstddef>
#include <string>
#include <string_view>

#include "snapshot.hpp"

namespace topogate::core {

// 0.9 of 1 MiB (943,718 bytes): a snapshot larger than this is warned about. Fixed, as the
// limit is: the chart's alert threshold (prometheusRule.thresholds.revisionSizeFraction) is
// the one that can be tuned.
inline constexpr std::size_t snapshot_size_warning_bytes = max_snapshot_bytes * 9 / 10;

// The warning for `subject` ("the revision's canonical JSON", a file name) of `bytes`: empty
// at or below snapshot_size_warning_bytes and above max_snapshot_bytes (S10's error says it
// then). Its own text is ASCII without quotes or backslashes: with such a subject it fits a
// Warning header as it is.
[[nodiscard]] std::string snapshot_size_warning(std::size_t bytes, std::string_view subject);

}  // namespace topogate::core

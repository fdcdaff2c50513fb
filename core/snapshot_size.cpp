#include "core/snapshot_size.hpp"

#include <cstdio>

namespace topogate::core {

std::string snapshot_size_warning(std::size_t bytes, std::string_view subject) {
  if (bytes <= snapshot_size_warning_bytes || bytes > max_snapshot_bytes) return {};
  // Tenths of a percent, rounded down: just over the threshold reads 90.0%, never 90.1%
  // for what is not.
  const std::size_t tenths = bytes * 1000 / max_snapshot_bytes;
  char percent[16];
  std::snprintf(percent, sizeof percent, "%zu.%zu%%", tenths / 10, tenths % 10);
  std::string out(subject);
  out += " is " + std::to_string(bytes) + " bytes, " + percent + " of the " +
         std::to_string(max_snapshot_bytes) +
         "-byte snapshot limit (S10; warning above 90%): past the limit revisions are refused; "
         "split the cluster into inventories by nodeSelector "
         "(docs/inventory.md#splitting-a-large-cluster)";
  return out;
}

}  // namespace topogate::core

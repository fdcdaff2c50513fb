#pragma once
// Profile derivation (diagnostics): a node's longest populated prefix of `levels`
// plus kubernetes.io/hostname; runs of fabric.topograph.run/tier-N ordered
// coarsest-first; id = "fnv64-" + 16 hex digits of FNV-1a 64 over the NUL-joined keys.

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace topogate::core {

inline constexpr std::string_view hostname_label = "kubernetes.io/hostname";

struct profile {
  std::vector<std::string> levels;  // ends with kubernetes.io/hostname
  std::string id;                   // fnv64-xxxxxxxxxxxxxxxx
};

[[nodiscard]] std::uint64_t fnv1a64(std::string_view bytes) noexcept;
// Orders runs of consecutive fabric.topograph.run/tier-N keys by descending N.
[[nodiscard]] std::vector<std::string> normalize_levels(std::vector<std::string> levels);
[[nodiscard]] profile derive_profile(
    const std::vector<std::string>& levels,
    const std::vector<std::pair<std::string, std::string>>& labels);
[[nodiscard]] std::string profile_id(const std::vector<std::string>& keys);

}  // namespace topogate::core

#pragma once
// Profile derivation (diagnostics): a node's longest populated prefix of `levels`
// plus kubernetes.io/hostname; runs of fabric.topograph.run/tier-N ordered as the consumer
// orders them (docs/rules.md, "Profiles"); id = "fnv64-" + 16 hex digits of FNV-1a 64 over the
// NUL-joined keys.

#include <cstdint>
#include <optional>
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
// N of a fabric.topograph.run/tier-N key, read as Go's strconv.Atoi reads it; nullopt for
// any other key.
[[nodiscard]] std::optional<std::int64_t> topograph_tier(std::string_view key) noexcept;
// Reverses each run of consecutive fabric.topograph.run/tier-N keys whose first N is smaller
// than its last, as the consumer does before it derives profiles or checks a hierarchy.
[[nodiscard]] std::vector<std::string> normalize_levels(std::vector<std::string> levels);
[[nodiscard]] profile derive_profile(
    const std::vector<std::string>& levels,
    const std::vector<std::pair<std::string, std::string>>& labels);
[[nodiscard]] std::string profile_id(const std::vector<std::string>& keys);

}  // namespace topogate::core

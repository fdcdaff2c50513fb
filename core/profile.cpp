#include "profile.hpp"

#include <algorithm>
#include <optional>

namespace topogate::core {

namespace {

constexpr std::string_view tier_prefix = "fabric.topograph.run/tier-";

// N of fabric.topograph.run/tier-N (decimal, no sign), or nullopt for any other key.
std::optional<std::uint64_t> tier_number(std::string_view key) noexcept {
  if (key.substr(0, tier_prefix.size()) != tier_prefix) return std::nullopt;
  const std::string_view digits = key.substr(tier_prefix.size());
  if (digits.empty() || digits.size() > 18) return std::nullopt;
  std::uint64_t n = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return std::nullopt;
    n = n * 10 + static_cast<std::uint64_t>(c - '0');
  }
  return n;
}

const std::string* find_label(const std::vector<std::pair<std::string, std::string>>& labels,
                              std::string_view key) noexcept {
  for (const auto& [k, v] : labels) {
    if (k == key) return &v;
  }
  return nullptr;
}

}  // namespace

std::uint64_t fnv1a64(std::string_view bytes) noexcept {
  std::uint64_t h = 14695981039346656037ull;  // FNV-1a 64 offset basis
  for (char c : bytes) {
    h ^= static_cast<unsigned char>(c);
    h *= 1099511628211ull;  // FNV-1a 64 prime
  }
  return h;
}

std::vector<std::string> normalize_levels(std::vector<std::string> levels) {
  // Topograph numbers its switch tiers from the leaf (tier-1) upwards, so within a run a
  // larger N is a coarser domain and comes first.
  std::size_t i = 0;
  while (i < levels.size()) {
    if (!tier_number(levels[i])) {
      ++i;
      continue;
    }
    std::size_t j = i;
    while (j < levels.size() && tier_number(levels[j])) ++j;
    std::stable_sort(levels.begin() + static_cast<std::ptrdiff_t>(i),
                     levels.begin() + static_cast<std::ptrdiff_t>(j),
                     [](const std::string& a, const std::string& b) {
                       return *tier_number(a) > *tier_number(b);
                     });
    i = j;
  }
  return levels;
}

std::string profile_id(const std::vector<std::string>& keys) {
  std::string joined;
  for (std::size_t i = 0; i < keys.size(); ++i) {
    if (i) joined.push_back('\0');
    joined += keys[i];
  }
  const std::uint64_t h = fnv1a64(joined);
  static constexpr char hex[] = "0123456789abcdef";
  std::string id = "fnv64-";
  for (int shift = 60; shift >= 0; shift -= 4) id.push_back(hex[(h >> shift) & 0xf]);
  return id;
}

profile derive_profile(const std::vector<std::string>& levels,
                       const std::vector<std::pair<std::string, std::string>>& labels) {
  profile p;
  for (auto& level : normalize_levels(levels)) {
    const std::string* value = find_label(labels, level);
    if (value == nullptr || value->empty()) break;  // a node may omit a fine suffix only
    p.levels.push_back(std::move(level));
  }
  p.levels.emplace_back(hostname_label);
  p.id = profile_id(p.levels);
  return p;
}

}  // namespace topogate::core

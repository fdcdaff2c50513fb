#include "profile.hpp"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <optional>

namespace topogate::core {

namespace {

constexpr std::string_view tier_prefix = "fabric.topograph.run/tier-";

// N of fabric.topograph.run/tier-N as Go's strconv.Atoi reads the rest of the key (what the
// consumer does): an optional '+' or '-', then one or more decimal digits (leading zeros
// allowed), within int64; anything else (an empty rest, a lone sign, an overflow) is not a
// tier key and ends a run.
std::optional<std::int64_t> tier_number(std::string_view key) noexcept {
  if (key.substr(0, tier_prefix.size()) != tier_prefix) return std::nullopt;
  std::string_view digits = key.substr(tier_prefix.size());
  bool negative = false;
  if (!digits.empty() && (digits.front() == '+' || digits.front() == '-')) {
    negative = digits.front() == '-';
    digits.remove_prefix(1);
  }
  if (digits.empty()) return std::nullopt;
  // The magnitude may reach 2^63 for a negative number only.
  constexpr std::uint64_t max_positive = 9223372036854775807ull;
  const std::uint64_t limit = negative ? max_positive + 1 : max_positive;
  std::uint64_t n = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return std::nullopt;
    const auto d = static_cast<std::uint64_t>(c - '0');
    if (n > (limit - d) / 10) return std::nullopt;
    n = n * 10 + d;
  }
  if (negative) return n == max_positive + 1 ? INT64_MIN : -static_cast<std::int64_t>(n);
  return static_cast<std::int64_t>(n);
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

std::optional<std::int64_t> topograph_tier(std::string_view key) noexcept {
  return tier_number(key);
}

std::vector<std::string> normalize_levels(std::vector<std::string> levels) {
  // Topograph numbers its switch tiers from the leaf (tier-1) upwards. The consumer does not
  // sort a run of tier keys: it reverses the run when its first N is smaller than its last
  // (tier-1, tier-2, tier-3 becomes tier-3, tier-2, tier-1) and leaves it as listed otherwise,
  // so [tier-1, tier-10, tier-3] becomes [tier-3, tier-10, tier-1]. Profile ids hash this
  // order, so it must be the consumer's exactly.
  std::size_t i = 0;
  while (i < levels.size()) {
    if (!tier_number(levels[i])) {
      ++i;
      continue;
    }
    std::size_t j = i + 1;
    while (j < levels.size() && tier_number(levels[j])) ++j;
    if (*tier_number(levels[i]) < *tier_number(levels[j - 1]))
      std::reverse(levels.begin() + static_cast<std::ptrdiff_t>(i),
                   levels.begin() + static_cast<std::ptrdiff_t>(j));
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

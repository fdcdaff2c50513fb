// Profile derivation: longest populated prefix + hostname, tier ordering, FNV-1a ids.
#include "core/profile.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

namespace topogate::core {
namespace {

using labels_t = std::vector<std::pair<std::string, std::string>>;

TEST(Fnv1a64, PublishedVectors) {
  EXPECT_EQ(fnv1a64(""), 0xcbf29ce484222325ull);
  EXPECT_EQ(fnv1a64("a"), 0xaf63dc4c8601ec8cull);
  EXPECT_EQ(fnv1a64("foobar"), 0x85944171f73967e8ull);
}

TEST(ProfileId, NulJoinedKeys) {
  const std::string joined("a\0b", 3);
  char expected[32];
  std::snprintf(expected, sizeof expected, "fnv64-%016llx",
                static_cast<unsigned long long>(fnv1a64(joined)));
  EXPECT_EQ(profile_id({"a", "b"}), expected);
  EXPECT_EQ(profile_id({"a", "b"}).size(), 6u + 16u);
  EXPECT_NE(profile_id({"a", "b"}), profile_id({"ab"}));      // the separator matters
  EXPECT_NE(profile_id({"a", "b"}), profile_id({"b", "a"}));  // so does the order
  EXPECT_EQ(profile_id({}), "fnv64-cbf29ce484222325");
}

std::string tier(std::string_view n) { return "fabric.topograph.run/tier-" + std::string(n); }

TEST(NormalizeLevels, RunReversedOnlyWhenFirstTierIsSmallerThanLast) {
  EXPECT_EQ(normalize_levels({tier("1"), tier("2")}),
            (std::vector<std::string>{tier("2"), tier("1")}));
  // Already descending: left as listed.
  EXPECT_EQ(normalize_levels({tier("3"), tier("2"), tier("1")}),
            (std::vector<std::string>{tier("3"), tier("2"), tier("1")}));
  // Not sorted: reversed as a whole (the consumer's order is 3, 10, 1, not 10, 3, 1).
  EXPECT_EQ(normalize_levels({tier("1"), tier("10"), tier("3")}),
            (std::vector<std::string>{tier("3"), tier("10"), tier("1")}));
  // First equal to last: not reversed.
  EXPECT_EQ(normalize_levels({tier("2"), tier("1"), tier("2")}),
            (std::vector<std::string>{tier("2"), tier("1"), tier("2")}));
  // First larger than last, middle out of order: not reversed.
  EXPECT_EQ(normalize_levels({tier("3"), tier("1"), tier("2")}),
            (std::vector<std::string>{tier("3"), tier("1"), tier("2")}));
  // A run of one is unchanged.
  EXPECT_EQ(normalize_levels({tier("1")}), (std::vector<std::string>{tier("1")}));
  // Each run on its own, ordinary keys between them.
  EXPECT_EQ(normalize_levels({"topology.kubernetes.io/zone", tier("1"), tier("10"), tier("3"),
                              "x/rack", tier("4"), tier("5")}),
            (std::vector<std::string>{"topology.kubernetes.io/zone", tier("3"), tier("10"),
                                      tier("1"), "x/rack", tier("5"), tier("4")}));
  // Non-numeric tiers are ordinary keys and break a run.
  EXPECT_EQ(normalize_levels({tier("1"), tier("x"), tier("2")}),
            (std::vector<std::string>{tier("1"), tier("x"), tier("2")}));
}

TEST(NormalizeLevels, TierNumbersReadAsAtoi) {
  // Leading zeros: 01 is 1, 002 is 2.
  EXPECT_EQ(topograph_tier(tier("01")), 1);
  EXPECT_EQ(topograph_tier(tier("0000000000000000000000002")), 2);  // long, still in range
  EXPECT_EQ(normalize_levels({tier("01"), tier("002")}),
            (std::vector<std::string>{tier("002"), tier("01")}));
  // Signs: "-1" is -1 (a valid label-key name), "+2" is 2.
  EXPECT_EQ(topograph_tier(tier("-1")), -1);
  EXPECT_EQ(topograph_tier(tier("+2")), 2);
  EXPECT_EQ(normalize_levels({tier("-1"), tier("0")}),
            (std::vector<std::string>{tier("0"), tier("-1")}));
  EXPECT_EQ(normalize_levels({tier("1"), tier("-1")}),
            (std::vector<std::string>{tier("1"), tier("-1")}));
  // Not numbers to Atoi: empty, a lone sign, two signs, spaces, underscores, hex.
  for (const char* bad : {"", "-", "+", "--1", "+-1", " 1", "1 ", "1_0", "0x1", "1.0"})
    EXPECT_FALSE(topograph_tier(tier(bad)).has_value()) << bad;
  // int64 bounds: one past either end is a range error, so not a tier key.
  EXPECT_EQ(topograph_tier(tier("9223372036854775807")), INT64_MAX);
  EXPECT_FALSE(topograph_tier(tier("9223372036854775808")).has_value());
  EXPECT_EQ(topograph_tier(tier("-9223372036854775808")), INT64_MIN);
  EXPECT_FALSE(topograph_tier(tier("-9223372036854775809")).has_value());
  EXPECT_FALSE(topograph_tier(tier("99999999999999999999")).has_value());
  // An overflowing tier ends the run like any other key.
  EXPECT_EQ(
      normalize_levels({tier("1"), tier("99999999999999999999"), tier("2"), tier("3")}),
      (std::vector<std::string>{tier("1"), tier("99999999999999999999"), tier("3"), tier("2")}));
  // Other prefixes are not tiers.
  EXPECT_FALSE(topograph_tier("fabric.topograph.run/tier1").has_value());
  EXPECT_FALSE(topograph_tier("x.fabric.topograph.run/tier-1").has_value());
}

TEST(ProfileId, TierOrderChangesTheId) {
  // [tier-1, tier-10, tier-3] is profiled as 3, 10, 1: the id of that order, not of 10, 3, 1.
  const auto p = derive_profile({tier("1"), tier("10"), tier("3")},
                                {{tier("1"), "a"}, {tier("10"), "b"}, {tier("3"), "c"}});
  EXPECT_EQ(p.levels,
            (std::vector<std::string>{tier("3"), tier("10"), tier("1"), "kubernetes.io/hostname"}));
  EXPECT_EQ(p.id, profile_id({tier("3"), tier("10"), tier("1"), "kubernetes.io/hostname"}));
  EXPECT_NE(p.id, profile_id({tier("10"), tier("3"), tier("1"), "kubernetes.io/hostname"}));
}

TEST(DeriveProfile, LongestPopulatedPrefixPlusHostname) {
  const std::vector<std::string> levels = {
      "topology.gpustack.ai/region", "topology.gpustack.ai/zone", "topology.gpustack.ai/rack"};
  const auto full = derive_profile(levels, {{"topology.gpustack.ai/region", "r"},
                                            {"topology.gpustack.ai/zone", "z"},
                                            {"topology.gpustack.ai/rack", "k"}});
  EXPECT_EQ(full.levels,
            (std::vector<std::string>{"topology.gpustack.ai/region", "topology.gpustack.ai/zone",
                                      "topology.gpustack.ai/rack", "kubernetes.io/hostname"}));
  EXPECT_EQ(full.id, profile_id(full.levels));

  const auto shorter = derive_profile(
      levels, {{"topology.gpustack.ai/region", "r"}, {"topology.gpustack.ai/zone", "z"}});
  EXPECT_EQ(shorter.levels.size(), 3u);
  EXPECT_NE(shorter.id, full.id);

  // A gap ends the prefix: the rack under a missing zone does not count.
  const auto gap = derive_profile(
      levels, {{"topology.gpustack.ai/region", "r"}, {"topology.gpustack.ai/rack", "k"}});
  EXPECT_EQ(gap.levels,
            (std::vector<std::string>{"topology.gpustack.ai/region", "kubernetes.io/hostname"}));

  const auto none = derive_profile(levels, labels_t{});
  EXPECT_EQ(none.levels, (std::vector<std::string>{"kubernetes.io/hostname"}));
  EXPECT_EQ(none.id, profile_id({"kubernetes.io/hostname"}));

  const auto empty_value = derive_profile(levels, {{"topology.gpustack.ai/region", ""}});
  EXPECT_EQ(empty_value.levels.size(), 1u);
}

TEST(DeriveProfile, TiersNormalizedBeforeThePrefix) {
  const auto p = derive_profile({"fabric.topograph.run/tier-1", "fabric.topograph.run/tier-2"},
                                {{"fabric.topograph.run/tier-2", "spine"}});
  EXPECT_EQ(p.levels,
            (std::vector<std::string>{"fabric.topograph.run/tier-2", "kubernetes.io/hostname"}));
  const auto same = derive_profile(
      {"fabric.topograph.run/tier-2", "fabric.topograph.run/tier-1"},
      {{"fabric.topograph.run/tier-2", "spine"}, {"fabric.topograph.run/tier-1", "leaf"}});
  const auto swapped = derive_profile(
      {"fabric.topograph.run/tier-1", "fabric.topograph.run/tier-2"},
      {{"fabric.topograph.run/tier-2", "spine"}, {"fabric.topograph.run/tier-1", "leaf"}});
  EXPECT_EQ(same.id, swapped.id);
}

}  // namespace
}  // namespace topogate::core

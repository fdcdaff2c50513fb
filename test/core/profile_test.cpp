// Profile derivation: longest populated prefix + hostname, tier ordering, FNV-1a ids.
#include "core/profile.hpp"

#include <gtest/gtest.h>

#include <cstdio>

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

TEST(NormalizeLevels, TierRunsCoarsestFirst) {
  EXPECT_EQ(
      normalize_levels({"fabric.topograph.run/tier-1", "fabric.topograph.run/tier-2"}),
      (std::vector<std::string>{"fabric.topograph.run/tier-2", "fabric.topograph.run/tier-1"}));
  EXPECT_EQ(
      normalize_levels({"topology.kubernetes.io/zone", "fabric.topograph.run/tier-1",
                        "fabric.topograph.run/tier-10", "fabric.topograph.run/tier-3", "x/rack",
                        "fabric.topograph.run/tier-4", "fabric.topograph.run/tier-5"}),
      (std::vector<std::string>{"topology.kubernetes.io/zone", "fabric.topograph.run/tier-10",
                                "fabric.topograph.run/tier-3", "fabric.topograph.run/tier-1",
                                "x/rack", "fabric.topograph.run/tier-5",
                                "fabric.topograph.run/tier-4"}));
  // Non-numeric tiers are ordinary keys and break a run.
  EXPECT_EQ(normalize_levels({"fabric.topograph.run/tier-1", "fabric.topograph.run/tier-x",
                              "fabric.topograph.run/tier-2"}),
            (std::vector<std::string>{"fabric.topograph.run/tier-1", "fabric.topograph.run/tier-x",
                                      "fabric.topograph.run/tier-2"}));
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

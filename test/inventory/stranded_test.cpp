// maxStrandedWorkloads (registry_deps::stranded): a push whose revision would leave more
// admitted Workloads Pending than the limit is refused (409's outcome, recorded in the history
// with the count), unless it accepts the impact with the served ETag; at the limit, or when the
// count is unknown, it is published; 0 strands none, absent is no limit. A dry run answers the
// same and records nothing.

#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>

#include "inventory/registry.hpp"
#include "test/inventory/test_util.hpp"

namespace topogate::inventory {
namespace {

namespace t = testing;

struct fake_count {
  std::optional<std::size_t> stranded = 2;
  int calls = 0;
};

registry_config config(const std::string& store_dir, std::optional<std::size_t> limit) {
  auto inv = t::config("dc");
  inv.max_stranded_workloads = limit;
  return t::push_registry(store_dir, std::move(inv));
}

registry_deps deps(const registry_config& cfg, fake_count& count) {
  auto d = make_file_dependencies(cfg.store);
  d.stranded = [&count](std::string_view name, const core::topology_source&,
                        const core::snapshot& snap,
                        std::string& summary) -> std::optional<std::size_t> {
    ++count.calls;
    EXPECT_EQ(name, "dc");
    summary = count.stranded ? "evicted 3, admitted again 1, stranded " +
                                   std::to_string(*count.stranded) + " for " + snap.revision
                             : "the API is down";
    return count.stranded;
  };
  return d;
}

registry_observer quiet() {
  registry_observer o;
  o.on_log = [](std::string_view, std::string_view, std::string_view) {};
  return o;
}

// A started registry over a push inventory with `limit`, counting through `count`.
std::unique_ptr<registry> start(const std::string& store_dir, std::optional<std::size_t> limit,
                                fake_count& count) {
  const auto cfg = config(store_dir, limit);
  auto reg = std::make_unique<registry>(cfg, deps(cfg, count), system_clock(), quiet());
  reg->start();
  return reg;
}

TEST(StrandedWorkloads, OverTheLimitRefusedUnlessAccepted) {
  t::temp_dir dir;
  fake_count count;
  auto owned = start(dir / "store", 1, count);
  registry& reg = *owned;
  count.stranded = 0;
  const auto first = reg.push("dc", t::snapshot_json("p-1"), std::nullopt, "w");
  ASSERT_EQ(first.outcome, push_outcome::created) << first.message;
  const std::string served = first.served->etag;

  count.stranded = 2;
  const auto before = reg.find("dc")->attempts_recorded();
  const auto dry = reg.dry_run({"dc", t::snapshot_json("p-2", 8), std::nullopt, "w", {}});
  EXPECT_EQ(dry.outcome, push_outcome::impact_refused) << dry.message;
  EXPECT_EQ(reg.find("dc")->attempts_recorded(), before);  // a dry run records nothing

  const auto refused = reg.push("dc", t::snapshot_json("p-2", 8), std::nullopt, "w");
  ASSERT_EQ(refused.outcome, push_outcome::impact_refused) << refused.message;
  EXPECT_NE(refused.message.find("would leave 2 admitted Workload(s) Pending"), std::string::npos)
      << refused.message;
  EXPECT_NE(refused.message.find("maxStrandedWorkloads 1"), std::string::npos);
  EXPECT_EQ(refused.impact_baseline_etag, served);
  EXPECT_EQ(reg.find("dc")->current()->revision_id, "p-1");
  const auto history = reg.find("dc")->history();
  ASSERT_FALSE(history.empty());
  EXPECT_TRUE(history.back().stranded_refused);
  EXPECT_EQ(history.back().stranded_workloads, std::optional<std::size_t>(2));
  EXPECT_NE(reg.history_json("dc")->find("\"strandedWorkloads\":2,\"strandedRefused\":true"),
            std::string::npos);

  // Another ETag does not accept it; the served one does.
  const auto wrong = reg.push("dc", t::snapshot_json("p-2", 8), std::nullopt, "w",
                              std::string("\"") + std::string(64, '0') + "\"");
  EXPECT_EQ(wrong.outcome, push_outcome::impact_refused);
  const auto accepted = reg.push("dc", t::snapshot_json("p-2", 8), std::nullopt, "w", served);
  EXPECT_EQ(accepted.outcome, push_outcome::stored) << accepted.message;
  EXPECT_EQ(reg.find("dc")->current()->revision_id, "p-2");
}

TEST(StrandedWorkloads, AtTheLimitOrUnknownIsPublished) {
  t::temp_dir dir;
  fake_count count;
  auto owned = start(dir / "store", 2, count);
  registry& reg = *owned;
  count.stranded = 2;  // at the limit
  EXPECT_EQ(reg.push("dc", t::snapshot_json("p-1"), std::nullopt, "w").outcome,
            push_outcome::created);
  count.stranded = 3;
  EXPECT_EQ(reg.push("dc", t::snapshot_json("p-2", 8), std::nullopt, "w").outcome,
            push_outcome::impact_refused);
  count.stranded = std::nullopt;  // the lists failed: not refused
  EXPECT_EQ(reg.push("dc", t::snapshot_json("p-2", 8), std::nullopt, "w").outcome,
            push_outcome::stored);
  EXPECT_EQ(count.calls, 3);
}

TEST(StrandedWorkloads, ZeroStrandsNoneAbsentNeverCounts) {
  t::temp_dir dir;
  fake_count count;
  count.stranded = 1;
  auto owned_zero = start(dir / "zero", 0, count);
  registry& zero = *owned_zero;
  EXPECT_EQ(zero.push("dc", t::snapshot_json("p-1"), std::nullopt, "w").outcome,
            push_outcome::impact_refused);
  count.stranded = 0;
  EXPECT_EQ(zero.push("dc", t::snapshot_json("p-1"), std::nullopt, "w").outcome,
            push_outcome::created);
  EXPECT_EQ(count.calls, 2);
  // A first revision has no baseline ETag: "*" accepts its impact.
  count.stranded = 1;
  EXPECT_EQ(zero.push("dc", t::snapshot_json("p-2", 8), std::nullopt, "w").outcome,
            push_outcome::impact_refused);
  EXPECT_EQ(
      zero.push("dc", t::snapshot_json("p-2", 8), std::nullopt, "w", std::string(" * ")).outcome,
      push_outcome::stored);
  count.calls = 0;
  auto owned = start(dir / "store", std::nullopt, count);
  registry& reg = *owned;
  EXPECT_EQ(reg.push("dc", t::snapshot_json("p-1"), std::nullopt, "w").outcome,
            push_outcome::created);
  EXPECT_EQ(count.calls, 0);
}

}  // namespace
}  // namespace topogate::inventory

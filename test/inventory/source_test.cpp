// The sources behind inventory/source.hpp: what each kind can do, the spec that names the kind
// (and the contradictions refused), the state each kind keeps (the nodeLabels checks and their
// history, the push source's view of the store), and the registry handing out the source.

#include "inventory/source.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "inventory/registry.hpp"
#include "inventory/source_file.hpp"
#include "inventory/source_node_labels.hpp"
#include "inventory/source_push.hpp"
#include "test_util.hpp"

namespace topogate::inventory {
namespace {

core::topology_source zone_racks() {
  core::topology_source s;
  s.api_version = "worker.gpustack.ai/v1";
  s.name = "zone-racks";
  s.levels = {"topology.kubernetes.io/zone", "topology.gpustack.ai/rack"};
  s.node_labels = true;
  return s;
}

inventory_spec spec_of(source_kind kind, std::string name = "dc") {
  inventory_spec spec;
  spec.config = testing::config(std::move(name));
  spec.kind = kind;
  if (kind == source_kind::file) spec.snapshot_path = "/srv/topology/snapshot.yaml";
  if (kind == source_kind::node_labels) {
    spec.config.source = zone_racks();
    spec.nodes_path = "/srv/topology/nodes.json";
  }
  return spec;
}

core::node_list nodes_of(const std::vector<std::pair<std::string, std::string>>& zone_rack) {
  core::node_list out;
  for (std::size_t i = 0; i < zone_rack.size(); ++i) {
    core::node_labels::storage s = {{"topology.gpustack.ai/rack", zone_rack[i].second},
                                    {"topology.kubernetes.io/zone", zone_rack[i].first}};
    out.nodes.push_back({"n" + std::to_string(i), core::node_labels(std::move(s))});
  }
  return out;
}

TEST(Source, KindNames) {
  EXPECT_EQ(to_string(source_kind::file), "file");
  EXPECT_EQ(to_string(source_kind::push), "push");
  EXPECT_EQ(to_string(source_kind::node_labels), "nodeLabels");
}

// What each kind can do: the router and the metrics ask these, never the spec's fields.
TEST(Source, WhatEachKindCanDo) {
  struct want {
    source_kind kind;
    bool serves, pushes, labels, watches;
  };
  for (const auto& w : {want{source_kind::file, true, false, false, true},
                        want{source_kind::push, true, true, false, false},
                        want{source_kind::node_labels, false, false, true, false}}) {
    const auto spec = spec_of(w.kind);
    ASSERT_EQ(check_spec(spec), "");
    const auto src = make_source(spec);
    const auto kind = std::string(to_string(w.kind));
    EXPECT_EQ(src->kind(), w.kind);
    EXPECT_EQ(src->serves_snapshot(), w.serves) << kind;
    EXPECT_EQ(src->accepts_pushes(), w.pushes) << kind;
    EXPECT_EQ(src->checks_node_labels(), w.labels) << kind;
    EXPECT_EQ(src->watched_path() != nullptr, w.watches) << kind;
    // Exactly one concrete source, the one of its kind.
    EXPECT_EQ(src->as_file() != nullptr, w.kind == source_kind::file) << kind;
    EXPECT_EQ(src->as_push() != nullptr, w.kind == source_kind::push) << kind;
    EXPECT_EQ(src->as_node_labels() != nullptr, w.kind == source_kind::node_labels) << kind;
    // A push is refused with a reason exactly when it is not accepted.
    EXPECT_EQ(src->push_refusal("dc").empty(), w.pushes) << kind;
  }
  const auto file = make_source(spec_of(source_kind::file));
  EXPECT_EQ(*file->watched_path(), "/srv/topology/snapshot.yaml");
}

TEST(Source, PushRefusalsAndInputsNameTheSource) {
  const auto file = make_source(spec_of(source_kind::file));
  EXPECT_EQ(file->push_refusal("dc"),
            "inventory \"dc\" is fed by /srv/topology/snapshot.yaml; pushes are refused");
  EXPECT_EQ(file->input(nullptr), "file:/srv/topology/snapshot.yaml");
  const auto labels = make_source(spec_of(source_kind::node_labels));
  EXPECT_EQ(labels->push_refusal("racks"),
            "inventory \"racks\" reads Node labels (nodeLabels source): there is no snapshot to "
            "push");
  const auto push = make_source(spec_of(source_kind::push));
  EXPECT_EQ(push->input(nullptr), "push (no store)");
  testing::temp_dir dir;
  auto store = make_file_store(dir / "store");
  ASSERT_TRUE(store) << store.error().message;
  EXPECT_EQ(push->input(store->get()), "push:" + (*store)->describe());
}

// A spec whose kind and fields disagree is refused, with the inventory and the kind named.
TEST(Source, SpecsThatContradictTheirKind) {
  struct bad {
    inventory_spec spec;
    std::string why;
  };
  std::vector<bad> cases;
  auto file_without_path = spec_of(source_kind::file);
  file_without_path.snapshot_path.clear();
  cases.push_back({file_without_path, "inventory \"dc\" (file source): has no snapshot path"});
  auto push_with_path = spec_of(source_kind::push);
  push_with_path.snapshot_path = "/s.yaml";
  cases.push_back({push_with_path,
                   "inventory \"dc\" (push source): has a snapshot path, which "
                   "only a file source reads"});
  auto labels_with_path = spec_of(source_kind::node_labels);
  labels_with_path.snapshot_path = "/s.yaml";
  cases.push_back({labels_with_path, "(nodeLabels source): has a snapshot path"});
  auto labels_of_webhook = spec_of(source_kind::node_labels);
  labels_of_webhook.config.source = testing::source();
  cases.push_back({labels_of_webhook,
                   "(nodeLabels source): feeds a TopologySource that is not "
                   "nodeLabels"});
  auto push_of_labels = spec_of(source_kind::push);
  push_of_labels.config.source = zone_racks();
  cases.push_back({push_of_labels,
                   "(push source): feeds a nodeLabels TopologySource, which only "
                   "a nodeLabels source can"});
  auto file_of_labels = spec_of(source_kind::file);
  file_of_labels.config.source = zone_racks();
  cases.push_back({file_of_labels, "(file source): feeds a nodeLabels TopologySource"});
  for (const auto& c : cases) {
    const auto why = check_spec(c.spec);
    EXPECT_NE(why.find(c.why), std::string::npos) << "got \"" << why << "\", want " << c.why;
  }
}

TEST(SourceDeathTest, TheRegistryRefusesASpecThatContradictsItsKind) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  registry_config cfg;
  auto spec = spec_of(source_kind::push);
  spec.snapshot_path = "/s.yaml";
  cfg.inventories.push_back(spec);
  EXPECT_DEATH(registry reg(cfg), "inventory \"dc\" \\(push source\\): has a snapshot path");
}

TEST(Source, TheRegistryHandsOutEachInventorysSource) {
  registry_config cfg;
  cfg.inventories.push_back(spec_of(source_kind::file, "filed"));
  cfg.inventories.push_back(spec_of(source_kind::push, "pushed"));
  cfg.inventories.push_back(spec_of(source_kind::node_labels, "labels"));
  registry reg(cfg);
  ASSERT_NE(reg.source_of("filed"), nullptr);
  EXPECT_EQ(reg.source_of("filed")->kind(), source_kind::file);
  ASSERT_NE(reg.source_of("pushed"), nullptr);
  EXPECT_EQ(reg.source_of("pushed")->kind(), source_kind::push);
  ASSERT_NE(reg.source_of("labels"), nullptr);
  EXPECT_EQ(reg.source_of("labels")->kind(), source_kind::node_labels);
  EXPECT_EQ(reg.source_of("missing"), nullptr);
  // Only the pushed inventory takes a push; the others say why not, as their source does.
  const auto filed = reg.push("filed", testing::snapshot_json("p-1"), std::nullopt, "w");
  EXPECT_EQ(filed.outcome, push_outcome::not_pushable);
  EXPECT_EQ(filed.message, reg.source_of("filed")->push_refusal("filed"));
  const auto labels = reg.push("labels", testing::snapshot_json("p-1"), std::nullopt, "w");
  EXPECT_EQ(labels.outcome, push_outcome::not_pushable);
  EXPECT_EQ(labels.message, reg.source_of("labels")->push_refusal("labels"));
  // No store configured: the push source takes it, and the store is what is missing.
  EXPECT_EQ(reg.push("pushed", testing::snapshot_json("p-1"), std::nullopt, "w").outcome,
            push_outcome::unavailable);
}

// The nodeLabels source keeps its checks: the last one, counted, and a history bounded by
// historySize (at least one kept).
TEST(Source, NodeLabelChecksAndTheirHistory) {
  const auto src = zone_racks();
  const auto good = nodes_of({{"a", "r1"}, {"a", "r2"}, {"b", "r3"}});
  const auto bad = nodes_of({{"a", "r1"}, {"b", "r1"}});  // rack r1 in two zones
  ASSERT_TRUE(core::check_node_labels(src, good).ok());
  ASSERT_FALSE(core::check_node_labels(src, bad).ok());

  node_labels_source nl;
  EXPECT_EQ(nl.latest(), nullptr);
  EXPECT_TRUE(nl.history().empty());
  const auto at = std::chrono::system_clock::time_point(std::chrono::seconds(1'700'000'000));
  const auto first = nl.record(src, good, at, "file:/n.json", 2);
  ASSERT_NE(first.check, nullptr);
  EXPECT_EQ(first.check->checks, 1u);
  EXPECT_TRUE(first.check->report.ok());
  EXPECT_EQ(first.check->nodes_origin, "file:/n.json");
  EXPECT_EQ(first.entry.revision_id, "node-labels-1");
  EXPECT_EQ(first.entry.origin, "nodes:file:/n.json");
  EXPECT_TRUE(first.entry.accepted);
  EXPECT_EQ(first.entry.note, summarize(*first.check));
  EXPECT_EQ(nl.latest(), first.check);

  const auto second = nl.record(src, bad, at, "file:/n.json", 2);
  EXPECT_EQ(second.check->checks, 2u);
  EXPECT_FALSE(second.entry.accepted);
  EXPECT_FALSE(second.entry.errors.empty());
  EXPECT_EQ(nl.history().size(), 2u);  // historySize 2: both kept

  nl.record(src, good, at, "file:/n.json", 2);
  auto hist = nl.history();
  ASSERT_EQ(hist.size(), 2u);  // the third pushes the first out
  EXPECT_EQ(hist.front().revision_id, "node-labels-2");
  EXPECT_EQ(hist.back().revision_id, "node-labels-3");
  EXPECT_EQ(nl.latest()->checks, 3u);

  nl.record(src, good, at, "kubernetes", 0);  // historySize 0 still keeps the last one
  hist = nl.history();
  ASSERT_EQ(hist.size(), 1u);
  EXPECT_EQ(hist.front().revision_id, "node-labels-4");
  EXPECT_EQ(hist.front().origin, "nodes:kubernetes");
}

// The push source's view of the store, as the metrics and readiness read it.
TEST(Source, PushSourceStoreView) {
  push_source ps;
  EXPECT_EQ(ps.available(), std::nullopt);  // no store call yet
  ps.note_store_call(true);
  EXPECT_EQ(ps.available(), std::optional<bool>(true));
  ps.note_store_call(false);
  EXPECT_EQ(ps.available(), std::optional<bool>(false));

  EXPECT_FALSE(ps.view().behind);
  EXPECT_EQ(ps.view().synced_at, std::nullopt);  // never confirmed
  ps.store_behind = true;
  ps.store_synced_ms = 1'700'000'000'123;
  const auto v = ps.view();
  EXPECT_TRUE(v.behind);
  ASSERT_TRUE(v.synced_at.has_value());
  EXPECT_EQ(std::chrono::duration_cast<std::chrono::milliseconds>(v.synced_at->time_since_epoch())
                .count(),
            1'700'000'000'123);

  // The wait reason is reported once per change (the caller logs it when it changes).
  EXPECT_EQ(ps.wait_reason(), "");
  EXPECT_TRUE(ps.set_wait_reason("waiting for the store x: refused"));
  EXPECT_FALSE(ps.set_wait_reason("waiting for the store x: refused"));
  EXPECT_TRUE(ps.set_wait_reason("waiting for the store x: timed out"));
  EXPECT_EQ(ps.wait_reason(), "waiting for the store x: timed out");
  ps.clear_wait_reason();
  EXPECT_EQ(ps.wait_reason(), "");
}

}  // namespace
}  // namespace topogate::inventory

// The ownership warning of a TopologySource review (docs/rules.md, "Ownership conflicts").
#include "admission/ownership.hpp"

#include <gtest/gtest.h>
#include <simdjson.h>

#include <memory>
#include <string>
#include <vector>

#include "admission/review.hpp"
#include "core/document.hpp"
#include "fixture.hpp"

namespace topogate::admission {
namespace {

using test::json_meta;

// A TopologySource named `name` as JSON: `arm` is configMap, webhook or nodeLabels.
std::string source_json(const std::string& name, const std::string& levels,
                        const std::string& selector, const std::string& arm = "configMap") {
  std::string spec = R"({"nodeSelector":)" + selector + R"(,"levels":[)" + levels + "]";
  if (arm == "configMap")
    spec +=
        R"(,"configMap":{"configMapRef":{"namespace":"gpustack-system","name":"inv"},"key":"s.yaml","maxStaleness":"10m"})";
  else if (arm == "webhook")
    spec += R"(,"webhook":{"url":"https://topology.example.com/snapshot","pollInterval":"1m",)"
            R"("timeout":"30s","maxStaleness":"5m",)"
            R"("bearerTokenSecretRef":{"namespace":"gpustack-system","name":"token"}})";
  else
    spec += R"(,"nodeLabels":{})";
  return R"({"apiVersion":"worker.gpustack.ai/v1","kind":"TopologySource","metadata":{"name":")" +
         name + R"("},"spec":)" + spec + "}}";
}

std::string review_json(const std::string& op, const std::string& name, const std::string& object) {
  return R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u1",)"
         R"("kind":{"group":"worker.gpustack.ai","version":"v1","kind":"TopologySource"},)"
         R"("name":")" +
         name + R"(","operation":")" + op + R"(","object":)" + object + "}}";
}

const std::string rack = R"("topology.gpustack.ai/rack")";
const std::string zone = R"("topology.gpustack.ai/zone")";
const std::string pool_a = R"({"matchLabels":{"pool":"a"}})";
const std::string pool_b = R"({"matchLabels":{"pool":"b"}})";

class fixed_view final : public ownership_view {
 public:
  std::shared_ptr<const ownership_snapshot> snap;
  [[nodiscard]] std::shared_ptr<const ownership_snapshot> current() const override { return snap; }
};

// The cluster: "existing" writes the rack level on the pool=a Nodes (gpu-1..gpu-3); gpu-9 is
// in pool b.
std::shared_ptr<ownership_snapshot> cluster(const std::string& arm = "configMap") {
  auto snap = std::make_shared<ownership_snapshot>();
  const auto doc = core::decode_json(source_json("existing", rack, pool_a, arm));
  EXPECT_TRUE(doc.ok());
  snap->sources.push_back(*core::read_ownership_source(doc.root));
  for (const char* n : {"gpu-2", "gpu-1", "gpu-3"}) snap->nodes.push_back({n, {{"pool", "a"}}});
  snap->nodes.push_back({"gpu-9", {{"pool", "b"}}});
  return snap;
}

std::vector<std::string> warnings_of(const outcome& o) {
  std::vector<std::string> out;
  simdjson::dom::parser p;
  simdjson::dom::element root;
  EXPECT_EQ(p.parse(o.body).get(root), simdjson::SUCCESS);
  simdjson::dom::array ws;
  if (root.at_pointer("/response/warnings").get(ws) != simdjson::SUCCESS) return out;
  for (auto w : ws) out.emplace_back(std::string_view(w.get_string().value()));
  return out;
}

outcome reviewed(const ownership_view* view, const std::string& op, const std::string& name,
                 const std::string& object) {
  options opts;
  opts.ownership = view;
  return review(route::topology_sources, review_json(op, name, object), json_meta, opts);
}

TEST(OwnershipWarning, OverlappingSourceIsAllowedWithAWarningNamingTheOtherAndTheNodes) {
  fixed_view view;
  view.snap = cluster();
  const auto o = reviewed(&view, "CREATE", "new", source_json("new", zone + "," + rack, "{}"));
  EXPECT_EQ(o.result, verdict::allowed);
  const auto w = warnings_of(o);
  ASSERT_EQ(w.size(), 1u);
  EXPECT_EQ(w[0],
            "OwnershipConflict with TopologySource existing, neither publishes: "
            "topology.gpustack.ai/rack on 3 Nodes (gpu-1, +2)");
  EXPECT_LE(w[0].size(), max_warning_length);
}

TEST(OwnershipWarning, WebhookSourcesWriteToo) {
  fixed_view view;
  view.snap = cluster("webhook");
  const auto w =
      warnings_of(reviewed(&view, "CREATE", "new", source_json("new", rack, pool_a, "webhook")));
  ASSERT_EQ(w.size(), 1u);
  EXPECT_NE(w[0].find("TopologySource existing"), std::string::npos) << w[0];
}

TEST(OwnershipWarning, DisjointSelectorsNonOverlappingLevelsAndNodeLabelsGiveNone) {
  fixed_view view;
  view.snap = cluster();
  // Selectors that share no Node.
  EXPECT_TRUE(warnings_of(reviewed(&view, "CREATE", "b", source_json("b", rack, pool_b))).empty());
  // Levels that do not overlap.
  EXPECT_TRUE(warnings_of(reviewed(&view, "CREATE", "z", source_json("z", zone, pool_a))).empty());
  // A nodeLabels source does not write, under review or existing.
  EXPECT_TRUE(
      warnings_of(reviewed(&view, "CREATE", "l", source_json("l", rack, pool_a, "nodeLabels")))
          .empty());
  view.snap = cluster("nodeLabels");
  EXPECT_TRUE(warnings_of(reviewed(&view, "CREATE", "n", source_json("n", rack, pool_a))).empty());
}

TEST(OwnershipWarning, TheObjectUnderReviewIsNotItsOwnConflict) {
  fixed_view view;
  view.snap = cluster();
  // An UPDATE of "existing": the snapshot's "existing" is its old version.
  const auto o = reviewed(&view, "UPDATE", "existing", source_json("existing", rack, "{}"));
  EXPECT_EQ(o.result, verdict::allowed);
  EXPECT_TRUE(warnings_of(o).empty());
  // The same object under another name is a second writer.
  EXPECT_EQ(
      warnings_of(reviewed(&view, "UPDATE", "other", source_json("other", rack, "{}"))).size(), 1u);
}

TEST(OwnershipWarning, NoViewOrNoSnapshotAnswersAsWithoutTheCheck) {
  const std::string body = source_json("new", rack, pool_a);
  const auto without = reviewed(nullptr, "CREATE", "new", body);
  fixed_view empty;  // the API has not answered yet
  const auto before = reviewed(&empty, "CREATE", "new", body);
  EXPECT_EQ(before.body, without.body);
  EXPECT_TRUE(warnings_of(without).empty());
}

TEST(OwnershipWarning, ADeniedObjectGetsNoOwnershipWarning) {
  fixed_view view;
  view.snap = cluster();
  // An invalid level: denied, and a denied object never exists to conflict.
  const auto o =
      reviewed(&view, "CREATE", "bad", source_json("bad", rack + R"(,"Not A Label")", pool_a));
  EXPECT_EQ(o.result, verdict::denied);
  for (const auto& w : warnings_of(o)) EXPECT_EQ(w.find("OwnershipConflict"), std::string::npos);
}

TEST(OwnershipWarning, TextStaysWithinTheAdvisedLengthAndCountsTheRest) {
  std::vector<std::string> nodes;
  for (int i = 0; i < 40; ++i) nodes.push_back("gpu-node-" + std::to_string(100 + i));
  const std::vector<std::string> levels{"topology.gpustack.ai/zone", "topology.gpustack.ai/rack",
                                        "topology.gpustack.ai/host"};
  const std::string w = ownership_warning("rack-inventory", levels, nodes);
  EXPECT_LE(w.size(), max_warning_length) << w;
  EXPECT_TRUE(
      w.starts_with("OwnershipConflict with TopologySource rack-inventory, neither "
                    "publishes: topology.gpustack.ai/zone +2 on 40 Nodes"))
      << w;
  // One Node named is more than none; the rest counted.
  const std::string one = ownership_warning("a", {"topology.gpustack.ai/rack"}, nodes);
  EXPECT_LE(one.size(), max_warning_length) << one;
  EXPECT_NE(one.find("(gpu-node-100, "), std::string::npos) << one;
  EXPECT_TRUE(one.ends_with(", +39)")) << one;
  // A name too long for any detail: still the other source first, cut to the limit.
  const std::string long_name(200, 'x');
  const std::string cut = sanitize_warning(ownership_warning(long_name, levels, nodes));
  EXPECT_EQ(cut.size(), max_warning_length);
  EXPECT_TRUE(cut.starts_with("OwnershipConflict with TopologySource xxx"));
}

TEST(OwnershipWarning, ManyConflictsAreNamedUpToALimitAndCounted) {
  auto snap = std::make_shared<ownership_snapshot>();
  for (int i = 0; i < 7; ++i) {
    const auto doc = core::decode_json(source_json("s" + std::to_string(i), rack, "{}"));
    snap->sources.push_back(*core::read_ownership_source(doc.root));
  }
  snap->nodes.push_back({"gpu-1", {}});
  fixed_view view;
  view.snap = snap;
  const auto w = warnings_of(reviewed(&view, "CREATE", "new", source_json("new", rack, "{}")));
  ASSERT_EQ(w.size(), max_ownership_warnings + 1);
  EXPECT_EQ(w.back(), "OwnershipConflict with 2 more writing TopologySources");
}

}  // namespace
}  // namespace topogate::admission

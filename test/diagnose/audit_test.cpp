// The audit core (diagnose/audit): objects as `kubectl get -o json` and the API's lists
// give them, checked with exactly admission's verdict for a CREATE, counted per rule and
// rendered one line per violation.
#include "diagnose/audit.hpp"

#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

#include "admission/review.hpp"
#include "core/document.hpp"

namespace topogate::diagnose {
namespace {

core::doc_node parse(std::string_view json) {
  auto d = core::decode_json(json);
  EXPECT_TRUE(d.ok()) << (d.errors.empty() ? "" : d.errors.front().to_string());
  return d.root;
}

audit_report audit(std::string_view json, const audit_options& opts = {}) {
  audit_report r;
  audit_objects(r, parse(json), opts);
  finish(r);
  return r;
}

using error_key = std::tuple<std::string, std::string, core::error_type>;  // rule, path, type

std::vector<error_key> keys(const core::error_list& errors) {
  std::vector<error_key> out;
  for (const auto& e : errors) out.emplace_back(e.rule, e.path, e.type);
  return out;
}

constexpr std::string_view valid_source =
    R"({"apiVersion":"worker.gpustack.ai/v1","kind":"TopologySource",
  "metadata":{"name":"data-center"},
  "spec":{"levels":["topology.gpustack.ai/region","topology.gpustack.ai/zone"],
          "configMap":{"configMapRef":{"namespace":"gpustack-system","name":"inv"},"key":"s.yaml","maxStaleness":"10m"}}})";

// T3 and T4.
constexpr std::string_view bad_levels =
    R"({"apiVersion":"worker.gpustack.ai/v1","kind":"TopologySource",
  "metadata":{"name":"bad-levels"},
  "spec":{"levels":["topology.kubernetes.io/zone","kubernetes.io/hostname","topology.kubernetes.io/zone"],
          "nodeLabels":{}}})";

// T9, T11, T13 (a Secret outside the worker namespace).
constexpr std::string_view bad_webhook =
    R"({"apiVersion":"worker.gpustack.ai/v1alpha1","kind":"TopologySource",
  "metadata":{"name":"bad-webhook"},
  "spec":{"levels":["topology.gpustack.ai/rack"],
          "webhook":{"url":"http://inventory.example.com/x","pollInterval":"30s","timeout":"1m","maxStaleness":"10m",
                     "bearerTokenSecretRef":{"namespace":"default","name":"tok"}}}})";

std::string deployment(std::string_view ns, std::string_view name, std::string_view level1,
                       std::string_view level2) {
  return R"({"apiVersion":"worker.gpustack.ai/v1","kind":"ModelDeployment","metadata":{"name":")" +
         std::string(name) + R"(","namespace":")" + std::string(ns) +
         R"("},"spec":{"roles":[{"name":"a","topology":{"requiredLevel":")" + std::string(level1) +
         R"("}},{"name":"b","topology":{"requiredLevel":")" + std::string(level2) + R"("}}]}})";
}

std::string list(const std::vector<std::string>& items, std::string_view kind = "List",
                 std::string_view api_version = "v1") {
  std::string out = R"({"apiVersion":")" + std::string(api_version) + R"(","kind":")" +
                    std::string(kind) + R"(","metadata":{"resourceVersion":""},"items":[)";
  for (std::size_t i = 0; i < items.size(); ++i) out += (i ? "," : "") + items[i];
  return out + "]}";
}

// The errors admission's webhook reports for a CREATE of `object` (empty when allowed).
core::error_list admission_errors(std::string_view object, std::string_view kind,
                                  const core::validation_options& v) {
  const std::string body =
      R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u1",
    "kind":{"group":"worker.gpustack.ai","version":"v1","kind":")" +
      std::string(kind) + R"("},"operation":"CREATE","object":)" + std::string(object) + "}}";
  admission::options opts;
  opts.validation = v;
  const auto route = kind == "TopologySource" ? admission::route::topology_sources
                                              : admission::route::model_deployments;
  auto o = admission::review(route, body, {}, opts);
  EXPECT_NE(o.result, admission::verdict::errored) << o.message;
  return o.errors;
}

TEST(Audit, SameVerdictAsAdmissionOnCreate) {
  const std::vector<std::pair<std::string, std::string>> objects = {
      {std::string(valid_source), "TopologySource"},
      {std::string(bad_levels), "TopologySource"},
      {std::string(bad_webhook), "TopologySource"},
      {deployment("default", "ok", "topology.kubernetes.io/zone", "topology.gpustack.ai/rack"),
       "ModelDeployment"},
      {deployment("default", "bare", "not a key", "kubernetes.io/hostname"), "ModelDeployment"},
  };
  for (const auto& ns : {"gpustack-system", "default"}) {
    core::validation_options v;
    v.worker_namespace = ns;
    audit_options opts;
    opts.validation = v;
    for (const auto& [object, kind] : objects) {
      const auto want = admission_errors(object, kind, v);
      const auto r = audit(object, opts);
      ASSERT_EQ(r.checked(), 1u) << object;
      if (want.empty()) {
        EXPECT_TRUE(r.clean()) << object;
        continue;
      }
      ASSERT_EQ(r.violating.size(), 1u) << object;
      EXPECT_EQ(keys(r.violating[0].errors), keys(want))
          << object << " with worker namespace " << ns;
    }
  }
}

TEST(Audit, WorkerNamespaceDecidesT13BothWays) {
  audit_options opts;
  auto r = audit(bad_webhook, opts);
  ASSERT_EQ(r.violating.size(), 1u);
  EXPECT_EQ(r.violating[0].rules(), (std::vector<std::string>{"T9", "T11", "T13"}));
  opts.validation.worker_namespace = "default";
  r = audit(bad_webhook, opts);
  ASSERT_EQ(r.violating.size(), 1u);
  EXPECT_EQ(r.violating[0].rules(), (std::vector<std::string>{"T9", "T11"}));
}

TEST(Audit, TypedListItemsTakeKindAndApiVersionFromTheList) {
  // What GET /apis/worker.gpustack.ai/v1/topologysources returns: items without kind/apiVersion.
  const std::string item =
      R"({"metadata":{"name":"bad-levels"},"spec":{"levels":["topology.kubernetes.io/zone",
    "topology.kubernetes.io/zone"],"nodeLabels":{}}})";
  const auto r =
      audit(list({item, std::string(valid_source)}, "TopologySourceList", "worker.gpustack.ai/v1"));
  EXPECT_EQ(r.topology_sources, 2u);
  EXPECT_EQ(r.ignored, 0u);
  ASSERT_EQ(r.violating.size(), 1u);
  EXPECT_EQ(r.violating[0].name, "bad-levels");
  EXPECT_EQ(keys(r.violating[0].errors),
            (std::vector<error_key>{{"T4", "spec.levels[1]", core::error_type::duplicate}}));
}

TEST(Audit, OtherKindsAndGroupsAreIgnoredAndCounted) {
  const auto r = audit(list({
      R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c","namespace":"x"}})",
      // The same kind name in another group is not GPUStack's.
      R"({"apiVersion":"example.com/v1","kind":"TopologySource","metadata":{"name":"t"},"spec":{}})",
      R"({"apiVersion":"v1","kind":"NodeList","items":[{"metadata":{"name":"n"}}]})",
      R"("not an object")",
      std::string(bad_levels),
  }));
  EXPECT_EQ(r.ignored, 4u);
  EXPECT_EQ(r.topology_sources, 1u);
  EXPECT_EQ(r.violating.size(), 1u);
}

TEST(Audit, NamespacesLimitModelDeploymentsOnly) {
  const std::string objects = list({
      deployment("team-a", "m1", "not a key", "topology.kubernetes.io/zone"),
      deployment("team-b", "m2", "not a key", "topology.kubernetes.io/zone"),
      std::string(bad_levels),
  });
  audit_options opts;
  auto r = audit(objects, opts);
  EXPECT_EQ(r.model_deployments, 2u);
  EXPECT_EQ(r.out_of_scope, 0u);
  EXPECT_EQ(r.violating.size(), 3u);
  opts.namespaces = {"team-b"};
  r = audit(objects, opts);
  EXPECT_EQ(r.model_deployments, 1u);
  EXPECT_EQ(r.out_of_scope, 1u);
  EXPECT_EQ(r.topology_sources, 1u);  // cluster-scoped: always checked
  ASSERT_EQ(r.violating.size(), 2u);
  EXPECT_EQ(r.violating[0].id(), "team-b/m2");
  EXPECT_EQ(r.violating[1].id(), "bad-levels");
}

TEST(Audit, CountsObjectsPerRuleAndErrorsPerRule) {
  // Both roles break M1: one object, two errors.
  const auto r = audit(list({
      deployment("a", "two-m1", "not a key", "no key"),
      deployment("a", "m1-m2", "not a key", "kubernetes.io/hostname"),
      std::string(bad_levels),
      std::string(valid_source),
  }));
  EXPECT_EQ(r.checked(), 4u);
  EXPECT_EQ(r.violating.size(), 3u);
  EXPECT_EQ(r.violation_count(), 6u);
  const auto objects = r.objects_by_rule();
  EXPECT_EQ(objects, (std::map<std::pair<std::string, std::string>, std::size_t>{
                         {{"ModelDeployment", "M1"}, 2},
                         {{"ModelDeployment", "M2"}, 1},
                         {{"TopologySource", "T3"}, 1},
                         {{"TopologySource", "T4"}, 1}}));
  EXPECT_EQ(r.violations_by_rule(),
            (std::map<std::string, std::size_t>{{"M1", 3}, {"M2", 1}, {"T3", 1}, {"T4", 1}}));
}

TEST(Audit, TextOneLinePerViolationThenTheSummary) {
  const auto r = audit(list({std::string(bad_levels),
                             deployment("team-a", "m", "not a key", "topology.kubernetes.io/zone"),
                             std::string(valid_source)}));
  EXPECT_EQ(render_audit_text(r),
            "ModelDeployment team-a/m: M1 spec.roles[0].topology.requiredLevel: Invalid value: "
            "\"not a key\": name part must consist of alphanumeric characters, '-', '_' or '.', "
            "and must start and end with an alphanumeric character (e.g. 'MyName', or "
            "'my.name', or '123-abc', regex used for validation is "
            "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')\n"
            "TopologySource bad-levels: T3 spec.levels[1]: Forbidden: kubernetes.io/hostname is "
            "always appended as "
            "the final level; remove it from levels\n"
            "TopologySource bad-levels: T4 spec.levels[2]: Duplicate value: "
            "\"topology.kubernetes.io/zone\"\n"
            "audit: 3 objects checked (2 TopologySources, 1 ModelDeployment), 2 violating; 3 "
            "violations by rule: "
            "M1=1 T3=1 T4=1\n");
  EXPECT_EQ(render_audit_text(audit(valid_source)),
            "audit: 1 object checked (1 TopologySource, 0 ModelDeployments), 0 violating\n");
}

TEST(Audit, AnErrorWithoutRuleIsShownAsDash) {
  // A file's object with no name: admission reports it under no rule.
  const auto r =
      audit(R"({"apiVersion":"worker.gpustack.ai/v1","kind":"TopologySource","metadata":{},
    "spec":{"levels":["topology.gpustack.ai/rack"],"nodeLabels":{}}})");
  ASSERT_EQ(r.violating.size(), 1u);
  EXPECT_EQ(r.violating[0].id(), "<no name>");
  EXPECT_EQ(render_audit_text(r).substr(0, 44), "TopologySource <no name>: - metadata.name: R");
}

TEST(Audit, JsonCarriesEveryViolationAndTheSummary) {
  const auto r = audit(list({std::string(bad_webhook),
                             deployment("team-a", "m", "not a key", "topology.kubernetes.io/zone"),
                             R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"}})"}));
  const auto d = core::decode_json(render_audit_json(r));
  ASSERT_TRUE(d.ok()) << render_audit_json(r);
  const auto* v = d.root.find("violations");
  ASSERT_TRUE(v && v->is_sequence());
  ASSERT_EQ(v->items.size(), 4u);
  const auto& first = v->items[0];
  EXPECT_EQ(first.find("kind")->text, "ModelDeployment");
  EXPECT_EQ(first.find("namespace")->text, "team-a");
  EXPECT_EQ(first.find("name")->text, "m");
  EXPECT_EQ(first.find("rule")->text, "M1");
  EXPECT_EQ(first.find("path")->text, "spec.roles[0].topology.requiredLevel");
  EXPECT_EQ(first.find("type")->text, "Invalid value");
  EXPECT_EQ(first.find("message")->text.substr(0, 23), "Invalid value: \"not a k");
  const auto& t13 = v->items[3];
  EXPECT_EQ(t13.find("namespace")->text, "");
  EXPECT_EQ(t13.find("rule")->text, "T13");
  const auto* s = d.root.find("summary");
  ASSERT_TRUE(s);
  EXPECT_EQ(s->find("checked")->text, "2");
  EXPECT_EQ(s->find("violating")->text, "2");
  EXPECT_EQ(s->find("violations")->text, "4");
  EXPECT_EQ(s->find("ignored")->text, "1");
  EXPECT_EQ(s->find("byRule")->find("T9")->text, "1");
  EXPECT_EQ(s->find("byRule")->find("M1")->text, "1");
  // Clean: an empty array.
  const auto clean = core::decode_json(render_audit_json(audit(valid_source)));
  ASSERT_TRUE(clean.ok());
  EXPECT_TRUE(clean.root.find("violations")->items.empty());
}

}  // namespace
}  // namespace topogate::diagnose

namespace topogate::diagnose {
namespace {

std::string writing_source(std::string_view name, std::string_view levels,
                           std::string_view selector) {
  return R"({"apiVersion":"worker.gpustack.ai/v1alpha1","kind":"TopologySource","metadata":{"name":")" +
         std::string(name) + R"("},"spec":{"nodeSelector":)" + std::string(selector) +
         R"(,"levels":)" + std::string(levels) +
         R"(,"configMap":{"configMapRef":{"namespace":"gpustack-system","name":"inv"},"key":"s.yaml","maxStaleness":"10m"}}})";
}

std::string node(std::string_view name, std::string_view pool) {
  return R"({"apiVersion":"v1","kind":"Node","metadata":{"name":")" + std::string(name) +
         R"(","labels":{"pool":")" + std::string(pool) + R"("}}})";
}

// Two writing sources whose levels overlap and whose selectors share Nodes: the consumer
// publishes neither, so the audit names both sources and the shared Nodes.
TEST(Audit, OwnershipConflictNamesBothSourcesAndTheSharedNodes) {
  const std::string rack = R"(["topology.gpustack.ai/rack"])";
  auto r = audit(list({writing_source("inventory-a", rack, "{}"),
                       writing_source("inventory-b", rack, R"({"matchLabels":{"pool":"a"}})"),
                       node("n1", "a"), node("n2", "b")}));
  ASSERT_EQ(r.conflicts.size(), 1u);
  EXPECT_EQ(r.conflicts[0].first, "inventory-a");
  EXPECT_EQ(r.conflicts[0].second, "inventory-b");
  EXPECT_EQ(r.conflicts[0].nodes, (std::vector<std::string>{"n1"}));
  EXPECT_EQ(r.nodes, 2u);
  EXPECT_FALSE(r.clean());
  EXPECT_TRUE(r.violating.empty());
  const std::string text = render_audit_text(r);
  EXPECT_NE(text.find("TopologySource inventory-a: ownership conflict: writing sources "
                      "inventory-a and inventory-b"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("TopologySource inventory-b: ownership conflict"), std::string::npos) << text;
  EXPECT_NE(text.find("1 Node (n1)"), std::string::npos) << text;
  const auto json = parse(render_audit_json(r));
  const core::doc_node* conflicts = json.find("conflicts");
  ASSERT_NE(conflicts, nullptr);
  ASSERT_EQ(conflicts->items.size(), 1u);
  EXPECT_EQ(conflicts->items[0].find("nodes")->items[0].text, "n1");

  // The other side of each condition: disjoint levels, no shared Node, a read-only source,
  // no Nodes in the input.
  for (
      const auto& objects : std::vector<std::vector<std::string>>{
          {writing_source("a", rack, "{}"),
           writing_source("b", R"(["topology.gpustack.ai/zone"])", "{}"), node("n1", "a")},
          {writing_source("a", rack, R"({"matchLabels":{"pool":"a"}})"),
           writing_source("b", rack, R"({"matchLabels":{"pool":"b"}})"), node("n1", "a")},
          {writing_source("a", rack, "{}"),
           R"({"apiVersion":"worker.gpustack.ai/v1alpha1","kind":"TopologySource","metadata":{"name":"b"},"spec":{"levels":["topology.gpustack.ai/rack"],"nodeLabels":{}}})",
           node("n1", "a")},
          {writing_source("a", rack, "{}"), writing_source("b", rack, "{}")}}) {
    const auto clean = audit(list(objects));
    EXPECT_TRUE(clean.conflicts.empty()) << render_audit_text(clean);
    EXPECT_TRUE(clean.clean()) << render_audit_text(clean);
  }
}

}  // namespace
}  // namespace topogate::diagnose

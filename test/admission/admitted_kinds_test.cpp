// core/admitted_kinds.hpp's table held to what reads it: the chart's
// ValidatingWebhookConfiguration (helm/topogate/templates/webhook.yaml registers one webhook per
// row, on the row's path, group, resource and scope, enabled by default), the CRDs that name
// each resource's kind, and the webhook routes' and `topogate review`'s verdicts.

#include "core/admitted_kinds.hpp"

#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "admission/review.hpp"
#include "core/document.hpp"
#include "test/admission/fixture.hpp"

namespace topogate::admission {
namespace {

std::string read_source_file(const std::string& relative) {
  std::ifstream in(std::string(TOPOGATE_SOURCE_DIR) + "/" + relative);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string_view text_at(const core::doc_node& root, std::initializer_list<std::string_view> path) {
  const core::doc_node* n = &root;
  for (auto key : path) {
    n = n->find(key);
    if (n == nullptr) return "<absent>";
  }
  return n->text;
}

struct chart_webhook {
  std::string values_key;  // webhook.<values_key>.enabled
  std::string scope;
};

// The webhooks the template ranges over: (dict "on" $v.<key>.enabled "name" "<resource>"
// "scope" "<Cluster|Namespaced>").
std::map<std::string, chart_webhook> chart_webhooks(const std::string& tpl) {
  // A plain scan rather than std::regex, whose GCC 12 instantiation trips
  // -Wmaybe-uninitialized at -O1 (the sanitizer presets build with warnings as errors).
  std::map<std::string, chart_webhook> out;
  const auto word_after = [&](std::size_t& at, std::string_view before,
                              std::string_view after) -> std::string {
    const auto b = tpl.find(before, at);
    if (b == std::string::npos) return {};
    const auto start = b + before.size();
    const auto e = tpl.find(after, start);
    if (e == std::string::npos) return {};
    at = e + after.size();
    return tpl.substr(start, e - start);
  };
  constexpr std::string_view head = R"(dict "on" $v.)";
  for (std::size_t at = tpl.find(head); at != std::string::npos; at = tpl.find(head, at)) {
    std::size_t cur = at;
    const std::string key = word_after(cur, head, R"(.enabled "name" ")");
    const std::string name = word_after(cur, "", R"(" "scope" ")");
    const std::string scope = word_after(cur, "", R"(")");
    if (key.empty() || name.empty() || scope.empty()) break;
    out[name] = {key, scope};
    at = cur;
  }
  return out;
}

TEST(AdmittedKinds, TheChartsWebhookRegistersEveryRowAndNothingElse) {
  const std::string tpl = read_source_file("helm/topogate/templates/webhook.yaml");
  ASSERT_FALSE(tpl.empty());
  const auto webhooks = chart_webhooks(tpl);
  ASSERT_EQ(webhooks.size(), core::admitted_kinds.size()) << tpl;
  // Each webhook's path, URL and rule are made from its resource, in one group.
  for (const char* line :
       {"path: /validate/{{ $w.name }}", R"(printf "%s/validate/%s")", "resources: [{{ $w.name }}]",
        "operations: [CREATE, UPDATE]", "scope: {{ $w.scope | quote }}"})
    EXPECT_NE(tpl.find(line), std::string::npos) << line;
  const auto values = core::decode_yaml(read_source_file("helm/topogate/values.yaml"));
  ASSERT_TRUE(values.ok());
  for (const core::admitted_kind& k : core::admitted_kinds) {
    SCOPED_TRACE(k.kind);
    EXPECT_NE(tpl.find("apiGroups: [" + std::string(k.group) + "]"), std::string::npos);
    const auto w = webhooks.find(std::string(k.resource));
    ASSERT_NE(w, webhooks.end()) << "no webhook for " << k.resource;
    EXPECT_EQ(w->second.scope, k.namespaced ? "Namespaced" : "Cluster");
    EXPECT_EQ("/validate/" + std::string(k.resource), k.path);
    EXPECT_EQ(text_at(values.root, {"webhook", w->second.values_key, "enabled"}), "true");
  }
}

// The resource a webhook rule names is the kind the apiserver then sends: as the CRDs say.
TEST(AdmittedKinds, EachResourceIsItsKindsPluralInTheCrds) {
  for (const core::admitted_kind& k : core::admitted_kinds) {
    SCOPED_TRACE(k.kind);
    const std::string file = std::string(k.resource) + "." + std::string(k.group) + ".yaml";
    const auto crd = core::decode_yaml(read_source_file("test/e2e/crds/" + file));
    ASSERT_TRUE(crd.ok()) << file;
    EXPECT_EQ(text_at(crd.root, {"spec", "group"}), k.group);
    EXPECT_EQ(text_at(crd.root, {"spec", "names", "plural"}), k.resource);
    EXPECT_EQ(text_at(crd.root, {"spec", "names", "kind"}), k.kind);
    EXPECT_EQ(text_at(crd.root, {"spec", "scope"}), k.namespaced ? "Namespaced" : "Cluster");
  }
  // The chart's own CRD (crds.install) agrees too.
  const auto& ts = core::admitted(route::topology_sources);
  const auto chart_crd = core::decode_yaml(
      read_source_file("helm/topogate/files/crds/topologysources.worker.gpustack.ai.yaml"));
  ASSERT_TRUE(chart_crd.ok());
  EXPECT_EQ(text_at(chart_crd.root, {"spec", "names", "plural"}), ts.resource);
  EXPECT_EQ(text_at(chart_crd.root, {"spec", "names", "kind"}), ts.kind);
}

// Each route validates its own kind and allows the others unread; `topogate review`'s route is
// the one of the request's kind.
TEST(AdmittedKinds, EachRouteValidatesItsKindAndTheCommandLineFindsIt) {
  using test::json_meta;
  const std::string source = test::fixture("denied.json");  // a TopologySource with errors
  const std::string deployment = test::fixture("modeldeployment_denied.json");
  const outcome on_sources = review(route::topology_sources, source, json_meta, {});
  EXPECT_EQ(on_sources.result, verdict::denied);
  EXPECT_EQ(on_sources.kind, "TopologySource");
  const outcome elsewhere = review(route::model_deployments, source, json_meta, {});
  EXPECT_EQ(elsewhere.result, verdict::allowed);
  EXPECT_EQ(elsewhere.kind, "other");
  EXPECT_EQ(review(route::topology_sources, deployment, json_meta, {}).kind, "other");

  const outcome any_source = review_on_its_route(source, {}, {});
  EXPECT_EQ(any_source.body, on_sources.body);
  // A kind no route admits: allowed, as every route allows it.
  const outcome other = review_on_its_route(test::fixture("other_kind.json"), {}, {});
  EXPECT_EQ(other.result, verdict::allowed);
  EXPECT_EQ(other.kind, "other");
  const outcome any_deployment = review_on_its_route(deployment, {}, {});
  const outcome on_deployments = review(route::model_deployments, deployment, json_meta, {});
  EXPECT_EQ(any_deployment.kind, "ModelDeployment");
  EXPECT_EQ(on_deployments.result, verdict::denied);
  EXPECT_EQ(any_deployment.result, verdict::denied);
  EXPECT_EQ(any_deployment.body, on_deployments.body);
}

TEST(AdmittedKinds, FoundByGroupAndKind) {
  for (const core::admitted_kind& k : core::admitted_kinds)
    EXPECT_EQ(core::find_admitted_kind(k.group, k.kind), &k) << k.kind;
  EXPECT_EQ(core::find_admitted_kind("other.example", "TopologySource"), nullptr);
  EXPECT_EQ(core::find_admitted_kind("worker.gpustack.ai", "Worker"), nullptr);
  EXPECT_EQ(core::find_admitted_kind("worker.gpustack.ai", "topologysource"), nullptr);
}

}  // namespace
}  // namespace topogate::admission

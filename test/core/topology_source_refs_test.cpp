// TopologySource rules T12-T14 (credentials, references, selectors), warnings, what can be
// published, and robustness against wrong shapes: rule, type and path of every error.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "core/topology_source.hpp"
#include "core/topology_source_internal.hpp"
#include "test/core/topology_source_support.hpp"

namespace topogate::core {
namespace {

using namespace test;

// ---------------------------------------------------------------------------------------
// T12, T13: credentials and references

TEST(T12, ExactlyOneAuthentication) {
  webhook_fields f;
  f.auth = "";
  const auto neither = validate_both(webhook_source_text(f));
  // The consumer: one Invalid at spec.webhook for none and for both.
  EXPECT_TRUE(has_error(neither.errors, "T12", error_type::invalid, "spec.webhook"))
      << dump(neither);
  EXPECT_EQ(neither.errors.size(), 1u) << dump(neither);
  EXPECT_EQ(rules_of(neither.errors), std::set<std::string>{"T12"});

  f.auth =
      "    bearerTokenSecretRef: {namespace: gpustack-system, name: a}\n"
      "    tlsClientCertificateSecretRef: {namespace: gpustack-system, name: b}\n";
  const auto both = validate_both(webhook_source_text(f));
  EXPECT_TRUE(has_error(both.errors, "T12", error_type::invalid, "spec.webhook")) << dump(both);
  EXPECT_EQ(both.errors.size(), 1u) << dump(both);
  EXPECT_EQ(rules_of(both.errors), std::set<std::string>{"T12"});
}

TEST(T13, ReferencesStayInTheWorkerNamespace) {
  webhook_fields f;
  f.auth = "    bearerTokenSecretRef: {namespace: kube-system, name: t}\n";
  f.extra = "    caBundleConfigMapRef: {namespace: default, name: ca}\n";
  // extra lands after auth inside webhook, as it is indented under it
  const auto r = validate_both(webhook_source_text(f));
  EXPECT_TRUE(has_error(r.errors, "T13", error_type::forbidden,
                        "spec.webhook.bearerTokenSecretRef.namespace"))
      << dump(r);
  EXPECT_TRUE(has_error(r.errors, "T13", error_type::forbidden,
                        "spec.webhook.caBundleConfigMapRef.namespace"))
      << dump(r);
  EXPECT_EQ(rules_of(r.errors), std::set<std::string>{"T13"});

  // The consumer's verdicts on an unset or empty namespace (not the worker namespace:
  // Forbidden) and name (not a DNS-1123 subdomain: Invalid), each the only error.
  struct ref_case {
    const char* auth;
    error_type type;
    const char* path;
  };
  constexpr const char* mtls_ns = "spec.webhook.tlsClientCertificateSecretRef.namespace";
  constexpr const char* bearer_name = "spec.webhook.bearerTokenSecretRef.name";
  for (const ref_case& c : {
           ref_case{"{name: t}", error_type::forbidden, mtls_ns},
           ref_case{"{namespace: \"\", name: t}", error_type::forbidden, mtls_ns},
           ref_case{"{namespace: gpustack-system, name: Bad_Name}", error_type::invalid,
                    bearer_name},
           ref_case{"{namespace: gpustack-system}", error_type::invalid, bearer_name},
           ref_case{"{namespace: gpustack-system, name: \"\"}", error_type::invalid, bearer_name},
       }) {
    const bool mtls = std::string_view(c.path) == mtls_ns;
    f.auth =
        std::string(mtls ? "    tlsClientCertificateSecretRef: " : "    bearerTokenSecretRef: ") +
        c.auth + "\n";
    f.extra = "";
    const auto got = validate_both(webhook_source_text(f));
    EXPECT_TRUE(has_error(got.errors, "T13", c.type, c.path)) << c.auth << dump(got);
    EXPECT_EQ(got.errors.size(), 1u) << c.auth << dump(got);
  }

  f.auth = "    bearerTokenSecretRef: gpustack-system/t\n";
  const auto scalar = validate_both(webhook_source_text(f));
  EXPECT_TRUE(
      has_error(scalar.errors, "T13", error_type::invalid, "spec.webhook.bearerTokenSecretRef"))
      << dump(scalar);

  const auto cm =
      validate_both(config_map_source("    key: k\n", "    maxStaleness: 1m\n",
                                      "    configMapRef: {namespace: other, name: inv}\n"));
  EXPECT_TRUE(
      has_error(cm.errors, "T13", error_type::forbidden, "spec.configMap.configMapRef.namespace"))
      << dump(cm);
}

TEST(T13, WorkerNamespaceIsConfigurable) {
  webhook_fields f;
  f.auth = "    bearerTokenSecretRef: {namespace: inventory, name: t}\n";
  validation_options opts;
  EXPECT_FALSE(validate_both(webhook_source_text(f), opts).ok());
  opts.worker_namespace = "inventory";
  EXPECT_TRUE(validate_both(webhook_source_text(f), opts).ok());
}

// ---------------------------------------------------------------------------------------
// T14: node selector

TEST(T14, SelectorRequirements) {
  auto check = [](std::string_view selector) {
    return validate_both(node_labels_source("[topology.kubernetes.io/zone]",
                                            "  nodeSelector: " + std::string(selector) + "\n"));
  };
  EXPECT_TRUE(check("{}").ok());
  EXPECT_TRUE(check("{matchLabels: {node-role.kubernetes.io/worker: \"\"}}").ok());
  EXPECT_TRUE(
      check(
          "{matchExpressions: [{key: a/b, operator: In, values: [x]}, {key: c, operator: Exists}]}")
          .ok());
  EXPECT_TRUE(check("{matchExpressions: [{key: a/b, operator: DoesNotExist, values: []}]}").ok());

  auto in_empty = check("{matchExpressions: [{key: a/b, operator: In}]}");
  EXPECT_TRUE(has_error(in_empty.errors, "T14", error_type::required,
                        "spec.nodeSelector.matchExpressions[0].values"))
      << dump(in_empty);
  auto notin_empty = check(
      "{matchExpressions: [{key: a, operator: In, values: [x]}, {key: a/b, operator: NotIn, "
      "values: []}]}");
  EXPECT_TRUE(has_error(notin_empty.errors, "T14", error_type::required,
                        "spec.nodeSelector.matchExpressions[1].values"))
      << dump(notin_empty);
  auto exists_values = check("{matchExpressions: [{key: a/b, operator: Exists, values: [x]}]}");
  EXPECT_TRUE(has_error(exists_values.errors, "T14", error_type::forbidden,
                        "spec.nodeSelector.matchExpressions[0].values"))
      << dump(exists_values);
  auto unknown_op = check("{matchExpressions: [{key: a/b, operator: Gt, values: [\"1\"]}]}");
  EXPECT_TRUE(has_error(unknown_op.errors, "T14", error_type::not_supported,
                        "spec.nodeSelector.matchExpressions[0].operator"))
      << dump(unknown_op);
  auto bad_key = check("{matchExpressions: [{key: -bad, operator: Exists}]}");
  EXPECT_TRUE(has_error(bad_key.errors, "T14", error_type::invalid,
                        "spec.nodeSelector.matchExpressions[0].key"))
      << dump(bad_key);
  auto bad_value = check("{matchExpressions: [{key: a, operator: In, values: [\"a b\"]}]}");
  EXPECT_TRUE(has_error(bad_value.errors, "T14", error_type::invalid,
                        "spec.nodeSelector.matchExpressions[0].values[0]"))
      << dump(bad_value);
  auto bad_label_key = check("{matchLabels: {\"a/b/c\": x}}");
  EXPECT_TRUE(
      has_error(bad_label_key.errors, "T14", error_type::invalid, "spec.nodeSelector.matchLabels"))
      << dump(bad_label_key);
  auto bad_label_value = check("{matchLabels: {a: \"-x\"}}");
  EXPECT_TRUE(has_error(bad_label_value.errors, "T14", error_type::invalid,
                        "spec.nodeSelector.matchLabels[a]"))
      << dump(bad_label_value);
  auto not_object = check("[a]");
  EXPECT_TRUE(has_error(not_object.errors, "T14", error_type::invalid, "spec.nodeSelector"))
      << dump(not_object);
  auto expr_not_list = check("{matchExpressions: {key: a}}");
  EXPECT_TRUE(has_error(expr_not_list.errors, "T14", error_type::invalid,
                        "spec.nodeSelector.matchExpressions"));
  // Whatever the cause, the consumer reports one Invalid at spec.nodeSelector (the selector
  // does not convert); topogate reports it first, then the causes.
  for (const auto* r : {&in_empty, &notin_empty, &exists_values, &unknown_op, &bad_key, &bad_value,
                        &bad_label_key, &bad_label_value, &not_object}) {
    EXPECT_EQ(rules_of(r->errors), std::set<std::string>{"T14"}) << dump(*r);
    ASSERT_FALSE(r->errors.empty());
    EXPECT_EQ(r->errors.front().path, "spec.nodeSelector") << dump(*r);
    EXPECT_EQ(r->errors.front().type, error_type::invalid) << dump(*r);
    EXPECT_EQ(std::count_if(r->errors.begin(), r->errors.end(),
                            [](const field_error& e) { return e.path == "spec.nodeSelector"; }),
              1)
        << dump(*r);
  }
}

TEST(LabelSelector, Matches) {
  label_selector sel;
  const std::vector<std::pair<std::string, std::string>> labels = {{"role", "worker"},
                                                                   {"zone", "a"}};
  EXPECT_TRUE(sel.matches(labels));
  EXPECT_TRUE(sel.matches({}));
  sel.match_labels = {{"role", "worker"}};
  EXPECT_TRUE(sel.matches(labels));
  sel.match_labels = {{"role", "gpu"}};
  EXPECT_FALSE(sel.matches(labels));
  sel.match_labels = {};
  sel.match_expressions = {{"zone", "In", {"a", "b"}}};
  EXPECT_TRUE(sel.matches(labels));
  sel.match_expressions = {{"zone", "NotIn", {"a"}}};
  EXPECT_FALSE(sel.matches(labels));
  sel.match_expressions = {{"rack", "NotIn", {"a"}}};
  EXPECT_TRUE(sel.matches(labels));  // absent satisfies NotIn
  sel.match_expressions = {{"rack", "Exists", {}}};
  EXPECT_FALSE(sel.matches(labels));
  sel.match_expressions = {{"rack", "DoesNotExist", {}}};
  EXPECT_TRUE(sel.matches(labels));
  sel.match_expressions = {{"zone", "Bogus", {}}};
  EXPECT_FALSE(sel.matches(labels));
}

TEST(LabelSelector, ParsedIntoSource) {
  const auto r = validate_both(
      node_labels_source("[a/b]",
                         "  nodeSelector: {matchLabels: {role: worker}, matchExpressions: [{key: "
                         "zone, operator: In, values: [a]}]}\n"));
  ASSERT_TRUE(r.ok()) << dump(r);
  ASSERT_TRUE(r.source.node_selector.has_value());
  EXPECT_EQ(r.source.node_selector->match_labels.size(), 1u);
  ASSERT_EQ(r.source.node_selector->match_expressions.size(), 1u);
  EXPECT_EQ(r.source.node_selector->match_expressions[0].op, "In");
  EXPECT_TRUE(r.source.node_selector->matches({{"role", "worker"}, {"zone", "a"}}));
  EXPECT_FALSE(r.source.node_selector->matches({{"role", "worker"}, {"zone", "b"}}));
}

// ---------------------------------------------------------------------------------------
// Warnings and publishability

TEST(Warnings, CredentialLookingQuery) {
  for (std::string_view q :
       {"token=x", "access_token=x", "PASSWORD=x", "passwd=x", "secret=x", "key=x", "api_key=x",
        "ApiKey=x", "auth=x", "signature=x", "sig=x", "a=1&token=x"}) {
    webhook_fields f;
    f.url = "https://x/s?" + std::string(q);
    const auto r = validate_both(webhook_source_text(f));
    EXPECT_TRUE(r.ok()) << q << dump(r);
    EXPECT_EQ(r.warnings.size(), 1u) << q << dump(r);
  }
  for (std::string_view q : {"tokens=x", "monkey=x", "page=2", "", "token"}) {
    webhook_fields f;
    f.url = "https://x/s?" + std::string(q);
    EXPECT_TRUE(validate_both(webhook_source_text(f)).warnings.empty()) << q;
  }
}

TEST(Warnings, WritingSourceWithNothingToPublish) {
  webhook_fields f;
  f.levels = "[topology.kubernetes.io/region, topology.kubernetes.io/zone]";
  const auto r = validate_both(webhook_source_text(f));
  EXPECT_TRUE(r.ok()) << dump(r);
  EXPECT_EQ(r.warnings.size(), 1u) << dump(r);

  f.levels = "[topology.kubernetes.io/zone, example.com/rack]";
  EXPECT_EQ(validate_both(webhook_source_text(f)).warnings.size(), 1u);
  f.extra = "  additionalWritePrefix: example.com/\n";
  EXPECT_TRUE(validate_both(webhook_source_text(f)).warnings.empty());
  f.extra.clear();
  f.levels = "[topology.kubernetes.io/zone, topology.gpustack.ai/rack]";
  EXPECT_TRUE(validate_both(webhook_source_text(f)).warnings.empty());
  // A read-only source publishes nothing by design: no warning.
  EXPECT_TRUE(validate_both(node_labels_source("[topology.kubernetes.io/zone]")).warnings.empty());
}

TEST(Warnings, BoundedAndPrintable) {
  webhook_fields f;
  f.url = "https://x/s?" + std::string(300, 'k') + "=1&token=x";
  f.poll = "1h";
  f.timeout = "1m";
  f.stale = "1m";
  f.levels = "[example.com/rack]";
  f.extra = "    " + std::string(200, 'z') + ": 1\n";
  const auto r = validate_both(webhook_source_text(f));
  EXPECT_TRUE(r.ok()) << dump(r);
  EXPECT_GE(r.warnings.size(), 4u) << dump(r);
  for (const auto& w : r.warnings) {
    EXPECT_LE(w.size(), 120u) << w;
    EXPECT_TRUE(std::none_of(w.begin(), w.end(), [](char c) {
      return static_cast<unsigned char>(c) < 0x20 || c == 0x7f;
    })) << w;
  }
}

TEST(Warnings, UnknownFieldsAreReported) {
  webhook_fields f;
  f.extra = "    pollIntervall: 1m\n";
  const auto r = validate_both(webhook_source_text(f));
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(r.warnings.size(), 1u) << dump(r);
}

TEST(Publishable, KeysPerS5) {
  topology_source src;
  EXPECT_TRUE(is_publishable_key("topology.gpustack.ai/rack", src));
  EXPECT_FALSE(is_publishable_key("topology.gpustack.ai/profile", src));
  EXPECT_TRUE(is_publishable_key("topology.kubernetes.io/region", src));
  EXPECT_TRUE(is_publishable_key("topology.kubernetes.io/zone", src));
  EXPECT_FALSE(is_publishable_key("topology.kubernetes.io/rack", src));
  EXPECT_FALSE(is_publishable_key("kubernetes.io/hostname", src));
  EXPECT_FALSE(is_publishable_key("example.com/rack", src));
  EXPECT_FALSE(is_publishable_key("rack", src));
  src.additional_write_prefix = "example.com/";
  EXPECT_TRUE(is_publishable_key("example.com/rack", src));
  EXPECT_FALSE(is_publishable_key("sub.example.com/rack", src));
  EXPECT_FALSE(is_publishable_key("notexample.com/rack", src));
  EXPECT_TRUE(is_read_only_parent("topology.kubernetes.io/zone"));
  EXPECT_FALSE(is_read_only_parent("topology.gpustack.ai/zone"));
}

// ---------------------------------------------------------------------------------------
// Shapes that must be errors, never crashes.

TEST(Robustness, WrongShapes) {
  for (std::string_view text :
       {"[]", "42",
        "apiVersion: worker.gpustack.ai/v1\nkind: TopologySource\nmetadata: {name: x}\nspec: []\n",
        "apiVersion: worker.gpustack.ai/v1\nkind: TopologySource\nmetadata: {name: x}\nspec: "
        "{webhook: x, levels: [a]}\n",
        "apiVersion: worker.gpustack.ai/v1\nkind: TopologySource\nmetadata: {name: x}\nspec: "
        "{configMap: [], levels: [a]}\n",
        "apiVersion: worker.gpustack.ai/v1\nkind: TopologySource\nmetadata: [x]\nspec: "
        "{nodeLabels: {}, levels: [a]}\n",
        "apiVersion: [1]\nkind: {a: b}\nmetadata: {name: BAD}\nspec: {nodeLabels: {}, levels: "
        "[a]}\n",
        "apiVersion: worker.gpustack.ai/v1\nkind: TopologySource\nmetadata: {name: x}\n"
        "spec: {levels: [a], webhook: {url: [x], pollInterval: {}, timeout: [], maxStaleness: true,"
        " bearerTokenSecretRef: [], caBundleConfigMapRef: 1}}\n",
        "apiVersion: worker.gpustack.ai/v1\nkind: TopologySource\nmetadata: {name: x}\n"
        "spec: {levels: [a], nodeLabels: {}, nodeSelector: {matchLabels: [a], matchExpressions: "
        "[1, ~, {values: x}]}}\n"}) {
    const auto r = validate_both(text);
    EXPECT_FALSE(r.ok()) << text;
  }
}

TEST(Robustness, MissingMetadataNameIsAnError) {
  const auto r = validate_both(
      "apiVersion: worker.gpustack.ai/v1\nkind: TopologySource\n"
      "spec: {levels: [a/b], nodeLabels: {}}\n");
  EXPECT_TRUE(has_error(r.errors, "", error_type::required, "metadata.name")) << dump(r);
}

TEST(AllErrors, ReportedTogether) {
  const auto r = validate_both(
      with_spec("  levels: [kubernetes.io/hostname, a/b, a/b]\n"
                "  additionalWritePrefix: kubernetes.io/\n"
                "  webhook:\n    url: http://x/#f\n    pollInterval: 1m\n    timeout: 2m\n    "
                "maxStaleness: 0s\n"
                "    caBundleConfigMapRef: {namespace: default, name: ca}\n"));
  EXPECT_EQ(rules_of(r.errors),
            (std::set<std::string>{"T3", "T4", "T6", "T9", "T10", "T11", "T12", "T13"}))
      << dump(r);
}

}  // namespace
}  // namespace topogate::core

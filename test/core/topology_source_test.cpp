// TopologySource rules T1-T8 and the configMap source's T13: rule, type and path of every
// error. T9-T11 are in topology_source_webhook_test.cpp, T12-T14, selectors, warnings and
// robustness in topology_source_refs_test.cpp.
#include "core/topology_source.hpp"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "core/topology_source_internal.hpp"
#include "test/core/topology_source_support.hpp"

namespace topogate::core {
namespace {

using namespace test;

// ---------------------------------------------------------------------------------------
// The runbook's examples are all valid, with no warnings.

TEST(RunbookExamples, AllValid) {
  const std::string cloud_fabric = R"(apiVersion: worker.gpustack.ai/v1
kind: TopologySource
metadata:
  name: cloud-fabric
spec:
  nodeSelector: {}
  levels:
    - topology.kubernetes.io/region
    - topology.kubernetes.io/zone
    - fabric.topograph.run/tier-2
    - fabric.topograph.run/tier-1
  nodeLabels: {}
)";
  const std::string cloud_zones = R"(apiVersion: worker.gpustack.ai/v1
kind: TopologySource
metadata:
  name: cloud-zones
spec:
  nodeSelector:
    matchLabels:
      node-role.kubernetes.io/worker: ""
  levels:
    - topology.kubernetes.io/region
    - topology.kubernetes.io/zone
  nodeLabels: {}
)";
  const std::string data_center = R"(apiVersion: worker.gpustack.ai/v1
kind: TopologySource
metadata:
  name: data-center
spec:
  nodeSelector: {}
  levels:
    - topology.gpustack.ai/region
    - topology.gpustack.ai/zone
    - topology.gpustack.ai/rack
  configMap:
    configMapRef:
      namespace: gpustack-system
      name: topology-inventory
    key: snapshot.yaml
    maxStaleness: 10m
)";
  const std::string inventory_service = R"(apiVersion: worker.gpustack.ai/v1
kind: TopologySource
metadata:
  name: inventory-service
spec:
  nodeSelector: {}
  levels:
    - topology.gpustack.ai/rack
  webhook:
    url: https://topology-inventory.gpustack-system.svc/snapshot
    pollInterval: 1m
    timeout: 10s
    maxStaleness: 5m
    caBundleConfigMapRef:
      namespace: gpustack-system
      name: topology-inventory-ca
    bearerTokenSecretRef:
      namespace: gpustack-system
      name: topology-inventory-token
)";
  for (const auto* text : {&cloud_fabric, &cloud_zones, &data_center, &inventory_service}) {
    const auto r = validate_both(*text);
    EXPECT_TRUE(r.ok()) << *text << dump(r);
    EXPECT_TRUE(r.warnings.empty()) << dump(r);
  }
  const auto r = validate_both(inventory_service);
  EXPECT_EQ(r.source.name, "inventory-service");
  ASSERT_TRUE(r.source.webhook.has_value());
  EXPECT_EQ(r.source.webhook->poll_interval, "1m");
  ASSERT_TRUE(r.source.webhook->bearer_token_secret_ref.has_value());
  EXPECT_EQ(r.source.webhook->bearer_token_secret_ref->name, "topology-inventory-token");
  EXPECT_EQ(r.source.levels, std::vector<std::string>{"topology.gpustack.ai/rack"});
}

TEST(RunbookExamples, MutualTlsVariantValid) {
  webhook_fields f;
  f.auth =
      "    tlsClientCertificateSecretRef: {namespace: gpustack-system, name: "
      "topology-inventory-client}\n";
  const auto r = validate_both(webhook_source_text(f));
  EXPECT_TRUE(r.ok()) << dump(r);
}

TEST(ApiVersion, BothVersionsAcceptedOthersNot) {
  for (std::string_view v : {"worker.gpustack.ai/v1", "worker.gpustack.ai/v1alpha1"}) {
    const auto r = validate_both("apiVersion: " + std::string(v) +
                                 "\nkind: TopologySource\nmetadata: {name: x}\n"
                                 "spec: {levels: [a.b/c], nodeLabels: {}}\n");
    EXPECT_TRUE(r.ok()) << dump(r);
  }
  const auto r = validate_both(
      "apiVersion: worker.gpustack.ai/v2\nkind: Other\nmetadata: {name: x}\nspec: {levels: "
      "[a.b/c], nodeLabels: {}}\n");
  EXPECT_TRUE(has_error(r.errors, "", error_type::not_supported, "apiVersion")) << dump(r);
  EXPECT_TRUE(has_error(r.errors, "", error_type::not_supported, "kind")) << dump(r);
}

// ---------------------------------------------------------------------------------------
// T1-T4: levels

TEST(T1, LevelCountBoundaries) {
  EXPECT_TRUE(validate_both(node_labels_source(levels_list(1))).ok());
  const auto sixteen = validate_both(node_labels_source(levels_list(16)));
  EXPECT_TRUE(sixteen.ok()) << dump(sixteen);
  const auto seventeen = validate_both(node_labels_source(levels_list(17)));
  EXPECT_TRUE(has_error(seventeen.errors, "T1", error_type::too_many, "spec.levels"))
      << dump(seventeen);
  EXPECT_EQ(rules_of(seventeen.errors), std::set<std::string>{"T1"});

  const auto empty = validate_both(node_labels_source("[]"));
  EXPECT_TRUE(has_error(empty.errors, "T1", error_type::required, "spec.levels"));
  const auto missing = validate_both(with_spec("  nodeLabels: {}\n"));
  EXPECT_TRUE(has_error(missing.errors, "T1", error_type::required, "spec.levels"));
  const auto not_list = validate_both(node_labels_source("topology.gpustack.ai/rack"));
  EXPECT_TRUE(has_error(not_list.errors, "T1", error_type::invalid, "spec.levels"))
      << dump(not_list);
  const auto map = validate_both(node_labels_source("{a: b}"));
  EXPECT_TRUE(has_error(map.errors, "T1", error_type::invalid, "spec.levels"));
}

struct level_case {
  std::string level;
  bool valid;
};

class T2 : public ::testing::TestWithParam<level_case> {};

TEST_P(T2, LevelIsALabelKey) {
  const auto& c = GetParam();
  const auto r =
      validate_both(node_labels_source("[topology.gpustack.ai/zone, \"" + c.level + "\"]"));
  if (c.valid) {
    EXPECT_TRUE(r.ok()) << c.level << "\n" << dump(r);
  } else {
    EXPECT_TRUE(has_error(r.errors, "T2", error_type::invalid, "spec.levels[1]")) << c.level << "\n"
                                                                                  << dump(r);
    EXPECT_EQ(rules_of(r.errors), std::set<std::string>{"T2"});
  }
}

INSTANTIATE_TEST_SUITE_P(
    Table, T2,
    ::testing::Values(level_case{"topology.gpustack.ai/rack", true}, level_case{"rack", true},
                      level_case{"topology.gpustack.ai/" + std::string(63, 'r'), true},
                      level_case{"topology.gpustack.ai/" + std::string(64, 'r'), false},
                      level_case{std::string(63, 'a') + "." + std::string(63, 'b') + "." +
                                     std::string(63, 'c') + "." + std::string(61, 'd') + "/x",
                                 true},  // prefix of 253
                      level_case{std::string(63, 'a') + "." + std::string(63, 'b') + "." +
                                     std::string(63, 'c') + "." + std::string(62, 'd') + "/x",
                                 false},  // prefix of 254
                      level_case{"", false}, level_case{"/rack", false}, level_case{"a/b/c", false},
                      level_case{"Topology.example.com/rack", false},
                      level_case{"topology.gpustack.ai/-rack", false},
                      level_case{"topology gpustack", false}));

TEST(T2, NonStringLevelIsAnErrorNotACrash) {
  const auto r =
      validate_both(node_labels_source("[topology.gpustack.ai/zone, {a: b}, [x], 12, ~]"));
  EXPECT_TRUE(has_error(r.errors, "T2", error_type::invalid, "spec.levels[1]")) << dump(r);
  EXPECT_TRUE(has_error(r.errors, "T2", error_type::invalid, "spec.levels[2]")) << dump(r);
  EXPECT_TRUE(has_error(r.errors, "T2", error_type::invalid, "spec.levels[3]")) << dump(r);
  EXPECT_TRUE(has_error(r.errors, "T2", error_type::invalid, "spec.levels[4]")) << dump(r);
}

TEST(T3, HostnameIsForbidden) {
  const auto r =
      validate_both(node_labels_source("[topology.kubernetes.io/zone, kubernetes.io/hostname]"));
  EXPECT_TRUE(has_error(r.errors, "T3", error_type::forbidden, "spec.levels[1]")) << dump(r);
  EXPECT_EQ(rules_of(r.errors), std::set<std::string>{"T3"});
  // Look-alikes are ordinary keys.
  EXPECT_TRUE(validate_both(node_labels_source("[example.com/hostname]")).ok());
}

TEST(T4, DuplicateLevelReportedAtItsSecondIndex) {
  const auto r = validate_both(node_labels_source(
      "[topology.kubernetes.io/region, topology.kubernetes.io/zone, topology.kubernetes.io/zone]"));
  EXPECT_TRUE(has_error(r.errors, "T4", error_type::duplicate, "spec.levels[2]")) << dump(r);
  EXPECT_EQ(r.errors.size(), 1u);
  const auto three = validate_both(node_labels_source("[a/b, c/d, a/b, a/b]"));
  EXPECT_TRUE(has_error(three.errors, "T4", error_type::duplicate, "spec.levels[2]"));
  EXPECT_TRUE(has_error(three.errors, "T4", error_type::duplicate, "spec.levels[3]"));
  EXPECT_EQ(three.errors.size(), 2u);
  // Keys are case-sensitive: these are two levels.
  EXPECT_TRUE(validate_both(node_labels_source("[a/Rack, a/rack]")).ok());
}

TEST(T4, ErrorRendersLikeKubernetes) {
  const auto r = validate_both(node_labels_source(
      "[topology.kubernetes.io/region, topology.kubernetes.io/zone, topology.kubernetes.io/zone]"));
  EXPECT_EQ(render_text(r.errors),
            "[T4] spec.levels[2]: Duplicate value: \"topology.kubernetes.io/zone\"\n");
}

// ---------------------------------------------------------------------------------------
// T5: exactly one source

TEST(T5, ExactlyOneSource) {
  // The consumer reports none and several alike: one Invalid at spec.
  const auto none = validate_both(with_spec("  levels: [a/b]\n"));
  EXPECT_TRUE(has_error(none.errors, "T5", error_type::invalid, "spec")) << dump(none);
  EXPECT_EQ(rules_of(none.errors), std::set<std::string>{"T5"});
  EXPECT_EQ(none.errors.size(), 1u) << dump(none);

  webhook_fields f;
  f.extra = "  nodeLabels: {}\n";
  const auto two = validate_both(webhook_source_text(f));
  EXPECT_TRUE(has_error(two.errors, "T5", error_type::invalid, "spec")) << dump(two);
  EXPECT_EQ(rules_of(two.errors), std::set<std::string>{"T5"});
  EXPECT_EQ(two.errors.size(), 1u) << dump(two);

  f.extra =
      "  nodeLabels: {}\n  configMap: {configMapRef: {namespace: gpustack-system, name: c}, key: "
      "k, maxStaleness: 1m}\n";
  const auto three = validate_both(webhook_source_text(f));
  EXPECT_TRUE(has_error(three.errors, "T5", error_type::invalid, "spec")) << dump(three);
  EXPECT_EQ(three.errors.size(), 1u) << dump(three);

  // One source alone passes.
  EXPECT_TRUE(validate_both(with_spec("  levels: [a/b]\n  nodeLabels: {}\n")).ok());

  // null counts as unset, as a nil pointer in Go.
  const auto null_extra =
      validate_both(with_spec("  levels: [a/b]\n  nodeLabels: {}\n  webhook: ~\n"));
  EXPECT_TRUE(null_extra.ok()) << dump(null_extra);
  const auto wrong_type = validate_both(with_spec("  levels: [a/b]\n  nodeLabels: true\n"));
  EXPECT_TRUE(has_error(wrong_type.errors, "T5", error_type::invalid, "spec.nodeLabels"))
      << dump(wrong_type);
}

// ---------------------------------------------------------------------------------------
// T6, T7: additionalWritePrefix

struct prefix_case {
  std::string prefix;
  bool valid;
  // The consumer's type: Invalid for the shape, Forbidden for a reserved domain.
  error_type type = error_type::invalid;
};

class T6 : public ::testing::TestWithParam<prefix_case> {};

TEST_P(T6, WritePrefix) {
  const auto& c = GetParam();
  webhook_fields f;
  f.extra = "  additionalWritePrefix: \"" + c.prefix + "\"\n";
  const auto r = validate_both(webhook_source_text(f));
  if (c.valid) {
    EXPECT_TRUE(r.ok()) << c.prefix << "\n" << dump(r);
  } else {
    EXPECT_TRUE(has_error(r.errors, "T6", c.type, "spec.additionalWritePrefix")) << c.prefix << "\n"
                                                                                 << dump(r);
    EXPECT_EQ(rules_of(r.errors), std::set<std::string>{"T6"}) << dump(r);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Table, T6,
    ::testing::Values(
        prefix_case{"topology.example.com/", true}, prefix_case{"example.com/", true},
        prefix_case{"dc1/", true}, prefix_case{"notkubernetes.io/", true},
        prefix_case{"kubernetes.io.example.com/", true}, prefix_case{"k8s.io.example.com/", true},
        prefix_case{"xk8s.io/", true}, prefix_case{"gpustack.ai/", true},
        prefix_case{"feature.gpustack.ai.example/", true},
        prefix_case{"topograph.run/",
                    true},  // only the listed subdomains of topograph.run are reserved
        prefix_case{std::string(63, 'a') + "." + std::string(63, 'b') + "." + std::string(63, 'c') +
                        "." + std::string(61, 'd') + "/",
                    true},
        prefix_case{std::string(63, 'a') + "." + std::string(63, 'b') + "." + std::string(63, 'c') +
                        "." + std::string(62, 'd') + "/",
                    false},
        prefix_case{"topology.example.com", false}, prefix_case{"topology.example.com//", false},
        prefix_case{"a/b/", false}, prefix_case{"/", false},
        // "" is unset, as the consumer reads it.
        prefix_case{"", true}, prefix_case{"Topology.Example.com/", false},
        prefix_case{"-example.com/", false}, prefix_case{"example..com/", false},
        prefix_case{"kubernetes.io/", false, error_type::forbidden},
        prefix_case{"sub.kubernetes.io/", false, error_type::forbidden},
        prefix_case{"node.kubernetes.io/", false, error_type::forbidden},
        prefix_case{"private.kubernetes.io/", false, error_type::forbidden},
        prefix_case{"k8s.io/", false, error_type::forbidden},
        prefix_case{"a.b.k8s.io/", false, error_type::forbidden},
        prefix_case{"topology.gpustack.ai/", false, error_type::forbidden},
        prefix_case{"x.topology.gpustack.ai/", false, error_type::forbidden},
        prefix_case{"feature.gpustack.ai/", false, error_type::forbidden},
        prefix_case{"x.feature.gpustack.ai/", false, error_type::forbidden},
        prefix_case{"fabric.topograph.run/", false, error_type::forbidden},
        prefix_case{"x.fabric.topograph.run/", false, error_type::forbidden},
        prefix_case{"accelerator.topograph.run/", false, error_type::forbidden},
        prefix_case{"x.accelerator.topograph.run/", false, error_type::forbidden}));

TEST(T6, ReservedListIsConfigurable) {
  webhook_fields f;
  f.extra = "  additionalWritePrefix: inventory.corp.example/\n";
  validation_options opts;
  EXPECT_TRUE(validate_both(webhook_source_text(f), opts).ok());
  opts.reserved_prefixes.push_back("corp.example/");  // a trailing slash in the list is tolerated
  const auto r = validate_both(webhook_source_text(f), opts);
  EXPECT_TRUE(has_error(r.errors, "T6", error_type::forbidden, "spec.additionalWritePrefix"))
      << dump(r);
}

TEST(T6, NonStringPrefix) {
  webhook_fields f;
  f.extra = "  additionalWritePrefix: [a/]\n";
  const auto r = validate_both(webhook_source_text(f));
  EXPECT_TRUE(has_error(r.errors, "T6", error_type::invalid, "spec.additionalWritePrefix"))
      << dump(r);
}

TEST(T7, WritePrefixWithNodeLabelsForbidden) {
  const auto r = validate_both(node_labels_source(
      "[topology.kubernetes.io/zone]", "  additionalWritePrefix: topology.example.com/\n"));
  EXPECT_TRUE(has_error(r.errors, "T7", error_type::forbidden, "spec.additionalWritePrefix"))
      << dump(r);
  EXPECT_EQ(rules_of(r.errors), std::set<std::string>{"T7"});
}

// "" is unset to the consumer: no T6, and no T7 on a read-only source.
TEST(T7, EmptyWritePrefixIsUnset) {
  const auto node_labels = validate_both(
      node_labels_source("[topology.kubernetes.io/zone]", "  additionalWritePrefix: \"\"\n"));
  EXPECT_TRUE(node_labels.ok()) << dump(node_labels);
  webhook_fields f;
  f.extra = "  additionalWritePrefix: \"\"\n";
  const auto webhook = validate_both(webhook_source_text(f));
  EXPECT_TRUE(webhook.ok()) << dump(webhook);
  EXPECT_FALSE(webhook.source.additional_write_prefix.has_value());
}

// ---------------------------------------------------------------------------------------
// T8: configMap

TEST(T8, KeyMustBeNonBlank) {
  EXPECT_TRUE(
      validate_both(config_map_source("    key: snapshot.yaml\n", "    maxStaleness: 10m\n")).ok());
  for (std::string_view line : {"", "    key: \"\"\n", "    key: \"  \"\n",
                                "    key: \"\\u00a0\\u2003\"\n", "    key: ~\n"}) {
    const auto r = validate_both(config_map_source(line, "    maxStaleness: 10m\n"));
    EXPECT_TRUE(has_error(r.errors, "T8", error_type::required, "spec.configMap.key"))
        << line << dump(r);
    EXPECT_EQ(rules_of(r.errors), std::set<std::string>{"T8"}) << dump(r);
  }
  const auto number = validate_both(config_map_source("    key: 12\n", "    maxStaleness: 10m\n"));
  EXPECT_TRUE(has_error(number.errors, "T8", error_type::invalid, "spec.configMap.key"))
      << dump(number);
}

TEST(T8, KeyThatNoConfigMapCanHoldWarns) {
  const auto r =
      validate_both(config_map_source("    key: snap shot.yaml\n", "    maxStaleness: 10m\n"));
  EXPECT_TRUE(r.ok()) << dump(r);
  EXPECT_EQ(r.warnings.size(), 1u);
}

struct duration_field_case {
  std::string line;  // YAML value as written
  bool valid;
  error_type type = error_type::invalid;
};

class T8Staleness : public ::testing::TestWithParam<duration_field_case> {};

TEST_P(T8Staleness, PositiveDuration) {
  const auto& c = GetParam();
  const std::string line = c.line.empty() ? "" : "    maxStaleness: " + c.line + "\n";
  const auto r = validate_both(config_map_source("    key: k\n", line));
  if (c.valid) {
    EXPECT_TRUE(r.ok()) << c.line << dump(r);
  } else {
    EXPECT_TRUE(has_error(r.errors, "T8", c.type, "spec.configMap.maxStaleness"))
        << c.line << dump(r);
    EXPECT_EQ(rules_of(r.errors), std::set<std::string>{"T8"});
  }
}

INSTANTIATE_TEST_SUITE_P(
    Table, T8Staleness,
    ::testing::Values(duration_field_case{"10m", true}, duration_field_case{"1ns", true},
                      duration_field_case{"\"1h2m3.5s\"", true},
                      // Unset is the zero duration to the consumer: Invalid.
                      duration_field_case{"", false}, duration_field_case{"~", false},
                      duration_field_case{"\"0\"", false}, duration_field_case{"0s", false},
                      duration_field_case{"-1m", false}, duration_field_case{"\"10\"", false},
                      duration_field_case{"10", false},  // a number is not a duration
                      duration_field_case{"0", false}, duration_field_case{"1d", false},
                      duration_field_case{"2562048h", false}, duration_field_case{"[1m]", false}));

TEST(T13, ConfigMapRefRequired) {
  // The consumer holds configMapRef by value: unset is an empty namespace (Forbidden) and an
  // empty name (Invalid).
  const auto r = validate_both(config_map_source("    key: k\n", "    maxStaleness: 1m\n", ""));
  EXPECT_TRUE(
      has_error(r.errors, "T13", error_type::forbidden, "spec.configMap.configMapRef.namespace"))
      << dump(r);
  EXPECT_TRUE(has_error(r.errors, "T13", error_type::invalid, "spec.configMap.configMapRef.name"))
      << dump(r);
  EXPECT_EQ(r.errors.size(), 2u) << dump(r);
}

}  // namespace
}  // namespace topogate::core

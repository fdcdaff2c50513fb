// TopologySource rules T1-T14 and warnings: rule, type and path of every error.
#include "core/topology_source.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "core/document.hpp"
#include "core/syntax.hpp"
#include "core/topology_source_internal.hpp"

namespace topogate::core {
namespace {

// Every text goes through both entry points: validate_topology_source (the source kept, as
// the reconcile loop and the CLI use it) and check_topology_source (the webhook's: nothing
// kept, the selector and the "no level can be written" warning worked out without the
// source); they must report the same errors, in the same order, and the same warnings.
source_result validate_both(std::string_view text, const validation_options& opts = {}) {
  source_result r = validate_topology_source_text(text, opts);
  const decode_result decoded = decode_any(text, "");
  if (decoded.ok()) {
    error_list errors;
    std::vector<std::string> warnings;
    check_topology_source(decoded.root, opts, errors, warnings);
    EXPECT_EQ(render_text(errors), render_text(r.errors)) << text;
    EXPECT_EQ(errors.size(), r.errors.size()) << text;
    EXPECT_EQ(warnings, r.warnings) << text;
  }
  return r;
}

std::set<std::string> rules_of(const error_list& errors) {
  std::set<std::string> out;
  for (const auto& e : errors) out.insert(e.rule);
  return out;
}

bool has_error(const error_list& errors, std::string_view rule, error_type type,
               std::string_view path) {
  return std::any_of(errors.begin(), errors.end(), [&](const field_error& e) {
    return e.rule == rule && e.type == type && e.path == path;
  });
}

std::string dump(const source_result& r) {
  std::string out = render_text(r.errors);
  for (const auto& w : r.warnings) out += "warning: " + w + "\n";
  return out;
}

// A writing source with valid defaults; `spec_extra` lines are appended to spec and may
// override nothing (callers build the variants they need with the helpers below).
std::string with_spec(std::string_view spec_body) {
  return "apiVersion: worker.gpustack.ai/v1\n"
         "kind: TopologySource\n"
         "metadata:\n"
         "  name: test\n"
         "spec:\n" +
         std::string(spec_body);
}

std::string node_labels_source(std::string_view levels_yaml, std::string_view extra = "") {
  return with_spec("  levels: " + std::string(levels_yaml) + "\n  nodeLabels: {}\n" +
                   std::string(extra));
}

struct webhook_fields {
  std::string url = "https://topology-inventory.gpustack-system.svc/snapshot";
  std::string poll = "1m";
  std::string timeout = "10s";
  std::string stale = "5m";
  std::string auth =
      "    bearerTokenSecretRef: {namespace: gpustack-system, name: topology-inventory-token}\n";
  std::string levels = "[topology.gpustack.ai/rack]";
  std::string extra;
};

std::string webhook_source_text(const webhook_fields& f) {
  return with_spec("  levels: " + f.levels + "\n  webhook:\n    url: \"" + f.url +
                   "\"\n    pollInterval: \"" + f.poll + "\"\n    timeout: \"" + f.timeout +
                   "\"\n    maxStaleness: \"" + f.stale + "\"\n" + f.auth + f.extra);
}

std::string levels_list(std::size_t n) {
  std::string out = "[";
  for (std::size_t i = 0; i < n; ++i) {
    if (i) out += ", ";
    out += "topology.gpustack.ai/l" + std::to_string(i);
  }
  return out + "]";
}

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
  const auto none = validate_both(with_spec("  levels: [a/b]\n"));
  EXPECT_TRUE(has_error(none.errors, "T5", error_type::required, "spec")) << dump(none);
  EXPECT_EQ(rules_of(none.errors), std::set<std::string>{"T5"});

  webhook_fields f;
  f.extra = "  nodeLabels: {}\n";
  const auto two = validate_both(webhook_source_text(f));
  EXPECT_TRUE(has_error(two.errors, "T5", error_type::forbidden, "spec.webhook")) << dump(two);
  EXPECT_EQ(rules_of(two.errors), std::set<std::string>{"T5"});

  f.extra =
      "  nodeLabels: {}\n  configMap: {configMapRef: {namespace: gpustack-system, name: c}, key: "
      "k, maxStaleness: 1m}\n";
  const auto three = validate_both(webhook_source_text(f));
  EXPECT_TRUE(has_error(three.errors, "T5", error_type::forbidden, "spec.configMap"))
      << dump(three);
  EXPECT_TRUE(has_error(three.errors, "T5", error_type::forbidden, "spec.webhook")) << dump(three);

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
    EXPECT_TRUE(has_error(r.errors, "T6", error_type::invalid, "spec.additionalWritePrefix"))
        << c.prefix << "\n"
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
        prefix_case{"a/b/", false}, prefix_case{"/", false}, prefix_case{"", false},
        prefix_case{"Topology.Example.com/", false}, prefix_case{"-example.com/", false},
        prefix_case{"example..com/", false}, prefix_case{"kubernetes.io/", false},
        prefix_case{"sub.kubernetes.io/", false}, prefix_case{"node.kubernetes.io/", false},
        prefix_case{"k8s.io/", false}, prefix_case{"a.b.k8s.io/", false},
        prefix_case{"topology.gpustack.ai/", false}, prefix_case{"x.topology.gpustack.ai/", false},
        prefix_case{"feature.gpustack.ai/", false}, prefix_case{"x.feature.gpustack.ai/", false},
        prefix_case{"fabric.topograph.run/", false}, prefix_case{"x.fabric.topograph.run/", false},
        prefix_case{"accelerator.topograph.run/", false},
        prefix_case{"x.accelerator.topograph.run/", false}));

TEST(T6, ReservedListIsConfigurable) {
  webhook_fields f;
  f.extra = "  additionalWritePrefix: inventory.corp.example/\n";
  validation_options opts;
  EXPECT_TRUE(validate_both(webhook_source_text(f), opts).ok());
  opts.reserved_prefixes.push_back("corp.example/");  // a trailing slash in the list is tolerated
  const auto r = validate_both(webhook_source_text(f), opts);
  EXPECT_TRUE(has_error(r.errors, "T6", error_type::invalid, "spec.additionalWritePrefix"))
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

// ---------------------------------------------------------------------------------------
// T8: configMap

std::string config_map_source(
    std::string_view key_line, std::string_view stale_line,
    std::string_view ref = "    configMapRef: {namespace: gpustack-system, name: inv}\n") {
  return with_spec("  levels: [topology.gpustack.ai/rack]\n  configMap:\n" + std::string(ref) +
                   std::string(key_line) + std::string(stale_line));
}

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
                      duration_field_case{"", false, error_type::required},
                      duration_field_case{"~", false, error_type::required},
                      duration_field_case{"\"0\"", false}, duration_field_case{"0s", false},
                      duration_field_case{"-1m", false}, duration_field_case{"\"10\"", false},
                      duration_field_case{"10", false},  // a number is not a duration
                      duration_field_case{"0", false}, duration_field_case{"1d", false},
                      duration_field_case{"2562048h", false}, duration_field_case{"[1m]", false}));

TEST(T13, ConfigMapRefRequired) {
  const auto r = validate_both(config_map_source("    key: k\n", "    maxStaleness: 1m\n", ""));
  EXPECT_TRUE(has_error(r.errors, "T13", error_type::required, "spec.configMap.configMapRef"))
      << dump(r);
}

// ---------------------------------------------------------------------------------------
// T9: webhook URL

struct url_case {
  std::string url;
  bool valid;
};

class T9 : public ::testing::TestWithParam<url_case> {};

TEST_P(T9, AbsoluteHttpsUrl) {
  const auto& c = GetParam();
  webhook_fields f;
  f.url = c.url;
  const auto r = validate_both(webhook_source_text(f));
  if (c.valid) {
    EXPECT_TRUE(r.ok()) << c.url << "\n" << dump(r);
  } else {
    EXPECT_TRUE(has_error(r.errors, "T9", error_type::invalid, "spec.webhook.url") ||
                has_error(r.errors, "T9", error_type::required, "spec.webhook.url"))
        << c.url << "\n"
        << dump(r);
    EXPECT_EQ(rules_of(r.errors), std::set<std::string>{"T9"}) << dump(r);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Table, T9,
    ::testing::Values(url_case{"https://inventory.example.com/snapshot", true},
                      url_case{"HTTPS://x", true}, url_case{"HtTpS://x/", true},
                      url_case{"https://x#", true}, url_case{"https://x:8443/a?b=c", true},
                      url_case{"https://[::1]:8443/", true}, url_case{"https://10.0.0.1/", true},
                      url_case{"https://@x", false}, url_case{"https://user@x/", false},
                      url_case{"https://user:pw@x/", false}, url_case{"https://x#f", false},
                      url_case{"https://:443/x", false}, url_case{"http://x/", false},
                      url_case{"http://", false}, url_case{"https://", false},
                      url_case{"https:///x", false}, url_case{"https:x", false},
                      url_case{"/snapshot", false}, url_case{"x.example.com/snapshot", false},
                      url_case{"", false}, url_case{"https://x y/", false},
                      url_case{"https://x%zz/", false}, url_case{"https://x\\t/", false},
                      url_case{"https://[::1/", false}, url_case{"ftp://x/", false},
                      url_case{"https://x:port/", false}));

TEST(T9, UserInfoIsNeverEchoed) {
  webhook_fields f;
  f.url = "https://admin:hunter2@x/?token=s3cr3t&a=1";
  const auto r = validate_both(webhook_source_text(f));
  ASSERT_FALSE(r.ok());
  const std::string all = render_text(r.errors) + render_json(r.errors);
  EXPECT_EQ(all.find("hunter2"), std::string::npos) << all;
  EXPECT_EQ(all.find("s3cr3t"), std::string::npos) << all;
  for (const auto& w : r.warnings) EXPECT_EQ(w.find("s3cr3t"), std::string::npos);
}

TEST(T9, CredentialsRedactedEvenWhenTheUrlDoesNotParse) {
  for (const std::string url :
       {"https://admin:hunter2@x y/", "http://admin:hunter2@[::1/?password=hunter2",
        "https://admin:hunter2@x/%zz", "https://x/?sig=hunter2#frag"}) {
    webhook_fields f;
    f.url = url;
    const auto r = validate_both(webhook_source_text(f));
    ASSERT_FALSE(r.ok()) << url;
    EXPECT_TRUE(has_error(r.errors, "T9", error_type::invalid, "spec.webhook.url")) << url;
    const std::string all = render_text(r.errors) + render_json(r.errors);
    EXPECT_EQ(all.find("hunter2"), std::string::npos) << all;
    for (const auto& w : r.warnings) EXPECT_EQ(w.find("hunter2"), std::string::npos) << w;
  }
}

TEST(Json, SameVerdictAsYaml) {
  const auto yaml = validate_both(node_labels_source("[a/b, a/b, kubernetes.io/hostname]"));
  const auto json = validate_both(
      R"({"apiVersion":"worker.gpustack.ai/v1","kind":"TopologySource","metadata":{"name":"test"},)"
      R"("spec":{"levels":["a/b","a/b","kubernetes.io/hostname"],"nodeLabels":{}}})");
  ASSERT_EQ(yaml.errors.size(), json.errors.size()) << dump(yaml) << dump(json);
  for (std::size_t i = 0; i < yaml.errors.size(); ++i) {
    EXPECT_EQ(yaml.errors[i].rule, json.errors[i].rule);
    EXPECT_EQ(yaml.errors[i].path, json.errors[i].path);
    EXPECT_EQ(yaml.errors[i].type, json.errors[i].type);
  }
  const auto levels_number = validate_both(
      R"({"apiVersion":"worker.gpustack.ai/v1","kind":"TopologySource","metadata":{"name":"test"},)"
      R"("spec":{"levels":["a/b",42],"nodeLabels":{}}})");
  EXPECT_TRUE(has_error(levels_number.errors, "T2", error_type::invalid, "spec.levels[1]"))
      << dump(levels_number);
}

TEST(T9, MissingOrNonStringUrl) {
  webhook_fields f;
  const auto text = webhook_source_text(f);
  const auto missing = validate_both(
      with_spec("  levels: [topology.gpustack.ai/rack]\n  webhook:\n    pollInterval: 1m\n    "
                "timeout: 10s\n    maxStaleness: 5m\n" +
                f.auth));
  EXPECT_TRUE(has_error(missing.errors, "T9", error_type::required, "spec.webhook.url"))
      << dump(missing);
  const auto number =
      validate_both(with_spec("  levels: [topology.gpustack.ai/rack]\n  webhook:\n "
                              "   url: 42\n    pollInterval: 1m\n    timeout: 10s\n"
                              "    maxStaleness: 5m\n" +
                              f.auth));
  EXPECT_TRUE(has_error(number.errors, "T9", error_type::invalid, "spec.webhook.url"))
      << dump(number);
}

// T9 skips parse_url for the URLs its fast path calls plain. Every URL it calls plain must be
// one the full parse accepts as https with a host and no user information, fragment or query
// (all that T9 checks; T9 itself returns before its checks for such a URL, so it is the
// parse that is compared, not T9's verdict); the generated URLs mix clean
// pieces with the characters that change what Go's url.Parse makes of a URL (user
// information, a port, a query, a fragment, escapes, brackets, white space, control and
// non-ASCII bytes) and start with near misses of "https://".
TEST(T9, FastPathPassesOnlyUrlsTheFullParseFindsClean) {
  std::mt19937 rng(20261201);
  const auto pick = [&](std::string_view from) { return from[rng() % from.size()]; };
  const auto chance = [&](unsigned percent) { return rng() % 100 < percent; };
  const std::string alnum = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  const std::string special = ".-_~/:@?#%[]!$&'()*+,;= \t\x80\xc3\xa9\xe2\xff";
  const std::string host_chars = alnum + ".-";
  const std::string path_chars = alnum + "/-._~";
  // Each URL's pieces draw from their clean characters, and with a chance of `noise` percent
  // per character (none, a little or much, per URL) from anything, half of the time a
  // special character.
  unsigned noise = 0;
  const auto piece = [&](std::string_view clean, std::size_t max_length) {
    std::string out;
    for (std::size_t n = rng() % (max_length + 1); n > 0; --n) {
      out.push_back(!chance(noise) ? pick(clean) : chance(50) ? pick(special) : pick(alnum));
    }
    return out;
  };
  const std::vector<std::string_view> prefixes = {
      "https://",  "https://",  "https://",   "https://",  "https://", "https://", "https://",
      "https://",  "HTTPS://",  "Https://",   "http://",   "https:",   "https:/",  "//",
      "https:///", "https://@", "https://u@", "https://[", "ftp://",   "",         "https//"};
  const auto https = [](std::string_view scheme) {
    std::string lower(scheme);
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return lower == "https";
  };

  std::size_t plain = 0, not_plain = 0, with_port = 0, with_path = 0, port_or_path = 0;
  for (int i = 0; i < 200000; ++i) {
    std::string url(prefixes[rng() % prefixes.size()]);
    noise = std::array{0u, 3u, 12u}[rng() % 3];
    if (chance(5)) {
      url += piece(special, 30);
    } else {
      url += piece(host_chars, 12);
      if (chance(30)) url += ":" + piece("0123456789", 6);
      if (chance(60)) url += "/" + piece(path_chars, 20);
      if (chance(5)) url += piece(special, 4);
    }
    if (!detail::plain_https_url(url)) {
      ++not_plain;
      continue;
    }
    ++plain;
    const auto parsed = parse_url(url);
    ASSERT_TRUE(parsed.ok()) << url << ": " << parsed.error().message;
    ASSERT_TRUE(https(parsed->scheme)) << url;
    ASSERT_NE(parsed->host, "") << url;
    ASSERT_FALSE(parsed->has_user_info) << url;
    ASSERT_EQ(parsed->fragment, "") << url;
    ASSERT_EQ(parsed->raw_query, "") << url;
    with_port += !parsed->port.empty();
    with_path += !parsed->path.empty();
    port_or_path += !parsed->port.empty() || !parsed->path.empty();
  }
  // Both answers are common, and the plain URLs are not mostly bare hosts (the seed gives
  // 48110 plain, 11903 with a port, 27116 with a path, 32243 with either; 151890 not plain).
  const std::string counts = std::to_string(plain) + " plain (" + std::to_string(with_port) +
                             " with a port, " + std::to_string(with_path) + " with a path), " +
                             std::to_string(not_plain) + " not plain";
  EXPECT_GT(plain, 30000u) << counts;
  EXPECT_GT(not_plain, 100000u) << counts;
  EXPECT_GT(with_port, 8000u) << counts;
  EXPECT_GT(with_path, 18000u) << counts;
  EXPECT_GT(port_or_path * 2, plain) << counts;
}

// ---------------------------------------------------------------------------------------
// T10, T11: webhook durations

TEST(T10, EachDurationRequiredAndPositive) {
  for (const std::string field : {"pollInterval", "timeout", "maxStaleness"}) {
    for (const std::string bad : {"0s", "0", "-10s", "10", "1d", ""}) {
      webhook_fields f;
      std::string* target = field == "pollInterval" ? &f.poll
                            : field == "timeout"    ? &f.timeout
                                                    : &f.stale;
      *target = bad;
      if (field == "pollInterval") f.timeout = "1ns";  // keep T11 out of the way
      const auto r = validate_both(webhook_source_text(f));
      EXPECT_TRUE(has_error(r.errors, "T10", error_type::invalid, "spec.webhook." + field) ||
                  has_error(r.errors, "T10", error_type::required, "spec.webhook." + field))
          << field << "=" << bad << "\n"
          << dump(r);
      EXPECT_EQ(rules_of(r.errors), std::set<std::string>{"T10"}) << field << "=" << bad << "\n"
                                                                  << dump(r);
    }
  }
  const auto missing = validate_both(
      with_spec("  levels: [topology.gpustack.ai/rack]\n  webhook:\n    url: https://x/\n"
                "    bearerTokenSecretRef: {namespace: gpustack-system, name: t}\n"));
  EXPECT_TRUE(has_error(missing.errors, "T10", error_type::required, "spec.webhook.pollInterval"));
  EXPECT_TRUE(has_error(missing.errors, "T10", error_type::required, "spec.webhook.timeout"));
  EXPECT_TRUE(has_error(missing.errors, "T10", error_type::required, "spec.webhook.maxStaleness"));
}

TEST(T10, JsonNumberIsNotADuration) {
  const std::string json =
      R"({"apiVersion":"worker.gpustack.ai/v1","kind":"TopologySource","metadata":{"name":"j"},
  "spec":{"levels":["topology.gpustack.ai/rack"],"webhook":{"url":"https://x/","pollInterval":60,"timeout":"10s",
  "maxStaleness":"5m","bearerTokenSecretRef":{"namespace":"gpustack-system","name":"t"}}}})";
  const auto r = validate_both(json);
  EXPECT_TRUE(has_error(r.errors, "T10", error_type::invalid, "spec.webhook.pollInterval"))
      << dump(r);
  EXPECT_EQ(r.errors.size(), 1u) << dump(r);
}

struct order_case {
  std::string poll, timeout;
  bool valid;
};

class T11 : public ::testing::TestWithParam<order_case> {};

TEST_P(T11, TimeoutNotAbovePollInterval) {
  const auto& c = GetParam();
  webhook_fields f;
  f.poll = c.poll;
  f.timeout = c.timeout;
  f.stale = "1h";
  const auto r = validate_both(webhook_source_text(f));
  if (c.valid) {
    EXPECT_TRUE(r.ok()) << c.poll << " " << c.timeout << dump(r);
  } else {
    EXPECT_TRUE(has_error(r.errors, "T11", error_type::invalid, "spec.webhook.timeout")) << dump(r);
    EXPECT_EQ(rules_of(r.errors), std::set<std::string>{"T11"});
  }
}

INSTANTIATE_TEST_SUITE_P(
    Table, T11,
    ::testing::Values(order_case{"1m", "1m", true}, order_case{"1m", "60s", true},
                      order_case{"1m", "60000000000ns", true},
                      order_case{"1m", "60000000001ns", false},
                      order_case{"1m", "1m0.000000001s", false},
                      order_case{"1m", "59.999999999s", true}, order_case{"30s", "1m", false},
                      order_case{"1h", "59m", true}, order_case{"1.5h", "90m", true},
                      order_case{"10s", "10001ms", false}));

TEST(Warnings, MaxStalenessShorterThanPollInterval) {
  webhook_fields f;
  f.poll = "1m";
  f.timeout = "10s";
  f.stale = "30s";
  const auto r = validate_both(webhook_source_text(f));
  EXPECT_TRUE(r.ok()) << dump(r);
  ASSERT_EQ(r.warnings.size(), 1u);
  f.stale = "1m";  // equal is fine
  EXPECT_TRUE(validate_both(webhook_source_text(f)).warnings.empty());
}

// ---------------------------------------------------------------------------------------
// T12, T13: credentials and references

TEST(T12, ExactlyOneAuthentication) {
  webhook_fields f;
  f.auth = "";
  const auto neither = validate_both(webhook_source_text(f));
  EXPECT_TRUE(has_error(neither.errors, "T12", error_type::required, "spec.webhook"))
      << dump(neither);
  EXPECT_EQ(rules_of(neither.errors), std::set<std::string>{"T12"});

  f.auth =
      "    bearerTokenSecretRef: {namespace: gpustack-system, name: a}\n"
      "    tlsClientCertificateSecretRef: {namespace: gpustack-system, name: b}\n";
  const auto both = validate_both(webhook_source_text(f));
  EXPECT_TRUE(has_error(both.errors, "T12", error_type::forbidden,
                        "spec.webhook.tlsClientCertificateSecretRef"))
      << dump(both);
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

  f.auth = "    tlsClientCertificateSecretRef: {name: t}\n";
  f.extra = "";
  const auto missing_ns = validate_both(webhook_source_text(f));
  EXPECT_TRUE(has_error(missing_ns.errors, "T13", error_type::required,
                        "spec.webhook.tlsClientCertificateSecretRef.namespace"))
      << dump(missing_ns);

  f.auth = "    bearerTokenSecretRef: {namespace: gpustack-system, name: Bad_Name}\n";
  const auto bad_name = validate_both(webhook_source_text(f));
  EXPECT_TRUE(has_error(bad_name.errors, "T13", error_type::invalid,
                        "spec.webhook.bearerTokenSecretRef.name"))
      << dump(bad_name);

  f.auth = "    bearerTokenSecretRef: {namespace: gpustack-system}\n";
  const auto no_name = validate_both(webhook_source_text(f));
  EXPECT_TRUE(has_error(no_name.errors, "T13", error_type::required,
                        "spec.webhook.bearerTokenSecretRef.name"))
      << dump(no_name);

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
  for (const auto* r : {&in_empty, &exists_values, &unknown_op, &bad_key, &bad_value,
                        &bad_label_key, &not_object}) {
    EXPECT_EQ(rules_of(r->errors), std::set<std::string>{"T14"}) << dump(*r);
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

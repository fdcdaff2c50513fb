#pragma once
// Helpers of the TopologySource tests (topology_source_test.cpp: levels and sources;
// topology_source_webhook_test.cpp: T9-T11; topology_source_refs_test.cpp: credentials,
// references, selectors, warnings, robustness).
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "core/document.hpp"
#include "core/topology_source.hpp"

namespace topogate::core::test {

// Every text goes through both entry points: validate_topology_source (the source kept, as
// the reconcile loop and the CLI use it) and check_topology_source (the webhook's: nothing
// kept, the selector and the "no level can be written" warning worked out without the
// source); they must report the same errors, in the same order, and the same warnings.
inline source_result validate_both(std::string_view text, const validation_options& opts = {}) {
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

inline std::set<std::string> rules_of(const error_list& errors) {
  std::set<std::string> out;
  for (const auto& e : errors) out.insert(e.rule);
  return out;
}

inline bool has_error(const error_list& errors, std::string_view rule, error_type type,
                      std::string_view path) {
  return std::any_of(errors.begin(), errors.end(), [&](const field_error& e) {
    return e.rule == rule && e.type == type && e.path == path;
  });
}

inline std::string dump(const source_result& r) {
  std::string out = render_text(r.errors);
  for (const auto& w : r.warnings) out += "warning: " + w + "\n";
  return out;
}

// A writing source with valid defaults; `spec_extra` lines are appended to spec and may
// override nothing (callers build the variants they need with the helpers below).
inline std::string with_spec(std::string_view spec_body) {
  return "apiVersion: worker.gpustack.ai/v1\n"
         "kind: TopologySource\n"
         "metadata:\n"
         "  name: test\n"
         "spec:\n" +
         std::string(spec_body);
}

inline std::string node_labels_source(std::string_view levels_yaml, std::string_view extra = "") {
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

inline std::string webhook_source_text(const webhook_fields& f) {
  return with_spec("  levels: " + f.levels + "\n  webhook:\n    url: \"" + f.url +
                   "\"\n    pollInterval: \"" + f.poll + "\"\n    timeout: \"" + f.timeout +
                   "\"\n    maxStaleness: \"" + f.stale + "\"\n" + f.auth + f.extra);
}

inline std::string levels_list(std::size_t n) {
  std::string out = "[";
  for (std::size_t i = 0; i < n; ++i) {
    if (i) out += ", ";
    out += "topology.gpustack.ai/l" + std::to_string(i);
  }
  return out + "]";
}

inline std::string config_map_source(
    std::string_view key_line, std::string_view stale_line,
    std::string_view ref = "    configMapRef: {namespace: gpustack-system, name: inv}\n") {
  return with_spec("  levels: [topology.gpustack.ai/rack]\n  configMap:\n" + std::string(ref) +
                   std::string(key_line) + std::string(stale_line));
}

}  // namespace topogate::core::test

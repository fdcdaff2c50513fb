#pragma once
// TopologySource (worker.gpustack.ai/v1alpha1 and /v1): rules T1-T14 and warnings.

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "document.hpp"
#include "field_error.hpp"

namespace topogate::core {

struct selector_requirement {
  std::string key;
  std::string op;  // In, NotIn, Exists, DoesNotExist
  std::vector<std::string> values;
};

struct label_selector {
  std::vector<std::pair<std::string, std::string>> match_labels;
  std::vector<selector_requirement> match_expressions;
  // An empty selector ({}) selects everything; an absent one (nullopt) too, for nodeSelector.
  [[nodiscard]] bool matches(const std::vector<std::pair<std::string, std::string>>& labels) const;
};

struct object_ref {
  std::string namespace_;
  std::string name;
};

struct configmap_source {
  std::optional<object_ref> config_map_ref;
  std::string key;
  std::string max_staleness;  // raw duration text
};

struct webhook_source {
  std::string url;
  std::string poll_interval, timeout, max_staleness;  // raw duration texts
  std::optional<object_ref> ca_bundle_config_map_ref;
  std::optional<object_ref> bearer_token_secret_ref;
  std::optional<object_ref> tls_client_certificate_secret_ref;
};

struct topology_source {
  std::string api_version;
  std::string name;  // metadata.name
  std::vector<std::string> levels;
  std::optional<std::string> additional_write_prefix;
  std::optional<label_selector> node_selector;
  bool node_labels = false;  // spec.nodeLabels present
  std::optional<configmap_source> config_map;
  std::optional<webhook_source> webhook;
};

struct validation_options {
  std::vector<std::string> reserved_prefixes = {
      "kubernetes.io",        "k8s.io",
      "topology.gpustack.ai", "feature.gpustack.ai",
      "fabric.topograph.run", "accelerator.topograph.run"};
  std::string worker_namespace = "gpustack-system";
};

struct source_result {
  topology_source source;
  error_list errors;
  std::vector<std::string> warnings;  // each <= 120 characters, no control characters
  [[nodiscard]] bool ok() const noexcept { return errors.empty(); }
};

// From a decoded object (the whole TopologySource document, with apiVersion/kind/metadata/spec).
source_result validate_topology_source(const doc_node& object, const validation_options& opts = {});
// The same checks without the parsed source: exactly the errors and warnings
// validate_topology_source reports, appended, for a caller that needs only the verdict (the
// admission webhook), which spares copying the source's strings.
void check_topology_source(const doc_node& object, const validation_options& opts,
                           error_list& errors, std::vector<std::string>& warnings);
// From YAML or JSON text (decode errors are reported as errors with an empty rule).
source_result validate_topology_source_text(json_decoder& decoder, std::string_view text,
                                            const validation_options& opts = {});
source_result validate_topology_source_text(std::string_view text,
                                            const validation_options& opts = {});

// Label-selector validation (T14 and reused elsewhere): errors under `path`.
void validate_label_selector(const doc_node& selector, std::string_view path, std::string_view rule,
                             error_list& errors, label_selector* out = nullptr);

// S5: may this source publish `key`? (topology.gpustack.ai/* except /profile, keys under
// additionalWritePrefix, or the read-only parents topology.kubernetes.io/{region,zone}).
[[nodiscard]] bool is_publishable_key(std::string_view key, const topology_source& src) noexcept;
[[nodiscard]] bool is_read_only_parent(std::string_view key) noexcept;

}  // namespace topogate::core

#pragma once
// The error model shared by every check: Kubernetes field errors (apimachinery's
// field.Error) tagged with the stable rule id of SPEC.md.

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace topogate::core {

// The closed set of Kubernetes field-error types, with their exact strings.
enum class error_type {
  required,       // "Required value"
  invalid,        // "Invalid value"
  forbidden,      // "Forbidden"
  duplicate,      // "Duplicate value"
  too_many,       // "Too many"
  not_supported,  // "Not supported"
  too_long,       // "Too long"
  not_found,      // "Not found"
};

std::string_view to_string(error_type t) noexcept;

struct field_error {
  std::string rule;       // "T4", "S9", ...
  std::string path;       // "spec.levels[2]", "nodes[worker-a][topology.gpustack.ai/rack]"
  error_type type = error_type::invalid;
  std::string bad_value;  // rendered only when has_value
  bool has_value = false;
  std::string detail;

  // Kubernetes rendering: `spec.levels[2]: Duplicate value: "topology.kubernetes.io/zone"`.
  [[nodiscard]] std::string to_string() const;
};

using error_list = std::vector<field_error>;

// Builders mirroring apimachinery's field.Required / field.Invalid / ... helpers.
field_error required(std::string rule, std::string path, std::string detail = {});
field_error invalid(std::string rule, std::string path, std::string_view value, std::string detail = {});
field_error forbidden(std::string rule, std::string path, std::string detail = {});
field_error duplicate(std::string rule, std::string path, std::string_view value);
field_error too_many(std::string rule, std::string path, std::size_t actual, std::size_t max);
field_error not_supported(std::string rule, std::string path, std::string_view value,
                          const std::vector<std::string>& supported);
field_error too_long(std::string rule, std::string path, std::size_t actual, std::size_t max);
field_error not_found(std::string rule, std::string path, std::string_view value, std::string detail = {});

// Path builders: child("spec", "levels") -> "spec.levels"; index(p, 2) -> "p[2]"; key(p, k) -> "p[k]".
std::string child(std::string_view parent, std::string_view name);
std::string index(std::string_view parent, std::size_t i);
std::string key(std::string_view parent, std::string_view k);

// Every error on its own line: "[T4] spec.levels[2]: Duplicate value: ...".
std::string render_text(const error_list& errors);
// A JSON array of {"rule","field","type","value"?,"detail"} objects.
std::string render_json(const error_list& errors);
// JSON string literal with YAML-safe escaping (control and non-printable characters
// as \uXXXX), used by every JSON writer in the project.
void append_json_string(std::string& out, std::string_view s);

}  // namespace topogate::core

#pragma once
// The error model shared by every check: Kubernetes field errors (apimachinery's
// field.Error) tagged with the stable rule id of docs/rules.md.

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "core/json_writer.hpp"

namespace topogate::core {

// The closed set of Kubernetes field-error types, with the strings apimachinery's
// field.ErrorType.String() prints for them.
enum class error_type {
  required,       // "Required value"
  invalid,        // "Invalid value"
  forbidden,      // "Forbidden"
  duplicate,      // "Duplicate value"
  too_many,       // "Too many"
  not_supported,  // "Unsupported value"
  too_long,       // "Too long"
  not_found,      // "Not found"
};

std::string_view to_string(error_type t) noexcept;

struct field_error {
  std::string rule;  // "T4", "S9", ...
  std::string path;  // "spec.levels[2]", "nodes[worker-a][topology.gpustack.ai/rack]"
  error_type type = error_type::invalid;
  std::string bad_value;  // rendered only when has_value
  bool has_value = false;
  std::string detail;

  // Kubernetes rendering: `spec.levels[2]: Duplicate value: "topology.kubernetes.io/zone"`.
  [[nodiscard]] std::string to_string() const;
  // The same appended to `out` (a caller rendering many errors reuses one buffer).
  void append_to(std::string& out) const;
  // The text after "<field>: " (apimachinery's ErrorBody()), JSON-escaped as
  // append_json_chars escapes it, appended to `out`: a JSON writer that writes the field
  // apart escapes the pieces as they are, without rendering the error into a copy first.
  void append_json_body_to(std::string& out) const;
};

using error_list = std::vector<field_error>;

// Builders mirroring apimachinery's field.Required / field.Invalid / ... helpers.
field_error required(std::string rule, std::string path, std::string detail = {});
field_error invalid(std::string rule, std::string path, std::string_view value,
                    std::string detail = {});
field_error forbidden(std::string rule, std::string path, std::string detail = {});
field_error duplicate(std::string rule, std::string path, std::string_view value);
field_error too_many(std::string rule, std::string path, std::size_t actual, std::size_t max);
// Detail `supported values: "a", "b"`, none when `supported` is empty (field.NotSupported).
field_error not_supported(std::string rule, std::string path, std::string_view value,
                          const std::vector<std::string>& supported);
field_error too_long(std::string rule, std::string path, std::size_t actual, std::size_t max);
field_error not_found(std::string rule, std::string path, std::string_view value,
                      std::string detail = {});

// Path builders: child("spec", "levels") -> "spec.levels"; index(p, 2) -> "p[2]"; key(p, k) ->
// "p[k]".
std::string child(std::string_view parent, std::string_view name);
std::string index(std::string_view parent, std::size_t i);
std::string key(std::string_view parent, std::string_view k);

// A path built as the validator walks, rendered only when an error names it: a valid
// object (the usual case) records no error and so pays for no path string. Each step
// refers to its parent, which must outlive it (steps are locals of the walk).
// str() renders exactly what child(), index() and key() above build.
class field_path {
 public:
  constexpr explicit field_path(std::string_view root) noexcept : name_(root) {}
  [[nodiscard]] constexpr field_path child(std::string_view name) const noexcept {
    return field_path(this, step::child, name, 0);
  }
  [[nodiscard]] constexpr field_path index(std::size_t i) const noexcept {
    return field_path(this, step::index, {}, i);
  }
  [[nodiscard]] constexpr field_path key(std::string_view k) const noexcept {
    return field_path(this, step::key, k, 0);
  }
  [[nodiscard]] std::string str() const;

 private:
  enum class step : unsigned char { root, child, index, key };
  constexpr field_path(const field_path* parent, step s, std::string_view name,
                       std::size_t i) noexcept
      : parent_(parent), name_(name), index_(i), step_(s) {}
  void append_to(std::string& out) const;

  const field_path* parent_ = nullptr;
  std::string_view name_;
  std::size_t index_ = 0;
  step step_ = step::root;
};

// Every error on its own line: "[T4] spec.levels[2]: Duplicate value: ...".
std::string render_text(const error_list& errors);
// A JSON array of {"rule","field","type","value"?,"detail"} objects.
std::string render_json(const error_list& errors);
}  // namespace topogate::core

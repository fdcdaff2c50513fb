#pragma once
// Kubernetes resource quantities (apimachinery resource.Quantity): "500m", "1Gi", "1e3",
// "0.5", "+1.G". Parsed with ParseQuantity's grammar and rounded the way the scheduler and
// Kueue read them: CPU through MilliValue(), everything else through Value(), both of
// which round up (a non-zero request never becomes zero). Past int64, where Go's
// MilliValue()/Value() wrap around, the amounts saturate at INT64_MAX.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace topogate::diagnose {

struct quantity {
  bool negative = false;
  std::int64_t milli = 0;  // ceil(|q| * 1000), saturated at INT64_MAX
  std::int64_t value = 0;  // ceil(|q|), saturated at INT64_MAX
  [[nodiscard]] std::int64_t signed_milli() const noexcept { return negative ? -milli : milli; }
  [[nodiscard]] std::int64_t signed_value() const noexcept { return negative ? -value : value; }
};

// nullopt where ParseQuantity returns an error (ErrFormatWrong or ErrSuffix).
[[nodiscard]] std::optional<quantity> parse_quantity(std::string_view text) noexcept;

// The unit a resource is counted in: milli-units for "cpu" (the scheduler's MilliValue),
// whole units for memory, storage, pods and extended resources.
[[nodiscard]] bool counted_in_milli(std::string_view resource) noexcept;
// The amount of `q` in the resource's unit (see counted_in_milli).
[[nodiscard]] std::int64_t amount_of(std::string_view resource, const quantity& q) noexcept;
// Renders an amount for people: "3500m" / "4" for CPU, "8Gi" / "1536Mi" / "1000" otherwise.
[[nodiscard]] std::string format_amount(std::string_view resource, std::int64_t amount);

}  // namespace topogate::diagnose

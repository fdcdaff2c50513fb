#pragma once
// ModelDeployment (worker.gpustack.ai) role topology: rules M1-M2.

#include <string_view>

#include "document.hpp"
#include "field_error.hpp"

namespace topogate::core {

struct deployment_result {
  error_list errors;
  std::vector<std::string> warnings;
  [[nodiscard]] bool ok() const noexcept { return errors.empty(); }
};

deployment_result validate_model_deployment(const doc_node& object);
deployment_result validate_model_deployment_text(std::string_view text);

}  // namespace topogate::core

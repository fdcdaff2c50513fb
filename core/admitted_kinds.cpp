#include "core/admitted_kinds.hpp"

#include "core/model_deployment.hpp"

namespace topogate::core {

void check_model_deployment(const doc_node& object, const validation_options& /*opts*/,
                            error_list& errors, std::vector<std::string>& warnings) {
  auto res = validate_model_deployment(object);
  for (auto& e : res.errors) errors.push_back(std::move(e));
  for (auto& w : res.warnings) warnings.push_back(std::move(w));
}

}  // namespace topogate::core

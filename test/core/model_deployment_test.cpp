// ModelDeployment role topology: M1 (a prefixed label key) and M2 (never the hostname).
#include "core/model_deployment.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>

namespace topogate::core {
namespace {

bool has_error(const error_list& errors, std::string_view rule, error_type type,
               std::string_view path) {
  return std::any_of(errors.begin(), errors.end(), [&](const field_error& e) {
    return e.rule == rule && e.type == type && e.path == path;
  });
}

std::string two_roles(std::string_view second_level) {
  return "apiVersion: worker.gpustack.ai/v1\n"
         "kind: ModelDeployment\n"
         "metadata: {name: m, namespace: default}\n"
         "spec:\n"
         "  roles:\n"
         "    - name: prefill\n"
         "      replicas: 1\n"
         "    - name: decode\n"
         "      replicas: 2\n"
         "      size: 4\n"
         "      topology:\n"
         "        requiredLevel: " +
         std::string(second_level) + "\n";
}

TEST(RunbookExample, Valid) {
  const auto r = validate_model_deployment_text(R"(spec:
  roles:
    - name: decode
      replicas: 2
      size: 4
      topology:
        requiredLevel: topology.kubernetes.io/zone
)");
  EXPECT_TRUE(r.ok()) << render_text(r.errors);
}

struct level_case {
  std::string level;
  bool valid;
  std::string rule;
  error_type type = error_type::invalid;
  std::size_t warnings = 0;  // a key the consumer accepts but no Topology can match
};

class RequiredLevel : public ::testing::TestWithParam<level_case> {};

TEST_P(RequiredLevel, IsAPrefixedLabelKey) {
  const auto& c = GetParam();
  const auto r = validate_model_deployment_text(two_roles(c.level));
  if (c.valid) {
    EXPECT_TRUE(r.ok()) << c.level << "\n" << render_text(r.errors);
    EXPECT_EQ(r.warnings.size(), c.warnings) << c.level;
    for (const auto& w : r.warnings) {
      EXPECT_LE(w.size(), 120u) << w;
      EXPECT_NE(w.find("spec.roles[1].topology.requiredLevel"), std::string::npos) << w;
    }
    return;
  }
  EXPECT_TRUE(has_error(r.errors, c.rule, c.type, "spec.roles[1].topology.requiredLevel"))
      << c.level << "\n"
      << render_text(r.errors);
  for (const auto& e : r.errors) EXPECT_EQ(e.rule, c.rule) << e.to_string();
}

INSTANTIATE_TEST_SUITE_P(
    Table, RequiredLevel,
    ::testing::Values(level_case{"topology.kubernetes.io/zone", true, ""},
                      level_case{"topology.kubernetes.io/region", true, ""},
                      level_case{"topology.gpustack.ai/rack", true, ""},
                      level_case{"fabric.topograph.run/tier-1", true, ""},
                      level_case{"topology.example.com/" + std::string(63, 'x'), true, ""},
                      level_case{"topology.example.com/" + std::string(64, 'x'), false, "M1"},
                      // Valid label keys to the consumer, never matched by a Topology: a
                      // warning, not a denial.
                      level_case{"zone", true, "", error_type::invalid, 1},
                      level_case{"region", true, "", error_type::invalid, 1},
                      level_case{"rack", true, "", error_type::invalid, 1},
                      level_case{"us-east-1a", true, "", error_type::invalid, 1},
                      level_case{std::string(63, 'x'), true, "", error_type::invalid, 1},
                      level_case{std::string(64, 'x'), false, "M1"},
                      // "" is unset, as the consumer reads it.
                      level_case{"\"\"", true, ""}, level_case{"/zone", false, "M1"},
                      level_case{"topology.kubernetes.io/", false, "M1"},
                      level_case{"a/b/c", false, "M1"}, level_case{"us east 1a", false, "M1"},
                      level_case{"Topology.kubernetes.io/zone", false, "M1"},
                      level_case{"12", false, "M1"},
                      level_case{"[topology.kubernetes.io/zone]", false, "M1"},
                      level_case{"kubernetes.io/hostname", false, "M2", error_type::forbidden}));

TEST(RequiredLevel, OmittedOrNullIsUnconstrained) {
  EXPECT_TRUE(validate_model_deployment_text(two_roles("~")).ok());
  EXPECT_TRUE(
      validate_model_deployment_text("spec:\n  roles:\n    - name: a\n      topology: {}\n").ok());
  EXPECT_TRUE(validate_model_deployment_text("spec: {}\n").ok());
  EXPECT_TRUE(validate_model_deployment_text("spec:\n  roles: []\n").ok());
}

TEST(RequiredLevel, EveryRoleReported) {
  const auto r = validate_model_deployment_text(R"({"spec":{"roles":[
    {"name":"a","topology":{"requiredLevel":"not a label"}},
    {"name":"b","topology":{"requiredLevel":"topology.kubernetes.io/zone"}},
    {"name":"c","topology":{"requiredLevel":"kubernetes.io/hostname"}},
    {"name":"d","topology":{"requiredLevel":"zone"}}]}})");
  EXPECT_TRUE(
      has_error(r.errors, "M1", error_type::invalid, "spec.roles[0].topology.requiredLevel"));
  ASSERT_EQ(r.warnings.size(), 1u);
  EXPECT_NE(r.warnings[0].find("spec.roles[3]"), std::string::npos) << r.warnings[0];
  EXPECT_TRUE(
      has_error(r.errors, "M2", error_type::forbidden, "spec.roles[2].topology.requiredLevel"));
  EXPECT_EQ(r.errors.size(), 2u) << render_text(r.errors);
}

TEST(Shapes, WrongTypesAreErrorsNotCrashes) {
  EXPECT_TRUE(has_error(validate_model_deployment_text("spec: {roles: {a: b}}\n").errors, "M1",
                        error_type::invalid, "spec.roles"));
  EXPECT_TRUE(has_error(validate_model_deployment_text("spec: {roles: [x]}\n").errors, "M1",
                        error_type::invalid, "spec.roles[0]"));
  EXPECT_TRUE(
      has_error(validate_model_deployment_text("spec: {roles: [{topology: zone}]}\n").errors, "M1",
                error_type::invalid, "spec.roles[0].topology"));
  EXPECT_FALSE(validate_model_deployment_text("spec: [1]\n").ok());
  EXPECT_FALSE(validate_model_deployment_text("[1]\n").ok());
  EXPECT_FALSE(validate_model_deployment_text("kind: TopologySource\nspec: {}\n").ok());
  EXPECT_FALSE(validate_model_deployment_text("apiVersion: apps/v1\nspec: {}\n").ok());
  EXPECT_FALSE(validate_model_deployment_text("spec: {roles: [}\n").ok());  // undecodable
}

}  // namespace
}  // namespace topogate::core

// The consumer's own test tables (test/fixtures/consumer_tables.json): every case gets the
// consumer's verdict, and a refused one the rules the table names.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "core/document.hpp"
#include "core/model_deployment.hpp"
#include "core/topology_source.hpp"

namespace topogate::core {
namespace {

doc_node load_tables() {
  const char* env = std::getenv("TOPOGATE_SOURCE_DIR");
  const std::string root = env && *env ? env : TOPOGATE_SOURCE_DIR;
  std::ifstream in(root + "/test/fixtures/consumer_tables.json", std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  decode_result d = decode_json(text.str());
  EXPECT_TRUE(d.ok()) << render_text(d.errors);
  return std::move(d.root);
}

std::set<std::string> rules_of(const error_list& errors) {
  std::set<std::string> out;
  for (const auto& e : errors) out.insert(e.rule);
  return out;
}

std::set<std::string> wanted_rules(const doc_node& c) {
  std::set<std::string> out;
  if (const doc_node* rules = c.find("rules"); rules && rules->is_sequence())
    for (const auto& r : rules->items) out.insert(r.text);
  return out;
}

TEST(ConsumerTables, TopologySourceVerdicts) {
  const doc_node tables = load_tables();
  const doc_node* cases = tables.find("topologySources");
  ASSERT_NE(cases, nullptr);
  ASSERT_GE(cases->items.size(), 19u);
  for (const auto& c : cases->items) {
    const std::string name = c.find("name")->text;
    doc_node object;
    object.k = doc_node::kind::mapping;
    const auto scalar = [](std::string text) {
      doc_node n;
      n.k = doc_node::kind::scalar;
      n.text = std::move(text);
      return n;
    };
    doc_node meta;
    meta.k = doc_node::kind::mapping;
    meta.map.emplace_back("name", scalar("consumer-case"));
    object.map.emplace_back("apiVersion", scalar("worker.gpustack.ai/v1alpha1"));
    object.map.emplace_back("kind", scalar("TopologySource"));
    object.map.emplace_back("metadata", std::move(meta));
    object.map.emplace_back("spec", *c.find("spec"));
    const source_result r = validate_topology_source(object);
    const bool valid = c.find("valid")->text == "true";
    EXPECT_EQ(r.ok(), valid) << name << "\n" << render_text(r.errors);
    if (!valid) {
      EXPECT_EQ(rules_of(r.errors), wanted_rules(c)) << name << "\n" << render_text(r.errors);
    }
  }
}

TEST(ConsumerTables, RequiredLevelVerdicts) {
  const doc_node tables = load_tables();
  const doc_node* cases = tables.find("requiredLevels");
  ASSERT_NE(cases, nullptr);
  ASSERT_EQ(cases->items.size(), 3u);
  for (const auto& c : cases->items) {
    const std::string level = c.find("level")->text;
    const auto r = validate_model_deployment_text(
        "spec:\n  roles:\n    - name: r\n      topology:\n        requiredLevel: \"" + level +
        "\"\n");
    const bool valid = c.find("valid")->text == "true";
    EXPECT_EQ(r.ok(), valid) << level << "\n" << render_text(r.errors);
    if (!valid) {
      EXPECT_EQ(rules_of(r.errors), wanted_rules(c)) << level << "\n" << render_text(r.errors);
    }
  }
}

}  // namespace
}  // namespace topogate::core

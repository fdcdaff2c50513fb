// The rule table (core/rules.hpp): its order and lookups, and that it is the same list as
// docs/rules.md's tables and as the rules the conformance corpus expects.
#include "core/rules.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace topogate::core {
namespace {

namespace fs = std::filesystem;

fs::path source_dir() {
  const char* env = std::getenv("TOPOGATE_SOURCE_DIR");
  return fs::path(env && *env ? env : TOPOGATE_SOURCE_DIR);
}

std::string read(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::string> ids(std::span<const rule_info> rs) {
  std::vector<std::string> out;
  for (const auto& r : rs) out.emplace_back(r.id);
  return out;
}

std::vector<std::string> numbered(char letter, int n) {
  std::vector<std::string> out;
  for (int i = 1; i <= n; ++i) out.push_back(letter + std::to_string(i));
  return out;
}

// "T1" .. "M99": a capital letter and a number (the shape of an id; the table says which are).
bool is_rule_id(const std::string& s) {
  if (s.size() < 2 || s[0] < 'A' || s[0] > 'Z') return false;
  return std::all_of(s.begin() + 1, s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

TEST(Rules, EachKindIsNumberedFromOneInTableOrder) {
  EXPECT_EQ(ids(rules_of(rule_kind::topology_source)), numbered('T', 14));
  EXPECT_EQ(ids(rules_of(rule_kind::snapshot)), numbered('S', 10));
  EXPECT_EQ(ids(rules_of(rule_kind::model_deployment)), numbered('M', 2));
  EXPECT_EQ(rules_of(rule_kind::topology_source).size() + rules_of(rule_kind::snapshot).size() +
                rules_of(rule_kind::model_deployment).size(),
            rules.size());
  for (const auto& r : rules) EXPECT_FALSE(r.summary.empty()) << r.id;
}

TEST(Rules, FindKnowsTheTableAndNothingElse) {
  ASSERT_NE(find_rule("S10"), nullptr);
  EXPECT_EQ(find_rule("S10")->kind, rule_kind::snapshot);
  EXPECT_EQ(find_rule("T14")->kind, rule_kind::topology_source);
  EXPECT_EQ(find_rule("M2")->kind, rule_kind::model_deployment);
  for (const char* other : {"", "S0", "S11", "T15", "M3", "s1", "S1 "})
    EXPECT_EQ(find_rule(other), nullptr) << other;
  EXPECT_EQ(kind_name(rule_kind::topology_source), "TopologySource");
  EXPECT_EQ(kind_name(rule_kind::model_deployment), "ModelDeployment");
}

TEST(Rules, ReadingOrderIsByLetterThenNumber) {
  EXPECT_TRUE(rule_less("T2", "T10"));
  EXPECT_FALSE(rule_less("T10", "T2"));
  EXPECT_TRUE(rule_less("M2", "T1"));
  EXPECT_TRUE(rule_less("S10", "T1"));
  EXPECT_TRUE(rule_less("", "M1"));
  EXPECT_FALSE(rule_less("T4", "T4"));
  EXPECT_FALSE(rule_less("M1", ""));
}

// docs/rules.md has one table per kind, under "## TopologySource", "## Snapshot" and
// "## ModelDeployment", each row "| ID | text |": the same ids in the same order.
TEST(Rules, DocsListTheSameRulesInTheSameOrder) {
  const auto text = read(source_dir() / "docs" / "rules.md");
  ASSERT_FALSE(text.empty()) << "docs/rules.md not found under " << source_dir();
  std::map<std::string, std::vector<std::string>> by_section;
  std::string section;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("## ", 0) == 0) section = line.substr(3, line.find(' ', 3) - 3);
    if (line.rfind("| ", 0) != 0) continue;
    const auto end = line.find(" |", 2);
    if (end == std::string::npos) continue;
    const std::string cell = line.substr(2, end - 2);
    if (is_rule_id(cell)) by_section[section].push_back(cell);
  }
  EXPECT_EQ(by_section["TopologySource"], ids(rules_of(rule_kind::topology_source)));
  EXPECT_EQ(by_section["Snapshot"], ids(rules_of(rule_kind::snapshot)));
  EXPECT_EQ(by_section["ModelDeployment"], ids(rules_of(rule_kind::model_deployment)));
}

// Every rule a conformance case expects is in the table, and every rule of the table is
// expected by at least one case (a rule nothing exercises end to end is a gap).
TEST(Rules, TheConformanceCorpusExpectsEveryRuleAndNoOther) {
  std::set<std::string> expected;
  std::size_t cases = 0;
  for (const auto& e : fs::recursive_directory_iterator(source_dir() / "conformance" / "cases")) {
    if (e.path().filename() != "case.yaml") continue;
    ++cases;
    const auto text = read(e.path());
    // `rules: [S4, S9]`: each id between the brackets.
    for (auto at = text.find("rules: ["); at != std::string::npos;
         at = text.find("rules: [", at + 1)) {
      const auto open = at + 8;
      const auto close = text.find(']', open);
      std::istringstream items(text.substr(open, close - open));
      for (std::string item; std::getline(items, item, ',');) {
        const auto b = item.find_first_not_of(' ');
        const auto e2 = item.find_last_not_of(' ');
        if (b != std::string::npos) expected.insert(item.substr(b, e2 - b + 1));
      }
    }
  }
  ASSERT_GT(cases, 100u) << "the corpus was not found under " << source_dir();
  for (const auto& r : expected) EXPECT_NE(find_rule(r), nullptr) << r << " is no rule";
  for (const auto& r : rules)
    EXPECT_TRUE(expected.contains(std::string(r.id))) << r.id << " is expected by no case";
}

}  // namespace
}  // namespace topogate::core

// The conformance corpus (conformance/cases/<group>/<case>/case.yaml) through the validation
// core: one test per case, asserting the verdict, the exact set of rule ids among the errors
// and, when given, the number of warnings.
//
// case.yaml:
//   kind: topologysource | modeldeployment | snapshot | nodelabels
//   description: "..."
//   input: input.yaml        # exact bytes, in the case directory
//   source: ../../sources/x.yaml   # snapshot cases: the TopologySource it feeds
//   nodes: nodes.json        # optional: the cluster's Nodes (kubectl get nodes -o json)
//   (nodelabels cases: input is the Nodes, source the nodeLabels TopologySource, and
//    expect.profiles maps a Node to the profile id the consumer gives it)
//   expect: {verdict: valid | invalid, rules: [S9], warnings: 1,
//            errors: [{path: spec, type: Invalid value}]}   # each must be among the errors

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "core/document.hpp"
#include "core/model_deployment.hpp"
#include "core/node_labels.hpp"
#include "core/nodes.hpp"
#include "core/snapshot.hpp"
#include "core/topology_source.hpp"

namespace topogate::core {
namespace {

namespace fs = std::filesystem;

fs::path cases_root() {
  const char* env = std::getenv("TOPOGATE_SOURCE_DIR");
  return fs::path(env && *env ? env : TOPOGATE_SOURCE_DIR) / "conformance" / "cases";
}

struct conformance_case {
  std::string name;  // gtest-safe: <group>_<case>
  fs::path dir;
};

std::vector<conformance_case> discover() {
  std::vector<conformance_case> out;
  const fs::path root = cases_root();
  std::error_code ec;
  if (!fs::is_directory(root, ec)) return out;
  for (auto it = fs::recursive_directory_iterator(root, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (!it->is_regular_file() || it->path().filename() != "case.yaml") continue;
    const fs::path dir = it->path().parent_path();
    std::string name = fs::relative(dir, root).generic_string();
    std::replace_if(
        name.begin(), name.end(),
        [](char c) { return !std::isalnum(static_cast<unsigned char>(c)); }, '_');
    out.push_back({name, dir});
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  return out;
}

std::optional<std::string> read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string scalar(const doc_node& n, std::string_view key) {
  const doc_node* v = n.find(key);
  return v && v->is_scalar() ? v->text : std::string();
}

class Conformance : public ::testing::TestWithParam<conformance_case> {};

TEST_P(Conformance, VerdictRulesAndWarnings) {
  const conformance_case& c = GetParam();
  const auto spec_text = read_file(c.dir / "case.yaml");
  ASSERT_TRUE(spec_text) << c.dir;
  const decode_result spec = decode_yaml(*spec_text);
  ASSERT_TRUE(spec.ok()) << render_text(spec.errors);
  const std::string kind = scalar(spec.root, "kind");
  const doc_node* expect = spec.root.find("expect");
  ASSERT_NE(expect, nullptr) << "case.yaml needs expect";
  const std::string verdict = scalar(*expect, "verdict");
  ASSERT_TRUE(verdict == "valid" || verdict == "invalid") << verdict;
  std::set<std::string> want_rules;
  if (const doc_node* rules = expect->find("rules"); rules && rules->is_sequence())
    for (const auto& r : rules->items) want_rules.insert(r.text);
  // Errors the consumer reports: each {path, type} must be among topogate's (more may follow).
  std::vector<std::pair<std::string, std::string>> want_errors;
  if (const doc_node* es = expect->find("errors"); es && es->is_sequence())
    for (const auto& e : es->items) want_errors.emplace_back(scalar(e, "path"), scalar(e, "type"));
  std::optional<std::size_t> want_warnings;
  if (const doc_node* w = expect->find("warnings"); w && w->is_scalar())
    want_warnings = std::stoul(w->text);

  const auto input = read_file(c.dir / scalar(spec.root, "input"));
  ASSERT_TRUE(input) << "missing input file " << scalar(spec.root, "input");
  error_list errors;
  std::vector<std::string> warnings;
  if (kind == "snapshot") {
    const auto source_text = read_file(c.dir / scalar(spec.root, "source"));
    ASSERT_TRUE(source_text) << "missing source " << scalar(spec.root, "source");
    const source_result source = validate_topology_source_text(*source_text);
    ASSERT_TRUE(source.ok()) << "the case's TopologySource is invalid:\n"
                             << render_text(source.errors);
    std::optional<node_list> nodes;
    if (const std::string nodes_file = scalar(spec.root, "nodes"); !nodes_file.empty()) {
      const auto nodes_text = read_file(c.dir / nodes_file);
      ASSERT_TRUE(nodes_text) << "missing nodes file " << nodes_file;
      node_list_result parsed = parse_node_list(*nodes_text);
      ASSERT_TRUE(parsed.ok()) << render_text(parsed.errors);
      nodes = std::move(parsed.list);
    }
    errors = check_snapshot(*input, snapshot_context{&source.source, nodes ? &*nodes : nullptr});
  } else if (kind == "nodelabels") {
    const auto source_text = read_file(c.dir / scalar(spec.root, "source"));
    ASSERT_TRUE(source_text) << "missing source " << scalar(spec.root, "source");
    const source_result source = validate_topology_source_text(*source_text);
    ASSERT_TRUE(source.ok()) << render_text(source.errors);
    node_list_result nodes = parse_node_list(*input);
    ASSERT_TRUE(nodes.ok()) << render_text(nodes.errors);
    node_label_report r = check_node_labels(source.source, nodes.list);
    if (const doc_node* profiles = expect->find("profiles"); profiles && profiles->is_mapping()) {
      for (const auto& [node, id] : profiles->map) {
        const auto it = std::find_if(r.nodes.begin(), r.nodes.end(),
                                     [&](const node_profile_entry& e) { return e.node == node; });
        ASSERT_NE(it, r.nodes.end()) << "no Node " << node;
        EXPECT_EQ(it->profile_id, id.text) << node;
      }
    }
    errors = std::move(r.errors);
  } else if (kind == "topologysource") {
    source_result r = validate_topology_source_text(*input);
    errors = std::move(r.errors);
    warnings = std::move(r.warnings);
  } else if (kind == "modeldeployment") {
    deployment_result r = validate_model_deployment_text(*input);
    errors = std::move(r.errors);
    warnings = std::move(r.warnings);
  } else {
    FAIL() << "unknown kind " << kind;
  }

  std::set<std::string> got_rules;
  for (const auto& e : errors) got_rules.insert(e.rule);
  const std::string context = scalar(spec.root, "description") + "\n" + render_text(errors);
  EXPECT_EQ(errors.empty() ? "valid" : "invalid", verdict) << context;
  EXPECT_EQ(got_rules, want_rules) << context;
  for (const auto& [path, type] : want_errors) {
    const bool found = std::any_of(errors.begin(), errors.end(), [&](const field_error& e) {
      return e.path == path && to_string(e.type) == type;
    });
    EXPECT_TRUE(found) << "no " << type << " at " << path << "\n" << context;
  }
  if (want_warnings) {
    EXPECT_EQ(warnings.size(), *want_warnings) << context;
  }
}

INSTANTIATE_TEST_SUITE_P(Corpus, Conformance, ::testing::ValuesIn(discover()),
                         [](const auto& param_info) { return param_info.param.name; });

TEST(ConformanceCorpus, IsPresent) {
  // An empty corpus (a wrong TOPOGATE_SOURCE_DIR) would silently run no case.
  EXPECT_GT(discover().size(), 40u) << cases_root();
}

}  // namespace
}  // namespace topogate::core

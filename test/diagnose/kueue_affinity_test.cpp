// A PodSet's required node affinity as Kueue v0.17.0 applies it (diagnose/node_affinity.cpp,
// diagnose/kueue_placement.cpp): the operators as the scheduler matches them, per Node on a
// hostname Topology only, against each flavor's nodeLabels, and a term that does not parse,
// worded as Kubernetes words it; each behaviour from both sides.

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "test/diagnose/kueue_cluster.hpp"

namespace topogate::diagnose {
namespace {

using namespace kueue_test;

node_selector_term expr(const std::string& key, const std::string& op,
                        std::vector<std::string> values = {}) {
  return {{{key, op, std::move(values)}}, {}};
}

TEST(KueueAffinity, OperatorsAsTheSchedulerMatchesThem) {
  const label_map labels = sorted_labels({{zone, "zone-a"}, {"gpus", "8"}, {"pool", ""}});
  const auto one = [&](node_selector_term t, std::string_view name = "a1") {
    return affinity_matches({std::move(t)}, labels, name);
  };
  EXPECT_TRUE(one(expr(zone, "In", {"zone-b", "zone-a"})));
  EXPECT_FALSE(one(expr(zone, "In", {"zone-b"})));
  EXPECT_FALSE(one(expr(zone, "NotIn", {"zone-a"})));
  EXPECT_TRUE(one(expr("rack", "NotIn", {"r1"})));  // a missing label is not in any set
  EXPECT_TRUE(one(expr("pool", "Exists")));         // an empty value exists
  EXPECT_FALSE(one(expr("pool", "DoesNotExist")));
  EXPECT_TRUE(one(expr("rack", "DoesNotExist")));
  EXPECT_TRUE(one(expr("gpus", "Gt", {"4"})));
  EXPECT_FALSE(one(expr("gpus", "Gt", {"8"})));
  EXPECT_TRUE(one(expr("gpus", "Lt", {"+9"})));
  EXPECT_FALSE(one(expr(zone, "Gt", {"1"})));         // not an integer: no match
  EXPECT_FALSE(one(expr("gpus", "Gt", {"1", "2"})));  // invalid: matches nothing
  EXPECT_FALSE(one(expr(zone, "Exists", {"zone-a"})));
  EXPECT_FALSE(one(expr(zone, "Equals", {"zone-a"})));
  // matchFields: metadata.name, In or NotIn of one value.
  const node_selector_term by_name{{}, {{"metadata.name", "In", {"a1"}}}};
  EXPECT_TRUE(one(by_name));
  EXPECT_FALSE(one(by_name, "a2"));
  EXPECT_TRUE(one({{}, {{"metadata.name", "NotIn", {"a2"}}}}));
  // Terms are ORed, a term's requirements ANDed; an empty term is skipped, none left
  // matches nothing.
  node_selector_term both = expr(zone, "In", {"zone-a"});
  both.match_expressions.push_back({"gpus", "Lt", {"4"}});
  EXPECT_FALSE(affinity_matches({both}, labels, "a1"));
  EXPECT_TRUE(affinity_matches({both, expr("gpus", "Exists")}, labels, "a1"));
  EXPECT_TRUE(affinity_matches({node_selector_term{}, expr("gpus", "Exists")}, labels, "a1"));
  EXPECT_FALSE(affinity_matches({node_selector_term{}}, labels, "a1"));
  EXPECT_FALSE(affinity_matches({}, labels, "a1"));
}

TEST(KueueAffinity, ReadFromTheTemplate) {
  cluster_objects c;
  add_json(c, workload_json("w", 1, R"({"containers":[{"name":"a"}],"affinity":{"nodeAffinity":{
      "requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[
        {"matchExpressions":[{"key":"pool","operator":"In","values":["gpu","cpu"]}],
         "matchFields":[{"key":"metadata.name","operator":"NotIn","values":["b1"]}]}]},
      "preferredDuringSchedulingIgnoredDuringExecution":[{"weight":1,"preference":{}}]}}})"));
  add_json(c, workload_json("plain", 1, R"({"containers":[{"name":"a"}]})"));
  const auto& a = only_podset(c, "w").required_affinity;
  ASSERT_TRUE(a.has_value());
  ASSERT_EQ(a->size(), 1u);
  EXPECT_EQ((*a)[0].match_expressions.at(0).values, (std::vector<std::string>{"gpu", "cpu"}));
  EXPECT_EQ((*a)[0].match_fields.at(0).op, "NotIn");
  EXPECT_FALSE(only_podset(c, "plain").required_affinity.has_value());
}

// Kueue checks the affinity per Node after taints and the nodeSelector, only in a Topology
// ending with the hostname level, and counts each Node it leaves out as "affinity".
TEST(KueueAffinity, NodesLeftOutOnAHostnameTopologyOnly) {
  auto c = tas_cluster();
  auto& w = add_workload(c, "w", {make_podset("main", 2, 4000)});
  EXPECT_TRUE(decide(c, "w").admissible);
  node_selector_term t = expr(zone, "In", {"zone-b"});
  t.match_fields.push_back({"metadata.name", "NotIn", {"b1"}});
  w.podsets[0].required_affinity = node_affinity{t};
  auto r = diagnose_pending(c, "default", "w");
  EXPECT_FALSE(r.kueue.admissible);
  EXPECT_EQ(r.kueue.message,
            "couldn't assign flavors to pod set main: topology \"t\" allows to fit only 1 out of 2 "
            "pod(s). Total nodes: 4; excluded: affinity: 3");
  EXPECT_EQ(r.fits[0].cluster_fits, 1);  // step 6 leaves the same Nodes out
  bool named = false;
  for (const auto& [n, why] : r.fits[0].flavors[0].excluded)
    named = named || (n == "b1" && why == "PodSet required node affinity does not match");
  EXPECT_TRUE(named);
  // Taints and the nodeSelector come first: a Node they leave out is not counted again.
  c.nodes[0].taints.push_back({"gpu", "", "NoSchedule"});
  w.podsets[0].node_selector = {{host, "a2"}};
  r = diagnose_pending(c, "default", "w");
  EXPECT_EQ(r.kueue.message,
            "couldn't assign flavors to pod set main: topology \"t\" doesn't allow to fit any of 2 "
            "pod(s). Total nodes: 4; excluded: affinity: 1, nodeSelector: 2, taint "
            "\"gpu:NoSchedule\": 1");
  // A Topology whose leaves are zones: Kueue does not look at Nodes' affinity.
  c.nodes[0].taints.clear();
  w.podsets[0].node_selector.clear();
  c.topologies[0].levels = {zone};
  EXPECT_TRUE(decide(c, "w").admissible);
}

// The flavor check: the affinity's expressions on the keys the group's flavors label
// against each flavor's nodeLabels ("flavor F doesn't match node affinity").
TEST(KueueAffinity, FlavorsWhoseNodeLabelsTheAffinityRefuses) {
  auto c = tas_cluster();
  add_flavor_f2(c, "cpu", "zone-c", {{"c1", 4000}, {"c2", 4000}});
  auto& w = add_workload(c, "w", {make_podset("main", 2, 4000)});
  EXPECT_EQ(decide(c, "w").podsets[0].flavor, "f");
  w.podsets[0].required_affinity = node_affinity{expr("pool", "NotIn", {"gpu"})};
  auto k = decide(c, "w");
  EXPECT_TRUE(k.admissible) << k.message;
  EXPECT_EQ(k.podsets[0].flavor, "f2");
  EXPECT_EQ(k.podsets[0].detail, "c1=1, c2=1");
  // Refused by every flavor: Kueue's words for each.
  w.podsets[0].required_affinity = node_affinity{expr("pool", "In", {"tpu"})};
  k = decide(c, "w");
  EXPECT_FALSE(k.admissible);
  EXPECT_EQ(k.message,
            "couldn't assign flavors to pod set main: flavor f doesn't match node affinity, "
            "flavor f2 doesn't match node affinity");
  // A term with no expression on a flavor key lets every flavor through (the terms are
  // ORed); TAS then leaves every Node out per Node.
  w.podsets[0].required_affinity =
      node_affinity{expr("pool", "In", {"tpu"}), expr("rack", "Exists")};
  k = decide(c, "w");
  EXPECT_EQ(k.step, "topology");
  EXPECT_NE(k.message.find("; excluded: affinity: 2"), std::string::npos) << k.message;
}

// A term that does not parse, worded as Kubernetes' field errors (component-helpers'
// nodeaffinity and apimachinery's labels.NewRequirement); a valid one has no error.
TEST(KueueAffinity, ParseErrorsWordedAsKubernetes) {
  const auto errors = [](node_selector_term t, std::size_t index = 0) {
    return aggregate_errors(affinity_term_errors(t, index));
  };
  EXPECT_EQ(errors(expr("gpus", "Gt", {"4"})), "");
  EXPECT_EQ(errors(expr("gpus", "Lt", {"+9"})), "");
  EXPECT_EQ(errors(expr("gpus", "Lt", {"-9223372036854775808"})), "");
  EXPECT_EQ(errors(expr("gpus", "Gt", {"abc"}), 2),
            "nodeSelectorTerms[2].matchExpressions[0].values[0]: Invalid value: \"abc\": for "
            "'Gt', 'Lt' operators, the value must be an integer");
  EXPECT_EQ(errors(expr("gpus", "Gt", {"9223372036854775808"})),
            "nodeSelectorTerms[0].matchExpressions[0].values[0]: Invalid value: "
            "\"9223372036854775808\": for 'Gt', 'Lt' operators, the value must be an integer");
  EXPECT_EQ(errors(expr("gpus", "Gt", {"1", "x"})),
            "[nodeSelectorTerms[0].matchExpressions[0].values: Invalid value: [\"1\",\"x\"]: for "
            "'Gt', 'Lt' operators, exactly one value is required, "
            "nodeSelectorTerms[0].matchExpressions[0].values[1]: Invalid value: \"x\": for 'Gt', "
            "'Lt' operators, the value must be an integer]");
  EXPECT_EQ(errors(expr("gpus", "In", {"8"})), "");
  node_selector_term none = expr("gpus", "NotIn");
  EXPECT_EQ(errors(none),
            "nodeSelectorTerms[0].matchExpressions[0].values: Invalid value: []: for 'in', "
            "'notin' operators, values set can't be empty");
  none.match_expressions[0].values_null = true;  // `values` absent: Go's nil slice
  EXPECT_EQ(errors(none),
            "nodeSelectorTerms[0].matchExpressions[0].values: Invalid value: null: for 'in', "
            "'notin' operators, values set can't be empty");
  EXPECT_EQ(errors(expr("gpus", "Exists")), "");
  EXPECT_EQ(
      errors(expr("gpus", "DoesNotExist", {"<8>"})),
      "nodeSelectorTerms[0].matchExpressions[0].values: Invalid value: [\"\\u003c8\\u003e\"]: "
      "values set must be empty for exists and does not exist");
  EXPECT_EQ(errors(expr("gpus", "Equals", {"8"})),
            "nodeSelectorTerms[0].matchExpressions[0].operator: Unsupported value: \"Equals\": "
            "supported values: \"In\", \"NotIn\", \"Exists\", \"DoesNotExist\", \"Gt\", \"Lt\"");
  EXPECT_EQ(errors({{}, {{"metadata.name", "In", {"a1"}}}}), "");
  EXPECT_EQ(errors({{}, {{"metadata.name", "NotIn", {"a1", "b1"}}}}),
            "nodeSelectorTerms[0].matchFields[0].values: Invalid value: [\"a1\",\"b1\"]: must "
            "have one element");
  EXPECT_EQ(errors({{}, {{"metadata.name", "Exists", {}}}}),
            "nodeSelectorTerms[0].matchFields[0].operator: Unsupported value: \"Exists\": "
            "supported values: \"In\", \"NotIn\"");
  // The aggregate: none, one, duplicates dropped.
  EXPECT_EQ(aggregate_errors({}), "");
  EXPECT_EQ(aggregate_errors({"a", "a"}), "a");
  EXPECT_EQ(aggregate_errors({"a", "b", "a"}), "[a, b]");
  EXPECT_EQ(
      node_selector_text({expr("gpus", "Gt", {"1", "x"}), {{}, {{"metadata.name", "In", {"a1"}}}}}),
      "&NodeSelector{NodeSelectorTerms:[]NodeSelectorTerm{NodeSelectorTerm{MatchExpressions:"
      "[]NodeSelectorRequirement{NodeSelectorRequirement{Key:gpus,Operator:Gt,Values:[1 "
      "x],},},MatchFields:[]NodeSelectorRequirement{},},NodeSelectorTerm{MatchExpressions:"
      "[]NodeSelectorRequirement{},MatchFields:[]NodeSelectorRequirement{"
      "NodeSelectorRequirement{Key:metadata.name,Operator:In,Values:[a1],},},},},}");
}

// TAS parses the workers' whole required affinity before counting domains: one term that
// does not parse stops the PodSet, a valid term beside it notwithstanding; the flavor check
// meets it first when its key is a flavor label, unless another kept term matches the flavor.
TEST(KueueAffinity, InvalidAffinityStopsThePodSet) {
  auto c = tas_cluster();
  auto& w = add_workload(c, "w", {make_podset("main", 2, 1000)});
  w.podsets[0].required_affinity = node_affinity{expr(zone, "In", {"zone-a"})};
  EXPECT_TRUE(decide(c, "w").admissible);
  w.podsets[0].required_affinity->push_back(expr("gpus", "Gt", {"abc"}));
  auto k = decide(c, "w");
  EXPECT_FALSE(k.admissible);
  EXPECT_EQ(k.step, "topology");
  EXPECT_EQ(k.message,
            "couldn't assign flavors to pod set main: invalid affinity node selectors: "
            "&NodeSelector{NodeSelectorTerms:[]NodeSelectorTerm{NodeSelectorTerm{MatchExpressions:"
            "[]NodeSelectorRequirement{NodeSelectorRequirement{Key:topology.kubernetes.io/zone,"
            "Operator:In,Values:[zone-a],},},MatchFields:[]NodeSelectorRequirement{},},"
            "NodeSelectorTerm{MatchExpressions:[]NodeSelectorRequirement{NodeSelectorRequirement{"
            "Key:gpus,Operator:Gt,Values:[abc],},},MatchFields:[]NodeSelectorRequirement{},},},}, "
            "reason: nodeSelectorTerms[1].matchExpressions[0].values[0]: Invalid value: \"abc\": "
            "for 'Gt', 'Lt' operators, the value must be an integer");
  // On the flavor's label key, alone: the flavor check's error, renumbered over the
  // expressions it keeps.
  node_selector_term on_pool = expr("gpus", "Exists");
  on_pool.match_expressions.push_back({"pool", "Gt", {"abc"}});
  w.podsets[0].required_affinity = node_affinity{expr("pool", "In", {"tpu"}), on_pool};
  k = decide(c, "w");
  EXPECT_EQ(k.step, "quota");
  EXPECT_EQ(k.message,
            "failed to assign flavors to pod set main: nodeSelectorTerms[1].matchExpressions[0]."
            "values[0]: Invalid value: \"abc\": for 'Gt', 'Lt' operators, the value must be an "
            "integer");
  // Another kept term matches the flavor: through to TAS, which refuses the whole affinity.
  w.podsets[0].required_affinity = node_affinity{expr("pool", "In", {"gpu"}), on_pool};
  k = decide(c, "w");
  EXPECT_EQ(k.step, "topology");
  EXPECT_NE(k.message.find("invalid affinity node selectors: "), std::string::npos) << k.message;
}

}  // namespace
}  // namespace topogate::diagnose

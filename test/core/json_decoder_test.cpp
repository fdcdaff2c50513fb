// The caller-owned JSON decoder: reusing one gives the same results as a fresh one, whatever
// the previous document left behind; the root's end and the key-length rule of yaml.v3 are
// judged the same on the fast and the exact paths; the canonical JSON rendering sorts and
// escapes exactly as before.

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/document.hpp"
#include "core/snapshot.hpp"
#include "core/topology_source.hpp"

namespace topogate::core {
namespace {

// Everything a decode produced, as one string (tree and errors), for equality checks.
void flatten(const doc_node& n, std::string& out) {
  out += std::to_string(static_cast<int>(n.k)) + std::to_string(static_cast<int>(n.tag));
  out += '<' + n.text + '>';
  for (const auto& item : n.items) flatten(item, out);
  for (const auto& [k, v] : n.map) {
    out += '{' + k + '=';
    flatten(v, out);
    out += '}';
  }
}

std::string flatten(const decode_result& r) {
  std::string out;
  flatten(r.root, out);
  for (const auto& e : r.errors) out += '|' + e.rule + '|' + e.path + '|' + e.to_string();
  return out;
}

std::string nested(std::size_t depth, bool closed) {
  std::string s(depth, '[');
  if (closed) s.append(depth, ']');
  return s;
}

TEST(JsonDecoder, ReuseGivesTheResultsOfAFreshDecoder) {
  const std::vector<std::string> docs = {
      R"({"a":{"b":[1,2,{"c":null}],"d":"x"},"e":true})",
      R"({"a":1,"a":2})",                   // duplicate key
      nested(100, false),                   // depth limit, unterminated
      R"({"k":[{"x":1},{"y":[[[]]]}]} x)",  // content after the root
      R"([{"a":"b"},{"a":"b","c":{"d":{}}}])",
      "{\"a\":\"\\/\"}",  // an escape yaml.v3 refuses
      R"({"z":{"y":{"x":{"w":1}}},"v":[1,[2,[3]]]})",
  };
  json_decoder shared;
  for (int round = 0; round < 2; ++round) {
    for (const std::string& doc : docs) {
      SCOPED_TRACE(doc);
      EXPECT_EQ(flatten(decode_json(shared, doc, "S1")), flatten(decode_json(doc, "S1")));
      EXPECT_EQ(flatten(decode_any(shared, doc)), flatten(decode_any(doc)));
    }
  }
}

TEST(JsonDecoder, OnlyWhiteSpaceMayFollowTheRoot) {
  json_decoder d;
  EXPECT_TRUE(decode_json(d, "{\"a\":1} \n\t\r\n").ok());
  EXPECT_TRUE(decode_json(d, "  [1, 2]\n").ok());
  for (const char* text : {R"({"a":1} x)", R"({"a":1}{"b":2})", R"([1,2] [3])", R"({"a":1} 7)"}) {
    SCOPED_TRACE(text);
    const decode_result r = decode_json(d, text, "S1");
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.errors.front().rule, "S1");
    EXPECT_EQ(r.errors.front().path, "");
  }
}

// The depth limit is reported at the location that reaches it, also when the document is
// malformed further in (the builder stops before it gets there); an unbalanced document is
// refused as a whole.
TEST(JsonDecoder, DepthLimitIsReportedWhereItIsReached) {
  json_decoder d;
  decode_limits limits;
  limits.max_depth = 8;
  std::string at_limit;
  for (int i = 0; i < 8; ++i) at_limit += "[0]";
  for (const std::string& text :
       {nested(9, true), std::string(9, '[') + "1 2" + std::string(9, ']')}) {
    SCOPED_TRACE(text);
    const decode_result deep = decode_json(d, text, "S1", limits);
    ASSERT_EQ(deep.errors.size(), 1u);
    EXPECT_EQ(deep.errors[0].rule, "S1");
    EXPECT_EQ(deep.errors[0].type, error_type::invalid);
    EXPECT_EQ(deep.errors[0].path, at_limit);
  }
  EXPECT_TRUE(decode_json(d, nested(8, true), "S1", limits).ok());
  const decode_result open = decode_json(d, nested(9, false), "S1", limits);
  ASSERT_EQ(open.errors.size(), 1u);
  EXPECT_EQ(open.errors[0].path, "");
}

TEST(JsonDecoder, DuplicateKeysAreFoundAtTheirPath) {
  json_decoder d;
  const decode_result r = decode_json(d, R"({"spec":{"x":[{"a":1,"b":2,"a":3}]}})");
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_EQ(r.errors[0].type, error_type::duplicate);
  EXPECT_EQ(r.errors[0].path, "spec.x[0].a");
}

// yaml.v3 reads a JSON key as a simple key: at most 1024 characters from its opening quote
// to its `:`. The unescaped fast path and the exact scan must agree on both sides.
TEST(JsonDecoder, KeyLengthLimitBothSides) {
  json_decoder d;
  auto doc = [](std::size_t key_length, std::string_view before_colon) {
    return "{\"" + std::string(key_length, 'k') + "\"" + std::string(before_colon) + ":1}";
  };
  // Opening quote + 1022 characters + closing quote: the `:` is 1024 characters on.
  EXPECT_TRUE(decode_json(d, doc(1022, "")).ok());
  EXPECT_FALSE(decode_json(d, doc(1023, "")).ok());
  EXPECT_TRUE(decode_json(d, doc(1021, " ")).ok());
  EXPECT_FALSE(decode_json(d, doc(1022, " ")).ok());
  // An escaped key is measured as written (the escape's two characters count).
  const std::string escaped = "{\"" + std::string(1020, 'k') + "\\\"\":1}";
  EXPECT_TRUE(decode_json(d, escaped).ok());
  const std::string escaped_long = "{\"" + std::string(1021, 'k') + "\\\"\":1}";
  EXPECT_FALSE(decode_json(d, escaped_long).ok());
  // A key whose escaped quote is followed by a colon inside the key.
  const decode_result tricky = decode_json(d, R"({"a\":b":1})");
  ASSERT_TRUE(tricky.ok());
  ASSERT_EQ(tricky.root.map.size(), 1u);
  EXPECT_EQ(tricky.root.map[0].first, "a\":b");
  // A key on a line of its own before its `:` is not a YAML simple key.
  EXPECT_FALSE(decode_json(d, "{\"a\"\n:1}").ok());
}

TEST(JsonDecoder, TopologySourceTextWithADecoderMatchesWithout) {
  const std::string text =
      R"({"apiVersion":"worker.gpustack.ai/v1","kind":"TopologySource","metadata":{"name":"a"},)"
      R"("spec":{"levels":["topology.gpustack.ai/rack","topology.gpustack.ai/rack"],)"
      R"("configMap":{"configMapRef":{"namespace":"gpustack-system","name":"x"},"key":"k"}}})";
  json_decoder d;
  const source_result a = validate_topology_source_text(d, text);
  const source_result b = validate_topology_source_text(text);
  ASSERT_EQ(a.errors.size(), b.errors.size());
  ASSERT_FALSE(a.errors.empty());
  for (std::size_t i = 0; i < a.errors.size(); ++i)
    EXPECT_EQ(a.errors[i].to_string(), b.errors[i].to_string());
}

snapshot sample(std::vector<snapshot_node> nodes) {
  snapshot s;
  s.api_version = std::string(snapshot_api_version);
  s.revision = "r1";
  s.nodes = std::move(nodes);
  return s;
}

TEST(RenderSnapshotJson, SortsNodesAndLabelsAndEscapes) {
  const snapshot s = sample({
      {"node-b", {{"topology.gpustack.ai/zone", "z1"}, {"topology.gpustack.ai/region", "r1"}}},
      {"node-a", {{"b", "quote\"back\\slash"}, {"a", "tab\tnl\n\x01"}}},
      {"node-c", {}},
  });
  EXPECT_EQ(render_snapshot_json(s),
            R"({"apiVersion":"topology.gpustack.ai/v1alpha1","revision":"r1","nodes":{)"
            R"("node-a":{"a":"tab\tnl\n\u0001","b":"quote\"back\\slash"},)"
            R"("node-b":{"topology.gpustack.ai/region":"r1","topology.gpustack.ai/zone":"z1"},)"
            R"("node-c":{}}})");
}

TEST(RenderSnapshotJson, ManyLabelsAndNonAsciiAndEmpty) {
  std::vector<snapshot_label> labels;
  for (int i = 19; i >= 0; --i) labels.push_back({"k" + std::to_string(100 + i), "v"});
  const snapshot s = sample({{"n", labels}, {"m", {{"x", "\xc3\xa9\xe2\x80\xa8"}}}});
  std::string want = R"({"apiVersion":"topology.gpustack.ai/v1alpha1","revision":"r1","nodes":{)"
                     R"("m":{"x":"\u00e9\u2028"},"n":{)";
  for (int i = 0; i < 20; ++i) {
    if (i) want += ',';
    want += "\"k" + std::to_string(100 + i) + "\":\"v\"";
  }
  want += "}}}";
  // U+00E9 passes through as UTF-8; only U+2028 is escaped.
  std::string rendered = render_snapshot_json(s);
  EXPECT_EQ(rendered.find("\\u00e9"), std::string::npos);
  const std::size_t e_acute = want.find("\\u00e9");
  want.replace(e_acute, 6, "\xc3\xa9");
  EXPECT_EQ(rendered, want);
  EXPECT_EQ(render_snapshot_json(sample({})),
            R"({"apiVersion":"topology.gpustack.ai/v1alpha1","revision":"r1","nodes":{}})");
}

TEST(RenderSnapshotJson, RoundTripsThroughDecodeWithAReusedDecoder) {
  std::vector<snapshot_node> nodes;
  for (int i = 300; i > 0; --i)
    nodes.push_back({"node-" + std::to_string(i),
                     {{"topology.gpustack.ai/rack", "rack-" + std::to_string(i % 7)},
                      {"topology.gpustack.ai/region", "r"}}});
  const snapshot s = sample(nodes);
  const std::string json = render_snapshot_json(s);
  json_decoder d;
  for (int round = 0; round < 2; ++round) {
    const snapshot_decode_result r = decode_snapshot(d, json);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(render_snapshot_json(r.value), json);
    EXPECT_EQ(r.value.nodes.size(), 300u);
  }
}

}  // namespace
}  // namespace topogate::core

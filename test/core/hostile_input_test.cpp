// Hostile input: every case ends in an error (or a bounded result), never a crash, a hang or
// unbounded memory. Bounds are asserted through the decoder's limits, not wall-clock time.

#include <gtest/gtest.h>

#include <string>

#include "core/document.hpp"
#include "core/snapshot.hpp"
#include "core/topology_source.hpp"

namespace topogate::core {
namespace {

const topology_source& source() {
  static const topology_source src = [] {
    topology_source s;
    s.name = "data-center";
    s.levels = {"topology.gpustack.ai/region", "topology.gpustack.ai/zone",
                "topology.gpustack.ai/rack"};
    return s;
  }();
  return src;
}

error_list check(std::string_view text) { return check_snapshot(text, {&source(), nullptr}); }

bool only_rule(const error_list& errors, std::string_view rule) {
  if (errors.empty()) return false;
  for (const auto& e : errors)
    if (e.rule != rule) return false;
  return true;
}

TEST(Hostile, HundredThousandNestedBrackets) {
  const std::string open(100000, '[');
  EXPECT_TRUE(only_rule(check(open), "S1"));
  EXPECT_TRUE(only_rule(check(open + std::string(100000, ']')), "S1"));
  EXPECT_FALSE(decode_yaml(open, "S1").ok());
  EXPECT_FALSE(decode_json(open + std::string(100000, ']'), "S1").ok());
  EXPECT_FALSE(decode_any(open + std::string(100000, ']'), "S1").ok());
  std::string objects;
  for (int i = 0; i < 100000; ++i) objects += "{\"a\":";
  EXPECT_TRUE(only_rule(check(objects), "S1"));
  EXPECT_FALSE(decode_any(objects + "1" + std::string(100000, '}')).ok());
  // Block-style nesting: 1000 indented mappings (half a megabyte).
  std::string block;
  for (int i = 0; i < 1000; ++i) block += std::string(static_cast<std::size_t>(i), ' ') + "a:\n";
  EXPECT_TRUE(only_rule(check(block), "S1"));
}

TEST(Hostile, FiftyMegabyteLine) {
  std::string line = "apiVersion: ";
  line.append(50u << 20, 'x');
  // As a snapshot it is refused for its size before any parsing.
  const error_list errors = check(line);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].rule, "S10");
  // The decoders refuse it under their default limit, before parsing.
  const decode_result refused = decode_yaml(line, "S1");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.errors[0].type, error_type::too_long);
  EXPECT_FALSE(decode_any(line, "S1").ok());
  // Allowed that size, the JSON decoder reads it in one piece.
  decode_limits big;
  big.max_bytes = 64u << 20;
  std::string json = "{\"a\": \"";
  json.append(50u << 20, 'y');
  json += "\"}";
  const decode_result r = decode_json(json, "", big);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.root.find("a")->text.size(), 50u << 20);
  // yaml-cpp's scanner is linear but slow per byte: a 2 MiB plain scalar line is enough to
  // show a long line is read in one piece.
  std::string yaml = "a: ";
  yaml.append(2u << 20, 'z');
  const decode_result y = decode_yaml(yaml, "S1");
  ASSERT_TRUE(y.ok());
  EXPECT_EQ(y.root.find("a")->text.size(), 2u << 20);
}

TEST(Hostile, InvalidUtf8AndControlBytes) {
  const std::string header =
      "apiVersion: topology.gpustack.ai/v1alpha1\nrevision: r\nnodes:\n  w:\n    "
      "topology.gpustack.ai/region: ";
  for (const std::string& bad :
       {std::string("\xff"), std::string("\xc3"), std::string("\xed\xa0\x80"),
        std::string("\xf4\x90\x80\x80"), std::string("a\0b", 3), std::string("\x1b"),
        std::string("\x7f"), std::string("\xc2\x9f")}) {
    EXPECT_TRUE(only_rule(check(header + bad + "\n"), "S1"))
        << render_text(check(header + bad + "\n"));
    const std::string json =
        R"({"apiVersion":"topology.gpustack.ai/v1alpha1","revision":")" + bad + R"("})";
    EXPECT_TRUE(only_rule(check(json), "S1")) << render_text(check(json));
  }
  EXPECT_TRUE(only_rule(check(std::string(1000, '\0')), "S1"));
}

TEST(Hostile, BillionLaughsStopsAtTheAliasBudget) {
  std::string text = "a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n";
  for (int i = 1; i < 10; ++i) {
    text += "a" + std::to_string(i) + ": &a" + std::to_string(i) + " [";
    for (int j = 0; j < 9; ++j) text += std::string(j ? ", " : "") + "*a" + std::to_string(i - 1);
    text += "]\n";
  }
  // 9^10 (3.5 billion) nodes if expanded.
  const decode_result r = decode_yaml(text, "S1");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.errors[0].rule, "S1");
  EXPECT_TRUE(r.root.is_null());
  EXPECT_TRUE(only_rule(check(text), "S1"));
  // The hard node limit holds even where yaml.v3's alias ratio would allow more: a small
  // document with a few large aliases.
  decode_limits limits;
  limits.max_expanded_nodes = 5000;
  std::string wide = "a: &a [";
  for (int i = 0; i < 1000; ++i) wide += std::string(i ? "," : "") + "x";
  wide += "]\nb: [*a, *a, *a, *a, *a]\n";
  const decode_result capped = decode_yaml(wide, "S1", limits);
  ASSERT_FALSE(capped.ok());
  EXPECT_NE(capped.errors[0].detail.find("5000"), std::string::npos) << capped.errors[0].detail;
  limits.max_expanded_nodes = 10000;
  EXPECT_TRUE(decode_yaml(wide, "S1", limits).ok());  // 83% aliases: within yaml.v3's ratio
  // More than 99% of a small document from aliases: yaml.v3's ratio refuses, like here.
  std::string ratio = "a: &a [";
  for (int i = 0; i < 1000; ++i) ratio += std::string(i ? "," : "") + "x";
  ratio += "]\nb: [";
  for (int i = 0; i < 200; ++i) ratio += std::string(i ? "," : "") + "*a";
  ratio += "]\n";
  const decode_result excessive = decode_yaml(ratio, "S1");
  ASSERT_FALSE(excessive.ok());
  EXPECT_NE(excessive.errors[0].detail.find("excessive aliasing"), std::string::npos);
}

// A merge that contributes many keys: the copies collect in a vector that reallocates while
// the duplicate index still looks keys up (once read freed memory; ASan found it through
// MergeBombIsBounded). Every key arrives exactly once, the explicit one wins, and a key two
// sources share keeps the first source's value.
TEST(Hostile, MergeOfManyKeysKeepsEveryKeyOnce) {
  std::string a = "a: &a {", b = "b: &b {";
  for (int i = 0; i < 200; ++i) {
    a += "long-key-from-the-first-source-" + std::to_string(i) + ": 1, ";
    b += "long-key-from-the-first-source-" + std::to_string(i + 100) + ": 2, ";
  }
  a += "shared: 1}\n";
  b += "shared: 2}\n";
  const std::string text = a + b + "d:\n  explicit: 0\n  <<: [*a, *b]\n";
  const decode_result r = decode_yaml(text);
  ASSERT_TRUE(r.ok());
  const doc_node* d = r.root.find("d");
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->map.size(), 1u + 300u + 1u);  // explicit, 300 distinct long keys, shared
  ASSERT_NE(d->find("shared"), nullptr);
  EXPECT_EQ(d->find("shared")->text, "1");
  ASSERT_NE(d->find("long-key-from-the-first-source-150"), nullptr);
  EXPECT_EQ(d->find("long-key-from-the-first-source-150")->text, "1");
  ASSERT_NE(d->find("long-key-from-the-first-source-299"), nullptr);
  EXPECT_EQ(d->find("long-key-from-the-first-source-299")->text, "2");
}

TEST(Hostile, MergeBombIsBounded) {
  std::string text = "m0: &m0 {k0: v}\n";
  for (int i = 1; i < 40; ++i)
    text += "m" + std::to_string(i) + ": &m" + std::to_string(i) + " {<<: [*m" +
            std::to_string(i - 1) + ", *m" + std::to_string(i - 1) + "], k" + std::to_string(i) +
            ": v}\n";
  const decode_result r = decode_yaml(text, "S1");
  EXPECT_FALSE(r.ok());
}

TEST(Hostile, ManyErrorsAreCapped) {
  std::string text = "apiVersion: topology.gpustack.ai/v1alpha1\nrevision: r\nnodes:\n";
  for (int i = 0; i < 20000; ++i) text += "  W" + std::to_string(i) + ": {a/b/c: '-'}\n";
  const error_list errors = check(text);
  EXPECT_EQ(errors.size(), 1001u);
  EXPECT_EQ(errors.back().type, error_type::too_many);
}

TEST(Hostile, ManyKeysInOneMapping) {
  std::string text = "apiVersion: topology.gpustack.ai/v1alpha1\nrevision: r\nnodes:\n  w:\n";
  for (int i = 0; i < 30000; ++i) text += "    k" + std::to_string(i) + ": v\n";
  text += "    k29999: again\n";
  const error_list errors = check(text);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].type, error_type::duplicate);
  EXPECT_EQ(errors[0].path, "nodes[w][k29999]");
}

}  // namespace
}  // namespace topogate::core

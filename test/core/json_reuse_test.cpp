// The reusing JSON decoders (the admission path's): they accept exactly the objects that
// decode_json accepts without error, build the same tree whatever the previous document
// left in the decoder, and refuse everything else, so that the caller's fallback to
// decode_json gives the exact verdict.

#include "core/json_reuse.hpp"

#include <gtest/gtest.h>
#include <simdjson.h>

#include <string>
#include <vector>

#include "core/document.hpp"

namespace topogate::core {
namespace {

void flatten(const doc_node& n, std::string& out) {
  out += std::to_string(static_cast<int>(n.k)) + std::to_string(static_cast<int>(n.tag));
  out += '#' + std::to_string(n.line);
  out += '<' + n.text + '>';
  out += '[' + std::to_string(n.items.size());
  for (const auto& item : n.items) flatten(item, out);
  out += "]{" + std::to_string(n.map.size());
  for (const auto& [k, v] : n.map) {
    out += '(' + k + '=';
    flatten(v, out);
    out += ')';
  }
  out += '}';
}

std::string flatten(const doc_node& n) {
  std::string out;
  flatten(n, out);
  return out;
}

std::string nested_objects(std::size_t depth) {
  std::string s;
  for (std::size_t i = 0; i < depth; ++i) s += "{\"k\":";
  s += "1";
  s.append(depth, '}');
  return s;
}

std::string many_keys(std::size_t n, bool duplicate_last) {
  std::string s = "{";
  for (std::size_t i = 0; i < n; ++i) {
    if (i) s += ',';
    const std::size_t name = duplicate_last && i + 1 == n ? 0 : i;
    s += "\"key-" + std::to_string(name) + "\":" + std::to_string(i);
  }
  return s + "}";
}

// Documents of changing shapes, so that each one is built over the remains of the last:
// collections that grow, shrink or become scalars, and every acceptance rule on both sides.
std::vector<std::string> corpus() {
  return {
      R"({"apiVersion":"v1","metadata":{"name":"a","labels":{"x":"1","y":"2"}},"spec":{"levels":["r","z"]}})",
      R"({"apiVersion":"v1","metadata":{"name":"a-much-longer-name-than-sso-holds","labels":{}},"spec":{"levels":"r"}})",
      R"({"apiVersion":"v1","metadata":null,"spec":{"levels":[{"a":[1,2,3]},[],{}]}})",
      R"({"spec":{"n":[1,-0,2.5,1e5,-1.5E-3,12345678901234567890],"b":[true,false,null]}})",
      R"({"spec":{"n":[ 1 , 2 ],"s":"tab\there \u00e9 \" \\ end"}})",
      R"({"a":1,"a":2})",              // duplicate key
      R"({"a":{"b":1,"c":2,"b":3}})",  // duplicate key below the root
      many_keys(20, false),            // the hashed duplicate check
      many_keys(20, true),
      "{\"a\\u0041\":1}",                        // an escaped key
      "{\"a\":\"\\/\"}",                         // an escape yaml.v3 refuses
      "{\"a\":\"\\ud83d\\ude00\"}",              // escaped surrogates: yaml.v3 refuses
      "{\"a\"\n:1}",                             // the key's `:` on another line
      "{\"" + std::string(1030, 'k') + "\":1}",  // a key past yaml.v3's 1024 characters
      "{\"" + std::string(1000, 'k') + "\":1}",
      "{\"a\":\"\x01\"}",  // a control character
      "{\"a\":\"\xff\"}",  // invalid UTF-8
      R"({"a":1} x)",      // content after the root
      R"({"a":1}   )",
      R"({"a":[1,2})",     // malformed
      R"({"a":01})",       // not a JSON number
      R"([{"a":1}])",      // not an object
      nested_objects(63),  // the depth limit, both sides
      nested_objects(64),
      nested_objects(65),
      R"({})",
      R"({"metadata":{"name":"last","annotations":{"k":"v"}},"spec":{"levels":["a","b","c"]}})",
  };
}

void expect_same_as_decode_json(json_decoder& decoder, const std::string& doc,
                                const decode_limits& limits) {
  SCOPED_TRACE(doc.substr(0, 120));
  const decode_result want = decode_json(doc, "", limits);
  const bool reused = decode_object_reusing(decoder, doc, limits);
  EXPECT_EQ(reused, want.ok() && want.root.is_mapping());
  if (reused) {
    EXPECT_EQ(flatten(reused_tree(decoder)), flatten(want.root));
  }
}

TEST(JsonReuse, AcceptsAndBuildsExactlyWhatDecodeJsonDoes) {
  json_decoder decoder;
  const std::vector<std::string> docs = corpus();
  for (int round = 0; round < 2; ++round) {
    for (const std::string& doc : docs) expect_same_as_decode_json(decoder, doc, {});
    // The same documents in the reverse order: every shape is rebuilt over another.
    for (auto it = docs.rbegin(); it != docs.rend(); ++it)
      expect_same_as_decode_json(decoder, *it, {});
  }
}

TEST(JsonReuse, LimitsBothSides) {
  json_decoder decoder;
  const std::string doc = R"({"a":{"b":[1,2]},"c":"x"})";  // 6 nodes below the root, depth 3
  for (std::size_t nodes : {5u, 6u, 7u}) {
    decode_limits limits;
    limits.max_expanded_nodes = nodes;
    expect_same_as_decode_json(decoder, doc, limits);
  }
  for (std::size_t depth : {2u, 3u, 4u}) {
    decode_limits limits;
    limits.max_depth = depth;
    expect_same_as_decode_json(decoder, doc, limits);
  }
  for (std::size_t bytes : {doc.size() - 1, doc.size()}) {
    decode_limits limits;
    limits.max_bytes = bytes;
    expect_same_as_decode_json(decoder, doc, limits);
  }
}

TEST(JsonReuse, BuildsInsideTheCallersDocument) {
  // An object read in place from a larger document gives decode_json's tree of its text.
  json_decoder decoder;
  simdjson::dom::parser json;
  for (const std::string& inner : corpus()) {
    // Objects that are JSON, whether or not yaml.v3 would read them the same way.
    simdjson::dom::element e;
    if (json.parse(inner).get(e) != simdjson::SUCCESS || !e.is_object()) continue;
    SCOPED_TRACE(inner.substr(0, 120));
    const std::string outer = "{\"before\":[1,{\"x\":2}],\"object\":" + inner + " ,\"after\":3}";
    const simdjson::padded_string padded(outer);
    simdjson::ondemand::parser parser;
    simdjson::ondemand::document doc;
    ASSERT_EQ(parser.iterate(padded).get(doc), simdjson::SUCCESS);
    simdjson::ondemand::object top;
    ASSERT_EQ(doc.get_object().get(top), simdjson::SUCCESS);
    simdjson::ondemand::value v;
    ASSERT_EQ(top["object"].get(v), simdjson::SUCCESS);
    const char* start = v.raw_json_token().data();
    simdjson::ondemand::object obj;
    ASSERT_EQ(v.get_object().get(obj), simdjson::SUCCESS);
    const std::string_view rest(start,
                                static_cast<std::size_t>(padded.data() + outer.size() - start));
    bool built = build_object_reusing(decoder, obj, rest, {});
    const char* end = nullptr;
    built = built && doc.current_location().get(end) == simdjson::SUCCESS;
    std::string_view text;
    if (built) {
      text = std::string_view(start, static_cast<std::size_t>(end - start));
      built = json_text_acceptable(text, {});
    }
    // The text found is raw_json()'s, as decode_json would be given it.
    const std::string expected_text = inner + " ";
    const decode_result want = decode_json(expected_text);
    EXPECT_EQ(built, want.ok());
    if (built && want.ok()) {
      EXPECT_EQ(text, expected_text);
      EXPECT_EQ(flatten(reused_tree(decoder)), flatten(want.root));
    }
  }
}

}  // namespace
}  // namespace topogate::core

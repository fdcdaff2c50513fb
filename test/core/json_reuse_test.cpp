// The reusing JSON decoders (the admission path's): they accept exactly the objects that
// decode_json accepts without error, build the same tree whatever the previous document
// left in the decoder, and refuse everything else, so that the caller's fallback to
// decode_json gives the exact verdict.

#include <gtest/gtest.h>

#include <iterator>
#include <string>
#include <vector>

#include "core/document.hpp"
#include "core/document_internal.hpp"

#include <simdjson.h>

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
      R"({"a":1,"a":2})",                         // duplicate key
      R"({"a":{"b":1,"c":2,"b":3}})",             // duplicate key below the root
      many_keys(20, false),                       // the hashed duplicate check
      many_keys(20, true),
      "{\"a\\u0041\":1}",                         // an escaped key
      "{\"a\":\"\\/\"}",                          // an escape yaml.v3 refuses
      "{\"a\":\"\\ud83d\\ude00\"}",               // escaped surrogates: yaml.v3 refuses
      "{\"a\"\n:1}",                              // the key's `:` on another line
      "{\"" + std::string(1030, 'k') + "\":1}",   // a key past yaml.v3's 1024 characters
      "{\"" + std::string(1000, 'k') + "\":1}",
      "{\"a\":\"\x01\"}",                         // a control character
      "{\"a\":\"\xff\"}",                         // invalid UTF-8
      R"({"a":1} x)",                             // content after the root
      R"({"a":1}   )",
      R"({"a":[1,2})",                            // malformed
      R"({"a":01})",                              // not a JSON number
      R"([{"a":1}])",                             // not an object
      nested_objects(63),                         // the depth limit, both sides
      nested_objects(64),
      nested_objects(65),
      R"({})",
      R"({"metadata":{"name":"last","annotations":{"k":"v"}},"spec":{"levels":["a","b","c"]}})",
  };
}

void expect_same_as_decode_json(detail::decoder_state& st, const std::string& doc,
                                const decode_limits& limits) {
  SCOPED_TRACE(doc.substr(0, 120));
  const decode_result want = decode_json(doc, "", limits);
  const bool reused = detail::decode_json_object_reusing(st, doc, limits);
  EXPECT_EQ(reused, want.ok() && want.root.is_mapping());
  if (reused) {
    EXPECT_EQ(flatten(st.tree), flatten(want.root));
  }
}

TEST(JsonReuse, AcceptsAndBuildsExactlyWhatDecodeJsonDoes) {
  json_decoder decoder;
  const std::vector<std::string> docs = corpus();
  for (int round = 0; round < 2; ++round) {
    for (const std::string& doc : docs) expect_same_as_decode_json(decoder.state(), doc, {});
    // The same documents in the reverse order: every shape is rebuilt over another.
    for (auto it = docs.rbegin(); it != docs.rend(); ++it)
      expect_same_as_decode_json(decoder.state(), *it, {});
  }
}

TEST(JsonReuse, LimitsBothSides) {
  json_decoder decoder;
  const std::string doc = R"({"a":{"b":[1,2]},"c":"x"})";  // 6 nodes below the root, depth 3
  for (std::size_t nodes : {5u, 6u, 7u}) {
    decode_limits limits;
    limits.max_expanded_nodes = nodes;
    expect_same_as_decode_json(decoder.state(), doc, limits);
  }
  for (std::size_t depth : {2u, 3u, 4u}) {
    decode_limits limits;
    limits.max_depth = depth;
    expect_same_as_decode_json(decoder.state(), doc, limits);
  }
  for (std::size_t bytes : {doc.size() - 1, doc.size()}) {
    decode_limits limits;
    limits.max_bytes = bytes;
    expect_same_as_decode_json(decoder.state(), doc, limits);
  }
}

TEST(JsonReuse, BuildsInsideTheCallersDocument) {
  // An object read in place from a larger document gives decode_json's tree of its text.
  json_decoder decoder;
  detail::decoder_state& st = decoder.state();
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
    const std::string_view rest(start, static_cast<std::size_t>(padded.data() + outer.size() - start));
    bool built = detail::build_object_reusing(st, obj, rest, {});
    const char* end = nullptr;
    built = built && doc.current_location().get(end) == simdjson::SUCCESS;
    std::string_view text;
    if (built) {
      text = std::string_view(start, static_cast<std::size_t>(end - start));
      built = detail::json_text_acceptable(text, {});
    }
    // The text found is raw_json()'s, as decode_json would be given it.
    const std::string expected_text = inner + " ";
    const decode_result want = decode_json(expected_text);
    EXPECT_EQ(built, want.ok());
    if (built && want.ok()) {
      EXPECT_EQ(text, expected_text);
      EXPECT_EQ(flatten(st.tree), flatten(want.root));
    }
  }
}

// A caller that reads only some fields (build_object_reusing's `keep`): "k" whole, "m" a
// mapping read for its "k", "l" a list whose mapping items are read for their "k".
const detail::stored_field inner_reads[] = {{"k"}};
const detail::stored_fields inner_fields{std::begin(inner_reads), std::end(inner_reads)};
const detail::stored_field outer_reads[] = {{"k"}, {"m", &inner_fields}, {"l", &inner_fields, true}};
const detail::stored_fields outer_fields{std::begin(outer_reads), std::end(outer_reads)};

// decode_json's tree with the values `keep` leaves out as null, as the builder stores it.
doc_node kept(const doc_node& n, const detail::stored_fields& keep) {
  doc_node out = n;
  for (auto& [key, value] : out.map) {
    const detail::stored_field* f = keep.begin;
    while (f != keep.end && f->key != key) ++f;
    if (f == keep.end) {
      value = doc_node{};
    } else if (f->below == nullptr) {
      continue;
    } else if (!f->list && value.is_mapping()) {
      value = kept(value, *f->below);
    } else if (f->list && value.is_sequence()) {
      for (auto& item : value.items)
        if (item.is_mapping()) item = kept(item, *f->below);
    }
  }
  return out;
}

// Values that decode_json refuses, or accepts, for every rule it has; each is put where
// nothing reads it and where the caller reads it.
std::vector<std::string> hostile_values() {
  std::vector<std::string> out = {
      R"({"a":1,"a":2})", R"({"a":{"b":1,"c":2,"b":3}})", R"([{"a":1,"a":1}])",
      "{\"a\":1,\"\\u0061\":2}",  // the same key, once escaped
      "{\"a\\u0041\":1,\"aA\":2}", "{\"a\\u0041\":1}", many_keys(20, false), many_keys(20, true),
      many_keys(17, true), R"("\x41")", R"("\/")", "\"\\ud83d\\ude00\"", "\"\\ud83d\"", R"("\u00e9\t\"\\")",
      R"("\u00zz")", R"(1e999999)", R"(-1e-999999)", R"(123456789012345678901234567890)", R"(01)",
      R"(1.)", R"(-)", R"(.5)", R"(+1)", R"(0x10)", R"(1e)", R"(-0)", R"(tru)", R"(nulll)",
      R"(falsey)", R"(true)", R"(null)", R"([true,false,null])", R"({1:2})", R"({"a" "b"})",
      R"([1 2])", R"([1,])", R"({"a":1,})", R"([,1])", R"({,})", R"([1,2})", R"({"a":[1}})",
      "{\"a\"\n:1}", "{\"a\" \t :1}", "{\"" + std::string(1030, 'k') + "\":1}",
      "{\"" + std::string(1020, 'k') + "\":1}", "\"\x01\"", "\"\xff\"", "\"\xc3\xa9\"",
      R"({})", R"([])", R"([[],{},[{}]])", R"({"":1,"":2})", R"({"":1})",
  };
  for (std::size_t depth : {58u, 60u, 61u, 62u, 63u, 64u}) out.push_back(nested_objects(depth));
  return out;
}

void expect_kept_as_decode_json(detail::decoder_state& st, const std::string& inner,
                                const decode_limits& limits) {
  SCOPED_TRACE(inner.substr(0, 160));
  const std::string outer = "{\"before\":[1,{\"x\":2}],\"object\":" + inner + " ,\"after\":3}";
  const simdjson::padded_string padded(outer);
  simdjson::ondemand::parser parser;
  simdjson::ondemand::document doc;
  simdjson::ondemand::object top;
  simdjson::ondemand::value v;
  simdjson::ondemand::object obj;
  const std::string expected_text = inner + " ";
  const decode_result want = decode_json(expected_text, "", limits);
  if (parser.iterate(padded).get(doc) != simdjson::SUCCESS ||
      doc.get_object().get(top) != simdjson::SUCCESS ||
      top["object"].get(v) != simdjson::SUCCESS) {
    EXPECT_FALSE(want.ok());
    return;
  }
  const char* start = v.raw_json_token().data();
  if (v.get_object().get(obj) != simdjson::SUCCESS) {
    EXPECT_FALSE(want.ok());
    return;
  }
  const std::string_view rest(start, static_cast<std::size_t>(padded.data() + outer.size() - start));
  bool built = detail::build_object_reusing(st, obj, rest, limits, &outer_fields);
  const char* end = nullptr;
  built = built && doc.current_location().get(end) == simdjson::SUCCESS;
  std::string_view text;
  if (built) {
    text = std::string_view(start, static_cast<std::size_t>(end - start));
    built = detail::json_text_acceptable(text, limits);
  }
  EXPECT_EQ(built, want.ok());
  if (built && want.ok()) {
    EXPECT_EQ(text, expected_text);
    EXPECT_EQ(flatten(st.tree), flatten(kept(want.root, outer_fields)));
  }
}

// The objects a value is put in: unread (z, m.x, l[0].y, a list item of l that is not a
// mapping, below a read field's unread one), and read (k, m.k, l[0].k, m when not a
// mapping), next to fields that stay.
std::vector<std::string> placements(const std::string& v) {
  return {
      R"({"k":1,"z":)" + v + R"(,"m":{"k":2}})",
      R"({"m":{"x":)" + v + R"(,"k":2},"k":1})",
      R"({"l":[{"k":3,"y":)" + v + R"(},)" + v + R"(],"k":1})",
      R"({"l":{"k":3,"y":)" + v + R"(}})",
      R"({"z":{"m":)" + v + R"(},"k":)" + v + R"(})",
      R"({"m":{"k":)" + v + R"(}})",
      R"({"l":[{"k":)" + v + R"(}]})",
      R"({"m":)" + v + R"(})",
      R"({"l":)" + v + R"(})",
      R"({"z":1,"z":)" + v + R"(})",
  };
}

TEST(JsonReuse, UnreadFieldsGetDecodeJsonsVerdict) {
  // Whatever an unread field holds, the object is accepted exactly when decode_json
  // accepts it, and the fields read are decode_json's.
  json_decoder decoder;
  std::vector<std::string> docs;
  for (const std::string& v : hostile_values())
    for (std::string& doc : placements(v)) docs.push_back(std::move(doc));
  // The corpus's objects that are JSON, whether or not yaml.v3 would read them the same way.
  simdjson::dom::parser json;
  for (const std::string& doc : corpus()) {
    simdjson::dom::element e;
    if (json.parse(doc).get(e) == simdjson::SUCCESS && e.is_object()) docs.push_back(doc);
  }
  for (int round = 0; round < 2; ++round) {
    for (const std::string& doc : docs) expect_kept_as_decode_json(decoder.state(), doc, {});
    for (auto it = docs.rbegin(); it != docs.rend(); ++it)
      expect_kept_as_decode_json(decoder.state(), *it, {});
  }
}

TEST(JsonReuse, UnreadFieldsCountTowardsTheLimits) {
  json_decoder decoder;
  // 13 nodes below the root, 9 of them unread; the deepest collection at depth 3.
  const std::string doc = R"({"k":1,"z":{"a":[1,{"b":2}]},"m":{"k":2,"x":[3]}})";
  for (std::size_t nodes = 10; nodes <= 16; ++nodes) {
    decode_limits limits;
    limits.max_expanded_nodes = nodes;
    expect_kept_as_decode_json(decoder.state(), doc, limits);
  }
  for (std::size_t depth = 1; depth <= 5; ++depth) {
    decode_limits limits;
    limits.max_depth = depth;
    expect_kept_as_decode_json(decoder.state(), doc, limits);
  }
  // A list longer than the node limit, where nothing reads it.
  std::string big = R"({"k":1,"z":[)";
  for (int i = 0; i < 40; ++i) big += i ? ",0" : "0";
  big += "]}";
  for (std::size_t nodes : {40u, 42u, 43u, 44u}) {
    decode_limits limits;
    limits.max_expanded_nodes = nodes;
    expect_kept_as_decode_json(decoder.state(), big, limits);
  }
}

}  // namespace
}  // namespace topogate::core

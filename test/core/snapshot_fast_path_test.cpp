// The JSON snapshot fast path (simdjson's tape read directly, Node names checked eight bytes
// at a time) answers exactly as the general rules do.

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/document_internal.hpp"
#include "core/snapshot.hpp"
#include "core/syntax.hpp"

namespace topogate::core {
namespace {

std::string one_node(const std::string& name) {
  return R"({"apiVersion":")" + std::string(snapshot_api_version) +
         R"(","revision":"r1","nodes":{")" + name + R"(":{}}})";
}

bool has_rule(const error_list& errors, const std::string& rule) {
  for (const auto& e : errors)
    if (e.rule == rule) return true;
  return false;
}

TEST(SnapshotFastPath, NodeNameCheckMatchesDns1123Subdomain) {
  std::vector<std::string> names = {"a",
                                    "n0001",
                                    "worker-00001",
                                    "worker-0000",
                                    "worker-000001",
                                    "a.b",
                                    "a-b.c-d",
                                    "abcdefg.",
                                    "abcdefgh.",
                                    "abcdefg-",
                                    "abcdefgh-",
                                    "-abcdefgh",
                                    ".abcdefgh",
                                    "abcdefgh..x",
                                    "abcdefgh.-x",
                                    "abcdefgh-.x",
                                    "abcdefgh--x",
                                    "abc.defgh.ijklmnop.q",
                                    "Worker-1",
                                    "workeR-000001",
                                    "worker_1",
                                    "worker/1",
                                    "worker:1",
                                    "w\xc3\xa9",
                                    "wwwwwwww\xc3\xa9",
                                    "0",
                                    "9-9",
                                    "z.",
                                    "zzzzzzz,",
                                    "a,",
                                    "ab{",
                                    "a`",
                                    "a@"};
  names.push_back(std::string(253, 'a'));
  names.push_back(std::string(254, 'a'));
  names.push_back(std::string(126, 'a') + "." + std::string(126, 'b'));
  names.push_back(std::string(127, 'a') + "." + std::string(126, 'b'));
  const snapshot_context ctx{nullptr, nullptr};
  json_decoder decoder;
  for (const std::string& name : names) {
    SCOPED_TRACE(name);
    const error_list errors = check_snapshot(decoder, one_node(name), ctx);
    EXPECT_EQ(has_rule(errors, "S3"), !is_dns1123_subdomain(name));
  }
}

TEST(SnapshotFastPath, ScalarValuesAndNullEntriesDecodeAsTheConsumerReadsThem) {
  const std::string json =
      R"({"apiVersion":")" + std::string(snapshot_api_version) +
      R"(","revision":"r1","nodes":{"a":{"k":true,"l":null,"m":"x","n":false},"b":null,"c":{}}})";
  json_decoder decoder;
  const snapshot_decode_result r = decode_snapshot(decoder, json);
  ASSERT_TRUE(r.errors.empty());
  ASSERT_EQ(r.value.nodes.size(), 3u);
  ASSERT_EQ(r.value.nodes[0].labels.size(), 4u);
  EXPECT_EQ(r.value.nodes[0].labels[0].value, "true");
  EXPECT_EQ(r.value.nodes[0].labels[1].value, "");
  EXPECT_EQ(r.value.nodes[0].labels[2].value, "x");
  EXPECT_EQ(r.value.nodes[0].labels[3].value, "false");
  EXPECT_TRUE(r.value.nodes[1].labels.empty());
  EXPECT_TRUE(r.value.nodes[2].labels.empty());
  // A number keeps its literal text (the exact path), an object is a type error: both
  // agree with a fresh decoder.
  for (const std::string& value :
       {std::string("1.50"), std::string("{\"x\":1}"), std::string("[1]")}) {
    const std::string doc =
        R"({"apiVersion":"v","revision":"r","nodes":{"a":{"k":)" + value + "}}}";
    SCOPED_TRACE(doc);
    const snapshot_decode_result reused = decode_snapshot(decoder, doc);
    const snapshot_decode_result fresh = decode_snapshot(doc);
    EXPECT_EQ(reused.errors.size(), fresh.errors.size());
    EXPECT_EQ(reused.value.nodes.size(), fresh.value.nodes.size());
  }
  const snapshot_decode_result number =
      decode_snapshot(decoder, R"({"apiVersion":"v","revision":"r","nodes":{"a":{"k":1.50}}})");
  ASSERT_TRUE(number.errors.empty());
  EXPECT_EQ(number.value.nodes.at(0).labels.at(0).value, "1.50");
}

// The short-string equality used for label keys and values: every length up to and past the
// 32-byte word path, a difference at every position.
TEST(SnapshotFastPath, ShortStringEqualityFindsEveryDifference) {
  for (std::size_t n = 0; n <= 40; ++n) {
    const std::string a(n, 'k');
    EXPECT_TRUE(detail::same(a, std::string(n, 'k')));
    EXPECT_FALSE(detail::same(a, std::string(n + 1, 'k')));
    for (std::size_t at = 0; at < n; ++at) {
      std::string b = a;
      b[at] = 'K';
      SCOPED_TRACE(std::to_string(n) + "@" + std::to_string(at));
      EXPECT_FALSE(detail::same(a, b));
    }
  }
}

}  // namespace
}  // namespace topogate::core

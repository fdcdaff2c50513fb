#pragma once
// What every HTTP error answer of topogate is (server/response.hpp): a Kubernetes
// metav1.Status, as apimachinery writes it, in a JSON answer no cache keeps.

#include <gtest/gtest.h>
#include <simdjson.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "server/response.hpp"

namespace topogate::server::status_test {

// A parsed response body; string views into it live as long as this object.
struct json_doc {
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  bool ok = false;
  explicit json_doc(const std::string& text) { ok = !parser.parse(text).get(root); }
};

inline std::string str(simdjson::simdjson_result<simdjson::dom::element> v) {
  std::string_view s;
  if (v.get(s)) return "<not a string>";
  return std::string(s);
}
inline std::string str(simdjson::dom::element e) {
  return str(simdjson::simdjson_result<simdjson::dom::element>(std::move(e)));
}

// The details of a Status about one inventory: {name, topology.gpustack.ai, Snapshot}.
struct snapshot_details {
  std::string_view name;
};

// `res` is a failure Status with `code` and `reason` (and `message` when given); with
// `details`, they name that inventory's Snapshot, else the Status has no details.
inline void expect_status(const response& res, unsigned code, std::string_view reason,
                          std::optional<snapshot_details> details,
                          std::optional<std::string_view> message = std::nullopt) {
  SCOPED_TRACE(::testing::Message() << "HTTP " << code << " " << reason);
  const std::string text(res.body().str());
  EXPECT_EQ(res.result_int(), code) << text;
  EXPECT_EQ(res[http::field::content_type], "application/json");
  EXPECT_EQ(res[http::field::cache_control], "no-store");
  json_doc doc(text);
  ASSERT_TRUE(doc.ok) << text;
  EXPECT_EQ(str(doc.root["kind"]), "Status") << text;
  EXPECT_EQ(str(doc.root["apiVersion"]), "v1") << text;
  EXPECT_EQ(str(doc.root["status"]), "Failure") << text;
  EXPECT_EQ(str(doc.root["reason"]), reason) << text;
  std::int64_t got_code = 0;
  ASSERT_FALSE(doc.root["code"].get(got_code)) << text;
  EXPECT_EQ(got_code, static_cast<std::int64_t>(code)) << text;
  if (details) {
    EXPECT_EQ(str(doc.root["details"]["name"]), details->name) << text;
    EXPECT_EQ(str(doc.root["details"]["group"]), "topology.gpustack.ai") << text;
    EXPECT_EQ(str(doc.root["details"]["kind"]), "Snapshot") << text;
  } else {
    EXPECT_TRUE(doc.root["details"].error() == simdjson::NO_SUCH_FIELD) << text;
  }
  if (message) {
    EXPECT_EQ(str(doc.root["message"]), *message) << text;
  }
  EXPECT_FALSE(str(doc.root["message"]).empty()) << text;
}

}  // namespace topogate::server::status_test

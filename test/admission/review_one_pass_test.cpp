// review() reads request.object in the same parse as the envelope, into a tree its decoder
// keeps from one review to the next. Whatever the order of the envelope's fields, whatever
// the previous review left, and whatever is wrong with the object, the field errors are
// exactly those of decode_json and the validators on the object's text, and the response
// is the same byte for byte.

#include <gtest/gtest.h>
#include <simdjson.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "admission/review.hpp"
#include "core/document.hpp"
#include "core/json_reuse.hpp"
#include "core/model_deployment.hpp"
#include "core/topology_source.hpp"
#include "test/admission/fixture.hpp"

namespace topogate::admission {
namespace {

using test::fixture;
using test::json_meta;

// The reference: request.object's text through decode_json and the route's validator.
core::error_list reference_errors(route rt, const std::string& body) {
  simdjson::ondemand::parser parser;
  const simdjson::padded_string padded(body);
  simdjson::ondemand::document doc;
  EXPECT_EQ(parser.iterate(padded).get(doc), simdjson::SUCCESS);
  simdjson::ondemand::object object;
  EXPECT_EQ(doc["request"]["object"].get_object().get(object), simdjson::SUCCESS) << body;
  std::string_view text;
  EXPECT_EQ(object.raw_json().get(text), simdjson::SUCCESS) << body;
  core::decode_result decoded = core::decode_json(text);
  if (!decoded.ok()) return decoded.errors;
  return rt == route::topology_sources ? core::validate_topology_source(decoded.root, {}).errors
                                       : core::validate_model_deployment(decoded.root).errors;
}

std::vector<std::string> rendered(const core::error_list& errors) {
  std::vector<std::string> out;
  for (const auto& e : errors) out.push_back(e.rule + "|" + e.path + "|" + e.to_string());
  return out;
}

// The same review with request.object moved before every other request field: the object is
// then met before its kind and operation, and decoded from its text afterwards.
std::string object_first(const std::string& body) {
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  simdjson::dom::object top;
  EXPECT_EQ(parser.parse(body).get(root), simdjson::SUCCESS);
  EXPECT_EQ(root.get_object().get(top), simdjson::SUCCESS);
  std::string out = "{";
  for (const simdjson::dom::key_value_pair field : top) {
    if (out.size() > 1) out += ',';
    out += '"' + std::string(field.key) + "\":";
    simdjson::dom::object req;
    if (field.key != "request" || field.value.get_object().get(req) != simdjson::SUCCESS) {
      out += simdjson::to_string(field.value);
      continue;
    }
    simdjson::dom::element object;
    EXPECT_EQ(req["object"].get(object), simdjson::SUCCESS);
    out += "{\"object\":" + simdjson::to_string(object);
    for (const simdjson::dom::key_value_pair rfield : req) {
      if (rfield.key == "object") continue;
      out += ",\"" + std::string(rfield.key) + "\":" + simdjson::to_string(rfield.value);
    }
    out += '}';
  }
  return out + "}";
}

// A review whose object starts with `prefix` (inserted after the object's `{`).
std::string with_object_prefix(const std::string& body, const std::string& prefix) {
  std::string out = body;
  const std::size_t at = out.find("\"object\":{");
  EXPECT_NE(at, std::string::npos);
  out.insert(at + 10, prefix);
  return out;
}

struct review_case {
  route rt;
  std::string body;
};

std::vector<review_case> cases() {
  std::vector<review_case> out;
  const auto sources = {"allowed.json",  "denied.json",          "update_denied.json",
                        "warnings.json", "v1beta1_allowed.json", "v1beta1_denied.json"};
  for (const char* name : sources) {
    const std::string body = fixture(name);
    out.push_back({route::topology_sources, body});
    out.push_back({route::topology_sources, object_first(body)});
  }
  for (const char* name : {"modeldeployment_allowed.json", "modeldeployment_denied.json"}) {
    out.push_back({route::model_deployments, fixture(name)});
    out.push_back({route::model_deployments, object_first(fixture(name))});
  }
  const std::string denied = fixture("denied.json");
  // Objects decode_json refuses, each for another rule: the review reports its errors.
  std::string deep;
  for (int i = 0; i < 70; ++i) deep += "{\"d\":";
  deep += "1";
  deep.append(70, '}');
  for (const std::string& prefix :
       {std::string(R"("dup":1,"dup":2,)"), std::string(R"("esc":"\/",)"),
        std::string("\"pair\":\"\\ud83d\\ude00\","), std::string("\"deep\":" + deep + ","),
        std::string("\"" + std::string(1100, 'k') + "\":1,"), std::string(R"("n":[1,2,3],)")}) {
    out.push_back({route::topology_sources, with_object_prefix(denied, prefix)});
    out.push_back({route::topology_sources, object_first(with_object_prefix(denied, prefix))});
  }
  return out;
}

TEST(ReviewOnePass, FieldErrorsAreThoseOfDecodeJsonAndTheValidators) {
  core::json_decoder shared;
  const std::vector<review_case> all = cases();
  for (int round = 0; round < 2; ++round) {
    for (std::size_t i = 0; i < all.size(); ++i) {
      // Forwards, then backwards: each review is read over another's tree.
      const review_case& c = all[round == 0 ? i : all.size() - 1 - i];
      SCOPED_TRACE(c.body.substr(0, 160));
      const outcome out = review(c.rt, c.body, json_meta, {}, shared);
      ASSERT_EQ(out.error, failure::none) << out.message;
      const core::error_list want = reference_errors(c.rt, c.body);
      EXPECT_EQ(rendered(out.errors), rendered(want));
      EXPECT_EQ(out.result, want.empty() ? verdict::allowed : verdict::denied);
      // A fresh decoder answers byte for byte the same.
      core::json_decoder fresh;
      EXPECT_EQ(review(c.rt, c.body, json_meta, {}, fresh).body, out.body);
    }
  }
}

TEST(ReviewOnePass, FieldOrderDoesNotChangeTheResponse) {
  core::json_decoder shared;
  for (const char* name : {"allowed.json", "denied.json", "warnings.json"}) {
    SCOPED_TRACE(name);
    const std::string body = fixture(name);
    const outcome in_order = review(route::topology_sources, body, json_meta, {}, shared);
    const outcome reordered =
        review(route::topology_sources, object_first(body), json_meta, {}, shared);
    EXPECT_EQ(reordered.body, in_order.body);
    EXPECT_EQ(reordered.warning_count, in_order.warning_count);
  }
}

TEST(ReviewOnePass, EnvelopeErrorsAfterTheObjectStillWin) {
  // The object is read before the envelope is finished; a later malformed field is still
  // the request's HTTP 400, and a later repeated field still decides.
  core::json_decoder shared;
  std::string body = fixture("allowed.json");
  ASSERT_EQ(body.back() == '\n' ? body[body.size() - 2] : body.back(), '}');
  const std::size_t end = body.rfind('}');
  const std::size_t request_end = body.rfind('}', end - 1);
  std::string bad_uid = body;
  bad_uid.insert(request_end, ",\"uid\":5");
  const outcome bad = review(route::topology_sources, bad_uid, json_meta, {}, shared);
  EXPECT_EQ(bad.error, failure::bad_request) << bad.message;
  EXPECT_EQ(bad.result, verdict::errored);

  std::string now_delete = fixture("denied.json");
  now_delete.insert(now_delete.rfind('}', now_delete.rfind('}') - 1), ",\"operation\":\"DELETE\"");
  const outcome deleted = review(route::topology_sources, now_delete, json_meta, {}, shared);
  EXPECT_EQ(deleted.result, verdict::allowed) << deleted.body;
  EXPECT_TRUE(deleted.errors.empty());

  std::string second_object = fixture("denied.json");
  second_object.insert(second_object.rfind('}', second_object.rfind('}') - 1),
                       ",\"object\":" + std::string(R"({"apiVersion":"v1","dup":1,"dup":2})"));
  const outcome twice = review(route::topology_sources, second_object, json_meta, {}, shared);
  EXPECT_EQ(
      rendered(twice.errors),
      rendered(reference_errors(route::topology_sources,
                                R"({"request":{"object":{"apiVersion":"v1","dup":1,"dup":2}}})")));
  EXPECT_EQ(twice.result, verdict::denied);
}

TEST(ReviewOnePass, MalformedObjectsAreRefusedAsBefore) {
  // A truncated object fails the envelope itself; a malformed one inside a complete
  // envelope is refused too. Either way the answer does not depend on the decoder's past.
  core::json_decoder shared;
  std::string broken = fixture("denied.json");
  broken.insert(broken.find("\"object\":{") + 10, R"("n":[1,2},)");
  for (const std::string& body : {fixture("malformed_truncated.json"), broken}) {
    SCOPED_TRACE(body.substr(0, 160));
    (void)review(route::topology_sources, fixture("allowed.json"), json_meta, {}, shared);
    const outcome a = review(route::topology_sources, body, json_meta, {}, shared);
    core::json_decoder fresh;
    const outcome b = review(route::topology_sources, body, json_meta, {}, fresh);
    EXPECT_NE(a.result, verdict::allowed) << a.body;
    EXPECT_EQ(a.error, b.error);
    EXPECT_EQ(a.message, b.message);
    EXPECT_EQ(a.body, b.body);
  }
}

TEST(ReviewOnePass, OnlyReviewsUpTo64KiBLeaveTheirTreeInTheDecoder) {
  // The decoder keeps a small review's tree for the next one; after a larger review it
  // holds none, so that a thread does not keep a large tree for the rest of its life.
  core::json_decoder shared;
  const std::string small = fixture("allowed.json");
  for (const std::size_t size : {std::size_t{64 * 1024}, std::size_t{64 * 1024 + 1}}) {
    SCOPED_TRACE(size);
    std::string body = with_object_prefix(small, R"("padding":"",)");
    const std::size_t at = body.find(R"("padding":"")") + 11;
    ASSERT_LT(body.size(), size);
    body.insert(at, size - body.size(), 'p');
    ASSERT_EQ(body.size(), size);
    const outcome out = review(route::topology_sources, body, json_meta, {}, shared);
    ASSERT_EQ(out.error, failure::none) << out.message;
    EXPECT_EQ(rendered(out.errors), rendered(reference_errors(route::topology_sources, body)));
    EXPECT_EQ(core::reused_tree(shared).map.empty(), size > 64 * 1024);
    // The next review is answered the same either way.
    core::json_decoder fresh;
    EXPECT_EQ(review(route::topology_sources, small, json_meta, {}, shared).body,
              review(route::topology_sources, small, json_meta, {}, fresh).body);
  }
}

}  // namespace
}  // namespace topogate::admission

#include "admission/review.hpp"

#include <gtest/gtest.h>
#include <simdjson.h>

#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "core/k8s_status.hpp"
#include "test/admission/fixture.hpp"

namespace topogate::admission {
namespace {

using test::fixture;
using test::json_meta;

struct parsed {
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  explicit parsed(const std::string& body) {
    EXPECT_EQ(parser.parse(body).get(root), simdjson::SUCCESS) << body;
  }
  std::string str(std::string_view ptr) {
    std::string_view s;
    if (root.at_pointer(ptr).get(s) != simdjson::SUCCESS) return "<missing>";
    return std::string(s);
  }
  bool boolean(std::string_view ptr) {
    bool b = false;
    EXPECT_EQ(root.at_pointer(ptr).get(b), simdjson::SUCCESS) << ptr;
    return b;
  }
  int64_t integer(std::string_view ptr) {
    int64_t v = -1;
    EXPECT_EQ(root.at_pointer(ptr).get(v), simdjson::SUCCESS) << ptr;
    return v;
  }
  bool has(std::string_view ptr) { return root.at_pointer(ptr).error() == simdjson::SUCCESS; }
};

// Rule ids of a denial, read from the "[T4] ..." prefix of each cause message.
std::multiset<std::string> cause_rules(parsed& p, std::vector<std::string>* fields = nullptr) {
  std::multiset<std::string> rules;
  simdjson::dom::array causes;
  EXPECT_EQ(p.root.at_pointer("/response/status/details/causes").get(causes), simdjson::SUCCESS);
  for (auto c : causes) {
    std::string_view msg, field, reason;
    EXPECT_EQ(c["message"].get(msg), simdjson::SUCCESS);
    EXPECT_EQ(c["field"].get(field), simdjson::SUCCESS);
    EXPECT_EQ(c["reason"].get(reason), simdjson::SUCCESS);
    EXPECT_TRUE(reason.starts_with("FieldValue")) << reason;
    if (msg.starts_with("[")) rules.insert(std::string(msg.substr(1, msg.find(']') - 1)));
    if (fields) fields->emplace_back(field);
  }
  return rules;
}

TEST(Review, AllowedEchoesUidAndVersion) {
  auto out = review(route::topology_sources, fixture("allowed.json"), json_meta, {});
  ASSERT_EQ(out.error, failure::none) << out.message;
  EXPECT_EQ(out.result, verdict::allowed);
  EXPECT_EQ(out.kind, "TopologySource");
  parsed p(out.body);
  EXPECT_EQ(p.str("/apiVersion"), "admission.k8s.io/v1");
  EXPECT_EQ(p.str("/kind"), "AdmissionReview");
  EXPECT_EQ(p.str("/response/uid"), "705ab4f5-6393-11e8-b7cc-42010a800002");
  EXPECT_TRUE(p.boolean("/response/allowed"));
  EXPECT_FALSE(p.has("/response/status"));
}

TEST(Review, DeniedListsEveryFieldError) {
  auto out = review(route::topology_sources, fixture("denied.json"), json_meta, {});
  ASSERT_EQ(out.error, failure::none) << out.message;
  EXPECT_EQ(out.result, verdict::denied);
  parsed p(out.body);
  EXPECT_EQ(p.str("/response/uid"), "9c1f2b7e-0d3a-4f55-9a8e-0b5e2c6d7f10");
  EXPECT_FALSE(p.boolean("/response/allowed"));
  EXPECT_EQ(p.integer("/response/status/code"), 422);
  EXPECT_EQ(p.str("/response/status/reason"), "Invalid");
  EXPECT_EQ(p.str("/response/status/status"), "Failure");
  EXPECT_EQ(p.str("/response/status/details/kind"), "TopologySource");
  EXPECT_EQ(p.str("/response/status/details/group"), "worker.gpustack.ai");
  EXPECT_EQ(p.str("/response/status/details/name"), "inventory-service");
  std::vector<std::string> fields;
  const auto rules = cause_rules(p, &fields);
  for (const char* r : {"T3", "T4", "T6", "T9", "T11", "T13"})
    EXPECT_EQ(rules.count(r), 1u) << r << " in " << out.body;
  EXPECT_EQ(fields.size(), out.errors.size());
  // The message is apierrors.NewInvalid's: every field error, bracketed when several.
  const std::string msg = p.str("/response/status/message");
  EXPECT_TRUE(
      msg.starts_with("TopologySource.worker.gpustack.ai \"inventory-service\" is invalid: ["))
      << msg;
  EXPECT_TRUE(msg.ends_with("]")) << msg;
  for (const auto& f : fields) EXPECT_NE(msg.find(f + ": "), std::string::npos) << f;
}

TEST(Review, UpdateValidatesTheNewObject) {
  auto out = review(route::topology_sources, fixture("update_denied.json"), json_meta, {});
  EXPECT_EQ(out.result, verdict::denied);
  parsed p(out.body);
  EXPECT_EQ(p.str("/response/uid"), "b5c6d7e8-f901-4a2b-8c3d-4e5f6a7b8c9d");
}

TEST(Review, DeleteIsAllowedWhateverTheOldObject) {
  auto out = review(route::topology_sources, fixture("delete.json"), json_meta, {});
  ASSERT_EQ(out.error, failure::none);
  EXPECT_EQ(out.result, verdict::allowed);
  parsed p(out.body);
  EXPECT_EQ(p.str("/response/uid"), "e4d1c3b2-a190-4f8e-9d7c-6b5a4f3e2d1c");
  EXPECT_TRUE(p.boolean("/response/allowed"));
}

TEST(Review, ConnectIsAllowed) {
  std::string body = fixture("denied.json");
  body.replace(body.find("\"CREATE\""), 8, "\"CONNECT\"");
  EXPECT_EQ(review(route::topology_sources, body, json_meta, {}).result, verdict::allowed);
}

TEST(Review, AnswersInTheVersionAsked) {
  auto out = review(route::topology_sources, fixture("v1beta1_denied.json"), json_meta, {});
  EXPECT_EQ(out.result, verdict::denied);
  parsed p(out.body);
  EXPECT_EQ(p.str("/apiVersion"), "admission.k8s.io/v1beta1");
  EXPECT_EQ(p.str("/response/uid"), "11111111-2222-4333-8444-555555555555");
  auto ok = review(route::topology_sources, fixture("v1beta1_allowed.json"), json_meta, {});
  EXPECT_EQ(ok.result, verdict::allowed);
  EXPECT_EQ(parsed(ok.body).str("/apiVersion"), "admission.k8s.io/v1beta1");
}

TEST(Review, WarningsAreReturnedWithinApiserverLimits) {
  auto out = review(route::topology_sources, fixture("warnings.json"), json_meta, {});
  ASSERT_EQ(out.result, verdict::allowed) << out.body;
  ASSERT_GE(out.warning_count, 1u) << out.body;
  parsed p(out.body);
  simdjson::dom::array warnings;
  ASSERT_EQ(p.root.at_pointer("/response/warnings").get(warnings), simdjson::SUCCESS);
  for (auto w : warnings) {
    std::string_view s;
    ASSERT_EQ(w.get(s), simdjson::SUCCESS);
    EXPECT_LE(s.size(), max_warning_length);
    for (char c : s) EXPECT_GE(static_cast<unsigned char>(c), 0x20);
  }
}

// A bare requiredLevel is a valid label key to the consumer: allowed, with a warning naming
// the role; "" is unset (no warning).
TEST(Review, BareRequiredLevelIsAWarningNotADenial) {
  auto out =
      review(route::model_deployments, fixture("modeldeployment_bare_word.json"), json_meta, {});
  ASSERT_EQ(out.result, verdict::allowed) << out.body;
  ASSERT_EQ(out.warning_count, 1u) << out.body;
  parsed p(out.body);
  EXPECT_NE(p.str("/response/warnings/0").find("spec.roles[0].topology.requiredLevel"),
            std::string::npos)
      << out.body;
}

TEST(Review, KindsTheRouteDoesNotHandleAreAllowed) {
  auto cm = review(route::topology_sources, fixture("other_kind.json"), json_meta, {});
  EXPECT_EQ(cm.result, verdict::allowed);
  EXPECT_EQ(cm.kind, "other");
  // A TopologySource sent to the ModelDeployment route is not that route's business.
  auto ts = review(route::model_deployments, fixture("denied.json"), json_meta, {});
  EXPECT_EQ(ts.result, verdict::allowed);
  EXPECT_EQ(ts.kind, "other");
}

TEST(Review, ModelDeploymentRoleTopology) {
  auto out =
      review(route::model_deployments, fixture("modeldeployment_denied.json"), json_meta, {});
  ASSERT_EQ(out.result, verdict::denied) << out.body;
  parsed p(out.body);
  const auto rules = cause_rules(p);
  EXPECT_EQ(rules.count("M1"), 1u) << out.body;
  EXPECT_EQ(rules.count("M2"), 1u) << out.body;
  EXPECT_EQ(review(route::model_deployments, fixture("modeldeployment_allowed.json"), json_meta, {})
                .result,
            verdict::allowed);
}

TEST(Review, MalformedRequestsAreBadRequestsWithTheReason) {
  for (const char* f :
       {"malformed_not_json.txt", "malformed_missing_uid.json", "malformed_no_request.json",
        "malformed_wrong_api_version.json", "malformed_wrong_kind.json", "malformed_truncated.json",
        "malformed_array.json"}) {
    auto out = review(route::topology_sources, fixture(f), json_meta, {});
    EXPECT_EQ(out.error, failure::bad_request) << f;
    EXPECT_EQ(out.result, verdict::errored) << f;
    // The server answers it (400 with a Status: router_test); the review only says why.
    EXPECT_FALSE(out.message.empty()) << f;
    EXPECT_TRUE(out.body.empty()) << f;
  }
}

TEST(Review, EmptyBodyIs400) {
  EXPECT_EQ(review(route::topology_sources, "", json_meta, {}).error, failure::bad_request);
}

TEST(Review, EmptyUidIs400) {
  std::string body = fixture("allowed.json");
  const auto pos = body.find("705ab4f5-6393-11e8-b7cc-42010a800002");
  body.erase(pos, std::string_view("705ab4f5-6393-11e8-b7cc-42010a800002").size());
  EXPECT_EQ(review(route::topology_sources, body, json_meta, {}).error, failure::bad_request);
}

TEST(Review, CreateWithoutObjectIs400) {
  std::string body = fixture("delete.json");
  body.replace(body.find("\"DELETE\""), 8, "\"CREATE\"");
  EXPECT_EQ(review(route::topology_sources, body, json_meta, {}).error, failure::bad_request);
}

TEST(Review, ContentTypeMustBeJson) {
  const std::string body = fixture("allowed.json");
  for (std::string_view ct : {"text/plain", "", "application/yaml", "application/jsonx"}) {
    EXPECT_EQ(review(route::topology_sources, body, {ct, std::nullopt}, {}).error,
              failure::unsupported_media_type)
        << ct;
  }
  for (std::string_view ct :
       {"application/json", "application/json; charset=utf-8", "Application/JSON"}) {
    EXPECT_EQ(review(route::topology_sources, body, {ct, std::nullopt}, {}).error, failure::none)
        << ct;
  }
  // The command line has no Content-Type to check.
  EXPECT_EQ(review(route::topology_sources, body, {}, {}).error, failure::none);
}

TEST(Review, BodyLimitBothSides) {
  options opts;
  std::string body = fixture("allowed.json");
  opts.max_body_bytes = body.size() + 10;
  std::string at_limit = body;
  at_limit.append(opts.max_body_bytes - body.size(), ' ');  // trailing white space is valid JSON
  EXPECT_EQ(review(route::topology_sources, at_limit, json_meta, opts).error, failure::none);
  at_limit.push_back(' ');
  EXPECT_EQ(review(route::topology_sources, at_limit, json_meta, opts).error, failure::too_large);
}

TEST(Review, ExpiredDeadlineIsATimeout) {
  request_meta meta = json_meta;
  meta.deadline = std::chrono::steady_clock::now() - std::chrono::seconds(1);
  auto out = review(route::topology_sources, fixture("allowed.json"), meta, {});
  EXPECT_EQ(out.error, failure::timeout);
  meta.deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  EXPECT_EQ(review(route::topology_sources, fixture("allowed.json"), meta, {}).error,
            failure::none);
}

TEST(Review, GenerateNameUsesObjectName) {
  std::string body = fixture("denied.json");
  const std::string_view from = "\"name\":\"inventory-service\",\"operation\"";
  body.replace(body.find(from), from.size(), "\"name\":\"\",\"operation\"");
  auto out = review(route::topology_sources, body, json_meta, {});
  ASSERT_EQ(out.result, verdict::denied) << body;
  EXPECT_EQ(parsed(out.body).str("/response/status/details/name"), "inventory-service");
}

TEST(Review, ReservedPrefixesAreConfigurable) {
  options opts;
  opts.validation.reserved_prefixes = {"example.com"};
  std::string body = fixture("allowed.json");
  // Not a write-prefix case, but the options must reach the core: a worker namespace
  // other than the object's reference namespace turns an allowed object into a denial.
  opts.validation.worker_namespace = "other-namespace";
  auto out = review(route::topology_sources, body, json_meta, opts);
  EXPECT_EQ(out.result, verdict::denied) << out.body;
  parsed p(out.body);
  EXPECT_EQ(cause_rules(p).count("T13"), 1u) << out.body;
}

TEST(SanitizeWarning, StripsControlsAndCutsOnUtf8Boundary) {
  EXPECT_EQ(sanitize_warning("a\tb\nc\x7f"
                             "d"),
            "abcd");
  EXPECT_EQ(sanitize_warning(std::string(120, 'x')).size(), 120u);
  EXPECT_EQ(sanitize_warning(std::string(121, 'x')).size(), 120u);
  // 119 ASCII bytes then a 2-byte character: cutting at 120 would split it.
  const std::string s = std::string(119, 'x') + "\xc3\xa9";
  EXPECT_EQ(sanitize_warning(s), std::string(119, 'x'));
}

TEST(CauseType, MatchesApimachinery) {
  EXPECT_EQ(core::status_cause_type(core::error_type::duplicate), "FieldValueDuplicate");
  EXPECT_EQ(core::status_cause_type(core::error_type::required), "FieldValueRequired");
  EXPECT_EQ(core::status_cause_type(core::error_type::too_many), "FieldValueTooMany");
  EXPECT_EQ(core::status_cause_type(core::error_type::forbidden), "FieldValueForbidden");
}

}  // namespace
}  // namespace topogate::admission

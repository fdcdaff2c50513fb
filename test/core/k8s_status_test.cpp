// core/k8s_status: the failure metav1.Status as apimachinery writes it, byte for byte where
// this project fixes the bytes (key order, escaping), text for text where apimachinery fixes
// the text (NewInvalid's message, field.ErrorType's strings, ErrorBody, %q).

#include "core/k8s_status.hpp"

#include <gtest/gtest.h>
#include <simdjson.h>

#include <string>
#include <utility>
#include <vector>

namespace topogate::core {
namespace {

// Every output is a JSON document on its own (the embedded form is an object too).
void expect_valid_json(const std::string& text) {
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  EXPECT_EQ(parser.parse(text).get(root), simdjson::SUCCESS) << text;
}

std::string invalid_status(std::string_view group, std::string_view kind, std::string_view name,
                           const error_list& errors, bool with_type_meta = true) {
  std::string out;
  append_invalid_status(out, group, kind, name, errors, with_type_meta);
  expect_valid_json(out);
  return out;
}

// The message of an invalid status, as its reader gets it (unescaped).
std::string message_of(const std::string& status) {
  simdjson::dom::parser parser;
  std::string_view m;
  EXPECT_EQ(parser.parse(status)["message"].get(m), simdjson::SUCCESS) << status;
  return std::string(m);
}

constexpr std::string_view ts_group = "worker.gpustack.ai";
constexpr std::string_view ts_kind = "TopologySource";

TEST(K8sStatus, ErrorTypeStringsAndCauseTypesAreApimachinerys) {
  // pkg/util/validation/field/errors.go: ErrorType's constants and String().
  const std::vector<std::pair<error_type, std::pair<std::string_view, std::string_view>>> want = {
      {error_type::required, {"Required value", "FieldValueRequired"}},
      {error_type::invalid, {"Invalid value", "FieldValueInvalid"}},
      {error_type::forbidden, {"Forbidden", "FieldValueForbidden"}},
      {error_type::duplicate, {"Duplicate value", "FieldValueDuplicate"}},
      {error_type::too_many, {"Too many", "FieldValueTooMany"}},
      {error_type::not_supported, {"Unsupported value", "FieldValueNotSupported"}},
      {error_type::too_long, {"Too long", "FieldValueTooLong"}},
      {error_type::not_found, {"Not found", "FieldValueNotFound"}},
  };
  for (const auto& [type, strings] : want) {
    EXPECT_EQ(to_string(type), strings.first);
    EXPECT_EQ(status_cause_type(type), strings.second);
  }
}

TEST(K8sStatus, FailureStatusWithoutDetails) {
  const std::string s =
      failure_status(415, "UnsupportedMediaType", "Content-Type must be \"application/json\"");
  EXPECT_EQ(
      s,
      R"({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",)"
      R"("message":"Content-Type must be \"application/json\"","reason":"UnsupportedMediaType","code":415})");
  expect_valid_json(s);
}

TEST(K8sStatus, FailureStatusWithDetails) {
  const status_details no_causes{"inv", "topology.gpustack.ai", "Snapshot", nullptr};
  const std::string s = failure_status(409, "Conflict", "revision r2 is stale", &no_causes);
  EXPECT_EQ(
      s,
      R"({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"revision r2 is stale",)"
      R"("reason":"Conflict","details":{"name":"inv","group":"topology.gpustack.ai","kind":"Snapshot"},"code":409})");
  expect_valid_json(s);

  const error_list errors = {required("S2", "revision"),
                             invalid("", "nodes[w\"1]", "a\tb", "must be \"x\"")};
  const status_details with_causes{"inv", "", "Snapshot", &errors};
  const std::string c = failure_status(422, "Invalid", "Snapshot \"inv\" is invalid", &with_causes);
  EXPECT_EQ(
      c,
      R"({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Snapshot \"inv\" is invalid",)"
      R"("reason":"Invalid","details":{"name":"inv","group":"","kind":"Snapshot","causes":[)"
      R"({"reason":"FieldValueRequired","message":"[S2] Required value","field":"revision"},)"
      R"({"reason":"FieldValueInvalid","message":"Invalid value: \"a\\tb\": must be \"x\"","field":"nodes[w\"1]"}]},)"
      R"("code":422})");
  expect_valid_json(c);

  // An empty list of causes is written as one.
  const error_list none;
  const status_details empty_causes{"inv", "", "Snapshot", &none};
  EXPECT_NE(
      failure_status(422, "Invalid", "m", &empty_causes).find(R"("kind":"Snapshot","causes":[]})"),
      std::string::npos);
}

TEST(K8sStatus, InvalidWithoutErrorsIsApimachinerysNewInvalid) {
  // NewInvalid with an empty list: no ": <aggregate>" (ToAggregate is nil), and the empty
  // causes are left out (omitempty).
  EXPECT_EQ(
      invalid_status(ts_group, ts_kind, "ts", {}),
      R"({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",)"
      R"("message":"TopologySource.worker.gpustack.ai \"ts\" is invalid","reason":"Invalid",)"
      R"("details":{"name":"ts","group":"worker.gpustack.ai","kind":"TopologySource"},"code":422})");
}

TEST(K8sStatus, OneErrorIsNotBracketed) {
  const error_list errors = {invalid("T2", "spec.levels[0]", "zone", "must be a label key")};
  EXPECT_EQ(
      invalid_status(ts_group, ts_kind, "ts", errors, false),
      R"({"metadata":{},"status":"Failure","message":"TopologySource.worker.gpustack.ai \"ts\" is invalid: )"
      R"(spec.levels[0]: Invalid value: \"zone\": must be a label key","reason":"Invalid",)"
      R"("details":{"name":"ts","group":"worker.gpustack.ai","kind":"TopologySource","causes":[)"
      R"({"reason":"FieldValueInvalid","message":"[T2] Invalid value: \"zone\": must be a label key",)"
      R"("field":"spec.levels[0]"}]},"code":422})");
}

TEST(K8sStatus, SeveralErrorsAreBracketedAndEachHasACause) {
  const error_list errors = {duplicate("T4", "spec.levels[2]", "topology.kubernetes.io/zone"),
                             required("", "spec.webhook.url"),
                             too_many("T1", "spec.levels", 17, 16)};
  const std::string body = invalid_status(ts_group, ts_kind, "ts", errors, true);
  EXPECT_EQ(
      body,
      R"({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",)"
      R"("message":"TopologySource.worker.gpustack.ai \"ts\" is invalid: [)"
      R"(spec.levels[2]: Duplicate value: \"topology.kubernetes.io/zone\", )"
      R"(spec.webhook.url: Required value, )"
      R"(spec.levels: Too many: must have at most 16 items (has 17)]","reason":"Invalid",)"
      R"("details":{"name":"ts","group":"worker.gpustack.ai","kind":"TopologySource","causes":[)"
      R"({"reason":"FieldValueDuplicate","message":"[T4] Duplicate value: \"topology.kubernetes.io/zone\"","field":"spec.levels[2]"},)"
      R"({"reason":"FieldValueRequired","message":"Required value","field":"spec.webhook.url"},)"
      R"j({"reason":"FieldValueTooMany","message":"[T1] Too many: must have at most 16 items (has 17)","field":"spec.levels"}]},)j"
      R"("code":422})");
  // The embedded form is the same object without its type meta.
  const std::string embedded = invalid_status(ts_group, ts_kind, "ts", errors, false);
  EXPECT_EQ(R"({"kind":"Status","apiVersion":"v1",)" + embedded.substr(1), body);
}

TEST(K8sStatus, TheAggregateKeepsEachErrorTextOnce) {
  // field.ErrorList.ToAggregate(): a text already seen is left out of the message (and the
  // brackets count what remains); every error keeps its cause.
  const error_list dup = {invalid("T2", "a", "1"), invalid("T9", "a", "1"), required("", "b")};
  const std::string s = invalid_status("g", "K", "n", dup);
  EXPECT_EQ(message_of(s), R"(K.g "n" is invalid: [a: Invalid value: "1", b: Required value])");
  EXPECT_NE(
      s.find(
          R"("causes":[{"reason":"FieldValueInvalid","message":"[T2] Invalid value: \"1\"","field":"a"},)"
          R"({"reason":"FieldValueInvalid","message":"[T9] Invalid value: \"1\"","field":"a"},)"
          R"({"reason":"FieldValueRequired","message":"Required value","field":"b"}])"),
      std::string::npos)
      << s;

  const error_list same = {invalid("", "a", "1"), invalid("", "a", "1"), invalid("", "a", "1")};
  const std::string one = invalid_status("g", "K", "n", same);
  EXPECT_EQ(message_of(one), R"(K.g "n" is invalid: a: Invalid value: "1")");
  EXPECT_NE(
      one.find(
          R"("causes":[{"reason":"FieldValueInvalid","message":"Invalid value: \"1\"","field":"a"},)"
          R"({"reason":"FieldValueInvalid","message":"Invalid value: \"1\"","field":"a"},)"
          R"({"reason":"FieldValueInvalid","message":"Invalid value: \"1\"","field":"a"}])"),
      std::string::npos)
      << one;

  // Texts that only end alike, or split differently between field and body, are distinct.
  const error_list near = {invalid("", "a: Invalid value", "x"), invalid("", "a", "x"),
                           invalid("", "a", std::string("x\0", 2))};
  EXPECT_EQ(
      message_of(invalid_status("g", "K", "n", near)),
      R"(K.g "n" is invalid: [a: Invalid value: Invalid value: "x", a: Invalid value: "x", a: Invalid value: "x\x00"])");

  // Past sixteen errors the texts are compared by hash: the same verdicts.
  error_list many;
  std::string want = R"(K.g "n" is invalid: [)";
  for (int i = 0; i < 40; ++i) {
    many.push_back(invalid("", "f[" + std::to_string(i % 7) + "]", std::to_string(i % 5)));
    if (i < 35) {  // i % 7 and i % 5 repeat together from 35 on
      if (i) want += ", ";
      want += "f[" + std::to_string(i % 7) + "]: Invalid value: \"" + std::to_string(i % 5) + "\"";
    }
  }
  want += ']';
  const std::string m = invalid_status("g", "K", "n", many);
  EXPECT_EQ(message_of(m), want);
  simdjson::dom::parser parser;
  simdjson::dom::array causes;
  ASSERT_EQ(parser.parse(m)["details"]["causes"].get(causes), simdjson::SUCCESS);
  EXPECT_EQ(causes.size(), 40u);
  const error_list many_same(20, required("", "x"));
  EXPECT_EQ(message_of(invalid_status("g", "K", "n", many_same)),
            R"(K.g "n" is invalid: x: Required value)");
}

TEST(K8sStatus, EmptyGroupIsTheKindAlone) {
  const std::string s = invalid_status("", "Snapshot", "inv", {required("S2", "revision")});
  EXPECT_EQ(
      s,
      R"({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",)"
      R"("message":"Snapshot \"inv\" is invalid: revision: Required value","reason":"Invalid",)"
      R"("details":{"name":"inv","group":"","kind":"Snapshot","causes":[)"
      R"({"reason":"FieldValueRequired","message":"[S2] Required value","field":"revision"}]},"code":422})");
}

TEST(K8sStatus, NamesAndMessagesAreQuotedAsGoAndEscapedAsJson) {
  // The message quotes the name with %q (Go's escapes, then JSON's); details.name is the
  // name itself. Non-ASCII printable text passes through; C1 controls, U+2028 and invalid
  // UTF-8 are escaped by both layers.
  const std::string name = "a\"b\\c\x01\xc3\xa9\xe2\x80\xa8";
  const error_list errors = {
      invalid("T\"9", "spec.k[\"x\"]", "v\a\x7f\xc2\x85\xff", "say \"hi\"\n\xc3\xa9")};
  const std::string s = invalid_status("g", "K", name, errors);
  EXPECT_EQ(
      s,
      R"({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":)"
      R"("K.g \"a\\\"b\\\\c\\x01)"
      "\xc3\xa9"
      R"(\\u2028\" is invalid: )"
      R"(spec.k[\"x\"]: Invalid value: \"v\\a\\x7f\\u0085\\xff\": say \"hi\"\n)"
      "\xc3\xa9"
      R"(",)"
      R"("reason":"Invalid","details":{"name":"a\"b\\c\u0001)"
      "\xc3\xa9"
      R"(\u2028","group":"g","kind":"K",)"
      R"("causes":[{"reason":"FieldValueInvalid","message":"[T\"9] Invalid value: \"v\\a\\x7f\\u0085\\xff\": )"
      R"(say \"hi\"\n)"
      "\xc3\xa9"
      R"(","field":"spec.k[\"x\"]"}]},"code":422})");
  EXPECT_EQ(message_of(s),
            "K.g \"a\\\"b\\\\c\\x01\xc3\xa9\\u2028\" is invalid: spec.k[\"x\"]: Invalid value: "
            "\"v\\a\\x7f\\u0085\\xff\": say \"hi\"\n\xc3\xa9");
}

TEST(K8sStatus, GoQuotingOfValues) {
  // strconv.Quote: \a \b \f \v by name, other controls and undecodable bytes as \x, runes
  // Go does not print as \u / \U, printable runes (and U+FFFD itself) as they are.
  const auto body = [](std::string_view v) {
    std::string out;
    invalid("", "f", v).append_json_body_to(out);
    return out;
  };
  EXPECT_EQ(body("\a\b\f\v\t\n\r\x1b"), R"(Invalid value: \"\\a\\b\\f\\v\\t\\n\\r\\x1b\")");
  EXPECT_EQ(body("\xed\xa0\x80"), R"(Invalid value: \"\\xed\\xa0\\x80\")");  // a surrogate
  EXPECT_EQ(body("\xc0\xaf|\xe2\x82"),
            R"(Invalid value: \"\\xc0\\xaf|\\xe2\\x82\")");  // overlong, cut off
  EXPECT_EQ(body("\xc2\xa0\xc2\xad\xef\xbb\xbf\xee\x80\x80"),
            R"(Invalid value: \"\\u00a0\\u00ad\\ufeff\\ue000\")");
  EXPECT_EQ(body("\xf3\xa0\x80\x81\xf4\x8f\xbf\xbd"),
            R"(Invalid value: \"\\U000e0001\\U0010fffd\")");
  EXPECT_EQ(body("\xef\xbf\xbd\xf0\x9f\x98\x80\xe4\xb8\xad"),
            "Invalid value: \\\"\xef\xbf\xbd\xf0\x9f\x98\x80\xe4\xb8\xad\\\"");
  EXPECT_EQ(invalid("", "f", "\a").to_string(), "f: Invalid value: \"\\a\"");
}

TEST(K8sStatus, NotSupportedDetailIsApimachinerys) {
  // field.NotSupported: `supported values: "a", "b"` (strconv.Quote'd), nothing when empty.
  const field_error e = not_supported("", "spec.op", "Equals", {"In", "Not\"In"});
  EXPECT_EQ(e.to_string(),
            R"(spec.op: Unsupported value: "Equals": supported values: "In", "Not\"In")");
  EXPECT_EQ(not_supported("", "kind", "X", {}).to_string(), R"(kind: Unsupported value: "X")");
  const std::string s = invalid_status("g", "K", "n", {e});
  EXPECT_NE(
      s.find(
          R"("message":"Unsupported value: \"Equals\": supported values: \"In\", \"Not\\\"In\"")"),
      std::string::npos)
      << s;
}

}  // namespace
}  // namespace topogate::core

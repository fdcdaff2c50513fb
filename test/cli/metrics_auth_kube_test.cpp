// The TokenReview and SubjectAccessReview of metrics.auth: kubernetes as data: what topogate
// asks and how it reads each answer the API can give (test/e2e/metrics-auth.sh asks a real
// kube-apiserver).
#include "cli/metrics_auth_kube.hpp"

#include <gtest/gtest.h>
#include <simdjson.h>

#include <string>
#include <vector>

namespace topogate::cli::detail {
namespace {

using server::scrape_verdict;

using audiences = std::vector<std::string>;

simdjson::dom::element parse(simdjson::dom::parser& p, const std::string& json) {
  simdjson::dom::element e;
  EXPECT_FALSE(p.parse(json).get(e)) << json;
  return e;
}

TEST(TokenReviewBody, TokenAndAudiencesAsJson) {
  simdjson::dom::parser p;
  const auto plain = parse(p, token_review_body("abc\"\\", {}));
  EXPECT_EQ(std::string_view(plain["apiVersion"]), "authentication.k8s.io/v1");
  EXPECT_EQ(std::string_view(plain["kind"]), "TokenReview");
  EXPECT_EQ(std::string_view(plain["spec"]["token"]), "abc\"\\");
  // No audiences: none asked, so the API server's own apply.
  EXPECT_TRUE(plain["spec"]["audiences"].error());

  simdjson::dom::parser p2;
  const auto with = parse(p2, token_review_body("t", {"topogate-metrics", "other"}));
  simdjson::dom::array a;
  ASSERT_FALSE(with["spec"]["audiences"].get_array().get(a));
  std::vector<std::string> got;
  for (auto v : a) got.emplace_back(std::string_view(v));
  EXPECT_EQ(got, (audiences{"topogate-metrics", "other"}));
}

TEST(TokenReviewAnswer, AuthenticatedUserWithGroupsAndExtra) {
  const auto r = read_token_review(
      R"({"status":{"authenticated":true,"user":{"username":"system:serviceaccount:m:prometheus",)"
      R"("uid":"u-1","groups":["system:serviceaccounts","system:authenticated"],)"
      R"("extra":{"authentication.kubernetes.io/pod-name":["prom-0"],"skip":"not-a-list"}}}})",
      {});
  EXPECT_EQ(r.verdict, scrape_verdict::allowed) << r.reason;
  EXPECT_EQ(r.user.name, "system:serviceaccount:m:prometheus");
  EXPECT_EQ(r.user.uid, "u-1");
  EXPECT_EQ(r.user.groups, (audiences{"system:serviceaccounts", "system:authenticated"}));
  EXPECT_EQ(r.user.extra_json, R"({"authentication.kubernetes.io/pod-name":["prom-0"]})");
}

TEST(TokenReviewAnswer, NotAuthenticated) {
  auto r =
      read_token_review(R"({"status":{"authenticated":false,"error":"token has expired"}})", {});
  EXPECT_EQ(r.verdict, scrape_verdict::unauthenticated);
  EXPECT_EQ(r.reason, "token not authenticated: token has expired");
  r = read_token_review(R"({"status":{}})", {});
  EXPECT_EQ(r.verdict, scrape_verdict::unauthenticated);
  EXPECT_EQ(r.reason, "the Kubernetes API did not authenticate the token");
}

TEST(TokenReviewAnswer, UnusableAnswersAreUnavailable) {
  for (const std::string_view body :
       {"not json", R"({"kind":"TokenReview"})", R"({"status":{"authenticated":true}})",
        R"({"status":{"authenticated":true,"user":{"username":""}}})"}) {
    const auto r = read_token_review(std::string(body), {});
    EXPECT_EQ(r.verdict, scrape_verdict::unavailable) << body;
    EXPECT_FALSE(r.reason.empty()) << body;
  }
}

TEST(TokenReviewAnswer, AudiencesMustBeConfirmed) {
  const std::string user = R"("user":{"username":"system:serviceaccount:m:prometheus"})";
  const audiences want{"topogate-metrics", "second"};
  // The API confirms one of the audiences asked: authenticated.
  auto r = read_token_review(
      R"({"status":{"authenticated":true,)" + user + R"(,"audiences":["second"]}})", want);
  EXPECT_EQ(r.verdict, scrape_verdict::allowed) << r.reason;
  // An authenticator that ignores spec.audiences answers without them, or with others: refused.
  for (const std::string& status :
       {R"({"authenticated":true,)" + user + "}",
        R"({"authenticated":true,)" + user + R"(,"audiences":[]})",
        R"({"authenticated":true,)" + user + R"(,"audiences":["https://kubernetes.default.svc"]})",
        R"({"authenticated":true,)" + user + R"(,"audiences":"topogate-metrics"})"}) {
    r = read_token_review(R"({"status":)" + status + "}", want);
    EXPECT_EQ(r.verdict, scrape_verdict::unauthenticated) << status;
    EXPECT_EQ(r.reason,
              "the Kubernetes API authenticated \"system:serviceaccount:m:prometheus\" but "
              "confirmed none of the "
              "audiences \"topogate-metrics\", \"second\" (metrics.audiences)")
        << status;
    EXPECT_TRUE(r.user.name.empty());
  }
  // Without audiences asked, status.audiences is not looked at.
  r = read_token_review(R"({"status":{"authenticated":true,)" + user + "}}", {});
  EXPECT_EQ(r.verdict, scrape_verdict::allowed);
}

TEST(SubjectAccessReview, BodyCarriesTheUser) {
  reviewed_user u{"system:serviceaccount:m:prometheus", "u-1", {"g1", "g\"2"}, R"({"k":["v"]})"};
  simdjson::dom::parser p;
  const auto b = parse(p, subject_access_review_body(u));
  EXPECT_EQ(std::string_view(b["kind"]), "SubjectAccessReview");
  EXPECT_EQ(std::string_view(b["spec"]["nonResourceAttributes"]["path"]), "/metrics");
  EXPECT_EQ(std::string_view(b["spec"]["nonResourceAttributes"]["verb"]), "get");
  EXPECT_EQ(std::string_view(b["spec"]["user"]), u.name);
  EXPECT_EQ(std::string_view(b["spec"]["uid"]), "u-1");
  EXPECT_EQ(std::string_view(b.at_pointer("/spec/groups/1")), "g\"2");
  EXPECT_EQ(std::string_view(b.at_pointer("/spec/extra/k/0")), "v");
  u.uid.clear();
  simdjson::dom::parser p2;
  EXPECT_TRUE(parse(p2, subject_access_review_body(u))["spec"]["uid"].error());
}

TEST(SubjectAccessReview, Answers) {
  const reviewed_user u{"alice", "", {}, "{}"};
  auto d = read_subject_access_review(R"({"status":{"allowed":true}})", u);
  EXPECT_EQ(d.verdict, scrape_verdict::allowed);
  EXPECT_EQ(d.user, "alice");
  d = read_subject_access_review(
      R"({"status":{"allowed":false,"reason":"no binding","evaluationError":"x"}})", u);
  EXPECT_EQ(d.verdict, scrape_verdict::forbidden);
  EXPECT_EQ(
      d.reason,
      "user \"alice\" may not get /metrics (no binding; x): bind a ClusterRole granting get on the "
      "non-resource URL /metrics");
  d = read_subject_access_review(R"({"status":{}})", u);
  EXPECT_EQ(d.verdict, scrape_verdict::forbidden);
  EXPECT_EQ(read_subject_access_review("[]", u).verdict, scrape_verdict::unavailable);
  EXPECT_EQ(read_subject_access_review("{", u).verdict, scrape_verdict::unavailable);
}

}  // namespace
}  // namespace topogate::cli::detail

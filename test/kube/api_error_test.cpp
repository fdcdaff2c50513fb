// The one way a call that did not get the answer it wanted is told (kube/api_error.hpp): the
// call, the status, the Status's message (bounded, never when the request carried a secret),
// the hints for a 401 and a 403, and the code callers decide by.

#include "kube/api_error.hpp"

#include <gtest/gtest.h>

#include <string>

namespace topogate::kube {
namespace {

std::string status_body(const std::string& message) {
  return R"({"kind":"Status","apiVersion":"v1","status":"Failure","message":")" + message +
         R"(","code":500})";
}

TEST(ApiError, TheCallTheStatusAndTheStatusMessage) {
  const auto e = api_error("GET /api/v1/nodes", response{500, status_body("etcd is down")});
  EXPECT_EQ(e.message, "GET /api/v1/nodes: HTTP 500: etcd is down");
  EXPECT_EQ(e.code, core::errc::unavailable);
  // A body that is no Status is not quoted (a proxy's page, plain text).
  EXPECT_EQ(api_error("c", response{502, "<html>Bad Gateway</html>"}).message, "c: HTTP 502");
  EXPECT_EQ(api_error("c", response{503, "{not json"}).message, "c: HTTP 503");
  EXPECT_EQ(api_error("c", response{503, ""}).message, "c: HTTP 503");
}

TEST(ApiError, TheMessageIsBoundedOnBothSides) {
  const std::string at(300, 'm');
  EXPECT_EQ(api_error("c", response{500, status_body(at)}).message, "c: HTTP 500: " + at);
  EXPECT_EQ(api_error("c", response{500, status_body(at + "x")}).message, "c: HTTP 500: " + at);
}

TEST(ApiError, CodesCallersDecideBy) {
  EXPECT_EQ(api_error("c", response{403, ""}).code, core::errc::forbidden);
  EXPECT_EQ(api_error("c", response{404, ""}).code, core::errc::not_found);
  EXPECT_EQ(api_error("c", response{409, ""}).code, core::errc::conflict);
  EXPECT_EQ(api_error("c", response{401, ""}).code, core::errc::unavailable);
  EXPECT_EQ(api_error("c", response{200, ""}).code, core::errc::unavailable);
}

TEST(ApiError, HintsFor401And403) {
  EXPECT_EQ(api_error("c", response{401, ""}).message,
            "c: HTTP 401 (topogate's API credentials were refused)");
  const error_hints hints{"topogate's ServiceAccount needs list on nodes"};
  EXPECT_EQ(api_error("c", response{403, status_body("nodes is forbidden")}, hints).message,
            "c: HTTP 403: nodes is forbidden (topogate's ServiceAccount needs list on nodes)");
  EXPECT_EQ(api_error("c", response{403, ""}).message, "c: HTTP 403");
  // The hint is the 403's only.
  EXPECT_EQ(api_error("c", response{500, ""}, hints).message, "c: HTTP 500");
}

TEST(ApiError, ABodyThatMayEchoASecretIsNeverQuoted) {
  const error_hints secret{"needs create on tokenreviews", false};
  EXPECT_EQ(api_error("TokenReview", response{403, status_body("token s3cr3t")}, secret).message,
            "TokenReview: HTTP 403 (needs create on tokenreviews)");
}

TEST(ApiError, NoAnswer) {
  const core::result<response> none = core::fail(core::errc::unavailable, "connect x:1: refused");
  const auto e = api_error("GET /x", none);
  EXPECT_EQ(e.message, "GET /x: connect x:1: refused");
  EXPECT_EQ(e.code, core::errc::unavailable);
  // Whatever kept the call from an answer, it is unavailable to the caller.
  EXPECT_EQ(api_error("GET /x", core::fail(core::errc::io, "cannot open /t")).code,
            core::errc::unavailable);
  const core::result<response> answered = response{404, ""};
  EXPECT_EQ(api_error("GET /x", answered).message, "GET /x: HTTP 404");
}

}  // namespace
}  // namespace topogate::kube

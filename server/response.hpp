#pragma once
// The response type of every route, and the one writer of error answers: every HTTP error
// topogate answers (a route's refusal, the session's transport errors, an admission request
// that could not be reviewed, an inventory's push outcome) carries a Kubernetes metav1.Status
// (core/k8s_status), the body kubectl and client-go print for a failed call, with
// `Content-Type: application/json` and `Cache-Control: no-store`. The status code alone picks
// the Status reason (status_reason).

#include <boost/beast/http/message.hpp>
#include <boost/beast/http/status.hpp>
#include <string>
#include <string_view>

#include "core/k8s_status.hpp"
#include "server/shared_body.hpp"

namespace topogate::server {

namespace http = boost::beast::http;
using response = http::response<shared_body>;

// apimachinery's StatusReason for an HTTP status topogate answers with (metav1.StatusReason:
// "NotFound" for 404, "Invalid" for 422, "Timeout" for 504, ...); "InternalError" for a status
// it never answers with.
[[nodiscard]] std::string_view status_reason(http::status status) noexcept;

// A failure Status: {"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",
// "message":<message>,"reason":<status_reason>,["details":{...},]"code":<status>}.
[[nodiscard]] response error_response(http::status status, std::string_view message,
                                      const core::status_details* details = nullptr);

// A JSON answer that no cache keeps: an error whose Status is already rendered (an inventory's
// 422 with every field error, the 409 of a profile-change impact with the impact beside it),
// or a push's outcome.
[[nodiscard]] response json_response(http::status status, std::string json);

}  // namespace topogate::server

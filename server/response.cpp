#include "server/response.hpp"

namespace topogate::server {

std::string_view status_reason(http::status status) noexcept {
  switch (status) {
    case http::status::bad_request:
    // No StatusReason of apimachinery's says it: a request the server cannot read.
    case http::status::request_header_fields_too_large:
      return "BadRequest";
    case http::status::unauthorized:
      return "Unauthorized";
    case http::status::forbidden:
      return "Forbidden";
    case http::status::not_found:
      return "NotFound";
    case http::status::method_not_allowed:
      return "MethodNotAllowed";
    case http::status::conflict:
      return "Conflict";
    case http::status::precondition_failed:
      return "PreconditionFailed";
    case http::status::payload_too_large:
      return "RequestEntityTooLarge";
    case http::status::unsupported_media_type:
      return "UnsupportedMediaType";
    case http::status::unprocessable_entity:
      return "Invalid";
    case http::status::service_unavailable:
      return "ServiceUnavailable";
    case http::status::gateway_timeout:
      return "Timeout";
    default:
      return "InternalError";
  }
}

response json_response(http::status status, std::string json) {
  response res{status, 11};
  res.set(http::field::content_type, "application/json");
  // An error or a push outcome describes this moment (a revision not yet valid, a review that
  // timed out, what a push stored): never kept by a cache.
  res.set(http::field::cache_control, "no-store");
  res.body() = shared_body::value_type(std::move(json));
  return res;
}

response error_response(http::status status, std::string_view message,
                        const core::status_details* details) {
  return json_response(status, core::failure_status(static_cast<int>(status), status_reason(status),
                                                    message, details));
}

}  // namespace topogate::server

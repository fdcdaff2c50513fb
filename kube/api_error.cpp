#include "kube/api_error.hpp"

#include <simdjson.h>

#include <string>

namespace topogate::kube {

namespace {

// The message of a Status body (at most 300 bytes); "" when the body is no Status. The API
// never echoes the request's own credentials there.
std::string status_message(const std::string& body) {
  if (body.empty() || body.front() != '{') return {};
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  std::string_view message;
  if (parser.parse(body).get(doc) || doc["message"].get_string().get(message)) return {};
  return std::string(message.substr(0, 300));
}

core::errc code_of(int status) {
  switch (status) {
    case 403:
      return core::errc::forbidden;
    case 404:
      return core::errc::not_found;
    case 409:
      return core::errc::conflict;
    default:
      return core::errc::unavailable;
  }
}

}  // namespace

core::error api_error(std::string_view call, const response& answer, const error_hints& hints) {
  std::string out = std::string(call) + ": HTTP " + std::to_string(answer.status);
  if (hints.quote_message) {
    if (const std::string m = status_message(answer.body); !m.empty()) out += ": " + m;
  }
  if (answer.status == 401) out += " (topogate's API credentials were refused)";
  if (answer.status == 403 && !hints.forbidden.empty())
    out += " (" + std::string(hints.forbidden) + ")";
  return core::fail(code_of(answer.status), std::move(out));
}

core::error api_error(std::string_view call, const core::error& no_answer) {
  return core::fail(core::errc::unavailable, std::string(call) + ": " + no_answer.message);
}

core::error api_error(std::string_view call, const core::result<response>& r,
                      const error_hints& hints) {
  return r ? api_error(call, *r, hints) : api_error(call, r.error());
}

}  // namespace topogate::kube

#pragma once
// The one way a Kubernetes API call that did not get the answer its caller wanted is told:
// which call, then why no answer came (the client's reason) or what the API answered (its
// HTTP status, the message of its Status body, and what to do about a 401 or a 403):
//
//   GET /api/v1/nodes: connect 10.0.0.1:443: Connection refused
//   GET /apis/worker.gpustack.ai/v1/topologysources: HTTP 403: topologysources.worker... is
//       forbidden: User "system:serviceaccount:..." cannot list ... (topogate's ServiceAccount
//       needs list on topologysources and modeldeployments)
//
// As a core::error, whose code a caller decides by: forbidden (403), conflict (409),
// not_found (404), unavailable (no answer, or any other status).

#include <string_view>

#include "core/result.hpp"
#include "kube/client.hpp"

namespace topogate::kube {

struct error_hints {
  std::string_view forbidden;  // what to grant, appended to a 403
  // false when the request carried someone else's secret that the answer may echo (a
  // TokenReview's token): only the status is told, never a word of the body.
  bool quote_message = true;
};

// `call` names what was asked: "GET /api/v1/nodes", "write ConfigMap topogate-a", "TokenReview".
[[nodiscard]] core::error api_error(std::string_view call, const response& answer,
                                    const error_hints& hints = {});
// A call that got no answer (client::request's error): errc::unavailable, "CALL: REASON".
[[nodiscard]] core::error api_error(std::string_view call, const core::error& no_answer);
// Either, for what client::request returned.
[[nodiscard]] core::error api_error(std::string_view call, const core::result<response>& r,
                                    const error_hints& hints = {});

}  // namespace topogate::kube

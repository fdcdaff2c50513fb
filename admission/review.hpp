#pragma once
// AdmissionReview handling (admission.k8s.io/v1 and v1beta1): a pure function from the
// request body to the verdict and the AdmissionReview response the apiserver expects. Shared by the
// webhook routes and `topogate review FILE`.
//
// Three outcomes are kept apart, as controller-runtime does: allowed (maybe with
// warnings), denied (a policy decision carrying every field error), and errored (the
// request itself could not be processed: a `failure` the server answers with an HTTP 4xx
// or 504 and a Kubernetes Status body).

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/admitted_kinds.hpp"
#include "core/field_error.hpp"
#include "core/topology_source.hpp"

namespace topogate::admission {

// The webhook's routes, one per kind of core/admitted_kinds.hpp's table; each validates its kind
// and allows every other.
using route = core::admission_route;

enum class verdict { allowed, denied, errored };
std::string_view to_string(verdict v) noexcept;

// The apiserver sends at most 3 MiB objects, and an UPDATE carries two of them.
inline constexpr std::size_t default_max_body_bytes = 7u * 1024 * 1024;
// The apiserver truncates and logs longer warnings; this is the length it advises.
inline constexpr std::size_t max_warning_length = 120;

class ownership_view;  // admission/ownership.hpp

struct options {
  core::validation_options validation;
  std::size_t max_body_bytes = default_max_body_bytes;
  // The cluster's writing TopologySources and Nodes (admission.ownershipCheck), for the
  // ownership warning; nullptr, or a view without a snapshot yet: no such warning.
  const ownership_view* ownership = nullptr;
};

struct request_meta {
  // nullopt: not checked (the command line reads a file).
  std::optional<std::string_view> content_type;
  // Remaining budget from `?timeout=`; nullopt when the caller sent none.
  std::optional<std::chrono::steady_clock::time_point> deadline;
};

// Why a request could not be reviewed (verdict::errored); the server says it in HTTP
// (server/router: 400, 413, 415, 504 with a Kubernetes Status).
enum class failure {
  none,
  bad_request,             // not an AdmissionReview the API server sends
  too_large,               // over options.max_body_bytes
  unsupported_media_type,  // Content-Type is not application/json
  timeout,                 // the request's ?timeout= passed before validation started
};

struct outcome {
  verdict result = verdict::errored;
  std::string body;  // allowed/denied: the AdmissionReview response (JSON)
  failure error = failure::none;
  std::string message;  // errored: why
  std::string kind;     // the object's kind, "other" when the route does not handle it
  std::string uid;      // request.uid when it could be read
  std::size_t warning_count = 0;
  core::error_list errors;  // the field errors behind a denial
};

[[nodiscard]] outcome review(route r, std::string_view body, const request_meta& meta,
                             const options& opts);
// The same with the caller's parsing state (one per thread), which spares allocating the
// parsers' buffers for every review.
[[nodiscard]] outcome review(route r, std::string_view body, const request_meta& meta,
                             const options& opts, core::json_decoder& decoder);
// `topogate review FILE`: the request on the route of its own request.kind (any admitted kind is
// validated; any other is allowed, as every route allows it).
[[nodiscard]] outcome review_on_its_route(std::string_view body, const request_meta& meta,
                                          const options& opts);

// "application/json", optionally with parameters (charset=utf-8); case-insensitive.
[[nodiscard]] bool is_json_content_type(std::string_view content_type) noexcept;

// A warning as the apiserver accepts it: control characters removed, at most
// max_warning_length bytes, cut on a UTF-8 boundary.
[[nodiscard]] std::string sanitize_warning(std::string_view w);
[[nodiscard]] std::string_view to_string(failure f) noexcept;

}  // namespace topogate::admission

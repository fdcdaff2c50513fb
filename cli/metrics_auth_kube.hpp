#pragma once
// metrics.auth: kubernetes, on kube/'s client: the token reviewer serve.cpp hands to the
// server (server/metrics_auth.hpp's token_reviewer), and its two reviews as data, the request
// bodies topogate sends and what it reads from the API's answers. Those are pure functions,
// so the answers the API may give are unit-tested without one.

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.hpp"
#include "kube/endpoint.hpp"
#include "server/metrics_auth.hpp"

namespace topogate::cli {

// TokenReview (authentication.k8s.io/v1), then SubjectAccessReview (authorization.k8s.io/v1)
// for `get` on the non-resource URL /metrics with the reviewed user, uid, groups and extra,
// against the API `access` names. With `audiences` (metrics.audiences) a token must be issued
// for one of them. errc::invalid_argument when no API server is known.
core::result<std::unique_ptr<server::token_reviewer>> make_kube_token_reviewer(
    const kube::api_access& access, std::vector<std::string> audiences = {});

namespace detail {

// The user a TokenReview authenticated, as the SubjectAccessReview's spec wants it.
struct reviewed_user {
  std::string name, uid;
  std::vector<std::string> groups;
  std::string extra_json = "{}";  // map[string][]string, re-encoded
};

// What a TokenReview answer says. `allowed` here means authenticated (for one of the
// audiences asked, when any): the SubjectAccessReview decides next.
struct token_review_answer {
  server::scrape_verdict verdict = server::scrape_verdict::unavailable;
  reviewed_user user;
  std::string reason;  // never the token
};

// authentication.k8s.io/v1 TokenReview for `token`, with spec.audiences when `audiences` is
// not empty (else the API server's own audiences apply).
[[nodiscard]] std::string token_review_body(std::string_view token,
                                            const std::vector<std::string>& audiences);

// Reads a TokenReview answer (the body of a 200 or 201). With `audiences`, the answer must
// also name one of them in status.audiences: an API that ignores spec.audiences (an older or
// audience-unaware authenticator) is refused rather than trusted, as the API documents.
[[nodiscard]] token_review_answer read_token_review(const std::string& body,
                                                    const std::vector<std::string>& audiences);

// authorization.k8s.io/v1 SubjectAccessReview: may `user` get the non-resource URL /metrics.
[[nodiscard]] std::string subject_access_review_body(const reviewed_user& user);

// Reads a SubjectAccessReview answer: allowed or forbidden (with what to bind), or
// unavailable when the answer is unusable.
[[nodiscard]] server::scrape_decision read_subject_access_review(const std::string& body,
                                                                 const reviewed_user& user);

}  // namespace detail

}  // namespace topogate::cli

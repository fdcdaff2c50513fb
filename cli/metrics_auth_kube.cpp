// metrics.auth: kubernetes. The API decides who a bearer token belongs to (TokenReview) and
// whether that user may `get` the non-resource URL /metrics (SubjectAccessReview), as the
// apiserver itself decides for its own /metrics; the ClusterRole an operator binds to
// Prometheus is then the same kind as for any component's metrics.

#include "cli/metrics_auth_kube.hpp"

#include <simdjson.h>

#include "core/field_error.hpp"
#include "kube/api_error.hpp"
#include "kube/client.hpp"
#include "util/wipe.hpp"

namespace topogate::cli {

namespace detail {

namespace {

using server::scrape_decision;
using server::scrape_verdict;

// A string the API returned, or "" when absent or not a string.
std::string text(simdjson::dom::element e, std::string_view key) {
  std::string_view v;
  if (e[key].get_string().get(v)) return {};
  return std::string(v);
}

std::string text(simdjson::ondemand::object& o, std::string_view key) {
  std::string_view v;
  if (o.find_field_unordered(key).get_string().get(v)) return {};
  return std::string(v);
}

token_review_answer no_answer(std::string reason) {
  return {scrape_verdict::unavailable, {}, std::move(reason)};
}

std::string quoted_list(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& i : items) {
    if (!out.empty()) out += ", ";
    out += '"' + i + '"';
  }
  return out;
}

}  // namespace

std::string token_review_body(std::string_view token, const std::vector<std::string>& audiences) {
  std::string body =
      R"({"apiVersion":"authentication.k8s.io/v1","kind":"TokenReview","spec":{"token":)";
  core::append_json_string(body, token);
  if (!audiences.empty()) {
    body += R"(,"audiences":[)";
    for (std::size_t i = 0; i < audiences.size(); ++i) {
      if (i) body += ',';
      core::append_json_string(body, audiences[i]);
    }
    body += ']';
  }
  body += "}}";
  return body;
}

// The answer echoes the token in spec.token. It is read On-Demand from a padded copy that is
// wiped afterwards: only the status fields asked for are ever unescaped into the parser's
// string buffer, so no copy of the token outlives this call (a DOM parse would unescape every
// string, spec.token included, into a buffer freed unwiped).
token_review_answer read_token_review(const std::string& body,
                                      const std::vector<std::string>& audiences) {
  namespace od = simdjson::ondemand;
  simdjson::padded_string json(body);
  const util::wiped_at_exit wipe_copy{json};
  od::parser parser;
  od::document doc;
  od::object root;
  if (parser.iterate(json).get(doc) || doc.get_object().get(root))
    return no_answer("the TokenReview answer is not JSON");
  od::object status;
  if (root.find_field_unordered("status").get_object().get(status))
    return no_answer("the TokenReview answer has no status");
  bool authenticated = false;
  if (status.find_field_unordered("authenticated").get_bool().get(authenticated) ||
      !authenticated) {
    const std::string why = text(status, "error");
    return {scrape_verdict::unauthenticated,
            {},
            why.empty() ? "the Kubernetes API did not authenticate the token"
                        : "token not authenticated: " + why};
  }
  token_review_answer out;
  reviewed_user& user = out.user;
  od::object u;
  if (status.find_field_unordered("user").get_object().get(u))
    return no_answer("the TokenReview answer names no user");
  user.name = text(u, "username");
  user.uid = text(u, "uid");
  if (user.name.empty()) return no_answer("the TokenReview answer names no user");
  od::array groups;
  if (!u.find_field_unordered("groups").get_array().get(groups)) {
    for (auto g : groups) {
      std::string_view s;
      if (!g.get_string().get(s)) user.groups.emplace_back(s);
    }
  }
  od::object extra;
  if (!u.find_field_unordered("extra").get_object().get(extra)) {
    std::string json_extra = "{";
    bool first = true;
    for (auto field_kv : extra) {
      std::string_view key;
      od::array values;
      if (field_kv.unescaped_key().get(key)) continue;
      const std::string name(key);  // the key's view is only good until the next string
      if (field_kv.value().get_array().get(values)) continue;
      if (!first) json_extra += ',';
      first = false;
      core::append_json_string(json_extra, name);
      json_extra += ":[";
      bool first_value = true;
      for (auto v : values) {
        std::string_view s;
        if (v.get_string().get(s)) continue;
        if (!first_value) json_extra += ',';
        first_value = false;
        core::append_json_string(json_extra, s);
      }
      json_extra += ']';
    }
    json_extra += '}';
    user.extra_json = std::move(json_extra);
  }
  if (!audiences.empty()) {
    // status.audiences: those of spec.audiences the token is valid for. None of ours there
    // (or no list at all): the authenticator did not check the audience.
    bool matched = false;
    od::array got;
    if (!status.find_field_unordered("audiences").get_array().get(got)) {
      for (auto a : got) {
        std::string_view s;
        if (a.get_string().get(s)) continue;
        for (const auto& want : audiences) matched = matched || s == want;
      }
    }
    if (!matched) {
      return {scrape_verdict::unauthenticated,
              {},
              "the Kubernetes API authenticated \"" + user.name +
                  "\" but confirmed none of the audiences " + quoted_list(audiences) +
                  " (metrics.audiences)"};
    }
  }
  out.verdict = scrape_verdict::allowed;
  return out;
}

std::string subject_access_review_body(const reviewed_user& user) {
  std::string body =
      R"({"apiVersion":"authorization.k8s.io/v1","kind":"SubjectAccessReview","spec":{)"
      R"("nonResourceAttributes":{"path":"/metrics","verb":"get"},"user":)";
  core::append_json_string(body, user.name);
  if (!user.uid.empty()) {
    body += ",\"uid\":";
    core::append_json_string(body, user.uid);
  }
  body += ",\"groups\":[";
  for (std::size_t i = 0; i < user.groups.size(); ++i) {
    if (i) body += ',';
    core::append_json_string(body, user.groups[i]);
  }
  body += "],\"extra\":" + user.extra_json + "}}";
  return body;
}

scrape_decision read_subject_access_review(const std::string& body, const reviewed_user& user) {
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (parser.parse(body).get(doc))
    return {scrape_verdict::unavailable, {}, "the SubjectAccessReview answer is not JSON"};
  simdjson::dom::element status;
  if (doc["status"].get(status))
    return {scrape_verdict::unavailable, {}, "the SubjectAccessReview answer has no status"};
  bool allowed = false;
  if (status["allowed"].get_bool().get(allowed)) allowed = false;  // absent: not allowed
  if (allowed) return {scrape_verdict::allowed, user.name, {}};
  std::string reason = text(status, "reason");
  if (const std::string err = text(status, "evaluationError"); !err.empty()) {
    reason += reason.empty() ? err : "; " + err;
  }
  return {scrape_verdict::forbidden, user.name,
          "user \"" + user.name + "\" may not get /metrics" +
              (reason.empty() ? "" : " (" + reason + ")") +
              ": bind a ClusterRole granting get on the non-resource URL /metrics"};
}

}  // namespace detail

namespace {

using clock = std::chrono::steady_clock;
using server::scrape_decision;
using server::scrape_verdict;

constexpr std::string_view tokenreviews = "/apis/authentication.k8s.io/v1/tokenreviews";
constexpr std::string_view subjectaccessreviews =
    "/apis/authorization.k8s.io/v1/subjectaccessreviews";

class kube_token_reviewer final : public server::token_reviewer {
 public:
  kube_token_reviewer(kube::endpoint ep, std::vector<std::string> audiences)
      : calls_(std::move(ep)), audiences_(std::move(audiences)) {}

  scrape_decision review(std::string_view token, clock::time_point deadline) override {
    // One client per review, so cancel() stops exactly the calls in progress.
    auto d =
        calls_.run<scrape_decision>([&](kube::client& api) { return run(api, token, deadline); });
    if (!d) return unavailable(std::move(d).error().message);
    return std::move(*d);
  }

  void cancel() override { calls_.cancel(); }

 private:
  static std::chrono::milliseconds left(clock::time_point deadline) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock::now());
  }

  static scrape_decision unavailable(std::string reason) {
    return {scrape_verdict::unavailable, {}, std::move(reason)};
  }

  // The API's answer to a review that did not succeed, for the scrape's 503 and the log: the
  // status and what to fix, never the body (a TokenReview echoes the token in its spec).
  static scrape_decision refused(std::string_view review, const core::result<kube::response>& r,
                                 std::string_view resource) {
    const std::string hint = "topogate's ServiceAccount needs create on " + std::string(resource);
    return unavailable(kube::api_error(review, r, {hint, false}).message);
  }

  scrape_decision run(kube::client& api, std::string_view token, clock::time_point deadline) {
    auto budget = left(deadline);
    if (budget.count() <= 0) return unavailable("no time left for the token review");
    std::string body = detail::token_review_body(token, audiences_);
    auto r = api.request("POST", std::string(tokenreviews), body, budget);
    util::wipe(body);
    // The answer echoes the token (spec.token): it is read here and wiped, never kept or logged.
    if (r) {
      const util::wiped_at_exit wipe_answer{r->body};
      if (r->status == 200 || r->status == 201) {
        auto answer = detail::read_token_review(r->body, audiences_);
        if (answer.verdict != scrape_verdict::allowed)
          return {answer.verdict, {}, std::move(answer.reason)};
        return authorize(api, answer.user, deadline);
      }
    }
    return refused("TokenReview", r, "tokenreviews");
  }

  static scrape_decision authorize(kube::client& api, const detail::reviewed_user& user,
                                   clock::time_point deadline) {
    const auto budget = left(deadline);
    if (budget.count() <= 0) return unavailable("no time left for the SubjectAccessReview");
    const auto r = api.request("POST", std::string(subjectaccessreviews),
                               detail::subject_access_review_body(user), budget);
    if (!r || (r->status != 200 && r->status != 201))
      return refused("SubjectAccessReview", r, "subjectaccessreviews");
    return detail::read_subject_access_review(r->body, user);
  }

  kube::cancellable_calls calls_;
  const std::vector<std::string> audiences_;
};

}  // namespace

core::result<std::unique_ptr<server::token_reviewer>> make_kube_token_reviewer(
    const kube::api_access& access, std::vector<std::string> audiences) {
  auto ep = kube::resolve_endpoint(access);
  if (!ep) return std::move(ep).error();
  return std::unique_ptr<server::token_reviewer>(
      std::make_unique<kube_token_reviewer>(std::move(*ep), std::move(audiences)));
}

}  // namespace topogate::cli

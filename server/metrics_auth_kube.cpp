// metrics.auth: kubernetes. The API decides who a bearer token belongs to (TokenReview) and
// whether that user may `get` the non-resource URL /metrics (SubjectAccessReview), as the
// apiserver itself decides for its own /metrics; the ClusterRole an operator binds to
// Prometheus is then the same kind as for any component's metrics.

#include "server/metrics_auth_kube.hpp"

#include <simdjson.h>

#include <mutex>
#include <set>

#include "core/field_error.hpp"
#include "inventory/kube.hpp"
#include "inventory/kube_client.hpp"
#include "inventory/wipe.hpp"
#include "server/metrics_auth.hpp"

namespace topogate::server {

namespace detail {

namespace {

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
  const inventory::wiped_at_exit wipe_copy{json};
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

namespace kube = inventory::detail;
using clock = std::chrono::steady_clock;

constexpr std::string_view tokenreviews = "/apis/authentication.k8s.io/v1/tokenreviews";
constexpr std::string_view subjectaccessreviews =
    "/apis/authorization.k8s.io/v1/subjectaccessreviews";

// The API's answer to a call that did not succeed, for the scrape's 503 and the log: the
// status and what to fix, never the body (a TokenReview echoes the token in its spec).
std::string api_failure(std::string_view what, const kube::kube_client::response& r,
                        std::string_view resource) {
  if (r.status == 0)
    return "cannot reach the Kubernetes API for the " + std::string(what) + ": " + r.error;
  std::string out =
      "the Kubernetes API answered " + std::to_string(r.status) + " to the " + std::string(what);
  if (r.status == 401) out += " (topogate's own API credentials were refused)";
  if (r.status == 403)
    out += " (topogate's ServiceAccount needs create on " + std::string(resource) + ")";
  return out;
}

class kube_token_reviewer final : public token_reviewer {
 public:
  kube_token_reviewer(kube::kube_endpoint ep, std::vector<std::string> audiences)
      : ep_(std::move(ep)), audiences_(std::move(audiences)) {}

  scrape_decision review(std::string_view token, clock::time_point deadline) override {
    // One client per review, so cancel() can stop exactly the calls in progress.
    kube::kube_client client(ep_);
    {
      std::lock_guard lock(mu_);
      if (cancelled_) return {scrape_verdict::unavailable, {}, "the server is shutting down"};
      active_.insert(&client);
    }
    scrape_decision d = run(client, token, deadline);
    std::lock_guard lock(mu_);
    active_.erase(&client);
    return d;
  }

  void cancel() override {
    std::lock_guard lock(mu_);
    cancelled_ = true;
    for (auto* c : active_) c->cancel();
  }

 private:
  static std::chrono::milliseconds left(clock::time_point deadline) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock::now());
  }

  static scrape_decision unavailable(std::string reason) {
    return {scrape_verdict::unavailable, {}, std::move(reason)};
  }

  scrape_decision run(kube::kube_client& client, std::string_view token,
                      clock::time_point deadline) {
    auto budget = left(deadline);
    if (budget.count() <= 0) return unavailable("no time left for the token review");
    std::string body = detail::token_review_body(token, audiences_);
    auto r = client.request("POST", std::string(tokenreviews), body, budget);
    inventory::wipe(body);
    // The answer echoes the token (spec.token): it is read here and wiped, never kept or logged.
    const inventory::wiped_at_exit wipe_answer{r.body};
    if (r.status != 200 && r.status != 201)
      return unavailable(api_failure("TokenReview", r, "tokenreviews"));
    auto answer = detail::read_token_review(r.body, audiences_);
    if (answer.verdict != scrape_verdict::allowed)
      return {answer.verdict, {}, std::move(answer.reason)};
    return authorize(client, answer.user, deadline);
  }

  static scrape_decision authorize(kube::kube_client& client, const detail::reviewed_user& user,
                                   clock::time_point deadline) {
    const auto budget = left(deadline);
    if (budget.count() <= 0) return unavailable("no time left for the SubjectAccessReview");
    const auto r = client.request("POST", std::string(subjectaccessreviews),
                                  detail::subject_access_review_body(user), budget);
    if (r.status != 200 && r.status != 201) {
      return unavailable(api_failure("SubjectAccessReview", r, "subjectaccessreviews"));
    }
    return detail::read_subject_access_review(r.body, user);
  }

  kube::kube_endpoint ep_;
  const std::vector<std::string> audiences_;
  std::mutex mu_;
  bool cancelled_ = false;               // mu_
  std::set<kube::kube_client*> active_;  // mu_
};

}  // namespace

core::result<std::unique_ptr<token_reviewer>> make_kube_token_reviewer(
    const inventory::store_config& api, std::vector<std::string> audiences) {
  auto ep = kube::resolve_endpoint(api);
  if (!ep) return std::move(ep).error();
  return std::unique_ptr<token_reviewer>(
      std::make_unique<kube_token_reviewer>(std::move(*ep), std::move(audiences)));
}

}  // namespace topogate::server

// metrics.auth: kubernetes. The API decides who a bearer token belongs to (TokenReview) and
// whether that user may `get` the non-resource URL /metrics (SubjectAccessReview), as the
// apiserver itself decides for its own /metrics; the ClusterRole an operator binds to
// Prometheus is then the same kind as for any component's metrics.

#include <openssl/crypto.h>
#include <simdjson.h>

#include <mutex>
#include <set>

#include "core/field_error.hpp"
#include "inventory/kube.hpp"
#include "inventory/kube_client.hpp"
#include "server/metrics_auth.hpp"

namespace topogate::server {

namespace {

namespace kube = inventory::detail;
using clock = std::chrono::steady_clock;

constexpr std::string_view tokenreviews = "/apis/authentication.k8s.io/v1/tokenreviews";
constexpr std::string_view subjectaccessreviews =
    "/apis/authorization.k8s.io/v1/subjectaccessreviews";

// A string the API returned, or "" when absent or not a string.
std::string text(simdjson::dom::element e, std::string_view key) {
  std::string_view v;
  if (e[key].get_string().get(v)) return {};
  return std::string(v);
}

// The user a TokenReview authenticated, as the SubjectAccessReview's spec wants it.
struct user_info {
  std::string name, uid;
  std::vector<std::string> groups;
  std::string extra_json = "{}";  // map[string][]string, re-encoded
};

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
  explicit kube_token_reviewer(kube::kube_endpoint ep) : ep_(std::move(ep)) {}

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
    std::string body =
        R"({"apiVersion":"authentication.k8s.io/v1","kind":"TokenReview","spec":{"token":)";
    core::append_json_string(body, token);
    body += "}}";
    auto r = client.request("POST", std::string(tokenreviews), body, budget);
    OPENSSL_cleanse(body.data(), body.size());
    // The answer echoes the token (spec.token): it is read here and wiped, never kept or logged.
    struct wipe {
      std::string& s;
      ~wipe() { OPENSSL_cleanse(s.data(), s.size()); }
    } wipe_answer{r.body};
    if (r.status != 200 && r.status != 201)
      return unavailable(api_failure("TokenReview", r, "tokenreviews"));

    simdjson::dom::parser parser;
    simdjson::dom::element doc;
    if (parser.parse(r.body).get(doc)) return unavailable("the TokenReview answer is not JSON");
    simdjson::dom::element status;
    if (doc["status"].get(status)) return unavailable("the TokenReview answer has no status");
    bool authenticated = false;
    if (status["authenticated"].get_bool().get(authenticated) || !authenticated) {
      const std::string why = text(status, "error");
      return {scrape_verdict::unauthenticated,
              {},
              why.empty() ? "the Kubernetes API did not authenticate the token"
                          : "token not authenticated: " + why};
    }
    user_info user;
    simdjson::dom::element u;
    if (status["user"].get(u)) return unavailable("the TokenReview answer names no user");
    user.name = text(u, "username");
    user.uid = text(u, "uid");
    if (user.name.empty()) return unavailable("the TokenReview answer names no user");
    simdjson::dom::array groups;
    if (!u["groups"].get_array().get(groups)) {
      for (auto g : groups) {
        std::string_view s;
        if (!g.get_string().get(s)) user.groups.emplace_back(s);
      }
    }
    simdjson::dom::object extra;
    if (!u["extra"].get_object().get(extra)) {
      std::string out = "{";
      bool first = true;
      for (auto field : extra) {
        simdjson::dom::array values;
        if (field.value.get_array().get(values)) continue;
        if (!first) out += ',';
        first = false;
        core::append_json_string(out, field.key);
        out += ":[";
        bool first_value = true;
        for (auto v : values) {
          std::string_view s;
          if (v.get_string().get(s)) continue;
          if (!first_value) out += ',';
          first_value = false;
          core::append_json_string(out, s);
        }
        out += ']';
      }
      out += '}';
      user.extra_json = std::move(out);
    }
    return authorize(client, user, deadline);
  }

  static scrape_decision authorize(kube::kube_client& client, const user_info& user,
                                   clock::time_point deadline) {
    const auto budget = left(deadline);
    if (budget.count() <= 0) return unavailable("no time left for the SubjectAccessReview");
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
    const auto r = client.request("POST", std::string(subjectaccessreviews), body, budget);
    if (r.status != 200 && r.status != 201) {
      return unavailable(api_failure("SubjectAccessReview", r, "subjectaccessreviews"));
    }
    simdjson::dom::parser parser;
    simdjson::dom::element doc;
    if (parser.parse(r.body).get(doc))
      return unavailable("the SubjectAccessReview answer is not JSON");
    simdjson::dom::element status;
    if (doc["status"].get(status))
      return unavailable("the SubjectAccessReview answer has no status");
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

  kube::kube_endpoint ep_;
  std::mutex mu_;
  bool cancelled_ = false;               // mu_
  std::set<kube::kube_client*> active_;  // mu_
};

}  // namespace

core::result<std::unique_ptr<token_reviewer>> make_kube_token_reviewer(
    const inventory::store_config& api) {
  auto ep = kube::resolve_endpoint(api);
  if (!ep) return std::move(ep).error();
  return std::unique_ptr<token_reviewer>(std::make_unique<kube_token_reviewer>(std::move(*ep)));
}

}  // namespace topogate::server

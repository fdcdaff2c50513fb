#pragma once
// The request handler: a pure function from a parsed request and the peer's identity
// to a response (Beast's handle_request shape). The session only reads, enforces the
// transport limits and writes; everything a route decides is here and unit-testable
// without a socket.

#include <atomic>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>
#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "admission/review.hpp"
#include "server/auth.hpp"
#include "server/shared_body.hpp"

namespace topogate::inventory {
class registry;
}

namespace topogate::server {

class metrics;
class metrics_authorizer;

namespace http = boost::beast::http;
using request = http::request<http::string_body>;
using response = http::response<shared_body>;

struct health_state {
  std::atomic<bool> listening{false};
  std::atomic<bool> certificates_loaded{false};
  std::atomic<bool> draining{false};
};

enum class listener_kind { tls, plain_health };

struct router_context {
  inventory::registry* registry = nullptr;
  std::shared_ptr<const auth_state> auth;
  metrics* m = nullptr;                        // optional
  metrics_authorizer* metrics_auth = nullptr;  // optional: who may scrape /metrics (metrics.auth)
  const health_state* health = nullptr;
  const admission::options* admission = nullptr;  // null: the defaults
  std::size_t push_body_bytes = 1u << 20;
  listener_kind listener = listener_kind::tls;
};

// Filled by handle() for the access log and the request metrics.
struct request_info {
  std::string route = "unmatched";  // route pattern, never the raw path
  std::string inventory;
  std::string identity;  // "bearer:<inventory>", "cert:<subject>", ""
  std::string detail;    // e.g. admission verdict
};

// A response made off the request thread (a push, answered once the inventory's lane has
// stored it or store.timeout has passed): called with a function that takes the finished
// response, from any thread, exactly once.
using deliver_fn = std::function<void(response)>;
using deferred_response = std::function<void(deliver_fn)>;

// The answer to `req`. A push is not answered here when `later` is given: *later is set and
// the returned response is unused. Without `later` (tests, fuzz targets) a push is waited
// for on the calling thread.
[[nodiscard]] response handle(
    const request& req, const peer_certificate& peer, const router_context& ctx, request_info& info,
    std::chrono::steady_clock::time_point received = std::chrono::steady_clock::now(),
    deferred_response* later = nullptr);

// The answer to a review that could not be made (verdict::errored): 400, 413, 415 or 504 with
// a Kubernetes Status carrying the reason. `topogate review` prints the same.
[[nodiscard]] response admission_failure(const admission::outcome& out);

// Appends the status line and header fields of `res` (and the blank line after them) to
// `out`, byte for byte as Beast's serializer writes them: the TLS session encrypts this
// and the body itself.
void render_header(const response& res, std::string& out);

struct body_limits {
  std::size_t admission = admission::default_max_body_bytes;
  std::size_t push = 1u << 20;
};
// The body limit for a request, decided from its header before any body byte is read.
[[nodiscard]] std::size_t body_limit(http::verb method, std::string_view target,
                                     const body_limits& limits) noexcept;

// RFC 9110 If-None-Match against one strong ETag (weak comparison, "*" matches).
[[nodiscard]] bool etag_matches(std::string_view if_none_match, std::string_view etag) noexcept;
// True when the Accept header prefers YAML over JSON (q-values honoured; JSON on ties).
[[nodiscard]] bool prefers_yaml(std::string_view accept) noexcept;

}  // namespace topogate::server

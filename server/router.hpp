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
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "admission/review.hpp"
#include "core/admitted_kinds.hpp"
#include "server/auth.hpp"
#include "server/response.hpp"
#include "server/shared_body.hpp"

namespace topogate::inventory {
class registry;
struct push_result;
}  // namespace topogate::inventory

namespace topogate::server {

class metrics;
class metrics_authorizer;

using request = http::request<http::string_body>;

struct health_state {
  std::atomic<bool> listening{false};
  std::atomic<bool> certificates_loaded{false};
  std::atomic<bool> draining{false};
};

enum class listener_kind { tls, plain_health };

// What a dry run's answer adds (server/workload_impact.hpp): for `inventory` and the dry
// run's result, the JSON value of its "workloads" member, "" for none. Called on the
// inventory's lane, never on a request thread.
class dry_run_answer {
 public:
  virtual ~dry_run_answer() = default;
  [[nodiscard]] virtual std::string workloads(std::string_view inventory,
                                              const inventory::push_result& r) const = 0;
};

struct router_context {
  inventory::registry* registry = nullptr;
  std::shared_ptr<const auth_state> auth;
  metrics* m = nullptr;                        // optional
  metrics_authorizer* metrics_auth = nullptr;  // optional: who may scrape /metrics (metrics.auth)
  const health_state* health = nullptr;
  const admission::options* admission = nullptr;  // null: the defaults
  std::size_t push_body_bytes = 1u << 20;
  listener_kind listener = listener_kind::tls;
  const dry_run_answer* dry_run = nullptr;  // optional: the Workload answer of a dry run
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
// a Kubernetes Status carrying the reason (response.hpp). `topogate review` prints the same.
[[nodiscard]] response admission_failure(const admission::outcome& out);

// Appends the status line and header fields of `res` (and the blank line after them) to
// `out`, byte for byte as Beast's serializer writes them: the TLS session encrypts this
// and the body itself.
void render_header(const response& res, std::string& out);

// ---- the route table: every route handle() dispatches, the body each may read, and how its
// requests are logged. Adding a route is a row (and its handler) in router.cpp.

// The methods a route answers, as bits (HEAD is answered as GET, without the body).
inline constexpr std::uint8_t method_get = 1, method_head = 2, method_post = 4, method_put = 8;

// The body a route reads: none (a request sending one is refused with 413), or up to the
// admission or the push limit (body_limits).
enum class body_kind : std::uint8_t { none, admission, push };

struct route_call;  // what a handler gets: the request, its peer, the context, the match
using route_handler = response (*)(const route_call&);

struct route {
  // "/snapshots/{name}/status": literal but for one {name} segment; the route label of the
  // metrics and the access log.
  std::string_view pattern;
  std::uint8_t methods = 0;  // method_* bits
  body_kind body = body_kind::none;
  bool health_listener = false;  // served on the plain health listener too (probes, scrapes)
  bool polled = false;           // polled by machines: its requests are logged at debug level
  const core::admitted_kind* admits = nullptr;  // the admitted kind of a /validate route
  route_handler handler = nullptr;
};

// Every route, in the order handle() tries their patterns.
[[nodiscard]] std::span<const route> routes() noexcept;

// Whether a route label names a route machines poll (the kubelet's probes, Prometheus's
// scrapes), whose requests the access log writes at debug level, so a log at info level is not
// one line per probe.
[[nodiscard]] bool is_polled_route(std::string_view pattern) noexcept;

struct body_limits {
  std::size_t admission = admission::default_max_body_bytes;
  std::size_t push = 1u << 20;
};
// The body limit for a request, decided from its header before any body byte is read: that of
// the route its method and path select, 0 when none does.
// The answer to a request that no route takes (404, or 405 with Allow), decided from its
// method and target alone, so that a session can give it before reading a body; nullopt when
// a route takes the request.
[[nodiscard]] std::optional<response> unrouted_response(http::verb method, std::string_view target,
                                                        listener_kind listener);
[[nodiscard]] std::size_t body_limit(http::verb method, std::string_view target,
                                     const body_limits& limits) noexcept;

// RFC 9110 If-None-Match against one strong ETag (weak comparison, "*" matches).
[[nodiscard]] bool etag_matches(std::string_view if_none_match, std::string_view etag) noexcept;
// True when the Accept header prefers YAML over JSON (q-values honoured; JSON on ties).
[[nodiscard]] bool prefers_yaml(std::string_view accept) noexcept;

}  // namespace topogate::server

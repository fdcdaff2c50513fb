#pragma once
// A small Kubernetes API client over Boost.Beast + OpenSSL: one TLS connection per call,
// bearer token and client certificate re-read for every call (projected ServiceAccount
// tokens and mounted certificates rotate), the API's CA verified with host/IP name checks.
// An endpoint's credential function (an exec plugin) is asked before every call, and once
// more when the API answers 401 (its credential expired early or was revoked): the call is
// then made again, once. Watches stream newline-delimited JSON events.
// Public in topogate_kube: the store and the Node watch (kube_store.cpp) use it, and so does
// `topogate diagnose` for its online reads (cli/diagnose.cpp).

#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.hpp"
#include "inventory/kube.hpp"

namespace topogate::inventory::detail {

class kube_client {
 public:
  explicit kube_client(kube_endpoint ep) : ep_(std::move(ep)) {}

  struct response {
    int status = 0;  // 0: transport failure (see error)
    std::string body;
    std::string error;  // never contains the token
  };

  // `accept`: the Accept header (e.g. a PartialObjectMetadataList for a metadata-only list).
  response request(std::string_view method, const std::string& target, const std::string& body = {},
                   std::chrono::milliseconds timeout = std::chrono::seconds(10),
                   std::string_view accept = json);

  // GET `target` (a watch URL) and hand every complete line to `on_line` until the server
  // ends the stream, `on_line` returns false, no byte arrives for `idle`, or cancel().
  // The returned status is the HTTP status of the watch response.
  response stream_lines(const std::string& target,
                        const std::function<bool(std::string_view)>& on_line,
                        std::chrono::seconds idle, std::string_view accept = json);
  static constexpr std::string_view json = "application/json";

  // Aborts the call in progress (thread-safe); later calls fail at once.
  void cancel();

  [[nodiscard]] const kube_endpoint& endpoint() const noexcept { return ep_; }

 private:
  response request_once(std::string_view method, const std::string& target, const std::string& body,
                        std::chrono::milliseconds timeout, std::string_view accept, bool refresh);
  response stream_once(const std::string& target,
                       const std::function<bool(std::string_view)>& on_line,
                       std::chrono::seconds idle, std::string_view accept, bool refresh);

  kube_endpoint ep_;
  std::mutex mu_;
  void* active_ = nullptr;  // the io_context of the call in progress (guarded by mu_)
  std::atomic<bool> cancelled_{false};
};

// The addresses of `host` (numeric, IPv4 or IPv6), by `deadline`. An IP address is taken as
// is; a name is resolved by
// `lookup` (default: getaddrinfo) on a thread of its own, which the caller waits for until
// the deadline or until `cancelled` turns true, so a name server that never answers fails
// the call in time (errc::unavailable) instead of holding it for the resolver's own retries.
// At most a few lookups may be pending at once (errc::unavailable past that). The lookup
// runs on when abandoned; it owns copies of what it reads.
using lookup_fn = std::function<core::result<std::vector<std::string>>(const std::string& host)>;
core::result<std::vector<std::string>> resolve_within(
    const std::string& host, std::chrono::steady_clock::time_point deadline,
    const std::atomic<bool>& cancelled, const lookup_fn& lookup = {});

// "%"-encodes a query parameter value.
std::string url_encode(std::string_view s);

}  // namespace topogate::inventory::detail

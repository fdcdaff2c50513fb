#pragma once
// A small Kubernetes API client over Boost.Beast + OpenSSL: one TLS connection per call,
// bearer token and client certificate re-read for every call (projected ServiceAccount
// tokens and mounted certificates rotate), the API's CA verified with host/IP name checks.
// An endpoint's credential function (an exec plugin) is asked before every call, and once
// more when the API answers 401 (its credential expired early or was revoked): the call is
// then made again, once. Watches stream newline-delimited JSON events.
//
// A call that gets an answer returns it, whatever its status; one that gets none fails with
// errc::unavailable (api_error.hpp tells both the same way). Lists and watches are built on
// it in list.hpp and watch.hpp.

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/result.hpp"
#include "kube/endpoint.hpp"

namespace topogate::kube {

class tls_conn;

// The API's answer: any HTTP status, and its body.
struct response {
  int status = 0;
  std::string body;
};

// How a stream ended once its answer began: a status other than 200 keeps its body (up to
// 1 MiB) and hands on no line.
struct stream_response : response {
  // Why a 200 stream ended before the server ended it: "watch idle timeout", "read: ...",
  // "watch event too large", "cancelled". Empty when the server ended it or the reader
  // stopped it.
  std::string broken;
};

inline constexpr std::string_view json = "application/json";

class client {
 public:
  explicit client(endpoint ep);
  ~client();
  client(const client&) = delete;
  client& operator=(const client&) = delete;

  // `accept`: the Accept header (e.g. a PartialObjectMetadataList for a metadata-only list).
  // Fails (errc::unavailable) when no answer came within `timeout`: the name lookup, the
  // connection, the TLS handshake, the credentials (a file, an exec plugin), the request or
  // the answer failed, or cancel() was called.
  core::result<response> request(std::string_view method, const std::string& target,
                                 const std::string& body = {},
                                 std::chrono::milliseconds timeout = std::chrono::seconds(10),
                                 std::string_view accept = json);

  // GET `target` (a watch URL) and hand every complete line to `on_line` until the server
  // ends the stream, `on_line` returns false, no byte arrives for `idle`, or cancel().
  // Fails (errc::unavailable) when no answer began. `read_pace`: tls_conn::set_read_pace.
  core::result<stream_response> stream_lines(const std::string& target,
                                             const std::function<bool(std::string_view)>& on_line,
                                             std::chrono::seconds idle,
                                             std::string_view accept = json,
                                             std::chrono::milliseconds read_pace = {});

  // Aborts the call in progress (thread-safe); later calls fail at once.
  void cancel();

  [[nodiscard]] const endpoint& where() const noexcept { return ep_; }

  // While a reuse lives, the client's GETs share one connection: it stays open after an
  // answer that lets it (HTTP/1.1 keep-alive) and the next GET goes on it; a kept connection
  // the server has closed meanwhile fails before any answer, and that GET is sent once more on
  // a new one. A list's pages then cost one TLS handshake, not one each. The connection is
  // closed (close_notify) when the reuse ends. Other requests open their own, as without it.
  class reuse {
   public:
    explicit reuse(client& c) : c_(c) { c_.reuse_ = true; }
    ~reuse() { c_.end_reuse(); }
    reuse(const reuse&) = delete;
    reuse& operator=(const reuse&) = delete;

   private:
    client& c_;
  };

 private:
  struct kept_connection;  // client.cpp
  // What a call did, for request(): its deadline, whether it went on a kept connection, whether
  // an answer began, and whether its connection may be kept.
  struct call_info {
    std::chrono::steady_clock::time_point deadline;
    bool reused = false;
    bool answer_began = false;
    bool keep = false;
  };
  // The setup every call shares (client.cpp).
  template <class Exchange>
  core::result<void> call(bool refresh, std::chrono::steady_clock::time_point deadline,
                          call_info& info, Exchange&& exchange);
  void end_reuse();

  endpoint ep_;
  bool reuse_ = false;                     // a reuse lives
  std::unique_ptr<kept_connection> kept_;  // the connection it keeps, between calls
  std::mutex mu_;
  void* active_ = nullptr;           // the io_context of the request in progress (guarded by mu_)
  tls_conn* active_conn_ = nullptr;  // the connection of the watch in progress (guarded by mu_)
  std::atomic<bool> cancelled_{false};
};

// Calls a thread makes with a client of their own, one per call, so that cancel() (from
// another thread) stops exactly the calls in progress; after cancel() every call fails at
// once (errc::unavailable, "the server is shutting down").
class cancellable_calls {
 public:
  explicit cancellable_calls(endpoint ep) : ep_(std::move(ep)) {}

  template <class T, class F>
  core::result<T> run(F&& call) {
    client c(ep_);
    {
      std::lock_guard lock(mu_);
      if (cancelled_) return core::fail(core::errc::unavailable, "the server is shutting down");
      active_.insert(&c);
    }
    core::result<T> r = call(c);
    std::lock_guard lock(mu_);
    active_.erase(&c);
    return r;
  }

  void cancel() {
    std::lock_guard lock(mu_);
    cancelled_ = true;
    for (client* c : active_) c->cancel();
  }

 private:
  endpoint ep_;
  std::mutex mu_;
  bool cancelled_ = false;    // mu_
  std::set<client*> active_;  // mu_
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

}  // namespace topogate::kube

#pragma once
// Who may scrape /metrics (`metrics.auth`, docs/configuration.md): anyone (`none`), a bearer
// token listed in a file (`tokenfile`), or a bearer token the Kubernetes API authenticates
// (TokenReview) and authorizes for `get` on the non-resource URL /metrics
// (SubjectAccessReview), as kube-rbac-proxy and controller-runtime's secure metrics do.
//
// The gate decides on the calling thread whatever needs no network: no token, a token file,
// a review answered earlier and still cached, every review slot busy. A Kubernetes review runs
// on one of the gate's own threads and is answered through a callback by the review timeout
// at the latest: a watchdog answers a review the API has not finished (503) and the late
// answer only fills the cache. No I/O thread ever waits for the API.

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "core/result.hpp"
#include "server/auth.hpp"
#include "server/config.hpp"
#include "util/file.hpp"

namespace prometheus {
template <typename T>
class Family;
class Counter;
}  // namespace prometheus

namespace topogate::server {

class metrics;

// How a scrape is answered: 200, 401, 403 or 503.
enum class scrape_verdict { allowed, unauthenticated, forbidden, unavailable };
[[nodiscard]] constexpr std::string_view to_string(scrape_verdict v) noexcept {
  switch (v) {
    case scrape_verdict::allowed:
      return "allowed";
    case scrape_verdict::unauthenticated:
      return "unauthenticated";
    case scrape_verdict::forbidden:
      return "forbidden";
    case scrape_verdict::unavailable:
      return "unavailable";
  }
  return "unavailable";
}

struct scrape_decision {
  scrape_verdict verdict = scrape_verdict::unavailable;
  std::string user;    // the identity the check established ("" when none); never the token
  std::string reason;  // for the response body and the logs; never the token
};

// Checks one bearer token against an authority (the Kubernetes API). Two implementations: the
// API's (cli/metrics_auth_kube.hpp, on kube/'s client, handed to serve through serve_hooks:
// server/ links no Kubernetes client) and the tests'.
class token_reviewer {
 public:
  virtual ~token_reviewer() = default;
  // Blocking, on a gate thread. Should answer by `deadline` (the gate answers the scrape then
  // anyway); `unavailable` when the authority gave no usable answer.
  virtual scrape_decision review(std::string_view token,
                                 std::chrono::steady_clock::time_point deadline) = 0;
  // Aborts the reviews in progress and makes later ones fail at once (shutdown). Thread-safe.
  virtual void cancel() = 0;
};

// What the /metrics route asks (router.hpp's router_context). An interface so the request
// path, which the fuzz build links on its own, carries no threads and no logger: the one
// implementation is metrics_gate, part of topogate_server.
class metrics_authorizer {
 public:
  using done_fn = std::function<void(scrape_decision)>;
  virtual ~metrics_authorizer() = default;
  // Whether the plain-HTTP health listener serves /metrics.
  [[nodiscard]] virtual bool serves_health_port() const noexcept = 0;
  // The decision for a request with this Authorization header, when it can be made without
  // the network; nullopt when a review must run (check_async).
  [[nodiscard]] virtual std::optional<scrape_decision> check_now(
      std::string_view authorization) = 0;
  // Decides, reviewing the token when needed. `done` is called exactly once: on this thread
  // when no review is needed (or none can start), else on another thread.
  virtual void check_async(std::string_view authorization, done_fn done) = 0;
  // check_now, else check_async waited for on this thread (callers without an executor).
  [[nodiscard]] virtual scrape_decision check(std::string_view authorization) = 0;
};

class metrics_gate final : public metrics_authorizer {
 public:
  using clock = std::chrono::steady_clock;

  // `reviewer` is required for kubernetes and unused otherwise; `m` (optional) receives the
  // gate's counters and token-file reloads. `now` is the cache's clock (tests).
  metrics_gate(metrics_config cfg, std::unique_ptr<token_reviewer> reviewer, metrics* m,
               std::function<clock::time_point()> now = {});
  ~metrics_gate() override;
  metrics_gate(const metrics_gate&) = delete;
  metrics_gate& operator=(const metrics_gate&) = delete;

  // Loads the token file (an unreadable or empty one is an error) and starts the threads.
  core::result<void> start();
  // The server is draining: answers every check still waiting (503, "shutting down") and
  // cancels the reviews in progress, without waiting for the threads. Thread-safe.
  void shutdown();
  // shutdown(), then joins the threads.
  void stop();

  [[nodiscard]] metrics_auth_mode mode() const noexcept { return cfg_.auth; }
  [[nodiscard]] bool serves_health_port() const noexcept override { return cfg_.health_port; }
  [[nodiscard]] std::optional<scrape_decision> check_now(std::string_view authorization) override;
  void check_async(std::string_view authorization, done_fn done) override;
  [[nodiscard]] scrape_decision check(std::string_view authorization) override;

  // Re-reads the token file when it changed on disk (the gate's own thread calls it every
  // second; SIGHUP with `force`); true when new tokens were swapped in. Thread-safe.
  bool poll_token_file(bool force = false);

 private:
  struct job {
    digest key{};
    std::string token;  // cleansed once reviewed
    clock::time_point deadline;
    std::vector<done_fn> waiters;
    bool answered = false;  // mu_
  };
  struct cache_entry {
    scrape_decision decision;
    clock::time_point expires;
    std::list<digest>::iterator order;
  };

  void work();
  void housekeep();
  void finish(const std::shared_ptr<job>& j, scrape_decision d, bool timed_out);
  std::optional<scrape_decision> cached(const digest& key);    // mu_ held
  void remember(const digest& key, const scrape_decision& d);  // mu_ held
  void count(scrape_verdict v);
  void count_review(std::string_view result);
  [[nodiscard]] clock::time_point now() const { return now_ ? now_() : clock::now(); }

  metrics_config cfg_;
  std::unique_ptr<token_reviewer> reviewer_;
  metrics* m_;
  std::function<clock::time_point()> now_;
  prometheus::Family<prometheus::Counter>* scrapes_ = nullptr;
  prometheus::Family<prometheus::Counter>* reviews_ = nullptr;

  // tokenfile: the digests, swapped whole when the file changes.
  std::mutex tokens_mu_;
  std::shared_ptr<const credential_set> tokens_;
  std::mutex poll_mu_;
  util::file_signature token_seen_;  // poll_mu_

  std::mutex mu_;
  std::condition_variable work_cv_;
  std::condition_variable house_cv_;
  std::deque<std::shared_ptr<job>> queue_;
  std::map<digest, std::shared_ptr<job>> pending_;  // unanswered reviews, by token digest
  std::size_t busy_ = 0;     // reviews handed to a worker and not yet returned
  std::size_t waiting_ = 0;  // checks waiting for a review
  bool stopping_ = false;
  std::map<digest, cache_entry> cache_;
  std::list<digest> cache_order_;  // oldest first
  std::vector<std::thread> threads_;
};

}  // namespace topogate::server

#include "server/metrics_auth.hpp"

#include <openssl/crypto.h>
#include <prometheus/counter.h>
#include <prometheus/family.h>

#include <future>

#include "server/log.hpp"
#include "server/metrics.hpp"

namespace topogate::server {

namespace {

// How long a token file's signature is trusted before it is looked at again.
constexpr auto token_poll_interval = std::chrono::seconds(1);

// Checks waiting on reviews, all reviews together: a scraper that keeps opening connections
// while the API hangs gets 503 instead of a growing queue.
constexpr std::size_t waiters_per_slot = 64;

std::string seconds_text(std::chrono::milliseconds d) {
  const auto ms = d.count();
  if (ms % 1000 == 0) return std::to_string(ms / 1000) + "s";
  return std::to_string(ms) + "ms";
}

}  // namespace

metrics_gate::metrics_gate(metrics_config cfg, std::unique_ptr<token_reviewer> reviewer, metrics* m,
                           std::function<clock::time_point()> now)
    : cfg_(std::move(cfg)), reviewer_(std::move(reviewer)), m_(m), now_(std::move(now)) {
  if (m_ && cfg_.auth != metrics_auth_mode::none) {
    auto& r = m_->registry();
    scrapes_ = &prometheus::BuildCounter()
                    .Name("topogate_metrics_auth_total")
                    .Help(
                        "Requests for /metrics checked by metrics.auth, by result (allowed, "
                        "unauthenticated, "
                        "forbidden, unavailable).")
                    .Register(r);
    for (auto v : {scrape_verdict::allowed, scrape_verdict::unauthenticated,
                   scrape_verdict::forbidden, scrape_verdict::unavailable}) {
      scrapes_->Add({{"result", std::string(to_string(v))}});
    }
    if (cfg_.auth == metrics_auth_mode::kubernetes) {
      reviews_ = &prometheus::BuildCounter()
                      .Name("topogate_metrics_auth_reviews_total")
                      .Help(
                          "Token reviews sent to the Kubernetes API for /metrics (cache misses), "
                          "by result "
                          "(allowed, unauthenticated, forbidden, error, timeout).")
                      .Register(r);
      for (const char* res : {"allowed", "unauthenticated", "forbidden", "error", "timeout"}) {
        reviews_->Add({{"result", res}});
      }
    }
  }
}

metrics_gate::~metrics_gate() { stop(); }

core::result<void> metrics_gate::start() {
  if (cfg_.auth == metrics_auth_mode::none) return {};
  if (cfg_.auth == metrics_auth_mode::tokenfile) {
    {
      std::lock_guard poll_lock(poll_mu_);
      token_seen_ = util::signature_of(cfg_.token_file);
    }
    auto set = load_credentials(credential_files{{cfg_.token_file}, {}, {}, {}});
    if (!set) return core::fail(set.error().code, "metrics.tokenFile: " + set.error().message);
    std::lock_guard lock(tokens_mu_);
    tokens_ = std::make_shared<const credential_set>(std::move(*set));
  } else if (!reviewer_) {
    return core::fail(core::errc::invalid_argument, "metrics.auth kubernetes: no token reviewer");
  }
  std::lock_guard lock(mu_);
  stopping_ = false;
  if (cfg_.auth == metrics_auth_mode::kubernetes) {
    // One thread per review slot: an accepted review never waits for a thread.
    for (std::size_t i = 0; i < cfg_.max_concurrent_reviews; ++i)
      threads_.emplace_back([this] { work(); });
  }
  threads_.emplace_back([this] { housekeep(); });
  return {};
}

void metrics_gate::stop() {
  shutdown();
  for (auto& t : threads_) t.join();
  threads_.clear();
}

void metrics_gate::shutdown() {
  std::vector<std::shared_ptr<job>> unanswered;
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    for (auto& [key, j] : pending_) {
      if (!j->answered) unanswered.push_back(j);
    }
    // Never handed to a worker: their tokens go now.
    for (auto& j : queue_) OPENSSL_cleanse(j->token.data(), j->token.size());
    queue_.clear();
  }
  work_cv_.notify_all();
  house_cv_.notify_all();
  // The waiting scrapes are answered first: cancelling the reviewer makes a review in progress
  // return at once, and its own answer ("cancelled") must not get there before this one.
  for (auto& j : unanswered)
    finish(j, {scrape_verdict::unavailable, {}, "the server is shutting down"}, false);
  if (reviewer_) reviewer_->cancel();
}

bool metrics_gate::poll_token_file(bool force) {
  if (cfg_.auth != metrics_auth_mode::tokenfile) return false;
  std::lock_guard poll_lock(poll_mu_);
  const util::file_signature now_seen = util::signature_of(cfg_.token_file);
  if (!force && now_seen == token_seen_) return false;
  token_seen_ = now_seen;
  auto set = load_credentials(credential_files{{cfg_.token_file}, {}, {}, {}});
  if (m_) m_->credential_reload("metrics-token", set.ok());
  if (!set) {
    log(log_level::error, "metrics token file reload failed; keeping the previous tokens",
        {{"error", set.error().message}});
    return false;
  }
  {
    std::lock_guard lock(tokens_mu_);
    tokens_ = std::make_shared<const credential_set>(std::move(*set));
  }
  log(log_level::info, "reloaded the metrics token file", {{"file", cfg_.token_file}});
  return true;
}

std::optional<scrape_decision> metrics_gate::check_now(std::string_view authorization) {
  if (cfg_.auth == metrics_auth_mode::none) return scrape_decision{scrape_verdict::allowed, {}, {}};
  const std::string_view token = bearer_token(authorization);
  std::optional<scrape_decision> d;
  if (token.empty()) {
    d = scrape_decision{scrape_verdict::unauthenticated,
                        {},
                        authorization.empty() ? "a bearer token is required for /metrics"
                                              : "the Authorization header holds no bearer token"};
  } else if (cfg_.auth == metrics_auth_mode::tokenfile) {
    std::shared_ptr<const credential_set> set;
    {
      std::lock_guard lock(tokens_mu_);
      set = tokens_;
    }
    if (set && authenticate(*set, "metrics", authorization, peer_certificate{}).status ==
                   auth_status::ok) {
      d = scrape_decision{scrape_verdict::allowed, "bearer:metrics", {}};
    } else {
      // No identity without a listed token: 401, as for a token the API does not know.
      d = scrape_decision{
          scrape_verdict::unauthenticated, {}, "the bearer token is not accepted for /metrics"};
    }
  } else {
    const digest key = sha256(token);
    std::lock_guard lock(mu_);
    // While draining, what is cached is still answered; nothing new is reviewed.
    d = cached(key);
    if (!d && stopping_)
      d = scrape_decision{scrape_verdict::unavailable, {}, "the server is shutting down"};
  }
  if (d) count(d->verdict);
  return d;
}

void metrics_gate::check_async(std::string_view authorization, done_fn done) {
  if (cfg_.auth != metrics_auth_mode::kubernetes) {
    // Nothing to wait for in the other modes.
    auto d = check_now(authorization);
    return done(std::move(*d));
  }
  const std::string_view token = bearer_token(authorization);
  if (token.empty()) {
    auto d = check_now(authorization);
    return done(std::move(*d));
  }
  const digest key = sha256(token);
  std::optional<scrape_decision> now_decided;
  {
    std::lock_guard lock(mu_);
    if (auto hit = cached(key)) {
      now_decided = std::move(hit);
    } else if (stopping_) {
      now_decided = scrape_decision{scrape_verdict::unavailable, {}, "the server is shutting down"};
    } else if (waiting_ >= cfg_.max_concurrent_reviews * waiters_per_slot) {
      now_decided = scrape_decision{
          scrape_verdict::unavailable, {}, "too many scrapes are waiting for token reviews"};
    } else if (auto it = pending_.find(key); it != pending_.end()) {
      // The same token is being reviewed: wait for that answer instead of asking again.
      it->second->waiters.push_back(std::move(done));
      ++waiting_;
      return;
    } else if (busy_ >= cfg_.max_concurrent_reviews) {
      now_decided =
          scrape_decision{scrape_verdict::unavailable,
                          {},
                          "every token review slot is busy (metrics.maxConcurrentReviews: " +
                              std::to_string(cfg_.max_concurrent_reviews) +
                              "): the Kubernetes API is slow or unreachable"};
    } else {
      auto j = std::make_shared<job>();
      j->key = key;
      j->token = std::string(token);
      j->deadline = clock::now() + cfg_.review_timeout;
      j->waiters.push_back(std::move(done));
      ++waiting_;
      ++busy_;
      pending_.emplace(key, j);
      queue_.push_back(std::move(j));
    }
  }
  if (now_decided) {
    count(now_decided->verdict);
    return done(std::move(*now_decided));
  }
  work_cv_.notify_one();
  house_cv_.notify_one();  // a new deadline to watch
}

scrape_decision metrics_gate::check(std::string_view authorization) {
  if (auto d = check_now(authorization)) return std::move(*d);
  std::promise<scrape_decision> answer;
  auto got = answer.get_future();
  check_async(authorization, [&answer](scrape_decision d) { answer.set_value(std::move(d)); });
  return got.get();
}

void metrics_gate::work() {
  for (;;) {
    std::shared_ptr<job> j;
    {
      std::unique_lock lock(mu_);
      work_cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (stopping_) return;
      j = std::move(queue_.front());
      queue_.pop_front();
    }
    scrape_decision d = reviewer_->review(j->token, j->deadline);
    OPENSSL_cleanse(j->token.data(), j->token.size());
    j->token.clear();
    {
      std::lock_guard lock(mu_);
      --busy_;
      // A definite answer is true however late it came: the next scrape finds it.
      if (d.verdict != scrape_verdict::unavailable) remember(j->key, d);
    }
    finish(j, std::move(d), false);
  }
}

void metrics_gate::finish(const std::shared_ptr<job>& j, scrape_decision d, bool timed_out) {
  std::vector<done_fn> waiters;
  bool stopping = false;
  {
    std::lock_guard lock(mu_);
    if (j->answered) return;  // the watchdog (or stop) answered first
    j->answered = true;
    stopping = stopping_;
    waiters = std::move(j->waiters);
    waiting_ -= waiters.size();
    if (auto it = pending_.find(j->key); it != pending_.end() && it->second == j)
      pending_.erase(it);
  }
  if (!stopping) {
    if (timed_out) {
      count_review("timeout");
    } else {
      switch (d.verdict) {
        case scrape_verdict::allowed:
          count_review("allowed");
          break;
        case scrape_verdict::unauthenticated:
          count_review("unauthenticated");
          break;
        case scrape_verdict::forbidden:
          count_review("forbidden");
          break;
        case scrape_verdict::unavailable:
          count_review("error");
          break;
      }
    }
    // The user and the reason only: never the token, nor anything the API echoed of it.
    switch (d.verdict) {
      case scrape_verdict::allowed:
        log(log_level::debug, "metrics scrape authorized", {{"user", d.user}});
        break;
      case scrape_verdict::unauthenticated:
        log(log_level::info, "metrics scrape refused: token not authenticated",
            {{"reason", d.reason}});
        break;
      case scrape_verdict::forbidden:
        log(log_level::info, "metrics scrape refused: not authorized",
            {{"user", d.user}, {"reason", d.reason}});
        break;
      case scrape_verdict::unavailable:
        log(log_level::warn, "metrics scrape not reviewed", {{"reason", d.reason}});
        break;
    }
  }
  for (auto& w : waiters) {
    count(d.verdict);
    w(d);
  }
}

void metrics_gate::housekeep() {
  auto next_poll = clock::now() + token_poll_interval;
  std::unique_lock lock(mu_);
  while (!stopping_) {
    const auto t = clock::now();
    std::vector<std::shared_ptr<job>> expired;
    auto wake = cfg_.auth == metrics_auth_mode::tokenfile ? next_poll : clock::time_point::max();
    for (const auto& [key, j] : pending_) {
      if (j->answered) continue;
      if (j->deadline <= t) {
        expired.push_back(j);
      } else {
        wake = std::min(wake, j->deadline);
      }
    }
    if (!expired.empty() || (cfg_.auth == metrics_auth_mode::tokenfile && t >= next_poll)) {
      lock.unlock();
      for (auto& j : expired) {
        finish(j,
               {scrape_verdict::unavailable,
                {},
                "the Kubernetes API did not answer the token review within " +
                    seconds_text(cfg_.review_timeout) + " (metrics.reviewTimeout)"},
               true);
      }
      if (cfg_.auth == metrics_auth_mode::tokenfile && clock::now() >= next_poll) {
        poll_token_file();
        next_poll = clock::now() + token_poll_interval;
      }
      lock.lock();
      continue;
    }
    if (wake == clock::time_point::max()) {
      house_cv_.wait(lock);
    } else {
      house_cv_.wait_until(lock, wake);
    }
  }
}

std::optional<scrape_decision> metrics_gate::cached(const digest& key) {
  const auto it = cache_.find(key);
  if (it == cache_.end()) return std::nullopt;
  if (now() >= it->second.expires) {
    cache_order_.erase(it->second.order);
    cache_.erase(it);
    return std::nullopt;
  }
  return it->second.decision;
}

void metrics_gate::remember(const digest& key, const scrape_decision& d) {
  if (cfg_.cache_ttl.count() <= 0 || cfg_.cache_size == 0) return;
  if (auto it = cache_.find(key); it != cache_.end()) {
    cache_order_.erase(it->second.order);
    cache_.erase(it);
  }
  // Bounded: the oldest answer makes room (tokens seen once, e.g. a scan, do not pile up).
  while (cache_.size() >= cfg_.cache_size && !cache_order_.empty()) {
    cache_.erase(cache_order_.front());
    cache_order_.pop_front();
  }
  cache_order_.push_back(key);
  cache_.emplace(key, cache_entry{d, now() + cfg_.cache_ttl, std::prev(cache_order_.end())});
}

void metrics_gate::count(scrape_verdict v) {
  if (scrapes_) scrapes_->Add({{"result", std::string(to_string(v))}}).Increment();
}

void metrics_gate::count_review(std::string_view result) {
  if (reviews_) reviews_->Add({{"result", std::string(result)}}).Increment();
}

}  // namespace topogate::server

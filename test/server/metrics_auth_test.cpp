#include "server/metrics_auth.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <mutex>
#include <thread>

#include "server/config.hpp"
#include "server/metrics.hpp"
#include "server/router.hpp"
#include "test/timing.hpp"

namespace topogate::server {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;

// ---------------------------------------------------------------- configuration

class MetricsConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("topogate-metrics-config-" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  core::result<serve_config> parse(const std::string& metrics_block) {
    return parse_serve_config("tls: {certFile: tls.crt, keyFile: tls.key}\n" + metrics_block,
                              dir_.string());
  }
  // The error message of a configuration that must be refused, "" when it was accepted.
  std::string refused(const std::string& metrics_block) {
    auto cfg = parse(metrics_block);
    return cfg ? std::string() : cfg.error().message;
  }
  fs::path dir_;
};

TEST_F(MetricsConfigTest, DefaultsAreTodaysOpenMetrics) {
  auto cfg = parse("");
  ASSERT_TRUE(cfg) << cfg.error().message;
  EXPECT_EQ(cfg->metrics.auth, metrics_auth_mode::none);
  EXPECT_TRUE(cfg->metrics.health_port);
  EXPECT_EQ(cfg->metrics.review_timeout, 5s);
  EXPECT_EQ(cfg->metrics.cache_ttl, 60s);
  EXPECT_EQ(cfg->metrics.cache_size, 1024u);
  EXPECT_EQ(cfg->metrics.max_concurrent_reviews, 4u);
}

TEST_F(MetricsConfigTest, Modes) {
  auto tf = parse("metrics: {auth: tokenfile, tokenFile: tokens}\n");
  ASSERT_TRUE(tf) << tf.error().message;
  EXPECT_EQ(tf->metrics.auth, metrics_auth_mode::tokenfile);
  EXPECT_EQ(tf->metrics.token_file, (dir_ / "tokens").string());
  // With auth, the plain port stops serving /metrics unless told otherwise.
  EXPECT_FALSE(tf->metrics.health_port);

  auto k = parse(
      "metrics: {auth: kubernetes, reviewTimeout: 2s, cacheTTL: 0s, cacheSize: 10, "
      "maxConcurrentReviews: 64, "
      "healthPort: true}\n");
  ASSERT_TRUE(k) << k.error().message;
  EXPECT_EQ(k->metrics.auth, metrics_auth_mode::kubernetes);
  EXPECT_EQ(k->metrics.review_timeout, 2s);
  EXPECT_EQ(k->metrics.cache_ttl, 0s);
  EXPECT_EQ(k->metrics.cache_size, 10u);
  EXPECT_EQ(k->metrics.max_concurrent_reviews, 64u);
  EXPECT_TRUE(k->metrics.health_port);

  auto none = parse("metrics: {auth: none, healthPort: false}\n");
  ASSERT_TRUE(none) << none.error().message;
  EXPECT_FALSE(none->metrics.health_port);
}

TEST_F(MetricsConfigTest, ClearErrors) {
  EXPECT_EQ(refused("metrics: {auth: basic}\n"),
            "metrics.auth: must be none, tokenfile or kubernetes, got \"basic\"");
  EXPECT_EQ(refused("metrics: {auth: tokenfile}\n"),
            "metrics.tokenFile: is required with metrics.auth tokenfile");
  EXPECT_EQ(refused("metrics: {tokenFile: t}\n"),
            "metrics.tokenFile: is only used with metrics.auth tokenfile");
  EXPECT_EQ(refused("metrics: {auth: tokenfile, tokenFile: t, reviewTimeout: 1s}\n"),
            "metrics.reviewTimeout: is only used with metrics.auth kubernetes");
  EXPECT_EQ(refused("metrics: {cacheTTL: 1m}\n"),
            "metrics.cacheTTL: is only used with metrics.auth kubernetes");
  EXPECT_EQ(refused("metrics: {auth: kubernetes, cacheTTL: 1m, tokenfile: x}\n"),
            "metrics: unknown key \"tokenfile\"");
  EXPECT_EQ(refused("metrics: {auth: kubernetes, healthPort: maybe}\n"),
            "metrics.healthPort: must be true or false, got \"maybe\"");
  EXPECT_EQ(refused("metrics: [kubernetes]\n"), "metrics: must be a mapping");
}

TEST_F(MetricsConfigTest, LimitsBothSides) {
  const std::string k = "metrics: {auth: kubernetes, ";
  EXPECT_EQ(refused(k + "reviewTimeout: 99ms}\n"),
            "metrics.reviewTimeout: must be between 100ms and 30s");
  EXPECT_EQ(refused(k + "reviewTimeout: 100ms}\n"), "");
  EXPECT_EQ(refused(k + "reviewTimeout: 30s}\n"), "");
  EXPECT_EQ(refused(k + "reviewTimeout: 30001ms}\n"),
            "metrics.reviewTimeout: must be between 100ms and 30s");
  EXPECT_EQ(refused(k + "cacheTTL: 1h}\n"), "");
  EXPECT_EQ(refused(k + "cacheTTL: 1h0m1s}\n"), "metrics.cacheTTL: must be between 0s and 1h");
  EXPECT_EQ(refused(k + "cacheTTL: -1s}\n"), "metrics.cacheTTL: must not be negative");
  EXPECT_EQ(refused(k + "cacheSize: 0}\n"),
            "metrics.cacheSize: must be at least 1 (cacheTTL: 0s turns the cache off)");
  EXPECT_EQ(refused(k + "cacheSize: 1}\n"), "");
  EXPECT_EQ(refused(k + "cacheSize: 1048576}\n"), "");
  EXPECT_EQ(refused(k + "cacheSize: 1048577}\n"), "metrics.cacheSize: must be at most 1048576");
  EXPECT_EQ(refused(k + "maxConcurrentReviews: 0}\n"),
            "metrics.maxConcurrentReviews: must be between 1 and 64");
  EXPECT_EQ(refused(k + "maxConcurrentReviews: 1}\n"), "");
  EXPECT_EQ(refused(k + "maxConcurrentReviews: 65}\n"),
            "metrics.maxConcurrentReviews: must be at most 64");
}

TEST_F(MetricsConfigTest, Audiences) {
  EXPECT_TRUE(parse("metrics: {auth: kubernetes}\n")->metrics.audiences.empty());
  auto one = parse("metrics: {auth: kubernetes, audiences: [topogate-metrics]}\n");
  ASSERT_TRUE(one) << one.error().message;
  EXPECT_EQ(one->metrics.audiences, std::vector<std::string>{"topogate-metrics"});
  std::string sixteen = "metrics: {auth: kubernetes, audiences: [";
  for (int i = 0; i < 16; ++i) sixteen += (i ? ",a" : "a") + std::to_string(i);
  EXPECT_EQ(refused(sixteen + "]}\n"), "");
  EXPECT_EQ(
      refused(sixteen + ",a16]}\n"),
      "metrics.audiences: must list 1 to 16 audiences (leave it out for the API server's own)");
  EXPECT_EQ(
      refused("metrics: {auth: kubernetes, audiences: []}\n"),
      "metrics.audiences: must list 1 to 16 audiences (leave it out for the API server's own)");
  EXPECT_EQ(refused("metrics: {auth: kubernetes, audiences: [" + std::string(256, 'x') + "]}\n"),
            "");
  EXPECT_EQ(refused("metrics: {auth: kubernetes, audiences: [" + std::string(257, 'x') + "]}\n"),
            "metrics.audiences[0]: must be 1 to 256 characters");
  EXPECT_EQ(refused("metrics: {auth: kubernetes, audiences: [a, '']}\n"),
            "metrics.audiences[1]: must be 1 to 256 characters");
  EXPECT_EQ(refused("metrics: {auth: kubernetes, audiences: ['a b']}\n"),
            "metrics.audiences[0]: must not contain spaces or control characters");
  EXPECT_EQ(refused("metrics: {auth: kubernetes, audiences: [a, b, a]}\n"),
            "metrics.audiences[2]: \"a\" is listed twice");
  EXPECT_EQ(refused("metrics: {auth: kubernetes, audiences: a}\n"),
            "metrics.audiences: must be a list of strings");
  EXPECT_EQ(refused("metrics: {auth: tokenfile, tokenFile: t, audiences: [a]}\n"),
            "metrics.audiences: is only used with metrics.auth kubernetes");
}

// ---------------------------------------------------------------- tokenfile

class TokenFileGate : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("topogate-metrics-tokens-" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    file_ = (dir_ / "tokens").string();
    write("scraper-token-one\n\n  scraper-token-two  \n");
    cfg_.auth = metrics_auth_mode::tokenfile;
    cfg_.token_file = file_;
    cfg_.health_port = false;
  }
  void TearDown() override { fs::remove_all(dir_); }
  void write(const std::string& text) {
    // A new inode, as a Secret volume's ..data swap makes: the signature changes even when
    // size and mtime do not.
    const std::string tmp = file_ + ".tmp";
    std::ofstream(tmp) << text;
    fs::rename(tmp, file_);
  }
  fs::path dir_;
  std::string file_;
  metrics_config cfg_;
};

TEST_F(TokenFileGate, AllowsListedTokensOnly) {
  metrics m;
  metrics_gate gate(cfg_, nullptr, &m);
  ASSERT_TRUE(gate.start());
  EXPECT_EQ(gate.check_now("")->verdict, scrape_verdict::unauthenticated);
  EXPECT_EQ(gate.check_now("Basic c2NyYXBlcjp4")->verdict, scrape_verdict::unauthenticated);
  EXPECT_EQ(gate.check_now("Bearer scraper-token-on")->verdict, scrape_verdict::unauthenticated);
  EXPECT_EQ(gate.check_now("Bearer scraper-token-one")->verdict, scrape_verdict::allowed);
  EXPECT_EQ(gate.check_now("bearer scraper-token-two")->verdict, scrape_verdict::allowed);
  const std::string text = m.serialize();
  EXPECT_NE(text.find("topogate_metrics_auth_total{result=\"allowed\"} 2"), std::string::npos)
      << text;
  EXPECT_NE(text.find("topogate_metrics_auth_total{result=\"unauthenticated\"} 3"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("scraper-token"), std::string::npos);
}

TEST_F(TokenFileGate, ReloadsAChangedFileAndKeepsTheOldTokensWhenTheNewFileIsEmpty) {
  metrics m;
  metrics_gate gate(cfg_, nullptr, &m);
  ASSERT_TRUE(gate.start());
  EXPECT_FALSE(gate.poll_token_file());
  write("scraper-token-three\n");
  // The gate's own thread may have seen the change first: the effect is what counts.
  (void)gate.poll_token_file();
  EXPECT_EQ(gate.check_now("Bearer scraper-token-one")->verdict, scrape_verdict::unauthenticated);
  EXPECT_EQ(gate.check_now("Bearer scraper-token-three")->verdict, scrape_verdict::allowed);
  write("\n");
  EXPECT_FALSE(gate.poll_token_file());  // refused, whoever looked first
  EXPECT_EQ(gate.check_now("Bearer scraper-token-three")->verdict, scrape_verdict::allowed);
  EXPECT_NE(m.serialize().find(
                "topogate_credential_reloads_total{kind=\"metrics-token\",result=\"failure\"} 1"),
            std::string::npos);
}

TEST_F(TokenFileGate, AnEmptyOrMissingFileStopsTheStart) {
  write("  \n");
  metrics_gate empty(cfg_, nullptr, nullptr);
  auto r = empty.start();
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("metrics.tokenFile: token file"), std::string::npos)
      << r.error().message;
  cfg_.token_file = (dir_ / "absent").string();
  metrics_gate missing(cfg_, nullptr, nullptr);
  EXPECT_FALSE(missing.start());
}

// ---------------------------------------------------------------- kubernetes (a test reviewer)

// Answers by token: "allow-*" allowed, "deny-*" forbidden, "down-*" unavailable, others
// unauthenticated. While held, every review waits for release() (or cancel()).
class scripted_reviewer final : public token_reviewer {
 public:
  scrape_decision review(std::string_view token, clock_type::time_point) override {
    std::unique_lock lock(mu_);
    ++calls_;
    seen_.emplace_back(token);
    cv_.notify_all();
    cv_.wait(lock, [this] { return !held_ || cancelled_; });
    if (cancelled_) return {scrape_verdict::unavailable, {}, "cancelled"};
    if (token.starts_with("allow-"))
      return {scrape_verdict::allowed, "user:" + std::string(token.substr(6)), {}};
    if (token.starts_with("deny-"))
      return {scrape_verdict::forbidden, "user:" + std::string(token.substr(5)), "no"};
    if (token.starts_with("down-")) return {scrape_verdict::unavailable, {}, "API down"};
    return {scrape_verdict::unauthenticated, {}, "unknown token"};
  }
  void cancel() override {
    std::lock_guard lock(mu_);
    cancelled_ = true;
    cv_.notify_all();
  }
  void hold() {
    std::lock_guard lock(mu_);
    held_ = true;
  }
  void release() {
    std::lock_guard lock(mu_);
    held_ = false;
    cv_.notify_all();
  }
  int calls() {
    std::lock_guard lock(mu_);
    return calls_;
  }
  // Waits (bounded) until `n` reviews have started.
  bool wait_calls(int n) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, 5s, [&] { return calls_ >= n; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int calls_ = 0;
  bool held_ = false;
  bool cancelled_ = false;
  std::vector<std::string> seen_;
};

// A settable clock for the cache.
struct test_clock {
  std::shared_ptr<std::atomic<clock_type::rep>> offset =
      std::make_shared<std::atomic<clock_type::rep>>(0);
  clock_type::time_point base = clock_type::now();
  std::function<clock_type::time_point()> fn() const {
    return [o = offset, b = base] { return b + clock_type::duration(o->load()); };
  }
  void advance(clock_type::duration d) const { *offset += d.count(); }
};

// A check_async answer, waited for with a deadline.
struct answer {
  std::promise<scrape_decision> p;
  std::future<scrape_decision> f = p.get_future();
  metrics_gate::done_fn fn() {
    return [this](scrape_decision d) { p.set_value(std::move(d)); };
  }
  bool ready(std::chrono::milliseconds within = 5000ms) {
    return f.wait_for(within) == std::future_status::ready;
  }
};

struct KubeGate : ::testing::Test {
  metrics_config cfg() const {
    metrics_config c;
    c.auth = metrics_auth_mode::kubernetes;
    c.health_port = false;
    c.cache_ttl = 60s;
    c.max_concurrent_reviews = 2;
    return c;
  }
};

TEST_F(KubeGate, CachesAllowedAndRefusedAnswersForTheirTtl) {
  auto owned = std::make_unique<scripted_reviewer>();
  auto* reviewer = owned.get();
  test_clock clk;
  metrics m;
  metrics_gate gate(cfg(), std::move(owned), &m, clk.fn());
  ASSERT_TRUE(gate.start());

  EXPECT_EQ(gate.check_now("Bearer allow-prometheus"), std::nullopt);  // not reviewed yet
  const auto first = gate.check("Bearer allow-prometheus");
  EXPECT_EQ(first.verdict, scrape_verdict::allowed);
  EXPECT_EQ(first.user, "user:prometheus");
  EXPECT_EQ(reviewer->calls(), 1);
  auto again = gate.check_now("Bearer allow-prometheus");
  ASSERT_TRUE(again);
  EXPECT_EQ(again->verdict, scrape_verdict::allowed);

  EXPECT_EQ(gate.check("Bearer deny-intruder").verdict, scrape_verdict::forbidden);
  EXPECT_EQ(gate.check("Bearer forged").verdict, scrape_verdict::unauthenticated);
  EXPECT_EQ(reviewer->calls(), 3);
  EXPECT_EQ(gate.check_now("Bearer deny-intruder")->verdict, scrape_verdict::forbidden);
  EXPECT_EQ(gate.check_now("Bearer forged")->verdict, scrape_verdict::unauthenticated);
  EXPECT_EQ(reviewer->calls(), 3);

  // An API that could not answer is asked again next time.
  EXPECT_EQ(gate.check("Bearer down-1").verdict, scrape_verdict::unavailable);
  EXPECT_EQ(gate.check_now("Bearer down-1"), std::nullopt);

  clk.advance(59s);
  EXPECT_TRUE(gate.check_now("Bearer allow-prometheus"));
  clk.advance(1s);
  EXPECT_EQ(gate.check_now("Bearer allow-prometheus"), std::nullopt);
  EXPECT_EQ(gate.check_now("Bearer deny-intruder"), std::nullopt);
  EXPECT_EQ(gate.check("Bearer allow-prometheus").verdict, scrape_verdict::allowed);
  EXPECT_EQ(reviewer->calls(), 5);

  const std::string text = m.serialize();
  EXPECT_NE(text.find("topogate_metrics_auth_reviews_total{result=\"allowed\"} 2"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("topogate_metrics_auth_reviews_total{result=\"error\"} 1"), std::string::npos)
      << text;
  EXPECT_NE(text.find("topogate_metrics_auth_total{result=\"allowed\"} 4"), std::string::npos)
      << text;
  EXPECT_NE(text.find("topogate_metrics_auth_total{result=\"forbidden\"} 2"), std::string::npos)
      << text;
  EXPECT_EQ(text.find("prometheus\""), std::string::npos);  // no user or token in a label
}

TEST_F(KubeGate, NoTokenIsRefusedWithoutAReview) {
  auto owned = std::make_unique<scripted_reviewer>();
  auto* reviewer = owned.get();
  metrics_gate gate(cfg(), std::move(owned), nullptr);
  ASSERT_TRUE(gate.start());
  EXPECT_EQ(gate.check_now("")->verdict, scrape_verdict::unauthenticated);
  EXPECT_EQ(gate.check_now("Bearer ")->verdict, scrape_verdict::unauthenticated);
  EXPECT_EQ(gate.check("Basic dXNlcjpwdw==").verdict, scrape_verdict::unauthenticated);
  EXPECT_EQ(reviewer->calls(), 0);
}

TEST_F(KubeGate, TtlZeroCachesNothing) {
  auto owned = std::make_unique<scripted_reviewer>();
  auto* reviewer = owned.get();
  auto c = cfg();
  c.cache_ttl = 0s;
  metrics_gate gate(c, std::move(owned), nullptr);
  ASSERT_TRUE(gate.start());
  EXPECT_EQ(gate.check("Bearer allow-a").verdict, scrape_verdict::allowed);
  EXPECT_EQ(gate.check_now("Bearer allow-a"), std::nullopt);
  EXPECT_EQ(gate.check("Bearer allow-a").verdict, scrape_verdict::allowed);
  EXPECT_EQ(reviewer->calls(), 2);
}

TEST_F(KubeGate, TheCacheIsBoundedOldestOut) {
  auto owned = std::make_unique<scripted_reviewer>();
  auto c = cfg();
  c.cache_size = 2;
  metrics_gate gate(c, std::move(owned), nullptr);
  ASSERT_TRUE(gate.start());
  (void)gate.check("Bearer allow-1");
  (void)gate.check("Bearer allow-2");
  EXPECT_TRUE(gate.check_now("Bearer allow-1"));
  EXPECT_TRUE(gate.check_now("Bearer allow-2"));
  (void)gate.check("Bearer allow-3");
  EXPECT_EQ(gate.check_now("Bearer allow-1"), std::nullopt);
  EXPECT_TRUE(gate.check_now("Bearer allow-2"));
  EXPECT_TRUE(gate.check_now("Bearer allow-3"));
}

TEST_F(KubeGate, ConcurrentReviewsAreBoundedAndOneTokenIsReviewedOnce) {
  auto owned = std::make_unique<scripted_reviewer>();
  auto* reviewer = owned.get();
  reviewer->hold();
  metrics_gate gate(cfg(), std::move(owned), nullptr);  // 2 slots
  ASSERT_TRUE(gate.start());
  answer a1, a1_again, a2, a3;
  gate.check_async("Bearer allow-1", a1.fn());
  gate.check_async("Bearer allow-2", a2.fn());
  ASSERT_TRUE(reviewer->wait_calls(2));
  // The same token joins the review in progress instead of taking a slot.
  gate.check_async("Bearer allow-1", a1_again.fn());
  // A third token finds both slots busy: refused at once, not queued: answered by the
  // time check_async returns, while the two reviews are still held.
  gate.check_async("Bearer allow-3", a3.fn());
  ASSERT_TRUE(a3.ready(0ms));
  const auto busy = a3.f.get();
  EXPECT_EQ(busy.verdict, scrape_verdict::unavailable);
  EXPECT_NE(busy.reason.find("maxConcurrentReviews: 2"), std::string::npos) << busy.reason;
  EXPECT_FALSE(a1.ready(50ms));
  reviewer->release();
  ASSERT_TRUE(a1.ready());
  ASSERT_TRUE(a1_again.ready());
  ASSERT_TRUE(a2.ready());
  EXPECT_EQ(a1.f.get().verdict, scrape_verdict::allowed);
  EXPECT_EQ(a1_again.f.get().verdict, scrape_verdict::allowed);
  EXPECT_EQ(reviewer->calls(), 2);
  // A slot is free again.
  EXPECT_EQ(gate.check("Bearer allow-3").verdict, scrape_verdict::allowed);
}

TEST_F(KubeGate, AHangingReviewIsAnsweredAtItsDeadlineAndItsSlotStaysTaken) {
  auto owned = std::make_unique<scripted_reviewer>();
  auto* reviewer = owned.get();
  reviewer->hold();
  auto c = cfg();
  c.review_timeout = 300ms;
  c.max_concurrent_reviews = 1;
  metrics m;
  metrics_gate gate(c, std::move(owned), &m);
  ASSERT_TRUE(gate.start());
  answer a;
  const auto t0 = clock_type::now();
  gate.check_async("Bearer allow-late", a.fn());
  // At reviewTimeout (300 ms), with the margin of test/timing.hpp: not when the review
  // answers, which it never does while held.
  ASSERT_TRUE(a.ready(300ms + test_timing::scheduling_margin));
  const auto took = clock_type::now() - t0;
  EXPECT_GE(took, 300ms);
  EXPECT_LT(took, 300ms + test_timing::scheduling_margin);
  const auto d = a.f.get();
  EXPECT_EQ(d.verdict, scrape_verdict::unavailable);
  EXPECT_EQ(
      d.reason,
      "the Kubernetes API did not answer the token review within 300ms (metrics.reviewTimeout)");
  // The review still holds the only slot: the next token is refused at once.
  EXPECT_EQ(gate.check("Bearer allow-other").verdict, scrape_verdict::unavailable);
  // Its late answer fills the cache.
  reviewer->release();
  bool cached = false;
  for (auto until = clock_type::now() + 5s; clock_type::now() < until && !cached;) {
    cached = gate.check_now("Bearer allow-late").has_value();
    if (!cached) std::this_thread::sleep_for(5ms);
  }
  EXPECT_TRUE(cached);
  EXPECT_NE(m.serialize().find("topogate_metrics_auth_reviews_total{result=\"timeout\"} 1"),
            std::string::npos);
}

TEST_F(KubeGate, StopAnswersWhatIsWaiting) {
  auto owned = std::make_unique<scripted_reviewer>();
  auto* reviewer = owned.get();
  reviewer->hold();
  auto c = cfg();
  c.review_timeout = 30s;
  metrics_gate gate(c, std::move(owned), nullptr);
  ASSERT_TRUE(gate.start());
  answer a;
  gate.check_async("Bearer allow-1", a.fn());
  ASSERT_TRUE(reviewer->wait_calls(1));
  const auto t0 = clock_type::now();
  gate.stop();
  // Not the review's 30 s timeout: the margin of test/timing.hpp.
  EXPECT_LT(clock_type::now() - t0, test_timing::scheduling_margin);
  ASSERT_TRUE(a.ready(0ms));
  EXPECT_EQ(a.f.get().verdict, scrape_verdict::unavailable);
  EXPECT_EQ(gate.check("Bearer allow-2").verdict, scrape_verdict::unavailable);
}

// ---------------------------------------------------------------- the /metrics route

response get(const router_context& ctx, std::string_view target,
             std::string_view authorization = {}) {
  request req{http::verb::get, target, 11};
  if (!authorization.empty()) req.set(http::field::authorization, authorization);
  request_info info;
  return handle(req, peer_certificate{}, ctx, info);
}

TEST_F(TokenFileGate, TheRouteAnswers401200And404OnThePlainPort) {
  metrics m;
  metrics_gate gate(cfg_, nullptr, &m);
  ASSERT_TRUE(gate.start());
  health_state health;
  health.listening = true;
  health.certificates_loaded = true;
  router_context ctx;
  ctx.m = &m;
  ctx.metrics_auth = &gate;
  ctx.health = &health;

  auto no_token = get(ctx, "/metrics");
  EXPECT_EQ(no_token.result(), http::status::unauthorized);
  EXPECT_EQ(no_token[http::field::www_authenticate], "Bearer realm=\"topogate\"");
  EXPECT_EQ(get(ctx, "/metrics", "Bearer wrong").result(), http::status::unauthorized);
  auto ok = get(ctx, "/metrics", "Bearer scraper-token-one");
  EXPECT_EQ(ok.result(), http::status::ok);
  EXPECT_NE(std::string(ok.body().data).find("topogate_metrics_auth_total"), std::string::npos);
  EXPECT_EQ(get(ctx, "/healthz").result(), http::status::ok);

  ctx.listener = listener_kind::plain_health;  // metrics.healthPort false
  EXPECT_EQ(get(ctx, "/metrics", "Bearer scraper-token-one").result(), http::status::not_found);
  EXPECT_EQ(get(ctx, "/livez").result(), http::status::ok);
}

TEST_F(KubeGate, TheRouteDefersAReviewAndAnswersFromTheCache) {
  auto owned = std::make_unique<scripted_reviewer>();
  metrics m;
  auto c = cfg();
  c.health_port = true;
  metrics_gate gate(c, std::move(owned), &m);
  ASSERT_TRUE(gate.start());
  router_context ctx;
  ctx.m = &m;
  ctx.metrics_auth = &gate;
  ctx.listener = listener_kind::plain_health;

  request req{http::verb::get, "/metrics", 11};
  req.set(http::field::authorization, "Bearer deny-someone");
  request_info info;
  deferred_response later;
  (void)handle(req, peer_certificate{}, ctx, info, clock_type::now(), &later);
  ASSERT_TRUE(later);
  std::promise<response> delivered;
  later([&delivered](response r) { delivered.set_value(std::move(r)); });
  auto f = delivered.get_future();
  ASSERT_EQ(f.wait_for(5s), std::future_status::ready);
  const response refused = f.get();
  EXPECT_EQ(refused.result(), http::status::forbidden);
  EXPECT_EQ(std::string(refused.body().data),
            R"({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",)"
            R"("message":"no","reason":"Forbidden","code":403})");

  // Cached now: answered on the spot.
  deferred_response none;
  request_info info2;
  auto again = handle(req, peer_certificate{}, ctx, info2, clock_type::now(), &none);
  EXPECT_FALSE(none);
  EXPECT_EQ(again.result(), http::status::forbidden);
  EXPECT_EQ(info2.identity, "user:someone");

  req.set(http::field::authorization, "Bearer down-1");
  request_info info3;
  auto unavailable = handle(req, peer_certificate{}, ctx, info3);  // no executor: waited for
  EXPECT_EQ(unavailable.result(), http::status::service_unavailable);
  EXPECT_EQ(unavailable[http::field::retry_after], "5");
}

}  // namespace
}  // namespace topogate::server

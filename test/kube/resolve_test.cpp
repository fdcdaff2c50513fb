// resolve_within: the Kubernetes client's name lookups end by their deadline, whatever the
// name server does (kube/client.hpp). The lookups here are the tests': one answers, one fails,
// one blocks until the test lets it go, so "in time" never depends on the machine's speed.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>

#include "kube/client.hpp"

namespace topogate::kube {
namespace {

using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;

// A lookup that blocks until release(), counting the calls that entered and left it. Shared
// with the lookup threads, which may outlive the test's wait.
struct blocking_lookup : std::enable_shared_from_this<blocking_lookup> {
  std::mutex mu;
  std::condition_variable cv;
  bool released = false;
  int entered = 0, left = 0;
  lookup_fn fn() {
    return
        [self = shared_from_this()](const std::string&) -> core::result<std::vector<std::string>> {
          std::unique_lock lk(self->mu);
          ++self->entered;
          self->cv.notify_all();
          self->cv.wait(lk, [&] { return self->released; });
          ++self->left;
          self->cv.notify_all();
          return std::vector<std::string>{"192.0.2.1"};
        };
  }
  void release() {
    std::lock_guard lk(mu);
    released = true;
    cv.notify_all();
  }
  void wait_left(int n) {
    std::unique_lock lk(mu);
    ASSERT_TRUE(cv.wait_for(lk, 30s, [&] { return left >= n; }));
  }
};

TEST(ResolveWithin, AddressesNeedNoLookup) {
  std::atomic<bool> cancelled{false};
  const lookup_fn never = [](const std::string& h) -> core::result<std::vector<std::string>> {
    ADD_FAILURE() << "looked up " << h;
    return core::fail(core::errc::internal, "no");
  };
  auto v4 = resolve_within("10.96.0.1", clock_type::now() + 1s, cancelled, never);
  ASSERT_TRUE(v4) << v4.error().message;
  EXPECT_EQ(*v4, std::vector<std::string>{"10.96.0.1"});
  auto v6 = resolve_within("fd00::1", clock_type::now() + 1s, cancelled, never);
  ASSERT_TRUE(v6) << v6.error().message;
  EXPECT_EQ(*v6, std::vector<std::string>{"fd00::1"});
}

TEST(ResolveWithin, AnswersAndFailuresOfTheLookup) {
  std::atomic<bool> cancelled{false};
  auto ok = resolve_within("api.example", clock_type::now() + 10s, cancelled,
                           [](const std::string& h) -> core::result<std::vector<std::string>> {
                             EXPECT_EQ(h, "api.example");
                             return std::vector<std::string>{"192.0.2.7", "2001:db8::7"};
                           });
  ASSERT_TRUE(ok) << ok.error().message;
  EXPECT_EQ(*ok, (std::vector<std::string>{"192.0.2.7", "2001:db8::7"}));
  auto bad = resolve_within("api.example", clock_type::now() + 10s, cancelled,
                            [](const std::string&) -> core::result<std::vector<std::string>> {
                              return core::fail(core::errc::unavailable,
                                                "resolve api.example: Name or service not known");
                            });
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code, core::errc::unavailable);
  EXPECT_EQ(bad.error().message, "resolve api.example: Name or service not known");
}

TEST(ResolveWithin, TheSystemResolverFindsLocalhost) {
  std::atomic<bool> cancelled{false};
  auto r = resolve_within("localhost", clock_type::now() + 10s, cancelled);
  ASSERT_TRUE(r) << r.error().message;
  bool loopback = false;
  for (const auto& a : *r) loopback = loopback || a == "127.0.0.1" || a == "::1";
  EXPECT_TRUE(loopback);
  auto missing = resolve_within("no-such-host.invalid", clock_type::now() + 10s, cancelled);
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code, core::errc::unavailable);
  EXPECT_NE(missing.error().message.find("resolve no-such-host.invalid: "), std::string::npos)
      << missing.error().message;
}

TEST(ResolveWithin, ANameServerThatNeverAnswersFailsAtTheDeadline) {
  auto dns_ptr = std::make_shared<blocking_lookup>();
  auto& dns = *dns_ptr;
  std::atomic<bool> cancelled{false};
  // The lookup is still blocked when resolve_within returns: it returned because of its deadline.
  auto r = resolve_within("api.example", clock_type::now() + 100ms, cancelled, dns.fn());
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, core::errc::unavailable);
  EXPECT_EQ(r.error().message, "resolve api.example: no answer from the name server in time");
  {
    // The lookup thread may not have entered yet when the deadline passed (a loaded machine,
    // a sanitizer build): wait for it, then it must still be blocked.
    std::unique_lock lk(dns.mu);
    EXPECT_TRUE(dns.cv.wait_for(lk, 30s, [&] { return dns.entered == 1; }));
    EXPECT_EQ(dns.left, 0);
  }
  dns.release();
  dns.wait_left(1);
}

TEST(ResolveWithin, CancelEndsTheWait) {
  auto dns_ptr = std::make_shared<blocking_lookup>();
  auto& dns = *dns_ptr;
  std::atomic<bool> cancelled{false};
  std::thread canceller([&] {
    std::unique_lock lk(dns.mu);
    dns.cv.wait(lk, [&] { return dns.entered == 1; });
    cancelled = true;
  });
  auto r = resolve_within("api.example", clock_type::now() + 1h, cancelled, dns.fn());
  canceller.join();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message, "cancelled");
  dns.release();
  dns.wait_left(1);
}

TEST(ResolveWithin, AbandonedLookupsAreBounded) {
  auto dns_ptr = std::make_shared<blocking_lookup>();
  auto& dns = *dns_ptr;
  std::atomic<bool> cancelled{false};
  // Eight lookups abandoned at their deadline still hold their threads; the ninth is refused
  // at once, without a thread, until they end.
  for (int i = 0; i < 8; ++i) {
    auto r = resolve_within("api.example", clock_type::now() + 1ms, cancelled, dns.fn());
    ASSERT_FALSE(r);
  }
  bool ninth_called = false;
  auto r = resolve_within("api.example", clock_type::now() + 10s, cancelled,
                          [&](const std::string&) -> core::result<std::vector<std::string>> {
                            ninth_called = true;
                            return std::vector<std::string>{"192.0.2.9"};
                          });
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message,
            "resolve api.example: 8 lookups are still waiting for the name server");
  EXPECT_FALSE(ninth_called);
  // Addresses need no lookup: still answered.
  EXPECT_TRUE(resolve_within("10.0.0.1", clock_type::now() + 1s, cancelled, dns.fn()));
  dns.release();
  dns.wait_left(8);
  // The slots come back once the lookups end (their threads release them just after).
  core::result<std::vector<std::string>> again = core::fail(core::errc::unavailable, "");
  for (int i = 0; i < 3000 && !again; ++i) {
    again = resolve_within("api.example", clock_type::now() + 10s, cancelled,
                           [](const std::string&) -> core::result<std::vector<std::string>> {
                             return std::vector<std::string>{"192.0.2.10"};
                           });
    if (!again) std::this_thread::sleep_for(10ms);
  }
  ASSERT_TRUE(again) << again.error().message;
  EXPECT_EQ(*again, std::vector<std::string>{"192.0.2.10"});
}

}  // namespace
}  // namespace topogate::kube

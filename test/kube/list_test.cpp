// The one pager (kube/list.hpp) against a fake API of the test's own: pages followed by their
// continue token, a selector kept, a CRD not installed, a refusal told or tolerated, an answer
// that is not a list, the list's deadline, and no answer at all; the client's request() on the
// way (an answer of any status is a value, no answer an error).

#include "kube/list.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "kube/client.hpp"
#include "tls_peer.hpp"

namespace topogate::kube {
namespace {

using namespace std::chrono_literals;
using testing::fake_api;

std::string page(const std::string& names, const std::string& next) {
  return R"({"kind":"NodeList","apiVersion":"v1","metadata":{"resourceVersion":"7")" +
         (next.empty() ? std::string() : R"(,"continue":")" + next + "\"") + R"(},"items":[)" +
         names + "]}";
}

std::string node(const std::string& name) {
  return R"({"metadata":{"name":")" + name + R"(","labels":{"b":"2","a":"1"}}})";
}

TEST(ListPages, EveryPageByItsContinueToken) {
  fake_api api([](const std::string& head) {
    if (head.find("continue=t%2F2") != std::string::npos)
      return fake_api::json(200, page(node("n3"), ""));
    return fake_api::json(200, page(node("n1") + "," + node("n2"), "t/2"));
  });
  client c(api.api());
  std::vector<std::string> seen;
  list_options o;
  o.page_size = 2;
  o.accept = metadata_list_accept;
  const auto r =
      list_pages(c, "/api/v1/nodes?labelSelector=pool%3Dgpu", o, [&](const core::doc_node& p) {
        each_node(p, [&](std::string name, node_labels labels) {
          seen.push_back(name);
          EXPECT_EQ(labels, (node_labels{{"a", "1"}, {"b", "2"}}));
        });
      });
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(*r, listed::ok);
  EXPECT_EQ(seen, (std::vector<std::string>{"n1", "n2", "n3"}));
  EXPECT_EQ(api.targets(), (std::vector<std::string>{
                               "/api/v1/nodes?labelSelector=pool%3Dgpu&limit=2",
                               "/api/v1/nodes?labelSelector=pool%3Dgpu&limit=2&continue=t%2F2"}));
}

// The pages of one list go on one connection when the API keeps it open, and a kept connection
// is closed when the list ends: the next list opens its own.
TEST(ListPages, OneConnectionForAListsPages) {
  fake_api api([](const std::string& head) {
    if (head.find("continue=3") != std::string::npos)
      return fake_api::json_kept(200, page(node("n3"), ""));
    if (head.find("continue=2") != std::string::npos)
      return fake_api::json_kept(200, page(node("n2"), "3"));
    return fake_api::json_kept(200, page(node("n1"), "2"));
  });
  client c(api.api());
  for (int list = 1; list <= 2; ++list) {
    std::vector<std::string> seen;
    const auto r = list_pages(c, "/api/v1/nodes", {}, [&](const core::doc_node& p) {
      each_node(p, [&](std::string name, node_labels) { seen.push_back(name); });
    });
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_EQ(seen, (std::vector<std::string>{"n1", "n2", "n3"}));
    EXPECT_EQ(api.connections(), list);
  }
  EXPECT_EQ(api.targets().size(), 6u);
  // A request outside a list opens its own connection, kept or not.
  ASSERT_TRUE(c.request("GET", "/api/v1/nodes"));
  EXPECT_EQ(api.connections(), 3);
}

// A kept connection the API closed after its answer: the next page's GET fails before any
// answer and goes once more on a new connection; no page is lost or read twice.
TEST(ListPages, AKeptConnectionTheApiClosedIsOpenedAgain) {
  fake_api api([](const std::string& head) {
    if (head.find("continue=2") != std::string::npos)
      return fake_api::json_kept(200, page(node("n2"), ""));
    return fake_api::json_kept(200, page(node("n1"), "2"));
  });
  api.drop_kept();
  client c(api.api());
  std::vector<std::string> seen;
  const auto r = list_pages(c, "/api/v1/nodes", {}, [&](const core::doc_node& p) {
    each_node(p, [&](std::string name, node_labels) { seen.push_back(name); });
  });
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(seen, (std::vector<std::string>{"n1", "n2"}));
  EXPECT_EQ(api.connections(), 2);
  EXPECT_EQ(api.targets(), (std::vector<std::string>{"/api/v1/nodes?limit=500",
                                                     "/api/v1/nodes?limit=500&continue=2"}));
}

// The other side: a kept connection that breaks once its answer began is not sent the GET
// again (the API may have acted on it, and part of an answer was read): the list fails.
TEST(ListPages, AKeptConnectionThatBreaksMidAnswerIsNotSentAgain) {
  fake_api api([](const std::string& head) {
    if (head.find("continue=2") != std::string::npos) {
      // A body cut short, and the connection closed after it.
      return std::string(
          "HTTP/1.1 200 X\r\nContent-Type: application/json\r\nContent-Length: 100\r\n"
          "Connection: close\r\n\r\n{\"items\":");
    }
    return fake_api::json_kept(200, page(node("n1"), "2"));
  });
  client c(api.api());
  const auto r = list_pages(c, "/api/v1/nodes", {}, [](const core::doc_node&) {});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, core::errc::unavailable);
  EXPECT_EQ(api.connections(), 1);
  EXPECT_EQ(api.targets().size(), 2u);
}

TEST(ListPages, ACollectionTheApiDoesNotServe) {
  fake_api api([](const std::string&) { return fake_api::json(404, R"({"kind":"Status"})"); });
  client c(api.api());
  const auto r = list_pages(c, "/apis/x.io/v1/things", {}, [](const core::doc_node&) {});
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(*r, listed::not_served);
  EXPECT_EQ(api.targets(), std::vector<std::string>{"/apis/x.io/v1/things?limit=500"});
}

TEST(ListPages, ARefusalIsToldOrTolerated) {
  fake_api api([](const std::string&) {
    return fake_api::json(403, R"({"kind":"Status","message":"nodes is forbidden"})");
  });
  client c(api.api());
  list_options o;
  o.forbidden_hint = "grant list on nodes";
  const auto r = list_pages(c, "/api/v1/nodes", o, [](const core::doc_node&) {});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, core::errc::forbidden);
  EXPECT_EQ(r.error().message,
            "GET /api/v1/nodes: HTTP 403: nodes is forbidden (grant list on nodes)");
  o.tolerate_forbidden = true;
  const auto tolerated = list_pages(c, "/api/v1/nodes", o, [](const core::doc_node&) {});
  ASSERT_TRUE(tolerated) << tolerated.error().message;
  EXPECT_EQ(*tolerated, listed::forbidden);
}

TEST(ListPages, AnAnswerThatIsNotAList) {
  fake_api api([](const std::string&) { return fake_api::json(200, R"({"kind":"Node"})"); });
  client c(api.api());
  bool called = false;
  const auto r = list_pages(c, "/api/v1/nodes", {}, [&](const core::doc_node&) { called = true; });
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, core::errc::invalid_argument);
  EXPECT_EQ(r.error().message, "GET /api/v1/nodes: the answer is not a list");
  EXPECT_FALSE(called);
}

TEST(ListPages, ARawPageReaderDecidesTheContinueToken) {
  fake_api api([](const std::string& head) {
    return fake_api::json(200, head.find("continue=") == std::string::npos ? "first" : "second");
  });
  client c(api.api());
  std::vector<std::string> bodies;
  const auto r = list_raw_pages(c, "/api/v1/nodes", {},
                                [&](const std::string& body) -> core::result<std::string> {
                                  bodies.push_back(body);
                                  if (bodies.size() == 1) return std::string("next");
                                  if (bodies.size() == 2) return std::string();
                                  return core::fail(core::errc::internal, "asked once too often");
                                });
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(bodies, (std::vector<std::string>{"first", "second"}));
  // What the reader refuses fails the list, naming the call.
  const auto refused =
      list_raw_pages(c, "/api/v1/nodes", {}, [](const std::string&) -> core::result<std::string> {
        return core::fail(core::errc::unavailable, "malformed response");
      });
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().message, "GET /api/v1/nodes: malformed response");
}

TEST(ListPages, TheListsDeadlineOnBothSides) {
  fake_api api([](const std::string&) { return fake_api::json(200, page(node("n1"), "")); });
  client c(api.api());
  list_options o;
  o.deadline_name = "audit.timeout";
  o.deadline_setting = 1500ms;
  o.deadline = std::chrono::steady_clock::now() - 1ms;
  const auto late = list_pages(c, "/api/v1/nodes", o, [](const core::doc_node&) {});
  ASSERT_FALSE(late);
  EXPECT_EQ(late.error().message,
            "GET /api/v1/nodes: the run's deadline (audit.timeout, 1.5s) passed before the API "
            "answered");
  EXPECT_TRUE(api.targets().empty());
  o.deadline = std::chrono::steady_clock::now() + 10s;
  const auto in_time = list_pages(c, "/api/v1/nodes", o, [](const core::doc_node&) {});
  ASSERT_TRUE(in_time) << in_time.error().message;
  EXPECT_EQ(*in_time, listed::ok);
}

TEST(ListPages, NoAnswerIsUnavailable) {
  endpoint ep;
  {
    fake_api api([](const std::string&) { return std::string(); });
    ep = api.api();
  }  // nothing listens on its port any more
  client c(ep);
  const auto raw = c.request("GET", "/api/v1/nodes", {}, 5s);
  ASSERT_FALSE(raw);
  EXPECT_EQ(raw.error().code, core::errc::unavailable);
  const auto r = list_pages(c, "/api/v1/nodes", {}, [](const core::doc_node&) {});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, core::errc::unavailable);
  EXPECT_EQ(r.error().message.rfind("GET /api/v1/nodes: connect 127.0.0.1:", 0), 0u)
      << r.error().message;
}

TEST(Request, AnAnswerOfAnyStatusIsAValue) {
  fake_api api([](const std::string& head) {
    EXPECT_NE(head.find("Authorization: Bearer fake-api-token"), std::string::npos) << head;
    return fake_api::json(418, R"({"kind":"Status","message":"teapot"})");
  });
  client c(api.api());
  const auto r = c.request("GET", "/x");
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->status, 418);
  EXPECT_EQ(r->body, R"({"kind":"Status","message":"teapot"})");
}

TEST(Request, CancelledCallsFailAtOnce) {
  fake_api api([](const std::string&) { return fake_api::json(200, "{}"); });
  client c(api.api());
  c.cancel();
  const auto r = c.request("GET", "/x");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message, "cancelled");
  const auto s = c.stream_lines(
      "/x?watch=1", [](std::string_view) { return true; }, 1s);
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().message, "cancelled");
  EXPECT_TRUE(api.targets().empty());
}

}  // namespace
}  // namespace topogate::kube

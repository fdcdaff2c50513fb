#include "server/router.hpp"

#include <gtest/gtest.h>
#include <openssl/pem.h>
#include <unistd.h>

#include <boost/beast/core/buffers_to_string.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/serializer.hpp>
#include <boost/beast/http/write.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <utility>

#include "inventory/registry.hpp"
#include "server/auth.hpp"
#include "server/inventory_http.hpp"
#include "server/metrics.hpp"
#include "server/pki.hpp"
#include "test/fixtures/data_center_source.hpp"
#include "test/inventory/test_util.hpp"
#include "test/server/status_body.hpp"

namespace topogate::server {
namespace {

namespace fs = std::filesystem;
using status_test::expect_status;
using status_test::snapshot_details;

constexpr std::string_view source_yaml = test_fixtures::data_center_source_yaml;

constexpr std::string_view snapshot_yaml = R"(apiVersion: topology.gpustack.ai/v1alpha1
revision: inventory-42
nodes:
  worker-a: {topology.gpustack.ai/region: region-a, topology.gpustack.ai/zone: zone-a, topology.gpustack.ai/rack: rack-01}
  worker-b: {topology.gpustack.ai/region: region-a, topology.gpustack.ai/zone: zone-a, topology.gpustack.ai/rack: rack-02}
)";

X509* load_cert(const std::string& pem) {
  BIO* b = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  X509* x = PEM_read_bio_X509(b, nullptr, nullptr, nullptr);
  BIO_free(b);
  return x;
}

// The value of a setup step the test cannot go on without.
template <class T>
void take(core::result<T> r, T& out) {
  ASSERT_TRUE(r) << r.error().message;
  out = std::move(*r);
}

class RouterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("topogate-router-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
    write("alpha.token", "alpha-old\nalpha-new\n");
    write("alpha-writer.token", "alpha-writer\n");
    write("beta.token", "beta-token\n");
    write("push-writer.token", "push-writer\n");
    write("source.yaml", source_yaml);
    write("snapshot.yaml", snapshot_yaml);
    ASSERT_NO_FATAL_FAILURE(take(make_ca("test CA", 30), ca_));
    ASSERT_NO_FATAL_FAILURE(take(make_ca("other CA", 30), other_ca_));
    write("ca.crt", ca_.cert_pem);
    ASSERT_NO_FATAL_FAILURE(
        take(issue(ca_, {"reader", "test", {"reader.example"}, {}, false, 30}), client_));
    ASSERT_NO_FATAL_FAILURE(
        take(issue(other_ca_, {"reader", "test", {"reader.example"}, {}, false, 30}), stranger_));

    inventory::registry_config rc;
    auto src = core::validate_topology_source_text(source_yaml);
    ASSERT_TRUE(src.ok()) << core::render_text(src.errors);
    for (const char* name : {"alpha", "beta", "push"}) {
      inventory::inventory_spec spec;
      spec.config.name = name;
      spec.config.source = src.source;
      if (std::string_view(name) != "push") {
        spec.kind = inventory::source_kind::file;
        spec.snapshot_path = path("snapshot.yaml");
      }
      rc.inventories.push_back(spec);
    }
    registry_ = std::make_unique<inventory::registry>(rc);
    registry_->start();

    auto state = std::make_shared<auth_state>();
    credential_files alpha_r{{path("alpha.token")}, {}, {}, {}};
    credential_files alpha_w{{path("alpha-writer.token")}, {}, {}, {}};
    credential_files beta_r{{}, path("ca.crt"), {}, {}};
    credential_files push_r{{path("beta.token")}, {}, {}, {}};
    credential_files push_w{{path("push-writer.token")}, {}, {}, {}};
    ASSERT_NO_FATAL_FAILURE(take(load_credentials(alpha_r), state->inventories["alpha"].readers));
    ASSERT_NO_FATAL_FAILURE(take(load_credentials(alpha_w), state->inventories["alpha"].writers));
    ASSERT_NO_FATAL_FAILURE(take(load_credentials(beta_r), state->inventories["beta"].readers));
    ASSERT_NO_FATAL_FAILURE(take(load_credentials(push_r), state->inventories["push"].readers));
    ASSERT_NO_FATAL_FAILURE(take(load_credentials(push_w), state->inventories["push"].writers));
    ctx_.registry = registry_.get();
    ctx_.auth = state;
    ctx_.m = &metrics_;
    ctx_.health = &health_;
    health_.listening = true;
    health_.certificates_loaded = true;
  }

  void TearDown() override {
    registry_->stop();
    if (client_x509_) X509_free(client_x509_);
    if (stranger_x509_) X509_free(stranger_x509_);
    fs::remove_all(dir_);
  }

  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  void write(const std::string& name, std::string_view data) { std::ofstream(dir_ / name) << data; }

  response call(http::verb m, std::string target,
                std::initializer_list<std::pair<http::field, std::string>> headers = {},
                std::string body = {}, const peer_certificate& peer = {}) {
    request req{m, target, 11};
    for (auto& [f, v] : headers) req.set(f, v);
    req.body() = std::move(body);
    req.prepare_payload();
    request_info info;
    return handle(req, peer, ctx_, info);
  }
  response get(std::string target,
               std::initializer_list<std::pair<http::field, std::string>> headers = {},
               const peer_certificate& peer = {}) {
    return call(http::verb::get, std::move(target), headers, {}, peer);
  }
  static std::pair<http::field, std::string> bearer(std::string t) {
    return {http::field::authorization, "Bearer " + t};
  }
  peer_certificate client_peer() {
    if (!client_x509_) client_x509_ = load_cert(client_.cert_pem);
    return {client_x509_, nullptr, "CN=reader,O=test"};
  }
  peer_certificate stranger_peer() {
    if (!stranger_x509_) stranger_x509_ = load_cert(stranger_.cert_pem);
    return {stranger_x509_, nullptr, "CN=reader,O=test"};
  }
  static std::string body(const response& r) { return r.body().str(); }

  // The inventory's current revision once `ready` holds for it, or after ten seconds the
  // one it has (the caller asserts what it needs): the registry publishes asynchronously.
  template <class Ready>
  std::shared_ptr<const inventory::revision> wait_for_revision(const std::string& name,
                                                               Ready ready) {
    std::shared_ptr<const inventory::revision> rev;
    inventory::testing::eventually([&] {
      rev = registry_->find(name)->current();
      return rev && ready(*rev);
    });
    return rev;
  }

  fs::path dir_;
  issued ca_, other_ca_, client_, stranger_;
  X509* client_x509_ = nullptr;
  X509* stranger_x509_ = nullptr;
  std::unique_ptr<inventory::registry> registry_;
  metrics metrics_;
  health_state health_;
  router_context ctx_;
};

TEST_F(RouterTest, SnapshotNeedsCredentials) {
  auto r = get("/snapshots/alpha");
  EXPECT_EQ(r.result_int(), 401u);
  EXPECT_EQ(r[http::field::www_authenticate].substr(0, 6), "Bearer");
  EXPECT_EQ(get("/snapshots/alpha", {bearer("nope")}).result_int(), 403u);
  EXPECT_EQ(get("/snapshots/alpha", {{http::field::authorization, "Basic YTpi"}}).result_int(),
            403u);
}

TEST_F(RouterTest, SnapshotServedWithEtagAndBothTokensDuringRotation) {
  for (const char* token : {"alpha-old", "alpha-new"}) {
    auto r = get("/snapshots/alpha", {bearer(token)});
    ASSERT_EQ(r.result_int(), 200u) << body(r);
    EXPECT_EQ(r[http::field::content_type], "application/json");
    const auto rev = registry_->find("alpha")->current();
    ASSERT_TRUE(rev);
    EXPECT_EQ(r[http::field::etag], rev->etag);
    EXPECT_EQ(body(r), rev->json_body());
    // The body is the revision's own bytes, not a copy.
    EXPECT_EQ(r.body().data.data(), rev->json_body().data());
  }
}

TEST_F(RouterTest, IfNoneMatchAndYaml) {
  const auto rev = registry_->find("alpha")->current();
  ASSERT_TRUE(rev);
  auto r = get("/snapshots/alpha", {bearer("alpha-old"), {http::field::if_none_match, rev->etag}});
  EXPECT_EQ(r.result_int(), 304u);
  EXPECT_TRUE(r.body().data.empty());
  EXPECT_EQ(
      get("/snapshots/alpha", {bearer("alpha-old"), {http::field::if_none_match, "\"other\""}})
          .result_int(),
      200u);
  auto y =
      get("/snapshots/alpha", {bearer("alpha-old"), {http::field::accept, "application/yaml"}});
  EXPECT_EQ(y.result_int(), 200u);
  EXPECT_EQ(y[http::field::content_type], "application/yaml");
  EXPECT_EQ(body(y), rev->yaml_body());
}

TEST_F(RouterTest, YamlAfterAReloadIsTheNewRevisionsWithTheSameETagAsJson) {
  auto y1 =
      get("/snapshots/alpha", {bearer("alpha-old"), {http::field::accept, "application/yaml"}});
  ASSERT_EQ(y1.result_int(), 200u);
  EXPECT_NE(body(y1).find("inventory-42"), std::string::npos);
  const std::string etag1(y1[http::field::etag]);

  std::string next(snapshot_yaml);
  next.replace(next.find("inventory-42"), 12, "inventory-43");
  write("snapshot.yaml", next);
  registry_->resync();
  const auto rev = wait_for_revision(
      "alpha", [](const inventory::revision& r) { return r.revision_id == "inventory-43"; });
  ASSERT_EQ(rev->revision_id, "inventory-43");

  // The first YAML request after the reload renders the new revision.
  auto y2 =
      get("/snapshots/alpha", {bearer("alpha-old"), {http::field::accept, "application/yaml"}});
  ASSERT_EQ(y2.result_int(), 200u);
  EXPECT_EQ(y2[http::field::content_type], "application/yaml");
  EXPECT_NE(body(y2).find("inventory-43"), std::string::npos);
  EXPECT_EQ(body(y2).find("inventory-42"), std::string::npos);
  EXPECT_EQ(body(y2), rev->yaml_body());
  // Served from the revision's bytes, rendered once: a second request gets the same buffer.
  auto y3 =
      get("/snapshots/alpha", {bearer("alpha-old"), {http::field::accept, "application/yaml"}});
  EXPECT_EQ(y3.body().data.data(), y2.body().data.data());
  // One validator per revision, whichever representation: the JSON body's ETag.
  const std::string etag2(y2[http::field::etag]);
  EXPECT_NE(etag2, etag1);
  EXPECT_EQ(etag2, rev->etag);
  auto j = get("/snapshots/alpha", {bearer("alpha-old")});
  EXPECT_EQ(std::string(j[http::field::etag]), etag2);
  auto nm = get("/snapshots/alpha", {bearer("alpha-old"),
                                     {http::field::accept, "application/yaml"},
                                     {http::field::if_none_match, etag2}});
  EXPECT_EQ(nm.result_int(), 304u);
}

TEST_F(RouterTest, HeadHasLengthButNoBody) {
  auto r = call(http::verb::head, "/snapshots/alpha", {bearer("alpha-old")});
  EXPECT_EQ(r.result_int(), 200u);
  EXPECT_TRUE(r.body().data.empty());
  EXPECT_EQ(r[http::field::content_length],
            std::to_string(registry_->find("alpha")->current()->json_text.size()));
}

// A Node change's revision shares the bytes of the one before it (its rendering is in
// pieces): the route serves those pieces as they are, and what it serves is byte for byte
// the revision a full evaluation of the same files makes.
TEST_F(RouterTest, ASplicedRevisionIsServedFromItsPiecesAsAFullEvaluationRendersIt) {
  std::string snap = "apiVersion: topology.gpustack.ai/v1alpha1\nrevision: inventory-7\nnodes:\n";
  std::vector<std::string> names;
  for (int i = 0; i < 300; ++i) {
    char name[32];
    std::snprintf(name, sizeof name, "gpu-node-%03d", i);
    names.emplace_back(name);
    snap += "  " + names.back() + ": {topology.gpustack.ai/region: region-" +
            std::to_string(i / 100) + ", topology.gpustack.ai/zone: zone-" +
            std::to_string(i / 20) + ", topology.gpustack.ai/rack: rack-" + std::to_string(i / 4) +
            "}\n";
  }
  const auto node_list = [&](const std::vector<int>& left_out) {
    std::string out = R"({"apiVersion":"v1","kind":"List","items":[)";
    bool first = true;
    for (int i = 0; i < 300; ++i) {
      if (std::find(left_out.begin(), left_out.end(), i) != left_out.end()) continue;
      out += std::string(first ? "" : ",") + R"({"metadata":{"name":")" +
             names[static_cast<std::size_t>(i)] + R"("}})";
      first = false;
    }
    return out + "]}";
  };
  write("big.yaml", snap);
  write("nodes.json", node_list({}));
  const auto make_registry = [&] {
    inventory::registry_config rc;
    auto src = core::validate_topology_source_text(source_yaml);
    EXPECT_TRUE(src.ok()) << core::render_text(src.errors);
    inventory::inventory_spec spec;
    spec.config.name = "gamma";
    spec.config.source = src.source;
    spec.config.unknown_nodes = inventory::unknown_nodes_policy::prune;
    spec.kind = inventory::source_kind::file;
    spec.snapshot_path = path("big.yaml");
    spec.nodes_path = path("nodes.json");
    rc.inventories.push_back(spec);
    auto r = std::make_unique<inventory::registry>(rc);
    r->start();
    return r;
  };
  registry_->stop();
  registry_ = make_registry();
  ctx_.registry = registry_.get();
  auto state = std::make_shared<auth_state>(*ctx_.auth);
  state->inventories["gamma"] = state->inventories["alpha"];
  ctx_.auth = state;
  const auto served = [&](const std::string& etag_other_than) {
    return wait_for_revision(
        "gamma", [&](const inventory::revision& r) { return r.etag != etag_other_than; });
  };
  const auto whole = served("");
  ASSERT_TRUE(whole);
  ASSERT_EQ(whole->pruned_nodes.size(), 0u);
  // Read once, as the consumer does: a Node change is applied alone to what it last saw.
  auto w = get("/snapshots/gamma", {bearer("alpha-old")});
  ASSERT_EQ(w.result_int(), 200u) << body(w);
  EXPECT_EQ(w.body().data.data(), whole->json_text.whole()->data());

  // Three Nodes leave, one at each end and one inside: the rendering is cut in three places.
  write("nodes.json", node_list({0, 150, 299}));
  registry_->resync();
  const auto rev = served(whole->etag);
  ASSERT_TRUE(rev);
  ASSERT_EQ(rev->pruned_nodes.size(), 3u);
  const auto pieces = rev->json_text.pieces();
  ASSERT_GT(pieces.size(), 1u) << "not a spliced revision";

  auto r = get("/snapshots/gamma", {bearer("alpha-old")});
  ASSERT_EQ(r.result_int(), 200u) << body(r);
  EXPECT_EQ(r[http::field::etag], rev->etag);
  EXPECT_EQ(r[http::field::content_length], std::to_string(rev->json_text.size()));
  // The revision's own pieces, not a copy of them.
  EXPECT_TRUE(r.body().data.empty());
  ASSERT_EQ(r.body().pieces.size(), pieces.size());
  for (std::size_t i = 0; i < pieces.size(); ++i)
    EXPECT_EQ(r.body().pieces[i].view().data(), pieces[i].view().data()) << i;
  const std::string bytes = body(r);
  EXPECT_EQ(bytes, rev->json_text.str());
  EXPECT_EQ(bytes.find("gpu-node-150"), std::string::npos);
  EXPECT_NE(bytes.find("gpu-node-151"), std::string::npos);

  // Beast's serializer writes the pieces in order: the message parses back to the bytes.
  std::string wire;
  http::response_serializer<shared_body> sr{r};
  boost::beast::error_code ec;
  while (!sr.is_done() && !ec) {
    sr.next(ec, [&](boost::beast::error_code&, const auto& buffers) {
      wire += boost::beast::buffers_to_string(buffers);
      sr.consume(boost::asio::buffer_size(buffers));
    });
  }
  ASSERT_FALSE(ec) << ec.message();
  http::response_parser<http::string_body> back;
  back.eager(true);
  back.body_limit(4u << 20);
  back.put(boost::asio::buffer(wire), ec);
  ASSERT_FALSE(ec) << ec.message();
  ASSERT_TRUE(back.is_done());
  EXPECT_EQ(back.get().body(), bytes);

  // A HEAD has the same length and no body.
  auto h = call(http::verb::head, "/snapshots/gamma", {bearer("alpha-old")});
  EXPECT_EQ(h[http::field::content_length], std::to_string(bytes.size()));
  EXPECT_EQ(h.body().size(), 0u);

  // The same files read afresh: one full evaluation, one buffer, the same bytes and ETag.
  registry_->stop();
  registry_ = make_registry();
  ctx_.registry = registry_.get();
  const auto fresh = served("");
  ASSERT_TRUE(fresh);
  ASSERT_EQ(fresh->pruned_nodes.size(), 3u);
  auto f = get("/snapshots/gamma", {bearer("alpha-old")});
  ASSERT_EQ(f.result_int(), 200u);
  EXPECT_TRUE(f.body().pieces.empty());
  EXPECT_EQ(body(f), bytes);
  EXPECT_EQ(f[http::field::etag], r[http::field::etag]);
}

TEST_F(RouterTest, NamesDoNotLeak) {
  // Without credentials, an unknown name looks exactly like a known one.
  EXPECT_EQ(get("/snapshots/nope").result_int(), 401u);
  EXPECT_EQ(get("/snapshots/nope", {bearer("wrong")}).result_int(), 403u);
  // Valid credentials for some inventory: the caller may learn that a name is unknown.
  EXPECT_EQ(get("/snapshots/nope", {bearer("alpha-old")}).result_int(), 404u);
  // ...but not read another inventory.
  EXPECT_EQ(get("/snapshots/push", {bearer("alpha-old")}).result_int(), 403u);
}

TEST_F(RouterTest, ClientCertificates) {
  EXPECT_EQ(get("/snapshots/beta").result_int(), 401u);
  EXPECT_EQ(get("/snapshots/beta", {}, client_peer()).result_int(), 200u);
  EXPECT_EQ(get("/snapshots/beta", {}, stranger_peer()).result_int(), 403u);
  // Exactly the configured method: a token is not a client certificate.
  EXPECT_EQ(get("/snapshots/beta", {bearer("alpha-old")}).result_int(), 403u);
  // And a certificate is not a token.
  EXPECT_EQ(get("/snapshots/alpha", {}, client_peer()).result_int(), 403u);
}

TEST_F(RouterTest, SubjectAllowList) {
  auto state = std::make_shared<auth_state>(*ctx_.auth);
  credential_files f{{}, path("ca.crt"), {"someone-else"}, {}};
  ASSERT_NO_FATAL_FAILURE(take(load_credentials(f), state->inventories["beta"].readers));
  ctx_.auth = state;
  EXPECT_EQ(get("/snapshots/beta", {}, client_peer()).result_int(), 403u);
  f.allowed_subjects = {"reader"};
  ASSERT_NO_FATAL_FAILURE(take(load_credentials(f), state->inventories["beta"].readers));
  EXPECT_EQ(get("/snapshots/beta", {}, client_peer()).result_int(), 200u);
  f.allowed_subjects = {};
  f.allowed_sans = {"reader.example"};
  ASSERT_NO_FATAL_FAILURE(take(load_credentials(f), state->inventories["beta"].readers));
  EXPECT_EQ(get("/snapshots/beta", {}, client_peer()).result_int(), 200u);
}

TEST_F(RouterTest, SingleInventoryPathNeedsExactlyOne) {
  EXPECT_EQ(get("/snapshot").result_int(), 401u);
  EXPECT_EQ(get("/snapshot", {bearer("alpha-old")}).result_int(), 404u);
}

TEST_F(RouterTest, NoRevisionIs503) {
  auto r = get("/snapshots/push", {bearer("beta-token")});
  expect_status(r, 503, "ServiceUnavailable", snapshot_details{"push"});
  EXPECT_EQ(r[http::field::retry_after], "10");
}

// Every error the router answers is a Kubernetes Status (server/response.hpp), its reason
// following the status code, with the headers each status carries.
TEST_F(RouterTest, EveryErrorIsAKubernetesStatus) {
  const auto unauthenticated = get("/snapshots/alpha");
  expect_status(unauthenticated, 401, "Unauthorized", std::nullopt, "authentication required");
  EXPECT_EQ(unauthenticated[http::field::www_authenticate], "Bearer realm=\"topogate\"");
  expect_status(get("/snapshots/alpha", {bearer("wrong")}), 403, "Forbidden", std::nullopt,
                "credentials not accepted");
  // The plain 404s name nothing; the single-inventory path says where to go.
  expect_status(get("/nothing-here"), 404, "NotFound", std::nullopt, "not found");
  expect_status(get("/snapshot", {bearer("alpha-old")}), 404, "NotFound", std::nullopt,
                "several inventories are configured: use /snapshots/{name}");
  // A bad ?timeout= on the webhook is a 400 like every review that cannot be made.
  expect_status(call(http::verb::post, "/validate/topologysources?timeout=abc",
                     {{http::field::content_type, "application/json"}}, "{}"),
                400, "BadRequest", std::nullopt);
  ctx_.m = nullptr;
  expect_status(get("/metrics"), 404, "NotFound", std::nullopt, "metrics disabled");
}

// One unknown inventory, one answer: the snapshot, its status and history, and a push all say
// the same 404 (before, the first three said {"error":"no such inventory"}).
TEST_F(RouterTest, AnUnknownInventoryIsOneNotFound) {
  const std::string want = body(inventory_not_found("nope"));
  for (const char* target :
       {"/snapshots/nope", "/snapshots/nope/status", "/snapshots/nope/history"}) {
    SCOPED_TRACE(target);
    const auto r = get(target, {bearer("alpha-old")});
    expect_status(r, 404, "NotFound", snapshot_details{"nope"}, R"(inventory "nope" not found)");
    EXPECT_EQ(body(r), want);
  }
  const auto pushed =
      call(http::verb::put, "/snapshots/nope", {bearer("push-writer")}, std::string(snapshot_yaml));
  EXPECT_EQ(body(pushed), want);
}

// A 405's Allow lists the methods of every route of the path's pattern (the route table).
TEST_F(RouterTest, MethodNotAllowedListsThePatternsMethods) {
  struct refused {
    http::verb method;
    const char* target;
    const char* allow;
  };
  for (const refused& c : {refused{http::verb::get, "/validate/topologysources", "POST"},
                           refused{http::verb::put, "/validate/modeldeployments", "POST"},
                           refused{http::verb::post, "/snapshots/alpha", "GET, HEAD, PUT"},
                           refused{http::verb::delete_, "/snapshots/alpha", "GET, HEAD, PUT"},
                           refused{http::verb::put, "/snapshot", "GET, HEAD"},
                           refused{http::verb::put, "/snapshots/alpha/status", "GET, HEAD"},
                           refused{http::verb::post, "/snapshots/alpha/history", "GET, HEAD"},
                           refused{http::verb::delete_, "/healthz", "GET, HEAD"},
                           refused{http::verb::post, "/metrics", "GET, HEAD"}}) {
    SCOPED_TRACE(std::string(http::to_string(c.method)) + " " + c.target);
    const auto r = call(c.method, c.target, {bearer("alpha-old")});
    expect_status(r, 405, "MethodNotAllowed", std::nullopt, "method not allowed");
    EXPECT_EQ(r[http::field::allow], c.allow);
  }
}

// HEAD of an error: the Status's length, no body.
TEST_F(RouterTest, HeadOfAnErrorHasItsLengthOnly) {
  const auto full = get("/snapshots/alpha");
  const auto head = call(http::verb::head, "/snapshots/alpha");
  EXPECT_EQ(head.result_int(), 401u);
  EXPECT_TRUE(head.body().data.empty());
  EXPECT_EQ(head[http::field::content_length], std::to_string(full.body().data.size()));
}

// The route table is what handle() dispatches: each route's pattern, with the {name} segment
// filled, is answered under that pattern's label, by each of its methods.
TEST_F(RouterTest, EveryRouteOfTheTableIsHandledUnderItsPattern) {
  for (const route& r : routes()) {
    std::string target(r.pattern);
    if (const auto at = target.find("{name}"); at != std::string::npos)
      target.replace(at, 6, "alpha");
    for (const auto& [bit, verb] :
         {std::pair{method_get, http::verb::get}, std::pair{method_head, http::verb::head},
          std::pair{method_post, http::verb::post}, std::pair{method_put, http::verb::put}}) {
      if ((r.methods & bit) == 0) continue;
      SCOPED_TRACE(std::string(http::to_string(verb)) + " " + target);
      request req{verb, target, 11};
      request_info info;
      const auto res = handle(req, {}, ctx_, info);
      EXPECT_EQ(info.route, r.pattern);
      EXPECT_NE(res.result_int(), 404u);
      EXPECT_NE(res.result_int(), 405u);
    }
  }
  // The {name} segment is one segment: a path with more is no route.
  request_info info;
  EXPECT_EQ(handle(request{http::verb::get, "/snapshots/alpha/status/x", 11}, {}, ctx_, info)
                .result_int(),
            404u);
  EXPECT_EQ(info.route, "unmatched");
}

TEST_F(RouterTest, PushNeedsTheWriterCredential) {
  EXPECT_EQ(call(http::verb::put, "/snapshots/push", {}, std::string(snapshot_yaml)).result_int(),
            401u);
  EXPECT_EQ(
      call(http::verb::put, "/snapshots/push", {bearer("beta-token")}, std::string(snapshot_yaml))
          .result_int(),
      403u);
  const auto r =
      call(http::verb::put, "/snapshots/push", {bearer("push-writer")}, std::string(snapshot_yaml));
  EXPECT_NE(r.result_int(), 401u);
  EXPECT_NE(r.result_int(), 403u);
}

TEST_F(RouterTest, StatusAndHistoryForReaders) {
  EXPECT_EQ(get("/snapshots/alpha/status").result_int(), 401u);
  EXPECT_EQ(get("/snapshots/alpha/status", {bearer("alpha-old")}).result_int(), 200u);
  EXPECT_EQ(get("/snapshots/alpha/history", {bearer("alpha-old")}).result_int(), 200u);
  EXPECT_EQ(get("/snapshots/alpha/other", {bearer("alpha-old")}).result_int(), 404u);
}

TEST_F(RouterTest, MethodsAreChecked) {
  EXPECT_EQ(get("/validate/topologysources").result_int(), 405u);
  EXPECT_EQ(call(http::verb::post, "/snapshots/alpha", {bearer("alpha-old")}).result_int(), 405u);
  EXPECT_EQ(call(http::verb::delete_, "/healthz").result_int(), 405u);
  EXPECT_EQ(get("/nothing-here").result_int(), 404u);
}

TEST_F(RouterTest, AdmissionRoute) {
  // A request the webhook cannot review is answered here, with a Kubernetes Status.
  auto status_of = [&](const response& r, unsigned code, std::string_view reason) {
    const std::string b = body(r);
    EXPECT_EQ(r.result_int(), code) << b;
    EXPECT_EQ(r[http::field::content_type], "application/json");
    EXPECT_NE(b.find(R"("kind":"Status","apiVersion":"v1")"), std::string::npos) << b;
    EXPECT_NE(b.find(R"("status":"Failure")"), std::string::npos) << b;
    EXPECT_NE(b.find("\"reason\":\"" + std::string(reason) + "\""), std::string::npos) << b;
    EXPECT_NE(b.find("\"code\":" + std::to_string(code)), std::string::npos) << b;
  };
  auto bad = call(http::verb::post, "/validate/topologysources",
                  {{http::field::content_type, "application/json"}}, "nope");
  status_of(bad, 400, "BadRequest");
  auto ct = call(http::verb::post, "/validate/topologysources",
                 {{http::field::content_type, "text/plain"}}, "{}");
  status_of(ct, 415, "UnsupportedMediaType");
  EXPECT_NE(body(ct).find("Content-Type must be application/json"), std::string::npos) << body(ct);
  // The API server's ?timeout= already spent: 504, not a verdict nobody waits for.
  std::ifstream in(std::string(TOPOGATE_SOURCE_DIR) +
                   "/test/integration/fixtures/admission/allowed.json");
  const std::string review((std::istreambuf_iterator<char>(in)), {});
  ASSERT_FALSE(review.empty());
  auto late = call(http::verb::post, "/validate/topologysources?timeout=1ns",
                   {{http::field::content_type, "application/json"}}, review);
  status_of(late, 504, "Timeout");
  auto t = call(http::verb::post, "/validate/topologysources?timeout=abc",
                {{http::field::content_type, "application/json"}}, "{}");
  EXPECT_EQ(t.result_int(), 400u);
}

TEST_F(RouterTest, HealthAndReadiness) {
  EXPECT_EQ(get("/livez").result_int(), 200u);
  EXPECT_EQ(get("/healthz").result_int(), 200u);
  // "push" has no revision and may not start empty.
  auto r = get("/readyz?verbose");
  EXPECT_EQ(r.result_int(), 503u);
  EXPECT_NE(body(r).find("[+]inventory/alpha ok"), std::string::npos) << body(r);
  EXPECT_NE(body(r).find("[-]inventory/push failed"), std::string::npos) << body(r);
  health_.listening = false;
  EXPECT_EQ(get("/healthz").result_int(), 503u);
}

TEST_F(RouterTest, Metrics) {
  auto r = get("/metrics");
  EXPECT_EQ(r.result_int(), 200u);
  EXPECT_EQ(r[http::field::content_type], "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_NE(body(r).find("topogate_build_info"), std::string::npos);
  EXPECT_NE(body(r).find("topogate_inventory_snapshot_bytes{inventory=\"alpha\"}"),
            std::string::npos)
      << body(r);
}

TEST_F(RouterTest, PlainListenerServesOnlyHealthAndMetrics) {
  ctx_.listener = listener_kind::plain_health;
  EXPECT_EQ(get("/snapshots/alpha", {bearer("alpha-old")}).result_int(), 404u);
  EXPECT_EQ(get("/metrics").result_int(), 200u);
  for (const route& r : routes()) {
    std::string target(r.pattern);
    if (const auto at = target.find("{name}"); at != std::string::npos)
      target.replace(at, 6, "alpha");
    request_info info;
    const auto res = handle(request{http::verb::get, target, 11}, {}, ctx_, info);
    if (r.health_listener) {
      EXPECT_NE(res.result_int(), 404u) << target;
      EXPECT_EQ(info.route, r.pattern);
    } else {
      expect_status(res, 404, "NotFound", std::nullopt, "not found");
      EXPECT_EQ(info.route, "unmatched") << target;
    }
  }
}

// The response as a client reads it off the wire: serialized by Beast, parsed back.
http::response<http::string_body> over_the_wire(const response& r, std::string* wire) {
  std::ostringstream os;
  os << r;
  *wire = os.str();
  http::response_parser<http::string_body> p;
  p.eager(true);
  boost::beast::error_code ec;
  const std::size_t used = p.put(boost::asio::buffer(*wire), ec);
  EXPECT_FALSE(ec) << ec.message();
  EXPECT_TRUE(p.is_done());
  EXPECT_EQ(used, wire->size()) << "bytes after the response";
  return p.release();
}

// Found by fuzz_http: a revision (opaque, SPEC S2) holding CR/LF was copied verbatim into
// X-Topogate-Revision, so whoever writes the snapshot (a push, the file, the ConfigMap) could
// add header lines such as Set-Cookie to every reader's response.
TEST_F(RouterTest, RevisionHeaderNeverCarriesALineBreak) {
  auto serve_revision = [&](std::string_view yaml_scalar, std::string_view expected) {
    std::string next(snapshot_yaml);
    next.replace(next.find("inventory-42"), 12, std::string(yaml_scalar));
    write("snapshot.yaml", next);
    registry_->resync();
    return wait_for_revision("alpha", [&](const inventory::revision& r) {
             return r.revision_id == expected;
           })->revision_id == expected;
  };
  std::string wire;

  // A revision that is a field value is carried verbatim, inner SP and HTAB included.
  auto plain = get("/snapshots/alpha", {bearer("alpha-old")});
  EXPECT_EQ(plain["X-Topogate-Revision"], "inventory-42");
  ASSERT_TRUE(serve_revision("\"r 1\\t2\"", "r 1\t2"));
  auto inner = over_the_wire(get("/snapshots/alpha", {bearer("alpha-old")}), &wire);
  EXPECT_EQ(inner["X-Topogate-Revision"], "r 1\t2");

  for (const auto& [scalar, revision] : std::vector<std::pair<std::string, std::string>>{
           {"\"r2\\r\\nSet-Cookie: session=1\"", "r2\r\nSet-Cookie: session=1"},
           {"\"r3\\nSet-Cookie: session=1\"", "r3\nSet-Cookie: session=1"},
           {"\"r4\\rX: y\"", "r4\rX: y"},
           {"\"r5\\x01\"", "r5\x01"},
           {"\"r6\\x7f\"", "r6\x7f"},
           {"\" r7\"", " r7"}}) {
    SCOPED_TRACE(scalar);
    ASSERT_TRUE(serve_revision(scalar, revision));
    const response r = get("/snapshots/alpha", {bearer("alpha-old")});
    ASSERT_EQ(r.result_int(), 200u) << body(r);
    EXPECT_EQ(r.count("X-Topogate-Revision"), 0u);
    const auto back = over_the_wire(r, &wire);
    EXPECT_EQ(back.count(http::field::set_cookie), 0u) << wire;
    EXPECT_EQ(back.count("X"), 0u) << wire;
    EXPECT_EQ(std::distance(back.begin(), back.end()), std::distance(r.begin(), r.end())) << wire;
    // The body still carries the revision, JSON-escaped.
    EXPECT_EQ(back.body(), std::string(r.body().data));
    EXPECT_NE(back.body().find("\"revision\":\"" + std::string(revision.substr(0, 2))),
              std::string::npos);
  }
}

TEST(BodyLimit, PerRoute) {
  body_limits l{100, 50};
  EXPECT_EQ(body_limit(http::verb::post, "/validate/topologysources?timeout=10s", l), 100u);
  EXPECT_EQ(body_limit(http::verb::post, "/validate/modeldeployments", l), 100u);
  EXPECT_EQ(body_limit(http::verb::put, "/snapshots/x", l), 50u);
  EXPECT_EQ(body_limit(http::verb::get, "/snapshots/x", l), 0u);
  EXPECT_EQ(body_limit(http::verb::post, "/metrics", l), 0u);
  // Only the route that takes the method and the path reads a body: not a /validate path that
  // admits no kind, a push to a sub-resource or to /snapshot, nor the webhook's route by PUT.
  EXPECT_EQ(body_limit(http::verb::post, "/validate/nodes", l), 0u);
  EXPECT_EQ(body_limit(http::verb::post, "/validate/", l), 0u);
  EXPECT_EQ(body_limit(http::verb::put, "/snapshots/x/status", l), 0u);
  EXPECT_EQ(body_limit(http::verb::put, "/snapshot", l), 0u);
  EXPECT_EQ(body_limit(http::verb::put, "/validate/topologysources", l), 0u);
  EXPECT_EQ(body_limit(http::verb::head, "/snapshots/x", l), 0u);
}

// The one writer of error answers: the exact bytes, with and without details.
TEST(ErrorResponse, IsTheStatusApimachineryWrites) {
  const auto plain = error_response(http::status::payload_too_large, "too \"big\"");
  EXPECT_EQ(std::string(plain.body().data),
            R"({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",)"
            R"("message":"too \"big\"","reason":"RequestEntityTooLarge","code":413})");
  EXPECT_EQ(plain[http::field::content_type], "application/json");
  EXPECT_EQ(plain[http::field::cache_control], "no-store");
  const core::status_details d{"inv", "topology.gpustack.ai", "Snapshot", nullptr};
  EXPECT_EQ(std::string(error_response(http::status::not_found, "gone", &d).body().data),
            R"({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",)"
            R"("message":"gone","reason":"NotFound","details":{"name":"inv",)"
            R"("group":"topology.gpustack.ai","kind":"Snapshot"},"code":404})");
}

TEST(ErrorResponse, ReasonFollowsTheStatusCode) {
  const std::pair<http::status, std::string_view> reasons[] = {
      {http::status::bad_request, "BadRequest"},
      {http::status::unauthorized, "Unauthorized"},
      {http::status::forbidden, "Forbidden"},
      {http::status::not_found, "NotFound"},
      {http::status::method_not_allowed, "MethodNotAllowed"},
      {http::status::conflict, "Conflict"},
      {http::status::precondition_failed, "PreconditionFailed"},
      {http::status::payload_too_large, "RequestEntityTooLarge"},
      {http::status::unsupported_media_type, "UnsupportedMediaType"},
      {http::status::unprocessable_entity, "Invalid"},
      {http::status::request_header_fields_too_large, "BadRequest"},
      {http::status::internal_server_error, "InternalError"},
      {http::status::service_unavailable, "ServiceUnavailable"},
      {http::status::gateway_timeout, "Timeout"},
      // A status no route answers with.
      {http::status::too_many_requests, "InternalError"}};
  for (const auto& [status, reason] : reasons) {
    EXPECT_EQ(status_reason(status), reason) << static_cast<int>(status);
    expect_status(error_response(status, "m"), static_cast<unsigned>(status), reason, std::nullopt,
                  "m");
  }
}

TEST(RouteTable, PolledRoutesAreTheProbesAndTheScrape) {
  for (const char* polled : {"/healthz", "/livez", "/readyz", "/metrics"})
    EXPECT_TRUE(is_polled_route(polled)) << polled;
  for (const char* other :
       {"/snapshots/{name}", "/snapshots/{name}/status", "/snapshot", "/validate/topologysources",
        "unmatched", "transport", "/metrics/x", "/healthz/", ""})
    EXPECT_FALSE(is_polled_route(other)) << other;
}

// One webhook route per admitted kind (core/admitted_kinds.hpp), and no other /validate route.
TEST(RouteTable, OneWebhookRoutePerAdmittedKind) {
  std::size_t webhook_routes = 0;
  for (const route& r : routes()) {
    if (!r.pattern.starts_with("/validate/")) {
      EXPECT_EQ(r.admits, nullptr) << r.pattern;
      continue;
    }
    ++webhook_routes;
    ASSERT_NE(r.admits, nullptr) << r.pattern;
    EXPECT_EQ(r.pattern, r.admits->path);
    EXPECT_EQ(r.methods, method_post);
    EXPECT_EQ(r.body, body_kind::admission);
    EXPECT_FALSE(r.health_listener);
  }
  EXPECT_EQ(webhook_routes, core::admitted_kinds.size());
  for (const auto& k : core::admitted_kinds)
    EXPECT_TRUE(std::any_of(routes().begin(), routes().end(), [&](const route& r) {
      return r.admits == &k;
    })) << k.kind;
}

TEST(Etag, Matching) {
  EXPECT_TRUE(etag_matches("\"abc\"", "\"abc\""));
  EXPECT_TRUE(etag_matches("W/\"abc\"", "\"abc\""));
  EXPECT_TRUE(etag_matches("\"x\", \"abc\"", "\"abc\""));
  EXPECT_TRUE(etag_matches("*", "\"abc\""));
  EXPECT_FALSE(etag_matches("\"abd\"", "\"abc\""));
  EXPECT_FALSE(etag_matches("abc", "\"abc\""));
}

TEST(Accept, PrefersYaml) {
  EXPECT_TRUE(prefers_yaml("application/yaml"));
  EXPECT_TRUE(prefers_yaml("application/yaml, application/json;q=0.5"));
  EXPECT_FALSE(prefers_yaml("application/json, application/yaml"));
  EXPECT_FALSE(prefers_yaml("application/yaml;q=0.1, */*"));
  EXPECT_FALSE(prefers_yaml(""));
  EXPECT_FALSE(prefers_yaml("*/*"));
  EXPECT_TRUE(prefers_yaml("text/yaml"));
}

// What Beast's serializer writes before the body: the reference render_header must match.
std::string beast_header(response& res) {
  namespace beast = boost::beast;
  http::response_serializer<shared_body> sr(res);
  sr.split(true);
  std::string out;
  beast::error_code ec;
  while (!sr.is_header_done() && !ec) {
    sr.next(ec, [&](beast::error_code&, const auto& buffers) {
      const std::size_t n = boost::asio::buffer_size(buffers);
      out += beast::buffers_to_string(buffers);
      sr.consume(n);
    });
  }
  EXPECT_FALSE(ec) << ec.message();
  return out;
}

TEST(RenderHeader, MatchesBeastsSerializerByteForByte) {
  std::vector<response> cases;
  {
    response r{http::status::ok, 11};
    r.set(http::field::content_type, "application/json");
    r.set(http::field::etag, "\"abc\"");
    r.set("X-Topogate-Revision", "inventory-42");
    r.set("X-Request-Id", "0123456789abcdef");
    r.body() = shared_body::value_type(std::string("{}"));
    r.prepare_payload();
    r.keep_alive(true);
    cases.push_back(std::move(r));
  }
  {
    response r{http::status::unauthorized, 11};
    r.set(http::field::www_authenticate, "Bearer realm=\"topogate\"");
    r.keep_alive(false);
    cases.push_back(std::move(r));
  }
  {
    response r{http::status::not_modified, 10};  // HTTP/1.0 keep-alive adds its own field
    r.keep_alive(true);
    cases.push_back(std::move(r));
  }
  {
    response r{http::status::continue_, 11};  // no fields at all
    cases.push_back(std::move(r));
  }
  {
    response r;
    r.result(599);  // unknown status: Beast writes an empty-ish obsolete reason
    r.version(11);
    r.insert("x-empty", "");
    r.insert("X-Dup", "1");
    r.insert("X-Dup", "2");
    cases.push_back(std::move(r));
  }
  {
    response r{http::status::payload_too_large, 11};
    r.reason("Custom Reason");
    r.set(http::field::content_length, "0");
    cases.push_back(std::move(r));
  }
  for (auto& res : cases) {
    std::string ours;
    render_header(res, ours);
    EXPECT_EQ(ours, beast_header(res)) << res.result_int();
  }
}

}  // namespace
}  // namespace topogate::server

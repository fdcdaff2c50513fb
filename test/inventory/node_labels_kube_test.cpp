// A nodeLabels inventory fed by the Kubernetes API (nodesFromAPI) against a real
// kube-apiserver (test/e2e/control-plane.sh start; eval "$(test/e2e/control-plane.sh env)"):
// relabelling a Node through the API re-runs the hierarchy check. Skipped when
// TOPOGATE_CP_URL, TOPOGATE_CP_CA and TOPOGATE_CP_ADMIN_TOKEN_FILE are not set.

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "inventory/kube.hpp"
#include "inventory/registry.hpp"
#include "kube/client.hpp"
#include "test_util.hpp"

namespace topogate::inventory {
namespace {

std::string env(const char* n) {
  const char* v = std::getenv(n);
  return v != nullptr ? std::string(v) : std::string();
}

class KubeNodeLabels : public ::testing::Test {
 protected:
  void SetUp() override {
    store_.kube_api_server = env("TOPOGATE_CP_URL");
    store_.kube_ca_file = env("TOPOGATE_CP_CA");
    store_.kube_token_file = env("TOPOGATE_CP_ADMIN_TOKEN_FILE");
    if (store_.kube_api_server.empty() || store_.kube_ca_file.empty() ||
        store_.kube_token_file.empty())
      GTEST_SKIP() << "no kube-apiserver (run test/e2e/control-plane.sh start and eval its env)";
    for (const char* n : {"nl-worker-a", "nl-worker-b"}) remove(n);
    ASSERT_EQ(create("nl-worker-a", "eu", "a", "r1"), 201);
    ASSERT_EQ(create("nl-worker-b", "eu", "b", "r2"), 201);
  }
  void TearDown() override {
    if (store_.kube_api_server.empty()) return;
    for (const char* n : {"nl-worker-a", "nl-worker-b"}) remove(n);
  }
  kube::client admin() const {
    auto ep = kube::resolve_endpoint(api_access(store_));
    return kube::client(ep ? std::move(*ep) : kube::endpoint{});
  }
  // The status of the API's answer; 0 when none came.
  static int status_of(const core::result<kube::response>& r) { return r ? r->status : 0; }
  int create(const std::string& name, const std::string& r, const std::string& z,
             const std::string& k) {
    return status_of(admin().request(
        "POST", "/api/v1/nodes",
        R"({"apiVersion":"v1","kind":"Node","metadata":{"name":")" + name +
            R"(","labels":{"kubernetes.io/hostname":")" + name + R"(","nl-test/pool":"gpu",)" +
            R"("topology.kubernetes.io/region":")" + r + R"(","topology.kubernetes.io/zone":")" +
            z + R"(","topology.gpustack.ai/rack":")" + k + R"("}}})"));
  }
  // One label changed with a read-modify-write of the Node (`kubectl label --overwrite`).
  int relabel(const std::string& name, const std::string& key, const std::string& value) {
    auto client = admin();
    const auto r = client.request("GET", "/api/v1/nodes/" + name);
    if (status_of(r) != 200) return status_of(r);
    std::string body = r->body;
    const std::string needle = "\"" + key + "\":\"";
    const auto pos = body.find(needle);
    if (pos == std::string::npos) return 0;
    const auto start = pos + needle.size();
    body.replace(start, body.find('"', start) - start, value);
    return status_of(client.request("PUT", "/api/v1/nodes/" + name, body));
  }
  void remove(const std::string& name) {
    static_cast<void>(admin().request("DELETE", "/api/v1/nodes/" + name));
  }

  registry_config config() const {
    registry_config cfg;
    inventory_spec spec;
    spec.config.name = "cloud-racks";
    spec.config.source.api_version = "worker.gpustack.ai/v1";
    spec.config.source.name = "cloud-racks";
    spec.config.source.levels = {"topology.kubernetes.io/region", "topology.kubernetes.io/zone",
                                 "topology.gpustack.ai/rack"};
    core::label_selector sel;
    sel.match_labels = {{"nl-test/pool", "gpu"}};
    spec.config.source.node_selector = sel;
    spec.config.source.node_labels = true;
    spec.kind = source_kind::node_labels;
    spec.nodes_from_api = true;
    cfg.inventories.push_back(std::move(spec));
    cfg.store = store_;
    cfg.store.type = store_config::kind::none;
    return cfg;
  }

  store_config store_;
};

TEST_F(KubeNodeLabels, RelabelledNodeIsCheckedAgain) {
  // The Node watch is built here and handed over: the registry builds none itself.
  const auto cfg = config();
  registry reg(cfg, make_dependencies(cfg.store, /*watch_nodes=*/true,
                                      [](std::string_view, std::string_view) {}));
  reg.start();
  ASSERT_TRUE(testing::eventually([&] {
    const auto c = reg.node_labels("cloud-racks");
    return c && c->report.selected_nodes == 2;
  }));
  EXPECT_TRUE(reg.node_labels("cloud-racks")->report.ok());
  EXPECT_EQ(reg.node_labels("cloud-racks")->nodes_origin, "kubernetes");

  // Rack r1 now also in zone b: S9 on the Node that comes second by name.
  ASSERT_EQ(relabel("nl-worker-b", "topology.gpustack.ai/rack", "r1"), 200);
  ASSERT_TRUE(testing::eventually([&] {
    const auto c = reg.node_labels("cloud-racks");
    return c && !c->report.ok();
  }));
  const auto c = reg.node_labels("cloud-racks");
  ASSERT_EQ(c->report.errors.size(), 1u) << core::render_text(c->report.errors);
  EXPECT_EQ(c->report.errors[0].rule, "S9");
  EXPECT_EQ(c->report.errors[0].path, "nodes[nl-worker-b][topology.gpustack.ai/rack]");

  ASSERT_EQ(relabel("nl-worker-b", "topology.gpustack.ai/rack", "r2"), 200);
  EXPECT_TRUE(testing::eventually([&] {
    const auto now = reg.node_labels("cloud-racks");
    return now && now->report.ok();
  }));
  reg.stop();
}

}  // namespace
}  // namespace topogate::inventory

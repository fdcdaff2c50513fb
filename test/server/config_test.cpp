#include "server/config.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace topogate::server {
namespace {

constexpr std::string_view source_yaml = R"(apiVersion: worker.gpustack.ai/v1
kind: TopologySource
metadata: {name: data-center}
spec:
  levels: [topology.gpustack.ai/rack]
  configMap:
    configMapRef: {namespace: gpustack-system, name: topology-inventory}
    key: snapshot.yaml
    maxStaleness: 10m
)";

class ConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ =
        std::filesystem::temp_directory_path() / ("topogate-config-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    std::ofstream(dir_ / "source.yaml") << source_yaml;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  core::result<serve_config> parse(const std::string& yaml) {
    return parse_serve_config(yaml, dir_.string());
  }
  std::filesystem::path dir_;
};

const std::string minimal = R"(
tls: {certFile: tls.crt, keyFile: tls.key}
inventories:
  - name: dc
    source: source.yaml
    snapshot: snap.yaml
    readers: {bearerTokenFiles: [token]}
)";

TEST_F(ConfigTest, MinimalWithDefaults) {
  auto cfg = parse(minimal);
  ASSERT_TRUE(cfg) << cfg.error().message;
  EXPECT_EQ(cfg->port, 8443u);
  EXPECT_EQ(cfg->address, "0.0.0.0");
  EXPECT_TRUE(cfg->session_tickets);
  EXPECT_EQ(cfg->limits.header_bytes, 16384u);
  EXPECT_EQ(cfg->limits.admission_body_bytes, 7340032u);
  EXPECT_EQ(cfg->limits.push_body_bytes, 1048576u);
  EXPECT_EQ(cfg->limits.idle_timeout, std::chrono::seconds(90));
  ASSERT_EQ(cfg->certificates.size(), 1u);
  // Relative paths are relative to the configuration file.
  EXPECT_EQ(cfg->certificates[0].cert_file, (dir_ / "tls.crt").string());
  ASSERT_EQ(cfg->registry.inventories.size(), 1u);
  EXPECT_EQ(cfg->registry.inventories[0].snapshot_path, (dir_ / "snap.yaml").string());
  EXPECT_EQ(cfg->registry.inventories[0].config.source.levels.size(), 1u);
  EXPECT_EQ(cfg->auth[0].readers.bearer_token_files[0], (dir_ / "token").string());
}

TEST_F(ConfigTest, EveryKey) {
  std::string text(source_yaml);
  text.replace(text.find("namespace: gpustack-system"), 26, "namespace: workers");
  std::ofstream(dir_ / "source-workers.yaml") << text;
  auto cfg = parse(R"(
listen: {address: 127.0.0.1, port: 9443, healthPort: 9090}
tls: {certFile: /abs/tls.crt, keyFile: tls.key, minVersion: "1.3", sessionTickets: false,
      extraCertificates: [{certFile: rsa.crt, keyFile: rsa.key}]}
limits: {maxConnections: 10, headerBytes: 8192, admissionBodyBytes: 1000, pushBodyBytes: 2000,
         handshakeTimeout: 1s, readTimeout: 2s, idleTimeout: 3s, shutdownTimeout: 1m}
threads: 3
logging: {level: debug, accessLog: false}
admission: {workerNamespace: workers, extraReservedPrefixes: [example.com]}
store: {type: file, directory: store}
resyncInterval: 30s
inventories:
  - name: dc
    source: source-workers.yaml
    nodes: nodes.json
    maxAge: 5m
    allowEmptyStart: true
    unknownNodes: prune
    historySize: 5
    readers: {clientCAFile: ca.crt, allowedSubjects: [reader], allowedSANs: [reader.example]}
    writers: {bearerTokenFiles: [w1, w2]}
)");
  ASSERT_TRUE(cfg) << cfg.error().message;
  EXPECT_EQ(cfg->port, 9443u);
  EXPECT_EQ(cfg->health_port, 9090u);
  EXPECT_EQ(cfg->min_tls_version, "1.3");
  EXPECT_FALSE(cfg->session_tickets);
  EXPECT_EQ(cfg->certificates.size(), 2u);
  EXPECT_EQ(cfg->certificates[0].cert_file, "/abs/tls.crt");
  EXPECT_EQ(cfg->limits.max_connections, 10u);
  EXPECT_EQ(cfg->limits.shutdown_timeout, std::chrono::minutes(1));
  EXPECT_EQ(cfg->admission.max_body_bytes, 1000u);
  EXPECT_EQ(cfg->admission.validation.worker_namespace, "workers");
  EXPECT_EQ(cfg->admission.validation.reserved_prefixes.back(), "example.com");
  EXPECT_EQ(cfg->threads, 3u);
  EXPECT_FALSE(cfg->access_log);
  EXPECT_EQ(cfg->registry.store.type, inventory::store_config::kind::file);
  EXPECT_EQ(cfg->registry.resync_interval, std::chrono::seconds(30));
  const auto& inv = cfg->registry.inventories[0];
  EXPECT_EQ(inv.config.max_age, std::chrono::minutes(5));
  EXPECT_TRUE(inv.config.allow_empty_start);
  EXPECT_EQ(inv.config.unknown_nodes, inventory::unknown_nodes_policy::prune);
  EXPECT_EQ(inv.config.history_size, 5u);
  EXPECT_EQ(cfg->auth[0].writers.bearer_token_files.size(), 2u);
  EXPECT_EQ(cfg->auth[0].readers.allowed_sans[0], "reader.example");
}

TEST_F(ConfigTest, WebhookOnlyWithoutInventories) {
  for (const std::string yaml :
       {"tls: {certFile: a, keyFile: b}\n", "tls: {certFile: a, keyFile: b}\ninventories: []\n"}) {
    auto cfg = parse(yaml);
    ASSERT_TRUE(cfg) << yaml << cfg.error().message;
    EXPECT_TRUE(cfg->registry.inventories.empty());
  }
}

TEST_F(ConfigTest, Rejections) {
  const std::pair<std::string, std::string> cases[] = {
      {"tls: {certFile: a, keyFile: b}\ninventories: {dc: {}}\n", "inventories"},
      {"inventories: [{name: dc, source: source.yaml, snapshot: s, readers: {bearerTokenFiles: "
       "[t]}}]\n",
       "tls"},
      {minimal + "bogus: 1\n", "bogus"},
      {minimal + "limits: {readTimeout: 30}\n", "readTimeout"},
      {minimal + "limits: {readTimeout: 0s}\n", "readTimeout"},
      {minimal + "limits: {maxConnections: -1}\n", "maxConnections"},
      {minimal + "listen: {port: 70000}\n", "port"},
      {"tls: {certFile: a, keyFile: b, minVersion: '1.1'}\ninventories: [{name: dc, source: "
       "source.yaml, snapshot: s, readers: {bearerTokenFiles: [t]}}]\n",
       "minVersion"},
      {"tls: {certFile: a, keyFile: b, sessionTickets: 'no'}\ninventories: [{name: dc, source: "
       "source.yaml, snapshot: s, readers: {bearerTokenFiles: [t]}}]\n",
       "sessionTickets"},
      {"tls: {certFile: a, keyFile: b, sessionTickets: [true]}\ninventories: [{name: dc, source: "
       "source.yaml, snapshot: s, readers: {bearerTokenFiles: [t]}}]\n",
       "sessionTickets"},
      {"tls: {certFile: a, keyFile: b}\ninventories: [{name: dc, source: source.yaml, snapshot: "
       "s}]\n",
       "readers"},
      {"tls: {certFile: a, keyFile: b}\ninventories: [{name: dc, source: missing.yaml, snapshot: "
       "s, readers: {bearerTokenFiles: [t]}}]\n",
       "source"},
      {"tls: {certFile: a, keyFile: b}\ninventories: [{name: Bad_Name, source: source.yaml, "
       "snapshot: s, readers: {bearerTokenFiles: [t]}}]\n",
       "name"},
      {"tls: {certFile: a, keyFile: b}\ninventories: [{name: dc, source: source.yaml, snapshot: s, "
       "readers: {bearerTokenFiles: [t]}}, {name: dc, source: source.yaml, snapshot: s, readers: "
       "{bearerTokenFiles: [t]}}]\n",
       "twice"},
      {"tls: [\n", "YAML"},
  };
  for (const auto& [yaml, needle] : cases) {
    const auto cfg = parse(yaml);
    ASSERT_FALSE(cfg) << yaml;
    const auto& err = cfg.error().message;
    EXPECT_EQ(cfg.error().code, core::errc::invalid_argument) << err;
    EXPECT_NE(err.find(needle), std::string::npos)
        << "error \"" << err << "\" should mention " << needle;
  }
}

// The kind of an inventory's source is named once, from the fields users write: a nodeLabels
// TopologySource is fed by its Nodes, a snapshot path by the file, writers alone by pushes. A
// snapshot with writers is a file source (its pushes are refused, 409); mixing a nodeLabels
// TopologySource with a snapshot or writers, or leaving no input, is refused.
TEST_F(ConfigTest, TheSourceKindIsNamedOnceFromTheFields) {
  std::ofstream(dir_ / "labels.yaml") << R"(apiVersion: worker.gpustack.ai/v1
kind: TopologySource
metadata: {name: zone-racks}
spec:
  levels: [topology.kubernetes.io/zone, topology.gpustack.ai/rack]
  nodeLabels: {}
)";
  const auto one = [](const std::string& fields) {
    return "tls: {certFile: a, keyFile: b}\ninventories: [{name: dc, " + fields +
           ", readers: {bearerTokenFiles: [t]}}]\n";
  };
  using inventory::source_kind;
  const std::pair<std::string, source_kind> accepted[] = {
      {"source: source.yaml, snapshot: s", source_kind::file},
      {"source: source.yaml, writers: {bearerTokenFiles: [w]}", source_kind::push},
      {"source: source.yaml, snapshot: s, writers: {bearerTokenFiles: [w]}", source_kind::file},
      {"source: labels.yaml, nodes: nodes.json", source_kind::node_labels},
      {"source: labels.yaml, nodesFromAPI: true", source_kind::node_labels},
  };
  for (const auto& [fields, kind] : accepted) {
    const auto cfg = parse(one(fields));
    ASSERT_TRUE(cfg) << fields << ": " << cfg.error().message;
    ASSERT_EQ(cfg->registry.inventories.size(), 1u);
    const auto& spec = cfg->registry.inventories[0];
    EXPECT_EQ(spec.kind, kind) << fields;
    EXPECT_EQ(inventory::check_spec(spec), "") << fields;
  }
  const std::pair<std::string, std::string> refused[] = {
      {"source: labels.yaml, nodes: nodes.json, snapshot: s",
       "feeds a nodeLabels TopologySource, which takes no snapshot and no writers"},
      {"source: labels.yaml, nodes: nodes.json, writers: {bearerTokenFiles: [w]}",
       "feeds a nodeLabels TopologySource, which takes no snapshot and no writers"},
      {"source: labels.yaml",
       "feeds a nodeLabels TopologySource: nodes (a Node list file) or nodesFromAPI is required"},
      {"source: source.yaml", "needs a snapshot file/directory or writers (push-only)"},
      {"source: source.yaml, nodes: n.json", "needs a snapshot file/directory or writers"},
  };
  for (const auto& [fields, why] : refused) {
    const auto cfg = parse(one(fields));
    ASSERT_FALSE(cfg) << fields;
    EXPECT_EQ(cfg.error().code, core::errc::invalid_argument);
    EXPECT_NE(cfg.error().message.find("inventories[dc]: " + why), std::string::npos)
        << fields << ": " << cfg.error().message;
  }
}

TEST_F(ConfigTest, StoreTimeoutDefaultAndBothEndsOfItsRange) {
  auto cfg = parse(minimal);
  ASSERT_TRUE(cfg) << cfg.error().message;
  EXPECT_EQ(cfg->registry.store.timeout, std::chrono::seconds(5));
  for (const auto& [value, ms] : {std::pair{"100ms", 100}, {"2s", 2000}, {"5m", 300000}}) {
    cfg = parse(minimal + "store: {type: file, directory: st, timeout: " + value + "}\n");
    ASSERT_TRUE(cfg) << value << ": " << cfg.error().message;
    EXPECT_EQ(cfg->registry.store.timeout, std::chrono::milliseconds(ms)) << value;
  }
  for (const char* value : {"99ms", "5m1ms", "0s", "-1s", "5"}) {
    cfg = parse(minimal + "store: {type: file, directory: st, timeout: " + value + "}\n");
    ASSERT_FALSE(cfg) << value;
    EXPECT_NE(cfg.error().message.find("store.timeout"), std::string::npos)
        << value << ": " << cfg.error().message;
  }
}

TEST_F(ConfigTest, ShutdownDelayDefaultAndBothEndsOfItsRange) {
  auto cfg = parse(minimal);
  ASSERT_TRUE(cfg) << cfg.error().message;
  EXPECT_EQ(cfg->limits.shutdown_delay, std::chrono::milliseconds(0));
  for (const auto& [value, ms] : {std::pair{"0s", 0}, {"5s", 5000}, {"5m", 300000}}) {
    cfg = parse(minimal + "limits: {shutdownDelay: " + value + "}\n");
    ASSERT_TRUE(cfg) << value << ": " << cfg.error().message;
    EXPECT_EQ(cfg->limits.shutdown_delay, std::chrono::milliseconds(ms)) << value;
  }
  for (const char* value : {"5m1ms", "-1s", "5"}) {
    cfg = parse(minimal + "limits: {shutdownDelay: " + value + "}\n");
    ASSERT_FALSE(cfg) << value;
    EXPECT_NE(cfg.error().message.find("limits.shutdownDelay"), std::string::npos)
        << value << ": " << cfg.error().message;
  }
}

TEST_F(ConfigTest, InvalidTopologySourceIsRefused) {
  std::ofstream(dir_ / "bad.yaml") << "apiVersion: worker.gpustack.ai/v1\nkind: "
                                      "TopologySource\nmetadata: {name: x}\nspec: {levels: []}\n";
  const auto cfg = parse(
      "tls: {certFile: a, keyFile: b}\ninventories: [{name: dc, source: bad.yaml, snapshot: s, "
      "readers: {bearerTokenFiles: [t]}}]\n");
  ASSERT_FALSE(cfg);
  EXPECT_NE(cfg.error().message.find("T1"), std::string::npos) << cfg.error().message;
}

}  // namespace
}  // namespace topogate::server

// `topogate validate` end to end: the real binary, real files, exit codes and output.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "core/snapshot_size.hpp"
#include "test/server/sized_snapshot.hpp"

namespace {

struct run_result {
  int exit_code = -1;
  std::string out;
  std::string err;
};

class CliValidate : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("topogate-cli-validate-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
    ASSERT_TRUE(std::filesystem::exists(TOPOGATE_BINARY))
        << "build the topogate target first: " << TOPOGATE_BINARY;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string file(const std::string& name, const std::string& data) {
    std::ofstream(dir_ / name, std::ios::binary) << data;
    return (dir_ / name).string();
  }

  // Runs the binary through the shell with arguments that the test controls (no quoting
  // needed beyond single quotes around each), capturing stdout and stderr separately.
  run_result run(const std::vector<std::string>& args, const std::string& stdin_file = "") {
    std::string cmd = "'" + std::string(TOPOGATE_BINARY) + "'";
    for (const auto& a : args) cmd += " '" + a + "'";
    const std::string err_path = (dir_ / "stderr.txt").string();
    cmd += " 2>'" + err_path + "'";
    if (!stdin_file.empty()) cmd += " <'" + stdin_file + "'";
    run_result r;
    FILE* p = ::popen(cmd.c_str(), "r");
    if (p == nullptr) return r;
    std::array<char, 4096> buf{};
    std::size_t n = 0;
    while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
    const int status = ::pclose(p);
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    std::ifstream e(err_path);
    r.err.assign(std::istreambuf_iterator<char>(e), std::istreambuf_iterator<char>());
    return r;
  }

  std::filesystem::path dir_;
};

constexpr const char* valid_source = R"(apiVersion: worker.gpustack.ai/v1
kind: TopologySource
metadata:
  name: data-center
spec:
  nodeSelector: {}
  levels:
    - topology.gpustack.ai/region
    - topology.gpustack.ai/zone
    - topology.gpustack.ai/rack
  configMap:
    configMapRef:
      namespace: gpustack-system
      name: topology-inventory
    key: snapshot.yaml
    maxStaleness: 10m
)";

constexpr const char* duplicate_level_source = R"(apiVersion: worker.gpustack.ai/v1
kind: TopologySource
metadata:
  name: cloud-zones
spec:
  levels:
    - topology.kubernetes.io/region
    - topology.kubernetes.io/zone
    - topology.kubernetes.io/zone
  nodeLabels: {}
)";

constexpr const char* valid_snapshot = R"(apiVersion: topology.gpustack.ai/v1alpha1
revision: inventory-42
nodes:
  worker-a:
    topology.gpustack.ai/region: region-a
    topology.gpustack.ai/zone: zone-a
    topology.gpustack.ai/rack: rack-01
  worker-b:
    topology.gpustack.ai/region: region-a
    topology.gpustack.ai/zone: zone-a
    topology.gpustack.ai/rack: rack-02
)";

TEST_F(CliValidate, ValidTopologySourceExitsZero) {
  const auto r = run({"validate", "topologysource", file("ts.yaml", valid_source)});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(r.out.find("["), std::string::npos) << r.out;
}

TEST_F(CliValidate, InvalidTopologySourcePrintsOneLinePerError) {
  const auto r = run({"validate", "topologysource", file("ts.yaml", duplicate_level_source)});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("[T4] spec.levels[2]: Duplicate value: \"topology.kubernetes.io/zone\"\n"),
            std::string::npos)
      << r.out;
}

TEST_F(CliValidate, JsonOutput) {
  const auto bad = run(
      {"validate", "topologysource", file("ts.yaml", duplicate_level_source), "--output", "json"});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_EQ(bad.out.rfind("{\"valid\":false,", 0), 0u) << bad.out;
  EXPECT_NE(bad.out.find("\"rule\":\"T4\""), std::string::npos) << bad.out;
  EXPECT_NE(bad.out.find("\"field\":\"spec.levels[2]\""), std::string::npos) << bad.out;
  EXPECT_NE(bad.out.find("\"warnings\":[]"), std::string::npos) << bad.out;

  const auto good =
      run({"validate", "topologysource", file("ok.yaml", valid_source), "--output=json"});
  EXPECT_EQ(good.exit_code, 0);
  EXPECT_EQ(good.out, "{\"valid\":true,\"errors\":[],\"warnings\":[]}\n");
}

TEST_F(CliValidate, WarningsDoNotFailTheCheck) {
  const std::string src = R"(apiVersion: worker.gpustack.ai/v1
kind: TopologySource
metadata: {name: inventory-service}
spec:
  levels: [topology.gpustack.ai/rack]
  webhook:
    url: https://inventory.gpustack-system.svc/snapshot
    pollInterval: 1m
    timeout: 10s
    maxStaleness: 30s
    bearerTokenSecretRef: {namespace: gpustack-system, name: token}
)";
  const auto r = run({"validate", "topologysource", file("ts.yaml", src)});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(r.out.rfind("warning: ", 0), 0u) << r.out;
  const auto j = run({"validate", "topologysource", file("ts.yaml", src), "--output", "json"});
  EXPECT_EQ(j.exit_code, 0);
  EXPECT_EQ(j.out.find("\"warnings\":[]"), std::string::npos) << j.out;
}

TEST_F(CliValidate, UndecodableInputIsInvalidNotUsage) {
  EXPECT_EQ(run({"validate", "topologysource", file("ts.yaml", "spec: [unclosed\n")}).exit_code, 1);
  EXPECT_EQ(run({"validate", "topologysource", file("empty.yaml", "")}).exit_code, 1);
  EXPECT_EQ(run({"validate", "modeldeployment", file("md.yaml", "a: 1\na: 2\n")}).exit_code, 1);
}

TEST_F(CliValidate, UsageAndIoErrorsExitTwo) {
  const std::string ts = file("ts.yaml", valid_source);
  EXPECT_EQ(run({"validate"}).exit_code, 2);
  EXPECT_EQ(run({"validate", "topologysource"}).exit_code, 2);
  EXPECT_EQ(run({"validate", "pods", ts}).exit_code, 2);
  EXPECT_EQ(run({"validate", "topologysource", ts, "--bogus"}).exit_code, 2);
  EXPECT_EQ(run({"validate", "topologysource", ts, "--output", "yaml"}).exit_code, 2);
  EXPECT_EQ(run({"validate", "topologysource", ts, "--output"}).exit_code, 2);
  EXPECT_EQ(run({"validate", "topologysource", ts, ts}).exit_code, 2);
  EXPECT_EQ(run({"validate", "topologysource", ts, "--source", ts}).exit_code, 2);
  EXPECT_EQ(run({"validate", "topologysource", (dir_ / "missing.yaml").string()}).exit_code, 2);
  EXPECT_EQ(run({"validate", "topologysource", dir_.string()}).exit_code, 2);  // a directory
  EXPECT_EQ(run({"validate", "snapshot", file("s.yaml", valid_snapshot)}).exit_code,
            2);  // no --source
  EXPECT_EQ(run({"validate", "snapshot", file("s.yaml", valid_snapshot), "--source",
                 (dir_ / "missing.yaml").string()})
                .exit_code,
            2);
  const auto help = run({"validate", "--help"});
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.out.find("usage:"), std::string::npos);
}

TEST_F(CliValidate, StdinInput) {
  const auto r = run({"validate", "topologysource", "-"}, file("ts.yaml", duplicate_level_source));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("[T4]"), std::string::npos);
}

TEST_F(CliValidate, WorkerNamespaceOption) {
  std::string src = valid_source;
  src.replace(src.find("namespace: gpustack-system"), 26, "namespace: inventory");
  const std::string path = file("ts.yaml", src);
  const auto strict = run({"validate", "topologysource", path});
  EXPECT_EQ(strict.exit_code, 1);
  EXPECT_NE(strict.out.find("[T13] spec.configMap.configMapRef.namespace: Forbidden"),
            std::string::npos)
      << strict.out;
  EXPECT_EQ(run({"validate", "topologysource", path, "--worker-namespace", "inventory"}).exit_code,
            0);
}

TEST_F(CliValidate, ReservedPrefixOption) {
  std::string src = valid_source;
  src += "  additionalWritePrefix: inventory.corp.example/\n";
  const std::string path = file("ts.yaml", src);
  EXPECT_EQ(run({"validate", "topologysource", path}).exit_code, 0);
  const auto r = run({"validate", "topologysource", path, "--reserved-prefix", "corp.example"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("[T6]"), std::string::npos) << r.out;
}

TEST_F(CliValidate, Snapshot) {
  const std::string ts = file("ts.yaml", valid_source);
  const auto ok = run({"validate", "snapshot", file("s.yaml", valid_snapshot), "--source", ts});
  EXPECT_EQ(ok.exit_code, 0) << ok.out << ok.err;

  std::string undeclared = valid_snapshot;
  undeclared += "  worker-c:\n    topology.gpustack.ai/row: row-1\n";
  const auto bad = run({"validate", "snapshot", file("bad.yaml", undeclared), "--source", ts});
  EXPECT_EQ(bad.exit_code, 1) << bad.out;
  EXPECT_NE(bad.out.find("[S4]"), std::string::npos) << bad.out;
}

TEST_F(CliValidate, SnapshotAgainstNodes) {
  const std::string ts = file("ts.yaml", valid_source);
  const std::string nodes = file("nodes.json", R"({"apiVersion":"v1","kind":"List","items":[
    {"apiVersion":"v1","kind":"Node","metadata":{"name":"worker-a","labels":{"kubernetes.io/hostname":"worker-a"}}},
    {"apiVersion":"v1","kind":"Node","metadata":{"name":"worker-b","labels":{"kubernetes.io/hostname":"worker-b"}}}]})");
  const std::string snap = file("s.yaml", valid_snapshot);
  EXPECT_EQ(run({"validate", "snapshot", snap, "--source", ts, "--nodes", nodes}).exit_code, 0);

  const std::string one_node = file("one.json", R"({"apiVersion":"v1","kind":"List","items":[
    {"apiVersion":"v1","kind":"Node","metadata":{"name":"worker-a","labels":{}}}]})");
  const auto r =
      run({"validate", "snapshot", snap, "--source", ts, "--nodes", one_node, "--output", "json"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("\"rule\":\"S3\""), std::string::npos) << r.out;
}

TEST_F(CliValidate, SnapshotWithInvalidSourceReportsTheSource) {
  const auto r = run({"validate", "snapshot", file("s.yaml", valid_snapshot), "--source",
                      file("ts.yaml", duplicate_level_source), "--output", "json"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("\"input\":\"source\""), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"rule\":\"T4\""), std::string::npos) << r.out;
}

TEST_F(CliValidate, SnapshotReceivedSizeCountsForS10) {
  // Valid content padded with a YAML comment past 1 MiB: only the received size fails.
  std::string big = valid_snapshot;
  big += "# " + std::string((1u << 20) - big.size(), 'x') + "\n";
  ASSERT_GT(big.size(), 1u << 20);
  const auto r = run(
      {"validate", "snapshot", file("big.yaml", big), "--source", file("ts.yaml", valid_source)});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("[S10]"), std::string::npos) << r.out;
}

TEST_F(CliValidate, SnapshotSizeIsPrintedAndWarnedAboutPastNineTenthsOfTheLimit) {
  namespace st = topogate::server::testing;
  const std::string ts = file("ts.yaml", valid_source);
  const auto small = run({"validate", "snapshot", file("s.yaml", valid_snapshot), "--source", ts});
  EXPECT_EQ(small.exit_code, 0);
  EXPECT_NE(small.out.find(": valid snapshot: 2 Nodes, "), std::string::npos) << small.out;
  EXPECT_EQ(small.out.find("warning:"), std::string::npos) << small.out;

  // 943718 bytes (0.9 of 1 MiB rounded down): valid, no warning.
  const std::string under =
      file("under.json", st::snapshot_json_of_size(topogate::core::snapshot_size_warning_bytes));
  const auto u = run({"validate", "snapshot", under, "--source", ts});
  EXPECT_EQ(u.exit_code, 0) << u.out << u.err;
  EXPECT_EQ(u.out.find("warning:"), std::string::npos) << u.out;
  EXPECT_NE(u.out.find("943718 bytes as canonical JSON (89.9% of 1048576)"), std::string::npos)
      << u.out;

  // One byte more: still valid (exit 0), with a warning for the file and for its canonical
  // JSON (the same bytes here), in text and in JSON.
  const std::string over =
      file("over.json", st::snapshot_json_of_size(topogate::core::snapshot_size_warning_bytes + 1));
  const auto o = run({"validate", "snapshot", over, "--source", ts});
  EXPECT_EQ(o.exit_code, 0) << o.out << o.err;
  const std::string tail =
      " is 943719 bytes, 90.0% of the 1048576-byte snapshot limit (S10; warning above 90%): "
      "past the limit revisions are refused; split the cluster into inventories by "
      "nodeSelector (docs/inventory.md#splitting-a-large-cluster)\n";
  EXPECT_NE(o.out.find("warning: " + over + tail), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("warning: " + over + " as canonical JSON" + tail), std::string::npos)
      << o.out;
  EXPECT_NE(o.out.find(over + ": valid snapshot: "), std::string::npos) << o.out;
  const auto j = run({"validate", "snapshot", over, "--source", ts, "--output", "json"});
  EXPECT_EQ(j.exit_code, 0) << j.out << j.err;
  EXPECT_NE(j.out.find("\"valid\":true,\"nodes\":"), std::string::npos) << j.out;
  EXPECT_NE(j.out.find("\"canonicalJsonBytes\":943719,\"maxBytes\":1048576"), std::string::npos)
      << j.out;
  EXPECT_NE(j.out.find("\"warnings\":[\"" + over + " is 943719 bytes"), std::string::npos) << j.out;

  // A YAML file larger than its canonical JSON: only the file's size warns.
  std::string padded = valid_snapshot;
  padded += "# " +
            std::string(topogate::core::snapshot_size_warning_bytes + 1 - padded.size() - 3, 'x') +
            "\n";
  ASSERT_EQ(padded.size(), topogate::core::snapshot_size_warning_bytes + 1);
  const std::string yaml = file("padded.yaml", padded);
  const auto p = run({"validate", "snapshot", yaml, "--source", ts});
  EXPECT_EQ(p.exit_code, 0) << p.out << p.err;
  EXPECT_NE(p.out.find("warning: " + yaml + tail), std::string::npos) << p.out;
  EXPECT_EQ(p.out.find("as canonical JSON is"), std::string::npos) << p.out;
}

TEST_F(CliValidate, ModelDeployment) {
  const auto ok = run({"validate", "modeldeployment", file("md.yaml", R"(spec:
  roles:
    - name: decode
      replicas: 2
      size: 4
      topology:
        requiredLevel: topology.kubernetes.io/zone
)")});
  EXPECT_EQ(ok.exit_code, 0) << ok.out << ok.err;
  // A bare word is a valid key to the consumer: valid, with a warning.
  const auto bare = run({"validate", "modeldeployment", file("bare.yaml", R"(spec:
  roles:
    - name: prefill
    - name: decode
      topology:
        requiredLevel: zone
)")});
  EXPECT_EQ(bare.exit_code, 0) << bare.out << bare.err;
  EXPECT_NE((bare.out + bare.err).find("spec.roles[1].topology.requiredLevel has no prefix"),
            std::string::npos)
      << bare.out << bare.err;
  const auto bad = run({"validate", "modeldeployment", file("bad.yaml", R"(spec:
  roles:
    - name: prefill
    - name: decode
      topology:
        requiredLevel: zone a
)")});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.out.find("[M1] spec.roles[1].topology.requiredLevel: Invalid value: \"zone a\""),
            std::string::npos)
      << bad.out;
  const auto host = run({"validate", "modeldeployment",
                         file("host.yaml",
                              "spec: {roles: [{name: a, topology: {requiredLevel: "
                              "kubernetes.io/hostname}}]}\n"),
                         "--output", "json"});
  EXPECT_EQ(host.exit_code, 1);
  EXPECT_NE(host.out.find("\"rule\":\"M2\""), std::string::npos) << host.out;
}

}  // namespace

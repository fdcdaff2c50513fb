// `topogate diagnose chain`'s NFD hop from the command line: a nodefeatures dump (even an
// empty one) says the API serves NodeFeatures, --snapshot stands for a webhook source's
// revision, --worker-namespace for the consumer's namespace. The checks themselves are
// test/diagnose/nfd_hop_test.cpp.

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "diagnose/diagnose.hpp"
#include "test/fixtures/test_files.hpp"

namespace topogate::cli {
namespace {

using testing::shell_quote;
using testing::temp_dir;
using testing::write_text;

using testing::run_result;

class DiagnoseNfdTest : public ::testing::Test {
 protected:
  run_result run(const std::string& args) {
    return testing::run_without_cluster(dir_, TOPOGATE_BINARY, "diagnose chain " + args);
  }
  static std::string fixture(const std::string& file) {
    return testing::source_dir() + "/test/fixtures/diagnose/nfd-chain/" + file;
  }
  // One webhook source over one Node and its NodeFeature (rack r1, applied).
  void write_webhook_cluster() {
    write_text(dir_ / "objects.json", R"({"apiVersion":"v1","kind":"List","items":[
{"apiVersion":"worker.gpustack.ai/v1","kind":"TopologySource","metadata":{"name":"hook","uid":"u-1"},
 "spec":{"nodeSelector":{},"levels":["topology.gpustack.ai/rack"],
 "webhook":{"url":"https://t/s","pollInterval":"1m","timeout":"1s","maxStaleness":"5m"}},
 "status":{"conditions":[{"type":"Ready","status":"True"}]}},
{"apiVersion":"v1","kind":"Node","metadata":{"name":"n1","labels":{"topology.gpustack.ai/rack":"r1"},
 "annotations":{"nfd.node.kubernetes.io/feature-labels":"topology.gpustack.ai/rack"}}}]})");
  }
  void write_feature(const std::string& ns, const std::string& name) {
    write_text(
        dir_ / "nodefeatures.json",
        R"({"apiVersion":"v1","kind":"List","items":[{"apiVersion":"nfd.k8s-sigs.io/v1alpha1","kind":"NodeFeature",
 "metadata":{"namespace":")" +
            ns + R"(","name":")" + name +
            R"(","labels":{"nfd.node.kubernetes.io/node-name":"n1","topology.gpustack.ai/source-uid":"u-1"},
 "ownerReferences":[{"apiVersion":"worker.gpustack.ai/v1","kind":"TopologySource","name":"hook","uid":"u-1","controller":true}]},
 "spec":{"labels":{"topology.gpustack.ai/rack":"r1"}}}]})");
  }
  // The webhook cluster's files.
  std::string webhook_files() const {
    return "-f " + shell_quote(dir_ / "objects.json") + " -f " +
           shell_quote(dir_ / "nodefeatures.json");
  }

  // Starts an HTTPS server on 127.0.0.1 (a certificate of a CA in dir_/pki) answering GETs
  // with `answer_py`'s answer(path, headers) -> (status, body); its port, "" when it did not
  // start. It is stopped at the end of the test.
  std::string start_https(const std::string& answer_py) {
    const std::string pki = dir_ / "pki";
    if (std::system(("mkdir -p " + shell_quote(pki)).c_str()) != 0 || !testing::make_ca(pki))
      return {};
    if (std::system(("CERTS_QUIET=1 " +
                     shell_quote(testing::source_dir() + "/certs/make-server-cert.sh") +
                     " --ca-cert " + shell_quote(pki + "/ca.crt") + " --ca-key " +
                     shell_quote(pki + "/ca.key") + " --out " + shell_quote(pki) +
                     " --name srv --dns localhost --ip 127.0.0.1 >/dev/null 2>&1")
                        .c_str()) != 0)
      return {};
    write_text(dir_ / "server.py", "import http.server, os, ssl, sys\n" + answer_py + R"(
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        status, body = answer(self.path, self.headers)
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a): pass
s = http.server.HTTPServer(("127.0.0.1", 0), H)
c = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
c.load_cert_chain(sys.argv[1] + "/srv.crt", sys.argv[1] + "/srv.key")
s.socket = c.wrap_socket(s.socket, server_side=True)
open(sys.argv[2] + ".tmp", "w").write(str(s.server_address[1]))
os.rename(sys.argv[2] + ".tmp", sys.argv[2])
s.serve_forever()
)");
    if (std::system(("python3 " + shell_quote(dir_ / "server.py") + " " + shell_quote(pki) + " " +
                     shell_quote(dir_ / "port") + " >/dev/null 2>&1 & echo $! >" +
                     shell_quote(dir_ / "pid"))
                        .c_str()) != 0)
      return {};
    server_pid_ = testing::slurp(dir_ / "pid");
    std::string port;
    for (int i = 0; i < 100 && port.empty(); ++i) {
      port = testing::slurp(dir_ / "port");
      if (port.empty()) ::usleep(50000);
    }
    return port;
  }
  void TearDown() override {
    if (!server_pid_.empty() && server_pid_.find_first_not_of("0123456789\n") == std::string::npos)
      static_cast<void>(std::system(("kill " + server_pid_).c_str()));
  }

  temp_dir dir_;
  std::string server_pid_;
};

TEST_F(DiagnoseNfdTest, FixtureFindingsAndTheNodeFeatureDump) {
  auto r =
      run("--from " + shell_quote(testing::source_dir() + "/test/fixtures/diagnose/nfd-chain") +
          " --output json");
  EXPECT_EQ(r.rc, 1) << r.err;
  EXPECT_NE(r.out.find("\"check\":\"nfd-feature-missing\""), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("\"check\":\"nfd-crd\""), std::string::npos) << r.out;

  const std::string without = "-f " + shell_quote(fixture("nodes.json")) + " -f " +
                              shell_quote(fixture("topologysources.json")) + " -f " +
                              shell_quote(fixture("configmaps.json"));
  r = run(without);
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.out.find("nfd-crd"), std::string::npos) << r.out;
  // kubectl's dump of no NodeFeatures is an empty List: its name says what it is.
  write_text(dir_ / "nodefeatures.json", R"({"apiVersion":"v1","kind":"List","items":[]})");
  r = run(without + " -f " + shell_quote(dir_ / "nodefeatures.json"));
  EXPECT_EQ(r.out.find("nfd-crd"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("nfd-feature-missing"), std::string::npos) << r.out;
}

TEST_F(DiagnoseNfdTest, SnapshotStandsForTheWebhookRevision) {
  write_webhook_cluster();
  write_feature("gpustack-system", diagnose::nfd_feature_name("u-1", "n1"));
  auto r = run(webhook_files());
  EXPECT_EQ(r.out.find("nfd-"), std::string::npos) << r.out << r.err;
  EXPECT_NE(r.out.find("note: TopologySource/hook: its revision is not read"), std::string::npos)
      << r.out;

  write_text(dir_ / "snap.yaml",
             "apiVersion: topology.gpustack.ai/v1alpha1\nrevision: h-2\nnodes:\n  n1:\n"
             "    topology.gpustack.ai/rack: r2\n");
  for (const std::string& opt : {std::string("--snapshot "), std::string("--snapshot hook=")}) {
    r = run(webhook_files() + " " + opt + shell_quote(dir_ / "snap.yaml"));
    EXPECT_NE(r.out.find("nfd-feature-revision"), std::string::npos) << opt << r.out;
    EXPECT_EQ(r.out.find("note:"), std::string::npos) << opt << r.out;
  }
  r = run(webhook_files() + " --snapshot other=" + shell_quote(dir_ / "snap.yaml"));
  EXPECT_EQ(r.out.find("nfd-"), std::string::npos) << r.out;
  r = run(webhook_files() + " --snapshot =x");
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("--snapshot is [SOURCE=]FILE"), std::string::npos) << r.err;
  r = run(webhook_files() + " --snapshot " + shell_quote(dir_ / "missing.yaml"));
  EXPECT_EQ(r.rc, 2) << r.out;
}

TEST_F(DiagnoseNfdTest, WorkerNamespaceOption) {
  write_webhook_cluster();
  write_feature("workers", diagnose::nfd_feature_name("u-1", "n1"));
  auto r = run(webhook_files());
  EXPECT_NE(r.out.find("nfd-feature-namespace"), std::string::npos) << r.out;
  r = run(webhook_files() + " --worker-namespace workers");
  EXPECT_EQ(r.out.find("nfd-"), std::string::npos) << r.out << r.err;
}

// The revision fetched from an HTTPS server as a reader fetches it from topogate: the bearer
// token sent, the certificate verified.
TEST_F(DiagnoseNfdTest, SnapshotUrlFetchesTheWebhookRevision) {
  write_webhook_cluster();
  write_feature("gpustack-system", diagnose::nfd_feature_name("u-1", "n1"));
  write_text(dir_ / "token", "reader-token\n");
  const std::string port = start_https(R"(
def answer(path, headers):
    if path != "/snapshots/hook" or headers.get("Authorization") != "Bearer reader-token":
        return 401, b""
    return 200, b'{"apiVersion":"topology.gpustack.ai/v1alpha1","revision":"h-3","nodes":{"n1":{"topology.gpustack.ai/rack":"r3"}}}'
)");
  ASSERT_FALSE(port.empty()) << "the HTTPS server did not start";
  const std::string pki = dir_ / "pki";
  const std::string url = "https://127.0.0.1:" + port + "/snapshots/hook";
  const std::string creds = " --snapshot-token-file " + shell_quote(dir_ / "token") +
                            " --snapshot-ca-file " + shell_quote(pki + "/ca.crt");

  auto r = run(webhook_files() + " --snapshot-url " + url + creds);
  EXPECT_NE(r.out.find("nfd-feature-revision"), std::string::npos) << r.out << r.err;
  EXPECT_NE(r.out.find("h-3"), std::string::npos) << r.out;
  r = run(webhook_files() + " --snapshot-url hook=" + url + creds);
  EXPECT_NE(r.out.find("nfd-feature-revision"), std::string::npos) << r.out << r.err;
  write_text(dir_ / "token", "other\n");
  r = run(webhook_files() + " --snapshot-url " + url + creds);
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("HTTP 401"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("other"), std::string::npos) << r.err;
  r = run(webhook_files() + " --snapshot-url " + url);
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("--snapshot-url needs"), std::string::npos) << r.err;
  r = run(webhook_files() + " --snapshot-url http://127.0.0.1:" + port + "/x" + creds);
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("https://"), std::string::npos) << r.err;
}

// Online: NodeFeatures listed from the API (a 404, no CRD, is a finding and not an error),
// the ConfigMap a configMap source names read by name.
TEST_F(DiagnoseNfdTest, OnlineNodeFeaturesAndConfigMap) {
  write_text(dir_ / "token", "admin-token\n");
  write_text(dir_ / "mode", "no-crd");
  const std::string name = diagnose::nfd_feature_name("u-1", "n1");
  const std::string port = start_https(R"(
import json
def lst(kind, items, api="v1"):
    return 200, json.dumps({"apiVersion": api, "kind": kind, "metadata": {}, "items": items}).encode()
def answer(path, headers):
    if headers.get("Authorization") != "Bearer admin-token":
        return 401, b""
    open(sys.argv[2] + ".paths", "a").write(path + "\n")
    route = path.split("?")[0]
    if route == "/api/v1/nodes":
        return lst("NodeList", [{"metadata": {"name": "n1", "labels": {"topology.gpustack.ai/rack": "r1"},
            "annotations": {"nfd.node.kubernetes.io/feature-labels": "topology.gpustack.ai/rack"}}}])
    if route == "/apis/worker.gpustack.ai/v1/topologysources":
        return lst("TopologySourceList", [{"metadata": {"name": "dc", "uid": "u-1"},
            "spec": {"nodeSelector": {}, "levels": ["topology.gpustack.ai/rack"],
                     "configMap": {"configMapRef": {"namespace": "gpustack-system", "name": "inv"}, "key": "s.yaml"}},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]}}], "worker.gpustack.ai/v1")
    if route == "/api/v1/namespaces/gpustack-system/configmaps" and "metadata.name%3Dinv" in path:
        return lst("ConfigMapList", [{"metadata": {"namespace": "gpustack-system", "name": "inv"},
            "data": {"s.yaml": "apiVersion: topology.gpustack.ai/v1alpha1\nrevision: dc-9\nnodes:\n  n1:\n    topology.gpustack.ai/rack: r2\n"}}])
    if route == "/apis/nfd.k8s-sigs.io/v1alpha1/nodefeatures" and open(os.path.dirname(sys.argv[2]) + "/mode").read() != "no-crd":
        return lst("NodeFeatureList", [{"metadata": {"namespace": "gpustack-system", "name": ")" +
                                       name + R"(",
            "labels": {"nfd.node.kubernetes.io/node-name": "n1", "topology.gpustack.ai/source-uid": "u-1"},
            "ownerReferences": [{"kind": "TopologySource", "name": "dc", "uid": "u-1", "controller": True}]},
            "spec": {"labels": {"topology.gpustack.ai/rack": "r1"}}}], "nfd.k8s-sigs.io/v1alpha1")
    return 404, b'{"kind":"Status","code":404}'
)");
  ASSERT_FALSE(port.empty()) << "the HTTPS server did not start";
  const std::string api = "--server https://127.0.0.1:" + port + " --token-file " +
                          shell_quote(dir_ / "token") + " --ca-file " +
                          shell_quote(dir_ / "pki" + "/ca.crt") + " --output json";
  auto r = run(api);
  EXPECT_EQ(r.rc, 1) << r.err;
  EXPECT_NE(r.out.find("\"check\":\"nfd-crd\""), std::string::npos) << r.out << r.err;
  EXPECT_NE(r.err.find("the API serves no nodefeatures"), std::string::npos) << r.err;
  EXPECT_NE(testing::slurp(dir_ / "port.paths").find("/nodefeatures"), std::string::npos);

  write_text(dir_ / "mode", "served");
  r = run(api);
  EXPECT_EQ(r.out.find("nfd-crd"), std::string::npos) << r.out << r.err;
  // The ConfigMap's revision says r2, the NodeFeature r1.
  EXPECT_NE(r.out.find("\"check\":\"nfd-feature-revision\""), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("dc-9"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("\"notes\""), std::string::npos) << r.out;
}

}  // namespace
}  // namespace topogate::cli

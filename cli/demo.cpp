// topogate demo [--dir DIR] [--port PORT]: a development CA, a server certificate for
// localhost/127.0.0.1, a client certificate, a bearer token, the runbook's
// data-center TopologySource and snapshot, and a configuration serving them as
// inventory "demo" on https://127.0.0.1:PORT. Files already in DIR are reused, so a
// restart keeps the same CA and tokens.
#include <openssl/rand.h>
#include <sys/stat.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>

#include "cli/commands.hpp"
#include "server/config.hpp"
#include "server/pki.hpp"
#include "server/serve.hpp"
#include "util/file.hpp"

namespace topogate::cli {

namespace {

constexpr std::string_view topology_source_yaml = R"(apiVersion: worker.gpustack.ai/v1
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

constexpr std::string_view snapshot_yaml = R"(apiVersion: topology.gpustack.ai/v1alpha1
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

constexpr std::string_view config_yaml =
    R"(# topogate demo configuration (see docs/configuration.md for every key).
listen:
  address: 127.0.0.1
  port: 8443
tls:
  certFile: server.crt
  keyFile: server.key
inventories:
  - name: demo
    source: topologysource.yaml
    snapshot: snapshot.yaml
    readers:
      bearerTokenFiles: [token]
      clientCAFile: ca.crt
)";

constexpr std::string_view review_allowed =
    R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"0d6c2f3e-demo-allowed","kind":{"group":"worker.gpustack.ai","version":"v1","kind":"TopologySource"},"resource":{"group":"worker.gpustack.ai","version":"v1","resource":"topologysources"},"name":"data-center","operation":"CREATE","object":{"apiVersion":"worker.gpustack.ai/v1","kind":"TopologySource","metadata":{"name":"data-center"},"spec":{"nodeSelector":{},"levels":["topology.gpustack.ai/region","topology.gpustack.ai/zone","topology.gpustack.ai/rack"],"configMap":{"configMapRef":{"namespace":"gpustack-system","name":"topology-inventory"},"key":"snapshot.yaml","maxStaleness":"10m"}}}}}
)";

constexpr std::string_view review_denied =
    R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"7a1e9b52-demo-denied","kind":{"group":"worker.gpustack.ai","version":"v1","kind":"TopologySource"},"resource":{"group":"worker.gpustack.ai","version":"v1","resource":"topologysources"},"name":"inventory-service","operation":"CREATE","object":{"apiVersion":"worker.gpustack.ai/v1","kind":"TopologySource","metadata":{"name":"inventory-service"},"spec":{"levels":["topology.gpustack.ai/rack","topology.gpustack.ai/rack","kubernetes.io/hostname"],"additionalWritePrefix":"kubernetes.io/","webhook":{"url":"http://inventory.example.com/snapshot","pollInterval":"1m","timeout":"5m","maxStaleness":"5m","bearerTokenSecretRef":{"namespace":"default","name":"token"}}}}}}
)";

bool file_exists(const std::string& path) { return util::signature_of(path).exists; }

core::result<void> write_if_missing(const std::string& path, std::string_view data, unsigned mode) {
  if (file_exists(path)) return {};
  return util::write_file_atomic(path, data, util::atomic_write_options(mode));
}

std::string random_token() {
  unsigned char b[32];
  RAND_bytes(b, sizeof b);
  static constexpr char hex[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : b) {
    out.push_back(hex[c >> 4]);
    out.push_back(hex[c & 15]);
  }
  return out;
}

core::result<void> make_pki(const std::string& dir) {
  const std::string ca_crt = dir + "/ca.crt", ca_key = dir + "/ca.key";
  server::issued ca;
  if (file_exists(ca_crt) && file_exists(ca_key)) {
    auto cert = util::read_file(ca_crt);
    if (!cert) return std::move(cert).error();
    auto key = util::read_file(ca_key);
    if (!key) return std::move(key).error();
    ca = {std::move(*cert), std::move(*key)};
  } else {
    auto made = server::make_ca("topogate demo CA", 3650);
    if (!made) return std::move(made).error();
    ca = std::move(*made);
    if (auto w = util::write_file_atomic(ca_key, ca.key_pem, util::atomic_write_options(0600)); !w)
      return w;
    if (auto w = util::write_file_atomic(ca_crt, ca.cert_pem, util::atomic_write_options(0644)); !w)
      return w;
  }
  struct leaf {
    const char* name;
    server::cert_request req;
  };
  const leaf leaves[] = {
      {"server", {"localhost", "topogate demo", {"localhost"}, {"127.0.0.1", "::1"}, true, 365}},
      {"client",
       {"topogate-demo-client", "topogate demo", {"demo-client.topogate.local"}, {}, false, 365}},
  };
  for (const auto& l : leaves) {
    const std::string crt = dir + "/" + l.name + ".crt", key = dir + "/" + l.name + ".key";
    if (file_exists(crt) && file_exists(key)) continue;
    const auto out = server::issue(ca, l.req);
    if (!out) return out.error();
    if (auto w = util::write_file_atomic(key, out->key_pem, util::atomic_write_options(0600)); !w)
      return w;
    if (auto w = util::write_file_atomic(crt, out->cert_pem, util::atomic_write_options(0644)); !w)
      return w;
  }
  return write_if_missing(dir + "/token", random_token() + "\n", 0600);
}

}  // namespace

int run_demo(args a) {
  std::string dir = "topogate-demo";
  std::vector<std::string_view> overrides;
  unsigned port = 8443;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (a[i] == "--dir" && i + 1 < a.size()) {
      dir = std::string(a[++i]);
    } else if (a[i] == "--port" && i + 1 < a.size()) {
      const std::string p(a[++i]);
      char* end = nullptr;
      const long v = std::strtol(p.c_str(), &end, 10);
      if (p.empty() || *end || v < 0 || v > 65535) {
        std::fprintf(stderr, "topogate demo: --port: \"%s\" is not a port\n", p.c_str());
        return 2;
      }
      port = static_cast<unsigned>(v);
    } else {
      std::fputs("usage: topogate demo [--dir DIR] [--port PORT]\n", stderr);
      return 2;
    }
  }
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    std::fprintf(stderr, "topogate demo: cannot create %s: %s\n", dir.c_str(),
                 std::strerror(errno));
    return 1;
  }
  char abs[PATH_MAX];
  if (!::realpath(dir.c_str(), abs)) {
    std::fprintf(stderr, "topogate demo: %s: %s\n", dir.c_str(), std::strerror(errno));
    return 1;
  }
  dir = abs;
  const auto written = [&]() -> core::result<void> {
    if (auto r = make_pki(dir); !r) return r;
    const std::pair<const char*, std::string_view> files[] = {
        {"/topologysource.yaml", topology_source_yaml},
        {"/snapshot.yaml", snapshot_yaml},
        {"/topogate.yaml", config_yaml},
        {"/review-allowed.json", review_allowed},
        {"/review-denied.json", review_denied},
    };
    for (const auto& [name, data] : files) {
      if (auto r = write_if_missing(dir + name, data, 0644); !r) return r;
    }
    return {};
  }();
  if (!written) {
    std::fprintf(stderr, "topogate demo: %s\n", written.error().message.c_str());
    return 1;
  }
  auto cfg = server::load_serve_config(dir + "/topogate.yaml");
  if (!cfg) {
    std::fprintf(stderr, "topogate demo: %s\n", cfg.error().message.c_str());
    return 2;
  }
  cfg->port = port;

  server::serve_hooks hooks;
  hooks.on_listening = [dir](unsigned short bound) {
    const std::string url = "https://127.0.0.1:" + std::to_string(bound);
    std::string env;
    env += "TOPOGATE_URL=" + url + "\n";
    env += "TOPOGATE_CA=" + dir + "/ca.crt\n";
    env += "TOPOGATE_TOKEN_FILE=" + dir + "/token\n";
    env += "TOPOGATE_CLIENT_CERT=" + dir + "/client.crt\n";
    env += "TOPOGATE_CLIENT_KEY=" + dir + "/client.key\n";
    if (const auto w =
            util::write_file_atomic(dir + "/demo.env", env, util::atomic_write_options(0644));
        !w) {
      std::fprintf(stderr, "topogate demo: %s\n", w.error().message.c_str());
    }
    std::printf(
        "\ntopogate demo is serving inventory \"demo\" on %s (files in %s)\n\n"
        "  set -a; . %s/demo.env; set +a\n\n"
        "  # the snapshot, with the bearer token / with the client certificate / as YAML\n"
        "  curl --cacert \"$TOPOGATE_CA\" -H \"Authorization: Bearer $(cat "
        "\"$TOPOGATE_TOKEN_FILE\")\" \"$TOPOGATE_URL/snapshots/demo\"\n"
        "  curl --cacert \"$TOPOGATE_CA\" --cert \"$TOPOGATE_CLIENT_CERT\" --key "
        "\"$TOPOGATE_CLIENT_KEY\" \"$TOPOGATE_URL/snapshot\"\n"
        "  curl --cacert \"$TOPOGATE_CA\" -H \"Authorization: Bearer $(cat "
        "\"$TOPOGATE_TOKEN_FILE\")\" -H 'Accept: application/yaml' "
        "\"$TOPOGATE_URL/snapshots/demo\"\n\n"
        "  # admission: an allowed and a denied TopologySource\n"
        "  curl --cacert \"$TOPOGATE_CA\" -H 'Content-Type: application/json' --data-binary "
        "@%s/review-allowed.json \"$TOPOGATE_URL/validate/topologysources\"\n"
        "  curl --cacert \"$TOPOGATE_CA\" -H 'Content-Type: application/json' --data-binary "
        "@%s/review-denied.json \"$TOPOGATE_URL/validate/topologysources\"\n\n"
        "  # what was accepted, and when (edit %s/snapshot.yaml to publish a new revision)\n"
        "  curl --cacert \"$TOPOGATE_CA\" -H \"Authorization: Bearer $(cat "
        "\"$TOPOGATE_TOKEN_FILE\")\" \"$TOPOGATE_URL/snapshots/demo/status\"\n\n"
        "  # health and metrics\n"
        "  curl --cacert \"$TOPOGATE_CA\" \"$TOPOGATE_URL/readyz?verbose\"\n"
        "  curl --cacert \"$TOPOGATE_CA\" \"$TOPOGATE_URL/metrics\"\n\n"
        "Press Ctrl-C to stop.\n",
        url.c_str(), dir.c_str(), dir.c_str(), dir.c_str(), dir.c_str(), dir.c_str());
    std::fflush(stdout);
  };
  hooks.dependencies = serve_dependencies;
  return server::serve(std::move(*cfg), hooks);
}

}  // namespace topogate::cli

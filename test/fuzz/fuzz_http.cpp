// The HTTP request path in process: Beast's request parser with the server's header and
// per-route body limits, then the router (routing, authentication, snapshots, pushes,
// admission, health, metrics) — everything a connection does between the TLS layer and the
// socket write.
// Properties beyond "no crash": a snapshot route never answers 2xx/304 without a valid
// credential; the router never answers a 3xx redirect (H1) nor 500; every status is a
// valid HTTP status.
#include <openssl/pem.h>
#include <unistd.h>

#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/parser.hpp>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <string_view>

#include "core/topology_source.hpp"
#include "fuzz_common.hpp"
#include "inventory/registry.hpp"
#include "server/auth.hpp"
#include "server/metrics.hpp"
#include "server/pki.hpp"
#include "server/router.hpp"

namespace {

using namespace topogate;
namespace fs = std::filesystem;
namespace http = boost::beast::http;

constexpr std::string_view source_yaml = R"(apiVersion: worker.gpustack.ai/v1
kind: TopologySource
metadata: {name: data-center}
spec:
  levels: [topology.gpustack.ai/region, topology.gpustack.ai/zone, topology.gpustack.ai/rack]
  configMap:
    configMapRef: {namespace: gpustack-system, name: topology-inventory}
    key: snapshot.yaml
    maxStaleness: 10m
)";

constexpr std::string_view snapshot_yaml = R"(apiVersion: topology.gpustack.ai/v1alpha1
revision: inventory-42
nodes:
  worker-a: {topology.gpustack.ai/region: region-a, topology.gpustack.ai/zone: zone-a, topology.gpustack.ai/rack: rack-01}
)";

// Header limit as the default server configuration; body limits per route as the server.
constexpr std::uint32_t header_limit = 16 * 1024;

struct world {
  fs::path dir;
  std::unique_ptr<inventory::registry> registry;
  server::metrics metrics;
  server::health_state health;
  server::router_context ctx;
  server::body_limits limits;
  X509* client = nullptr;
  X509* stranger = nullptr;

  world() {
    const fs::path base = fs::exists("/dev/shm") ? fs::path("/dev/shm") : fs::temp_directory_path();
    dir = base / ("topogate-fuzz-http-" + std::to_string(::getpid()));
    fs::create_directories(dir / "store");
    write("alpha.token", "alpha-old\nalpha-new\n");
    write("alpha-writer.token", "alpha-writer\n");
    write("push-writer.token", "push-writer\n");
    write("snapshot.yaml", snapshot_yaml);
    server::issued ca, other, leaf, stranger_leaf;
    fuzz::check(server::make_ca("fuzz CA", 30, ca, nullptr), "make CA");
    fuzz::check(server::make_ca("other CA", 30, other, nullptr), "make CA");
    fuzz::check(server::issue(ca, {"reader", "fuzz", {"reader.example"}, {}, false, 30}, leaf, nullptr), "issue");
    fuzz::check(server::issue(other, {"reader", "fuzz", {"reader.example"}, {}, false, 30}, stranger_leaf, nullptr),
                "issue");
    write("ca.crt", ca.cert_pem);
    client = load(leaf.cert_pem);
    stranger = load(stranger_leaf.cert_pem);

    inventory::registry_config rc;
    auto src = core::validate_topology_source_text(source_yaml);
    fuzz::check(src.ok(), "fuzz source valid", core::render_text(src.errors));
    for (const char* name : {"alpha", "beta", "push"}) {
      inventory::inventory_spec spec;
      spec.config.name = name;
      spec.config.source = src.source;
      spec.config.allow_empty_start = true;
      if (std::string_view(name) != "push") spec.snapshot_path = (dir / "snapshot.yaml").string();
      rc.inventories.push_back(spec);
    }
    rc.store.type = inventory::store_config::kind::file;
    rc.store.directory = (dir / "store").string();
    registry = std::make_unique<inventory::registry>(rc);
    registry->start();

    auto state = std::make_shared<server::auth_state>();
    auto load_set = [&](server::credential_files f, server::credential_set& out) {
      std::string error;
      fuzz::check(server::load_credentials(f, out, &error), "load credentials", error);
    };
    load_set({{path("alpha.token")}, {}, {}, {}}, state->inventories["alpha"].readers);
    load_set({{path("alpha-writer.token")}, {}, {}, {}}, state->inventories["alpha"].writers);
    load_set({{}, path("ca.crt"), {}, {}}, state->inventories["beta"].readers);
    load_set({{path("alpha.token")}, {}, {}, {}}, state->inventories["push"].readers);
    load_set({{path("push-writer.token")}, {}, {}, {}}, state->inventories["push"].writers);
    ctx.registry = registry.get();
    ctx.auth = state;
    ctx.m = &metrics;
    ctx.health = &health;
    health.listening = true;
    health.certificates_loaded = true;
  }
  ~world() {
    registry->stop();
    X509_free(client);
    X509_free(stranger);
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  std::string path(const std::string& name) const { return (dir / name).string(); }
  void write(const std::string& name, std::string_view data) const { std::ofstream(dir / name) << data; }
  static X509* load(const std::string& pem) {
    BIO* b = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
    X509* x = PEM_read_bio_X509(b, nullptr, nullptr, nullptr);
    BIO_free(b);
    return x;
  }
};

world& the_world() {
  static world* w = new world();  // never destroyed: libFuzzer exits without unwinding
  return *w;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  world& w = the_world();
  if (size < 1) return 0;
  // First byte: which client certificate the TLS layer saw (none, trusted, foreign).
  server::peer_certificate peer;
  if (data[0] % 3 == 1) peer = {w.client, nullptr, "CN=reader,O=fuzz"};
  if (data[0] % 3 == 2) peer = {w.stranger, nullptr, "CN=reader,O=fuzz"};
  boost::beast::string_view wire(reinterpret_cast<const char*>(data + 1), size - 1);

  http::request_parser<http::string_body> parser;
  parser.eager(true);
  parser.header_limit(header_limit);
  parser.body_limit(std::max(w.limits.admission, w.limits.push));
  boost::beast::error_code ec;
  std::size_t used = 0;
  while (!ec && used < wire.size() && !parser.is_done()) {
    const std::size_t n = parser.put(boost::asio::buffer(wire.data() + used, wire.size() - used), ec);
    if (ec == http::error::need_more) break;
    used += n;
    if (n == 0) break;
    if (!ec && parser.is_header_done() && !parser.is_done()) {
      const auto& hdr = parser.get();
      const std::size_t limit = server::body_limit(hdr.method(), hdr.target(), w.limits);
      if (const auto len = parser.content_length(); len && *len > limit) return 0;  // 413 at header time
      parser.body_limit(limit);
    }
  }
  if (ec == http::error::need_more && used == wire.size() && !parser.is_done()) parser.put_eof(ec);
  if (ec || !parser.is_done()) return 0;

  const server::request req = parser.release();
  server::request_info info;
  const server::response res = server::handle(req, peer, w.ctx, info);
  const unsigned status = res.result_int();
  fuzz::check(status >= 200 && status <= 599, "a valid status", std::to_string(status));
  fuzz::check(status < 300 || status >= 400 || status == 304, "never a redirect", std::to_string(status));
  fuzz::check(status != 500, "no internal error from the router", std::string(req.target()));

  // Authentication: a snapshot answer carrying data (2xx, 304) needs a valid credential.
  const std::string target(req.target());
  const bool snapshot_route = target.rfind("/snapshot", 0) == 0;
  if (snapshot_route && ((status >= 200 && status < 300) || status == 304)) {
    const auto auth = req[http::field::authorization];
    const bool known_token = auth.find("alpha-old") != std::string_view::npos ||
                             auth.find("alpha-new") != std::string_view::npos ||
                             auth.find("alpha-writer") != std::string_view::npos ||
                             auth.find("push-writer") != std::string_view::npos;
    const bool trusted_cert = peer.leaf == w.client;
    fuzz::check(known_token || trusted_cert, "snapshot route served without a credential",
                target + " " + std::to_string(status));
  }
  return 0;
}

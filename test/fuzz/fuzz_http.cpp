// The HTTP request path in process: the bytes of one connection go through Beast's request
// parser exactly as a session reads them (header limit, then the route's body limit decided
// from the header, Content-Length checked before any body byte, chunked bodies cut at the
// limit), then the router (routing, bearer/certificate authentication, snapshots, pushes,
// admission reviews, health, metrics), then Beast's serializer; pipelined keep-alive
// requests are answered one after the other, as on a connection.
// Input: byte 0 picks what the TLS layer saw and the listener (see `conditions`); the
// rest is the connection's byte stream.
// Properties beyond "no crash":
//   - the status is a valid HTTP status, never a redirect (H1) nor 500;
//   - a snapshot route answers 2xx/304 only to a credential valid for that inventory and
//     that access (reader or writer), decided here independently of server/auth.cpp;
//   - a 401 carries the Bearer challenge (RFC 6750 §3);
//   - the plain-HTTP listener serves only health and metrics;
//   - the serialized response parses back as the same response: same status, same header
//     fields, the same body, nothing after it (no CR/LF injected into a header value).
// The world (three inventories, credentials, a file store) is built once from real
// configuration objects, as serve does; nothing in the request path is replaced.
#include <openssl/pem.h>
#include <unistd.h>

#include <algorithm>
#include <boost/beast/core/buffers_to_string.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/serializer.hpp>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <string_view>

#include "admission/review.hpp"
#include "core/topology_source.hpp"
#include "fuzz_common.hpp"
#include "fuzz_inventory_files.hpp"
#include "inventory/registry.hpp"
#include "server/auth.hpp"
#include "server/metrics.hpp"
#include "server/pki.hpp"
#include "server/router.hpp"

namespace {

using namespace topogate;
namespace fs = std::filesystem;
namespace http = boost::beast::http;

// Limits of a valid server configuration (limits.headerBytes >= 1024), chosen small so
// that inputs under libFuzzer's -max_len=65536 reach every limit: the default body limits
// (7 MiB, 1 MiB) would never be hit.
constexpr std::uint32_t header_limit = 8 * 1024;
constexpr std::size_t admission_limit = 32 * 1024;
constexpr std::size_t push_limit = 32 * 1024;
// Requests answered per input: enough for pipelining to matter, bounded for speed.
constexpr int max_requests = 4;

// Who may do what, restated from the credential files the world writes; checked against
// the router's answers without calling server/auth.cpp.
constexpr std::string_view alpha_readers[] = {"alpha-old", "alpha-new", "alpha-writer"};
constexpr std::string_view alpha_writers[] = {"alpha-writer"};
constexpr std::string_view push_readers[] = {"alpha-old", "alpha-new", "push-writer"};
constexpr std::string_view push_writers[] = {"push-writer"};

struct world {
  fs::path dir;
  std::unique_ptr<inventory::registry> registry;
  server::metrics metrics;
  server::health_state health;
  admission::options admission;
  server::router_context ctx;
  server::body_limits limits;
  X509* client = nullptr;
  X509* stranger = nullptr;
  // FUZZ_HTTP_TRACE=1: one line per answered request (route pattern, status, identity),
  // to see which routes and outcomes a corpus reaches: fuzz_http -runs=0 CORPUS.
  const bool trace = std::getenv("FUZZ_HTTP_TRACE") != nullptr;

  world() {
    const fs::path base = fs::exists("/dev/shm") ? fs::path("/dev/shm") : fs::temp_directory_path();
    dir = base / ("topogate-fuzz-http-" + std::to_string(::getpid()));
    fs::create_directories(dir / "store");
    write("alpha.token", "alpha-old\nalpha-new\n");
    write("alpha-writer.token", "alpha-writer\n");
    write("push-writer.token", "push-writer\n");
    write("snapshot.yaml", fuzz::inventory_snapshot_yaml);
    const server::issued ca = fuzz::value_of(server::make_ca("fuzz CA", 30), "make CA");
    const server::issued other = fuzz::value_of(server::make_ca("other CA", 30), "make CA");
    const server::issued leaf = fuzz::value_of(
        server::issue(ca, {"reader", "fuzz", {"reader.example"}, {}, false, 30}), "issue");
    const server::issued stranger_leaf = fuzz::value_of(
        server::issue(other, {"reader", "fuzz", {"reader.example"}, {}, false, 30}), "issue");
    write("ca.crt", ca.cert_pem);
    client = load(leaf.cert_pem);
    stranger = load(stranger_leaf.cert_pem);

    inventory::registry_config rc;
    auto src = core::validate_topology_source_text(fuzz::inventory_source_yaml);
    fuzz::check(src.ok(), "fuzz source valid", core::render_text(src.errors));
    for (const char* name : {"alpha", "beta", "push"}) {
      inventory::inventory_spec spec;
      spec.config.name = name;
      spec.config.source = src.source;
      spec.config.allow_empty_start = true;
      if (std::string_view(name) != "push") {
        spec.kind = inventory::source_kind::file;
        spec.snapshot_path = (dir / "snapshot.yaml").string();
      }
      rc.inventories.push_back(spec);
    }
    rc.store.type = inventory::store_config::kind::file;
    rc.store.directory = (dir / "store").string();
    // As serve wires it (server/serve.cpp), minus the log lines: one per accepted push
    // would dominate the execution time.
    inventory::registry_observer obs;
    obs.on_attempt = [this](const std::string& inv, const inventory::attempt& a) {
      metrics.reconcile_attempt(inv, a.accepted);
      metrics.profile_impact(inv, a);
    };
    obs.on_log = [](std::string_view, std::string_view, std::string_view) {};
    registry = std::make_unique<inventory::registry>(rc, inventory::system_clock(), std::move(obs));
    registry->start();

    auto state = std::make_shared<server::auth_state>();
    auto load_set = [&](server::credential_files f, server::credential_set& out) {
      out = fuzz::value_of(server::load_credentials(f), "load credentials");
    };
    load_set({{path("alpha.token")}, {}, {}, {}}, state->inventories["alpha"].readers);
    load_set({{path("alpha-writer.token")}, {}, {}, {}}, state->inventories["alpha"].writers);
    load_set({{}, path("ca.crt"), {}, {}}, state->inventories["beta"].readers);
    load_set({{path("alpha.token")}, {}, {}, {}}, state->inventories["push"].readers);
    load_set({{path("push-writer.token")}, {}, {}, {}}, state->inventories["push"].writers);

    // As the listener wires them from limits.* (server/listener.cpp).
    limits.admission = admission_limit;
    limits.push = push_limit;
    admission.max_body_bytes = admission_limit;
    ctx.registry = registry.get();
    ctx.auth = state;
    ctx.m = &metrics;
    ctx.health = &health;
    ctx.admission = &admission;
    ctx.push_body_bytes = push_limit;
    health.listening = true;
    health.certificates_loaded = true;
  }
  std::string path(const std::string& name) const { return (dir / name).string(); }
  void write(const std::string& name, std::string_view data) const {
    std::ofstream(dir / name) << data;
  }
  static X509* load(const std::string& pem) {
    BIO* b = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
    X509* x = PEM_read_bio_X509(b, nullptr, nullptr, nullptr);
    BIO_free(b);
    return x;
  }
};

world* the_instance = nullptr;

world& the_world() {
  if (!the_instance) {
    // Never destroyed (libFuzzer exits without unwinding); at a normal exit the registry's
    // threads are stopped and the directory removed, so runs leave nothing in /dev/shm.
    the_instance = new world();
    std::atexit([] {
      the_instance->registry->stop();
      std::error_code ec;
      fs::remove_all(the_instance->dir, ec);
    });
  }
  return *the_instance;
}

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return (x | 0x20) == (y | 0x20);
         });
}

// The token of `Authorization: Bearer <token>` (RFC 6750 §2.1), "" for anything else.
std::string_view presented_token(std::string_view authorization) {
  constexpr std::string_view scheme = "Bearer ";
  if (authorization.size() <= scheme.size() ||
      !iequals(authorization.substr(0, scheme.size()), scheme))
    return {};
  std::string_view t = authorization.substr(scheme.size());
  while (!t.empty() && (t.front() == ' ' || t.front() == '\t')) t.remove_prefix(1);
  while (!t.empty() && (t.back() == ' ' || t.back() == '\t')) t.remove_suffix(1);
  return t;
}

template <std::size_t N>
bool one_of(std::string_view token, const std::string_view (&set)[N]) {
  return !token.empty() && std::find(std::begin(set), std::end(set), token) != std::end(set);
}

// May this request read (or, for a PUT, write) inventory `name`?
bool entitled(std::string_view name, bool write, std::string_view token, bool trusted_cert) {
  if (name == "alpha") return write ? one_of(token, alpha_writers) : one_of(token, alpha_readers);
  if (name == "push") return write ? one_of(token, push_writers) : one_of(token, push_readers);
  if (name == "beta") return !write && trusted_cert;
  return false;
}

void check_authorization(const server::request& req, unsigned status, bool trusted_cert) {
  const std::string_view target = req.target();
  const std::string_view path = target.substr(0, target.find('?'));
  if (path != "/snapshot" && !path.starts_with("/snapshots/")) return;
  const bool served = (status >= 200 && status < 300) || status == 304;
  if (!served) return;
  const std::string detail = std::string(req.method_string()) + " " + std::string(target) + " -> " +
                             std::to_string(status);
  // Three inventories: /snapshot has no default to serve.
  fuzz::check(path != "/snapshot", "/snapshot served with several inventories", detail);
  std::string_view rest = path.substr(std::string_view("/snapshots/").size());
  const std::string_view name = rest.substr(0, rest.find('/'));
  const std::string_view token = presented_token(req[http::field::authorization]);
  const bool write = req.method() == http::verb::put;
  fuzz::check(entitled(name, write, token, trusted_cert),
              "snapshot route served without a valid credential", detail);
}

// Serializes `res` with Beast's serializer and parses it back as a client would; the TLS
// session's own header rendering (server::render_header) must write the same bytes as the
// serializer's header part.
void check_wire_form(server::response& res, bool head, const std::string& detail) {
  std::string ours;
  server::render_header(res, ours);
  std::string wire;
  http::response_serializer<server::shared_body> sr{res};
  boost::beast::error_code ec;
  while (!sr.is_done() && !ec) {
    sr.next(ec, [&](boost::beast::error_code&, const auto& buffers) {
      wire += boost::beast::buffers_to_string(buffers);
      sr.consume(boost::asio::buffer_size(buffers));
    });
  }
  fuzz::check(!ec, "response serializes", ec.message());
  fuzz::check(
      wire.compare(0, ours.size(), ours) == 0 && wire.size() - ours.size() == res.body().size(),
      "render_header matches the serializer's header", detail + "\n" + ours + "\n---\n" + wire);

  http::response_parser<http::string_body> back;
  back.eager(true);
  back.body_limit(64u << 20);
  if (head) back.skip(true);
  const std::size_t used = back.put(boost::asio::buffer(wire), ec);
  fuzz::check(!ec && back.is_done(), "response parses back",
              detail + ": " + ec.message() + "\n" + wire);
  fuzz::check(used == wire.size(), "nothing after the response", detail + "\n" + wire);
  const auto& msg = back.get();
  fuzz::check(msg.result_int() == res.result_int(), "status survives the wire", detail);
  fuzz::check(std::distance(msg.begin(), msg.end()) == std::distance(res.begin(), res.end()),
              "header fields survive the wire (CR/LF in a value?)", detail + "\n" + wire);
  if (!head) fuzz::check(msg.body() == res.body().str(), "body survives the wire", detail);
}

// What byte 0 selects.
struct conditions {
  int peer;       // 0: no client certificate, 1: one from the inventory CA, 2: one from another CA
  bool plain;     // the plain-HTTP health listener instead of the TLS one
  bool draining;  // after SIGTERM
};

conditions decode(std::uint8_t b) { return {b % 3, (b / 3) % 2 == 1, (b / 6) % 2 == 1}; }

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  world& w = the_world();
  if (size < 1) return 0;
  const conditions c = decode(data[0]);
  server::peer_certificate peer;
  if (c.peer == 1) peer = {w.client, nullptr, "CN=reader,O=fuzz"};
  if (c.peer == 2) peer = {w.stranger, nullptr, "CN=reader,O=fuzz"};
  w.health.draining = c.draining;
  server::router_context ctx = w.ctx;
  ctx.listener = c.plain ? server::listener_kind::plain_health : server::listener_kind::tls;
  std::string_view wire(reinterpret_cast<const char*>(data + 1), size - 1);

  for (int n = 0; n < max_requests && !wire.empty(); ++n) {
    // As http_session::do_read / on_header and the body read (server/http_session.hpp).
    http::request_parser<http::string_body> parser;
    parser.header_limit(header_limit);
    parser.body_limit(std::max(w.limits.admission, w.limits.push));
    boost::beast::error_code ec;
    std::size_t used = 0;
    bool route_limit_set = false;
    while (!parser.is_done()) {
      // No byte left, or none the parser can use without more: the peer closed mid-request.
      if (used == wire.size()) return 0;
      const std::size_t k =
          parser.put(boost::asio::buffer(wire.data() + used, wire.size() - used), ec);
      used += k;
      if (ec == http::error::need_more || (!ec && k == 0)) {
        if (k == 0) return 0;
        ec = {};
      }
      if (ec) return 0;  // 400, 413 or 431 from the session, then the connection closes
      if (parser.is_header_done() && !route_limit_set) {
        route_limit_set = true;
        const auto& hdr = parser.get();
        const std::size_t limit = server::body_limit(hdr.method(), hdr.target(), w.limits);
        if (const auto len = parser.content_length(); len && *len > limit)
          return 0;  // 413 at header time
        parser.body_limit(limit);
        parser.eager(true);  // http::async_read reads the body eagerly
      }
    }
    wire.remove_prefix(used);

    const server::request req = parser.release();
    server::request_info info;
    server::response res = server::handle(req, peer, ctx, info);
    const unsigned status = res.result_int();
    const std::string detail = std::string(req.method_string()) + " " + std::string(req.target());
    fuzz::check(status >= 200 && status <= 599, "a valid status",
                detail + " -> " + std::to_string(status));
    fuzz::check(status < 300 || status >= 400 || status == 304, "never a redirect", detail);
    fuzz::check(status != 500, "no internal error from the router", detail);
    if (status == 401) {
      fuzz::check(res[http::field::www_authenticate].starts_with("Bearer"),
                  "401 carries the challenge", detail);
    }
    if (c.plain) {
      const std::string_view t = req.target();
      const std::string_view path = t.substr(0, t.find('?'));
      const bool probe =
          path == "/healthz" || path == "/livez" || path == "/readyz" || path == "/metrics";
      fuzz::check(probe || status == 404, "plain listener serves only probes and metrics", detail);
    }
    if (w.trace) {
      std::fprintf(stderr, "fuzz_http: peer=%d plain=%d draining=%d %s %s -> %u (%s)\n", c.peer,
                   c.plain, c.draining, std::string(req.method_string()).c_str(),
                   info.route.c_str(), status, info.identity.c_str());
    }
    check_authorization(req, status, c.peer == 1);
    check_wire_form(res, req.method() == http::verb::head, detail);
    if (!req.keep_alive()) break;
  }
  return 0;
}

#include "kube/client.hpp"

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "core/syntax.hpp"
#include "kube/limits.hpp"
#include "kube/tls_conn.hpp"
#include "util/file.hpp"
#include "util/wipe.hpp"

// GCC 12 at -O3 reports -Wnull-dereference inside Asio's scheduler after inlining (no
// dereference of null is possible there); keep the warning on for our own code.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wnull-dereference"
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#pragma GCC diagnostic pop

#include <netdb.h>
#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <condition_variable>
#include <limits>
#include <memory>
#include <optional>
#include <sstream>
#include <thread>

namespace topogate::kube {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;

namespace {

constexpr auto as_tuple = asio::as_tuple(asio::use_awaitable);

// getaddrinfo for TCP, as numeric addresses in the resolver's order.
core::result<std::vector<std::string>> system_lookup(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;  // no AI_ADDRCONFIG, as Asio's resolver: "localhost" in a
                                    // namespace with only a loopback interface still resolves
  addrinfo* res = nullptr;
  const int rc = ::getaddrinfo(host.c_str(), nullptr, &hints, &res);
  if (rc != 0)
    return core::fail(core::errc::unavailable, "resolve " + host + ": " + ::gai_strerror(rc));
  std::vector<std::string> out;
  for (const addrinfo* a = res; a != nullptr; a = a->ai_next) {
    std::array<char, NI_MAXHOST> buf{};
    if (::getnameinfo(a->ai_addr, a->ai_addrlen, buf.data(), buf.size(), nullptr, 0,
                      NI_NUMERICHOST) == 0 &&
        std::find(out.begin(), out.end(), buf.data()) == out.end()) {
      out.emplace_back(buf.data());
    }
  }
  ::freeaddrinfo(res);
  if (out.empty()) return core::fail(core::errc::unavailable, "resolve " + host + ": no address");
  return out;
}

// Lookups abandoned at their deadline keep a thread until the resolver gives up: a bound on
// them keeps a dead name server from piling threads up, one per retry.
constexpr int max_pending_lookups = 8;
std::atomic<int> pending_lookups{0};

}  // namespace

core::result<std::vector<std::string>> resolve_within(
    const std::string& host, std::chrono::steady_clock::time_point deadline,
    const std::atomic<bool>& cancelled, const lookup_fn& lookup) {
  boost::system::error_code ec;
  const auto ip = asio::ip::make_address(host, ec);
  if (!ec) return std::vector<std::string>{ip.to_string()};
  struct shared {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    core::result<std::vector<std::string>> answer = core::fail(core::errc::unavailable, "");
  };
  if (pending_lookups.fetch_add(1) >= max_pending_lookups) {
    pending_lookups.fetch_sub(1);
    return core::fail(core::errc::unavailable,
                      "resolve " + host + ": " + std::to_string(max_pending_lookups) +
                          " lookups are still waiting for the name server");
  }
  auto state = std::make_shared<shared>();
  try {
    std::thread([state, host, lookup] {
      auto answer = lookup ? lookup(host) : system_lookup(host);
      {
        std::lock_guard lk(state->mu);
        state->answer = std::move(answer);
        state->done = true;
      }
      state->cv.notify_all();
      pending_lookups.fetch_sub(1);
    }).detach();
  } catch (const std::system_error& e) {
    pending_lookups.fetch_sub(1);
    return core::fail(core::errc::unavailable, "resolve " + host + ": " + e.what());
  }
  std::unique_lock lk(state->mu);
  // In slices, so that cancel() (which cannot reach this wait) is seen within 50 ms.
  while (!state->done && !cancelled.load()) {
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) break;
    state->cv.wait_until(lk, std::min(deadline, now + std::chrono::milliseconds(50)));
  }
  if (state->done) return std::move(state->answer);
  if (cancelled.load()) return core::fail(core::errc::unavailable, "cancelled");
  return core::fail(core::errc::unavailable,
                    "resolve " + host + ": no answer from the name server in time");
}

std::string url_encode(std::string_view s) {
  static constexpr char hex[] = "0123456789ABCDEF";
  std::string out;
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if ((u >= 'a' && u <= 'z') || (u >= 'A' && u <= 'Z') || (u >= '0' && u <= '9') || c == '-' ||
        c == '_' || c == '.' || c == '~') {
      out.push_back(c);
    } else {
      out.push_back('%');
      out.push_back(hex[u >> 4]);
      out.push_back(hex[u & 15]);
    }
  }
  return out;
}

namespace {

// What one call authenticates with, gathered just before it.
struct call_credentials {
  std::string token;
  std::string cert_pem, key_pem;  // empty: no client certificate
};

core::result<call_credentials> gather_credentials(const endpoint& ep, bool refresh) {
  call_credentials c;
  if (!ep.token_file.empty()) {
    auto read = util::read_file(ep.token_file, max_credential_bytes);
    if (!read) return std::move(read).error();
    // strings.TrimSpace, as client-go reads a token file; the file's copy is wiped.
    c.token.assign(core::trim_space(*read));
    util::wipe(*read);
  } else {
    c.token = ep.token;
  }
  if (!ep.client_cert_file.empty() || !ep.client_key_file.empty()) {
    auto cert = util::read_file(ep.client_cert_file, max_credential_bytes);
    if (!cert) return std::move(cert).error();
    auto key = util::read_file(ep.client_key_file, max_credential_bytes);
    if (!key) return std::move(key).error();
    c.cert_pem = std::move(*cert);
    c.key_pem = std::move(*key);
  } else {
    c.cert_pem = ep.client_cert_pem;
    c.key_pem = ep.client_key_pem;
  }
  if (ep.credentials) {
    auto got = ep.credentials(refresh);
    if (!got) return std::move(got).error();
    if (!got->token.empty()) c.token = std::move(got->token);
    if (!got->client_cert_pem.empty()) {
      c.cert_pem = std::move(got->client_cert_pem);
      c.key_pem = std::move(got->client_key_pem);
    }
  }
  return c;
}

struct bio_free_fn {
  void operator()(BIO* b) const noexcept { BIO_free(b); }
};
struct x509_free_fn {
  void operator()(X509* x) const noexcept { X509_free(x); }
};
struct pkey_free_fn {
  void operator()(EVP_PKEY* k) const noexcept { EVP_PKEY_free(k); }
};
using bio_ptr = std::unique_ptr<BIO, bio_free_fn>;

bio_ptr memory_bio(std::string_view pem) {
  return bio_ptr(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
}

// An encrypted key has no passphrase to give here: fail instead of OpenSSL's default of
// prompting on the terminal.
int no_passphrase(char*, int, int, void*) { return 0; }

// The certificate (then its chain) and the key, from memory; the messages name what is
// wrong, never the bytes.
core::result<void> load_identity(SSL_CTX* ctx, std::string_view cert_pem,
                                 std::string_view key_pem) {
  const auto bad = [](const std::string& what) {
    ERR_clear_error();
    return core::fail(core::errc::invalid_argument, what);
  };
  if (cert_pem.empty() != key_pem.empty())
    return bad(cert_pem.empty() ? "a client key without its certificate"
                                : "a client certificate without its key");
  if (cert_pem.size() > max_credential_bytes || key_pem.size() > max_credential_bytes)
    return bad("the client certificate or key is larger than 1 MiB");
  bio_ptr cbio = memory_bio(cert_pem);
  if (!cbio) return bad("cannot read the client certificate");
  std::unique_ptr<X509, x509_free_fn> leaf(
      PEM_read_bio_X509_AUX(cbio.get(), nullptr, no_passphrase, nullptr));
  if (!leaf) return bad("the client certificate is not a PEM certificate");
  if (SSL_CTX_use_certificate(ctx, leaf.get()) != 1)
    return bad("the client certificate cannot be used");
  SSL_CTX_clear_chain_certs(ctx);
  while (X509* extra = PEM_read_bio_X509(cbio.get(), nullptr, no_passphrase, nullptr)) {
    if (SSL_CTX_add0_chain_cert(ctx, extra) != 1) {
      X509_free(extra);
      return bad("the client certificate's chain cannot be used");
    }
  }
  ERR_clear_error();  // the end of the chain reads as "no start line"
  bio_ptr kbio = memory_bio(key_pem);
  if (!kbio) return bad("cannot read the client key");
  std::unique_ptr<EVP_PKEY, pkey_free_fn> key(
      PEM_read_bio_PrivateKey(kbio.get(), nullptr, no_passphrase, nullptr));
  if (!key) return bad("the client key is not an unencrypted PEM private key");
  if (SSL_CTX_use_PrivateKey(ctx, key.get()) != 1 || SSL_CTX_check_private_key(ctx) != 1)
    return bad("the client key does not match the client certificate");
  return {};
}

// Builds a verifying client context for one call (the CA file and the client certificate may
// rotate).
core::result<void> make_context(const endpoint& ep, const call_credentials& creds,
                                ssl::context& ctx) {
  boost::system::error_code ec;
  ctx.set_verify_mode(ssl::verify_peer, ec);
  if (!ep.ca_pem.empty()) {
    ctx.add_certificate_authority(asio::buffer(ep.ca_pem), ec);
    if (ec) return core::fail(core::errc::invalid_argument, "load the inline CA: " + ec.message());
  } else {
    ctx.load_verify_file(ep.ca_file, ec);
    if (ec) return core::fail(core::errc::io, "load CA " + ep.ca_file + ": " + ec.message());
  }
  SSL_CTX_set_min_proto_version(ctx.native_handle(), TLS1_2_VERSION);
  // OpenSSL's copy of each record it decrypts is wiped once read (answers may echo a secret).
  SSL_CTX_set_options(ctx.native_handle(), SSL_OP_CLEANSE_PLAINTEXT);
  if (!creds.cert_pem.empty() || !creds.key_pem.empty()) {
    if (auto r = load_identity(ctx.native_handle(), creds.cert_pem, creds.key_pem); !r) return r;
  }
  return {};
}

// The names a session verifies the API's certificate by, and its SNI.
core::result<void> prepare_session(const endpoint& ep, SSL* ssl_handle) {
  X509_VERIFY_PARAM* param = SSL_get0_param(ssl_handle);
  // tls-server-name: the API is reached by one name (an IP, a tunnel) and its certificate
  // carries another; that name is verified and sent as SNI.
  const std::string& name = ep.tls_server_name.empty() ? ep.host : ep.tls_server_name;
  boost::system::error_code ec;
  static_cast<void>(asio::ip::make_address(name, ec));
  if (!ec) {
    // In-cluster the API is reached by IP (KUBERNETES_SERVICE_HOST): check the IP SAN.
    if (X509_VERIFY_PARAM_set1_ip_asc(param, name.c_str()) != 1) {
      return core::fail(core::errc::internal, "cannot verify " + name);
    }
  } else {
    X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
    if (X509_VERIFY_PARAM_set1_host(param, name.c_str(), 0) != 1 ||
        SSL_ctrl(ssl_handle, SSL_CTRL_SET_TLSEXT_HOSTNAME, TLSEXT_NAMETYPE_host_name,
                 const_cast<char*>(name.c_str())) != 1) {
      return core::fail(core::errc::internal, "cannot verify " + name);
    }
  }
  return {};
}

// The endpoint's port, 1 to 65535.
core::result<unsigned short> api_port(const endpoint& ep) {
  unsigned long port = 0;
  if (!ep.port.empty() && ep.port.size() <= 5 &&
      std::all_of(ep.port.begin(), ep.port.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    port = std::stoul(ep.port);
  }
  if (port == 0 || port > 65535)
    return core::fail(core::errc::invalid_argument, "bad API port " + ep.port);
  return static_cast<unsigned short>(port);
}

// `addresses`: resolve_within's answer for ep.host.
asio::awaitable<core::result<void>> connect(const endpoint& ep,
                                            const std::vector<std::string>& addresses,
                                            ssl::stream<beast::tcp_stream>& stream,
                                            std::chrono::steady_clock::time_point deadline) {
  const auto port = api_port(ep);
  if (!port) co_return port.error();
  std::vector<tcp::endpoint> endpoints;
  boost::system::error_code pec;
  for (const auto& a : addresses) {
    const auto ip = asio::ip::make_address(a, pec);
    if (!pec) endpoints.emplace_back(ip, *port);
  }
  if (endpoints.empty())
    co_return core::fail(core::errc::unavailable, "resolve " + ep.host + ": no address");
  beast::get_lowest_layer(stream).expires_at(deadline);
  auto [cec, endpoint] =
      co_await beast::get_lowest_layer(stream).async_connect(endpoints, as_tuple);
  if (cec)
    co_return core::fail(core::errc::unavailable,
                         "connect " + ep.host + ":" + ep.port + ": " + cec.message());
  auto [hec] = co_await stream.async_handshake(ssl::stream_base::client, as_tuple);
  if (hec)
    co_return core::fail(core::errc::unavailable,
                         "TLS handshake with " + ep.host + ": " + hec.message());
  co_return core::result<void>{};
}

template <class Body>
void set_common(http::request<Body>& req, const endpoint& ep, const std::string& token,
                std::string_view accept) {
  req.set(http::field::host, ep.host);
  req.set(http::field::user_agent, "topogate");
  req.set(http::field::accept, accept);
  if (!token.empty()) req.set(http::field::authorization, "Bearer " + token);
}

}  // namespace

core::result<void> check_client_identity(std::string_view cert_pem, std::string_view key_pem) {
  ssl::context ctx(ssl::context::tls_client);
  return load_identity(ctx.native_handle(), cert_pem, key_pem);
}

namespace {

core::error cancelled_error() { return core::fail(core::errc::unavailable, "cancelled"); }

// What kept a call from being made or answered: always unavailable (a credential file that
// cannot be read, an exec plugin that fails, a CA that does not load included), with its text.
core::error no_answer(core::error e) {
  e.code = core::errc::unavailable;
  return e;
}

// A watch, on a connection of its own (tls_conn.hpp): the request, the answer's head, then
// for a 200 every complete line of the body to `on_line`, for another status the body (up to
// 1 MiB) into `out.body`. Fails (unavailable) when no answer began; `out.broken` says why a
// stream that began ended early. The body is silent for at most `idle`.
core::result<void> watch_exchange(const endpoint& ep, tls_conn& conn, SSL_CTX* ctx,
                                  const std::atomic<bool>& cancelled, const std::string& token,
                                  const std::string& target, std::chrono::seconds idle,
                                  std::chrono::milliseconds read_pace, std::string_view accept,
                                  const std::function<bool(std::string_view)>& on_line,
                                  stream_response& out) {
  using clock = tls_conn::clock;
  const auto connect_deadline = clock::now() + std::chrono::seconds(10);
  auto addresses = resolve_within(ep.host, connect_deadline, cancelled);
  if (!addresses) return std::move(addresses).error();
  const auto port = api_port(ep);
  if (!port) return no_answer(port.error());
  if (auto c = conn.connect(*addresses, *port, connect_deadline); !c) {
    if (c.error().message == "cancelled") return cancelled_error();
    return core::fail(core::errc::unavailable,
                      "connect " + ep.host + ":" + ep.port + ": " + c.error().message);
  }
  const auto prepare = [&](SSL* s) {
    // A watch carries a small record per event for hours: OpenSSL keeps its read buffer rather
    // than freeing and reallocating it for each record (each record's plaintext is still wiped
    // once read, SSL_OP_CLEANSE_PLAINTEXT), and reads ahead, so that a record is one recv.
    SSL_clear_mode(s, SSL_MODE_RELEASE_BUFFERS);
    SSL_set_read_ahead(s, 1);
    return prepare_session(ep, s);
  };
  if (auto h = conn.handshake(ctx, prepare, connect_deadline); !h) {
    if (h.error().message == "cancelled") return cancelled_error();
    return core::fail(core::errc::unavailable,
                      "TLS handshake with " + ep.host + ": " + h.error().message);
  }
  std::string head;
  {
    http::request<http::empty_body> req{http::verb::get, target, 11};
    set_common(req, ep, token, accept);
    std::ostringstream os;
    os << req.base();
    head = os.str();
  }
  const auto sent = conn.write_all(head, clock::now() + std::chrono::seconds(10));
  if (sent.st == tls_conn::status::cancelled) return cancelled_error();
  if (sent.st != tls_conn::status::ok)
    return core::fail(
        core::errc::unavailable,
        "write: " + (sent.st == tls_conn::status::timeout ? "timed out" : sent.error));

  // What one read could not end with: the text of `broken` or of the failure. A timeout is
  // `timed_out`: the head's deadline or the body's idle limit.
  const auto read_failure = [](const tls_conn::outcome& o, const char* timed_out) -> std::string {
    switch (o.st) {
      case tls_conn::status::timeout:
        return timed_out;
      case tls_conn::status::cancelled:
        return "cancelled";
      case tls_conn::status::eof:
        return "read: end of stream";
      default:
        return "read: " + o.error;
    }
  };
  beast::flat_buffer buf;
  http::response_parser<http::buffer_body> parser;
  parser.body_limit(std::numeric_limits<std::uint64_t>::max());
  std::array<char, 65536> chunk{};
  constexpr std::size_t read_size = 65536;
  const auto header_deadline = clock::now() + idle;
  while (!parser.is_header_done()) {
    const auto got = conn.read_some(static_cast<char*>(buf.prepare(read_size).data()), read_size,
                                    header_deadline);
    if (got.st == tls_conn::status::cancelled) return cancelled_error();
    if (got.st != tls_conn::status::ok)
      return core::fail(core::errc::unavailable, read_failure(got, "read: timed out"));
    buf.commit(got.bytes);
    boost::system::error_code ec;
    buf.consume(parser.put(buf.data(), ec));
    if (ec && ec != http::error::need_more)
      return core::fail(core::errc::unavailable, "read: " + ec.message());
  }
  out.status = static_cast<int>(parser.get().result_int());
  // The body's reads are paced, the head's are not: the answer begins as soon as it comes.
  conn.set_read_pace(read_pace);

  // The body: the bytes already read first, then a read whenever the parser needs more. A
  // stream silent for `idle` is cut then.
  std::string pending;
  auto last_read = clock::now();
  bool need_read = buf.size() == 0;
  while (!parser.is_done()) {
    boost::system::error_code ec;
    if (need_read) {
      const auto got = conn.read_some(static_cast<char*>(buf.prepare(read_size).data()), read_size,
                                      last_read + idle);
      if (got.st == tls_conn::status::eof && parser.got_some()) {
        parser.put_eof(ec);  // a body cut short is partial_message
        if (!ec) break;
        out.broken = "read: " + ec.message();
        return {};
      }
      if (got.st != tls_conn::status::ok) {
        out.broken = read_failure(got, "watch idle timeout");
        return {};
      }
      buf.commit(got.bytes);
      last_read = clock::now();
    }
    parser.get().body().data = chunk.data();
    parser.get().body().size = chunk.size();
    buf.consume(parser.put(buf.data(), ec));
    need_read = ec == http::error::need_more || buf.size() == 0;
    if (ec == http::error::need_more || ec == http::error::need_buffer) ec = {};
    const auto got = chunk.size() - parser.get().body().size;
    if (out.status != 200) {
      if (out.body.size() < (1u << 20)) out.body.append(chunk.data(), got);
    } else {
      pending.append(chunk.data(), got);
      std::size_t start = 0;
      for (auto nl = pending.find('\n'); nl != std::string::npos; nl = pending.find('\n', start)) {
        const std::string_view line(pending.data() + start, nl - start);
        start = nl + 1;
        if (!line.empty() && !on_line(line)) return {};
      }
      pending.erase(0, start);
      if (pending.size() > max_answer_bytes) {
        out.broken = "watch event too large";
        return {};
      }
    }
    if (ec) {
      out.broken = "read: " + ec.message();
      return {};
    }
  }
  if (!pending.empty() && out.status == 200) on_line(pending);
  return {};
}

}  // namespace

// A connection a reuse (client::reuse) keeps between GETs: its I/O context, its TLS context
// (with the credentials it was opened with) and its stream.
struct client::kept_connection {
  asio::io_context ioc{1};
  ssl::context ctx{ssl::context::tls_client};
  std::optional<ssl::stream<beast::tcp_stream>> stream;
};

client::client(endpoint ep) : ep_(std::move(ep)) {}
client::~client() = default;

void client::end_reuse() {
  reuse_ = false;
  std::unique_ptr<kept_connection> conn = std::move(kept_);
  if (!conn) return;
  {
    std::lock_guard lk(mu_);
    if (cancelled_.load()) return;
    active_ = &conn->ioc;
  }
  // close_notify, within 1 s: a peer that has gone changes nothing.
  conn->ioc.restart();
  beast::get_lowest_layer(*conn->stream).expires_after(std::chrono::seconds(1));
  asio::co_spawn(
      conn->ioc,
      [&]() -> asio::awaitable<void> { co_await conn->stream->async_shutdown(as_tuple); },
      asio::detached);
  conn->ioc.run();
  std::lock_guard lk(mu_);
  active_ = nullptr;
}

// Every call's setup, once: the credentials gathered (the exec plugin asked again when
// `refresh`), a verifying TLS context and stream, the call registered for cancel(), the API's
// addresses looked up and connected to by `deadline`; then `exchange` (a coroutine
// on the connected stream, the call's bearer token and `info`) makes the request and reads the
// answer into wherever its caller wants it. A connection a reuse kept takes the call instead
// (info.reused), unless the credentials are being asked again; the exchange says whether the
// connection may be kept for the next (info.keep).
template <class Exchange>
core::result<void> client::call(bool refresh, std::chrono::steady_clock::time_point deadline,
                                call_info& info, Exchange&& exchange) {
  info = {.deadline = deadline};
  if (cancelled_.load()) return cancelled_error();
  auto creds = gather_credentials(ep_, refresh);
  if (!creds) return no_answer(std::move(creds).error());
  // A 401 asks the credentials again: the kept connection may carry an old client certificate.
  std::unique_ptr<kept_connection> conn = std::move(kept_);
  if (refresh) conn.reset();
  info.reused = conn != nullptr;
  if (info.reused) {
    conn->ioc.restart();
  } else {
    conn = std::make_unique<kept_connection>();
    if (auto r = make_context(ep_, *creds, conn->ctx); !r) return no_answer(std::move(r).error());
    conn->stream.emplace(conn->ioc, conn->ctx);
    if (auto r = prepare_session(ep_, conn->stream->native_handle()); !r)
      return no_answer(std::move(r).error());
  }
  {
    std::lock_guard lk(mu_);
    if (cancelled_.load()) return cancelled_error();
    active_ = &conn->ioc;
  }
  std::optional<core::result<void>> out;
  core::result<std::vector<std::string>> addresses = std::vector<std::string>{};
  if (!info.reused) addresses = resolve_within(ep_.host, deadline, cancelled_);
  asio::co_spawn(
      conn->ioc,
      [&]() -> asio::awaitable<void> {
        if (!addresses) {
          out = addresses.error();
          co_return;
        }
        if (!info.reused) {
          if (auto c = co_await connect(ep_, *addresses, *conn->stream, deadline); !c) {
            out = no_answer(std::move(c).error());
            co_return;
          }
        }
        out = co_await exchange(*conn->stream, creds->token, info);
      },
      asio::detached);
  conn->ioc.run();
  {
    std::lock_guard lk(mu_);
    active_ = nullptr;
  }
  // Stopped by cancel() before the exchange ended.
  if (!out) return cancelled_error();
  if (info.keep) kept_ = std::move(conn);
  return std::move(*out);
}

core::result<response> client::request(std::string_view method, const std::string& target,
                                       const std::string& body, std::chrono::milliseconds timeout,
                                       std::string_view accept) {
  const http::verb verb = http::string_to_verb(method);
  // Only a GET is sent on a kept connection: it is the one request that may be sent again
  // when the server turns out to have closed that connection.
  const bool may_keep = verb == http::verb::get;
  response answer;
  const auto exchange = [&](ssl::stream<beast::tcp_stream>& stream, const std::string& token,
                            call_info& info) -> asio::awaitable<core::result<void>> {
    http::request<http::string_body> req{verb, target, 11};
    beast::flat_buffer buf;
    http::response_parser<http::string_body> parser;
    // A call may carry someone else's secret (a TokenReview's token, and the API's echo of
    // it): the request body, the read buffer and an answer not handed out are wiped however
    // the call ends. The answer's room is reserved so that a small answer is never
    // reallocated (which would free a copy unwiped).
    const util::wiped_at_exit wipe_request{req.body()};
    const util::wiped_at_exit wipe_buffer{buf};
    const util::wiped_at_exit wipe_answer{parser.get().body()};
    set_common(req, ep_, token, accept);
    if (!body.empty()) {
      req.set(http::field::content_type, "application/json");
      req.body() = body;
    }
    req.prepare_payload();
    const auto deadline = info.deadline;
    beast::get_lowest_layer(stream).expires_at(deadline);
    auto [wec, wn] = co_await http::async_write(stream, req, as_tuple);
    if (wec) co_return core::fail(core::errc::unavailable, "write: " + wec.message());
    parser.body_limit(max_answer_bytes);
    parser.get().body().reserve(std::min<std::size_t>(max_answer_bytes, 16384));
    auto [rec, rn] = co_await http::async_read(stream, buf, parser, as_tuple);
    info.answer_began = parser.got_some();
    if (rec) co_return core::fail(core::errc::unavailable, "read: " + rec.message());
    answer.status = static_cast<int>(parser.get().result_int());
    answer.body = std::move(parser.get().body());
    if (may_keep && reuse_ && parser.get().keep_alive()) {
      // Kept for the next GET: no close_notify.
      info.keep = true;
      co_return core::result<void>{};
    }
    // The answer is in: the close_notify exchange gets what is left of the budget, at most 1 s.
    beast::get_lowest_layer(stream).expires_at(
        std::min(deadline, std::chrono::steady_clock::now() + std::chrono::seconds(1)));
    co_await stream.async_shutdown(as_tuple);
    co_return core::result<void>{};
  };
  const auto once = [&](bool refresh) {
    // One deadline for the whole call (connect, handshake, request, response): a caller with
    // a budget (store.timeout) gets its answer, or a timeout, within it.
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    call_info info;
    const auto attempt = [&] {
      answer = {};
      return call(refresh, deadline, info, exchange);
    };
    auto r = attempt();
    // A kept connection the server closed meanwhile fails before any answer: the GET goes
    // once more, on a connection of its own.
    if (!r && info.reused && !info.answer_began && !cancelled_.load()) r = attempt();
    return r;
  };
  auto r = once(false);
  if (answer.status == 401 && ep_.credentials && !cancelled_.load()) r = once(true);
  // An answer that is in stands, also when cancel() cut the close_notify exchange after it.
  if (answer.status != 0) return answer;
  return std::move(r).error();
}

core::result<stream_response> client::stream_lines(
    const std::string& target, const std::function<bool(std::string_view)>& on_line,
    std::chrono::seconds idle, std::string_view accept, std::chrono::milliseconds read_pace) {
  stream_response out;
  const auto once = [&](bool refresh) -> core::result<void> {
    out = {};
    if (cancelled_.load()) return cancelled_error();
    auto creds = gather_credentials(ep_, refresh);
    if (!creds) return no_answer(std::move(creds).error());
    ssl::context ctx(ssl::context::tls_client);
    if (auto r = make_context(ep_, *creds, ctx); !r) return no_answer(std::move(r).error());
    tls_conn conn;
    {
      std::lock_guard lk(mu_);
      if (cancelled_.load()) return cancelled_error();
      active_conn_ = &conn;
    }
    // Unregistered before it is destroyed, however the exchange ends (on_line may throw).
    struct unregister {
      client& c;
      ~unregister() {
        std::lock_guard lk(c.mu_);
        c.active_conn_ = nullptr;
      }
    } done{*this};
    return watch_exchange(ep_, conn, ctx.native_handle(), cancelled_, creds->token, target, idle,
                          read_pace, accept, on_line, out);
  };
  // A 401 is answered before any line: nothing has been handed on when the call is repeated.
  auto r = once(false);
  if (out.status == 401 && ep_.credentials && !cancelled_.load()) r = once(true);
  if (out.status == 0) return std::move(r).error();
  return out;
}

void client::cancel() {
  cancelled_ = true;
  std::lock_guard lk(mu_);
  if (active_ != nullptr) static_cast<asio::io_context*>(active_)->stop();
  if (active_conn_ != nullptr) active_conn_->wake();
}

}  // namespace topogate::kube

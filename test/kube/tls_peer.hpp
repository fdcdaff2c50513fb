#pragma once
// TLS peers for the client's tests: a self-signed identity for 127.0.0.1 (the client's CA and
// the peer's certificate at once), and a fake API that answers each connection's request as
// the test says, one connection at a time (several requests on one when its answers keep it).

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

#include <atomic>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/streambuf.hpp>
#include <boost/asio/write.hpp>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "kube/endpoint.hpp"

namespace topogate::kube::testing {

struct identity {
  std::string cert_pem, key_pem;
};

inline std::string pem_of(const std::function<int(BIO*)>& write) {
  std::unique_ptr<BIO, decltype(&BIO_free)> bio(BIO_new(BIO_s_mem()), &BIO_free);
  if (write(bio.get()) != 1) return {};
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<std::size_t>(n));
}

// A P-256 key and a self-signed certificate for 127.0.0.1 (the client's CA and the peer's
// identity at once).
inline identity self_signed() {
  std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> key(EVP_EC_gen("P-256"), &EVP_PKEY_free);
  std::unique_ptr<X509, decltype(&X509_free)> cert(X509_new(), &X509_free);
  X509_set_version(cert.get(), 2);
  ASN1_INTEGER_set(X509_get_serialNumber(cert.get()), 1);
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), -60);
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), 3600);
  X509_set_pubkey(cert.get(), key.get());
  X509_NAME* name = X509_get_subject_name(cert.get());
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>("stream-peer"), -1, -1, 0);
  X509_set_issuer_name(cert.get(), name);
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, cert.get(), cert.get(), nullptr, nullptr, 0);
  for (const char* ext : {"subjectAltName=IP:127.0.0.1", "basicConstraints=critical,CA:TRUE"}) {
    const std::string spec(ext);
    const auto eq = spec.find('=');
    X509_EXTENSION* e =
        X509V3_EXT_conf(nullptr, &ctx, spec.substr(0, eq).c_str(), spec.substr(eq + 1).c_str());
    X509_add_ext(cert.get(), e, -1);
    X509_EXTENSION_free(e);
  }
  X509_sign(cert.get(), key.get(), EVP_sha256());
  return {pem_of([&](BIO* b) { return PEM_write_bio_X509(b, cert.get()); }), pem_of([&](BIO* b) {
            return PEM_write_bio_PrivateKey(b, key.get(), nullptr, nullptr, 0, nullptr, nullptr);
          })};
}

// Answers each request (its head: request line and header fields) with what `answer` returns
// for it, a whole HTTP response, then closes the connection (close_notify first) unless the
// answer keeps it (json_kept). Connections are served one at a time, as the client makes them.
class fake_api {
 public:
  using answer_fn = std::function<std::string(const std::string& head)>;

  explicit fake_api(answer_fn answer)
      : id_(self_signed()),
        ctx_(boost::asio::ssl::context::tls_server),
        acceptor_(ioc_),
        answer_(std::move(answer)) {
    namespace asio = boost::asio;
    ctx_.use_certificate_chain(asio::buffer(id_.cert_pem));
    ctx_.use_private_key(asio::buffer(id_.key_pem), asio::ssl::context::pem);
    const asio::ip::tcp::endpoint at(asio::ip::make_address("127.0.0.1"), 0);
    acceptor_.open(at.protocol());
    acceptor_.bind(at);
    acceptor_.listen();
    port_ = acceptor_.local_endpoint().port();
    thread_ = std::thread([this] { serve(); });
  }
  ~fake_api() {
    // The serving thread waits in accept(): a connection of our own wakes it to see done_.
    done_ = true;
    namespace asio = boost::asio;
    boost::system::error_code ec;
    asio::io_context ioc;
    asio::ip::tcp::socket wake(ioc);
    wake.connect({asio::ip::make_address("127.0.0.1"), port_}, ec);
    thread_.join();
    acceptor_.close(ec);
  }
  fake_api(const fake_api&) = delete;
  fake_api& operator=(const fake_api&) = delete;

  [[nodiscard]] endpoint api() const {
    endpoint ep;
    ep.host = "127.0.0.1";
    ep.port = std::to_string(port_);
    ep.ca_pem = id_.cert_pem;
    ep.token = "fake-api-token";
    return ep;
  }
  // Each request's target (the path and query of its request line), in order.
  [[nodiscard]] std::vector<std::string> targets() const {
    std::lock_guard lock(mu_);
    return targets_;
  }

  // How many connections the API accepted (and completed a TLS handshake on).
  [[nodiscard]] int connections() const { return connections_.load(); }
  // Closes each connection after its answer, also one that did not say so (as a server does
  // with a connection that was idle too long).
  void drop_kept() { drop_kept_ = true; }

  // An answer with a JSON body, after which the connection closes.
  static std::string json(int status, const std::string& body) {
    return answer(status, body, "Connection: close\r\n");
  }
  // The same with the connection kept open for the next request (HTTP/1.1 keep-alive).
  static std::string json_kept(int status, const std::string& body) {
    return answer(status, body, "");
  }

 private:
  static std::string answer(int status, const std::string& body, const std::string& fields) {
    return "HTTP/1.1 " + std::to_string(status) +
           " X\r\nContent-Type: application/json\r\nContent-Length: " +
           std::to_string(body.size()) + "\r\n" + fields + "\r\n" + body;
  }

  void serve() {
    namespace asio = boost::asio;
    while (!done_) {
      boost::system::error_code ec;
      asio::ssl::stream<asio::ip::tcp::socket> s(ioc_, ctx_);
      acceptor_.accept(s.next_layer(), ec);
      if (ec || done_) return;
      s.handshake(asio::ssl::stream_base::server, ec);
      if (ec) continue;
      ++connections_;
      // Requests (bodiless) on this connection until an answer says "Connection: close", the
      // peer closes, or drop_kept: an answer that does not say so is followed by a close anyway.
      for (;;) {
        asio::streambuf req;
        asio::read_until(s, req, "\r\n\r\n", ec);
        if (ec) break;
        const std::string head(asio::buffers_begin(req.data()), asio::buffers_end(req.data()));
        const auto sp = head.find(' ');
        {
          std::lock_guard lock(mu_);
          targets_.push_back(head.substr(sp + 1, head.find(' ', sp + 1) - sp - 1));
        }
        const std::string answer = answer_(head);
        asio::write(s, asio::buffer(answer), ec);
        if (ec || drop_kept_ || answer.find("\r\nConnection: close\r\n") != std::string::npos)
          break;
      }
      s.shutdown(ec);
      s.next_layer().close(ec);
    }
  }

  identity id_;
  boost::asio::io_context ioc_;
  boost::asio::ssl::context ctx_;
  boost::asio::ip::tcp::acceptor acceptor_;
  answer_fn answer_;
  unsigned short port_ = 0;
  std::thread thread_;
  std::atomic<bool> done_{false};
  std::atomic<bool> drop_kept_{false};
  std::atomic<int> connections_{0};
  mutable std::mutex mu_;
  std::vector<std::string> targets_;
};

}  // namespace topogate::kube::testing

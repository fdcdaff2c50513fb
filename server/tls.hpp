#pragma once
// TLS contexts and the credential watcher.
//
// Every connection keeps the SSL_CTX it was accepted with (a shared_ptr); a rotation
// builds a complete new context and swaps the pointer, so established connections are
// never touched and new ones see only fully loaded material. A file that fails to load
// leaves the previous material in place; the failure is logged and counted.

#include <openssl/ssl.h>

#include <boost/asio/ssl/context.hpp>

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "server/auth.hpp"
#include "server/config.hpp"
#include "server/file_util.hpp"

namespace topogate::server {

class metrics;

struct certificate_expiry {
  std::string name;  // certificate file path
  double not_after = 0;
};

// tls_server context: TLS 1.2 minimum (or 1.3), forward-secret AEAD suites for 1.2,
// ALPN http/1.1 only (never h2), client certificates requested but never required by the
// handshake (authorization decides per inventory). `client_ca_files` only seed the
// acceptable-CA list sent to clients.
std::shared_ptr<boost::asio::ssl::context> make_tls_context(const std::vector<tls_pair>& pairs,
                                                            std::string_view min_version,
                                                            const std::vector<std::string>& client_ca_files,
                                                            std::vector<certificate_expiry>* expiries,
                                                            std::string* error, bool session_tickets = true);

// The largest TLS record plaintext (RFC 8446 §5.1, RFC 5246 §6.2.1).
inline constexpr std::size_t tls_record_plaintext = 16384;

// Encrypts application data of an established connection straight into a caller's
// buffer, so a whole response (or a large batch of it) leaves in one socket write
// instead of one write, one BIO-pair copy and one completion per 16 KiB record (the
// way an Asio ssl::stream writes). The connection's own write BIO is swapped out only
// for the duration of encrypt(), while no Asio operation is pending on the stream.
class tls_record_writer {
 public:
  tls_record_writer();
  ~tls_record_writer();
  tls_record_writer(const tls_record_writer&) = delete;
  tls_record_writer& operator=(const tls_record_writer&) = delete;

  // Appends the records carrying `plain` to `out`. False on a TLS error (the
  // connection is then unusable and is closed).
  bool encrypt(SSL* ssl, std::string_view plain, std::string& out);

 private:
  BIO* bio_ = nullptr;
};

class credential_watcher {
 public:
  credential_watcher(const serve_config& cfg, metrics* m);

  // Initial load: false with *error when anything is missing or broken (startup fails).
  bool load(std::string* error);
  // Re-reads what changed on disk since the last look (force: everything). Returns true
  // when something was swapped in. Safe to call from any single thread at a time.
  bool poll(bool force = false);

  [[nodiscard]] std::shared_ptr<boost::asio::ssl::context> tls() const;
  [[nodiscard]] std::shared_ptr<const auth_state> auth() const;

 private:
  struct watched_set {
    std::string inventory;
    bool writers = false;
    credential_files files;
    std::vector<file_signature> seen;
  };
  bool reload_tls(std::string* error);
  std::vector<std::string> tls_files() const;
  std::vector<std::string> client_ca_files() const;

  std::vector<tls_pair> pairs_;
  std::string min_version_;
  bool session_tickets_ = true;
  metrics* metrics_;
  std::vector<watched_set> sets_;
  std::vector<file_signature> tls_seen_;

  mutable std::mutex mu_;
  std::shared_ptr<boost::asio::ssl::context> tls_;
  std::shared_ptr<const auth_state> auth_;
};

}  // namespace topogate::server

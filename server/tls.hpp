#pragma once
// TLS contexts and the credential watcher.
//
// Every connection keeps the SSL_CTX it was accepted with (a shared_ptr); a rotation
// builds a complete new context and swaps the pointer, so established connections are
// never touched and new ones see only fully loaded material. A file that fails to load
// leaves the previous material in place; the failure is logged and counted.

#include <openssl/ssl.h>

#include <boost/asio/ssl/context.hpp>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/result.hpp"
#include "server/auth.hpp"
#include "server/config.hpp"
#include "util/file.hpp"

namespace topogate::server {

class metrics;

struct certificate_expiry {
  std::string name;  // certificate file path
  double not_after = 0;
};

// tls_server context: TLS 1.2 minimum (or 1.3), forward-secret AEAD suites for 1.2,
// ALPN http/1.1 only (never h2), client certificates requested but never required by the
// handshake (authorization decides per inventory). `client_ca_files` only seed the
// acceptable-CA list sent to clients. Fails with errc::invalid_argument when a certificate or
// key does not load (the message names the file), errc::internal when OpenSSL refuses the
// cipher list.
core::result<std::shared_ptr<boost::asio::ssl::context>> make_tls_context(
    const std::vector<tls_pair>& pairs, std::string_view min_version,
    const std::vector<std::string>& client_ca_files, std::vector<certificate_expiry>* expiries,
    bool session_tickets = true);

// The largest TLS record plaintext (RFC 8446 §5.1, RFC 5246 §6.2.1).
inline constexpr std::size_t tls_record_plaintext = 16384;

// One server-side TLS connection's protocol state, driven by the session's own socket I/O
// (no Asio ssl::stream): ciphertext read from the socket goes into input_space()/commit(),
// and every record OpenSSL produces (handshake flights, alerts, application data,
// close_notify) is appended to the string given to set_output(). So a request record is
// decrypted straight from the bytes the socket read put there, a whole response (or a
// large batch of it) leaves in one socket write, and there is no BIO pair, no composed
// operation per record and no completion per OpenSSL call.
class tls_channel {
 public:
  enum class status : std::uint8_t {
    ok,         // done (handshake) or bytes read
    want_read,  // needs more ciphertext: commit() some and call again
    closed,     // the peer sent close_notify
    failed      // a TLS error: error() says which; the connection is unusable
  };

  // Ciphertext buffered at once: one record of the largest size with its overhead.
  static constexpr std::size_t input_capacity = 16384 + 2048;

  explicit tls_channel(SSL_CTX* ctx);
  ~tls_channel();
  tls_channel(const tls_channel&) = delete;
  tls_channel& operator=(const tls_channel&) = delete;

  [[nodiscard]] bool valid() const noexcept { return ssl_ != nullptr; }
  [[nodiscard]] SSL* native_handle() const noexcept { return ssl_; }

  // Where OpenSSL's records go (appended; never cleared here). Must be set before any call
  // that may write.
  void set_output(std::string* out) noexcept { out_ = out; }

  // Free room for the socket to read into, then how much it read. Empty only if OpenSSL
  // took nothing from a full buffer (it takes any complete record, and one record fits).
  [[nodiscard]] std::pair<char*, std::size_t> input_space();
  void commit(std::size_t n) noexcept { in_end_ += n; }

  status handshake();
  // Decrypts up to `len` bytes of application data into `dst`.
  status read(char* dst, std::size_t len, std::size_t& got);
  // Appends the records carrying `plain`. False on a TLS error.
  bool write(std::string_view plain);
  // Appends close_notify (nothing after a fatal error).
  void close_notify();

  // Input taken off the socket but not yet read out: ciphertext here, a record in
  // OpenSSL's buffer, or decrypted bytes.
  [[nodiscard]] bool pending() const noexcept;
  // The OpenSSL error of the last `failed` status (ERR_GET_REASON gives the reason).
  [[nodiscard]] unsigned long error() const noexcept { return error_; }

 private:
  friend struct tls_channel_bio;
  status settle(int ret);

  SSL* ssl_ = nullptr;
  std::string* out_ = nullptr;
  std::unique_ptr<char[]> in_;
  std::size_t in_begin_ = 0;
  std::size_t in_end_ = 0;
  unsigned long error_ = 0;
};

class credential_watcher {
 public:
  credential_watcher(const serve_config& cfg, metrics* m);

  // Initial load: the error says what is missing or broken (startup fails).
  core::result<void> load();
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
    std::vector<util::file_signature> seen;
  };
  core::result<void> reload_tls();
  std::vector<std::string> tls_files() const;
  std::vector<std::string> client_ca_files() const;

  std::vector<tls_pair> pairs_;
  std::string min_version_;
  bool session_tickets_ = true;
  metrics* metrics_;
  std::vector<watched_set> sets_;
  std::vector<util::file_signature> tls_seen_;

  mutable std::mutex mu_;
  std::shared_ptr<boost::asio::ssl::context> tls_;
  std::shared_ptr<const auth_state> auth_;
};

}  // namespace topogate::server

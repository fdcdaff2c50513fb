#include "server/tls.hpp"

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <algorithm>
#include <cstring>
#include <ctime>

#include "server/log.hpp"
#include "server/metrics.hpp"
#include "server/openssl_text.hpp"

namespace topogate::server {

namespace ssl = boost::asio::ssl;

namespace {

double not_after_of(X509* cert) { return cert ? unix_seconds(X509_get0_notAfter(cert)) : 0; }

// RFC 7301: pick http/1.1 when offered; otherwise proceed without ALPN rather than
// agree to h2, which this server does not speak.
int select_alpn(SSL*, const unsigned char** out, unsigned char* outlen, const unsigned char* in,
                unsigned inlen, void*) {
  static constexpr unsigned char http11[] = {'h', 't', 't', 'p', '/', '1', '.', '1'};
  unsigned i = 0;
  while (i < inlen) {
    const unsigned len = in[i];
    if (i + 1 + len > inlen) break;
    if (len == sizeof http11 && std::memcmp(in + i + 1, http11, len) == 0) {
      *out = in + i + 1;
      *outlen = static_cast<unsigned char>(len);
      return SSL_TLSEXT_ERR_OK;
    }
    i += 1 + len;
  }
  return SSL_TLSEXT_ERR_NOACK;
}

// Accept any client certificate at the handshake: the request decides, per inventory,
// so a certificate from the wrong CA gets a 403 the client can read, not an alert.
int accept_any_certificate(int, X509_STORE_CTX*) { return 1; }

}  // namespace

core::result<std::shared_ptr<ssl::context>> make_tls_context(
    const std::vector<tls_pair>& pairs, std::string_view min_version,
    const std::vector<std::string>& client_ca_files, std::vector<certificate_expiry>* expiries,
    bool session_tickets) {
  ERR_clear_error();
  auto ctx = std::make_shared<ssl::context>(ssl::context::tls_server);
  SSL_CTX* native = ctx->native_handle();
  SSL_CTX_set_min_proto_version(native, min_version == "1.3" ? TLS1_3_VERSION : TLS1_2_VERSION);
  SSL_CTX_set_max_proto_version(native, TLS1_3_VERSION);
  // SSL_OP_CLEANSE_PLAINTEXT: OpenSSL's copy of each decrypted record (a request's bearer
  // token among them) is wiped once read, not left in its buffer until overwritten or freed.
  SSL_CTX_set_options(native, SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE |
                                  SSL_OP_NO_COMPRESSION | SSL_OP_CLEANSE_PLAINTEXT);
  if (SSL_CTX_set_cipher_list(native, "ECDHE+AESGCM:ECDHE+CHACHA20") != 1) {
    return core::fail(core::errc::internal, "cipher list: " + openssl_errors());
  }
  SSL_CTX_set_alpn_select_cb(native, select_alpn, nullptr);
  SSL_CTX_set_verify(native, SSL_VERIFY_PEER, accept_any_certificate);
  static constexpr unsigned char sid_ctx[] = {'t', 'o', 'p', 'o', 'g', 'a', 't', 'e'};
  SSL_CTX_set_session_id_context(native, sid_ctx, sizeof sid_ctx);
  if (!session_tickets) {
    // No resumption at all: no TLS 1.3 tickets after the handshake (OpenSSL sends two by
    // default, encrypted per connection), no TLS 1.2 tickets, no server-side session cache.
    // Clients that never resume (Go's net/http without a ClientSessionCache, which is how
    // the apiserver and the consumer poll) then cost one handshake and nothing more.
    SSL_CTX_set_options(native, SSL_OP_NO_TICKET);
    SSL_CTX_set_num_tickets(native, 0);
    SSL_CTX_set_session_cache_mode(native, SSL_SESS_CACHE_OFF);
  }

  if (pairs.empty()) return core::fail(core::errc::invalid_argument, "no certificate configured");
  for (const auto& p : pairs) {
    if (SSL_CTX_use_certificate_chain_file(native, p.cert_file.c_str()) != 1) {
      return core::fail(core::errc::invalid_argument,
                        "certificate " + p.cert_file + ": " + openssl_errors());
    }
    if (SSL_CTX_use_PrivateKey_file(native, p.key_file.c_str(), SSL_FILETYPE_PEM) != 1) {
      return core::fail(core::errc::invalid_argument,
                        "private key " + p.key_file + ": " + openssl_errors());
    }
    if (SSL_CTX_check_private_key(native) != 1) {
      return core::fail(core::errc::invalid_argument,
                        "private key " + p.key_file + " does not match certificate " + p.cert_file);
    }
    if (expiries)
      expiries->push_back({p.cert_file, not_after_of(SSL_CTX_get0_certificate(native))});
  }
  if (!client_ca_files.empty()) {
    STACK_OF(X509_NAME)* names = sk_X509_NAME_new_null();
    for (const auto& f : client_ca_files) {
      if (SSL_add_file_cert_subjects_to_stack(names, f.c_str()) != 1) ERR_clear_error();
    }
    if (sk_X509_NAME_num(names) > 0)
      SSL_CTX_set_client_CA_list(native, names);
    else
      sk_X509_NAME_free(names);
  }
  return ctx;
}

// The channel's BIO: reads ciphertext from the channel's input buffer (retry when it is
// empty: the session reads the socket and calls again) and appends what OpenSSL writes to
// the channel's output string. OpenSSL never sees the socket.
struct tls_channel_bio {
  static int read(BIO* bio, char* dst, std::size_t len, std::size_t* got) {
    auto* ch = static_cast<tls_channel*>(BIO_get_data(bio));
    BIO_clear_retry_flags(bio);
    const std::size_t have = ch->in_end_ - ch->in_begin_;
    if (have == 0) {
      BIO_set_retry_read(bio);
      *got = 0;
      return 0;
    }
    const std::size_t n = std::min(have, len);
    std::memcpy(dst, ch->in_.get() + ch->in_begin_, n);
    ch->in_begin_ += n;
    if (ch->in_begin_ == ch->in_end_) ch->in_begin_ = ch->in_end_ = 0;
    *got = n;
    return 1;
  }

  static int write(BIO* bio, const char* data, std::size_t len, std::size_t* written) {
    auto* ch = static_cast<tls_channel*>(BIO_get_data(bio));
    BIO_clear_retry_flags(bio);
    if (ch->out_ == nullptr) return 0;
    ch->out_->append(data, len);
    *written = len;
    return 1;
  }

  static long ctrl(BIO* bio, int cmd, long, void*) {
    switch (cmd) {
      case BIO_CTRL_FLUSH:
        return 1;
      case BIO_CTRL_PENDING: {
        auto* ch = static_cast<tls_channel*>(BIO_get_data(bio));
        return static_cast<long>(ch->in_end_ - ch->in_begin_);
      }
      default:
        return 0;
    }
  }

  static int create(BIO* bio) {
    BIO_set_init(bio, 1);
    return 1;
  }

  static BIO_METHOD* method() {
    static BIO_METHOD* const m = [] {
      BIO_METHOD* bm =
          BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "topogate tls channel");
      if (bm) {
        BIO_meth_set_read_ex(bm, read);
        BIO_meth_set_write_ex(bm, write);
        BIO_meth_set_ctrl(bm, ctrl);
        BIO_meth_set_create(bm, create);
      }
      return bm;
    }();
    return m;
  }
};

tls_channel::tls_channel(SSL_CTX* ctx) : in_(new char[input_capacity]) {
  BIO_METHOD* m = tls_channel_bio::method();
  if (!ctx || !m) return;
  ssl_ = SSL_new(ctx);
  if (!ssl_) return;
  BIO* bio = BIO_new(m);
  if (!bio) {
    SSL_free(ssl_);
    ssl_ = nullptr;
    return;
  }
  BIO_set_data(bio, this);
  SSL_set_bio(ssl_, bio, bio);  // one BIO for both directions: SSL_set_bio takes its one reference
  SSL_set_accept_state(ssl_);
  // A connection keeps no record buffers while it is idle (keep-alive connections are
  // mostly idle); OpenSSL reads as much of the input as it holds in one BIO call.
  SSL_set_mode(ssl_, SSL_MODE_RELEASE_BUFFERS);
  SSL_set_read_ahead(ssl_, 1);
}

tls_channel::~tls_channel() {
  if (ssl_) SSL_free(ssl_);
}

std::pair<char*, std::size_t> tls_channel::input_space() {
  if (in_begin_ > 0 && in_end_ == input_capacity) {
    std::memmove(in_.get(), in_.get() + in_begin_, in_end_ - in_begin_);
    in_end_ -= in_begin_;
    in_begin_ = 0;
  }
  return {in_.get() + in_end_, input_capacity - in_end_};
}

tls_channel::status tls_channel::settle(int ret) {
  switch (SSL_get_error(ssl_, ret)) {
    case SSL_ERROR_WANT_READ:
      return status::want_read;
    case SSL_ERROR_ZERO_RETURN:
      return status::closed;
    default:
      error_ = ERR_peek_last_error();
      if (error_ == 0) error_ = ERR_PACK(ERR_LIB_SSL, 0, SSL_R_UNEXPECTED_EOF_WHILE_READING);
      ERR_clear_error();
      return status::failed;
  }
}

// SSL_get_error() reads the thread's error queue: whatever other OpenSSL work on this
// thread left there (a certificate file that failed to parse during a reload, ...) would
// turn a plain "want more input" into a failure. So every call starts with a clean queue
// (looking is cheaper than clearing, and the queue is almost always empty).
namespace {
void clear_stale_errors() {
  if (ERR_peek_error() != 0) ERR_clear_error();
}
}  // namespace

tls_channel::status tls_channel::handshake() {
  if (!ssl_) return status::failed;
  clear_stale_errors();
  const int ret = SSL_do_handshake(ssl_);
  return ret == 1 ? status::ok : settle(ret);
}

tls_channel::status tls_channel::read(char* dst, std::size_t len, std::size_t& got) {
  got = 0;
  if (!ssl_) return status::failed;
  clear_stale_errors();
  const int ret = SSL_read_ex(ssl_, dst, len, &got);
  return ret == 1 ? status::ok : settle(ret);
}

bool tls_channel::write(std::string_view plain) {
  if (!ssl_ || !out_) return false;
  clear_stale_errors();
  while (!plain.empty()) {
    std::size_t n = 0;
    if (SSL_write_ex(ssl_, plain.data(), plain.size(), &n) != 1 || n == 0) {
      ERR_clear_error();
      return false;
    }
    plain.remove_prefix(n);
  }
  return true;
}

void tls_channel::close_notify() {
  if (!ssl_ || !out_ || error_ != 0 || !SSL_is_init_finished(ssl_)) return;
  clear_stale_errors();
  if (SSL_shutdown(ssl_) < 0) ERR_clear_error();
}

bool tls_channel::pending() const noexcept {
  return in_end_ > in_begin_ || (ssl_ && (SSL_pending(ssl_) > 0 || SSL_has_pending(ssl_) == 1));
}

credential_watcher::credential_watcher(const serve_config& cfg, metrics* m)
    : pairs_(cfg.certificates),
      min_version_(cfg.min_tls_version),
      session_tickets_(cfg.session_tickets),
      metrics_(m) {
  for (const auto& a : cfg.auth) {
    sets_.push_back({a.name, false, a.readers, {}});
    if (!a.writers.empty()) sets_.push_back({a.name, true, a.writers, {}});
  }
}

std::vector<std::string> credential_watcher::tls_files() const {
  std::vector<std::string> out;
  for (const auto& p : pairs_) {
    out.push_back(p.cert_file);
    out.push_back(p.key_file);
  }
  for (auto& f : client_ca_files()) out.push_back(std::move(f));
  return out;
}

std::vector<std::string> credential_watcher::client_ca_files() const {
  std::vector<std::string> out;
  for (const auto& s : sets_) {
    if (!s.files.client_ca_file.empty()) out.push_back(s.files.client_ca_file);
  }
  return out;
}

namespace {
std::vector<util::file_signature> signatures(const std::vector<std::string>& files) {
  std::vector<util::file_signature> out;
  out.reserve(files.size());
  for (const auto& f : files) out.push_back(util::signature_of(f));
  return out;
}
std::vector<std::string> files_of(const credential_files& c) {
  std::vector<std::string> out = c.bearer_token_files;
  if (!c.client_ca_file.empty()) out.push_back(c.client_ca_file);
  return out;
}
}  // namespace

core::result<void> credential_watcher::reload_tls() {
  std::vector<certificate_expiry> expiries;
  auto ctx = make_tls_context(pairs_, min_version_, client_ca_files(), &expiries, session_tickets_);
  if (!ctx) return std::move(ctx).error();
  {
    std::lock_guard lock(mu_);
    tls_ = std::move(*ctx);
  }
  if (metrics_) {
    for (const auto& e : expiries) metrics_->certificate_expiry("server:" + e.name, e.not_after);
  }
  return {};
}

core::result<void> credential_watcher::load() {
  tls_seen_ = signatures(tls_files());
  if (auto tls = reload_tls(); !tls) return tls;
  auto state = std::make_shared<auth_state>();
  for (auto& s : sets_) {
    s.seen = signatures(files_of(s.files));
    auto set = load_credentials(s.files);
    if (!set) {
      return core::fail(set.error().code, "inventory " + s.inventory +
                                              (s.writers ? " writers: " : " readers: ") +
                                              set.error().message);
    }
    if (metrics_ && set->mtls) {
      metrics_->certificate_expiry(
          "client-ca:" + s.inventory + (s.writers ? "/writers" : "/readers"), set->ca_not_after);
    }
    auto& slot = state->inventories[s.inventory];
    (s.writers ? slot.writers : slot.readers) = std::move(*set);
  }
  std::lock_guard lock(mu_);
  auth_ = std::move(state);
  return {};
}

bool credential_watcher::poll(bool force) {
  bool swapped = false;
  auto now_tls = signatures(tls_files());
  if (force || now_tls != tls_seen_) {
    tls_seen_ = std::move(now_tls);
    const auto reloaded = reload_tls();
    if (metrics_) metrics_->credential_reload("tls", reloaded.ok());
    if (reloaded) {
      log(log_level::info, "reloaded TLS certificates",
          {{"certificates", static_cast<long long>(pairs_.size())}});
      swapped = true;
    } else {
      log(log_level::error, "TLS certificate reload failed; keeping the previous certificates",
          {{"error", reloaded.error().message}});
    }
  }
  std::shared_ptr<auth_state> next;
  for (auto& s : sets_) {
    auto now = signatures(files_of(s.files));
    if (!force && now == s.seen) continue;
    s.seen = std::move(now);
    auto loaded = load_credentials(s.files);
    if (metrics_) {
      metrics_->credential_reload(s.files.client_ca_file.empty() ? "token" : "client-credentials",
                                  loaded.ok());
    }
    if (!loaded) {
      log(log_level::error, "credential reload failed; keeping the previous credentials",
          {{"inventory", s.inventory},
           {"role", s.writers ? "writers" : "readers"},
           {"error", loaded.error().message}});
      continue;
    }
    credential_set& set = *loaded;
    if (!next) {
      std::lock_guard lock(mu_);
      next = std::make_shared<auth_state>(*auth_);
    }
    if (metrics_ && set.mtls) {
      metrics_->certificate_expiry(
          "client-ca:" + s.inventory + (s.writers ? "/writers" : "/readers"), set.ca_not_after);
    }
    auto& slot = next->inventories[s.inventory];
    (s.writers ? slot.writers : slot.readers) = std::move(set);
    log(log_level::info, "reloaded credentials",
        {{"inventory", s.inventory}, {"role", s.writers ? "writers" : "readers"}});
  }
  if (next) {
    std::lock_guard lock(mu_);
    auth_ = std::move(next);
    swapped = true;
  }
  return swapped;
}

std::shared_ptr<ssl::context> credential_watcher::tls() const {
  std::lock_guard lock(mu_);
  return tls_;
}

std::shared_ptr<const auth_state> credential_watcher::auth() const {
  std::lock_guard lock(mu_);
  return auth_;
}

}  // namespace topogate::server

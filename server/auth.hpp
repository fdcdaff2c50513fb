#pragma once
// Per-inventory credentials and the request-time authentication decision.
//
// Bearer tokens are compared as SHA-256 digests with CRYPTO_memcmp, against every
// configured token without stopping early, so timing reveals neither a token nor which
// one matched. Client certificates are accepted by the TLS handshake whatever they are
// (so a wrong one can be answered with 403 instead of a handshake alert) and verified
// here, per inventory, against that inventory's CA bundle and optional allow-lists.

#include <openssl/x509.h>

#include <array>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.hpp"

namespace topogate::server {

struct credential_files {
  std::vector<std::string> bearer_token_files;  // one or more tokens per file, one a line
  std::string client_ca_file;                   // PEM bundle (overlapping CAs during rotation)
  std::vector<std::string> allowed_subjects;    // RFC 2253 subject DN, or a bare CN value
  std::vector<std::string> allowed_sans;        // DNS, IP, URI or email SAN values
  [[nodiscard]] bool empty() const noexcept {
    return bearer_token_files.empty() && client_ca_file.empty();
  }
};

using digest = std::array<unsigned char, 32>;

// Immutable once built; swapped as a whole when a file changes.
struct credential_set {
  bool bearer = false;  // bearer tokens configured
  bool mtls = false;    // client CA configured
  std::vector<digest> token_digests;
  std::shared_ptr<X509_STORE> ca_store;
  std::vector<std::string> allowed_subjects;
  std::vector<std::string> allowed_sans;
  double ca_not_after = 0;  // earliest notAfter in the CA bundle (Unix seconds), for metrics
};

struct inventory_credentials {
  credential_set readers;
  credential_set writers;
};

// Everything authentication needs, by inventory name.
struct auth_state {
  std::map<std::string, inventory_credentials, std::less<>> inventories;
};

// What the TLS layer saw; owned by the connection, valid for the request.
struct peer_certificate {
  X509* leaf = nullptr;
  STACK_OF(X509) * chain = nullptr;  // as sent by the client, without the leaf
  std::string subject;               // RFC 2253, for logs
};

enum class auth_status { ok, missing, denied };

struct auth_result {
  auth_status status = auth_status::missing;
  std::string
      reason;  // metric label when not ok: missing, wrong_token, untrusted_certificate, not_allowed
  std::string identity;  // "bearer:<inventory>" or "cert:<subject>" (never the token)
};

[[nodiscard]] digest sha256(std::string_view data);
// Loads a credential set from files. Fails on any unreadable file (as read_file reports it) or
// malformed one (errc::invalid_argument; an empty token file is one: it would lock every
// client out).
core::result<credential_set> load_credentials(const credential_files& files);
// Tokens from a token file's contents: one per line, surrounding white space ignored.
[[nodiscard]] std::vector<std::string> parse_token_file(std::string_view text);

// The `Authorization: Bearer <token>` credential, "" when absent or another scheme.
[[nodiscard]] std::string_view bearer_token(std::string_view authorization) noexcept;

// Decides one request. `inventory` only names the identity.
[[nodiscard]] auth_result authenticate(const credential_set& set, std::string_view inventory,
                                       std::string_view authorization,
                                       const peer_certificate& peer);

// True when the request carries any credential (an Authorization header or a client certificate).
[[nodiscard]] bool presents_credentials(std::string_view authorization,
                                        const peer_certificate& peer) noexcept;

}  // namespace topogate::server

#include "server/auth.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

#include <algorithm>
#include <cctype>
#include <ctime>

#include "core/syntax.hpp"
#include "server/openssl_text.hpp"
#include "util/file.hpp"

namespace topogate::server {

namespace {

std::string common_name(const X509_NAME* name) {
  const int idx = X509_NAME_get_index_by_NID(name, NID_commonName, -1);
  if (idx < 0) return {};
  const ASN1_STRING* s = X509_NAME_ENTRY_get_data(X509_NAME_get_entry(name, idx));
  unsigned char* utf8 = nullptr;
  const int n = ASN1_STRING_to_UTF8(&utf8, s);
  if (n < 0) return {};
  std::string out(reinterpret_cast<char*>(utf8), static_cast<std::size_t>(n));
  OPENSSL_free(utf8);
  return out;
}

std::vector<std::string> subject_alt_names(X509* cert) {
  std::vector<std::string> out;
  auto* names =
      static_cast<GENERAL_NAMES*>(X509_get_ext_d2i(cert, NID_subject_alt_name, nullptr, nullptr));
  if (!names) return out;
  for (int i = 0; i < sk_GENERAL_NAME_num(names); ++i) {
    const GENERAL_NAME* gn = sk_GENERAL_NAME_value(names, i);
    if (gn->type == GEN_DNS || gn->type == GEN_URI || gn->type == GEN_EMAIL) {
      const ASN1_IA5STRING* s = gn->d.ia5;
      out.emplace_back(reinterpret_cast<const char*>(ASN1_STRING_get0_data(s)),
                       static_cast<std::size_t>(ASN1_STRING_length(s)));
    } else if (gn->type == GEN_IPADD) {
      char* text = nullptr;
      // Render like "127.0.0.1" / "::1" through OpenSSL's own helper.
      ASN1_OCTET_STRING* ip = gn->d.iPAddress;
      if (ip && (ip->length == 4 || ip->length == 16)) {
        char buf[64];
        if (ip->length == 4) {
          std::snprintf(buf, sizeof buf, "%u.%u.%u.%u", ip->data[0], ip->data[1], ip->data[2],
                        ip->data[3]);
          out.emplace_back(buf);
        } else {
          text = OPENSSL_buf2hexstr(ip->data, ip->length);
          if (text) {
            out.emplace_back(text);
            OPENSSL_free(text);
          }
        }
      }
    }
  }
  GENERAL_NAMES_free(names);
  return out;
}

}  // namespace

namespace {
// One SHA-256 context per thread, fetched and initialised once: EVP_Digest() would fetch
// the algorithm from the provider and create and free a context for every bearer token
// checked (about three quarters of the check's instructions).
struct digest_context {
  EVP_MD* md = EVP_MD_fetch(nullptr, "SHA256", nullptr);
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  digest_context() {
    if (md && ctx && EVP_DigestInit_ex2(ctx, md, nullptr) != 1) {
      EVP_MD_CTX_free(ctx);
      ctx = nullptr;
    }
  }
  ~digest_context() {
    EVP_MD_CTX_free(ctx);
    EVP_MD_free(md);
  }
  digest_context(const digest_context&) = delete;
  digest_context& operator=(const digest_context&) = delete;
};
}  // namespace

digest sha256(std::string_view data) {
  digest d{};
  unsigned int len = 0;
  thread_local digest_context tls;
  // Re-initialising with a null type keeps the fetched digest and the provider context.
  if (tls.ctx && EVP_DigestInit_ex2(tls.ctx, nullptr, nullptr) == 1 &&
      EVP_DigestUpdate(tls.ctx, data.data(), data.size()) == 1 &&
      EVP_DigestFinal_ex(tls.ctx, d.data(), &len) == 1) {
    return d;
  }
  EVP_Digest(data.data(), data.size(), d.data(), &len, EVP_sha256(), nullptr);
  return d;
}

std::vector<std::string> parse_token_file(std::string_view text) {
  std::vector<std::string> out;
  while (!text.empty()) {
    const auto nl = text.find('\n');
    const std::string_view line = core::trim_space(text.substr(0, nl));
    if (!line.empty()) out.emplace_back(line);
    if (nl == std::string_view::npos) break;
    text.remove_prefix(nl + 1);
  }
  return out;
}

core::result<credential_set> load_credentials(const credential_files& files) {
  credential_set set;
  set.allowed_subjects = files.allowed_subjects;
  set.allowed_sans = files.allowed_sans;
  for (const auto& path : files.bearer_token_files) {
    set.bearer = true;
    auto text = util::read_file(path, 1u << 20);
    if (!text) return std::move(text).error();
    auto tokens = parse_token_file(*text);
    if (tokens.empty())
      return core::fail(core::errc::invalid_argument, "token file " + path + " holds no token");
    for (const auto& t : tokens) set.token_digests.push_back(sha256(t));
    OPENSSL_cleanse(text->data(), text->size());
    for (auto& t : tokens) OPENSSL_cleanse(t.data(), t.size());
  }
  if (!files.client_ca_file.empty()) {
    set.mtls = true;
    const auto pem = util::read_file(files.client_ca_file, 16u << 20);
    if (!pem) return pem.error();
    std::shared_ptr<X509_STORE> store(X509_STORE_new(), X509_STORE_free);
    BIO* bio = BIO_new_mem_buf(pem->data(), static_cast<int>(pem->size()));
    int count = 0;
    double earliest = 0;
    while (X509* cert = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr)) {
      X509_STORE_add_cert(store.get(), cert);
      const double na = unix_seconds(X509_get0_notAfter(cert));
      if (count == 0 || na < earliest) earliest = na;
      X509_free(cert);
      ++count;
    }
    BIO_free(bio);
    if (count == 0) {
      return core::fail(core::errc::invalid_argument,
                        "client CA file " + files.client_ca_file + " holds no PEM certificate");
    }
    set.ca_store = std::move(store);
    set.ca_not_after = earliest;
  }
  return set;
}

std::string_view bearer_token(std::string_view authorization) noexcept {
  // RFC 7235: the scheme is case-insensitive; RFC 6750 puts one space before the token.
  constexpr std::string_view scheme = "bearer";
  if (authorization.size() <= scheme.size() + 1) return {};
  for (std::size_t i = 0; i < scheme.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(authorization[i])) != scheme[i]) return {};
  }
  if (authorization[scheme.size()] != ' ') return {};
  return core::trim_ows(authorization.substr(scheme.size() + 1));
}

bool presents_credentials(std::string_view authorization, const peer_certificate& peer) noexcept {
  return !authorization.empty() || peer.leaf != nullptr;
}

auth_result authenticate(const credential_set& set, std::string_view inventory,
                         std::string_view authorization, const peer_certificate& peer) {
  auth_result r;
  if (!presents_credentials(authorization, peer)) {
    r.status = auth_status::missing;
    r.reason = "missing";
    return r;
  }
  r.status = auth_status::denied;
  r.reason = "wrong_method";
  if (set.bearer) {
    const std::string_view token = bearer_token(authorization);
    if (!token.empty()) {
      const digest d = sha256(token);
      int matched = 0;
      for (const auto& want : set.token_digests) {
        matched |= CRYPTO_memcmp(d.data(), want.data(), d.size()) == 0 ? 1 : 0;
      }
      if (matched) {
        r.status = auth_status::ok;
        r.reason.clear();
        r.identity = "bearer:" + std::string(inventory);
        return r;
      }
      r.reason = "wrong_token";
    }
  }
  if (set.mtls && set.ca_store && peer.leaf) {
    X509_STORE_CTX* ctx = X509_STORE_CTX_new();
    bool verified = false;
    if (ctx && X509_STORE_CTX_init(ctx, set.ca_store.get(), peer.leaf, peer.chain) == 1) {
      X509_STORE_CTX_set_purpose(ctx, X509_PURPOSE_SSL_CLIENT);
      verified = X509_verify_cert(ctx) == 1;
    }
    X509_STORE_CTX_free(ctx);
    if (!verified) {
      if (r.reason != "wrong_token") r.reason = "untrusted_certificate";
      return r;
    }
    if (!set.allowed_subjects.empty() || !set.allowed_sans.empty()) {
      bool allowed = false;
      const X509_NAME* subj = X509_get_subject_name(peer.leaf);
      const std::string dn = rfc2253(subj);
      const std::string cn = common_name(subj);
      for (const auto& s : set.allowed_subjects)
        allowed = allowed || s == dn || (!cn.empty() && s == cn);
      if (!allowed && !set.allowed_sans.empty()) {
        for (const auto& san : subject_alt_names(peer.leaf)) {
          allowed = allowed || std::find(set.allowed_sans.begin(), set.allowed_sans.end(), san) !=
                                   set.allowed_sans.end();
        }
      }
      if (!allowed) {
        r.reason = "not_allowed";
        return r;
      }
    }
    r.status = auth_status::ok;
    r.reason.clear();
    r.identity =
        "cert:" + (peer.subject.empty() ? rfc2253(X509_get_subject_name(peer.leaf)) : peer.subject);
    return r;
  }
  return r;
}

}  // namespace topogate::server

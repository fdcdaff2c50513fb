#include "server/pki.hpp"

#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <memory>

#include "server/openssl_text.hpp"

namespace topogate::server {

namespace {

template <class T, void (*F)(T*)>
struct deleter {
  void operator()(T* p) const { F(p); }
};
using pkey_ptr = std::unique_ptr<EVP_PKEY, deleter<EVP_PKEY, EVP_PKEY_free>>;
using x509_ptr = std::unique_ptr<X509, deleter<X509, X509_free>>;
using bio_ptr = std::unique_ptr<BIO, deleter<BIO, BIO_free_all>>;

std::string ssl_error(std::string_view what) { return std::string(what) + ": " + openssl_errors(); }

std::string bio_string(BIO* bio) {
  char* data = nullptr;
  const long len = BIO_get_mem_data(bio, &data);
  return std::string(data, static_cast<std::size_t>(len > 0 ? len : 0));
}

bool add_ext(X509* cert, X509* issuer, int nid, const std::string& value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str());
  if (!ext) return false;
  const bool ok = X509_add_ext(cert, ext, -1) == 1;
  X509_EXTENSION_free(ext);
  return ok;
}

x509_ptr new_cert(EVP_PKEY* key, const std::string& cn, const std::string& org, int days) {
  x509_ptr cert(X509_new());
  if (!cert) return nullptr;
  X509_set_version(cert.get(), 2);
  unsigned char serial[16];
  RAND_bytes(serial, sizeof serial);
  serial[0] &= 0x7f;  // RFC 5280: a positive serial of at most 20 octets
  BIGNUM* bn = BN_bin2bn(serial, sizeof serial, nullptr);
  BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(cert.get()));
  BN_free(bn);
  // Backdated an hour so a client with a slightly slow clock accepts it at once.
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), -3600);
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), static_cast<long>(days) * 86400);
  X509_set_pubkey(cert.get(), key);
  X509_NAME* name = X509_get_subject_name(cert.get());
  if (!org.empty()) {
    X509_NAME_add_entry_by_txt(name, "O", MBSTRING_UTF8,
                               reinterpret_cast<const unsigned char*>(org.c_str()), -1, -1, 0);
  }
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8,
                             reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1, 0);
  return cert;
}

core::result<issued> finish(X509* cert, EVP_PKEY* key, EVP_PKEY* signer) {
  if (X509_sign(cert, signer, EVP_sha256()) <= 0)
    return core::fail(core::errc::internal, ssl_error("signing"));
  bio_ptr cb(BIO_new(BIO_s_mem())), kb(BIO_new(BIO_s_mem()));
  if (PEM_write_bio_X509(cb.get(), cert) != 1 ||
      PEM_write_bio_PrivateKey(kb.get(), key, nullptr, nullptr, 0, nullptr, nullptr) != 1) {
    return core::fail(core::errc::internal, ssl_error("PEM encoding"));
  }
  issued out;
  out.cert_pem = bio_string(cb.get());
  out.key_pem = bio_string(kb.get());
  return out;
}

}  // namespace

core::result<issued> make_ca(const std::string& common_name, int days) {
  pkey_ptr key(EVP_EC_gen("P-256"));
  if (!key) return core::fail(core::errc::internal, ssl_error("key generation"));
  auto cert = new_cert(key.get(), common_name, "topogate", days);
  if (!cert) return core::fail(core::errc::internal, ssl_error("new certificate"));
  X509_set_issuer_name(cert.get(), X509_get_subject_name(cert.get()));
  if (!add_ext(cert.get(), cert.get(), NID_basic_constraints, "critical,CA:TRUE,pathlen:0") ||
      !add_ext(cert.get(), cert.get(), NID_key_usage,
               "critical,keyCertSign,cRLSign,digitalSignature") ||
      !add_ext(cert.get(), cert.get(), NID_subject_key_identifier, "hash")) {
    return core::fail(core::errc::internal, ssl_error("CA extensions"));
  }
  return finish(cert.get(), key.get(), key.get());
}

core::result<issued> issue(const issued& ca, const cert_request& req) {
  bio_ptr cab(BIO_new_mem_buf(ca.cert_pem.data(), static_cast<int>(ca.cert_pem.size())));
  bio_ptr cak(BIO_new_mem_buf(ca.key_pem.data(), static_cast<int>(ca.key_pem.size())));
  x509_ptr ca_cert(PEM_read_bio_X509(cab.get(), nullptr, nullptr, nullptr));
  pkey_ptr ca_key(PEM_read_bio_PrivateKey(cak.get(), nullptr, nullptr, nullptr));
  if (!ca_cert || !ca_key)
    return core::fail(core::errc::invalid_argument, ssl_error("reading the CA"));
  pkey_ptr key(EVP_EC_gen("P-256"));
  if (!key) return core::fail(core::errc::internal, ssl_error("key generation"));
  auto cert = new_cert(key.get(), req.common_name, req.organization, req.days);
  if (!cert) return core::fail(core::errc::internal, ssl_error("new certificate"));
  X509_set_issuer_name(cert.get(), X509_get_subject_name(ca_cert.get()));
  std::string san;
  for (const auto& d : req.dns_names) san += (san.empty() ? "DNS:" : ",DNS:") + d;
  for (const auto& ip : req.ip_addresses) san += (san.empty() ? "IP:" : ",IP:") + ip;
  bool ok = add_ext(cert.get(), ca_cert.get(), NID_basic_constraints, "critical,CA:FALSE") &&
            add_ext(cert.get(), ca_cert.get(), NID_key_usage, "critical,digitalSignature") &&
            add_ext(cert.get(), ca_cert.get(), NID_ext_key_usage,
                    req.server ? "serverAuth" : "clientAuth") &&
            add_ext(cert.get(), ca_cert.get(), NID_subject_key_identifier, "hash") &&
            add_ext(cert.get(), ca_cert.get(), NID_authority_key_identifier, "keyid:always");
  if (ok && !san.empty()) ok = add_ext(cert.get(), ca_cert.get(), NID_subject_alt_name, san);
  if (!ok) return core::fail(core::errc::internal, ssl_error("certificate extensions"));
  return finish(cert.get(), key.get(), ca_key.get());
}

}  // namespace topogate::server

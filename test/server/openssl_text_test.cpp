// server/openssl_text: OpenSSL's words as the logs, identities and metrics use them.

#include "server/openssl_text.hpp"

#include <gtest/gtest.h>
#include <openssl/asn1.h>
#include <openssl/err.h>
#include <openssl/x509.h>

#include <memory>

namespace topogate::server {
namespace {

TEST(OpensslText, UnixSecondsOfACertificateTime) {
  const std::unique_ptr<ASN1_TIME, decltype(&ASN1_TIME_free)> t(ASN1_TIME_new(), ASN1_TIME_free);
  ASSERT_NE(ASN1_TIME_set(t.get(), 1700000000), nullptr);
  EXPECT_EQ(unix_seconds(t.get()), 1700000000.0);
  ASSERT_NE(ASN1_TIME_set(t.get(), 0), nullptr);  // the epoch itself, not "unreadable"
  EXPECT_EQ(unix_seconds(t.get()), 0.0);
  // GeneralizedTime past 2049, as long-lived CAs carry.
  ASSERT_EQ(ASN1_TIME_set_string(t.get(), "20610101000000Z"), 1);
  EXPECT_EQ(unix_seconds(t.get()), 2871763200.0);
  EXPECT_EQ(unix_seconds(nullptr), 0.0);
  ASSERT_EQ(ASN1_STRING_set(t.get(), "not a time", -1), 1);
  EXPECT_EQ(unix_seconds(t.get()), 0.0);
  ERR_clear_error();
}

TEST(OpensslText, Rfc2253MostSpecificFirst) {
  const std::unique_ptr<X509_NAME, decltype(&X509_NAME_free)> n(X509_NAME_new(), X509_NAME_free);
  const auto add = [&](const char* field, const char* value) {
    return X509_NAME_add_entry_by_txt(n.get(), field, MBSTRING_ASC,
                                      reinterpret_cast<const unsigned char*>(value), -1, -1, 0);
  };
  ASSERT_EQ(add("O", "ops"), 1);
  ASSERT_EQ(add("CN", "reader"), 1);
  EXPECT_EQ(rfc2253(n.get()), "CN=reader,O=ops");
}

TEST(OpensslText, ErrorsAreJoinedOldestFirstAndTheQueueEmptied) {
  ERR_clear_error();
  EXPECT_EQ(openssl_errors(), "unknown OpenSSL error");
  ERR_raise(ERR_LIB_X509, X509_R_CERT_ALREADY_IN_HASH_TABLE);
  ERR_raise(ERR_LIB_PEM, 108);
  const std::string text = openssl_errors();
  const auto first = text.find("cert already in hash table");
  ASSERT_NE(first, std::string::npos) << text;
  EXPECT_NE(text.find("; ", first), std::string::npos) << text;
  EXPECT_EQ(ERR_peek_error(), 0u);
}

}  // namespace
}  // namespace topogate::server

#pragma once
// OpenSSL's words, for error messages, identities and metrics: the thread's queued errors, a
// certificate name as RFC 2253 prints it, a certificate time as Unix seconds.

#include <openssl/x509.h>

#include <string>

namespace topogate::server {

// Every error queued on this thread, oldest first, joined by "; " (and the queue emptied);
// "unknown OpenSSL error" when there is none.
[[nodiscard]] std::string openssl_errors();
// "CN=reader,O=ops" (RFC 2253, most specific first); "" when it cannot be printed.
[[nodiscard]] std::string rfc2253(const X509_NAME* name);
// A certificate time (notBefore, notAfter) in Unix seconds; 0 when absent or unreadable.
[[nodiscard]] double unix_seconds(const ASN1_TIME* t);

}  // namespace topogate::server

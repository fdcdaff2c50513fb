#pragma once
// Development certificates made in-process with OpenSSL 3 (the demo, and tests that
// need a CA without shelling out): ECDSA P-256 keys, SHA-256 signatures, v3 extensions.

#include <string>
#include <vector>

#include "core/result.hpp"

namespace topogate::server {

struct issued {
  std::string cert_pem;
  std::string key_pem;
};

struct cert_request {
  std::string common_name;
  std::string organization;
  std::vector<std::string> dns_names;
  std::vector<std::string> ip_addresses;
  bool server = false;  // extendedKeyUsage serverAuth (else clientAuth)
  int days = 365;
};

// A self-signed CA. Fails with errc::internal (OpenSSL's reason in the message).
core::result<issued> make_ca(const std::string& common_name, int days);
// A leaf certificate signed by `ca`; errc::invalid_argument when `ca` does not read as a
// certificate and key, else as make_ca.
core::result<issued> issue(const issued& ca, const cert_request& req);

}  // namespace topogate::server

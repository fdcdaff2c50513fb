#include "kube/base64.hpp"

#include <openssl/evp.h>

namespace topogate::kube {

std::string base64_encode(std::string_view in) {
  // EVP_EncodeBlock writes a terminating NUL after the encoding.
  std::string out(4 * ((in.size() + 2) / 3) + 1, '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(in.data()),
                                static_cast<int>(in.size()));
  out.resize(n > 0 ? static_cast<std::size_t>(n) : 0);
  return out;
}

bool base64_decode(std::string_view in, std::string& out) {
  std::string clean;
  for (char c : in)
    if (c != '\n' && c != '\r' && c != ' ') clean.push_back(c);
  if (clean.size() % 4 != 0) return false;
  out.assign(clean.size() / 4 * 3, '\0');
  const int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(clean.data()),
                                static_cast<int>(clean.size()));
  if (n < 0) return false;
  // EVP_DecodeBlock counts the padding as zero bytes.
  std::size_t len = static_cast<std::size_t>(n);
  if (!clean.empty() && clean.back() == '=') --len;
  if (clean.size() > 1 && clean[clean.size() - 2] == '=') --len;
  out.resize(len);
  return true;
}

}  // namespace topogate::kube

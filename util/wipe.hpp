#pragma once
// Wiping what held a secret before its memory is reused or freed (OPENSSL_cleanse: a write
// the compiler may not drop). Used by the Kubernetes client (kube/: a TokenReview carries the
// scraper's token, and the API's answer echoes it), the metrics token reviewer, and the
// server's sessions (a request's Authorization header).

#include <openssl/crypto.h>

#include <boost/beast/core/flat_buffer.hpp>

namespace topogate::util {

// Wipes a read buffer's whole storage: what it holds, and what it held before being consumed
// or moved to the front. The buffer is left empty, its storage kept.
inline void wipe_storage(boost::beast::flat_buffer& buffer) {
  // prepare() of all the free room moves what is held to the front: the two regions then
  // cover the whole storage.
  const auto room = buffer.prepare(buffer.capacity() - buffer.size());
  OPENSSL_cleanse(room.data(), room.size());
  const auto held = buffer.data();
  OPENSSL_cleanse(held.data(), held.size());
  buffer.clear();
}

// Wipes contiguous bytes: a std::string, a simdjson::padded_string, a std::span<char>.
template <class Bytes>
void wipe(Bytes& bytes) {
  OPENSSL_cleanse(bytes.data(), bytes.size());
}
inline void wipe(boost::beast::flat_buffer& buffer) { wipe_storage(buffer); }

// Wipes `bytes` when the scope ends, however it ends.
template <class Bytes>
class wiped_at_exit {
 public:
  explicit wiped_at_exit(Bytes& bytes) : bytes_(bytes) {}
  wiped_at_exit(const wiped_at_exit&) = delete;
  wiped_at_exit& operator=(const wiped_at_exit&) = delete;
  ~wiped_at_exit() { wipe(bytes_); }

 private:
  Bytes& bytes_;
};

}  // namespace topogate::util

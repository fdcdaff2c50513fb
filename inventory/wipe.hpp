#pragma once
// Wiping what held a secret before its memory is reused or freed (OPENSSL_cleanse: a write
// the compiler may not drop). Used by the Kubernetes client (a TokenReview carries the
// scraper's token, and the API's answer echoes it) and by the server's sessions (a request's
// Authorization header).

#include <openssl/crypto.h>

#include <boost/beast/core/flat_buffer.hpp>

namespace topogate::inventory {

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

}  // namespace topogate::inventory

#pragma once
// The transport contract: what http_session (http_session.hpp) needs from the layer between
// it and its socket. Two transports implement it: TLS (transport_tls.cpp, OpenSSL through
// tls_channel) and plain TCP (transport_plain.cpp, the health listener). The session owns
// the socket and the outgoing buffer (wire_); a transport turns the socket's bytes into
// plaintext and plaintext into the bytes the session writes.

#include <boost/beast/core/error.hpp>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>
#include <utility>

namespace topogate::server {

// What a transport's read side has for the session.
enum class read_status : std::uint8_t {
  ok,         // plaintext was copied out
  want_read,  // nothing buffered: read the socket (flush_then_fill)
  closed,     // the peer ended the stream cleanly (TLS close_notify)
  failed      // the stream is broken (a TLS error); nothing more can be read
};

// The completion flush_then_fill is checked with: any callable taking the error_code.
struct fill_handler_archetype {
  void operator()(boost::beast::error_code) const {}
};

template <class T>
concept transport = requires(T& t, const T& ct, char* dst, std::size_t len, std::size_t& got,
                             std::string_view plain, fill_handler_archetype handler) {
  // The connection's owner: every completion the session starts holds it.
  { t.shared_from_this() } -> std::same_as<std::shared_ptr<T>>;

  // Input already taken off the socket that the session has not read out yet (ciphertext,
  // a buffered record, decrypted or raw bytes). A request that has arrived this far is
  // answered by a draining server; an idle connection with nothing pending is closed.
  { ct.transport_pending() } -> std::same_as<bool>;

  // Copies up to `len` bytes of plaintext into `dst` (count in `got`) without touching the
  // socket; want_read when nothing is buffered.
  { t.read_plain(dst, len, got) } -> std::same_as<read_status>;

  // Appends the wire form of `plain` (TLS records, or the bytes themselves) to the
  // session's outgoing buffer. False when the transport can no longer write.
  { t.seal(plain) } -> std::same_as<bool>;

  // Writes whatever the transport queued while reading (a TLS alert or KeyUpdate), then
  // reads the socket once into the transport's input, then calls handler(ec) (eof when the
  // peer's stream ended).
  t.flush_then_fill(std::move(handler));

  // Ends the connection the way the transport ends it (TLS: close_notify, then a bounded
  // wait for the peer's; plain: a FIN), closing the socket when done. Called once, in the
  // session's shutting_down state.
  t.close();
};

}  // namespace topogate::server

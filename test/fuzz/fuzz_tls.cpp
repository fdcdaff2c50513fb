// A connection's TLS layer (server/tls.cpp, tls_channel) against what a client can send.
// The channel sits between the socket and the HTTP parser: every byte a client sends
// passes through its input buffer and OpenSSL before the request parser sees it, and every
// response byte leaves through its write path. Byte 0 of the input picks the scenario:
//   raw     the rest is the client's byte stream (seeds: real ClientHellos, an HTTP request),
//           handed to the channel in pieces whose sizes the input picks, as socket reads;
//   client  a real OpenSSL client (TLS 1.3, or 1.2 when bit 1 is set) completes the
//           handshake, then the input scripts the connection: the client writes pieces of
//           up to 40 000 bytes (several records), its ciphertext reaches the channel in
//           pieces of any size, the channel reads into buffers of any size and answers with
//           writes of its own, and either side may close;
//   tamper  as client, with one byte of the client's ciphertext after the handshake changed.
// FUZZ_TLS_TRACE=1 prints a line per client/tamper input (versions, bytes each way, closes,
// failure), to see what a corpus reaches: fuzz_tls -runs=0 CORPUS.
// Properties beyond "no crash", for every scenario:
//   - the channel never waits for input it has no room for (a session would wait forever
//     on a read of zero bytes): `want_read` with a full input buffer is a failure;
//   - after `failed` it never hands out data again;
// client: what the channel reads is exactly what the client wrote, in order; what it
//   writes, the client reads back exactly; a close_notify from either side reaches the
//   other as a clean close, after all the data;
// tamper: the channel never hands out a byte the client did not write (what it reads is
//   always a prefix of the client's data).
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <string_view>

#include "fuzz_common.hpp"
#include "server/pki.hpp"
#include "server/tls.hpp"
#include "test/fixtures/tls_memory_client.hpp"

namespace {

using namespace topogate;
namespace fs = std::filesystem;
using status = server::tls_channel::status;

struct world {
  std::shared_ptr<boost::asio::ssl::context> server_ctx;
  SSL_CTX* client_ctx = nullptr;

  world() {
    const fs::path base = fs::exists("/dev/shm") ? fs::path("/dev/shm") : fs::temp_directory_path();
    const fs::path dir = base / ("topogate-fuzz-tls-" + std::to_string(::getpid()));
    fs::create_directories(dir);
    const server::issued ca = fuzz::value_of(server::make_ca("fuzz CA", 30), "make CA");
    const server::issued leaf = fuzz::value_of(
        server::issue(ca, {"localhost", "fuzz", {"localhost"}, {}, true, 30}), "issue");
    std::ofstream(dir / "server.crt") << leaf.cert_pem;
    std::ofstream(dir / "server.key") << leaf.key_pem;
    std::ofstream(dir / "ca.crt") << ca.cert_pem;
    // As serve builds it: TLS 1.2 minimum, session tickets on (TLS 1.3 sends them after
    // the handshake, so the client's reads process post-handshake messages too).
    server_ctx = fuzz::value_of(
        server::make_tls_context({{(dir / "server.crt").string(), (dir / "server.key").string()}},
                                 "1.2", {}, nullptr, true),
        "server context");
    client_ctx = SSL_CTX_new(TLS_client_method());
    fuzz::check(client_ctx != nullptr, "client context");
    SSL_CTX_load_verify_locations(client_ctx, (dir / "ca.crt").c_str(), nullptr);
    SSL_CTX_set_verify(client_ctx, SSL_VERIFY_PEER, nullptr);
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
};

world& the_world() {
  static world w;
  return w;
}

// The input after byte 0, read front to back; zeros once it runs out.
class script {
 public:
  script(const std::uint8_t* data, std::size_t size) : data_(data), size_(size) {}
  [[nodiscard]] bool done() const { return pos_ >= size_; }
  std::uint8_t byte() { return pos_ < size_ ? data_[pos_++] : 0; }
  std::size_t u16() { return (static_cast<std::size_t>(byte()) << 8) | byte(); }
  // A socket read's or a read buffer's size: mostly small (records split everywhere),
  // sometimes whole records at once.
  std::size_t piece() {
    const std::uint8_t b = byte();
    return b < 192 ? 1 + b % 64 : 1 + static_cast<std::size_t>(b - 192) * 300;
  }

 private:
  const std::uint8_t* data_;
  std::size_t size_;
  std::size_t pos_ = 0;
};

// The byte at `offset` of a stream of application data: a pattern whose period is no
// multiple of a record size, so a record delivered twice or out of order shows.
char pattern(std::size_t offset) {
  return static_cast<char>((offset * 131 + (offset >> 7)) & 0xff);
}

// Hands up to `limit` bytes of `pending` to the channel, as a socket read would (after
// the channel said `want_read`). Fails the property when the channel has no room at all:
// a session would read zero bytes, and wait.
std::size_t deliver(server::tls_channel& ch, std::string& pending, std::size_t limit) {
  auto [space, room] = ch.input_space();
  fuzz::check(room > 0, "the channel offers no input room");
  fuzz::check(room <= server::tls_channel::input_capacity, "input room beyond the buffer");
  const std::size_t n = std::min({room, limit, pending.size()});
  std::memcpy(space, pending.data(), n);
  ch.commit(n);
  pending.erase(0, n);
  return n;
}

void run_raw(script& in) {
  world& w = the_world();
  server::tls_channel ch(w.server_ctx->native_handle());
  fuzz::check(ch.valid(), "channel");
  std::string wire;
  ch.set_output(&wire);
  std::string stream;
  while (!in.done()) stream.push_back(static_cast<char>(in.byte()));
  std::string pending = stream;
  // The pieces' sizes are read from the same bytes again: the stream and its chunking
  // come from one input.
  script sizes(reinterpret_cast<const std::uint8_t*>(stream.data()), stream.size());
  bool established = false;
  char buf[4096];
  while (!pending.empty()) {
    deliver(ch, pending, sizes.done() ? pending.size() : sizes.piece());
    status st;
    if (!established) {
      st = ch.handshake();
      if (st == status::ok) established = true;
    }
    if (established) {
      std::size_t got = 0;
      do st = ch.read(buf, sizeof buf, got);
      while (st == status::ok);
    }
    if (st == status::failed || st == status::closed) {
      std::size_t got = 0;
      fuzz::check(ch.read(buf, sizeof buf, got) != status::ok || got == 0, "data after a failure");
      return;
    }
    fuzz::check(wire.size() < (1u << 20), "unbounded output to an unauthenticated client");
  }
}

void run_client(script& in, bool tls12, bool tamper) {
  world& w = the_world();
  ERR_clear_error();
  test_fixtures::tls_memory_client client(w.client_ctx, tls12 ? TLS1_2_VERSION : 0, "localhost");
  fuzz::check(client.ssl() != nullptr, "client SSL");
  server::tls_channel ch(w.server_ctx->native_handle());
  fuzz::check(ch.valid(), "channel");
  std::string wire;  // what the channel wrote, not yet given to the client
  ch.set_output(&wire);
  std::string pending;  // what the client wrote, not yet given to the channel

  // The handshake, with the client's flights cut into pieces.
  bool client_done = false, server_done = false;
  for (int round = 0; round < 64 && !(client_done && server_done); ++round) {
    if (!client_done) {
      const int c = SSL_do_handshake(client.ssl());
      client_done = c == 1;
      fuzz::check(client_done || SSL_get_error(client.ssl(), c) == SSL_ERROR_WANT_READ,
                  "client handshake failed");
    }
    client.take_output(pending);
    while (!server_done && !pending.empty()) {
      deliver(ch, pending, in.piece());
      const status st = ch.handshake();
      fuzz::check(st == status::ok || st == status::want_read, "channel handshake failed");
      server_done = st == status::ok;
    }
    if (!server_done && pending.empty()) {
      const status st = ch.handshake();
      fuzz::check(st == status::ok || st == status::want_read, "channel handshake failed");
      server_done = st == status::ok;
    }
    client.give_input(wire);
  }
  fuzz::check(client_done && server_done, "the handshake did not finish");
  fuzz::check(pending.empty(), "client bytes left over after the handshake");

  // Which byte of the client's later ciphertext is changed (tamper), and how.
  const std::size_t tamper_at = tamper ? in.u16() : SIZE_MAX;
  const auto flip = static_cast<char>(in.byte() | 1);
  std::size_t client_bytes = 0;  // ciphertext the client sent after the handshake
  bool tampered = false;
  auto take_client = [&] {
    const std::size_t before = pending.size();
    client.take_output(pending);
    const std::size_t added = pending.size() - before;
    if (tamper_at >= client_bytes && tamper_at < client_bytes + added) {
      pending[before + (tamper_at - client_bytes)] ^= flip;
      tampered = true;
    }
    client_bytes += added;
  };

  std::size_t sent = 0, received = 0;       // client -> channel application data
  std::size_t answered = 0, read_back = 0;  // channel -> client application data
  bool client_closed = false, channel_closed = false, channel_failed = false, server_closed = false;
  bool client_saw_close = false;
  // As a session: the socket is read only when the channel asked for input (`want_read`);
  // a session that stopped reading with a request complete reads the channel again first.
  bool wants_input = true;
  std::string buf, piece;

  // The session's reads: until OpenSSL wants more input, or `max_reads` (a session that
  // stops with a request complete, leaving ciphertext buffered for the next one).
  auto channel_reads = [&](std::size_t size, std::size_t max_reads = SIZE_MAX) {
    buf.resize(size);
    wants_input = false;
    for (std::size_t reads = 0; reads < max_reads; ++reads) {
      std::size_t got = 0;
      const status st = ch.read(buf.data(), buf.size(), got);
      if (st == status::ok) {
        fuzz::check(!channel_failed && !channel_closed, "data after a failure or a close");
        fuzz::check(got > 0 && got <= buf.size(), "read size");
        for (std::size_t i = 0; i < got; ++i)
          fuzz::check(received + i < sent && buf[i] == pattern(received + i),
                      "the channel read bytes the client never wrote");
        received += got;
        continue;
      }
      if (st == status::failed) {
        fuzz::check(tampered, "the channel failed on an honest client",
                    std::to_string(ERR_GET_REASON(ch.error())));
        channel_failed = true;
      }
      if (st == status::closed) {
        fuzz::check(!tampered || client_closed, "a close the client never sent");
        fuzz::check(received == sent, "a close before all the data");
        channel_closed = true;
      }
      if (st == status::want_read) {
        auto [space, room] = ch.input_space();
        (void)space;
        fuzz::check(room > 0, "the channel waits for input it has no room for");
        wants_input = true;
      }
      return;
    }
  };
  auto client_reads = [&] {
    client.give_input(wire);
    char b[4096];
    for (;;) {
      std::size_t got = 0;
      const int r = SSL_read_ex(client.ssl(), b, sizeof b, &got);
      if (r != 1) {
        const int e = SSL_get_error(client.ssl(), r);
        if (e == SSL_ERROR_ZERO_RETURN) {
          fuzz::check(server_closed && read_back == answered, "the client saw a close too early");
          client_saw_close = true;
        } else {
          // After a failure the channel's last record is its fatal alert.
          fuzz::check(e == SSL_ERROR_WANT_READ || channel_failed,
                      "the client failed reading the channel's records");
        }
        ERR_clear_error();
        return;
      }
      for (std::size_t i = 0; i < got; ++i)
        fuzz::check(read_back + i < answered && b[i] == pattern(read_back + i),
                    "the client read bytes the channel never wrote");
      read_back += got;
    }
  };

  for (int op = 0; op < 64 && !in.done() && !channel_failed; ++op) {
    switch (in.byte() % 8) {
      case 0:
      case 1:
      case 2: {  // the client writes
        if (client_closed || client_saw_close) break;
        const std::size_t n = 1 + in.u16() % 40000;
        piece.resize(n);
        for (std::size_t i = 0; i < n; ++i) piece[i] = pattern(sent + i);
        std::size_t written = 0;
        fuzz::check(SSL_write_ex(client.ssl(), piece.data(), n, &written) == 1 && written == n,
                    "client write");
        sent += n;
        take_client();
        break;
      }
      case 3:
      case 4: {  // a socket read on the channel's side, then the session's reads
        if (pending.empty() && wants_input) break;
        if (wants_input) deliver(ch, pending, in.piece());
        const std::size_t size = in.piece();
        const std::uint8_t reads = in.byte();
        channel_reads(size, reads < 64 ? 1 + reads % 4 : SIZE_MAX);
        break;
      }
      case 5: {  // the channel answers
        if (server_closed || channel_closed) break;
        const std::size_t n = 1 + in.u16() % 40000;
        piece.resize(n);
        for (std::size_t i = 0; i < n; ++i) piece[i] = pattern(answered + i);
        fuzz::check(ch.write(piece), "channel write");
        answered += n;
        client_reads();
        break;
      }
      case 6: {  // the client closes
        if (client_closed) break;
        SSL_shutdown(client.ssl());
        ERR_clear_error();
        client_closed = true;
        take_client();
        break;
      }
      case 7: {  // the channel closes
        if (server_closed) break;
        ch.close_notify();
        server_closed = true;
        client_reads();
        break;
      }
    }
  }

  // Everything still in flight arrives.
  while (!pending.empty() && !channel_failed && !channel_closed) {
    if (wants_input) deliver(ch, pending, in.done() ? pending.size() : in.piece());
    channel_reads(16384);
  }
  if (!channel_failed && !channel_closed) channel_reads(16384);
  client_reads();
  if (!channel_failed)
    fuzz::check(read_back == answered, "the client did not get all of the channel's data");
  if (std::getenv("FUZZ_TLS_TRACE") != nullptr) {
    std::fprintf(stderr, "%s %s sent %zu read %zu answered %zu read back %zu%s%s%s%s\n",
                 tls12 ? "1.2" : "1.3", tamper ? (tampered ? "tampered" : "untampered") : "client",
                 sent, received, answered, read_back, client_closed ? " client-close" : "",
                 server_closed ? " server-close" : "", channel_closed ? " seen-close" : "",
                 channel_failed ? " failed" : "");
  }
  if (!tampered) {
    fuzz::check(received == sent, "the channel did not read all of the client's data");
    fuzz::check(channel_closed == client_closed,
                "the client's close_notify was not seen as a clean close");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  script in(data + 1, size - 1);
  switch (data[0] % 3) {
    case 0:
      run_raw(in);
      break;
    case 1:
      run_client(in, (data[0] & 0x10) != 0, false);
      break;
    default:
      run_client(in, (data[0] & 0x10) != 0, true);
      break;
  }
  ERR_clear_error();
  return 0;
}

// tls_channel against a real OpenSSL client: the bytes each side writes are handed to the
// other in memory, in pieces as a socket may deliver them, so every path of the channel
// (handshake flights, records split across reads, close_notify, a fatal alert) runs
// without a socket.

#include <gtest/gtest.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <utility>

#include "server/pki.hpp"
#include "server/tls.hpp"
#include "test/fixtures/tls_memory_client.hpp"

namespace topogate::server {
namespace {

namespace fs = std::filesystem;

struct TlsChannel : ::testing::Test {
  void SetUp() override {
    dir = fs::temp_directory_path() /
          ("tls-channel-" + std::to_string(::getpid()) + "-" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir);
    auto made = make_ca("channel test CA", 2);
    ASSERT_TRUE(made) << made.error().message;
    ca = std::move(*made);
    cert_request req;
    req.common_name = "localhost";
    req.dns_names = {"localhost"};
    req.server = true;
    const auto leaf = issue(ca, req);
    ASSERT_TRUE(leaf) << leaf.error().message;
    write(dir / "server.crt", leaf->cert_pem);
    write(dir / "server.key", leaf->key_pem);
    write(dir / "ca.crt", ca.cert_pem);
    auto context =
        make_tls_context({{(dir / "server.crt").string(), (dir / "server.key").string()}}, "1.2",
                         {}, nullptr, false);
    ASSERT_TRUE(context) << context.error().message;
    server_ctx = std::move(*context);

    client_ctx = SSL_CTX_new(TLS_client_method());
    ASSERT_NE(client_ctx, nullptr);
    SSL_CTX_load_verify_locations(client_ctx, (dir / "ca.crt").c_str(), nullptr);
    SSL_CTX_set_verify(client_ctx, SSL_VERIFY_PEER, nullptr);
  }

  void TearDown() override {
    client.reset();
    if (client_ctx) SSL_CTX_free(client_ctx);
    std::error_code ec;
    fs::remove_all(dir, ec);
  }

  static void write(const fs::path& p, const std::string& text) { std::ofstream(p) << text; }

  void make_client(int max_version = 0) {
    client =
        std::make_unique<test_fixtures::tls_memory_client>(client_ctx, max_version, "localhost");
  }

  // Moves up to `limit` bytes of what the client wrote into the channel's input.
  std::size_t feed(tls_channel& ch, std::size_t limit = 1 << 20) {
    if (client) client->take_output(pending_input);
    auto [space, room] = ch.input_space();
    const std::size_t n = std::min({room, limit, pending_input.size()});
    std::memcpy(space, pending_input.data(), n);
    ch.commit(n);
    pending_input.erase(0, n);
    return n;
  }

  void channel_to_client(std::string& records) { client->give_input(records); }

  // Runs both handshakes to completion; false if either side failed.
  bool handshake(tls_channel& ch, std::string& records, std::size_t piece = 1 << 20) {
    for (int round = 0; round < 100000; ++round) {
      const int c = SSL_do_handshake(client->ssl());
      if (c != 1 && SSL_get_error(client->ssl(), c) != SSL_ERROR_WANT_READ) return false;
      feed(ch, piece);
      const auto s = ch.handshake();
      channel_to_client(records);
      if (s == tls_channel::status::failed || s == tls_channel::status::closed) return false;
      if (c == 1 && s == tls_channel::status::ok) return true;
    }
    return false;
  }

  // A client and a channel with the handshake done (bytes handed over `piece` at a time).
  bool connect(int max_version = 0, std::size_t piece = 1 << 20) {
    make_client(max_version);
    channel = std::make_unique<tls_channel>(server_ctx->native_handle());
    channel->set_output(&wire);
    return channel->valid() && handshake(*channel, wire, piece);
  }

  // Reads everything the channel can decrypt now.
  std::string drain_plain(tls_channel& ch, tls_channel::status& last) {
    std::string out;
    char buf[512];
    for (;;) {
      std::size_t got = 0;
      last = ch.read(buf, sizeof buf, got);
      if (last != tls_channel::status::ok) return out;
      out.append(buf, got);
    }
  }

  fs::path dir;
  issued ca;
  std::shared_ptr<boost::asio::ssl::context> server_ctx;
  SSL_CTX* client_ctx = nullptr;
  std::unique_ptr<test_fixtures::tls_memory_client> client;
  std::string pending_input;
  std::unique_ptr<tls_channel> channel;
  std::string wire;  // what the channel wrote for the client
};

TEST_F(TlsChannel, HandshakeThenRequestAndResponse) {
  ASSERT_TRUE(connect());
  tls_channel& ch = *channel;
  EXPECT_STREQ(SSL_get_version(ch.native_handle()), "TLSv1.3");

  const std::string request = "GET /livez HTTP/1.1\r\nHost: x\r\n\r\n";
  ASSERT_EQ(SSL_write(client->ssl(), request.data(), static_cast<int>(request.size())),
            static_cast<int>(request.size()));
  EXPECT_FALSE(ch.pending());
  feed(ch);
  EXPECT_TRUE(ch.pending());  // ciphertext taken off the "socket", not yet read out
  tls_channel::status last{};
  EXPECT_EQ(drain_plain(ch, last), request);
  EXPECT_EQ(last, tls_channel::status::want_read);
  EXPECT_FALSE(ch.pending());

  // A response larger than one record comes out as several records the client reads back.
  const std::string response(40000, 'r');
  ASSERT_TRUE(ch.write(response));
  EXPECT_GT(wire.size(), response.size());
  channel_to_client(wire);
  std::string got(response.size(), '\0');
  std::size_t total = 0;
  while (total < got.size()) {
    const int n = SSL_read(client->ssl(), got.data() + total, static_cast<int>(got.size() - total));
    ASSERT_GT(n, 0);
    total += static_cast<std::size_t>(n);
  }
  EXPECT_EQ(got, response);
}

TEST_F(TlsChannel, InputArrivingOneByteAtATime) {
  ASSERT_TRUE(connect(TLS1_2_VERSION, 1));
  tls_channel& ch = *channel;
  EXPECT_STREQ(SSL_get_version(ch.native_handle()), "TLSv1.2");
  const std::string request(3000, 'q');
  ASSERT_EQ(SSL_write(client->ssl(), request.data(), static_cast<int>(request.size())),
            static_cast<int>(request.size()));
  std::string plain;
  tls_channel::status last{};
  for (int i = 0; i < 10000 && plain.size() < request.size(); ++i) {
    feed(ch, 1);
    plain += drain_plain(ch, last);
    ASSERT_NE(last, tls_channel::status::failed);
  }
  EXPECT_EQ(plain, request);
}

// Records of the largest size, three in a row: one fits the input buffer with room to spare,
// and more than one is taken in as OpenSSL reads them out.
TEST_F(TlsChannel, LargestRecordsFromTheClient) {
  ASSERT_TRUE(connect());
  tls_channel& ch = *channel;
  const std::string request(3 * tls_record_plaintext, 'L');
  ASSERT_EQ(SSL_write(client->ssl(), request.data(), static_cast<int>(request.size())),
            static_cast<int>(request.size()));
  std::string plain;
  tls_channel::status last{};
  for (int i = 0; i < 100 && plain.size() < request.size(); ++i) {
    feed(ch);
    plain += drain_plain(ch, last);
    ASSERT_EQ(last, tls_channel::status::want_read);
  }
  EXPECT_EQ(plain, request);
  EXPECT_TRUE(pending_input.empty());
}

TEST_F(TlsChannel, CloseNotifyBothWays) {
  ASSERT_TRUE(connect());
  tls_channel& ch = *channel;
  ch.close_notify();
  ASSERT_FALSE(wire.empty());
  channel_to_client(wire);
  char buf[16];
  EXPECT_EQ(SSL_read(client->ssl(), buf, sizeof buf), 0);
  EXPECT_EQ(SSL_get_error(client->ssl(), 0), SSL_ERROR_ZERO_RETURN);
  EXPECT_EQ(SSL_shutdown(client->ssl()), 1);  // the client's answer
  feed(ch);
  tls_channel::status last{};
  EXPECT_EQ(drain_plain(ch, last), "");
  EXPECT_EQ(last, tls_channel::status::closed);
}

TEST_F(TlsChannel, GarbageAfterTheHandshakeFails) {
  ASSERT_TRUE(connect());
  tls_channel& ch = *channel;
  // An application-data record whose ciphertext does not authenticate.
  const unsigned char forged[] = {0x17, 0x03, 0x03, 0x00, 0x20, 1,  2,  3,  4,  5,  6,  7,  8,
                                  9,    10,   11,   12,   13,   14, 15, 16, 17, 18, 19, 20, 21,
                                  22,   23,   24,   25,   26,   27, 28, 29, 30, 31, 32};
  auto [space, room] = ch.input_space();
  ASSERT_GE(room, sizeof forged);
  std::memcpy(space, forged, sizeof forged);
  ch.commit(sizeof forged);
  tls_channel::status last{};
  drain_plain(ch, last);
  EXPECT_EQ(last, tls_channel::status::failed);
  EXPECT_NE(ch.error(), 0u);
  EXPECT_FALSE(wire.empty());  // the bad_record_mac alert for the client
}

TEST_F(TlsChannel, ForeignErrorsOnTheThreadDoNotFailARead) {
  ASSERT_TRUE(connect());
  tls_channel& ch = *channel;
  // Other OpenSSL work on this thread (a PEM file that did not parse) leaves an error queued.
  BIO* junk = BIO_new_mem_buf("not a certificate", -1);
  EXPECT_EQ(PEM_read_bio_X509(junk, nullptr, nullptr, nullptr), nullptr);
  BIO_free(junk);
  ASSERT_NE(ERR_peek_error(), 0u);
  char buf[64];
  std::size_t got = 0;
  EXPECT_EQ(ch.read(buf, sizeof buf, got), tls_channel::status::want_read);
}

TEST_F(TlsChannel, PlainHttpInsteadOfAClientHelloFails) {
  tls_channel ch(server_ctx->native_handle());
  ch.set_output(&wire);
  const std::string http = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
  auto [space, room] = ch.input_space();
  std::memcpy(space, http.data(), http.size());
  ch.commit(http.size());
  EXPECT_EQ(ch.handshake(), tls_channel::status::failed);
  EXPECT_EQ(ERR_GET_REASON(ch.error()), SSL_R_HTTP_REQUEST);
}

TEST_F(TlsChannel, ARecordLongerThanTheMaximumFails) {
  tls_channel ch(server_ctx->native_handle());
  ch.set_output(&wire);
  auto [space, room] = ch.input_space();
  EXPECT_EQ(room, tls_channel::input_capacity);
  // A handshake record header announcing 18 433 bytes (the limit is 16 384 + 2 048): refused
  // at once, never waited for.
  const unsigned char header[] = {0x16, 0x03, 0x01, 0x48, 0x01};
  std::memcpy(space, header, sizeof header);
  ch.commit(sizeof header);
  EXPECT_EQ(ch.handshake(), tls_channel::status::failed);
}

}  // namespace
}  // namespace topogate::server

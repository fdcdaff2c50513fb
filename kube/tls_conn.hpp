#pragma once
// One TLS connection that the calling thread reads and writes itself: a non-blocking socket
// under OpenSSL's own socket BIO, waited on with poll(2) together with a wake-up descriptor
// (so another thread can stop it at once) and a deadline. A watch carries one small record
// per event for hours; through Asio's SSL stream each event costs a reactor handler, a
// coroutine resumption, two SSL_read calls and a copy through a memory BIO pair, where here it
// costs a poll, a recv and one SSL_read. The client's watches use it (client.cpp); its
// requests stay on Asio.

#include <openssl/ssl.h>

#include <chrono>
#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.hpp"

namespace topogate::kube {

class tls_conn {
 public:
  using clock = std::chrono::steady_clock;

  // How a wait, a read or a write ended. `eof`: the peer's close_notify (a read only).
  enum class status { ok, eof, timeout, cancelled, failed };
  struct outcome {
    status st = status::ok;
    std::size_t bytes = 0;  // ok: how many were read or written
    std::string error;      // failed: what went wrong (OpenSSL's or the system's words)
  };

  tls_conn();
  ~tls_conn();
  tls_conn(const tls_conn&) = delete;
  tls_conn& operator=(const tls_conn&) = delete;

  // Stops the wait in progress, and every later one, with status::cancelled. Any thread.
  void wake() noexcept;

  // Connects to the first of `addresses` (numeric IPv4 or IPv6) that answers on `port`, by
  // `deadline`. The error is the last address's ("Connection refused", "timed out",
  // "cancelled").
  core::result<void> connect(const std::vector<std::string>& addresses, unsigned short port,
                             clock::time_point deadline);

  // The TLS handshake over the connection, with a session of `ctx` that `prepare` has set up
  // (the names to verify, SNI).
  core::result<void> handshake(SSL_CTX* ctx, const std::function<core::result<void>(SSL*)>& prepare,
                               clock::time_point deadline);

  // Writes all of `data` by `deadline`.
  outcome write_all(std::string_view data, clock::time_point deadline);

  // Reads what the next record(s) carry into `into` (at most `size` bytes): waits for the
  // socket only when OpenSSL holds nothing to decrypt, so a record costs one poll and one recv.
  outcome read_some(char* into, std::size_t size, clock::time_point deadline);

  // Under a stream of records, waits for the socket at most once per `pace`: the records that
  // arrive meanwhile are read together (one wake-up and one recv for all of them), each later
  // by at most `pace`. Zero (the default): each record is read as it arrives.
  // A stream is records less than `pace` apart: the pause starts when one comes within `pace`
  // of the wake-up before it (the call counts as one) and ends when a pause gathered nothing.
  // Records further apart are each read as it arrives, with one wake-up and no pause (a pause
  // would be a wake-up more); cancel() ends a pause at once.
  void set_read_pace(clock::duration pace) noexcept {
    pace_ = pace;
    last_ready_ = clock::now();
    streaming_ = false;
    draining_ = false;
  }

 private:
  // Waits for the socket to be readable (`write`: writable), the wake-up or the deadline.
  status wait(bool write, clock::time_point deadline);
  // Waits for the wake-up alone until `until`: ok once it passed.
  status hold(clock::time_point until);
  // The error text for an SSL call that failed with `code` (SSL_get_error), OpenSSL's queue
  // cleared.
  [[nodiscard]] std::string ssl_failure(int code) const;

  int fd_ = -1;
  int wake_fd_ = -1;        // an eventfd
  std::string wake_error_;  // why it could not be made
  SSL* ssl_ = nullptr;
  clock::duration pace_{};
  clock::time_point last_ready_{};  // when a wait last found the socket readable
  bool streaming_ = false;          // paced: records came within `pace` of each other
  bool draining_ = false;           // paced: reading what that wait found, until none is left
};

}  // namespace topogate::kube

#include "kube/tls_conn.hpp"

#include <openssl/err.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <boost/asio/ip/tcp.hpp>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <limits>

namespace topogate::kube {

namespace {

std::string system_text(int err) { return std::strerror(err); }

// The poll timeout, in whole milliseconds rounded up, until `deadline`.
int timeout_ms(tls_conn::clock::time_point deadline) {
  const auto left = deadline - tls_conn::clock::now();
  if (left <= tls_conn::clock::duration::zero()) return 0;
  const auto ms = std::chrono::ceil<std::chrono::milliseconds>(left).count();
  return static_cast<int>(std::min<long long>(ms, std::numeric_limits<int>::max()));
}

// OpenSSL's socket BIO writes with write(2): to a peer that has closed, that raises SIGPIPE,
// which ends the process unless it ignores the signal. This one is the socket BIO with its
// writes made by send(2) with MSG_NOSIGNAL (EPIPE is then an error like any other).
int send_without_sigpipe(BIO* b, const char* data, int len) {
  int fd = -1;
  BIO_get_fd(b, &fd);
  errno = 0;
  const auto n = ::send(fd, data, static_cast<std::size_t>(std::max(len, 0)), MSG_NOSIGNAL);
  BIO_clear_retry_flags(b);
  if (n <= 0 && BIO_sock_should_retry(static_cast<int>(n)) != 0) BIO_set_retry_write(b);
  return static_cast<int>(n);
}

const BIO_METHOD* socket_without_sigpipe() {
  static BIO_METHOD* const method = [] {
    const BIO_METHOD* s = BIO_s_socket();
    BIO_METHOD* m = BIO_meth_new(BIO_TYPE_SOCKET, "socket without SIGPIPE");
    if (m == nullptr) return m;
    BIO_meth_set_write(m, send_without_sigpipe);
    BIO_meth_set_read(m, BIO_meth_get_read(s));
    BIO_meth_set_puts(m, BIO_meth_get_puts(s));
    BIO_meth_set_ctrl(m, BIO_meth_get_ctrl(s));
    BIO_meth_set_create(m, BIO_meth_get_create(s));
    BIO_meth_set_destroy(m, BIO_meth_get_destroy(s));
    return m;
  }();
  return method;
}

// The outcome of a wait that did not end with the socket ready (poll's errno when it failed).
tls_conn::outcome not_ready(tls_conn::status w, std::size_t done) {
  return {w, done, w == tls_conn::status::failed ? "poll: " + system_text(errno) : std::string()};
}

}  // namespace

tls_conn::tls_conn() : wake_fd_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
  if (wake_fd_ < 0) wake_error_ = system_text(errno);
}

tls_conn::~tls_conn() {
  if (ssl_ != nullptr) SSL_free(ssl_);  // frees its BIO, which does not close fd_
  if (fd_ >= 0) ::close(fd_);
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

void tls_conn::wake() noexcept {
  if (wake_fd_ < 0) return;
  const std::uint64_t one = 1;
  [[maybe_unused]] const auto n = ::write(wake_fd_, &one, sizeof one);
}

tls_conn::status tls_conn::wait(bool write, clock::time_point deadline) {
  std::array<pollfd, 2> fds{};
  fds[0].fd = fd_;
  fds[0].events = write ? POLLOUT : POLLIN;
  fds[1].fd = wake_fd_;
  fds[1].events = POLLIN;
  for (;;) {
    const int n = ::poll(fds.data(), fds.size(), timeout_ms(deadline));
    if (n < 0 && errno == EINTR) continue;
    if (fds[1].revents != 0) return status::cancelled;
    // An error or a hang-up on the socket is ready too: the read or write that follows says
    // what it is.
    if (n > 0) return status::ok;
    if (n == 0 && clock::now() >= deadline) return status::timeout;
    if (n < 0) return status::failed;
  }
}

tls_conn::status tls_conn::hold(clock::time_point until) {
  pollfd wake{wake_fd_, POLLIN, 0};
  for (;;) {
    const int n = ::poll(&wake, 1, timeout_ms(until));
    if (n < 0 && errno == EINTR) continue;
    if (n > 0) return status::cancelled;
    if (n < 0) return status::failed;
    if (clock::now() >= until) return status::ok;
  }
}

core::result<void> tls_conn::connect(const std::vector<std::string>& addresses, unsigned short port,
                                     clock::time_point deadline) {
  if (wake_fd_ < 0) return core::fail(core::errc::unavailable, "eventfd: " + wake_error_);
  std::string last = "no address";
  for (const auto& address : addresses) {
    boost::system::error_code ec;
    const auto ip = boost::asio::ip::make_address(address, ec);
    if (ec) continue;
    const boost::asio::ip::tcp::endpoint to(ip, port);
    if (fd_ >= 0) ::close(fd_);
    fd_ = ::socket(to.protocol().family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd_ < 0) return core::fail(core::errc::unavailable, "socket: " + system_text(errno));
    if (::connect(fd_, to.data(), static_cast<socklen_t>(to.size())) == 0) return {};
    if (errno != EINPROGRESS) {
      last = system_text(errno);
      continue;
    }
    const status w = wait(true, deadline);
    if (w == status::cancelled) return core::fail(core::errc::unavailable, "cancelled");
    if (w == status::timeout) return core::fail(core::errc::unavailable, "timed out");
    if (w == status::failed) {
      last = "poll: " + system_text(errno);
      continue;
    }
    int err = 0;
    socklen_t err_len = sizeof err;
    if (::getsockopt(fd_, SOL_SOCKET, SO_ERROR, &err, &err_len) != 0) err = errno;
    if (err == 0) return {};
    last = system_text(err);
  }
  if (fd_ >= 0) {
    ::close(fd_);
    fd_ = -1;
  }
  return core::fail(core::errc::unavailable, last);
}

std::string tls_conn::ssl_failure(int code) const {
  std::string text;
  if (const unsigned long e = ERR_peek_last_error(); e != 0) {
    if (ERR_GET_REASON(e) == SSL_R_UNEXPECTED_EOF_WHILE_READING) {
      text = "stream truncated";
    } else {
      std::array<char, 256> buf{};
      ERR_error_string_n(e, buf.data(), buf.size());
      text = buf.data();
    }
  } else if (code == SSL_ERROR_SYSCALL) {
    text = errno != 0 ? system_text(errno) : "stream truncated";
  } else {
    text = "TLS error " + std::to_string(code);
  }
  ERR_clear_error();
  return text;
}

core::result<void> tls_conn::handshake(SSL_CTX* ctx,
                                       const std::function<core::result<void>(SSL*)>& prepare,
                                       clock::time_point deadline) {
  ssl_ = SSL_new(ctx);
  BIO* bio = socket_without_sigpipe() != nullptr ? BIO_new(socket_without_sigpipe()) : nullptr;
  if (ssl_ == nullptr || bio == nullptr) {
    if (bio != nullptr) BIO_free(bio);
    ERR_clear_error();
    return core::fail(core::errc::internal, "cannot set up a TLS session");
  }
  BIO_set_fd(bio, fd_, BIO_NOCLOSE);  // fd_ is closed by the destructor
  SSL_set_bio(ssl_, bio, bio);
  if (auto r = prepare(ssl_); !r) return r;
  for (;;) {
    ERR_clear_error();
    const int rc = SSL_connect(ssl_);
    if (rc == 1) return {};
    const int code = SSL_get_error(ssl_, rc);
    status w = status::failed;
    if (code == SSL_ERROR_WANT_READ || code == SSL_ERROR_WANT_WRITE) {
      w = wait(code == SSL_ERROR_WANT_WRITE, deadline);
      if (w == status::ok) continue;
    }
    if (w == status::cancelled) return core::fail(core::errc::unavailable, "cancelled");
    if (w == status::timeout) return core::fail(core::errc::unavailable, "timed out");
    std::string why = ssl_failure(code);
    if (const long v = SSL_get_verify_result(ssl_); v != X509_V_OK)
      why += " (" + std::string(X509_verify_cert_error_string(v)) + ")";
    return core::fail(core::errc::unavailable, why);
  }
}

tls_conn::outcome tls_conn::write_all(std::string_view data, clock::time_point deadline) {
  std::size_t done = 0;
  while (done < data.size()) {
    ERR_clear_error();
    const int n = SSL_write(ssl_, data.data() + done,
                            static_cast<int>(std::min<std::size_t>(data.size() - done, 1 << 30)));
    if (n > 0) {
      done += static_cast<std::size_t>(n);
      continue;
    }
    const int code = SSL_get_error(ssl_, n);
    if (code == SSL_ERROR_WANT_READ || code == SSL_ERROR_WANT_WRITE) {
      const status w = wait(code == SSL_ERROR_WANT_WRITE, deadline);
      if (w == status::ok) continue;
      return not_ready(w, done);
    }
    return {status::failed, done, ssl_failure(code)};
  }
  return {status::ok, done, {}};
}

tls_conn::outcome tls_conn::read_some(char* into, std::size_t size, clock::time_point deadline) {
  // Waits first when OpenSSL holds no bytes of the next record: a read that would find the
  // socket empty is a system call for nothing. After a partial record it waits too, so that a
  // record split across segments does not spin.
  // Paced, after a wake-up the reads go on without waiting until one finds the socket empty:
  // what gathered during the pause may be more than one read takes.
  const bool paced = pace_ > clock::duration::zero();
  bool must_wait = SSL_has_pending(ssl_) == 0 && !(paced && draining_);
  for (;;) {
    if (must_wait) {
      bool ready = false;
      if (paced && streaming_) {
        // What arrives until then is read with one wake-up.
        if (const auto due = last_ready_ + pace_; due > clock::now()) {
          if (const status h = hold(std::min(due, deadline)); h != status::ok)
            return not_ready(h, 0);
        }
        const status w = wait(false, clock::now());  // what the pause gathered, if anything
        if (w == status::ok) {
          ready = true;
        } else if (w == status::timeout) {
          streaming_ = false;  // nothing: the stream ended, the next record is read as it comes
        } else {
          return not_ready(w, 0);
        }
      }
      if (!ready) {
        if (const status w = wait(false, deadline); w != status::ok) return not_ready(w, 0);
      }
      if (paced) {
        const auto now = clock::now();
        if (!ready) streaming_ = now - last_ready_ < pace_;
        last_ready_ = now;
        draining_ = true;
      }
    }
    ERR_clear_error();
    errno = 0;
    const int n = SSL_read(ssl_, into, static_cast<int>(std::min<std::size_t>(size, 1 << 30)));
    if (n > 0) return {status::ok, static_cast<std::size_t>(n), {}};
    const int code = SSL_get_error(ssl_, n);
    if (code == SSL_ERROR_WANT_READ || code == SSL_ERROR_WANT_WRITE) {
      if (code == SSL_ERROR_WANT_WRITE) {
        if (const status w = wait(true, deadline); w != status::ok) return not_ready(w, 0);
        must_wait = false;
      } else {
        must_wait = true;
        draining_ = false;  // the socket had nothing more (or only part of a record)
      }
      continue;
    }
    if (code == SSL_ERROR_ZERO_RETURN) return {status::eof, 0, {}};
    return {status::failed, 0, ssl_failure(code)};
  }
}

}  // namespace topogate::kube

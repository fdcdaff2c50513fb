#pragma once
// Structured logs: one JSON object per line on stderr. Callers pass identities (a certificate
// subject, "bearer:<inventory>"), never a token, key or certificate body.
//
// log() formats its line on the caller's thread, then writes it at once when stderr (a pipe or
// a socket) takes it without waiting, and otherwise queues it for a writer thread of its own
// (log_writer, below): no caller (an I/O thread, the reconcile loop, a lane) ever waits for
// stderr. A reader of stderr that stops reading (a full pipe, a stopped log agent) fills the
// queue; past log_queue_bytes a line is dropped and counted (topogate_log_lines_dropped_total),
// and the next line queued is preceded by one that says how many were dropped there.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <initializer_list>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <variant>

namespace topogate::server {

enum class log_level { debug, info, warn, error };

struct log_field {
  std::string_view key;
  std::variant<std::string_view, long long, double, bool> value;
  log_field(std::string_view k, std::string_view v) : key(k), value(v) {}
  log_field(std::string_view k, const std::string& v) : key(k), value(std::string_view(v)) {}
  log_field(std::string_view k, const char* v) : key(k), value(std::string_view(v)) {}
  log_field(std::string_view k, int v) : key(k), value(static_cast<long long>(v)) {}
  log_field(std::string_view k, long v) : key(k), value(static_cast<long long>(v)) {}
  log_field(std::string_view k, long long v) : key(k), value(v) {}
  log_field(std::string_view k, unsigned v) : key(k), value(static_cast<long long>(v)) {}
  log_field(std::string_view k, unsigned long v) : key(k), value(static_cast<long long>(v)) {}
  log_field(std::string_view k, double v) : key(k), value(v) {}
  log_field(std::string_view k, bool v) : key(k), value(v) {}
};

// Renders one line (without the trailing newline); separate for tests.
std::string format_log_line(log_level level, std::string_view msg,
                            std::initializer_list<log_field> fields);
void log(log_level level, std::string_view msg, std::initializer_list<log_field> fields = {});

// The minimum level written (default info); set once at startup.
void set_log_level(log_level level);

// Lines log() dropped because stderr did not take them (since the process started).
[[nodiscard]] std::uint64_t log_lines_dropped() noexcept;
// Waits until every line queued so far is written, or `within` passed: true when written.
// Called before the process exits (and at exit, for up to log_exit_flush).
bool log_flush(std::chrono::milliseconds within);

// What may wait for stderr at once: about 4,000 access-log lines.
inline constexpr std::size_t log_queue_bytes = std::size_t{1} << 20;
// How long the process's exit waits for its last lines when stderr does not take them.
inline constexpr std::chrono::milliseconds log_exit_flush{2000};

// One descriptor's writer: lines pushed (each ending with '\n', from any thread) are written
// in order. A line with nothing before it, to a pipe or a socket, is written by its caller
// when the descriptor takes it at once (a non-blocking write: on a pipe, through a
// description of its own opened non-blocking, and only from a thread with SIGPIPE blocked;
// on a socket, send with MSG_DONTWAIT | MSG_NOSIGNAL). Every other line (a regular file, a
// terminal, a pipe that is full, lines already waiting) is queued for a thread of its own,
// which writes at most 4 KiB a write(2), each write made only when poll(2) says the
// descriptor takes it, so that the thread never blocks in write (a pipe takes that much whole
// once it has room for it) and sees its stop. At most `capacity` bytes wait (queued or being
// written); a line that does not fit is dropped and counted, except into an empty queue. A
// write the descriptor refuses (EPIPE: no reader; EBADF) loses its lines, counted as dropped
// too. Not copyable; the destructor writes what it can for up to `drain` and stops.
class log_writer {
 public:
  log_writer(int fd, std::size_t capacity,
             std::chrono::milliseconds drain = std::chrono::milliseconds(1000));
  ~log_writer();
  log_writer(const log_writer&) = delete;
  log_writer& operator=(const log_writer&) = delete;

  // Writes or queues `line` (which ends with '\n'); false when it was dropped. Never waits
  // for the descriptor.
  bool push(std::string line);
  bool flush(std::chrono::milliseconds within);
  [[nodiscard]] std::uint64_t dropped() const noexcept {
    return dropped_.load(std::memory_order_relaxed);
  }
  // Lines their caller wrote itself (the rest went through the writer thread, or were dropped).
  [[nodiscard]] std::uint64_t direct_writes() const noexcept {
    return direct_writes_.load(std::memory_order_relaxed);
  }

 private:
  enum class direct { written, queue, lost };
  // The caller's own non-blocking write of `line` (mu_ held); what it did not write stays in
  // `line`.
  direct try_direct(std::string& line);
  void run();
  // Writes `bytes` whole unless stopping passes its deadline or the descriptor refuses them;
  // returns how many were written.
  std::size_t write_all(std::string_view bytes);

  const int fd_;
  const std::size_t capacity_;
  const std::chrono::milliseconds drain_;
  mutable std::mutex mu_;
  std::condition_variable wake_;                     // a line queued, or stop
  std::condition_variable written_;                  // the queue emptied
  std::deque<std::string> queue_;                    // mu_
  std::size_t held_ = 0;                             // mu_: bytes queued or being written
  std::uint64_t gap_ = 0;                            // mu_: dropped since the last line queued
  bool writing_ = false;                             // mu_
  bool stop_ = false;                                // mu_
  std::chrono::steady_clock::time_point stop_by_{};  // mu_: when stop_ gives up on the rest
  int direct_fd_ = -1;          // a pipe's non-blocking description of its own, or -1
  bool direct_socket_ = false;  // fd_ is a socket: send(MSG_DONTWAIT | MSG_NOSIGNAL)
  std::atomic<std::uint64_t> dropped_{0};
  std::atomic<std::uint64_t> direct_writes_{0};
  std::thread thread_;
};

}  // namespace topogate::server

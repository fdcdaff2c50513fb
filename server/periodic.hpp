#pragma once
// A thread that runs a task at once and again `interval` after each run ends, until stop():
// the loop of the periodic audit (audit_loop) and of the admission ownership view
// (ownership_view). Measured from the end of a run, so that a run the API made slow never
// starts the next one at once.

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>

namespace topogate::server {

class periodic_thread {
 public:
  periodic_thread() = default;
  periodic_thread(const periodic_thread&) = delete;
  periodic_thread& operator=(const periodic_thread&) = delete;
  ~periodic_thread() { stop({}); }

  [[nodiscard]] bool started() const noexcept { return thread_.joinable(); }

  void start(std::chrono::milliseconds interval, std::function<void()> run) {
    if (thread_.joinable()) return;
    thread_ = std::thread([this, interval, run = std::move(run)] {
      for (;;) {
        if (stopping()) return;
        run();
        std::unique_lock lock(mu_);
        ++runs_;
        if (cv_.wait_for(lock, interval, [this] { return stop_; })) return;
      }
    });
  }

  // Ends the loop: `abort` (from this thread, after the stop is set) cuts the run in progress
  // short; returns once the thread has ended.
  void stop(const std::function<void()>& abort) {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    if (abort) abort();
    if (thread_.joinable()) thread_.join();
  }

  // Whether stop() was called: a run it cut short is the shutdown's doing, not the API's.
  [[nodiscard]] bool stopping() const {
    std::lock_guard lock(mu_);
    return stop_;
  }

  // Runs finished so far.
  [[nodiscard]] std::size_t runs() const {
    std::lock_guard lock(mu_);
    return runs_;
  }

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;     // mu_
  std::size_t runs_ = 0;  // mu_
  std::thread thread_;
};

}  // namespace topogate::server

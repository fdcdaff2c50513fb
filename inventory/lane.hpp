#pragma once
// A lane: one thread that runs an inventory's store work in order (pushes, the store's first
// load, revisions other replicas wrote). Work that may block on a disk or the Kubernetes
// API runs here, never on a request thread, and one inventory's lane never waits for
// another's. Internal to inventory/.

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>

namespace topogate::inventory::detail {

class lane {
 public:
  lane() = default;
  ~lane();
  lane(const lane&) = delete;
  lane& operator=(const lane&) = delete;

  // Queues `fn` behind everything queued before it. False once stopped.
  bool post(std::function<void()> fn);
  // The same for work that counts against `limit` (pushes): false, and nothing queued, when
  // `limit` such tasks are already queued or running.
  bool try_post_counted(std::function<void()> fn, std::size_t limit);

  // Called by a counted task that has answered its caller: its slot is free from now on,
  // though the task may still be finishing (a client that pushes again straight after its
  // answer is not refused for a push that is over). No effect from an uncounted task.
  void release_current();

  // Runs nothing more that is queued and ends the thread once the task running now returns.
  // True when it has ended within `wait`; false when a task is still blocked (the destructor
  // then waits for it: whoever exits the process instead must not destroy the lane).
  bool stop(std::chrono::milliseconds wait);

 private:
  struct task {
    std::function<void()> fn;
    bool counted = false;
  };
  void enqueue(task t);  // mu_ held
  void run();

  std::mutex mu_;
  std::condition_variable cv_;
  std::condition_variable ended_cv_;
  std::deque<task> queue_;
  std::size_t counted_ = 0;       // counted tasks queued, or running and not yet released
  bool current_counted_ = false;  // the running task holds a slot
  bool stopping_ = false;
  bool ended_ = false;
  std::thread thread_;  // started by the first post
};

// Runs functions at their time on one thread of its own (deadlines of waiting pushes, retries
// of a store's first load). A function runs at most once, and must not block.
class timer_queue {
 public:
  timer_queue() = default;
  ~timer_queue() { stop(); }
  timer_queue(const timer_queue&) = delete;
  timer_queue& operator=(const timer_queue&) = delete;

  void at(std::chrono::steady_clock::time_point when, std::function<void()> fn);
  // Drops what has not run yet and ends the thread.
  void stop();

 private:
  void run();

  std::mutex mu_;
  std::condition_variable cv_;
  std::multimap<std::chrono::steady_clock::time_point, std::function<void()>> due_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace topogate::inventory::detail

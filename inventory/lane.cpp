#include "inventory/lane.hpp"

#include <utility>

namespace topogate::inventory::detail {

lane::~lane() {
  // Waits for a task still blocked in a call: what it uses must outlive it.
  stop(std::chrono::hours(24 * 365));
}

bool lane::post(std::function<void()> fn) {
  std::lock_guard lk(mu_);
  if (stopping_) return false;
  enqueue({std::move(fn), false});
  return true;
}

bool lane::try_post_counted(std::function<void()> fn, std::size_t limit) {
  std::lock_guard lk(mu_);
  if (stopping_ || counted_ >= limit) return false;
  ++counted_;
  enqueue({std::move(fn), true});
  return true;
}

void lane::enqueue(task t) {
  queue_.push_back(std::move(t));
  if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
  cv_.notify_one();
}

void lane::run() {
  std::unique_lock lk(mu_);
  for (;;) {
    cv_.wait(lk, [&] { return stopping_ || !queue_.empty(); });
    if (stopping_) break;
    task t = std::move(queue_.front());
    queue_.pop_front();
    current_counted_ = t.counted;
    lk.unlock();
    t.fn();
    t.fn = nullptr;  // what it captured goes before the lane is told it ended
    lk.lock();
    if (current_counted_) --counted_;
    current_counted_ = false;
  }
  ended_ = true;
  ended_cv_.notify_all();
}

void lane::release_current() {
  std::lock_guard lk(mu_);
  if (!current_counted_) return;
  current_counted_ = false;
  --counted_;
}

bool lane::stop(std::chrono::milliseconds wait) {
  std::unique_lock lk(mu_);
  stopping_ = true;
  cv_.notify_all();
  // What has not started is dropped now, not after the running task: its captures (a push's
  // completion) answer as they are destroyed, outside the lock.
  std::deque<task> dropped;
  dropped.swap(queue_);
  for (const auto& t : dropped) counted_ -= t.counted ? 1 : 0;
  lk.unlock();
  dropped.clear();
  lk.lock();
  if (!thread_.joinable()) return true;
  if (!ended_cv_.wait_for(lk, wait, [&] { return ended_; })) return false;
  lk.unlock();
  thread_.join();
  return true;
}

void timer_queue::at(std::chrono::steady_clock::time_point when, std::function<void()> fn) {
  std::lock_guard lk(mu_);
  if (stopping_) return;
  due_.emplace(when, std::move(fn));
  if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
  cv_.notify_one();
}

void timer_queue::run() {
  std::unique_lock lk(mu_);
  while (!stopping_) {
    if (due_.empty()) {
      cv_.wait(lk);
      continue;
    }
    const auto first = due_.begin()->first;
    if (std::chrono::steady_clock::now() < first) {
      cv_.wait_until(lk, first);
      continue;
    }
    auto fn = std::move(due_.begin()->second);
    due_.erase(due_.begin());
    lk.unlock();
    fn();
    fn = nullptr;
    lk.lock();
  }
}

void timer_queue::stop() {
  {
    std::lock_guard lk(mu_);
    stopping_ = true;
    cv_.notify_all();
  }
  if (thread_.joinable()) thread_.join();
  std::lock_guard lk(mu_);
  due_.clear();
}

}  // namespace topogate::inventory::detail

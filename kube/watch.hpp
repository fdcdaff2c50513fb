#pragma once
// Following a collection of the Kubernetes API as client-go's reflector does, without its
// cache: list it, watch it from the list's resourceVersion, resume a watch that ended from the
// last version seen, list again after 410 Gone or a failed watch, and pause between attempts
// that fail. The revision store's ConfigMaps and the Node watch (inventory/kube_store.cpp)
// follow theirs with it, each on a thread of its own.

#include <simdjson.h>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <random>
#include <string>
#include <string_view>

#include "core/result.hpp"
#include "kube/client.hpp"

namespace topogate::kube {

// Interruptible pauses: stop() ends a wait at once, and every later one.
class stop_signal {
 public:
  // False when stopped (before or during the wait).
  bool wait(std::chrono::milliseconds d);
  void stop();
  [[nodiscard]] bool stopped();

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
};

// The pause before a list or watch is tried again: 0.5 s doubling to 30 s, with up to a
// quarter of jitter so replicas that failed together do not retry together; back to the
// start after a watch that lasted or delivered something.
class retry_pause {
 public:
  std::chrono::milliseconds next();
  void reset() { current_ = min_; }
  // After a watch ended: true when the next one should wait (it failed, or it ended within a
  // second having delivered nothing: a proxy cutting streams, a server closing at once).
  bool after_watch(bool failed, bool delivered, std::chrono::steady_clock::duration lasted);

 private:
  static constexpr std::chrono::milliseconds min_{500};
  static constexpr std::chrono::milliseconds max_{30'000};
  std::chrono::milliseconds current_ = min_;
  std::minstd_rand rng_{std::random_device{}()};
};

struct reflector {
  // The collection, with its selector if any: "/api/v1/nodes",
  // "/api/v1/namespaces/NS/configmaps?labelSelector=...".
  std::string path;
  std::string_view watch_accept = json;
  // Lists the collection (list.hpp's pager) and hands on what it holds; returns the list's
  // resourceVersion, or why it could not.
  std::function<core::result<std::string>()> list;
  // Each watch event but bookmarks and errors: ADDED, MODIFIED or DELETED, and the object.
  std::function<void(std::string_view type, simdjson::dom::element object)> on_event;
  // Each failed list or watch (the message names the call), unless stopping.
  std::function<void(const core::error&)> on_failure;
  // Under a stream of events, the watch is read at most once per `read_pace`: the events
  // that arrive meanwhile are read with one wake-up (tls_conn::set_read_pace), each later
  // by at most that; events further apart are read as they come. Zero: each as it arrives.
  std::chrono::milliseconds read_pace{0};
};

// Lists and watches `r.path` with `c` on the calling thread until `stop` is signalled; the
// caller's stop() signals it and cancels `c`.
void reflect(client& c, const reflector& r, stop_signal& stop);

}  // namespace topogate::kube

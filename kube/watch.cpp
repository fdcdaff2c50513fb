#include "kube/watch.hpp"

#include <algorithm>

#include "kube/api_error.hpp"

namespace topogate::kube {

namespace {

// Watches end server-side after this; the idle timeout is a little longer.
constexpr int watch_timeout_seconds = 290;
constexpr auto watch_idle = std::chrono::seconds(330);

}  // namespace

bool stop_signal::wait(std::chrono::milliseconds d) {
  std::unique_lock lk(mu_);
  return !cv_.wait_for(lk, d, [&] { return stop_; });
}

void stop_signal::stop() {
  {
    std::lock_guard lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
}

bool stop_signal::stopped() {
  std::lock_guard lk(mu_);
  return stop_;
}

std::chrono::milliseconds retry_pause::next() {
  const auto d = current_;
  current_ = std::min(current_ * 2, max_);
  std::uniform_int_distribution<long long> jitter(0, d.count() / 4);
  return d + std::chrono::milliseconds(jitter(rng_));
}

bool retry_pause::after_watch(bool failed, bool delivered,
                              std::chrono::steady_clock::duration lasted) {
  if (!failed && (delivered || lasted >= std::chrono::seconds(1))) {
    reset();
    return false;
  }
  return true;
}

void reflect(client& c, const reflector& r, stop_signal& stop) {
  const std::string watch_call = "watch " + r.path;
  const std::string watch_path =
      r.path + (r.path.find('?') == std::string::npos ? "?" : "&") +
      "watch=1&allowWatchBookmarks=true&timeoutSeconds=" + std::to_string(watch_timeout_seconds) +
      "&resourceVersion=";
  retry_pause pause;
  while (!stop.stopped()) {
    auto listed = r.list();
    if (!listed) {
      if (stop.stopped()) break;
      r.on_failure(listed.error());
      if (!stop.wait(pause.next())) break;
      continue;
    }
    std::string version = std::move(*listed);
    // Watch from the list's version; resume from the last seen one after a clean end; relist
    // on 410 Gone (the version was compacted away). A watch that fails, or ends at once
    // having delivered nothing, is retried after a growing pause.
    bool relist = false;
    while (!relist && !stop.stopped()) {
      simdjson::dom::parser parser;
      bool delivered = false;
      const auto began = std::chrono::steady_clock::now();
      const auto w = c.stream_lines(
          watch_path + url_encode(version),
          [&](std::string_view line) {
            simdjson::dom::element ev;
            std::string_view type;
            simdjson::dom::element obj;
            if (parser.parse(line).get(ev) || ev["type"].get(type) || ev["object"].get(obj))
              return true;
            if (type == "ERROR") {
              int64_t code = 0;
              if (!obj["code"].get(code) && code == 410) relist = true;
              return false;
            }
            std::string_view rv;
            if (!obj["metadata"]["resourceVersion"].get(rv)) version = std::string(rv);
            if (type == "BOOKMARK") return true;
            delivered = true;
            r.on_event(type, obj);
            return true;
          },
          watch_idle, r.watch_accept, r.read_pace);
      if (stop.stopped()) break;
      if (w && w->status == 410) relist = true;
      const bool failed = !w || (w->status != 200 && w->status != 410);
      if (failed) {
        relist = true;
        r.on_failure(w ? api_error(watch_call, *w) : api_error(watch_call, w.error()));
      }
      if (!pause.after_watch(failed, delivered, std::chrono::steady_clock::now() - began)) continue;
      if (!stop.wait(pause.next())) break;
    }
  }
}

}  // namespace topogate::kube

#pragma once
// The push source: revisions pushed to PUT /snapshots/{name}, validated and written to the
// store on the inventory's lane, and those other replicas wrote, learnt from the store. Its
// state is this replica's view of the store's object. Internal to inventory/.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>

#include "inventory/registry.hpp"
#include "inventory/source.hpp"
#include "inventory/store.hpp"

namespace topogate::inventory {

class push_source final : public source {
 public:
  push_source() = default;

  [[nodiscard]] source_kind kind() const noexcept override { return source_kind::push; }
  [[nodiscard]] bool accepts_pushes() const noexcept override { return true; }
  [[nodiscard]] std::string push_refusal(std::string_view name) const override;
  [[nodiscard]] std::string input(const revision_store* store) const override;
  [[nodiscard]] push_source* as_push() noexcept override { return this; }

  // The store's object as this replica knows it: the one version of truth a push's
  // If-Match and compare-and-swap are judged against, and the only revision the inventory
  // serves. It moves only forward in the store's order (lane only, under write_mu).
  struct store_head {
    bool known = false;  // a read, a write or an event has told it
    store_state state;   // what the store holds, as of state.as_of
    // The inventory holds state.rev as its accepted revision; false while it is refused
    // here (a Node this replica's Node view lacks, a configuration that differs), and then
    // nothing is served: the replica answers 503 and is not ready rather than serve an
    // older revision. Retried on every Node change.
    bool held = false;
  } head;
  // head.known && the store holds a revision this replica does not hold (metrics).
  std::atomic<bool> store_behind{false};
  // When the store last confirmed this replica's view (a read, a write, an event); 0 never.
  std::atomic<std::int64_t> store_synced_ms{0};
  std::atomic<bool> verify_queued{false};  // a periodic re-read is waiting on the lane
  // The store answered the first load (or a watch event); until then the inventory is not
  // ready and a push loads first.
  std::atomic<bool> store_loaded{false};
  std::chrono::milliseconds load_backoff{500};
  // The last load or save: 1 the store answered, 0 it did not (errc::unavailable), -1 no call
  // yet. Read by the metrics from any thread.
  std::atomic<int> store_answered{-1};

  // Why the first load has not succeeded yet; true when that changed.
  bool set_wait_reason(std::string why);
  [[nodiscard]] std::string wait_reason() const;
  void clear_wait_reason() { set_wait_reason({}); }
  // Records whether a store call got an answer: a conflict or a damaged object is an answer;
  // errc::unavailable (I/O error, unreachable API, past the deadline) is not.
  void note_store_call(bool answered) { store_answered.store(answered ? 1 : 0); }
  // registry::store_available and store_view, for this source.
  [[nodiscard]] std::optional<bool> available() const;
  [[nodiscard]] registry::store_view_status view() const;

 private:
  mutable std::mutex mu_;
  std::string wait_reason_;  // mu_
};

}  // namespace topogate::inventory

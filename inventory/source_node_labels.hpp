#pragma once
// The nodeLabels source: a TopologySource whose consumer reads the labels the Nodes already
// carry. Nothing is served or pushed; every Node list is checked for the declared hierarchy,
// and the checks are its state and its history. Internal to inventory/.

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "inventory/registry.hpp"
#include "inventory/source.hpp"

namespace topogate::inventory {

class node_labels_source final : public source {
 public:
  node_labels_source() = default;

  [[nodiscard]] source_kind kind() const noexcept override { return source_kind::node_labels; }
  [[nodiscard]] bool serves_snapshot() const noexcept override { return false; }
  [[nodiscard]] bool checks_node_labels() const noexcept override { return true; }
  [[nodiscard]] std::string push_refusal(std::string_view name) const override;
  [[nodiscard]] std::string input(const revision_store* store) const override;
  [[nodiscard]] node_labels_source* as_node_labels() noexcept override { return this; }

  struct recorded {
    std::shared_ptr<const node_label_check> check;
    attempt entry;  // as the history keeps it
  };
  // Checks `nodes` against `src`'s hierarchy and records the check (the history keeps the
  // last `history_size`, at least one). Any thread.
  recorded record(const core::topology_source& src, const core::node_list& nodes,
                  std::chrono::system_clock::time_point at, std::string nodes_origin,
                  std::size_t history_size);
  // The last check; null before the first Node list.
  [[nodiscard]] std::shared_ptr<const node_label_check> latest() const;
  // Oldest first.
  [[nodiscard]] std::vector<attempt> history() const;

 private:
  mutable std::mutex mu_;
  std::shared_ptr<const node_label_check> latest_;
  std::vector<attempt> history_;
};

}  // namespace topogate::inventory

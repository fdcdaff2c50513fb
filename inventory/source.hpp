#pragma once
// What feeds an inventory. The configuration names the kind once, when it is parsed; from
// then on the registry, the router and the metrics ask the source what it can do rather than
// guessing the kind from which paths are set. Each kind keeps its own state in its own file:
// source_file (a snapshot file or directory), source_push (pushes made durable in the store)
// and source_node_labels (a nodeLabels TopologySource: the Nodes' own labels, checked).

#include <memory>
#include <string>
#include <string_view>

namespace topogate::inventory {

struct inventory_spec;
class revision_store;
class file_source;
class push_source;
class node_labels_source;

enum class source_kind {
  file,         // a snapshot file or directory (a ConfigMap volume, a git-sync checkout)
  push,         // PUT /snapshots/{name}, validated and made durable in the store
  node_labels,  // a nodeLabels TopologySource: nothing served or pushed, the labels checked
};
// "file", "push", "nodeLabels".
[[nodiscard]] std::string_view to_string(source_kind k) noexcept;

class source {
 public:
  virtual ~source() = default;
  source(const source&) = delete;
  source& operator=(const source&) = delete;

  [[nodiscard]] virtual source_kind kind() const noexcept = 0;
  // GET /snapshots/{name} answers with a revision (or 503 until there is one); false: there
  // is never a snapshot to serve (404), and no snapshot rule, age or drift applies.
  [[nodiscard]] virtual bool serves_snapshot() const noexcept { return true; }
  // PUT /snapshots/{name} is taken: validated, written to the store, published. Its revisions
  // then come from the store (its first read, its watch, the periodic re-read).
  [[nodiscard]] virtual bool accepts_pushes() const noexcept { return false; }
  // The Node list is the input itself: its labels' hierarchy is checked on every change.
  [[nodiscard]] virtual bool checks_node_labels() const noexcept { return false; }
  // The file or directory the reconcile loop reads and watches; null when there is none.
  [[nodiscard]] virtual const std::string* watched_path() const noexcept { return nullptr; }
  // Why a push to inventory `name` is refused; empty when pushes are accepted.
  [[nodiscard]] virtual std::string push_refusal(std::string_view name) const = 0;
  // Where its revisions come from, for the status document ("file:/path", "push:<store>").
  [[nodiscard]] virtual std::string input(const revision_store* store) const = 0;

  // The concrete source, for the registry that keeps its state; null for another kind.
  [[nodiscard]] virtual file_source* as_file() noexcept { return nullptr; }
  [[nodiscard]] virtual push_source* as_push() noexcept { return nullptr; }
  [[nodiscard]] virtual node_labels_source* as_node_labels() noexcept { return nullptr; }
  [[nodiscard]] const file_source* as_file() const noexcept {
    return const_cast<source*>(this)->as_file();
  }
  [[nodiscard]] const push_source* as_push() const noexcept {
    return const_cast<source*>(this)->as_push();
  }
  [[nodiscard]] const node_labels_source* as_node_labels() const noexcept {
    return const_cast<source*>(this)->as_node_labels();
  }

 protected:
  source() = default;
};

// Why `spec` cannot be run as its kind says (a file source without a path, a path on another
// kind, a nodeLabels TopologySource fed otherwise, or the reverse); empty when it can.
[[nodiscard]] std::string check_spec(const inventory_spec& spec);
// The source `spec` names; check_spec(spec) must be empty.
[[nodiscard]] std::unique_ptr<source> make_source(const inventory_spec& spec);

}  // namespace topogate::inventory

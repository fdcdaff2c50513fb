#pragma once
// The cluster's Nodes, as `kubectl get nodes -o json` prints them (a v1 List of Node).

#include <compare>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "chunked_vector.hpp"
#include "field_error.hpp"
#include "topology_source.hpp"

namespace topogate::core {

// A Node's labels, sorted by key. Copies share one vector: the Node list the watch hands to
// every inventory, and each inventory's selected part of it, copy no label when a chunk of
// the list is copied (node_list). A write through a copy that shares its vector copies the
// vector first, so a shared list is never changed.
class node_labels {
 public:
  using value_type = std::pair<std::string, std::string>;
  using storage = std::vector<value_type>;
  using const_iterator = storage::const_iterator;

  node_labels() = default;
  node_labels(std::initializer_list<value_type> l) : node_labels(storage(l)) {}
  node_labels(storage v)  // NOLINT(google-explicit-constructor): assigned from vectors
      : p_(v.empty() ? nullptr : std::make_shared<storage>(std::move(v))) {}

  [[nodiscard]] const storage& get() const noexcept { return p_ ? *p_ : empty_storage(); }
  operator const storage&() const noexcept { return get(); }  // NOLINT: reads as the vector
  [[nodiscard]] const_iterator begin() const noexcept { return get().begin(); }
  [[nodiscard]] const_iterator end() const noexcept { return get().end(); }
  [[nodiscard]] std::size_t size() const noexcept { return p_ ? p_->size() : 0; }
  [[nodiscard]] bool empty() const noexcept { return size() == 0; }
  [[nodiscard]] const value_type& operator[](std::size_t i) const noexcept { return (*p_)[i]; }
  [[nodiscard]] const value_type& front() const noexcept { return p_->front(); }
  [[nodiscard]] const value_type& back() const noexcept { return p_->back(); }

  // The vector to change, this copy's own (copied first when shared).
  storage& edit();
  template <class... A>
  value_type& emplace_back(A&&... a) {
    return edit().emplace_back(std::forward<A>(a)...);
  }
  void push_back(value_type v) { edit().push_back(std::move(v)); }

  friend bool operator==(const node_labels& a, const node_labels& b) noexcept {
    return a.p_ == b.p_ || a.get() == b.get();
  }
  // How many copies share this one's vector (0: no labels).
  [[nodiscard]] long use_count() const noexcept { return p_.use_count(); }

 private:
  static const storage& empty_storage() noexcept;
  std::shared_ptr<storage> p_;
};

// A Node's name: immutable, and copies share one string: every list that has the Node, and
// the profile assignment, hold one copy of it.
class node_name {
 public:
  node_name() = default;
  node_name(std::string_view s)  // NOLINT(google-explicit-constructor): assigned from text
      : p_(s.empty() ? nullptr : std::make_shared<const std::string>(s)) {}
  node_name(const std::string& s) : node_name(std::string_view(s)) {}  // NOLINT: as above
  node_name(const char* s) : node_name(std::string_view(s)) {}         // NOLINT: as above

  [[nodiscard]] const std::string& str() const noexcept { return p_ ? *p_ : empty_string(); }
  operator const std::string&() const noexcept { return str(); }  // NOLINT: reads as the text
  operator std::string_view() const noexcept { return str(); }    // NOLINT: as above
  [[nodiscard]] std::size_t size() const noexcept { return str().size(); }
  [[nodiscard]] bool empty() const noexcept { return str().empty(); }
  [[nodiscard]] const char* data() const noexcept { return str().data(); }
  [[nodiscard]] const char* c_str() const noexcept { return str().c_str(); }

  friend bool operator==(const node_name& a, const node_name& b) noexcept {
    return a.p_ == b.p_ || a.str() == b.str();
  }
  friend bool operator==(const node_name& a, std::string_view b) noexcept { return a.str() == b; }
  friend bool operator==(const node_name& a, const std::string& b) noexcept { return a.str() == b; }
  friend bool operator==(const node_name& a, const char* b) noexcept { return a.str() == b; }
  friend std::strong_ordering operator<=>(const node_name& a, const node_name& b) noexcept {
    return a.str() <=> b.str();
  }
  friend std::strong_ordering operator<=>(const node_name& a, std::string_view b) noexcept {
    return std::string_view(a.str()) <=> b;
  }
  friend std::strong_ordering operator<=>(const node_name& a, const std::string& b) noexcept {
    return a.str() <=> b;
  }
  friend std::string operator+(const std::string& a, const node_name& b) { return a + b.str(); }
  friend std::string operator+(std::string&& a, const node_name& b) {
    return std::move(a) + b.str();
  }
  friend std::string operator+(const char* a, const node_name& b) { return a + b.str(); }
  friend std::string operator+(const node_name& a, const std::string& b) { return a.str() + b; }
  friend std::string operator+(const node_name& a, const char* b) { return a.str() + b; }

 private:
  static const std::string& empty_string() noexcept;
  std::shared_ptr<const std::string> p_;
};

struct cluster_node {
  node_name name;
  node_labels labels;  // sorted by key
  [[nodiscard]] const std::string* label(std::string_view key) const noexcept;
  bool operator==(const cluster_node&) const = default;
};

struct node_list {
  // Sorted by name, unique. Copies share their chunks of 64 Nodes (core/chunked_vector.hpp):
  // the list the watch builds once per change window from the one before, and each
  // inventory's selected Nodes, copy only the chunks of the Nodes that changed.
  chunked_vector<cluster_node> nodes;
  // What changed since an earlier list, when the source knows it (the Node view): `id` names
  // this list (unique in the process; 0: unnamed) and, when `since` is not 0, it is the list
  // named `since` with the Nodes named in `changed` (sorted, unique; a superset is allowed)
  // added, removed or relabelled and no other. A taker that holds the list named `since`
  // applies the change from those names alone, at a cost in proportion to the change; any
  // other taker compares whole lists.
  std::uint64_t id = 0;
  std::uint64_t since = 0;
  std::vector<std::string> changed;

  [[nodiscard]] const cluster_node* find(std::string_view name) const noexcept;
  // Same Nodes, same labels (labels shared with the other list compare by address first);
  // how the list was made is not compared.
  bool operator==(const node_list& o) const { return nodes == o.nodes; }

  // Lookups of names in increasing order, as a pass over a snapshot (whose Nodes are listed
  // sorted) makes them: each continues from where the previous one ended (a galloping
  // search), so the pass is linear in the list, not N log N. Names in any other order are
  // found all the same, by a search of the whole list.
  class cursor {
   public:
    explicit cursor(const node_list& list) noexcept : list_(&list) {}
    [[nodiscard]] const cluster_node* find(std::string_view name) noexcept;

   private:
    const node_list* list_;
    std::size_t pos_ = 0;  // every Node before it has a name below the last one looked up
  };
};

struct node_list_result {
  node_list list;
  error_list errors;
  [[nodiscard]] bool ok() const noexcept { return errors.empty(); }
};

// Accepts a v1 List (or NodeList) of Node objects in JSON or YAML.
node_list_result parse_node_list(std::string_view text);

// The Nodes the source selects (spec.nodeSelector; absent or {} selects every Node).
node_list select_nodes(const node_list& all, const topology_source& src);

// Whether any rule reads a Node's label `key` for `src`: its levels (profiles, S7-S9, the
// impact), its nodeSelector's keys, the profile label, and the read-only parents S6
// compares. A change to any other label of a Node changes no verdict, no served revision
// and no impact, so a Node view may keep only these (and a Node's name).
[[nodiscard]] bool reads_node_label(const topology_source& src, std::string_view key) noexcept;

}  // namespace topogate::core

#pragma once
// A sequence whose copies share their unchanged parts: the elements sit in chunks of at most
// `max_chunk`, each chunk held by reference count, so a copy costs one reference per chunk
// and a change to one element copies that element's chunk alone (copy on write). A list of
// 10,000 Nodes handed from the Node view to each inventory and changed one Node at a time
// then costs ~160 references per copy and one chunk per change, not 10,000 of each, and two
// lists compare chunk by chunk, their shared chunks by address.
//
// Reading is as a vector's (random access, in O(log chunks) for an index); writing is by
// index (set, insert, erase, push_back, edit). A chunk a copy shares is never written: it is
// copied first. Copies may be read from several threads; one copy is written by one thread.

#include <algorithm>
#include <cstddef>
#include <iterator>
#include <memory>
#include <utility>
#include <vector>

namespace topogate::core {

template <class T>
class chunked_vector {
 public:
  static constexpr std::size_t max_chunk = 64;
  using value_type = T;
  using size_type = std::size_t;
  using chunk = std::vector<T>;

  class const_iterator {
   public:
    using iterator_category = std::random_access_iterator_tag;
    using value_type = T;
    using difference_type = std::ptrdiff_t;
    using pointer = const T*;
    using reference = const T&;

    const_iterator() = default;
    reference operator*() const noexcept { return (*v_->chunks_[c_])[i_]; }
    pointer operator->() const noexcept { return &**this; }
    reference operator[](difference_type n) const noexcept { return *(*this + n); }
    const_iterator& operator++() noexcept {
      if (++i_ == v_->chunks_[c_]->size()) {
        ++c_;
        i_ = 0;
      }
      return *this;
    }
    const_iterator operator++(int) noexcept {
      auto t = *this;
      ++*this;
      return t;
    }
    const_iterator& operator--() noexcept {
      if (i_ == 0) {
        --c_;
        i_ = v_->chunks_[c_]->size();
      }
      --i_;
      return *this;
    }
    const_iterator operator--(int) noexcept {
      auto t = *this;
      --*this;
      return t;
    }
    const_iterator& operator+=(difference_type n) noexcept {
      *this = v_->at_index(index() + static_cast<size_type>(n));
      return *this;
    }
    const_iterator& operator-=(difference_type n) noexcept { return *this += -n; }
    friend const_iterator operator+(const_iterator it, difference_type n) noexcept {
      return it += n;
    }
    friend const_iterator operator+(difference_type n, const_iterator it) noexcept {
      return it += n;
    }
    friend const_iterator operator-(const_iterator it, difference_type n) noexcept {
      return it -= n;
    }
    friend difference_type operator-(const const_iterator& a, const const_iterator& b) noexcept {
      return static_cast<difference_type>(a.index()) - static_cast<difference_type>(b.index());
    }
    friend bool operator==(const const_iterator& a, const const_iterator& b) noexcept {
      return a.c_ == b.c_ && a.i_ == b.i_;
    }
    friend auto operator<=>(const const_iterator& a, const const_iterator& b) noexcept {
      return a.index() <=> b.index();
    }
    // The position in the whole sequence.
    [[nodiscard]] size_type index() const noexcept {
      return (c_ == 0 ? 0 : v_->ends_[c_ - 1]) + i_;
    }
    // Whether both stand at the start of one chunk, which their sequences share: the elements
    // up to its end are then the same objects in both.
    [[nodiscard]] bool shares_chunk_with(const const_iterator& o) const noexcept {
      return i_ == 0 && o.i_ == 0 && c_ < v_->chunks_.size() && o.c_ < o.v_->chunks_.size() &&
             v_->chunks_[c_] == o.v_->chunks_[o.c_];
    }
    // Past the rest of the chunk it stands in.
    void skip_chunk() noexcept {
      ++c_;
      i_ = 0;
    }

   private:
    friend class chunked_vector;
    const_iterator(const chunked_vector* v, size_type c, size_type i) noexcept
        : v_(v), c_(c), i_(i) {}
    const chunked_vector* v_ = nullptr;
    size_type c_ = 0;  // chunk; chunks_.size() at the end
    size_type i_ = 0;  // in the chunk
  };
  using iterator = const_iterator;

  chunked_vector() = default;
  chunked_vector(std::initializer_list<T> l) {
    for (const T& x : l) push_back(x);
  }
  // The elements of `v`, moved into full chunks.
  explicit chunked_vector(std::vector<T> v) {
    reserve(v.size());
    for (T& x : v) push_back(std::move(x));
  }

  [[nodiscard]] size_type size() const noexcept { return ends_.empty() ? 0 : ends_.back(); }
  [[nodiscard]] bool empty() const noexcept { return ends_.empty(); }
  [[nodiscard]] const_iterator begin() const noexcept { return {this, 0, 0}; }
  [[nodiscard]] const_iterator end() const noexcept { return {this, chunks_.size(), 0}; }
  [[nodiscard]] const T& operator[](size_type i) const noexcept { return *at_index(i); }
  [[nodiscard]] const T& front() const noexcept { return chunks_.front()->front(); }
  [[nodiscard]] const T& back() const noexcept { return chunks_.back()->back(); }
  [[nodiscard]] size_type chunk_count() const noexcept { return chunks_.size(); }

  void reserve(size_type n) {
    chunks_.reserve(n / max_chunk + 1);
    ends_.reserve(n / max_chunk + 1);
  }
  void clear() noexcept {
    chunks_.clear();
    ends_.clear();
  }

  void push_back(T x) {
    if (chunks_.empty() || chunks_.back()->size() >= max_chunk) {
      chunks_.push_back(std::make_shared<chunk>());
      chunks_.back()->reserve(max_chunk);
      ends_.push_back(size());
    }
    own(chunks_.size() - 1).push_back(std::move(x));
    ++ends_.back();
  }
  template <class... A>
  T& emplace_back(A&&... a) {
    push_back(T(std::forward<A>(a)...));
    return back_edit();
  }

  // The element at `i`, to change: its chunk is copied first when shared.
  T& edit(size_type i) {
    const auto at = at_index(i);
    return own(at.c_)[at.i_];
  }
  void set(size_type i, T x) { edit(i) = std::move(x); }
  // `x` before position `i` (i == size(): at the end).
  void insert(size_type i, T x) {
    if (i >= size()) {
      push_back(std::move(x));
      return;
    }
    const auto at = at_index(i);
    chunk& c = own(at.c_);
    c.insert(c.begin() + static_cast<std::ptrdiff_t>(at.i_), std::move(x));
    for (size_type k = at.c_; k < ends_.size(); ++k) ++ends_[k];
    if (c.size() > max_chunk) split(at.c_);
  }
  void erase(size_type i) {
    const auto at = at_index(i);
    if (chunks_[at.c_]->size() == 1) {
      chunks_.erase(chunks_.begin() + static_cast<std::ptrdiff_t>(at.c_));
      ends_.erase(ends_.begin() + static_cast<std::ptrdiff_t>(at.c_));
      for (size_type k = at.c_; k < ends_.size(); ++k) --ends_[k];
      return;
    }
    chunk& c = own(at.c_);
    c.erase(c.begin() + static_cast<std::ptrdiff_t>(at.i_));
    for (size_type k = at.c_; k < ends_.size(); ++k) --ends_[k];
    // A chunk worn down by erases joins a neighbour it fits in with, so the chunks stay more
    // than a quarter full on average and a copy's cost stays in proportion to size / 64.
    if (c.size() < max_chunk / 4) {
      if (at.c_ + 1 < chunks_.size() && c.size() + chunks_[at.c_ + 1]->size() <= max_chunk) {
        merge_next(at.c_);
      } else if (at.c_ > 0 && chunks_[at.c_ - 1]->size() + c.size() <= max_chunk) {
        merge_next(at.c_ - 1);
      }
    }
  }
  // Removes the elements `pred` is true for; the chunks holding none are kept as they are.
  template <class Pred>
  size_type erase_if(Pred&& pred) {
    size_type removed = 0;
    for (size_type i = 0; i < size();) {
      if (pred((*this)[i])) {
        erase(i);
        ++removed;
      } else {
        ++i;
      }
    }
    return removed;
  }
  // Calls f(T&) on every element, each chunk copied first when shared.
  template <class F>
  void edit_each(F&& f) {
    for (size_type c = 0; c < chunks_.size(); ++c)
      for (T& x : own(c)) f(x);
  }

  // The first position whose element `below` is false for (the sequence is partitioned by
  // it, as a sorted one is by "less than the key"): chunks are searched by their last
  // element, then the one chunk.
  template <class Below>
  [[nodiscard]] const_iterator partition_point(Below&& below) const {
    const auto c = static_cast<size_type>(
        std::partition_point(chunks_.begin(), chunks_.end(),
                             [&](const std::shared_ptr<chunk>& ch) { return below(ch->back()); }) -
        chunks_.begin());
    if (c == chunks_.size()) return end();
    const chunk& ch = *chunks_[c];
    return {this, c,
            static_cast<size_type>(std::partition_point(ch.begin(), ch.end(), below) - ch.begin())};
  }

  friend bool operator==(const chunked_vector& a, const chunked_vector& b) {
    if (a.size() != b.size()) return false;
    if (a.chunks_ == b.chunks_) return true;
    auto i = a.begin();
    auto j = b.begin();
    while (i != a.end()) {
      // Chunks the two share agree without a look at their elements.
      if (i.shares_chunk_with(j)) {
        i.skip_chunk();
        j.skip_chunk();
        continue;
      }
      if (!(*i == *j)) return false;
      ++i;
      ++j;
    }
    return true;
  }

 private:
  [[nodiscard]] const_iterator at_index(size_type i) const noexcept {
    const auto c =
        static_cast<size_type>(std::upper_bound(ends_.begin(), ends_.end(), i) - ends_.begin());
    if (c == chunks_.size()) return end();
    return {this, c, i - (c == 0 ? 0 : ends_[c - 1])};
  }
  chunk& own(size_type c) {
    auto& p = chunks_[c];
    // Written in place only through the sole reference. Every writer in the project holds
    // the list it copied from while it edits the copy, so a chunk the two share counts two
    // references and is copied; the sole reference is a chunk this copy made itself.
    if (p.use_count() != 1) {
      auto copy = std::make_shared<chunk>();
      copy->reserve(max_chunk + 1);
      copy->assign(p->begin(), p->end());
      p = std::move(copy);
    }
    return *p;
  }
  T& back_edit() { return own(chunks_.size() - 1).back(); }
  // Chunk c takes in chunk c + 1's elements (copied when shared), which then goes.
  void merge_next(size_type c) {
    chunk& into = own(c);
    const chunk& from = *chunks_[c + 1];
    into.insert(into.end(), from.begin(), from.end());
    chunks_.erase(chunks_.begin() + static_cast<std::ptrdiff_t>(c) + 1);
    ends_.erase(ends_.begin() + static_cast<std::ptrdiff_t>(c));
  }
  void split(size_type c) {
    chunk& full = *chunks_[c];
    auto second = std::make_shared<chunk>();
    second->reserve(max_chunk);
    const auto half = static_cast<std::ptrdiff_t>(full.size() / 2);
    second->assign(std::make_move_iterator(full.begin() + half),
                   std::make_move_iterator(full.end()));
    full.erase(full.begin() + half, full.end());
    chunks_.insert(chunks_.begin() + static_cast<std::ptrdiff_t>(c) + 1, std::move(second));
    ends_.insert(ends_.begin() + static_cast<std::ptrdiff_t>(c), ends_[c] - chunks_[c + 1]->size());
  }

  std::vector<std::shared_ptr<chunk>> chunks_;  // none empty
  std::vector<size_type> ends_;                 // ends_[c]: the elements in chunks 0..c
};

}  // namespace topogate::core

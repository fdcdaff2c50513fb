#pragma once
// Immutable text kept in pieces that view shared buffers: a text made from another by an edit
// (a Node cut from a rendering, one added) shares the other's bytes instead of copying them,
// so the edit costs what it changed and a few words per piece, not the text's size.

#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace topogate::core {

class shared_text {
 public:
  struct piece {
    std::shared_ptr<const std::string> owner;
    std::size_t from = 0;
    std::size_t size = 0;
    [[nodiscard]] std::string_view view() const noexcept {
      return std::string_view(*owner).substr(from, size);
    }
  };

  shared_text() = default;
  // One piece: the whole of `text`.
  explicit shared_text(std::string text);

  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  [[nodiscard]] bool empty() const noexcept { return size_ == 0; }
  [[nodiscard]] std::span<const piece> pieces() const noexcept { return pieces_; }
  // The buffer that holds the whole text and nothing else, when there is one (a text of one
  // piece that views all of its buffer); null otherwise.
  [[nodiscard]] const std::string* whole() const noexcept;
  // Bytes [pos, pos + len) appended to `out` (len clipped at the end).
  void copy_to(std::string& out, std::size_t pos, std::size_t len) const;
  // Whether the bytes from `pos` are `bytes` (false when the text ends before them).
  [[nodiscard]] bool equal_at(std::size_t pos, std::string_view bytes) const;
  [[nodiscard]] std::string str() const;

  // Builds a text from bytes of its own and ranges of other texts (which it shares).
  class builder {
   public:
    void append(std::string_view bytes);
    void push_back(char c) { append(std::string_view(&c, 1)); }
    // Bytes [pos, pos + len) of `from`: its pieces' buffers are shared, not copied.
    void append(const shared_text& from, std::size_t pos, std::size_t len);
    [[nodiscard]] std::size_t size() const noexcept { return size_; }
    void reserve_own(std::size_t n) { own_.reserve(n); }
    // The text. Past `most_pieces` pieces it is copied into one buffer: a text edited again
    // and again stays a few pieces long and no longer holds buffers it barely uses.
    [[nodiscard]] shared_text finish(std::size_t most_pieces = 64) &&;

   private:
    void add(const std::shared_ptr<const std::string>* owner, std::size_t from, std::size_t size);
    std::string own_;  // the bytes appended (pieces with no owner view them)
    std::vector<piece> pieces_;
    std::size_t size_ = 0;
  };

 private:
  // The piece that holds byte `pos` (pos < size()) and where that piece starts.
  [[nodiscard]] std::size_t piece_at(std::size_t pos, std::size_t& start) const noexcept;

  std::vector<piece> pieces_;
  std::vector<std::size_t> ends_;  // where each piece ends in the text
  std::size_t size_ = 0;
};

}  // namespace topogate::core

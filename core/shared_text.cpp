#include "core/shared_text.hpp"

#include <algorithm>
#include <utility>

namespace topogate::core {

shared_text::shared_text(std::string text) : size_(text.size()) {
  if (text.empty()) return;
  auto owner = std::make_shared<const std::string>(std::move(text));
  pieces_.push_back({std::move(owner), 0, size_});
  ends_.push_back(size_);
}

const std::string* shared_text::whole() const noexcept {
  if (pieces_.size() != 1) return nullptr;
  const piece& p = pieces_.front();
  return p.from == 0 && p.size == p.owner->size() ? p.owner.get() : nullptr;
}

std::size_t shared_text::piece_at(std::size_t pos, std::size_t& start) const noexcept {
  const auto i =
      static_cast<std::size_t>(std::upper_bound(ends_.begin(), ends_.end(), pos) - ends_.begin());
  start = i == 0 ? 0 : ends_[i - 1];
  return i;
}

void shared_text::copy_to(std::string& out, std::size_t pos, std::size_t len) const {
  if (pos >= size_) return;
  len = std::min(len, size_ - pos);
  std::size_t start = 0;
  for (std::size_t i = piece_at(pos, start); len > 0 && i < pieces_.size(); ++i) {
    const std::string_view v = pieces_[i].view().substr(pos - start);
    const std::size_t n = std::min(len, v.size());
    out.append(v.data(), n);
    len -= n;
    pos += n;
    start = ends_[i];
  }
}

bool shared_text::equal_at(std::size_t pos, std::string_view bytes) const {
  if (pos > size_ || bytes.size() > size_ - pos) return false;
  std::size_t start = 0;
  for (std::size_t i = piece_at(pos, start); !bytes.empty() && i < pieces_.size(); ++i) {
    const std::string_view v = pieces_[i].view().substr(pos - start);
    const std::size_t n = std::min(bytes.size(), v.size());
    if (v.substr(0, n) != bytes.substr(0, n)) return false;
    bytes.remove_prefix(n);
    pos += n;
    start = ends_[i];
  }
  return bytes.empty();
}

std::string shared_text::str() const {
  if (const std::string* w = whole()) return *w;
  std::string out;
  out.reserve(size_);
  for (const piece& p : pieces_) out.append(p.view());
  return out;
}

void shared_text::builder::add(const std::shared_ptr<const std::string>* owner, std::size_t from,
                               std::size_t size) {
  if (size == 0) return;
  size_ += size;
  if (!pieces_.empty()) {
    piece& last = pieces_.back();
    const bool same = owner == nullptr ? !last.owner : last.owner == *owner;
    if (same && last.from + last.size == from) {
      last.size += size;
      return;
    }
  }
  pieces_.push_back({owner == nullptr ? nullptr : *owner, from, size});
}

void shared_text::builder::append(std::string_view bytes) {
  const std::size_t from = own_.size();
  own_.append(bytes);
  add(nullptr, from, bytes.size());
}

void shared_text::builder::append(const shared_text& from, std::size_t pos, std::size_t len) {
  if (pos >= from.size_) return;
  len = std::min(len, from.size_ - pos);
  std::size_t start = 0;
  for (std::size_t i = from.piece_at(pos, start); len > 0 && i < from.pieces_.size(); ++i) {
    const piece& p = from.pieces_[i];
    const std::size_t offset = pos - start;
    const std::size_t n = std::min(len, p.size - offset);
    add(&p.owner, p.from + offset, n);
    len -= n;
    pos += n;
    start = from.ends_[i];
  }
}

shared_text shared_text::builder::finish(std::size_t most_pieces) && {
  shared_text out;
  out.size_ = size_;
  if (size_ == 0) return out;
  std::shared_ptr<const std::string> own;
  if (!own_.empty()) own = std::make_shared<const std::string>(std::move(own_));
  out.pieces_ = std::move(pieces_);
  for (piece& p : out.pieces_)
    if (!p.owner) p.owner = own;
  if (out.pieces_.size() > most_pieces) return shared_text(out.str());
  out.ends_.reserve(out.pieces_.size());
  std::size_t end = 0;
  for (const piece& p : out.pieces_) out.ends_.push_back(end += p.size);
  return out;
}

}  // namespace topogate::core

#pragma once
// Where a response's body is in being sealed into TLS records (or copied, on plain TCP): the
// rest of the piece being sealed, then the pieces after it. The body is borrowed from the
// response (one buffer, or the pieces of a revision that shares another's bytes) and never
// copied, except for a record that would span two pieces: that one is gathered first, so a
// piece's end never cuts a record short. The session (http_session.hpp) owns one per
// connection; it is apart from the session so that its three ways of sealing can be tested
// on their own (test/server/body_cursor_test.cpp).

#include <algorithm>
#include <cstddef>
#include <span>
#include <string>
#include <string_view>

#include "core/shared_text.hpp"

namespace topogate::server {

class body_cursor {
 public:
  using piece = core::shared_text::piece;

  // Starts on a body: `data` first, then `pieces` (a body is one or the other).
  void reset(std::string_view data, std::span<const piece> pieces) noexcept {
    left_ = data;
    pieces_ = pieces;
  }
  void clear() noexcept { reset({}, {}); }

  [[nodiscard]] bool done() const noexcept { return left_.empty() && pieces_.empty(); }

  // Appends up to `n` bytes of the body to `out`, across pieces.
  void gather(std::string& out, std::size_t n) {
    for (std::size_t want = n; want > 0 && !done();) {
      next_piece();
      const std::size_t k = std::min(want, left_.size());
      out.append(left_.data(), k);
      left_.remove_prefix(k);
      want -= k;
    }
  }

  // Seals up to `n` (> 0) bytes of the body with `seal(std::string_view) -> bool`, which
  // cuts what it is given into records of `record` bytes:
  //  - straight from the piece it is in, when that piece holds `n` bytes or is the body's
  //    last (n bytes, or all that is left);
  //  - else the piece's whole records, straight from it;
  //  - else one record gathered into `scratch` across the pieces that follow.
  // So every record but the body's last, and the last of each `n`, is `record` bytes long.
  template <class Seal>
  bool seal_next(std::size_t n, std::size_t record, std::string& scratch, Seal&& seal) {
    next_piece();
    if (done()) return true;  // only empty pieces were left
    if (left_.size() >= n || pieces_.empty()) {
      const std::size_t k = std::min(n, left_.size());
      const bool ok = seal(left_.substr(0, k));
      left_.remove_prefix(k);
      return ok;
    }
    if (const std::size_t whole = left_.size() / record * record; whole > 0) {
      const bool ok = seal(left_.substr(0, whole));
      left_.remove_prefix(whole);
      return ok;
    }
    scratch.clear();
    gather(scratch, std::min(n, record));
    return seal(std::string_view(scratch));
  }

 private:
  // Moves on to the next non-empty piece once the current one is sealed.
  void next_piece() noexcept {
    while (left_.empty() && !pieces_.empty()) {
      left_ = pieces_.front().view();
      pieces_ = pieces_.subspan(1);
    }
  }

  std::string_view left_;
  std::span<const piece> pieces_;
};

}  // namespace topogate::server

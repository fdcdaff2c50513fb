#pragma once
// A revision's ETag: a digest of its JSON body that a small change to the body updates at a
// cost in proportion to the change, not to the body (docs/inventory.md, "ETag").
//
// The body is cut into content-defined chunks: a chunk ends after byte i when a rolling hash
// of the 64 bytes ending at i (a gear hash over a fixed table) has its top 12 bits zero, so a
// chunk is about 4 KiB on average and where one ends depends on those 64 bytes alone, never on
// where the chunk began. The digest is SHA-256 over the SHA-256 of each chunk, in order: a
// function of the bytes only, equal on every replica for equal bodies, and strong (two bodies
// with one digest would give a SHA-256 collision). After an edit, the chunks whose bytes and
// the 64 bytes before them were copied unchanged keep their sums; only the bytes around the
// edit are cut and hashed again, and then the ~N/4096 chunk sums.

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/shared_text.hpp"
#include "core/snapshot.hpp"

namespace topogate::inventory {

class body_digest {
 public:
  // Bytes of the body before copied unchanged into the body after (core/snapshot.hpp).
  using kept = core::copied_bytes;

  // The digest of `body`, hashing all of it.
  [[nodiscard]] static body_digest of(std::string_view body);
  // The digest of `body`, made from `before`'s body by copying the runs `kept` and writing
  // everything else anew: the same value as of(body), hashing only what is near the new bytes.
  [[nodiscard]] static body_digest update(const body_digest& before, std::string_view body,
                                          std::span<const kept> runs);
  // The same for a body kept in pieces: only the bytes hashed anew are gathered (a few KiB
  // around each edit), the pieces are not copied into one.
  [[nodiscard]] static body_digest update(const body_digest& before, const core::shared_text& body,
                                          std::span<const kept> runs);

  // The quoted strong ETag: "\"" + 64 hex digits + "\"" ("\"unavailable\"", which matches
  // nothing, only if the hash could not be computed).
  [[nodiscard]] std::string etag() const;
  [[nodiscard]] std::size_t size() const noexcept { return ends_.empty() ? 0 : ends_.back(); }
  [[nodiscard]] std::size_t chunks() const noexcept { return ends_.size(); }
  // Bytes hashed to make this digest (the chunks hashed, not the sums): what update() saved.
  [[nodiscard]] std::size_t hashed() const noexcept { return hashed_; }

 private:
  using sum = std::array<unsigned char, 32>;
  // Appends the chunks of body[from, to) (`from` is where a chunk starts, `to` where one ends);
  // `bytes` holds the body's bytes from `base` on, at least from 64 before `from` to `to`.
  void cut(std::string_view bytes, std::size_t base, std::size_t from, std::size_t to);
  // update(), cutting the body's new bytes with `cut(digest, from, to)`.
  template <class Cut>
  static body_digest update_with(const body_digest& before, std::size_t size,
                                 std::span<const kept> runs, Cut&& cut);
  void finish();

  std::vector<std::uint32_t> ends_;  // where each chunk ends; the last one is the body's size
  std::vector<sum> sums_;            // SHA-256 of each chunk
  sum root_{};
  bool ok_ = true;
  std::size_t hashed_ = 0;
};

}  // namespace topogate::inventory

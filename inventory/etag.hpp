#pragma once
// A revision's ETag: a digest of its JSON body that a small change to the body updates at a
// cost in proportion to the change, not to the body (docs/inventory.md, "ETag").
//
// The body is cut into content-defined chunks: a chunk ends after byte i when a rolling hash
// of the 64 bytes ending at i (a gear hash over a fixed table) has its top 10 bits zero, so a
// chunk is about 1 KiB on average and where one ends depends on those 64 bytes alone, never on
// where the chunk began. The chunks' SHA-256 sums are cut by their content into groups: a
// group ends after a sum whose first byte is below 4 (about 64 sums a group), and with the
// last sum.
// The digest is SHA-256 over the SHA-256 of each group's sums, in order: a function of the
// bytes only, equal on every replica for equal bodies, and strong (two bodies with one digest
// would give a SHA-256 collision). After an edit, the chunks whose bytes and the 64 bytes
// before them were copied unchanged keep their sums, and a group made of kept sums only,
// whole, keeps its group sum; only the chunks the edit touches, the groups of their sums and
// the ~N/65536 group sums are hashed again. Within those chunks the rolling hash is computed
// only near the new bytes: where the 64 bytes ending at a byte were copied, the old body's
// chunk ends already say whether a chunk ends there.

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
  // Where each chunk ends, in order; the last is the body's size.
  [[nodiscard]] std::span<const std::uint32_t> ends() const noexcept { return ends_; }
  // Bytes hashed to make this digest (the chunks hashed, not the sums): what update() saved.
  [[nodiscard]] std::size_t hashed() const noexcept { return hashed_; }
  // Bytes the rolling hash was computed over (a window's warm-up included) to find where
  // chunks end: all of them for of(), those near new bytes for update().
  [[nodiscard]] std::size_t scanned() const noexcept { return scanned_; }
  [[nodiscard]] std::size_t groups() const noexcept { return group_ends_.size(); }
  // Bytes of chunk sums hashed into group sums: all of them for of(), those of the groups an
  // edit reached for update().
  [[nodiscard]] std::size_t group_bytes_hashed() const noexcept { return group_bytes_hashed_; }

 private:
  using sum = std::array<unsigned char, 32>;
  // Bytes [from, to) of the body that were copied from the body before, each with the 64
  // bytes ending at it: a chunk ends after byte i there exactly when one ended after byte
  // i + shift of the body before (never its last byte, which ends it whatever the hash says).
  struct known {
    std::size_t from = 0;
    std::size_t to = 0;
    std::ptrdiff_t shift = 0;
  };
  // What the body before tells of where chunks end: its ends but its last, and the bytes
  // (increasing) whose ends are read from those.
  struct reuse {
    std::span<const std::uint32_t> ends;
    std::span<const known> copied;
  };
  // Appends the chunks of body[from, to) (`from` is where a chunk starts, `to` where one ends);
  // `bytes` holds the body's bytes from `base` on, at least from 64 before `from` to `to`.
  // Where `from_before.copied` (within [from, to)) says, chunk ends are taken from the body
  // before's instead of computed.
  void cut(std::string_view bytes, std::size_t base, std::size_t from, std::size_t to,
           reuse from_before = {});
  // update(), cutting the body's new bytes with `cut(digest, from, to, from_before)`.
  template <class Cut>
  static body_digest update_with(const body_digest& before, std::size_t size,
                                 std::span<const kept> runs, Cut&& cut);
  // Groups the chunk sums and computes the root. A group made of the very sums of one of
  // `before`'s groups (origin[i]: the index in `before` sum i was kept from, -1 if hashed
  // anew) keeps that group's sum.
  void finish(const body_digest* before, std::span<const std::int32_t> origin);

  std::vector<std::uint32_t> ends_;        // where each chunk ends; the last one is the body's size
  std::vector<sum> sums_;                  // SHA-256 of each chunk
  std::vector<std::uint32_t> group_ends_;  // where each group of sums ends (a sum index)
  std::vector<sum> group_sums_;            // SHA-256 of each group's sums
  sum root_{};
  bool ok_ = true;
  std::size_t hashed_ = 0;
  std::size_t scanned_ = 0;
  std::size_t group_bytes_hashed_ = 0;
};

}  // namespace topogate::inventory

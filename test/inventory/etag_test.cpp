// The ETag's digest (inventory/etag.hpp): its value pinned to the definition in
// docs/inventory.md (computed by an independent implementation of it), and an update after
// edits equal to the digest of the new bytes, hashing only what is near the edits.

#include "inventory/etag.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "inventory/inventory.hpp"

namespace topogate::inventory {
namespace {

// A body shaped like a rendering: ~3,000 members of one label each.
std::string members_body(std::size_t n) {
  std::string b = R"({"apiVersion":"v1","revision":"r","nodes":{)";
  char buf[96];
  for (std::size_t i = 0; i < n; ++i) {
    const int len = std::snprintf(buf, sizeof buf,
                                  R"(%s"node-%05zu":{"topology.kubernetes.io/zone":"zone-%zu"})",
                                  i == 0 ? "" : ",", i, i % 7);
    b.append(buf, static_cast<std::size_t>(len));
  }
  return b + "}}";
}

std::string random_bytes(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::string out(n, '\0');
  for (char& c : out) c = static_cast<char>(rng());
  return out;
}

TEST(BodyDigest, ValuesFollowTheDefinition) {
  // SHA-256 over the SHA-256 of each group of the content-defined chunks' SHA-256 sums,
  // computed independently.
  const std::string body = members_body(3000);
  ASSERT_EQ(body.size(), 162044u);
  const body_digest d = body_digest::of(body);
  EXPECT_EQ(d.etag(), "\"dc8af369489e101af0285d8521c005f705269dd74e0c83de11651dd50ee4bd23\"");
  EXPECT_EQ(d.chunks(), 152u);
  EXPECT_EQ(d.groups(), 3u);
  EXPECT_EQ(d.group_bytes_hashed(), 152u * 32);
  EXPECT_EQ(d.size(), body.size());
  EXPECT_EQ(d.hashed(), body.size());
  // No chunk at all: SHA-256 of nothing. One byte: one chunk in one group.
  EXPECT_EQ(body_digest::of("").etag(),
            "\"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\"");
  EXPECT_EQ(body_digest::of("x").etag(),
            "\"431e815125923125af4197c42861a4ec01b4901e7917cd7db1f98c7debdf22c5\"");
  EXPECT_EQ(body_digest::of("x").groups(), 1u);
  EXPECT_EQ(inventory::etag_of(body), d.etag());
}

TEST(BodyDigest, EveryByteCounts) {
  const std::string body = members_body(500);
  const std::string tag = body_digest::of(body).etag();
  for (std::size_t at : {std::size_t{0}, body.size() / 3, body.size() - 1}) {
    std::string other = body;
    other[at] ^= 1;
    EXPECT_NE(body_digest::of(other).etag(), tag) << at;
  }
  EXPECT_NE(body_digest::of(body + " ").etag(), tag);
  EXPECT_NE(body_digest::of(body.substr(1)).etag(), tag);
}

TEST(BodyDigest, ChunksAreAboutOneKibibyteAndGroupsAboutSixtyFourSums) {
  const std::string body = random_bytes(1 << 20, 7);
  const body_digest d = body_digest::of(body);
  EXPECT_GT(d.chunks(), (1u << 20) / 2048);
  EXPECT_LT(d.chunks(), (1u << 20) / 512);
  EXPECT_GT(d.groups(), d.chunks() / 128);
  EXPECT_LT(d.groups(), d.chunks() / 32);
}

// Random edits of a body: the new body, and the runs of the old one it copies.
struct edited {
  std::string body;
  std::vector<body_digest::kept> runs;
};

edited edit(const std::string& old, std::mt19937_64& rng, std::size_t edits, std::size_t most) {
  // Edit points, increasing; between them the old bytes are copied.
  std::vector<std::size_t> at;
  for (std::size_t i = 0; i < edits; ++i) at.push_back(rng() % (old.size() + 1));
  std::sort(at.begin(), at.end());
  edited e;
  std::size_t from = 0;
  const auto copy = [&](std::size_t to) {
    if (to <= from) return;
    e.runs.push_back({from, to, e.body.size()});
    e.body.append(old, from, to - from);
  };
  for (const std::size_t p : at) {
    if (p < from) continue;
    copy(p);
    const std::size_t removed = std::min<std::size_t>(rng() % (most + 1), old.size() - p);
    const std::size_t added = rng() % (most + 1);
    for (std::size_t k = 0; k < added; ++k) e.body.push_back(static_cast<char>('a' + rng() % 26));
    from = p + removed;
  }
  copy(old.size());
  return e;
}

TEST(BodyDigest, AnUpdateEqualsTheDigestOfTheNewBytes) {
  std::mt19937_64 rng(2026);
  const std::string base = members_body(3000);
  for (int round = 0; round < 300; ++round) {
    const std::size_t edits = 1 + rng() % 4;
    const std::size_t most = round % 3 == 0 ? 3 : round % 3 == 1 ? 100 : 9000;
    const std::string old = round % 10 == 0 ? base.substr(0, rng() % 200) : base;
    const edited e = edit(old, rng, edits, most);
    const body_digest before = body_digest::of(old);
    const body_digest after = body_digest::update(before, e.body, e.runs);
    const body_digest full = body_digest::of(e.body);
    ASSERT_EQ(after.etag(), full.etag()) << "round " << round;
    ASSERT_EQ(after.chunks(), full.chunks()) << "round " << round;
    ASSERT_EQ(after.size(), e.body.size());
    // The same body kept in pieces (cut at random places, each piece a buffer of its own):
    // the same digest.
    core::shared_text::builder b;
    for (std::size_t at = 0; at < e.body.size();) {
      const std::size_t n = std::min<std::size_t>(e.body.size() - at, 1 + rng() % 5000);
      b.append(core::shared_text(e.body.substr(at, n)), 0, n);
      at += n;
    }
    const core::shared_text pieces = std::move(b).finish(1 << 20);
    ASSERT_EQ(pieces.str(), e.body);
    ASSERT_EQ(body_digest::update(before, pieces, e.runs).etag(), full.etag()) << "round " << round;
  }
}

TEST(BodyDigest, AnUpdateHashesOnlyNearTheEdits) {
  std::mt19937_64 rng(5);
  const std::string old = members_body(20000);  // ~1 MiB
  const body_digest before = body_digest::of(old);
  for (int round = 0; round < 20; ++round) {
    const edited e = edit(old, rng, 2, 80);
    const body_digest after = body_digest::update(before, e.body, e.runs);
    ASSERT_EQ(after.etag(), body_digest::of(e.body).etag());
    // Two edits: at most the chunks around each (a few average chunks), not the body; and
    // the groups of their sums, not all of them.
    EXPECT_LT(after.hashed(), 16u * 1024) << "round " << round;
    EXPECT_GT(after.hashed(), 0u);
    EXPECT_LT(after.group_bytes_hashed(), after.chunks() * 32 / 3) << "round " << round;
    EXPECT_GT(after.group_bytes_hashed(), 0u);
    // The rolling hash only over each edit's new bytes and the 63 after them (whose window
    // reaches into the edit), each with its 64-byte warm-up; and the body's last byte.
    EXPECT_LE(after.scanned(), 2u * (80 + 63 + 64) + 1 + 64) << "round " << round;
    EXPECT_GT(after.scanned(), 0u);
  }
  // Nothing copied: everything is hashed again, and the value is the same.
  const body_digest none = body_digest::update(before, old, {});
  EXPECT_EQ(none.hashed(), old.size());
  EXPECT_EQ(none.group_bytes_hashed(), none.chunks() * 32);
  EXPECT_EQ(none.etag(), before.etag());
  // Everything copied: nothing is.
  const std::vector<body_digest::kept> all = {{0, old.size(), 0}};
  const body_digest same = body_digest::update(before, old, all);
  EXPECT_EQ(same.hashed(), 0u);
  EXPECT_EQ(same.group_bytes_hashed(), 0u);
  EXPECT_EQ(same.etag(), before.etag());
}

TEST(BodyDigest, BytesBeforeAChunkDecideWhetherItIsKept) {
  // One byte prepended shifts every chunk but changes none of their bytes: all but those
  // within 64 bytes of the start keep their sums.
  const std::string old = members_body(3000);
  const std::string now = "x" + old;
  const std::vector<body_digest::kept> runs = {{0, old.size(), 1}};
  const body_digest after = body_digest::update(body_digest::of(old), now, runs);
  EXPECT_EQ(after.etag(), body_digest::of(now).etag());
  EXPECT_LT(after.hashed(), 16u * 1024);
  // Appended: the last chunk, which ended with the body, is cut again.
  const std::string longer = old + ",";
  const std::vector<body_digest::kept> head = {{0, old.size(), 0}};
  const body_digest grown = body_digest::update(body_digest::of(old), longer, head);
  EXPECT_EQ(grown.etag(), body_digest::of(longer).etag());
  EXPECT_GT(grown.hashed(), 0u);
  EXPECT_LT(grown.hashed(), 32u * 1024);
}

// The bytes of `old` with each edit applied (in increasing order): at `at`, `removed` bytes
// replaced by `added` new ones; and the runs of `old` it copies.
struct splice_edit {
  std::size_t at = 0;
  std::size_t removed = 0;
  std::size_t added = 0;
};
edited apply_edits(const std::string& old, const std::vector<splice_edit>& edits) {
  edited e;
  std::size_t from = 0;
  for (const auto& x : edits) {
    if (x.at > from) {
      e.runs.push_back({from, x.at, e.body.size()});
      e.body.append(old, from, x.at - from);
    }
    for (std::size_t k = 0; k < x.added; ++k)
      e.body.push_back(static_cast<char>(old[std::min(x.at + k, old.size() - 1)] ^ 0x5a));
    from = std::max(from, x.at + x.removed);
  }
  if (from < old.size()) {
    e.runs.push_back({from, old.size(), e.body.size()});
    e.body.append(old, from, old.size() - from);
  }
  return e;
}

// Where a chunk ends inside the copied bytes of an update, the body before's ends decide it:
// edits at every distance from a chunk's end (the window's 64 bytes on either side of it),
// each with a second edit inside the chunk before or after it (so the chunks around the end
// are cut again), replaced and inserted bytes (runs shifted both ways): each update equals
// the digest of its bytes.
TEST(BodyDigest, EditsAtEveryDistanceFromAChunkEnd) {
  const std::string old = random_bytes(12 * 1024, 11);
  const body_digest before = body_digest::of(old);
  const auto ends = before.ends();
  ASSERT_GE(ends.size(), 4u);
  std::size_t cases = 0;
  for (std::size_t c = 1; c + 1 < ends.size(); ++c) {
    const std::size_t end = ends[c];
    // Chunks of 200 bytes or more on both sides: the second edit fits inside one of them.
    if (end - ends[c - 1] < 200 || ends[c + 1] - end < 200) continue;
    const std::size_t inside_before = (ends[c - 1] + end) / 2;
    const std::size_t inside_after = (end + ends[c + 1]) / 2;
    for (std::size_t at = end - 66; at <= end + 66; ++at) {
      for (const auto& shape : {splice_edit{at, 1, 1}, splice_edit{at, 0, 1}, splice_edit{at, 1, 0},
                                splice_edit{at, 2, 5}}) {
        for (const std::size_t second : {inside_before, inside_after}) {
          std::vector<splice_edit> edits{shape, {second, 1, 1}};
          if (second < at) std::swap(edits[0], edits[1]);
          if (edits[0].at + edits[0].removed > edits[1].at) continue;
          const edited e = apply_edits(old, edits);
          const body_digest after = body_digest::update(before, e.body, e.runs);
          ASSERT_EQ(after.etag(), body_digest::of(e.body).etag())
              << "end " << end << " edit at " << at << " second at " << second;
          ++cases;
        }
      }
    }
  }
  EXPECT_GT(cases, 1000u);
}

// The body before's last byte ends its last chunk whatever the hash says there: when bytes
// follow it in the new body, whether a chunk ends after it is computed, not taken.
TEST(BodyDigest, TheLastByteBeforeIsHashedWhenBytesFollowIt) {
  const std::string bytes = random_bytes(32 * 1024, 12);
  const body_digest whole = body_digest::of(bytes);
  const auto ends = whole.ends();
  ASSERT_GE(ends.size(), 3u);
  // A body whose last byte is a cut (it ends where a chunk of the longer one does), and one
  // whose last byte is not.
  for (const std::size_t size : {std::size_t{ends[1]}, std::size_t{ends[1]} + 100}) {
    const std::string old = bytes.substr(0, size);
    const body_digest before = body_digest::of(old);
    for (const std::string& tail : {std::string("x"), bytes.substr(size + 1, 300)}) {
      const std::string now = old + tail;
      const std::vector<body_digest::kept> head = {{0, old.size(), 0}};
      EXPECT_EQ(body_digest::update(before, now, head).etag(), body_digest::of(now).etag())
          << size << " + " << tail.size();
    }
  }
}

}  // namespace
}  // namespace topogate::inventory

#include "core/chunked_vector.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace topogate::core {
namespace {

using strings = chunked_vector<std::string>;

std::vector<std::string> as_vector(const strings& c) { return {c.begin(), c.end()}; }

std::vector<std::string> numbered(std::size_t n) {
  std::vector<std::string> v;
  for (std::size_t i = 0; i < n; ++i) v.push_back("n" + std::to_string(100000 + i));
  return v;
}

TEST(ChunkedVector, ReadsAsTheVectorItWasBuiltFrom) {
  for (const std::size_t n : {std::size_t{0}, std::size_t{1}, strings::max_chunk,
                              strings::max_chunk + 1, 10 * strings::max_chunk + 7}) {
    const auto v = numbered(n);
    const strings c(v);
    EXPECT_EQ(c.size(), n);
    EXPECT_EQ(c.empty(), n == 0);
    EXPECT_EQ(as_vector(c), v);
    for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(c[i], v[i]);
    // Random access through the iterator: distance, jumps both ways, and back from the end.
    EXPECT_EQ(static_cast<std::size_t>(c.end() - c.begin()), n);
    if (n > 0) {
      EXPECT_EQ(*(c.end() - 1), v.back());
      EXPECT_EQ((c.begin() + static_cast<std::ptrdiff_t>(n / 2)).index(), n / 2);
      EXPECT_EQ(*(c.begin() + static_cast<std::ptrdiff_t>(n / 2)), v[n / 2]);
      auto it = c.end();
      --it;
      EXPECT_EQ(*it, v.back());
    }
    // The chunks hold at most max_chunk each.
    EXPECT_EQ(c.chunk_count(), (n + strings::max_chunk - 1) / strings::max_chunk);
  }
}

TEST(ChunkedVector, PartitionPointFindsTheFirstNotBelow) {
  const auto v = numbered(3 * strings::max_chunk + 5);
  const strings c(v);
  for (std::size_t i = 0; i < v.size(); i += 13) {
    const auto at = c.partition_point([&](const std::string& s) { return s < v[i]; });
    EXPECT_EQ(at.index(), i);
    EXPECT_EQ(*at, v[i]);
  }
  // Below every element: the start; above every one: the end.
  EXPECT_EQ(c.partition_point([](const std::string&) { return false; }), c.begin());
  EXPECT_EQ(c.partition_point([](const std::string&) { return true; }), c.end());
  const strings none;
  EXPECT_EQ(none.partition_point([](const std::string&) { return true; }), none.end());
}

TEST(ChunkedVector, ACopySharesEveryChunkAndAWriteCopiesOnlyItsOwn) {
  const auto v = numbered(4 * strings::max_chunk);
  strings a(v);
  const strings b = a;
  // Elements of the two copies are the same objects until one is written.
  EXPECT_EQ(&a[0], &b[0]);
  EXPECT_EQ(&a[3 * strings::max_chunk], &b[3 * strings::max_chunk]);
  a.set(1, "changed");
  EXPECT_EQ(a[1], "changed");
  EXPECT_EQ(b[1], v[1]);    // the copy keeps what it was taken with
  EXPECT_NE(&a[0], &b[0]);  // the written chunk is a's own now
  EXPECT_EQ(&a[strings::max_chunk], &b[strings::max_chunk]);  // the others still shared
  // A chunk no copy shares is written in place.
  const std::string* own = &a[2];
  a.set(2, "again");
  EXPECT_EQ(&a[2], own);
  EXPECT_EQ(as_vector(b), v);
}

TEST(ChunkedVector, InsertSplitsAFullChunkAndEraseDropsAnEmptyOne) {
  strings c(numbered(strings::max_chunk));
  ASSERT_EQ(c.chunk_count(), 1u);
  c.insert(5, "x");  // max_chunk + 1 in one chunk: split in two
  EXPECT_EQ(c.chunk_count(), 2u);
  EXPECT_EQ(c.size(), strings::max_chunk + 1);
  EXPECT_EQ(c[5], "x");
  c.insert(c.size(), "last");  // at the end: appended
  EXPECT_EQ(c.back(), "last");
  strings one{"only"};
  one.erase(0);
  EXPECT_TRUE(one.empty());
  EXPECT_EQ(one.chunk_count(), 0u);
  EXPECT_EQ(one.begin(), one.end());
}

TEST(ChunkedVector, ChunksWornDownByErasesAreMerged) {
  strings c(numbered(8 * strings::max_chunk));
  ASSERT_EQ(c.chunk_count(), 8u);
  // Every chunk down to a few elements: neighbours join, so far fewer chunks remain.
  for (std::size_t k = 8; k-- > 0;)
    for (std::size_t n = 0; n + 4 < strings::max_chunk; ++n) c.erase(k * strings::max_chunk);
  EXPECT_EQ(c.size(), 8u * 4u);
  EXPECT_LE(c.chunk_count(), 2u);
  std::vector<std::string> expected;
  const auto all = numbered(8 * strings::max_chunk);
  for (std::size_t k = 0; k < 8; ++k)
    for (std::size_t n = strings::max_chunk - 4; n < strings::max_chunk; ++n)
      expected.push_back(all[k * strings::max_chunk + n]);
  EXPECT_EQ(as_vector(c), expected);
}

TEST(ChunkedVector, EqualityIgnoresHowTheElementsAreChunked) {
  const auto v = numbered(3 * strings::max_chunk);
  const strings packed(v);
  strings grown;
  for (auto it = v.rbegin(); it != v.rend(); ++it) grown.insert(0, *it);  // split as it grows
  strings split(v);
  split.insert(10, "tmp");  // splits the first chunk
  split.erase(10);
  EXPECT_NE(split.chunk_count(), packed.chunk_count());
  EXPECT_EQ(split, packed);
  EXPECT_NE(grown.chunk_count(), packed.chunk_count());
  EXPECT_EQ(grown, packed);
  strings other = packed;
  other.set(2 * strings::max_chunk, "different");
  EXPECT_NE(other, packed);
  strings shorter = packed;
  shorter.erase(shorter.size() - 1);
  EXPECT_NE(shorter, packed);
}

TEST(ChunkedVector, SharesChunkWithIsTrueOnlyAtTheStartOfOneChunk) {
  const strings a(numbered(2 * strings::max_chunk));
  strings b = a;
  EXPECT_TRUE(a.begin().shares_chunk_with(b.begin()));
  EXPECT_FALSE((a.begin() + 1).shares_chunk_with(b.begin() + 1));  // inside the chunk
  b.set(0, "changed");
  EXPECT_FALSE(a.begin().shares_chunk_with(b.begin()));
  auto i = a.begin();
  auto j = b.begin();
  i.skip_chunk();
  j.skip_chunk();
  EXPECT_TRUE(i.shares_chunk_with(j));
  EXPECT_EQ(i.index(), strings::max_chunk);
  EXPECT_FALSE(a.end().shares_chunk_with(b.end()));
}

// Random edits applied to a chunked_vector and to a std::vector agree after every step, and
// a copy taken at any step never changes.
TEST(ChunkedVector, RandomEditsAgreeWithAVector) {
  std::mt19937 rng(2026);
  strings c;
  std::vector<std::string> v;
  std::vector<std::pair<strings, std::vector<std::string>>> taken;
  for (int step = 0; step < 4000; ++step) {
    const auto op = rng() % 10;
    const std::string x = "v" + std::to_string(step);
    if (op < 4 || v.empty()) {
      const std::size_t at = rng() % (v.size() + 1);
      c.insert(at, x);
      v.insert(v.begin() + static_cast<std::ptrdiff_t>(at), x);
    } else if (op < 7) {
      const std::size_t at = rng() % v.size();
      c.erase(at);
      v.erase(v.begin() + static_cast<std::ptrdiff_t>(at));
    } else if (op < 9) {
      const std::size_t at = rng() % v.size();
      c.set(at, x);
      v[at] = x;
    } else {
      c.push_back(x);
      v.push_back(x);
    }
    if (step % 97 == 0) taken.emplace_back(c, v);
    ASSERT_EQ(c.size(), v.size()) << step;
    if (step % 50 == 0) {
      ASSERT_EQ(as_vector(c), v) << step;
    }
  }
  EXPECT_EQ(as_vector(c), v);
  for (const auto& [copy, expected] : taken) EXPECT_EQ(as_vector(copy), expected);
  const std::size_t removed = c.erase_if([](const std::string& s) { return s.back() == '7'; });
  const auto kept = std::erase_if(v, [](const std::string& s) { return s.back() == '7'; });
  EXPECT_EQ(removed, kept);
  EXPECT_EQ(as_vector(c), v);
}

TEST(ChunkedVector, EditEachWritesEveryElementAndLeavesCopiesAlone) {
  const strings a(numbered(2 * strings::max_chunk + 3));
  strings b = a;
  b.edit_each([](std::string& s) { s += "!"; });
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(b[i], a[i] + "!");
    EXPECT_NE(a[i].back(), '!');
  }
}

}  // namespace
}  // namespace topogate::core

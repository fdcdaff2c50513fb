#include "server/body_cursor.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace topogate::server {
namespace {

using piece = body_cursor::piece;

constexpr std::size_t record = 16384;
constexpr std::size_t batch = 64 * 1024;
constexpr std::size_t record_overhead = 22;  // TLS 1.3: header, content type, AEAD tag

// What a session made of a body: the bytes, the records of each socket write, and how each
// seal was fed.
struct sealed {
  std::string bytes;
  std::vector<std::vector<std::size_t>> batches;  // record sizes, one list per socket write
  std::size_t straight = 0;                       // seals fed from a piece itself
  std::size_t gathered = 0;                       // seals fed from the gathered record
  std::vector<std::size_t> straight_sizes;
};

// Pieces of the given sizes, each in a buffer of its own, with bytes that tell their place.
std::vector<piece> make_pieces(const std::vector<std::size_t>& sizes) {
  std::vector<piece> out;
  std::size_t at = 0;
  for (const std::size_t n : sizes) {
    auto text = std::make_shared<std::string>();
    // A margin on each side: a read past the piece's view would take a '#'.
    text->append(3, '#');
    for (std::size_t i = 0; i < n; ++i, ++at) text->push_back(static_cast<char>('a' + at % 26));
    text->append(3, '#');
    out.push_back({text, 3, n});
  }
  return out;
}

std::string joined(const std::vector<piece>& pieces) {
  std::string out;
  for (const auto& p : pieces) out += p.view();
  return out;
}

// Drives a cursor as http_session does: the header and the body's start in the first record,
// then batches of up to `batch` bytes of ciphertext, one socket write each. `seal` cuts what
// it is given into records of `record` bytes, as SSL_write does.
sealed seal_as_a_session(const std::vector<piece>& pieces, std::size_t header) {
  sealed out;
  body_cursor cursor;
  cursor.reset({}, pieces);
  std::string plain(header, 'H');
  cursor.gather(plain, header < record ? record - header : 0);
  std::size_t wire = 0;
  std::vector<std::size_t> records;
  const auto to_records = [&](std::string_view p) {
    for (std::size_t at = 0; at < p.size(); at += record) {
      const std::size_t n = std::min(record, p.size() - at);
      records.push_back(n);
      wire += n + record_overhead;
    }
  };
  to_records(plain);
  out.bytes = plain.substr(header);
  const auto write_batch = [&] {
    out.batches.push_back(records);
    records.clear();
    wire = 0;
  };
  while (!cursor.done()) {
    while (!cursor.done() && wire < batch) {
      const bool ok = cursor.seal_next(batch - wire, record, plain, [&](std::string_view p) {
        EXPECT_FALSE(p.empty());
        if (p.data() == plain.data()) {
          ++out.gathered;
        } else {
          ++out.straight;
          out.straight_sizes.push_back(p.size());
        }
        out.bytes += p;
        to_records(p);
        return true;
      });
      EXPECT_TRUE(ok);
    }
    write_batch();
  }
  if (!records.empty()) write_batch();
  return out;
}

// Every record is a whole one but the last of a socket write (a batch ends where its budget
// does) and the body's last: a piece's end never cuts one short.
void expect_whole_records(const sealed& s) {
  for (std::size_t b = 0; b < s.batches.size(); ++b) {
    const auto& r = s.batches[b];
    for (std::size_t i = 0; i + 1 < r.size(); ++i)
      EXPECT_EQ(r[i], record) << "batch " << b << " record " << i;
  }
}

TEST(BodyCursor, OneBufferIsSealedStraightFromItInBatches) {
  for (const std::size_t size :
       {(std::size_t{1} << 20) - 1, std::size_t{1} << 20, (std::size_t{1} << 20) + 1}) {
    const std::string body(size, 'x');
    body_cursor cursor;
    cursor.reset(body, {});
    std::string scratch;
    std::size_t sealed_bytes = 0;
    std::size_t batches = 0;
    while (!cursor.done()) {
      ASSERT_TRUE(cursor.seal_next(batch, record, scratch, [&](std::string_view p) {
        EXPECT_EQ(p.data(), body.data() + sealed_bytes) << size;  // no copy
        // Whole batches, then what is left.
        EXPECT_EQ(p.size(), std::min(batch, body.size() - sealed_bytes)) << size;
        sealed_bytes += p.size();
        return true;
      }));
      ++batches;
    }
    EXPECT_EQ(sealed_bytes, body.size());
    EXPECT_EQ(batches, (size + batch - 1) / batch) << size;
    EXPECT_TRUE(scratch.empty());
  }
}

TEST(BodyCursor, OneBytePiecesAreGatheredIntoWholeRecords) {
  const auto pieces = make_pieces(std::vector<std::size_t>(100'000, 1));
  const auto s = seal_as_a_session(pieces, 300);
  EXPECT_EQ(s.bytes, joined(pieces));
  expect_whole_records(s);
  // Each piece is shorter than a record: every record after the first is gathered.
  EXPECT_EQ(s.straight, 0u);
  EXPECT_EQ(s.gathered, (100'000u - (record - 300) + record - 1) / record);
}

// `count` pieces of `size` bytes after a header of 300: sealed whole, in whole records, with at
// most one gathered record per boundary between pieces.
sealed seal_pieces_of(std::size_t size, std::size_t count) {
  const auto pieces = make_pieces(std::vector<std::size_t>(count, size));
  auto s = seal_as_a_session(pieces, 300);
  EXPECT_EQ(s.bytes, joined(pieces));
  expect_whole_records(s);
  EXPECT_LE(s.gathered, count - 1);
  return s;
}

TEST(BodyCursor, PiecesAroundARecordsSize) {
  for (const std::size_t size : {record - 1, record, record + 1}) {
    SCOPED_TRACE(size);
    EXPECT_GT(seal_pieces_of(size, 20).gathered, 0u);
  }
}

// The whole records of a piece shorter than the batch's room are sealed straight from it;
// only what is left of it joins the next piece's start in a gathered record.
TEST(BodyCursor, APiecesWholeRecordsAreSealedStraightFromIt) {
  for (const std::size_t size : {2 * record - 1, 2 * record, 2 * record + 1, 3 * record + 5}) {
    SCOPED_TRACE(size);
    const auto s = seal_pieces_of(size, 20);
    EXPECT_GT(std::count_if(s.straight_sizes.begin(), s.straight_sizes.end(),
                            [](std::size_t n) { return n % record == 0 && n < batch; }),
              0);
  }
}

TEST(BodyCursor, PiecesAroundABatchsSize) {
  for (const std::size_t size : {batch - 1, batch, batch + 1}) {
    SCOPED_TRACE(size);
    // A batch's room is met straight from a piece that holds it.
    EXPECT_GT(seal_pieces_of(size, 12).straight, 12u);
  }
}

TEST(BodyCursor, MixedAndEmptyPiecesAfterHeadersOfEverySize) {
  const std::vector<std::size_t> sizes{0,     1, 0,         record - 1, 2,      record + 1, 0,
                                       batch, 5, batch + 1, 0,          record, 7,          0};
  const auto pieces = make_pieces(sizes);
  // A response's header is a few hundred bytes: always less than a record.
  for (const std::size_t header : {std::size_t{0}, std::size_t{1}, std::size_t{300}, record - 1}) {
    SCOPED_TRACE(header);
    const auto s = seal_as_a_session(pieces, header);
    EXPECT_EQ(s.bytes, joined(pieces));
    expect_whole_records(s);
  }
}

TEST(BodyCursor, OnlyEmptyPiecesAreDoneWithoutASeal) {
  const auto pieces = make_pieces({0, 0, 0});
  body_cursor cursor;
  cursor.reset({}, pieces);
  EXPECT_FALSE(cursor.done());
  std::string scratch;
  int seals = 0;
  EXPECT_TRUE(cursor.seal_next(batch, record, scratch, [&](std::string_view) {
    ++seals;
    return true;
  }));
  EXPECT_TRUE(cursor.done());
  EXPECT_EQ(seals, 0);
}

TEST(BodyCursor, ASealThatFailsIsReported) {
  const auto pieces = make_pieces({10, 10});
  body_cursor cursor;
  cursor.reset({}, pieces);
  std::string scratch;
  EXPECT_FALSE(cursor.seal_next(batch, record, scratch, [](std::string_view) { return false; }));
  cursor.clear();
  EXPECT_TRUE(cursor.done());
}

}  // namespace
}  // namespace topogate::server

// wipe_storage: a read buffer's whole storage is wiped, whatever part of it was read, consumed
// or still held (util/wipe.hpp). Each case fills the storage with a secret byte, leaves the
// buffer in one state, wipes it, then looks at every byte of the storage.
#include "util/wipe.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <string>
#include <string_view>

namespace topogate::util {
namespace {

constexpr std::size_t capacity = 4096;

// Every byte of the buffer's storage, read through prepare() (which, on an empty buffer, is
// the whole allocation from its start).
std::size_t secret_bytes_left(boost::beast::flat_buffer& b) {
  EXPECT_EQ(b.size(), 0u);
  const auto all = b.prepare(b.capacity());
  const auto* p = static_cast<const unsigned char*>(all.data());
  return static_cast<std::size_t>(std::count(p, p + all.size(), 'S'));
}

// A buffer whose whole storage holds 'S', then `consumed` bytes consumed and `held` of the
// rest still readable.
boost::beast::flat_buffer filled(std::size_t consumed, std::size_t held) {
  boost::beast::flat_buffer b;
  b.reserve(capacity);
  const auto room = b.prepare(b.capacity());
  std::fill_n(static_cast<unsigned char*>(room.data()), room.size(), 'S');
  b.commit(consumed + held);
  b.consume(consumed);
  return b;
}

TEST(WipeStorage, HeldBytesAreWiped) {
  auto b = filled(0, capacity);
  ASSERT_EQ(b.size(), b.capacity());
  wipe_storage(b);
  EXPECT_EQ(secret_bytes_left(b), 0u);
}

TEST(WipeStorage, ConsumedBytesAreWipedToo) {
  // Read, parsed and consumed: the bytes are no longer readable but still in the storage.
  auto b = filled(1000, 0);
  ASSERT_EQ(b.size(), 0u);
  wipe_storage(b);
  EXPECT_EQ(secret_bytes_left(b), 0u);
}

TEST(WipeStorage, ConsumedHeldAndFreeRoomAreAllWiped) {
  auto b = filled(1000, 500);
  ASSERT_EQ(b.size(), 500u);
  wipe_storage(b);
  EXPECT_EQ(secret_bytes_left(b), 0u);
}

TEST(WipeStorage, WithoutTheWipeTheBytesStay) {
  // The other side: a buffer merely cleared keeps what it held, which is why the wipe exists.
  auto b = filled(1000, 500);
  b.clear();
  EXPECT_EQ(secret_bytes_left(b), b.capacity());
}

TEST(WipedAtExit, BytesAreWipedWhenTheScopeEnds) {
  std::string secret(64, 'S');
  auto b = filled(1000, 500);
  {
    const wiped_at_exit wipe_secret{secret};
    const wiped_at_exit wipe_buffer{b};
    EXPECT_EQ(std::count(secret.begin(), secret.end(), 'S'), 64);  // not before
  }
  EXPECT_EQ(std::count(secret.begin(), secret.end(), 'S'), 0);
  EXPECT_EQ(secret.size(), 64u);  // wiped in place, not cleared
  EXPECT_EQ(secret_bytes_left(b), 0u);
}

TEST(WipeStorage, AnEmptyBufferIsFine) {
  boost::beast::flat_buffer b;
  wipe_storage(b);
  EXPECT_EQ(b.size(), 0u);
}

}  // namespace
}  // namespace topogate::util

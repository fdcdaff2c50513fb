// core::shared_text: a text in pieces that share their buffers.

#include "core/shared_text.hpp"

#include <gtest/gtest.h>

#include <memory>
#include <string>

namespace topogate::core {
namespace {

TEST(SharedText, OneTextIsOnePieceThatHoldsItAll) {
  const shared_text t(std::string("hello, world"));
  EXPECT_EQ(t.size(), 12u);
  ASSERT_EQ(t.pieces().size(), 1u);
  ASSERT_NE(t.whole(), nullptr);
  EXPECT_EQ(*t.whole(), "hello, world");
  EXPECT_EQ(t.str(), "hello, world");
  const shared_text none;
  EXPECT_TRUE(none.empty());
  EXPECT_EQ(none.whole(), nullptr);
  EXPECT_EQ(none.str(), "");
}

TEST(SharedText, ATextMadeFromAnotherSharesItsBytesAndReadsAsTheEditedText) {
  const shared_text base(std::string("0123456789abcdefghij"));
  shared_text::builder b;
  b.append("<");
  b.append(base, 2, 5);  // 23456
  b.push_back('|');
  b.append(base, 15, 100);  // fghij: clipped at the end
  b.append(base, 40, 3);    // past the end: nothing
  const shared_text t = std::move(b).finish();
  EXPECT_EQ(t.str(), "<23456|fghij");
  EXPECT_EQ(t.size(), 12u);
  EXPECT_EQ(t.whole(), nullptr);
  // "<", base[2, 7), "|", base[15, 20): the text's own bytes and base's, not copied.
  ASSERT_EQ(t.pieces().size(), 4u);
  EXPECT_EQ(t.pieces()[1].owner, base.pieces()[0].owner);
  EXPECT_EQ(t.pieces()[3].owner, base.pieces()[0].owner);
  EXPECT_EQ(t.pieces()[0].owner, t.pieces()[2].owner);
  EXPECT_EQ(t.pieces()[0].owner->size(), 2u) << "its own bytes only";

  // Ranges across pieces, on both sides of each edge.
  std::string out;
  t.copy_to(out, 0, 12);
  EXPECT_EQ(out, "<23456|fghij");
  out.clear();
  t.copy_to(out, 5, 4);
  EXPECT_EQ(out, "6|fg");
  out.clear();
  t.copy_to(out, 11, 5);
  EXPECT_EQ(out, "j");
  out.clear();
  t.copy_to(out, 12, 1);
  EXPECT_EQ(out, "");
  EXPECT_TRUE(t.equal_at(0, "<2"));
  EXPECT_TRUE(t.equal_at(5, "6|fg"));
  EXPECT_TRUE(t.equal_at(7, "fghij"));
  EXPECT_TRUE(t.equal_at(12, ""));
  EXPECT_FALSE(t.equal_at(7, "fghijk")) << "past the end";
  EXPECT_FALSE(t.equal_at(5, "6|fx"));
  EXPECT_FALSE(t.equal_at(13, ""));

  // A text made from that one shares base's bytes still; contiguous ranges of one buffer
  // are one piece.
  shared_text::builder c;
  c.append(t, 1, 3);  // 234
  c.append(t, 4, 2);  // 56: right after, the same buffer
  const shared_text u = std::move(c).finish();
  EXPECT_EQ(u.str(), "23456");
  ASSERT_EQ(u.pieces().size(), 1u);
  EXPECT_EQ(u.pieces()[0].owner, base.pieces()[0].owner);
  EXPECT_EQ(u.whole(), nullptr) << "a part of base's buffer, not all of it";
}

TEST(SharedText, PastTheMostPiecesATextIsCopiedIntoOne) {
  const shared_text base(std::string(200, 'x'));
  const auto made_of = [&](std::size_t runs) {
    shared_text::builder b;
    for (std::size_t i = 0; i < runs; ++i) {
      b.append(base, 2 * i, 1);  // not contiguous: a piece each
    }
    return std::move(b).finish(64);
  };
  const shared_text at = made_of(64);
  EXPECT_EQ(at.pieces().size(), 64u);
  EXPECT_EQ(at.pieces()[0].owner, base.pieces()[0].owner);
  const shared_text over = made_of(65);
  ASSERT_EQ(over.pieces().size(), 1u);
  ASSERT_NE(over.whole(), nullptr);
  EXPECT_EQ(*over.whole(), std::string(65, 'x'));
  EXPECT_NE(over.pieces()[0].owner, base.pieces()[0].owner);
}

}  // namespace
}  // namespace topogate::core

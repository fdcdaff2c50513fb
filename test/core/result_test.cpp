// core/result: a value or one error (code and message), and result<void>. Both sides of every
// accessor, move-only values, and the abort on a value asked of a failure.

#include "core/result.hpp"

#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace topogate::core {
namespace {

result<int> half(int n) {
  if (n % 2 != 0) return fail(errc::invalid_argument, std::to_string(n) + " is odd");
  return n / 2;
}

result<void> check_positive(int n) {
  if (n <= 0) return fail(errc::invalid_argument, "not positive");
  return {};
}

TEST(Result, HoldsTheValue) {
  const auto r = half(8);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(static_cast<bool>(r));
  EXPECT_EQ(r.value(), 4);
  EXPECT_EQ(*r, 4);
  EXPECT_FALSE(r.failed_with(errc::invalid_argument));
}

TEST(Result, HoldsTheError) {
  const auto r = half(7);
  ASSERT_FALSE(r.ok());
  EXPECT_FALSE(static_cast<bool>(r));
  EXPECT_EQ(r.error().code, errc::invalid_argument);
  EXPECT_EQ(r.error().message, "7 is odd");
  EXPECT_TRUE(r.failed_with(errc::invalid_argument));
  EXPECT_FALSE(r.failed_with(errc::io));
  EXPECT_EQ(r.error(), (error{errc::invalid_argument, "7 is odd"}));
}

TEST(Result, BuildsFromWhatTheValueIsBuiltFrom) {
  const result<std::string> text = "abc";  // const char* -> std::string
  EXPECT_EQ(*text, "abc");
  EXPECT_EQ(text->size(), 3U);
  const result<std::optional<int>> none = std::nullopt;
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  const result<std::vector<int>> list = std::vector<int>{1, 2, 3};
  EXPECT_EQ(list->size(), 3U);
}

TEST(Result, MovesOutMoveOnlyValuesAndErrors) {
  result<std::unique_ptr<int>> r = std::make_unique<int>(5);
  ASSERT_TRUE(r);
  std::unique_ptr<int> p = std::move(r).value();
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(*p, 5);

  result<std::unique_ptr<int>> failed = fail(errc::io, "cannot open x");
  const error e = std::move(failed).error();
  EXPECT_EQ(e.code, errc::io);
  EXPECT_EQ(e.message, "cannot open x");
}

TEST(Result, ChangesTheValueInPlace) {
  result<std::string> r = std::string("a");
  r.value() += "b";
  *r += "c";
  EXPECT_EQ(*r, "abc");
}

TEST(Result, VoidIsOkOrAnError) {
  const auto good = check_positive(1);
  EXPECT_TRUE(good.ok());
  EXPECT_TRUE(static_cast<bool>(good));
  EXPECT_FALSE(good.failed_with(errc::invalid_argument));

  const auto bad = check_positive(0);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code, errc::invalid_argument);
  EXPECT_EQ(bad.error().message, "not positive");
  EXPECT_TRUE(bad.failed_with(errc::invalid_argument));

  const result<void> defaulted;
  EXPECT_TRUE(defaulted.ok());
}

TEST(Result, ErrorPassesThroughToAnotherResult) {
  // The usual forwarding: a failed step's error becomes the caller's.
  const auto twice_half = [](int n) -> result<int> {
    auto h = half(n);
    if (!h) return std::move(h).error();
    return *h * 2;
  };
  EXPECT_EQ(*twice_half(6), 6);
  EXPECT_EQ(twice_half(3).error().message, "3 is odd");
}

TEST(Result, CodesHaveStableNames) {
  EXPECT_EQ(to_string(errc::invalid_argument), "invalid_argument");
  EXPECT_EQ(to_string(errc::not_found), "not_found");
  EXPECT_EQ(to_string(errc::conflict), "conflict");
  EXPECT_EQ(to_string(errc::unavailable), "unavailable");
  EXPECT_EQ(to_string(errc::damaged), "damaged");
  EXPECT_EQ(to_string(errc::io), "io");
  EXPECT_EQ(to_string(errc::too_large), "too_large");
  EXPECT_EQ(to_string(errc::internal), "internal");
}

// Asking a failure for its value (or a success for its error) is a bug in the caller: the
// process stops instead of reading a value that is not there.
TEST(ResultDeathTest, ValueOfAFailureAborts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH((void)half(3).value(), "");
  EXPECT_DEATH((void)half(4).error(), "");
  EXPECT_DEATH((void)check_positive(1).error(), "");
}

}  // namespace
}  // namespace topogate::core

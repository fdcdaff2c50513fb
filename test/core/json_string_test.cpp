// append_json_string copies runs of plain text in one go: an escaped character anywhere in
// a string (inside, before or after an eight-byte word) is escaped exactly as on its own.

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/field_error.hpp"

namespace topogate::core {
namespace {

std::string json(std::string_view s) {
  std::string out;
  append_json_string(out, s);
  return out;
}

TEST(AppendJsonString, EscapesAreTheSameAtEveryPosition) {
  const std::vector<std::string> specials = {"\"",           "\\",   "\n",      "\t",
                                             "\x01",         "\x1f", "\x7f",    "\xc3\xa9",
                                             "\xe2\x80\xa8", "\xff", "\xc2\x85"};
  for (std::size_t n = 0; n <= 20; ++n) {
    const std::string plain(n, 'a');
    EXPECT_EQ(json(plain), "\"" + plain + "\"");
    for (const std::string& special : specials) {
      const std::string alone = json(special);
      const std::string inner = alone.substr(1, alone.size() - 2);
      for (std::size_t at = 0; at <= n; ++at) {
        std::string text = plain;
        text.insert(at, special);
        SCOPED_TRACE(std::to_string(n) + "@" + std::to_string(at));
        std::string want = "\"";
        want.append(plain, 0, at).append(inner).append(plain, at).push_back('"');
        EXPECT_EQ(json(text), want);
      }
    }
  }
  // Printable ASCII at both ends of the range goes out as it is.
  EXPECT_EQ(json(" ~ !#[]{}/~~~~~~~~ "), "\" ~ !#[]{}/~~~~~~~~ \"");
}

// The escaping path assembles its output in 512-byte blocks: an escape or a 16-byte run
// that starts just below a block's end, at it, or just past it, comes out the same, and so
// does a text whose every byte is escaped (each escape up to six bytes long).
TEST(AppendJsonString, EscapesAreTheSameAcrossTheOutputBlocks) {
  const std::vector<std::string> specials = {"\"",           "\x01", "\xc3\xa9", "\xf0\x9f\x98\x80",
                                             "\xe2\x80\xa8", "\xff"};
  const auto inner = [](const std::string& s) {
    const std::string alone = json(s);
    return alone.substr(1, alone.size() - 2);
  };
  for (const std::string& first : specials) {
    for (const std::string& special : specials) {
      // `first` at the start sends the whole text down the escaping path; `special` lands
      // around the first and second block ends of the output.
      for (const std::size_t n : {600u, 1100u}) {
        const std::string plain(n, 'a');
        for (std::size_t at = 480; at <= 540; ++at) {
          for (const std::size_t shift : {std::size_t{0}, std::size_t{512}}) {
            if (at + shift > n) continue;
            std::string text = first + plain;
            text.insert(first.size() + at + shift, special);
            SCOPED_TRACE(std::to_string(n) + "@" + std::to_string(at + shift));
            std::string want = "\"" + inner(first);
            want.append(plain, 0, at + shift)
                .append(inner(special))
                .append(plain, at + shift)
                .push_back('"');
            ASSERT_EQ(json(text), want);
          }
        }
      }
    }
  }
  for (const std::string& special : specials) {
    for (const std::size_t count :
         {85u, 86u, 300u}) {  // 85 and 86 six-byte escapes: 510 and 516 bytes
      std::string text, want = "\"";
      for (std::size_t i = 0; i < count; ++i) {
        text += special;
        want += inner(special);
      }
      want += '"';
      EXPECT_EQ(json(text), want) << count;
    }
  }
}

}  // namespace
}  // namespace topogate::core

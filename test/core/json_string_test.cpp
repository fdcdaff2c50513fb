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
  const std::vector<std::string> specials = {"\"", "\\", "\n", "\t", "\x01", "\x1f", "\x7f",
                                             "\xc3\xa9", "\xe2\x80\xa8", "\xff", "\xc2\x85"};
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

}  // namespace
}  // namespace topogate::core

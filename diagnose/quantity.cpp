#include "diagnose/quantity.hpp"

#include <cstdint>
#include <limits>
#include <string>

namespace topogate::diagnose {

namespace {

constexpr std::int64_t saturated = std::numeric_limits<std::int64_t>::max();
// Digits kept exactly; anything past them can only matter for rounding up, and a value
// with this many integer digits is saturated anyway.
constexpr std::size_t max_kept_digits = 400;

bool is_digit(char c) noexcept { return c >= '0' && c <= '9'; }

struct parsed {
  bool negative = false;
  std::string_view num;    // integer digits, leading zeros stripped
  std::string_view denom;  // fraction digits
  std::string_view suffix;
};

// apimachinery's parseQuantityString, including what it tolerates: "1.G", "." and a bare
// sign (both zero), leading zeros.
bool split(std::string_view s, parsed& out) noexcept {
  std::size_t pos = 0;
  const std::size_t end = s.size();
  if (pos < end && (s[0] == '-' || s[0] == '+')) {
    out.negative = s[0] == '-';
    ++pos;
  }
  while (pos < end && s[pos] == '0') ++pos;
  if (pos >= end) return true;  // all zeros (or nothing) after the sign: zero
  std::size_t i = pos;
  while (i < end && is_digit(s[i])) ++i;
  out.num = s.substr(pos, i - pos);
  pos = i;
  if (pos >= end) return true;
  if (s[pos] == '.') {
    ++pos;
    i = pos;
    while (i < end && is_digit(s[i])) ++i;
    out.denom = s.substr(pos, i - pos);
    pos = i;
    if (pos >= end) return true;
  }
  const std::size_t suffix_start = pos;
  constexpr std::string_view suffix_chars = "eEinumkKMGTP";
  while (pos < end && suffix_chars.find(s[pos]) != std::string_view::npos) ++pos;
  if (pos < end && (s[pos] == '-' || s[pos] == '+')) ++pos;
  while (pos < end && is_digit(s[pos])) ++pos;
  if (pos < end) return false;  // ErrFormatWrong
  out.suffix = s.substr(suffix_start);
  return true;
}

// quantitySuffixer.interpret: base 10 or 2 and the exponent, or false (ErrSuffix).
bool interpret(std::string_view suffix, int& base, std::int64_t& exponent) noexcept {
  struct entry {
    std::string_view s;
    int base;
    int exp;
  };
  static constexpr entry table[] = {
      {"", 10, 0},   {"n", 10, -9}, {"u", 10, -6}, {"m", 10, -3}, {"k", 10, 3},  {"M", 10, 6},
      {"G", 10, 9},  {"T", 10, 12}, {"P", 10, 15}, {"E", 10, 18}, {"Ki", 2, 10}, {"Mi", 2, 20},
      {"Gi", 2, 30}, {"Ti", 2, 40}, {"Pi", 2, 50}, {"Ei", 2, 60},
  };
  for (const entry& e : table) {
    if (e.s == suffix) {
      base = e.base;
      exponent = e.exp;
      return true;
    }
  }
  if (suffix.size() < 2 || (suffix[0] != 'e' && suffix[0] != 'E')) return false;
  // strconv.ParseInt(suffix[1:], 10, 64): optional sign, at least one digit, no overflow.
  std::string_view digits = suffix.substr(1);
  bool neg = false;
  if (digits[0] == '+' || digits[0] == '-') {
    neg = digits[0] == '-';
    digits.remove_prefix(1);
  }
  if (digits.empty()) return false;
  std::uint64_t v = 0;
  const std::uint64_t limit = neg ? std::uint64_t{1} << 63 : (std::uint64_t{1} << 63) - 1;
  for (char c : digits) {
    if (!is_digit(c)) return false;
    const auto d = static_cast<std::uint64_t>(c - '0');
    if (v > (limit - d) / 10) return false;
    v = v * 10 + d;
  }
  // Go then narrows the exponent with int32(parsed): keep that wrap-around.
  const auto low = static_cast<std::uint32_t>(neg ? (~v + 1) : v);
  exponent = static_cast<std::int32_t>(low);
  base = 10;
  return true;
}

// Decimal digit string times two, in place.
void double_digits(std::string& d) {
  int carry = 0;
  for (auto it = d.rbegin(); it != d.rend(); ++it) {
    const int v = (*it - '0') * 2 + carry;
    *it = static_cast<char>('0' + v % 10);
    carry = v / 10;
  }
  if (carry) d.insert(d.begin(), static_cast<char>('0' + carry));
}

// ceil(digits * 10^e), saturated. `tail_nonzero`: a positive amount smaller than one unit
// of the last digit was dropped.
std::int64_t ceil_scaled(const std::string& digits, std::int64_t e, bool tail_nonzero) {
  std::size_t first = digits.find_first_not_of('0');
  if (first == std::string::npos && !tail_nonzero) return 0;
  if (first == std::string::npos) first = digits.size();
  const std::string_view d = std::string_view(digits).substr(first);
  std::string_view integer = d;
  bool remainder = tail_nonzero;
  if (e >= 0) {
    if (static_cast<std::int64_t>(d.size()) + e > 19) return saturated;
  } else {
    const auto drop = static_cast<std::uint64_t>(-e);
    if (drop >= d.size()) {
      integer = {};
      remainder = remainder || !d.empty();
    } else {
      integer = d.substr(0, d.size() - drop);
      remainder =
          remainder || d.substr(d.size() - drop).find_first_not_of('0') != std::string_view::npos;
    }
    e = 0;
  }
  if (static_cast<std::int64_t>(integer.size()) + e > 19) return saturated;
  std::uint64_t v = 0;  // at most 19 digits: below 2^64
  for (char c : integer) v = v * 10 + static_cast<unsigned>(c - '0');
  for (std::int64_t i = 0; i < e; ++i) v *= 10;
  constexpr auto max = static_cast<std::uint64_t>(saturated);
  if (v > max || (remainder && v == max)) return saturated;
  return static_cast<std::int64_t>(v + (remainder ? 1 : 0));
}

}  // namespace

std::optional<quantity> parse_quantity(std::string_view text) noexcept {
  if (text.empty()) return std::nullopt;
  parsed p;
  if (!split(text, p)) return std::nullopt;
  int base = 10;
  std::int64_t exponent = 0;
  if (!interpret(p.suffix, base, exponent)) return std::nullopt;
  try {
    std::string digits;
    digits.reserve(p.num.size() + p.denom.size());
    digits.append(p.num).append(p.denom);
    std::int64_t e10 = -static_cast<std::int64_t>(p.denom.size());
    if (base == 10) e10 += exponent;
    bool tail = false;
    if (digits.size() > max_kept_digits) {
      const std::size_t first = digits.find_first_not_of('0');
      if (first != std::string::npos) {
        digits.erase(0, first);
        if (digits.size() > max_kept_digits) {
          tail = digits.find_first_not_of('0', max_kept_digits) != std::string::npos;
          e10 += static_cast<std::int64_t>(digits.size() - max_kept_digits);
          digits.resize(max_kept_digits);
        }
      } else {
        digits = "0";
      }
    }
    if (base == 2)
      for (std::int64_t i = 0; i < exponent; ++i) double_digits(digits);
    quantity q;
    q.value = ceil_scaled(digits, e10, tail);
    q.milli = ceil_scaled(digits, e10 + 3, tail);
    q.negative = p.negative && q.milli != 0;
    return q;
  } catch (...) {  // allocation failure: not a quantity we can read
    return std::nullopt;
  }
}

bool counted_in_milli(std::string_view resource) noexcept { return resource == "cpu"; }

std::int64_t amount_of(std::string_view resource, const quantity& q) noexcept {
  return counted_in_milli(resource) ? q.signed_milli() : q.signed_value();
}

std::string format_amount(std::string_view resource, std::int64_t amount) {
  const bool neg = amount < 0;
  const std::uint64_t a =
      neg ? 0 - static_cast<std::uint64_t>(amount) : static_cast<std::uint64_t>(amount);
  std::string out = neg ? "-" : "";
  if (counted_in_milli(resource)) {
    if (a % 1000 == 0) return out + std::to_string(a / 1000);
    return out + std::to_string(a) + "m";
  }
  static constexpr struct {
    unsigned shift;
    const char* suffix;
  } units[] = {{60, "Ei"}, {50, "Pi"}, {40, "Ti"}, {30, "Gi"}, {20, "Mi"}, {10, "Ki"}};
  for (const auto& u : units) {
    const std::uint64_t unit = std::uint64_t{1} << u.shift;
    if (a >= unit && a % unit == 0) return out + std::to_string(a / unit) + u.suffix;
  }
  return out + std::to_string(a);
}

}  // namespace topogate::diagnose

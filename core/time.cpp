#include "core/time.hpp"

#include <cstdint>
#include <cstdio>
#include <ctime>

namespace topogate::core {

std::string format_rfc3339_ms(std::chrono::system_clock::time_point t) {
  const auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
  const std::time_t secs = static_cast<std::time_t>(ms / 1000 - (ms % 1000 < 0 ? 1 : 0));
  const auto frac = ((ms % 1000) + 1000) % 1000;
  std::tm tm{};
  ::gmtime_r(&secs, &tm);
  char buf[96];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                static_cast<int>(frac));
  return buf;
}

std::optional<std::chrono::system_clock::time_point> parse_rfc3339(std::string_view s) {
  std::size_t i = 0;
  const auto digits = [&](std::size_t n, int& v) {
    if (i + n > s.size()) return false;
    v = 0;
    for (std::size_t k = 0; k < n; ++k) {
      const char c = s[i + k];
      if (c < '0' || c > '9') return false;
      v = v * 10 + (c - '0');
    }
    i += n;
    return true;
  };
  const auto sep = [&](char want) {
    if (i >= s.size() || s[i] != want) return false;
    ++i;
    return true;
  };
  int year = 0, mon = 0, day = 0, hour = 0, min = 0, sec = 0;
  if (!digits(4, year) || !sep('-') || !digits(2, mon) || !sep('-') || !digits(2, day))
    return std::nullopt;
  if (i >= s.size() || (s[i] != 'T' && s[i] != 't')) return std::nullopt;
  ++i;
  if (!digits(2, hour) || !sep(':') || !digits(2, min) || !sep(':') || !digits(2, sec))
    return std::nullopt;
  std::chrono::nanoseconds frac{0};
  if (i < s.size() && s[i] == '.') {
    ++i;
    std::int64_t ns = 0;
    std::size_t n = 0;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') {
      if (n < 9) ns = ns * 10 + (s[i] - '0');
      ++n;
      ++i;
    }
    if (n == 0) return std::nullopt;
    for (std::size_t k = n; k < 9; ++k) ns *= 10;
    frac = std::chrono::nanoseconds(ns);
  }
  int offset = 0;
  if (i < s.size() && (s[i] == 'Z' || s[i] == 'z')) {
    ++i;
  } else if (i < s.size() && (s[i] == '+' || s[i] == '-')) {
    const int sign = s[i] == '-' ? -1 : 1;
    ++i;
    int oh = 0, om = 0;
    if (!digits(2, oh) || !sep(':') || !digits(2, om) || oh > 23 || om > 59) return std::nullopt;
    offset = sign * (oh * 3600 + om * 60);
  } else {
    return std::nullopt;
  }
  if (i != s.size()) return std::nullopt;
  if (mon < 1 || mon > 12 || day < 1 || day > 31 || hour > 23 || min > 59 || sec > 60)
    return std::nullopt;
  std::tm tm{};
  tm.tm_year = year - 1900;
  tm.tm_mon = mon - 1;
  tm.tm_mday = day;
  tm.tm_hour = hour;
  tm.tm_min = min;
  tm.tm_sec = sec;
  const std::time_t t = ::timegm(&tm);
  if (tm.tm_mday != day && sec != 60) return std::nullopt;  // 2026-02-30 normalised away
  return std::chrono::time_point_cast<std::chrono::system_clock::duration>(
      std::chrono::system_clock::from_time_t(t - offset) + frac);
}

std::string seconds_text(std::chrono::milliseconds d) {
  std::string out = std::to_string(d.count() / 1000);
  if (const auto ms = d.count() % 1000; ms != 0) {
    std::string frac = std::to_string(1000 + ms).substr(1);
    while (frac.back() == '0') frac.pop_back();
    out += "." + frac;
  }
  return out + "s";
}

}  // namespace topogate::core

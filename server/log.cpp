#include "server/log.hpp"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>

#include "core/field_error.hpp"

namespace topogate::server {

namespace {

std::atomic<int> min_level{static_cast<int>(log_level::info)};

std::string_view level_name(log_level l) {
  switch (l) {
    case log_level::debug:
      return "debug";
    case log_level::info:
      return "info";
    case log_level::warn:
      return "warn";
    case log_level::error:
      return "error";
  }
  return "info";
}

void append_timestamp(std::string& out) {
  const auto now = std::chrono::system_clock::now();
  const auto secs = std::chrono::system_clock::to_time_t(now);
  const auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[96];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>(ms));
  out += buf;
}

}  // namespace

void set_log_level(log_level level) { min_level.store(static_cast<int>(level)); }

std::string format_log_line(log_level level, std::string_view msg,
                            std::initializer_list<log_field> fields) {
  std::string out = "{\"ts\":\"";
  append_timestamp(out);
  out += "\",\"level\":\"";
  out += level_name(level);
  out += "\",\"msg\":";
  core::append_json_string(out, msg);
  for (const auto& f : fields) {
    out += ',';
    core::append_json_string(out, f.key);
    out += ':';
    if (const auto* s = std::get_if<std::string_view>(&f.value)) {
      core::append_json_string(out, *s);
    } else if (const auto* i = std::get_if<long long>(&f.value)) {
      out += std::to_string(*i);
    } else if (const auto* d = std::get_if<double>(&f.value)) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.3f", *d);
      out += buf;
    } else {
      out += std::get<bool>(f.value) ? "true" : "false";
    }
  }
  out += '}';
  return out;
}

void log(log_level level, std::string_view msg, std::initializer_list<log_field> fields) {
  if (static_cast<int>(level) < min_level.load(std::memory_order_relaxed)) return;
  std::string line = format_log_line(level, msg, fields);
  line += '\n';
  // One write(2) per line: atomic with respect to other lines for pipes and files.
  const char* p = line.data();
  std::size_t left = line.size();
  while (left > 0) {
    const ssize_t n = ::write(STDERR_FILENO, p, left);
    if (n <= 0) break;
    p += n;
    left -= static_cast<std::size_t>(n);
  }
}

}  // namespace topogate::server

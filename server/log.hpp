#pragma once
// Structured logs: one JSON object per line on stderr, written with a single write so
// lines from several threads never interleave. Callers pass identities (a certificate
// subject, "bearer:<inventory>"), never a token, key or certificate body.

#include <initializer_list>
#include <string>
#include <string_view>
#include <variant>

namespace topogate::server {

enum class log_level { debug, info, warn, error };

struct log_field {
  std::string_view key;
  std::variant<std::string_view, long long, double, bool> value;
  log_field(std::string_view k, std::string_view v) : key(k), value(v) {}
  log_field(std::string_view k, const std::string& v) : key(k), value(std::string_view(v)) {}
  log_field(std::string_view k, const char* v) : key(k), value(std::string_view(v)) {}
  log_field(std::string_view k, int v) : key(k), value(static_cast<long long>(v)) {}
  log_field(std::string_view k, long v) : key(k), value(static_cast<long long>(v)) {}
  log_field(std::string_view k, long long v) : key(k), value(v) {}
  log_field(std::string_view k, unsigned v) : key(k), value(static_cast<long long>(v)) {}
  log_field(std::string_view k, unsigned long v) : key(k), value(static_cast<long long>(v)) {}
  log_field(std::string_view k, double v) : key(k), value(v) {}
  log_field(std::string_view k, bool v) : key(k), value(v) {}
};

// Renders one line (without the trailing newline); separate for tests.
std::string format_log_line(log_level level, std::string_view msg,
                            std::initializer_list<log_field> fields);
void log(log_level level, std::string_view msg, std::initializer_list<log_field> fields = {});

// The minimum level written (default info); set once at startup.
void set_log_level(log_level level);

}  // namespace topogate::server

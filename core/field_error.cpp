#include "field_error.hpp"

#include <charconv>

#include "core/json_writer_internal.hpp"

namespace topogate::core {

using json_detail::append_json_go_quoted_escaped;
using json_detail::plain_prefix;

std::string_view to_string(error_type t) noexcept {
  switch (t) {
    case error_type::required:
      return "Required value";
    case error_type::invalid:
      return "Invalid value";
    case error_type::forbidden:
      return "Forbidden";
    case error_type::duplicate:
      return "Duplicate value";
    case error_type::too_many:
      return "Too many";
    case error_type::not_supported:
      return "Unsupported value";
    case error_type::too_long:
      return "Too long";
    case error_type::not_found:
      return "Not found";
  }
  return "Internal error";
}

std::string field_error::to_string() const {
  std::string out;
  append_to(out);
  return out;
}

void field_error::append_to(std::string& out) const {
  // apimachinery's field.Error.Error(): "<field>: <type>[: <value>][: <detail>]".
  const bool shows_value = has_value && type != error_type::required &&
                           type != error_type::forbidden && type != error_type::too_long;
  // One allocation for the usual error (a value without escapes).
  out.reserve(out.size() + path.size() + 2 + core::to_string(type).size() +
              (shows_value ? 4 + bad_value.size() : 0) + (detail.empty() ? 0 : 2 + detail.size()));
  out += path;
  out += ": ";
  out += core::to_string(type);
  if (shows_value) {
    out += ": ";
    append_go_quoted(out, bad_value);
  }
  if (!detail.empty()) {
    out += ": ";
    out += detail;
  }
}

void field_error::append_json_body_to(std::string& out) const {
  // The pieces of append_to()'s text after the field, each split off next to an ASCII
  // byte: escaped one by one, they are the escaped text.
  const bool shows_value = has_value && type != error_type::required &&
                           type != error_type::forbidden && type != error_type::too_long;
  out += core::to_string(type);  // plain ASCII: nothing to escape
  if (shows_value) {
    if (plain_prefix(bad_value.data(), bad_value.size()) == bad_value.size()) {
      // Go quotes a plain value as it is, and JSON escapes only its quotes.
      out += R"(: \")";
      out += bad_value;
      out += R"(\")";
    } else {
      out += ": ";
      append_json_go_quoted_escaped(out, bad_value);
    }
  }
  if (!detail.empty()) {
    out += ": ";
    append_json_chars(out, detail);
  }
}

field_error required(std::string rule, std::string path, std::string detail) {
  return {std::move(rule), std::move(path), error_type::required, {}, false, std::move(detail)};
}

field_error invalid(std::string rule, std::string path, std::string_view value,
                    std::string detail) {
  return {std::move(rule),  std::move(path), error_type::invalid, std::string(value), true,
          std::move(detail)};
}

field_error forbidden(std::string rule, std::string path, std::string detail) {
  return {std::move(rule), std::move(path), error_type::forbidden, {}, false, std::move(detail)};
}

field_error duplicate(std::string rule, std::string path, std::string_view value) {
  return {std::move(rule), std::move(path), error_type::duplicate, std::string(value), true, {}};
}

field_error too_many(std::string rule, std::string path, std::size_t actual, std::size_t max) {
  return {
      std::move(rule),
      std::move(path),
      error_type::too_many,
      std::to_string(actual),
      false,
      "must have at most " + std::to_string(max) + " items (has " + std::to_string(actual) + ")"};
}

field_error not_supported(std::string rule, std::string path, std::string_view value,
                          const std::vector<std::string>& supported) {
  // apimachinery's field.NotSupported: `supported values: "a", "b"` (each strconv.Quote'd),
  // no detail at all when the list is empty.
  std::string detail;
  for (std::size_t i = 0; i < supported.size(); ++i) {
    detail += i ? ", " : "supported values: ";
    append_go_quoted(detail, supported[i]);
  }
  return {std::move(rule),  std::move(path), error_type::not_supported, std::string(value), true,
          std::move(detail)};
}

field_error too_long(std::string rule, std::string path, std::size_t actual, std::size_t max) {
  return {std::move(rule),
          std::move(path),
          error_type::too_long,
          std::to_string(actual),
          false,
          "may not be more than " + std::to_string(max) + " bytes (has " + std::to_string(actual) +
              ")"};
}

field_error not_found(std::string rule, std::string path, std::string_view value,
                      std::string detail) {
  return {std::move(rule),  std::move(path), error_type::not_found, std::string(value), true,
          std::move(detail)};
}

// Paths are built for every field a validator visits: one allocation at the final size
// (at most), instead of a copy of the parent that then grows.
std::string child(std::string_view parent, std::string_view name) {
  std::string out;
  out.reserve(parent.size() + 1 + name.size());
  out += parent;
  if (!out.empty()) out.push_back('.');
  out += name;
  return out;
}

std::string index(std::string_view parent, std::size_t i) {
  char digits[24];
  const auto [end, ec] = std::to_chars(digits, digits + sizeof digits, i);
  (void)ec;  // 24 characters hold any size_t
  std::string out;
  out.reserve(parent.size() + 2 + static_cast<std::size_t>(end - digits));
  out += parent;
  out.push_back('[');
  out.append(digits, end);
  out.push_back(']');
  return out;
}

std::string key(std::string_view parent, std::string_view k) {
  std::string out;
  out.reserve(parent.size() + 2 + k.size());
  out += parent;
  out.push_back('[');
  out += k;
  out.push_back(']');
  return out;
}

void field_path::append_to(std::string& out) const {
  if (parent_ != nullptr) parent_->append_to(out);
  switch (step_) {
    case step::root:
      out += name_;
      return;
    case step::child:
      if (!out.empty()) out.push_back('.');
      out += name_;
      return;
    case step::index: {
      char digits[24];
      const auto [end, ec] = std::to_chars(digits, digits + sizeof digits, index_);
      (void)ec;  // 24 characters hold any size_t
      out.push_back('[');
      out.append(digits, end);
      out.push_back(']');
      return;
    }
    case step::key:
      out.push_back('[');
      out += name_;
      out.push_back(']');
      return;
  }
}

std::string field_path::str() const {
  // Sized first, so that the steps append without reallocating.
  std::size_t size = 0;
  for (const field_path* p = this; p != nullptr; p = p->parent_) {
    switch (p->step_) {
      case step::root:
        size += p->name_.size();
        break;
      case step::child:
        size += 1 + p->name_.size();
        break;
      case step::index:
        size += 2 + 20;
        break;
      case step::key:
        size += 2 + p->name_.size();
        break;
    }
  }
  std::string out;
  out.reserve(size);
  append_to(out);
  return out;
}

std::string render_text(const error_list& errors) {
  std::string out;
  for (const auto& e : errors) {
    if (!e.rule.empty()) {
      out += '[';
      out += e.rule;
      out += "] ";
    }
    out += e.to_string();
    out += '\n';
  }
  return out;
}

std::string render_json(const error_list& errors) {
  std::string out = "[";
  for (std::size_t i = 0; i < errors.size(); ++i) {
    const auto& e = errors[i];
    if (i) out.push_back(',');
    out += "{\"rule\":";
    append_json_string(out, e.rule);
    out += ",\"field\":";
    append_json_string(out, e.path);
    out += ",\"type\":";
    append_json_string(out, to_string(e.type));
    if (e.has_value) {
      out += ",\"value\":";
      append_json_string(out, e.bad_value);
    }
    out += ",\"detail\":";
    append_json_string(out, e.detail);
    out += ",\"message\":";
    append_json_string(out, e.to_string());
    out.push_back('}');
  }
  out.push_back(']');
  return out;
}

}  // namespace topogate::core

#pragma once
// The one shape for an operation that can fail: result<T> holds either the value or one
// error (a code and a message); result<void> holds nothing or the error. It is the part of
// C++23's std::expected that topogate needs, written out because GCC 12's C++20 library has
// no std::expected.
//
//   core::result<std::string> read(const std::string& path);   // the bytes, or why not
//   if (auto text = read(path)) use(*text); else log(text.error().message);
//   return core::fail(core::errc::io, "cannot open " + path);  // converts to any result<T>
//
// Not for validation. A check of a TopologySource, a snapshot or a ModelDeployment reports
// every problem it finds as a core::error_list (field_error.hpp: rule, path, type, value,
// detail, after apimachinery's field.ErrorList); field errors are its verdict, not a failure
// of the check, and many of them belong together. result<T> is for operations that stop at
// their first failure: reading a file, parsing a duration or a URL, loading or saving a
// revision in a store, loading credentials, building a TLS context.

#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <utility>
#include <variant>

namespace topogate::core {

// What went wrong, for a caller that decides by it (a push maps a store's conflict to 412,
// unavailable to 503); the message says it for people.
enum class errc : std::uint8_t {
  invalid_argument,  // malformed input or configuration: a duration, a URL, an option
  not_found,         // what was named does not exist (an inventory)
  conflict,          // a conditional write lost to another writer (a store's versions)
  unavailable,       // no answer now: a store unreachable or late, an inventory not ready
  forbidden,         // the answer was a refusal of this caller (an API's 403)
  damaged,           // the store answered, but what it holds is no readable revision
  io,                // a file could not be opened, read, written, synced or renamed
  too_large,         // the input is larger than its limit
  internal,          // a library call failed for no reason the input explains (OpenSSL)
};

// The code's name as written above ("invalid_argument", ...), for logs and test output.
[[nodiscard]] constexpr std::string_view to_string(errc c) noexcept {
  switch (c) {
    case errc::invalid_argument:
      return "invalid_argument";
    case errc::not_found:
      return "not_found";
    case errc::conflict:
      return "conflict";
    case errc::unavailable:
      return "unavailable";
    case errc::forbidden:
      return "forbidden";
    case errc::damaged:
      return "damaged";
    case errc::io:
      return "io";
    case errc::too_large:
      return "too_large";
    case errc::internal:
      return "internal";
  }
  return "unknown";
}

struct error {
  errc code = errc::internal;
  std::string message;  // complete, for people: "cannot open /etc/x: No such file or directory"
  friend bool operator==(const error&, const error&) = default;
};

// The error of any failed result: `return core::fail(core::errc::io, msg);`.
[[nodiscard]] inline error fail(errc code, std::string message) {
  return error{code, std::move(message)};
}

// The text of an errno value, as every message spells it ("No such file or directory");
// thread-safe, unlike strerror.
[[nodiscard]] inline std::string errno_text(int e) { return std::system_category().message(e); }

template <class T>
class result;

namespace detail {
// value() or error() asked of a result that does not hold one: a bug in the caller, never
// something the input can cause, so it stops the process (as a failed invariant does).
[[noreturn]] inline void bad_result_access() noexcept { std::abort(); }

// What result<T>'s value constructor takes: anything T is built from but a result or an error.
template <class U, class T>
concept builds_value =
    !std::is_same_v<std::remove_cvref_t<U>, result<T>> &&
    !std::is_same_v<std::remove_cvref_t<U>, error> && std::is_constructible_v<T, U>;
}  // namespace detail

template <class T>
class [[nodiscard]] result {
  static_assert(!std::is_reference_v<T> && !std::is_same_v<std::remove_cv_t<T>, core::error>,
                "result<T> holds a value that is not an error");

 public:
  // Implicit, both, so that `return value;` and `return core::fail(...);` work (as with
  // std::expected). The value is built from anything T is built from.
  template <detail::builds_value<T> U = T>
  result(U&& value) : v_(std::in_place_index<0>, std::forward<U>(value)) {}
  result(core::error e) : v_(std::in_place_index<1>, std::move(e)) {}

  [[nodiscard]] bool ok() const noexcept { return v_.index() == 0; }
  explicit operator bool() const noexcept { return ok(); }
  // True when this failed with `code`.
  [[nodiscard]] bool failed_with(errc code) const noexcept {
    return !ok() && std::get<1>(v_).code == code;
  }

  [[nodiscard]] T& value() & { return *checked_value(); }
  [[nodiscard]] const T& value() const& { return *checked_value(); }
  [[nodiscard]] T&& value() && { return std::move(*checked_value()); }
  [[nodiscard]] T& operator*() & { return value(); }
  [[nodiscard]] const T& operator*() const& { return value(); }
  [[nodiscard]] T&& operator*() && { return std::move(*this).value(); }
  [[nodiscard]] T* operator->() { return &value(); }
  [[nodiscard]] const T* operator->() const { return &value(); }

  [[nodiscard]] const core::error& error() const& {
    if (ok()) detail::bad_result_access();
    return std::get<1>(v_);
  }
  [[nodiscard]] core::error&& error() && {
    if (ok()) detail::bad_result_access();
    return std::get<1>(std::move(v_));
  }

 private:
  T* checked_value() {
    if (!ok()) detail::bad_result_access();
    return std::get_if<0>(&v_);
  }
  const T* checked_value() const {
    if (!ok()) detail::bad_result_access();
    return std::get_if<0>(&v_);
  }

  std::variant<T, core::error> v_;
};

template <>
class [[nodiscard]] result<void> {
 public:
  result() noexcept = default;  // success: `return {};`
  result(core::error e) : error_(std::move(e)) {}

  [[nodiscard]] bool ok() const noexcept { return !error_.has_value(); }
  explicit operator bool() const noexcept { return ok(); }
  [[nodiscard]] bool failed_with(errc code) const noexcept {
    return error_ && error_->code == code;
  }

  [[nodiscard]] const core::error& error() const& {
    if (ok()) detail::bad_result_access();
    return *error_;
  }
  [[nodiscard]] core::error&& error() && {
    if (ok()) detail::bad_result_access();
    return std::move(*error_);
  }

 private:
  std::optional<core::error> error_;
};

}  // namespace topogate::core

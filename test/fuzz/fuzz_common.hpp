#pragma once
// Shared by the libFuzzer targets: a failed property aborts with a message, so libFuzzer
// saves the input as a crash and scripts/fuzz.sh fails.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "core/field_error.hpp"
#include "core/result.hpp"

namespace topogate::fuzz {

[[noreturn]] inline void fail(std::string_view what, std::string_view detail = {}) {
  std::fprintf(stderr, "PROPERTY FAILED: %.*s\n%.*s\n", static_cast<int>(what.size()), what.data(),
               static_cast<int>(detail.size()), detail.data());
  std::abort();
}

inline void check(bool ok, std::string_view what, std::string_view detail = {}) {
  if (!ok) fail(what, detail);
}

// The value of a setup step the target cannot run without.
template <class T>
T value_of(core::result<T> r, std::string_view what) {
  if (!r) fail(what, r.error().message);
  return std::move(r).value();
}

// What tests compare (rule, path, type): messages and line numbers may differ by path.
using error_key = std::tuple<std::string, std::string, core::error_type>;

inline std::vector<error_key> keys(const core::error_list& errors) {
  std::vector<error_key> out;
  out.reserve(errors.size());
  for (const auto& e : errors) out.emplace_back(e.rule, e.path, e.type);
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace topogate::fuzz

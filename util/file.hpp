#pragma once
// Reading files at the process edge: a configuration, a kubeconfig, a credential, an input.
// Bounded, so a wrong path (a device, a huge log) fails instead of filling memory.

#include <cstddef>
#include <string>
#include <string_view>

#include "core/result.hpp"

namespace topogate::util {

// The whole file. Fails with errc::io (the message names the path and errno) or, past
// `max_bytes`, errc::too_large.
core::result<std::string> read_file(const std::string& path, std::size_t max_bytes = 64u << 20);

// `path` resolved against `base_dir` unless absolute.
[[nodiscard]] std::string resolve_path(std::string_view base_dir, std::string_view path);

}  // namespace topogate::util

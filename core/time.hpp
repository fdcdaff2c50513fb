#pragma once
// RFC 3339 times: as Kubernetes writes them (metav1.Time: an ExecCredential's
// expirationTimestamp) and as topogate writes its own (status, logs, the store's annotation).

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

namespace topogate::core {

// UTC with milliseconds: "2026-11-29T18:12:05.123Z".
[[nodiscard]] std::string format_rfc3339_ms(std::chrono::system_clock::time_point t);
// "2026-01-02T15:04:05Z", with fractional seconds (up to nanoseconds) or an offset
// ("+02:00"); nullopt for anything else, an impossible date included.
[[nodiscard]] std::optional<std::chrono::system_clock::time_point> parse_rfc3339(
    std::string_view s);

}  // namespace topogate::core

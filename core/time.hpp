#pragma once
// RFC 3339 times: as Kubernetes writes them (metav1.Time: an ExecCredential's
// expirationTimestamp) and as topogate writes its own (status, logs, the store's annotation);
// and a duration as messages name it.

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

// A duration in seconds, as a message names a setting's value: "30s", "1.5s", "0.3s".
[[nodiscard]] std::string seconds_text(std::chrono::milliseconds d);

}  // namespace topogate::core

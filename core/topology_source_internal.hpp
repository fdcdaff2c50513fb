#pragma once
// Pieces of the TopologySource checks (topology_source.cpp) that tests hold against the full
// checks they stand in for. Not part of the public core interface.

#include <string_view>

namespace topogate::core::detail {

// T9's fast path: true only for a URL that parse_url accepts with the https scheme, a host,
// no user information, no fragment and no query, so that T9 reports nothing for it; false
// says nothing (T9 then parses the URL).
[[nodiscard]] bool plain_https_url(std::string_view u) noexcept;

}  // namespace topogate::core::detail

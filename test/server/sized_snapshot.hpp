#pragma once
// Snapshots whose canonical JSON (core::render_snapshot_json, what topogate serves) is an
// exact number of bytes, for the tests on both sides of the size warning's threshold.

#include <cstdio>
#include <string>
#include <string_view>

#include "core/snapshot.hpp"

namespace topogate::server::testing {

// Valid against a source with the levels topology.gpustack.ai/{region,zone,rack}: Nodes
// worker-000000... in one rack, then a Node without labels whose name (DNS labels of 63)
// takes up the remainder. Canonical already: the text is its own rendering.
inline std::string snapshot_json_of_size(std::size_t bytes, std::string_view revision = "big") {
  core::snapshot s;
  s.api_version = std::string(core::snapshot_api_version);
  s.revision = std::string(revision);
  auto add = [&](std::size_t i) {
    char name[32];
    std::snprintf(name, sizeof name, "worker-%06zu", i);
    s.nodes.push_back({name,
                       {{"topology.gpustack.ai/region", "region-a"},
                        {"topology.gpustack.ai/zone", "zone-a"},
                        {"topology.gpustack.ai/rack", "rack-01"}}});
  };
  add(0);
  const std::size_t one = core::render_snapshot_json(s).size();
  add(1);
  const std::size_t per = core::render_snapshot_json(s).size() - one;
  // Room for the last Node's name: 100 to 100 + per bytes.
  const std::size_t count = (bytes - one - 100) / per + 1;
  for (std::size_t i = 2; i < count; ++i) add(i);
  const std::size_t now = core::render_snapshot_json(s).size();
  const std::size_t empty_node = std::string_view(R"(,"":{})").size();
  std::string last(bytes - now - empty_node, 'z');
  for (std::size_t i = 63; i < last.size(); i += 64) last[i] = '.';
  s.nodes.push_back({std::move(last), {}});
  return core::render_snapshot_json(s);
}

}  // namespace topogate::server::testing

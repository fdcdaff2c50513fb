#pragma once
// The inventory the server-side targets (fuzz_http, fuzz_session) serve: the data-center
// TopologySource of the server tests, and a one-Node snapshot for it.
#include <string_view>

#include "test/fixtures/data_center_source.hpp"

namespace topogate::fuzz {

constexpr std::string_view inventory_source_yaml = test_fixtures::data_center_source_yaml;

constexpr std::string_view inventory_snapshot_yaml = R"(apiVersion: topology.gpustack.ai/v1alpha1
revision: inventory-42
nodes:
  worker-a: {topology.gpustack.ai/region: region-a, topology.gpustack.ai/zone: zone-a, topology.gpustack.ai/rack: rack-01}
)";

}  // namespace topogate::fuzz

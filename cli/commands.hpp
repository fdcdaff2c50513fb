#pragma once
// The command-line entry points. main() only dispatches to these.

#include <span>
#include <string_view>

#include "inventory/registry.hpp"
#include "server/config.hpp"

namespace topogate::cli {

using args = std::span<const std::string_view>;

int run_validate(args a);  // topogate validate {topologysource|snapshot|modeldeployment} ...
int run_review(args a);    // topogate review FILE: AdmissionReview in, response out
int run_serve(args a);     // topogate serve --config FILE
int run_demo(args a);      // topogate demo [--dir DIR] [--port PORT]
int run_version(args a);   // topogate version
int run_diagnose(args a);  // topogate diagnose {chain|pending WORKLOAD|change} [input]
int run_audit(args a);     // topogate audit [input]: the cluster's objects against the rules

// serve's and demo's registry dependencies: every store and watch the configuration asks for.
inventory::registry_deps serve_dependencies(const server::serve_config& cfg);

}  // namespace topogate::cli

#pragma once
// The sizes the Kubernetes code holds its input to, in one place: what the client reads from
// the API, how a list is decoded, and the files around a connection.

#include <cstddef>

#include "core/document.hpp"

namespace topogate::kube {

// The largest answer the client reads, and the largest watch event: a LIST page of a large
// cluster's Nodes is tens of MiB.
inline constexpr std::size_t max_answer_bytes = 256u << 20;
// A whole list as `kubectl get -o json` writes it (every page merged into one): the input
// files of the offline commands (diagnose, audit).
inline constexpr std::size_t max_dump_bytes = 512u << 20;
// A token, a client certificate (with its chain), a key or a CA, as a file or inline.
inline constexpr std::size_t max_credential_bytes = 1u << 20;
// A kubeconfig file.
inline constexpr std::size_t max_kubeconfig_bytes = 16u << 20;

// How a list is decoded, a page from the API (up to max_answer_bytes) or a dump
// (max_dump_bytes): nested as deep as a ModelDeployment's spec, at most 2^26 nodes.
[[nodiscard]] inline core::decode_limits list_limits(std::size_t max_bytes = max_answer_bytes) {
  core::decode_limits limits;
  limits.max_bytes = max_bytes;
  limits.max_depth = 128;
  limits.max_expanded_nodes = std::size_t{1} << 26;
  return limits;
}

}  // namespace topogate::kube

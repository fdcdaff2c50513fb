#pragma once
// Snapshots (topology.gpustack.ai/v1alpha1): strict decoding (S1) and rules S2-S10.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "field_error.hpp"
#include "nodes.hpp"
#include "shared_text.hpp"
#include "topology_source.hpp"

namespace topogate::core {

inline constexpr std::string_view snapshot_api_version = "topology.gpustack.ai/v1alpha1";
// The consumer's webhook reader refuses a larger body, and a ConfigMap holds at most 1 MiB.
inline constexpr std::size_t max_snapshot_bytes = 1u << 20;

struct snapshot_label {
  std::string key;
  std::string value;
};

struct snapshot_node {
  std::string name;
  std::vector<snapshot_label> labels;  // document order
};

struct snapshot {
  std::string api_version;
  std::string revision;
  std::vector<snapshot_node> nodes;  // document order
};

struct snapshot_decode_result {
  snapshot value;
  error_list errors;  // S1 (and S10 for the received size)
  [[nodiscard]] bool ok() const noexcept { return errors.empty(); }
};

// YAML or JSON, one document; JSON takes the simdjson path. The decoder's buffers are
// reused (see json_decoder); the overload without one allocates its own.
snapshot_decode_result decode_snapshot(json_decoder& decoder, std::string_view text);
snapshot_decode_result decode_snapshot(std::string_view text);

struct snapshot_context {
  const topology_source* source = nullptr;  // required
  const node_list* nodes = nullptr;         // optional: enables S3 and S6
  // The list holds only the Nodes the source's nodeSelector selects (an inventory's selected
  // Nodes): S3 then needs no match of the selector per Node.
  bool nodes_selected = false;
};

// S2-S10 over a decoded snapshot (S6 only when S1-S9 pass, as the consumer does).
error_list validate_snapshot(const snapshot& snap, const snapshot_context& ctx);

// Decode + validate: every error, from S1 to S10.
error_list check_snapshot(json_decoder& decoder, std::string_view text,
                          const snapshot_context& ctx);
error_list check_snapshot(std::string_view text, const snapshot_context& ctx);

// topogate's canonical JSON rendering (what it serves): keys sorted like Go's
// encoding/json, YAML-safe escaping, no insignificant white space.
std::string render_snapshot_json(const snapshot& snap);
// The same, and in `members` where each Node's member ("name":{...}) starts, in the order
// rendered (by name), then one more offset: the `}` that closes "nodes".
std::string render_snapshot_json(const snapshot& snap, std::vector<std::uint32_t>* members);
// Bytes [from, to) of one text copied unchanged to [at, at + to - from) of another.
struct copied_bytes {
  std::size_t from = 0;
  std::size_t to = 0;
  std::size_t at = 0;
};
// From a rendering and its `members`: the bytes render_snapshot_json gives for the same
// snapshot under `revision` without the Nodes at the member indices `drop` (increasing)
// and with the Nodes `insert` (each placed before the old member at its index, n for the
// end; increasing, names in order), without rendering the others again; `members_out`
// (may be null) gets the new offsets, and `copied` (may be null) the runs of `body` copied
// unchanged (the header when it is the same, each run of kept members, the closing braces),
// in order and merged where contiguous.
std::string splice_rendered_nodes(
    std::string_view body, const std::vector<std::uint32_t>& members,
    const std::vector<std::size_t>& drop,
    const std::vector<std::pair<std::size_t, const snapshot_node*>>& insert,
    std::string_view api_version, std::string_view revision,
    std::vector<std::uint32_t>* members_out, std::vector<copied_bytes>* copied = nullptr);
// The same in pieces: the kept runs are views of `body`'s buffers, not copies (what the served
// revision's rendering is made with; the string form copies them).
shared_text splice_rendered_nodes(
    const shared_text& body, const std::vector<std::uint32_t>& members,
    const std::vector<std::size_t>& drop,
    const std::vector<std::pair<std::size_t, const snapshot_node*>>& insert,
    std::string_view api_version, std::string_view revision,
    std::vector<std::uint32_t>* members_out, std::vector<copied_bytes>* copied = nullptr);
// S6 for one Node: each read-only parent (topology.kubernetes.io/region, /zone) the snapshot
// gives `n` equals the label of `node` (null: no such Node, which fails when there is one).
[[nodiscard]] bool read_only_parents_match(const snapshot_node& n, const cluster_node* node);
// The same content as block YAML (Accept: application/yaml).
std::string render_snapshot_yaml(const snapshot& snap);

}  // namespace topogate::core

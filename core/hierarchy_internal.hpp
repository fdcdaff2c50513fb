#pragma once
// The hierarchy rules S7-S9 as errors, shared by the snapshot check (snapshot.cpp) and the
// Node-label check (node_labels.cpp), so both name the same rule, type and path for the same
// fault. Not part of the public core interface.

#include <string>
#include <string_view>

#include "field_error.hpp"

namespace topogate::core::detail {

// nodes[NODE][KEY]: where a label of a node is reported, for snapshots and Node labels alike.
[[nodiscard]] std::string node_label_path(std::string_view node, std::string_view key);

// A topology domain value as the consumer accepts it: a non-empty label value.
[[nodiscard]] bool is_domain_value(std::string_view value) noexcept;
// S7: `value` at `path` is empty or not a label value.
[[nodiscard]] field_error domain_value_error(std::string path, std::string_view value);
// S8: the node carries `child` but not its declared parent level `parent` (path names the
// parent's label, the one that is missing).
[[nodiscard]] field_error missing_parent_error(std::string path, std::string_view child,
                                               std::string_view parent);
// S9: `value` was first seen under `first_tuple` on `first_node` and is under `here_tuple`
// at `path` (tuples render as "{key=value, ...}", see ancestor_tuple_text).
[[nodiscard]] field_error parent_conflict_error(std::string path, std::string_view value,
                                                std::string_view first_tuple,
                                                std::string_view first_node,
                                                std::string_view here_tuple);

// Appends "key=value" to a "{...}" tuple under construction (`first` tells whether a
// separator is needed).
void append_tuple_entry(std::string& out, bool first, std::string_view key, std::string_view value);

}  // namespace topogate::core::detail

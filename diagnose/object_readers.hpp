#pragma once
// What cluster_objects.cpp (Kubernetes and GPUStack objects, add_objects) and kueue_objects.cpp
// (Kueue's objects) share to read one decoded object into a cluster_objects.

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "diagnose/cluster_objects.hpp"

namespace topogate::diagnose::detail {

// ---------------------------------------------------------------- fields (cluster_objects.cpp)

// A scalar's text; "" for anything else or nothing.
std::string text_of(const core::doc_node* n);
// The node at `keys` below `n`, nullptr when one is missing.
const core::doc_node* at(const core::doc_node& n,
                         std::initializer_list<std::string_view> keys) noexcept;
// A decimal integer scalar, nullopt otherwise.
std::optional<std::int64_t> int_of(const core::doc_node* n);
// A mapping of labels, sorted; empty for anything else.
label_map labels_of(const core::doc_node* n);
// status.conditions.
std::vector<object_condition> conditions_of(const core::doc_node* status);
// A mapping of quantities; one that is not a Kubernetes quantity is an error at `path`.
resource_amounts amounts_of(const core::doc_node* n, core::error_list& errors,
                            const std::string& path);
std::vector<taint> taints_of(const core::doc_node* n);
std::vector<toleration> tolerations_of(const core::doc_node* n);
// A Pod spec's required node affinity; nullopt when it has none.
std::optional<node_affinity> affinity_of(const core::doc_node& spec);
std::string meta_name(const core::doc_node& o);
std::string meta_namespace(const core::doc_node& o);
std::vector<owner_ref> owners_of(const core::doc_node& o);

// ---------------------------------------------------------------- Kueue (kueue_objects.cpp)

// Each reads one object of its kind and appends it to `c`.
void read_topology(cluster_objects& c, const core::doc_node& o);
void read_flavor(cluster_objects& c, const core::doc_node& o);
void read_cohort(cluster_objects& c, const core::doc_node& o, const std::string& path,
                 core::error_list& errors);
void read_cluster_queue(cluster_objects& c, const core::doc_node& o, const std::string& path,
                        core::error_list& errors);
void read_local_queue(cluster_objects& c, const core::doc_node& o);
void read_workload(cluster_objects& c, const core::doc_node& o, const std::string& path,
                   core::error_list& errors);
void read_admission_check(cluster_objects& c, const core::doc_node& o);

}  // namespace topogate::diagnose::detail

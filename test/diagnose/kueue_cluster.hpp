#pragma once
// The small clusters the Kueue decision tests build in code, shared by their files.

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "diagnose/cluster_objects.hpp"
#include "diagnose/diagnose.hpp"
#include "test/diagnose/fixtures.hpp"

namespace topogate::diagnose::kueue_test {

using namespace core;
using testing::load;
using testing::step;

constexpr const char* zone = "topology.kubernetes.io/zone";

// ---------------------------------------------------------------- Kueue's decision

// A small TAS cluster built in code: zones zone-a and zone-b of two Nodes each (4 CPU,
// 16 GiB, 110 Pods), one flavor pool=gpu over a zone + hostname Topology, one ClusterQueue
// covering cpu and memory with ample quota.
constexpr const char* host = "kubernetes.io/hostname";

inline label_map sorted_labels(label_map l) {
  std::sort(l.begin(), l.end());
  return l;
}

inline k8s_node make_node(const std::string& name, const std::string& z, std::int64_t cpu = 4000) {
  k8s_node n;
  n.name = name;
  n.labels = sorted_labels({{host, name}, {zone, z}, {"pool", "gpu"}});
  n.allocatable = {{"cpu", cpu}, {"memory", 16ll << 30}, {"pods", 110}};
  n.ready = true;
  return n;
}

inline cluster_objects tas_cluster() {
  cluster_objects c;
  c.topologies.push_back({"t", {zone, host}});
  resource_flavor f;
  f.name = "f";
  f.node_labels = {{"pool", "gpu"}};
  f.topology_name = "t";
  c.flavors.push_back(f);
  for (const char* n : {"a1", "a2"}) c.nodes.push_back(make_node(n, "zone-a"));
  for (const char* n : {"b1", "b2"}) c.nodes.push_back(make_node(n, "zone-b"));
  cluster_queue q;
  q.name = "q";
  q.group_resources = {{"cpu", "memory"}};
  q.flavors.push_back(
      {0, "f", {"cpu", "memory"}, {{"cpu", 64000}, {"memory", 256ll << 30}}, {}, {}});
  q.namespace_selector = label_selector{};  // every namespace
  c.cluster_queues.push_back(q);
  c.local_queues.push_back({"default", "q", "q", ""});
  return c;
}

inline podset make_podset(const std::string& name, std::int64_t count, std::int64_t cpu,
                          const std::string& level = zone, const std::string& group = "") {
  podset ps;
  ps.name = name;
  ps.count = count;
  ps.requests = {{"cpu", cpu}};
  ps.required_level = level;
  ps.group_name = group;
  return ps;
}

inline workload& add_workload(cluster_objects& c, const std::string& name,
                              std::vector<podset> sets) {
  workload w;
  w.namespace_ = "default";
  w.name = name;
  w.queue_name = "q";
  w.podsets = std::move(sets);
  w.conditions.push_back({"QuotaReserved", "False", "Pending", ""});
  c.workloads.push_back(std::move(w));
  return c.workloads.back();
}

// A second flavor f2 (nodeLabels pool=POOL, the same Topology, ample cpu quota) after f,
// over Nodes of their own in zone ZONE_VALUE (name, CPU).
inline void add_flavor_f2(cluster_objects& c, const std::string& pool,
                          const std::string& zone_value,
                          const std::vector<std::pair<std::string, std::int64_t>>& nodes) {
  resource_flavor other = c.flavors[0];
  other.name = "f2";
  other.node_labels = {{"pool", pool}};
  c.flavors.push_back(other);
  for (const auto& [name, cpu] : nodes) {
    k8s_node o = make_node(name, zone_value, cpu);
    o.labels = sorted_labels({{host, name}, {zone, zone_value}, {"pool", pool}});
    c.nodes.push_back(o);
  }
  c.cluster_queues[0].flavors.push_back({0, "f2", {"cpu", "memory"}, {{"cpu", 64000}}, {}, {}});
}

// A Workload holding `cpu` of flavor f in ClusterQueue `cq` on Node b1.
inline workload& hold(cluster_objects& c, const std::string& name, const std::string& cq,
                      std::int64_t cpu) {
  auto& held = add_workload(c, name, {make_podset("main", 1, cpu)});
  held.conditions = {{"QuotaReserved", "True", "QuotaReserved", ""}};
  held.admitted_cluster_queue = cq;
  podset_assignment a;
  a.name = "main";
  a.count = 1;
  a.flavors = {{"cpu", "f"}};
  a.topology_levels = {host};
  a.topology_domains = {{{"b1"}, 1}};
  held.assignments.push_back(a);
  return held;
}

inline kueue_decision decide(const cluster_objects& c, const std::string& name) {
  return diagnose_pending(c, "default", name).kueue;
}

// The Workload of that name; a test error when there is none.
inline workload& named(cluster_objects& c, const std::string& name) {
  for (auto& x : c.workloads)
    if (x.name == name) return x;
  throw std::logic_error("no Workload " + name);
}

// One of the decision's notes contains `text`.
inline bool has_note(const kueue_decision& k, std::string_view text) {
  return std::any_of(k.notes.begin(), k.notes.end(),
                     [&](const std::string& n) { return n.find(text) != std::string::npos; });
}

// A Cohort object with its own quota (f: cpu `own`) and an optional parent.
inline cohort_object cohort_with(const std::string& name, const std::string& parent,
                                 std::int64_t own) {
  cohort_object k;
  k.name = name;
  k.parent = parent;
  k.flavors.push_back({0, "f", {"cpu"}, {{"cpu", own}}, {}, {}});
  return k;
}

// Kueue's message when flavor f lacks `more` unused CPUs and `n` Workloads are to be preempted.
inline std::string preemption_message(int more, int n) {
  return "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor "
         "f, " +
         std::to_string(more) + " more needed. Pending the preemption of " + std::to_string(n) +
         " workload(s)";
}

// A Workload of `count` Pods required in one zone, in queue q, with `spec` as its template's
// Pod spec (JSON), as `kubectl get workloads -o json` prints it.
inline std::string workload_json(const std::string& name, int count, const std::string& spec,
                                 const std::string& ns = "default") {
  return R"({"apiVersion":"kueue.x-k8s.io/v1beta2","kind":"Workload","metadata":{"name":")" + name +
         R"(","namespace":")" + ns +
         R"("},"spec":{"queueName":"q","podSets":[{"name":"main","count":)" +
         std::to_string(count) + R"(,"topologyRequest":{"required":")" + zone +
         R"("},"template":{"spec":)" + spec + "}}]}}";
}

inline const podset& only_podset(const cluster_objects& c, const std::string& name) {
  return c.find_workload("default", name)->podsets.at(0);
}

inline void add_json(cluster_objects& c, const std::string& json) {
  const auto errors = add_objects(c, json, "objects.json");
  EXPECT_TRUE(errors.empty()) << render_text(errors);
}

}  // namespace topogate::diagnose::kueue_test

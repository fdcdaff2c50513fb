// A Node change applied to the served revision alone (inventory::evaluate_change) against the
// reference: the accepted snapshot evaluated again in full. Two inventories take the same
// pushes and the same Node lists, one with the incremental path and one without; after
// every change they must serve the same bytes, ETag, revision, pruned Nodes and profiles,
// give the same 503 reason, and record the same history. Random changes under fixed seeds:
// Nodes leave and join the selection, leave and join the cluster (one the snapshot names
// breaks S8 when it joins), change the read-only zone S6 compares (so it fails and holds
// again), lose it (so profiles move), change labels no served byte depends on; several at
// once, bursts past the incremental limit, and new pushes (some out of name order). The lists
// name the Nodes that changed, as the Node view's do, and the fast inventory selects from
// those alone.

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/profile_impact.hpp"
#include "core/snapshot.hpp"
#include "core/topology_source.hpp"
#include "inventory/inventory.hpp"

namespace topogate::inventory {
namespace {

constexpr const char* selected_source = R"(apiVersion: worker.gpustack.ai/v1alpha1
kind: TopologySource
metadata: {name: dc}
spec:
  levels: [topology.kubernetes.io/region, topology.kubernetes.io/zone, topology.gpustack.ai/rack]
  nodeSelector: {matchLabels: {node-group: gpu}}
  configMap:
    configMapRef: {namespace: gpustack-system, name: topology-inventory}
    key: snapshot.yaml
    maxStaleness: 10m
)";

constexpr const char* every_node_source = R"(apiVersion: worker.gpustack.ai/v1alpha1
kind: TopologySource
metadata: {name: dc}
spec:
  levels: [topology.kubernetes.io/region, topology.kubernetes.io/zone, topology.gpustack.ai/rack]
  configMap:
    configMapRef: {namespace: gpustack-system, name: topology-inventory}
    key: snapshot.yaml
    maxStaleness: 10m
)";

constexpr std::string_view k8s_region = "topology.kubernetes.io/region";
constexpr std::string_view k8s_zone = "topology.kubernetes.io/zone";
constexpr int cluster_size = 40;

std::string node_name(int i) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "node-%02d", i);
  return buf;
}

// The Nodes as the watch keeps them: name -> labels (sorted by key as node_labels wants).
using cluster_state = std::map<std::string, std::map<std::string, std::string>>;

// Every seventh Node out of the selection, unless `all_selected`.
cluster_state initial_cluster(bool all_selected) {
  cluster_state c;
  for (int i = 0; i < cluster_size; ++i) {
    auto& l = c[node_name(i)];
    l["kubernetes.io/hostname"] = node_name(i);
    l["node-group"] = i % 7 == 6 && !all_selected ? "cpu" : "gpu";
    l[std::string(k8s_region)] = "us-east-1";
    l[std::string(k8s_zone)] = i % 2 ? "us-east-1a" : "us-east-1b";
    l["topology.gpustack.ai/rack"] = "rack-" + std::to_string(i / 4);
  }
  return c;
}

std::shared_ptr<const core::node_list> list_of(const cluster_state& c) {
  core::node_list out;
  for (const auto& [name, labels] : c) {
    core::node_labels::storage s(labels.begin(), labels.end());
    out.nodes.push_back({name, core::node_labels(std::move(s))});
  }
  return std::make_shared<const core::node_list>(std::move(out));
}

// The lists as the Node view hands them (node_view::take): each named, and naming the Nodes
// that changed since the list before (now and then with a Node that did not: a superset is
// allowed), except after a relist. The fast inventory then applies a change from those Nodes
// alone (inventory::select_changed); the reference, evaluating in full, compares whole lists.
struct view_lists {
  std::uint64_t next_id = 1;
  cluster_state last;
  std::mt19937 extra;
  explicit view_lists(unsigned seed) : extra(seed) {}

  std::shared_ptr<const core::node_list> operator()(const cluster_state& c, bool relist) {
    auto out = std::make_shared<core::node_list>(*list_of(c));
    out->id = next_id++;
    if (!relist && out->id > 1) {
      out->since = out->id - 1;
      for (const auto& [name, labels] : c) {
        const auto it = last.find(name);
        if (it == last.end() || it->second != labels) out->changed.push_back(name);
      }
      for (const auto& [name, labels] : last)
        if (!c.contains(name)) out->changed.push_back(name);
      if (extra() % 3 == 0) out->changed.push_back(node_name(static_cast<int>(extra() % 40)));
      std::sort(out->changed.begin(), out->changed.end());
      out->changed.erase(std::unique(out->changed.begin(), out->changed.end()), out->changed.end());
    }
    last = c;
    return out;
  }
};

// Nodes 0..29 of the cluster and, `with_unknown`, two it never has (pruned); node-20
// invalid, `with_invalid` (see below). The even ones
// carry the read-only region and zone (S6 compares them with the Node's) and a rack; the
// odd ones nothing (their profile is read from the Node's region and zone). `shuffled`
// lists them out of name order (the incremental path then steps aside).
std::string snapshot_of(const std::string& revision, int variant, bool shuffled, bool with_unknown,
                        bool with_invalid = false) {
  std::vector<std::string> members;
  auto add = [&](const std::string& name, int i) {
    std::string m = "\"" + name + "\":{";
    if (i == 20 && with_invalid) {
      // Out of the selection at first (and so pruned): when it joins, its rack without the
      // parents S8 requires makes the revision invalid.
      m += "\"topology.gpustack.ai/rack\":\"rack-4\"";
    } else if (i % 2 == 0) {
      m += "\"topology.gpustack.ai/rack\":\"rack-" + std::to_string((i + variant) / 4) + "\",\"" +
           std::string(k8s_region) + "\":\"us-east-1\",\"" + std::string(k8s_zone) +
           "\":\"us-east-1b\"";
    }
    m += "}";
    members.push_back(std::move(m));
  };
  for (int i = 0; i < 30; ++i) add(node_name(i), i);
  if (with_unknown) {
    add("node-77", 1);
    add("node-99", 3);
  }
  if (shuffled) std::reverse(members.begin(), members.end());
  std::string out =
      R"({"apiVersion":"topology.gpustack.ai/v1alpha1","revision":")" + revision + R"(","nodes":{)";
  for (std::size_t i = 0; i < members.size(); ++i) out += (i ? "," : "") + members[i];
  return out + "}}";
}

void expect_same_profiles(const core::profile_assignment& a, const core::profile_assignment& b,
                          const std::string& where) {
  ASSERT_EQ(a.profiles.size(), b.profiles.size()) << where;
  for (std::size_t i = 0; i < a.profiles.size(); ++i) {
    EXPECT_EQ(a.profiles[i].id, b.profiles[i].id) << where;
    EXPECT_EQ(a.profiles[i].levels, b.profiles[i].levels) << where;
    EXPECT_EQ(a.profiles[i].nodes, b.profiles[i].nodes) << where;
  }
  ASSERT_EQ(a.nodes.size(), b.nodes.size()) << where;
  for (std::size_t i = 0; i < a.nodes.size(); ++i) {
    EXPECT_EQ(a.nodes[i].node, b.nodes[i].node) << where;
    EXPECT_EQ(a.nodes[i].profile, b.nodes[i].profile) << where;
    EXPECT_EQ(a.nodes[i].values(), b.nodes[i].values()) << where;
  }
}

void expect_same(const inventory& fast, const inventory& full, const std::string& where) {
  const auto a = fast.current();
  const auto b = full.current();
  ASSERT_EQ(a == nullptr, b == nullptr) << where;
  EXPECT_EQ(fast.serve().unavailable_reason, full.serve().unavailable_reason) << where;
  if (a) {
    EXPECT_EQ(a->json_body(), b->json_body()) << where;
    EXPECT_EQ(a->json_text.str(), a->json_body()) << where;
    EXPECT_EQ(&a->json_body(), &a->json_body()) << "gathered once: " << where;
    EXPECT_LE(a->json_text.pieces().size(), 64u) << where;
    EXPECT_EQ(a->etag, b->etag) << where;
    EXPECT_EQ(a->revision_id, b->revision_id) << where;
    EXPECT_EQ(a->accepted_revision_id, b->accepted_revision_id) << where;
    EXPECT_EQ(a->node_count, b->node_count) << where;
    EXPECT_EQ(a->pruned_nodes, b->pruned_nodes) << where;
    EXPECT_EQ(a->yaml_body(), b->yaml_body()) << where;
    core::snapshot sa, sb;
    ASSERT_TRUE(a->accepted_snapshot(sa)) << where;
    ASSERT_TRUE(b->accepted_snapshot(sb)) << where;
    EXPECT_EQ(core::render_snapshot_json(sa), core::render_snapshot_json(sb)) << where;
    ASSERT_TRUE(a->profiles && b->profiles) << where;
    expect_same_profiles(*a->profiles, *b->profiles, where);
    // The incremental path keeps its own record of where each member starts: it must stay
    // the rendering's.
    if (a->members) {
      std::vector<std::uint32_t> members;
      core::render_snapshot_json(core::decode_snapshot(a->json_body()).value, &members);
      EXPECT_EQ(*a->members, members) << where;
    }
  }
  EXPECT_EQ(fast.attempts_recorded(), full.attempts_recorded()) << where;
  const auto ha = fast.last_attempt();
  const auto hb = full.last_attempt();
  ASSERT_EQ(ha.has_value(), hb.has_value()) << where;
  if (ha) {
    EXPECT_EQ(ha->accepted, hb->accepted) << where;
    EXPECT_EQ(ha->note, hb->note) << where;
    EXPECT_EQ(ha->etag, hb->etag) << where;
    EXPECT_EQ(ha->revision_id, hb->revision_id) << where;
    EXPECT_EQ(ha->pruned_nodes, hb->pruned_nodes) << where;
    EXPECT_EQ(core::render_json(ha->errors), core::render_json(hb->errors)) << where;
    ASSERT_EQ(ha->impact == nullptr, hb->impact == nullptr) << where;
    if (ha->impact) {
      EXPECT_EQ(core::render_impact_json(*ha->impact), core::render_impact_json(*hb->impact))
          << where;
    }
  }
}

struct pair_of_inventories {
  std::unique_ptr<inventory> fast;
  std::unique_ptr<inventory> full;
  explicit pair_of_inventories(const char* source_yaml, unknown_nodes_policy policy) {
    inventory_config cfg;
    cfg.name = "dc";
    cfg.source = core::validate_topology_source_text(source_yaml).source;
    cfg.unknown_nodes = policy;
    fast = std::make_unique<inventory>(cfg);
    full = std::make_unique<inventory>(cfg);
    full->set_incremental_node_changes(false);
  }
  void nodes(const std::shared_ptr<const core::node_list>& list) {
    fast->set_nodes(list);
    full->set_nodes(list);
  }
  void offer(const std::string& body) {
    inventory::offer_options o{"push", "writer", std::nullopt, std::nullopt};
    const bool a = fast->offer(body, o).accepted;
    const bool b = full->offer(body, o).accepted;
    EXPECT_EQ(a, b);
  }
};

// One random change to the cluster. The changes that fail S6 (an even Node's zone or region
// no longer the snapshot's) are rare, so the revision is mostly valid and the next
// changes have something to be applied to.
void mutate(cluster_state& c, std::mt19937& rng) {
  std::uniform_int_distribution<int> pick(0, cluster_size + 1);  // two names it never had
  const int i = pick(rng);
  const std::string name = node_name(i);
  const int w = static_cast<int>(rng() % 100);
  auto it = c.find(name);
  if (it == c.end()) {
    if (w < 50) return;
    // The Node joins (again), in or out of the selection.
    auto& l = c[name];
    l["kubernetes.io/hostname"] = name;
    l["node-group"] = w < 85 ? "gpu" : "cpu";
    l[std::string(k8s_region)] = "us-east-1";
    l[std::string(k8s_zone)] = i % 2 ? "us-east-1a" : "us-east-1b";
    return;
  }
  auto& l = it->second;
  const bool odd = i % 2 == 1;
  if (w < 12) {
    c.erase(it);  // leaves the cluster
  } else if (w < 27) {
    l["node-group"] = l["node-group"] == "gpu" ? "cpu" : "gpu";  // leaves or joins the selection
  } else if (w < 37) {
    l[std::string(k8s_zone)] = "us-east-1b";  // S6 holds again for an even one
  } else if (w < 39) {
    l[std::string(k8s_zone)] = "us-east-1a";  // S6 fails for an even one
  } else if (w < 55) {
    if (odd) l[std::string(k8s_zone)] = rng() % 2 ? "us-east-1a" : "us-east-1c";
  } else if (w < 65) {
    if (odd) l.erase(std::string(k8s_zone));  // its profile is shallower
  } else if (w < 72) {
    if (odd || w < 66) l[std::string(k8s_region)] = rng() % 2 ? "us-east-1" : "eu-west-1";
  } else if (w < 80) {
    if (odd) l.erase(std::string(k8s_region));  // no profile level left but the hostname
  } else if (w < 90) {
    l["topology.gpustack.ai/rack"] += "x";  // the snapshot decides it: nothing served moves
  } else {
    l["topology.gpustack.ai/profile"] = "fnv64-" + std::to_string(rng() % 3);
  }
}

// What the incremental path decided, by outcome: Nodes cut from the rendering or rendered
// back into it (new bytes), the same bytes with profiles that moved, or nothing the
// consumer would notice.
struct outcomes {
  std::uint64_t pruned = 0;
  std::uint64_t shared = 0;  // of those, how many share bytes with the rendering before
  std::uint64_t profiles = 0;
  std::uint64_t unchanged = 0;
};

void run(const char* source_yaml, unknown_nodes_policy policy, unsigned seed, outcomes* seen) {
  pair_of_inventories p(source_yaml, policy);
  std::mt19937 rng(seed);
  const bool unknown = policy == unknown_nodes_policy::prune;
  cluster_state c = initial_cluster(!unknown);
  view_lists lists(seed);
  p.nodes(lists(c, true));
  // node-20 starts out of the selection, pruned, only where there is a selector.
  const bool invalid = unknown && source_yaml == selected_source;
  p.offer(snapshot_of("r0", 0, false, unknown, invalid));
  expect_same(*p.fast, *p.full, "after the first push");
  ASSERT_NE(p.fast->current(), nullptr)
      << p.fast->serve().unavailable_reason
      << (p.fast->last_attempt() ? core::render_text(p.fast->last_attempt()->errors) : "");
  for (int step = 0; step < 400; ++step) {
    const int r = static_cast<int>(rng() % 200);
    if (r < 6) {
      // A new revision (sometimes out of name order), then the Node changes go on.
      p.offer(snapshot_of("r" + std::to_string(step), step % 3, r == 0, unknown, invalid));
    } else if (r < 10) {
      // A burst past the incremental limit (64 Nodes): one full evaluation.
      for (int k = 0; k < 80; ++k) mutate(c, rng);
      p.nodes(lists(c, false));
    } else if (r < 20) {
      c = initial_cluster(!unknown);  // every Node back as it was, as a relist finds them
      p.nodes(lists(c, true));
    } else {
      const int k = 1 + static_cast<int>(rng() % 4);
      for (int i = 0; i < k; ++i) mutate(c, rng);
      const auto was = p.fast->current();
      const auto decided = p.fast->incremental_node_changes();
      p.nodes(lists(c, false));
      if (p.fast->incremental_node_changes() != decided) {
        const auto now = p.fast->current();
        if (now == was) {
          ++seen->unchanged;
        } else if (now && was && now->etag == was->etag) {
          ++seen->profiles;
        } else {
          ++seen->pruned;
          // Cut or rendered back into the one before, whose kept bytes it shares.
          if (now && was) {
            for (const auto& piece : now->json_text.pieces()) {
              const auto before = was->json_text.pieces();
              if (std::any_of(before.begin(), before.end(),
                              [&](const auto& b) { return b.owner == piece.owner; })) {
                ++seen->shared;
                break;
              }
            }
          }
        }
      }
    }
    expect_same(*p.fast, *p.full, "seed " + std::to_string(seed) + " step " + std::to_string(step));
    if (::testing::Test::HasFatalFailure()) return;
  }
  EXPECT_EQ(p.full->incremental_node_changes(), 0u);
}

// Six seeds of run(); the comparison is only worth something if the incremental path
// decided each outcome (with `unknownNodes: reject` a departure is never its to decide).
void run_seeds(const char* source_yaml, unknown_nodes_policy policy, unsigned first_seed) {
  outcomes seen;
  for (unsigned seed = first_seed; seed < first_seed + 6; ++seed)
    run(source_yaml, policy, seed, &seen);
  std::printf(
      "incremental: %llu re-rendered (%llu sharing bytes), %llu profiles moved, %llu unchanged\n",
      static_cast<unsigned long long>(seen.pruned), static_cast<unsigned long long>(seen.shared),
      static_cast<unsigned long long>(seen.profiles),
      static_cast<unsigned long long>(seen.unchanged));
  if (policy == unknown_nodes_policy::prune) {
    EXPECT_GT(seen.pruned, 0u);
    // All but the renderings copied into one buffer (past 64 pieces).
    EXPECT_GT(seen.shared, seen.pruned / 2);
  } else {
    EXPECT_EQ(seen.pruned, 0u);  // a Node that leaves fails S3: evaluated in full
  }
  EXPECT_GT(seen.profiles, 0u);
  EXPECT_GT(seen.unchanged, 0u);
}

TEST(NodeChange, IncrementalEqualsFullEvaluationWithSelector) {
  run_seeds(selected_source, unknown_nodes_policy::prune, 1);
}

TEST(NodeChange, IncrementalEqualsFullEvaluationWithoutSelector) {
  run_seeds(every_node_source, unknown_nodes_policy::prune, 11);
}

TEST(NodeChange, IncrementalEqualsFullEvaluationWhenUnknownNodesAreRejected) {
  run_seeds(selected_source, unknown_nodes_policy::reject, 21);
}

// Two Nodes the snapshot names join one after the other with a rack no served Node has, under
// different zones: each is valid alone, the two together are not (S9). The second must not
// be let in because the first one's rack was unknown when the served Nodes were indexed.
TEST(NodeChange, JoinsWithARackNoServedNodeHadAreCheckedAgainstEachOther) {
  pair_of_inventories p(selected_source, unknown_nodes_policy::prune);
  cluster_state c = initial_cluster(false);
  // node-06 and node-13 are out of the selection at first.
  c["node-13"][std::string(k8s_zone)] = "us-east-1a";
  p.nodes(list_of(c));
  const auto member = [](const std::string& name, const char* zone, const char* rack) {
    return "\"" + name + "\":{\"" + std::string(k8s_region) + "\":\"us-east-1\",\"" +
           std::string(k8s_zone) + "\":\"" + zone + "\",\"topology.gpustack.ai/rack\":\"" + rack +
           "\"}";
  };
  std::string body =
      R"({"apiVersion":"topology.gpustack.ai/v1alpha1","revision":"new-rack","nodes":{)";
  body += member("node-00", "us-east-1b", "rack-0") + ",";
  body += member("node-01", "us-east-1a", "rack-1") + ",";
  body += member("node-06", "us-east-1b", "rack-new") + ",";
  body += member("node-13", "us-east-1a", "rack-new") + "}}";
  p.offer(body);
  expect_same(*p.fast, *p.full, "accepted with node-06 and node-13 pruned");
  ASSERT_NE(p.fast->current(), nullptr);
  EXPECT_EQ(p.fast->current()->pruned_nodes, (std::vector<std::string>{"node-06", "node-13"}));

  c["node-06"]["node-group"] = "gpu";
  p.nodes(list_of(c));
  expect_same(*p.fast, *p.full, "node-06 joined");
  ASSERT_NE(p.fast->current(), nullptr);
  EXPECT_EQ(p.fast->current()->pruned_nodes, (std::vector<std::string>{"node-13"}));

  c["node-13"]["node-group"] = "gpu";
  p.nodes(list_of(c));
  expect_same(*p.fast, *p.full, "node-13 joined");
  EXPECT_EQ(p.fast->current(), nullptr);  // rack-new under two zones
  EXPECT_NE(p.fast->serve().unavailable_reason.find("S9"), std::string::npos)
      << p.fast->serve().unavailable_reason;
}

// A Node joins while the served Node its zone's carrier index names is out of the selection:
// another served Node of that zone stands in, and the join is still decided alone. Only a
// value no served Node carries goes to the full evaluation.
TEST(NodeChange, AJoinWhoseIndexedCarrierLeftIsCheckedAgainstAnotherCarrier) {
  pair_of_inventories p(selected_source, unknown_nodes_policy::prune);
  cluster_state c = initial_cluster(true);
  p.nodes(list_of(c));
  // The even Nodes carry zone us-east-1b: node-00 is its carrier in the index. Racks are
  // (i + 0) / 4: rack-1 holds node-04 and node-06.
  p.offer(snapshot_of("r0", 0, false, false));
  ASSERT_NE(p.fast->current(), nullptr);
  ASSERT_TRUE(p.fast->current()->pruned_nodes.empty());
  const auto step = [&](const char* node, const char* group, const std::string& where) {
    c[node]["node-group"] = group;
    const auto decided = p.fast->incremental_node_changes();
    p.nodes(list_of(c));
    expect_same(*p.fast, *p.full, where);
    return p.fast->incremental_node_changes() - decided;
  };
  EXPECT_EQ(step("node-00", "cpu", "the zone's carrier left"), 1u);
  EXPECT_EQ(step("node-04", "cpu", "node-04 left"), 1u);
  EXPECT_EQ(p.fast->current()->pruned_nodes, (std::vector<std::string>{"node-00", "node-04"}));
  // node-04 back: its zone's indexed carrier is out; node-02 (zone us-east-1b) stands in,
  // and its rack's is node-04 itself.
  EXPECT_EQ(step("node-04", "gpu", "node-04 back"), 1u);
  EXPECT_EQ(p.fast->current()->pruned_nodes, (std::vector<std::string>{"node-00"}));
  // Both Nodes of rack-1 out, then node-06 back: no served Node carries rack-1 (its indexed
  // carrier, node-04, is out): the full evaluation decides.
  EXPECT_EQ(step("node-04", "cpu", "node-04 left again"), 1u);
  EXPECT_EQ(step("node-06", "cpu", "node-06 left"), 1u);
  EXPECT_EQ(step("node-06", "gpu", "node-06 back"), 0u);
  EXPECT_EQ(p.fast->current()->pruned_nodes, (std::vector<std::string>{"node-00", "node-04"}));
  // The full evaluation built the index again: node-06 carries rack-1 now, node-02 the zone.
  EXPECT_EQ(step("node-04", "gpu", "node-04 back with node-06 served"), 1u);
  EXPECT_EQ(step("node-00", "gpu", "the zone's first carrier back"), 1u);
  EXPECT_TRUE(p.fast->current()->pruned_nodes.empty());
}

// The rendering a Node's departure is cut from, or its return rendered into, equals
// rendering the snapshot as it then is.
TEST(NodeChange, SplicedMembersRenderAsTheSnapshotThen) {
  const auto snap = core::decode_snapshot(snapshot_of("r", 0, false, true)).value;
  std::vector<std::uint32_t> members;
  const std::string body = core::render_snapshot_json(snap, &members);
  ASSERT_EQ(members.size(), snap.nodes.size() + 1);
  EXPECT_EQ(body, core::render_snapshot_json(snap));
  // Served: the snapshot less `out`; then `drop` (served member indices) leave and the
  // Nodes `back` (snapshot indices, among `out`) return.
  struct step_case {
    std::vector<std::size_t> out, drop, back;
  };
  const std::vector<step_case> cases = {
      {{}, {}, {}},
      {{}, {0}, {}},
      {{}, {31}, {}},
      {{}, {0, 1, 2}, {}},
      {{}, {5, 17, 30, 31}, {}},
      {{0}, {}, {0}},
      {{31}, {}, {31}},
      {{3, 4}, {3}, {3, 4}},
      {{0, 10, 31}, {0, 28}, {10, 31}},
      {{7}, {6, 7}, {7}},
  };
  for (const auto& c : cases) {
    core::snapshot served = snap;
    served.revision = "r+pruned-\"" + std::to_string(c.out.size());  // escaped in the body
    for (std::size_t k = c.out.size(); k-- > 0;)
      served.nodes.erase(served.nodes.begin() + static_cast<std::ptrdiff_t>(c.out[k]));
    std::vector<std::uint32_t> served_members;
    const std::string served_body = core::render_snapshot_json(served, &served_members);
    // The snapshot afterwards: the served Nodes less `drop`, with `back`.
    std::vector<bool> in(snap.nodes.size(), true);
    for (const std::size_t o : c.out) in[o] = false;
    std::vector<std::size_t> served_index;  // served member -> snapshot index
    for (std::size_t i = 0; i < snap.nodes.size(); ++i)
      if (in[i]) served_index.push_back(i);
    for (const std::size_t d : c.drop) in[served_index[d]] = false;
    std::vector<std::pair<std::size_t, const core::snapshot_node*>> insert;
    for (const std::size_t b : c.back) {
      in[b] = true;
      const auto at = std::lower_bound(served_index.begin(), served_index.end(), b);
      insert.emplace_back(static_cast<std::size_t>(at - served_index.begin()), &snap.nodes[b]);
    }
    core::snapshot then;
    then.api_version = snap.api_version;
    then.revision = "r+then";
    for (std::size_t i = 0; i < snap.nodes.size(); ++i)
      if (in[i]) then.nodes.push_back(snap.nodes[i]);
    std::vector<std::uint32_t> out;
    std::vector<core::copied_bytes> copied;
    const std::string cut =
        core::splice_rendered_nodes(served_body, served_members, c.drop, insert, snap.api_version,
                                    then.revision, &out, &copied);
    std::vector<std::uint32_t> expected;
    EXPECT_EQ(cut, core::render_snapshot_json(then, &expected));
    EXPECT_EQ(out, expected);
    // The runs said to be copied are, in order in both texts; what is not in one is new
    // (the header, whose revision changed, the members inserted, the commas between runs).
    std::size_t from = 0;
    std::size_t at = 0;
    std::size_t same = 0;
    for (const core::copied_bytes& r : copied) {
      ASSERT_LE(from, r.from);
      ASSERT_LE(at, r.at);
      ASSERT_LT(r.from, r.to);
      ASSERT_LE(r.to, served_body.size());
      ASSERT_LE(r.at + (r.to - r.from), cut.size());
      EXPECT_EQ(served_body.substr(r.from, r.to - r.from), cut.substr(r.at, r.to - r.from));
      from = r.to;
      at = r.at + (r.to - r.from);
      same += r.to - r.from;
    }
    // Every kept member is in a run but for a comma at each place a run ends.
    std::size_t kept = 0;
    for (std::size_t k = 0; k + 1 < served_members.size(); ++k)
      if (std::find(c.drop.begin(), c.drop.end(), k) == c.drop.end())
        kept += served_members[k + 1] - served_members[k];
    EXPECT_GE(same + c.drop.size() + insert.size() + 1, kept);
    EXPECT_EQ(body_digest::update(body_digest::of(served_body), cut, copied).etag(),
              inventory::etag_of(cut));
  }
  // Every Node dropped: an empty "nodes" object.
  std::vector<std::size_t> all(snap.nodes.size());
  for (std::size_t i = 0; i < all.size(); ++i) all[i] = i;
  core::snapshot none = snap;
  none.nodes.clear();
  EXPECT_EQ(
      core::splice_rendered_nodes(body, members, all, {}, snap.api_version, snap.revision, nullptr),
      core::render_snapshot_json(none));
  // And every one back into an empty rendering.
  std::vector<std::uint32_t> none_members;
  const std::string empty = core::render_snapshot_json(none, &none_members);
  std::vector<std::pair<std::size_t, const core::snapshot_node*>> every;
  for (const auto& n : snap.nodes) every.emplace_back(0, &n);
  EXPECT_EQ(core::splice_rendered_nodes(empty, none_members, {}, every, snap.api_version,
                                        snap.revision, nullptr),
            body);
}

}  // namespace
}  // namespace topogate::inventory

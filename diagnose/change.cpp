// `topogate diagnose change`: a candidate revision's Workload impact (diagnose/change.hpp).
// The new hierarchy is derived as the consumer and GPUStack derive it: the revision's
// profiles (core::assign_profiles), one ResourceFlavor and one Topology per profile
// ("gpustack-" + the profile id, nodeLabels pinning the profile), the managed ClusterQueue's
// profile flavors replaced by them; the Workloads are then decided by follow_kueue and
// diagnose_pending on that cluster.

#include "diagnose/change.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <string_view>
#include <utility>

#include "core/json_writer.hpp"
#include "core/nodes.hpp"
#include "core/profile.hpp"
#include "core/profile_impact.hpp"
#include "diagnose/diagnose.hpp"
#include "diagnose/diagnose_internal.hpp"
#include "diagnose/kueue_internal.hpp"

namespace topogate::diagnose {

using namespace detail;

namespace {

constexpr std::string_view flavor_prefix = "gpustack-";
constexpr std::string_view private_prefix = "topology.gpustack.ai/";

void set_label(label_map& labels, std::string_view key, const std::string& value) {
  for (auto& [k, v] : labels)
    if (k == key) {
      v = value;
      return;
    }
  labels.emplace_back(std::string(key), value);
  std::sort(labels.begin(), labels.end());
}

// The profile a flavor pins (its nodeLabels' topology.gpustack.ai/profile), "" when none.
std::string pinned_profile(const resource_flavor& rf) {
  const std::string* p = find_label(rf.node_labels, profile_label);
  return p ? *p : std::string();
}

bool is_profile_flavor(const cluster_objects& c, const std::string& name) {
  const resource_flavor* rf = c.flavor(name);
  return rf && !pinned_profile(*rf).empty();
}

// "worker-a1=1, worker-a2=1" (placed_text) back into Node -> Pods.
std::vector<std::pair<std::string, std::int64_t>> parse_placement(std::string_view text) {
  std::vector<std::pair<std::string, std::int64_t>> out;
  while (!text.empty()) {
    const auto comma = text.find(", ");
    const std::string_view item = text.substr(0, comma);
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 2);
    const auto eq = item.rfind('=');
    if (eq == std::string_view::npos) return {};
    std::int64_t n = 0;
    for (char ch : item.substr(eq + 1)) {
      if (ch < '0' || ch > '9') return {};
      n = n * 10 + (ch - '0');
    }
    out.emplace_back(std::string(item.substr(0, eq)), n);
  }
  return out;
}

// Sum of the allocatable of `nodes` for the resources of `like`.
resource_amounts capacity_of(const cluster_objects& c, const std::vector<std::string>& nodes,
                             const std::vector<std::string>& resources) {
  resource_amounts out;
  for (const auto& r : resources) out[r] = 0;
  for (const auto& name : nodes)
    if (const k8s_node* n = c.node(name))
      for (const auto& r : resources)
        if (auto it = n->allocatable.find(r); it != n->allocatable.end())
          out[r] = sat_add(out[r], it->second);
  return out;
}

struct queued {
  workload* w = nullptr;
  bool evicted = false;
};

// Kueue's queue order (pkg/cache/queue's baseCompareFunc): the higher priority first; then
// the queue-ordering timestamp (workload::queue_order_at), which for a Workload evicted
// because its ClusterQueue stopped is its creationTimestamp, as for one that was waiting
// (Ordering.GetQueueOrderTimestamp: only a PodsReady timeout or an AdmissionCheck eviction
// orders by the eviction's time); then the UID.
bool before(const queued& a, const queued& b) {
  const auto pa = a.w->priority.value_or(0), pb = b.w->priority.value_or(0);
  if (pa != pb) return pa > pb;
  // RFC 3339 times of one layout (the API's, in seconds) order as strings.
  if (a.w->queue_order_at != b.w->queue_order_at) return a.w->queue_order_at < b.w->queue_order_at;
  if (a.w->uid != b.w->uid) return a.w->uid < b.w->uid;
  return ns_name(a.w->namespace_, a.w->name) < ns_name(b.w->namespace_, b.w->name);
}

void set_condition(workload& w, std::string_view type, std::string_view status,
                   std::string_view reason) {
  for (auto& cond : w.conditions)
    if (cond.type == type) {
      cond.status = std::string(status);
      cond.reason = std::string(reason);
      return;
    }
  w.conditions.push_back({std::string(type), std::string(status), std::string(reason), ""});
}

// The Workload's reservation released, as the drain and the job integration leave it.
void evict(cluster_objects& s, workload& w) {
  set_condition(w, "QuotaReserved", "False", "Pending");
  set_condition(w, "Admitted", "False", "NoReservation");
  w.admitted_cluster_queue.clear();
  w.assignments.clear();
  std::erase_if(s.pods, [&](const k8s_pod& p) {
    return p.namespace_ == w.namespace_ && !p.workload.empty() && p.workload == w.name;
  });
}

// Kueue's admission of `k` written on `w`, so that the Workloads after it see its quota and
// its Nodes taken.
void admit(const cluster_objects& s, workload& w, const cluster_queue& q, const kueue_decision& k) {
  set_condition(w, "QuotaReserved", "True", "QuotaReserved");
  set_condition(w, "Admitted", "True", "Admitted");
  w.admitted_cluster_queue = q.name;
  w.assignments.clear();
  for (std::size_t i = 0; i < w.podsets.size() && i < k.podsets.size(); ++i) {
    const auto& ps = w.podsets[i];
    const auto& kp = k.podsets[i];
    podset_assignment a;
    a.name = ps.name;
    a.count = kp.count;
    for (const auto& [r, v] : ps.requests)
      if (group_covering(q, r) != std::string::npos) a.flavors[r] = kp.flavor;
    const resource_flavor* rf = s.flavor(kp.flavor);
    if (rf && s.topology(rf->topology_name) && !kp.detail.empty()) {
      a.topology_levels = {std::string(core::hostname_label)};
      for (auto& [node, n] : parse_placement(kp.detail)) a.topology_domains.push_back({{node}, n});
    }
    w.assignments.push_back(std::move(a));
  }
}

// "topology.kubernetes.io/zone=zone-a" for the Nodes of `placement` at `level` (several
// values when a preferred level spread it).
std::string domain_of(const cluster_objects& s, const std::string& level,
                      const std::vector<std::pair<std::string, std::int64_t>>& placement) {
  std::set<std::string> values;
  for (const auto& [node, n] : placement)
    if (const k8s_node* kn = s.node(node))
      if (const std::string* v = find_label(kn->labels, level)) values.insert(*v);
  return level + "=" + join(std::vector<std::string>(values.begin(), values.end()), ",");
}

}  // namespace

std::optional<core::topology_source> source_of(const cluster_objects& c, const std::string& name,
                                               std::string& why) {
  const topology_source_object* found = nullptr;
  for (const auto& s : c.sources) {
    if (!name.empty() && s.name != name) continue;
    if (found) {
      why = "several TopologySources are read: give the one the revision is for (--source)";
      return std::nullopt;
    }
    found = &s;
  }
  if (!found) {
    why = name.empty() ? "no TopologySource is read: give the one the revision is for (--source)"
                       : "no TopologySource " + name + " is read";
    return std::nullopt;
  }
  core::topology_source src;
  src.name = found->name;
  src.levels = found->levels;
  src.node_selector = found->node_selector;
  src.node_labels = !found->writes;
  return src;
}

change_report diagnose_change(const cluster_objects& c, const core::topology_source& src,
                              const core::snapshot& snap) {
  change_report r;
  r.revision = snap.revision;
  r.source = src.name;
  // The cluster's Nodes as the inventory lists them.
  std::vector<core::cluster_node> listed;
  for (const auto& n : c.nodes) {
    core::node_labels::storage labels(n.labels.begin(), n.labels.end());
    std::sort(labels.begin(), labels.end());
    listed.push_back({n.name, core::node_labels(std::move(labels))});
  }
  std::sort(listed.begin(), listed.end(),
            [](const auto& a, const auto& b) { return a.name < b.name; });
  core::node_list all;
  all.nodes = core::chunked_vector<core::cluster_node>(std::move(listed));
  const core::node_list selected = core::select_nodes(all, src);
  r.errors = core::validate_snapshot(snap, {&src, &all, false});
  if (!r.errors.empty()) return r;
  const core::profile_assignment after = core::assign_profiles(src, &snap, &selected);
  r.nodes = after.nodes.size();

  // The flavors that pin a profile now, by profile.
  std::map<std::string, std::string> flavor_of_profile;
  for (const auto& rf : c.flavors)
    if (const std::string p = pinned_profile(rf); !p.empty() && !flavor_of_profile.count(p))
      flavor_of_profile[p] = rf.name;

  // The new cluster: replacement flavors and Topologies, the Nodes relabelled.
  cluster_objects s = c;
  std::map<std::string, std::vector<std::string>> members;  // profile -> Nodes
  for (const auto& na : after.nodes) members[after.profile_of(na).id].push_back(na.node);
  for (const auto& p : after.profiles) {
    change_profile cp{p.id, p.levels, p.nodes, {}, {}, false};
    if (auto it = flavor_of_profile.find(p.id); it != flavor_of_profile.end()) {
      cp.flavor = it->second;
      cp.topology = c.flavor(it->second)->topology_name;
      cp.exists = true;
    } else {
      cp.flavor = cp.topology = std::string(flavor_prefix) + p.id;
      s.topologies.push_back({cp.topology, p.levels});
      resource_flavor rf;
      rf.name = cp.flavor;
      rf.node_labels = {{std::string(profile_label), p.id}};
      rf.topology_name = cp.topology;
      // GPUStack's replacement flavors take the taints and tolerations the others carry.
      for (const auto& [id, name] : flavor_of_profile) {
        const resource_flavor* old = c.flavor(name);
        rf.node_taints = old->node_taints;
        rf.tolerations = old->tolerations;
        break;
      }
      s.flavors.push_back(std::move(rf));
    }
    r.profiles.push_back(std::move(cp));
  }
  for (auto& n : s.nodes) {
    const core::node_assignment* na = after.find(n.name);
    const std::string* was = find_label(n.labels, profile_label);
    if (!na) {
      // A Node the source no longer selects loses the profile the consumer gave it.
      if (was) std::erase_if(n.labels, [](const auto& l) { return l.first == profile_label; });
      continue;
    }
    const auto& prof = after.profile_of(*na);
    if (!was || *was != prof.id) ++r.changed_nodes;
    // The consumer writes the levels it publishes and removes the private ones it no longer
    // does; read-only levels (region, zone) stay the Node's.
    std::erase_if(n.labels, [&](const auto& l) {
      return l.first != profile_label && l.first.starts_with(private_prefix) &&
             std::find(prof.levels.begin(), prof.levels.end(), l.first) == prof.levels.end();
    });
    set_label(n.labels, profile_label, prof.id);
    const auto& values = na->values();
    for (std::size_t i = 0; i + 1 < prof.levels.size() && i < values.size(); ++i)
      set_label(n.labels, prof.levels[i], values[i]);
  }

  // The managed ClusterQueues: their profile flavors replaced by the new set.
  std::set<std::string> drained, used_after;
  for (auto& q : s.cluster_queues) {
    const cluster_queue* old = c.queue(q.name);
    bool managed = false;
    for (const auto& f : old->flavors) managed = managed || is_profile_flavor(c, f.name);
    if (!managed) {
      for (const auto& f : q.flavors) used_after.insert(f.name);
      continue;
    }
    change_queue cq;
    cq.name = q.name;
    for (const auto& f : old->flavors) cq.before.push_back(f.name);
    // Capacity quota (each profile flavor's nominalQuota the allocatable of the Nodes
    // carrying its profile), kept as such; any other quota is copied from the flavor a
    // replacement stands in for.
    bool capacity = true;
    for (const auto& f : old->flavors) {
      if (!is_profile_flavor(c, f.name)) continue;
      const std::string p = pinned_profile(*c.flavor(f.name));
      std::vector<std::string> nodes;
      for (const auto& n : c.nodes)
        if (const std::string* v = find_label(n.labels, profile_label); v && *v == p)
          nodes.push_back(n.name);
      capacity = capacity && capacity_of(c, nodes, f.resources) == f.nominal;
    }
    cq.quota_rule = capacity ? "the allocatable of each profile's Nodes (as the queue had)"
                             : "copied from the flavor each replaces (the queue's quota is not "
                               "its Nodes' allocatable)";
    std::vector<queue_flavor> flavors;
    for (std::size_t g = 0; g < q.group_resources.size(); ++g) {
      bool inserted = false;
      for (const auto& f : old->flavors) {
        if (f.group != g) continue;
        if (!is_profile_flavor(c, f.name)) {
          flavors.push_back(f);
          continue;
        }
        if (inserted) continue;
        inserted = true;
        for (const auto& p : r.profiles) {
          queue_flavor nf = f;  // the resources and limits of the flavor it replaces
          nf.name = p.flavor;
          for (const auto& of : old->flavors)
            if (of.group == g && of.name == p.flavor) nf = of;  // kept: its entry as is
          if (capacity) nf.nominal = capacity_of(c, members[p.id], f.resources);
          flavors.push_back(std::move(nf));
        }
      }
    }
    q.flavors = std::move(flavors);
    for (const auto& f : q.flavors) {
      cq.after.push_back(f.name);
      used_after.insert(f.name);
    }
    // GPUStack restores the stop policy it found; HoldAndDrain lasts only the switch.
    std::set<std::string> b(cq.before.begin(), cq.before.end()),
        a(cq.after.begin(), cq.after.end());
    cq.drained = a != b;
    if (cq.drained) drained.insert(q.name);
    r.queues.push_back(std::move(cq));
  }
  for (const auto& [p, name] : flavor_of_profile)
    if (!used_after.count(name)) r.gone.push_back(name);

  // The drain: every Workload holding a reservation in a drained queue is evicted; they and
  // the Workloads already waiting there are then taken in Kueue's order.
  std::vector<queued> order;
  for (std::size_t i = 0; i < c.workloads.size(); ++i) {
    const workload& w = c.workloads[i];
    const cluster_queue* q = queue_of(c, w);
    if (!q || !drained.count(q->name)) continue;
    order.push_back({&s.workloads[i], w.quota_reserved()});
    if (w.quota_reserved()) evict(s, s.workloads[i]);
  }
  std::stable_sort(order.begin(), order.end(), before);
  for (const auto& item : order) {
    workload& w = *item.w;
    change_workload cw;
    cw.workload = ns_name(w.namespace_, w.name);
    cw.priority = w.priority.value_or(0);
    cw.evicted = item.evicted;
    const cluster_queue* q = queue_of(s, w);
    cw.cluster_queue = q ? q->name : std::string();
    const kueue_decision k = follow_kueue(s, w);
    cw.admitted = k.admissible && q;
    if (cw.admitted) {
      for (std::size_t i = 0; i < w.podsets.size() && i < k.podsets.size(); ++i) {
        const auto& ps = w.podsets[i];
        change_podset cp;
        cp.podset = ps.name;
        cp.count = k.podsets[i].count;
        cp.spec_count = ps.count;
        cp.level = !ps.required_level.empty() ? ps.required_level : ps.preferred_level;
        cp.flavor = k.podsets[i].flavor;
        cp.placement = k.podsets[i].detail;
        const auto placed = parse_placement(cp.placement);
        cp.domain = cp.level.empty() || placed.empty() ? "flavor " + cp.flavor
                                                       : domain_of(s, cp.level, placed);
        cp.text = "admitted again (domain " + cp.domain +
                  (cp.placement.empty() ? std::string() : ": " + cp.placement) +
                  (cp.count < cp.spec_count ? "; " + std::to_string(cp.count) + " of " +
                                                  std::to_string(cp.spec_count) + " Pods (minCount)"
                                            : std::string()) +
                  ")";
        cw.podsets.push_back(std::move(cp));
      }
      admit(s, w, *q, k);
    } else {
      cw.message = k.message;
      const pending_report pr = diagnose_pending(s, w.namespace_, w.name);
      for (const auto& f : pr.fits) {
        change_podset cp;
        cp.podset = f.podset;
        cp.count = cp.spec_count = f.count;
        cp.level = f.level;
        cp.largest = f.best_domain;
        const std::string lvl = f.level.empty() ? "flavor" : f.level;
        cp.text = "stays Pending (largest new " + lvl + " domain holds " +
                  std::to_string(f.best_domain) + " of " + std::to_string(f.count) + " Pods" +
                  (f.fits() ? "; it fits alone, the Workloads before it take the room" : "") + ")";
        cw.podsets.push_back(std::move(cp));
      }
      if (k.step == "preemption")
        r.notes.push_back(cw.workload + ": Kueue would preempt " + join(k.preempts, ", ") +
                          " for it; counted as staying Pending");
    }
    if (cw.evicted) {
      ++r.evicted;
      ++(cw.admitted ? r.readmitted : r.stranded);
    }
    r.workloads.push_back(std::move(cw));
  }
  if (drained.empty())
    r.notes.push_back("no ClusterQueue's flavor set changes: nothing is drained or evicted");
  if (!order.empty())
    r.notes.push_back(
        "taken in Kueue's queue order: priority, then the queue-order time (creationTimestamp, "
        "or the time of an eviction by a PodsReady timeout or an AdmissionCheck; a ClusterQueue's "
        "drain changes neither), then UID");
  return r;
}

std::string change_summary(const change_report& r) {
  return "evicted " + std::to_string(r.evicted) + ", admitted again " +
         std::to_string(r.readmitted) + ", stranded " + std::to_string(r.stranded);
}

std::string render_change_text(const change_report& r) {
  std::string out = "revision " + r.revision + " of TopologySource " + r.source + "\n";
  if (!r.ok()) {
    out += "the revision does not validate:\n" + core::render_text(r.errors);
    return out;
  }
  out += "profiles after the change (" + std::to_string(r.nodes) + " managed Nodes, " +
         std::to_string(r.changed_nodes) + " changing profile):\n";
  for (const auto& p : r.profiles)
    out += "  " + p.id + "  " + join(p.levels, " > ") + "  " + std::to_string(p.nodes) +
           " Node(s)  ResourceFlavor " + p.flavor + (p.exists ? " (exists)" : " (new)") + "\n";
  for (const auto& g : r.gone) out += "  ResourceFlavor " + g + ": no longer used\n";
  for (const auto& q : r.queues) {
    out += "ClusterQueue " + q.name + ": " + join(q.before, ", ") + " -> " + join(q.after, ", ") +
           (q.drained ? " (flavor set changes: drained)" : " (flavor set unchanged)") + "\n";
    if (q.drained) out += "  replacement quota: " + q.quota_rule + "\n";
  }
  for (const auto& w : r.workloads) {
    out += "Workload " + w.workload + " (" + (w.evicted ? "evicted" : "Pending before") +
           ", priority " + std::to_string(w.priority) +
           "): " + (w.admitted ? "admitted again" : "stays Pending") + "\n";
    for (const auto& p : w.podsets) out += "  PodSet " + p.podset + ": " + p.text + "\n";
    if (!w.admitted && !w.message.empty()) out += "  Kueue: " + w.message + "\n";
  }
  for (const auto& n : r.notes) out += "note: " + n + "\n";
  out += "summary: " + change_summary(r) + "\n";
  return out;
}

namespace {

void key(std::string& out, std::string_view k) {
  core::append_json_string(out, k);
  out += ':';
}
void str(std::string& out, std::string_view k, std::string_view v) {
  key(out, k);
  core::append_json_string(out, v);
}
// "k":[...], each item written by `item` and separated by commas.
template <class T, class F>
void list(std::string& out, std::string_view k, const std::vector<T>& v, F item) {
  key(out, k);
  out += '[';
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (i) out += ',';
    item(v[i]);
  }
  out += ']';
}
void strings(std::string& out, std::string_view k, const std::vector<std::string>& v) {
  list(out, k, v, [&](const std::string& x) { core::append_json_string(out, x); });
}
void boolean(std::string& out, std::string_view k, bool v) {
  key(out, k);
  out += v ? "true" : "false";
}
void number(std::string& out, std::string_view k, std::int64_t v) {
  key(out, k);
  out += std::to_string(v);
}

}  // namespace

std::string render_change_json(const change_report& r) {
  std::string out = "{";
  str(out, "revision", r.revision);
  out += ',';
  str(out, "topologySource", r.source);
  out += ',';
  boolean(out, "valid", r.ok());
  out += ',';
  list(out, "errors", r.errors,
       [&](const core::field_error& e) { core::append_json_string(out, e.to_string()); });
  out += ',';
  number(out, "managedNodes", static_cast<std::int64_t>(r.nodes));
  out += ',';
  number(out, "changedNodes", static_cast<std::int64_t>(r.changed_nodes));
  out += ',';
  list(out, "profiles", r.profiles, [&](const auto& p) {
    out += '{';
    str(out, "id", p.id);
    out += ',';
    strings(out, "levels", p.levels);
    out += ',';
    number(out, "nodes", static_cast<std::int64_t>(p.nodes));
    out += ',';
    str(out, "flavor", p.flavor);
    out += ',';
    str(out, "topology", p.topology);
    out += ',';
    boolean(out, "exists", p.exists);
    out += '}';
  });
  out += ',';
  strings(out, "unusedFlavors", r.gone);
  out += ',';
  list(out, "clusterQueues", r.queues, [&](const auto& q) {
    out += '{';
    str(out, "name", q.name);
    out += ',';
    strings(out, "flavorsBefore", q.before);
    out += ',';
    strings(out, "flavorsAfter", q.after);
    out += ',';
    boolean(out, "drained", q.drained);
    out += ',';
    str(out, "quota", q.quota_rule);
    out += '}';
  });
  out += ',';
  list(out, "workloads", r.workloads, [&](const auto& w) {
    out += '{';
    str(out, "workload", w.workload);
    out += ',';
    str(out, "clusterQueue", w.cluster_queue);
    out += ',';
    number(out, "priority", w.priority);
    out += ',';
    boolean(out, "evicted", w.evicted);
    out += ',';
    boolean(out, "admittedAgain", w.admitted);
    out += ',';
    str(out, "message", w.message);
    out += ',';
    list(out, "podSets", w.podsets, [&](const auto& p) {
      out += '{';
      str(out, "name", p.podset);
      out += ',';
      number(out, "count", p.count);
      out += ',';
      number(out, "specCount", p.spec_count);
      out += ',';
      str(out, "level", p.level);
      out += ',';
      str(out, "flavor", p.flavor);
      out += ',';
      str(out, "domain", p.domain);
      out += ',';
      str(out, "placement", p.placement);
      out += ',';
      number(out, "largestDomainFits", p.largest);
      out += ',';
      str(out, "verdict", p.text);
      out += '}';
    });
    out += '}';
  });
  out += ",\"summary\":{";
  number(out, "evicted", static_cast<std::int64_t>(r.evicted));
  out += ',';
  number(out, "admittedAgain", static_cast<std::int64_t>(r.readmitted));
  out += ',';
  number(out, "stranded", static_cast<std::int64_t>(r.stranded));
  out += "},";
  strings(out, "notes", r.notes);
  out += "}\n";
  return out;
}

}  // namespace topogate::diagnose

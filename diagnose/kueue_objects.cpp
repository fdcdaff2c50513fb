// Kueue's objects as diagnose reads them (object_readers.hpp): Topology, ResourceFlavor,
// Cohort, ClusterQueue, LocalQueue, Workload and AdmissionCheck.

#include <algorithm>

#include "diagnose/object_readers.hpp"
#include "diagnose/quantity.hpp"

namespace topogate::diagnose::detail {

using namespace core;

namespace {

// spec.resourceGroups of a ClusterQueue or a Cohort: the covered resources per group and each
// flavor's quotas.
void read_resource_groups(const doc_node& o, const std::string& path, error_list& errors,
                          std::vector<std::vector<std::string>>& group_resources,
                          std::vector<queue_flavor>& flavors) {
  if (const doc_node* groups = at(o, {"spec", "resourceGroups"}); groups && groups->is_sequence()) {
    for (std::size_t g = 0; g < groups->items.size(); ++g) {
      const doc_node& group = groups->items[g];
      std::vector<std::string> covered;
      if (const doc_node* cr = group.find("coveredResources"); cr && cr->is_sequence())
        for (const doc_node& r : cr->items) covered.push_back(r.text);
      group_resources.push_back(covered);
      if (const doc_node* fl = group.find("flavors"); fl && fl->is_sequence()) {
        for (const doc_node& f : fl->items) {
          queue_flavor qf;
          qf.group = g;
          qf.name = text_of(f.find("name"));
          if (const doc_node* rs = f.find("resources"); rs && rs->is_sequence()) {
            for (std::size_t ri = 0; ri < rs->items.size(); ++ri) {
              const doc_node& r = rs->items[ri];
              const std::string rn = text_of(r.find("name"));
              qf.resources.push_back(rn);
              const auto read = [&](const char* field, resource_amounts& into) {
                const doc_node* nq = r.find(field);
                if (!nq || nq->is_null()) return;
                const auto qty = nq->is_scalar() ? parse_quantity(nq->text) : std::nullopt;
                if (!qty) {
                  errors.push_back(invalid("", child(path, "spec.resourceGroups.flavors.resources"),
                                           nq->text,
                                           std::string(field) + ": not a Kubernetes quantity"));
                  return;
                }
                into[rn] = amount_of(rn, *qty);
              };
              read("nominalQuota", qf.nominal);
              read("borrowingLimit", qf.borrowing_limit);
              read("lendingLimit", qf.lending_limit);
            }
          }
          flavors.push_back(std::move(qf));
        }
      }
    }
  }
}

// The most domains the slices of one topology assignment expand to, and the most levels each
// domain's values take (a Topology has at most 16): a few bytes of slices could otherwise ask
// for any number.
constexpr std::int64_t max_slice_domains = 100000;
constexpr std::size_t max_levels = 16;

// v1beta1: levels + domains[{values, count}]. v1beta2: levels + slices, each a run of
// domainCount domains whose values per level are either universal or prefix+root+suffix.
void read_assignment(const doc_node& ta, podset_assignment& a) {
  if (const doc_node* levels = ta.find("levels"); levels && levels->is_sequence())
    for (const doc_node& l : levels->items) a.topology_levels.push_back(l.text);
  if (const doc_node* domains = ta.find("domains"); domains && domains->is_sequence()) {
    for (const doc_node& d : domains->items) {
      topology_domain td;
      if (const doc_node* v = d.find("values"); v && v->is_sequence())
        for (const doc_node& x : v->items) td.values.push_back(x.text);
      td.count = int_of(d.find("count")).value_or(0);
      a.topology_domains.push_back(std::move(td));
    }
  }
  const doc_node* slices = ta.find("slices");
  if (!slices || !slices->is_sequence()) return;
  std::int64_t room = max_slice_domains;
  for (const doc_node& s : slices->items) {
    const std::int64_t n =
        std::clamp<std::int64_t>(int_of(s.find("domainCount")).value_or(0), 0, room);
    room -= n;
    std::vector<topology_domain> doms(static_cast<std::size_t>(n));
    const doc_node* pc = s.find("podCounts");
    const auto universal = pc ? int_of(pc->find("universal")) : std::nullopt;
    const doc_node* individual = pc ? pc->find("individual") : nullptr;
    for (std::size_t i = 0; i < doms.size(); ++i) {
      if (universal) {
        doms[i].count = *universal;
      } else if (individual && individual->is_sequence() && i < individual->items.size()) {
        doms[i].count = int_of(&individual->items[i]).value_or(0);
      }
    }
    if (const doc_node* vpl = s.find("valuesPerLevel"); vpl && vpl->is_sequence()) {
      for (std::size_t l = 0; l < vpl->items.size() && l < max_levels; ++l) {
        const doc_node& level = vpl->items[l];
        const doc_node* uni = level.find("universal");
        const doc_node* ind = level.find("individual");
        for (std::size_t i = 0; i < doms.size(); ++i) {
          if (uni && uni->is_scalar()) {
            doms[i].values.push_back(uni->text);
          } else if (ind) {
            const doc_node* roots = ind->find("roots");
            std::string v = text_of(ind->find("prefix"));
            if (roots && roots->is_sequence() && i < roots->items.size()) v += roots->items[i].text;
            v += text_of(ind->find("suffix"));
            doms[i].values.push_back(std::move(v));
          }
        }
      }
    }
    for (auto& d : doms) a.topology_domains.push_back(std::move(d));
  }
}

}  // namespace

void read_topology(cluster_objects& c, const doc_node& o) {
  kueue_topology t;
  t.name = meta_name(o);
  if (const doc_node* levels = at(o, {"spec", "levels"}); levels && levels->is_sequence())
    for (const doc_node& l : levels->items) t.levels.push_back(text_of(l.find("nodeLabel")));
  c.topologies.push_back(std::move(t));
}

void read_flavor(cluster_objects& c, const doc_node& o) {
  resource_flavor f;
  f.name = meta_name(o);
  f.node_labels = labels_of(at(o, {"spec", "nodeLabels"}));
  f.topology_name = text_of(at(o, {"spec", "topologyName"}));
  f.node_taints = taints_of(at(o, {"spec", "nodeTaints"}));
  f.tolerations = tolerations_of(at(o, {"spec", "tolerations"}));
  c.flavors.push_back(std::move(f));
}

void read_cohort(cluster_objects& c, const doc_node& o, const std::string& path,
                 error_list& errors) {
  cohort_object k;
  k.name = meta_name(o);
  k.parent = text_of(at(o, {"spec", "parentName"}));
  std::vector<std::vector<std::string>> groups;
  read_resource_groups(o, path, errors, groups, k.flavors);
  c.cohorts.push_back(std::move(k));
}

void read_cluster_queue(cluster_objects& c, const doc_node& o, const std::string& path,
                        error_list& errors) {
  cluster_queue q;
  q.name = meta_name(o);
  q.stop_policy = text_of(at(o, {"spec", "stopPolicy"}));
  q.cohort = text_of(at(o, {"spec", "cohortName"}));
  if (q.cohort.empty()) q.cohort = text_of(at(o, {"spec", "cohort"}));
  q.when_can_borrow = text_of(at(o, {"spec", "flavorFungibility", "whenCanBorrow"}));
  q.when_can_preempt = text_of(at(o, {"spec", "flavorFungibility", "whenCanPreempt"}));
  q.within_cluster_queue = text_of(at(o, {"spec", "preemption", "withinClusterQueue"}));
  q.reclaim_within_cohort = text_of(at(o, {"spec", "preemption", "reclaimWithinCohort"}));
  q.borrow_within_cohort = text_of(at(o, {"spec", "preemption", "borrowWithinCohort", "policy"}));
  q.borrow_max_priority =
      int_of(at(o, {"spec", "preemption", "borrowWithinCohort", "maxPriorityThreshold"}));
  if (const doc_node* sel = at(o, {"spec", "namespaceSelector"}); sel && !sel->is_null()) {
    label_selector ls;
    validate_label_selector(*sel, child(path, "spec.namespaceSelector"), "", errors, &ls);
    q.namespace_selector = std::move(ls);
  }
  if (const doc_node* del = at(o, {"metadata", "deletionTimestamp"}); del && !del->is_null())
    q.terminating = true;
  if (const doc_node* acs = at(o, {"spec", "admissionChecks"}); acs && acs->is_sequence())
    for (const doc_node& a : acs->items) q.admission_checks.push_back(text_of(&a));
  if (const doc_node* acs = at(o, {"spec", "admissionChecksStrategy", "admissionChecks"});
      acs && acs->is_sequence())
    for (const doc_node& a : acs->items) q.admission_checks.push_back(text_of(a.find("name")));
  read_resource_groups(o, path, errors, q.group_resources, q.flavors);
  const doc_node* status = o.find("status");
  q.conditions = conditions_of(status);
  if (status) {
    q.reserving_workloads = int_of(status->find("reservingWorkloads"));
    q.admitted_workloads = int_of(status->find("admittedWorkloads"));
    q.pending_workloads = int_of(status->find("pendingWorkloads"));
  }
  c.cluster_queues.push_back(std::move(q));
}

void read_local_queue(cluster_objects& c, const doc_node& o) {
  c.local_queues.push_back({meta_namespace(o), meta_name(o),
                            text_of(at(o, {"spec", "clusterQueue"})),
                            text_of(at(o, {"spec", "stopPolicy"}))});
}

void read_workload(cluster_objects& c, const doc_node& o, const std::string& path,
                   error_list& errors) {
  workload w;
  w.namespace_ = meta_namespace(o);
  w.name = meta_name(o);
  w.api_version = text_of(o.find("apiVersion"));
  w.labels = labels_of(at(o, {"metadata", "labels"}));
  w.owners = owners_of(o);
  w.queue_name = text_of(at(o, {"spec", "queueName"}));
  w.uid = text_of(at(o, {"metadata", "uid"}));
  w.priority = int_of(at(o, {"spec", "priority"}));
  if (const doc_node* sets = at(o, {"spec", "podSets"}); sets && sets->is_sequence()) {
    for (std::size_t i = 0; i < sets->items.size(); ++i) {
      const doc_node& s = sets->items[i];
      const std::string sp = index(child(path, "spec.podSets"), i);
      podset ps;
      ps.name = text_of(s.find("name"));
      ps.count = int_of(s.find("count")).value_or(1);
      ps.min_count = int_of(s.find("minCount"));
      if (const doc_node* spec = at(s, {"template", "spec"})) {
        ps.resources = read_pod_resources(*spec, errors, child(sp, "template.spec"));
        ps.requests = kueue_requests(c, w.namespace_, ps.resources, &ps.request_sources);
        ps.node_selector = labels_of(spec->find("nodeSelector"));
        ps.required_affinity = affinity_of(*spec);
        ps.tolerations = tolerations_of(spec->find("tolerations"));
      }
      if (const doc_node* tr = s.find("topologyRequest")) {
        ps.required_level = text_of(tr->find("required"));
        ps.preferred_level = text_of(tr->find("preferred"));
        ps.unconstrained = text_of(tr->find("unconstrained")) == "true";
        ps.group_name = text_of(tr->find("podSetGroupName"));
        ps.slice_level = text_of(tr->find("podSetSliceRequiredTopology"));
        ps.slice_size = int_of(tr->find("podSetSliceSize"));
        if (const doc_node* layers = tr->find("podsetSliceRequiredTopologyConstraints");
            layers && layers->is_sequence() && !layers->items.empty())
          ps.slice_layers = true;
      }
      w.podsets.push_back(std::move(ps));
    }
  }
  const doc_node* status = o.find("status");
  w.conditions = conditions_of(status);
  w.queue_order_at = text_of(at(o, {"metadata", "creationTimestamp"}));
  if (const doc_node* cs = status ? status->find("conditions") : nullptr; cs && cs->is_sequence())
    for (const doc_node& item : cs->items) {
      if (!item.is_mapping()) continue;
      const std::string type = text_of(item.find("type"));
      if (type == "QuotaReserved") w.quota_reserved_at = text_of(item.find("lastTransitionTime"));
      if (type == "Evicted" && text_of(item.find("status")) == "True") {
        w.evicted = true;
        // Requeued by the time of its eviction (waitForPodsReady's requeuingStrategy
        // timestamp defaults to Eviction).
        const std::string reason = text_of(item.find("reason"));
        if (reason == "PodsReadyTimeout" || reason == "AdmissionCheck")
          w.queue_order_at = text_of(item.find("lastTransitionTime"));
      }
    }
  if (const doc_node* acs = status ? status->find("admissionChecks") : nullptr;
      acs && acs->is_sequence())
    for (const doc_node& a : acs->items)
      if (a.is_mapping())
        w.check_states.push_back(
            {text_of(a.find("name")), text_of(a.find("state")), text_of(a.find("message"))});
  if (const doc_node* adm = status ? status->find("admission") : nullptr;
      adm && adm->is_mapping()) {
    w.admitted_cluster_queue = text_of(adm->find("clusterQueue"));
    if (const doc_node* psa = adm->find("podSetAssignments"); psa && psa->is_sequence()) {
      for (const doc_node& a : psa->items) {
        podset_assignment pa;
        pa.name = text_of(a.find("name"));
        pa.count = int_of(a.find("count")).value_or(0);
        if (const doc_node* fl = a.find("flavors"); fl && fl->is_mapping())
          for (const auto& [r, f] : fl->map) pa.flavors[r] = f.text;
        if (const doc_node* ta = a.find("topologyAssignment"); ta && ta->is_mapping())
          read_assignment(*ta, pa);
        w.assignments.push_back(std::move(pa));
      }
    }
  }
  c.workloads.push_back(std::move(w));
}

void read_admission_check(cluster_objects& c, const doc_node& o) {
  admission_check ac;
  ac.name = meta_name(o);
  ac.controller = text_of(at(o, {"spec", "controllerName"}));
  const auto conds = conditions_of(o.find("status"));
  if (const auto* a = find_condition(conds, "Active")) ac.active = a->status == "True";
  c.admission_checks.push_back(std::move(ac));
  c.admission_checks_read = true;
}

}  // namespace topogate::diagnose::detail

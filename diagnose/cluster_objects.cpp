#include "diagnose/cluster_objects.hpp"

#include <algorithm>
#include <charconv>

#include "diagnose/diagnose_internal.hpp"
#include "diagnose/object_readers.hpp"
#include "diagnose/quantity.hpp"

namespace topogate::diagnose {

// Built on the core: its documents, field errors and rules are used by their names here.
using namespace core;
// The readers' field helpers (object_readers.hpp), defined here, and Kueue's objects' readers.
using namespace detail;

namespace {

// `kubectl get pods -A -o json` on a large cluster runs to hundreds of MiB.
constexpr std::size_t max_input_bytes = 512u << 20;

std::vector<node_selector_requirement> requirements_of(const doc_node* n) {
  std::vector<node_selector_requirement> out;
  if (!n || !n->is_sequence()) return out;
  for (const doc_node& r : n->items) {
    node_selector_requirement req{text_of(r.find("key")), text_of(r.find("operator")), {}};
    const doc_node* v = r.find("values");
    req.values_null = !v || !v->is_sequence();
    if (!req.values_null)
      for (const doc_node& x : v->items) req.values.push_back(x.text);
    out.push_back(std::move(req));
  }
  return out;
}

}  // namespace

namespace detail {

std::string text_of(const doc_node* n) { return n && n->is_scalar() ? n->text : std::string(); }

const doc_node* at(const doc_node& n, std::initializer_list<std::string_view> keys) noexcept {
  const doc_node* cur = &n;
  for (std::string_view k : keys) {
    cur = cur->find(k);
    if (!cur) return nullptr;
  }
  return cur;
}

std::optional<std::int64_t> int_of(const doc_node* n) {
  if (!n || !n->is_scalar()) return std::nullopt;
  std::int64_t v = 0;
  const std::string& t = n->text;
  auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  if (ec != std::errc() || p != t.data() + t.size()) return std::nullopt;
  return v;
}

label_map labels_of(const doc_node* n) {
  label_map out;
  if (!n || !n->is_mapping()) return out;
  for (const auto& [k, v] : n->map)
    if (v.is_scalar() || v.is_null()) out.emplace_back(k, v.text);
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<object_condition> conditions_of(const doc_node* status) {
  std::vector<object_condition> out;
  const doc_node* c = status ? status->find("conditions") : nullptr;
  if (!c || !c->is_sequence()) return out;
  for (const doc_node& item : c->items) {
    if (!item.is_mapping()) continue;
    out.push_back({text_of(item.find("type")), text_of(item.find("status")),
                   text_of(item.find("reason")), text_of(item.find("message"))});
  }
  return out;
}

resource_amounts amounts_of(const doc_node* n, error_list& errors, const std::string& path) {
  resource_amounts out;
  if (!n || !n->is_mapping()) return out;
  for (const auto& [k, v] : n->map) {
    const auto q = v.is_scalar() ? parse_quantity(v.text) : std::nullopt;
    if (!q) {
      errors.push_back(invalid("", key(path, k), v.text, "not a Kubernetes quantity"));
      continue;
    }
    out[k] = amount_of(k, *q);
  }
  return out;
}

void add_into(resource_amounts& into, const resource_amounts& r) {
  for (const auto& [k, v] : r) into[k] += v;
}
void max_into(resource_amounts& into, const resource_amounts& r) {
  for (const auto& [k, v] : r) into[k] = std::max(into[k], v);
}

std::vector<taint> taints_of(const doc_node* n) {
  std::vector<taint> out;
  if (!n || !n->is_sequence()) return out;
  for (const doc_node& t : n->items)
    out.push_back({text_of(t.find("key")), text_of(t.find("value")), text_of(t.find("effect"))});
  return out;
}

std::vector<toleration> tolerations_of(const doc_node* n) {
  std::vector<toleration> out;
  if (!n || !n->is_sequence()) return out;
  for (const doc_node& t : n->items)
    out.push_back({text_of(t.find("key")), text_of(t.find("operator")), text_of(t.find("value")),
                   text_of(t.find("effect"))});
  return out;
}

std::optional<node_affinity> affinity_of(const doc_node& spec) {
  const doc_node* req =
      at(spec, {"affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution"});
  if (!req || !req->is_mapping()) return std::nullopt;
  node_affinity terms;
  if (const doc_node* ts = req->find("nodeSelectorTerms"); ts && ts->is_sequence())
    for (const doc_node& t : ts->items)
      terms.push_back(
          {requirements_of(t.find("matchExpressions")), requirements_of(t.find("matchFields"))});
  return terms;
}

std::string meta_name(const doc_node& o) { return text_of(at(o, {"metadata", "name"})); }

std::vector<owner_ref> owners_of(const doc_node& o) {
  std::vector<owner_ref> out;
  if (const doc_node* owners = at(o, {"metadata", "ownerReferences"});
      owners && owners->is_sequence())
    for (const doc_node& r : owners->items) {
      owner_ref ref;
      ref.kind = text_of(r.find("kind"));
      ref.name = text_of(r.find("name"));
      ref.uid = text_of(r.find("uid"));
      ref.controller = text_of(r.find("controller")) == "true";
      out.push_back(std::move(ref));
    }
  return out;
}
std::string meta_namespace(const doc_node& o) { return text_of(at(o, {"metadata", "namespace"})); }

}  // namespace detail

namespace {

void read_node(cluster_objects& c, const doc_node& o, const std::string& path, error_list& errors) {
  k8s_node n;
  n.name = meta_name(o);
  n.labels = labels_of(at(o, {"metadata", "labels"}));
  n.allocatable =
      amounts_of(at(o, {"status", "allocatable"}), errors, child(path, "status.allocatable"));
  n.unschedulable = text_of(at(o, {"spec", "unschedulable"})) == "true";
  n.taints = taints_of(at(o, {"spec", "taints"}));
  const auto conds = conditions_of(o.find("status"));
  if (const auto* r = find_condition(conds, "Ready")) n.ready = r->status == "True";
  if (const doc_node* a = at(o, {"metadata", "annotations", nfd_feature_labels_annotation});
      a && (a->is_scalar() || a->is_null()))
    n.nfd_feature_labels = a->text;
  c.nodes.push_back(std::move(n));
}

void read_pod(cluster_objects& c, const doc_node& o, const std::string& path, error_list& errors) {
  k8s_pod p;
  p.namespace_ = meta_namespace(o);
  p.name = meta_name(o);
  p.node_name = text_of(at(o, {"spec", "nodeName"}));
  p.phase = text_of(at(o, {"status", "phase"}));
  p.workload = text_of(at(o, {"metadata", "annotations", "kueue.x-k8s.io/workload"}));
  for (const char* a :
       {"kueue.x-k8s.io/podset-required-topology", "kueue.x-k8s.io/podset-preferred-topology",
        "kueue.x-k8s.io/podset-unconstrained-topology"})
    p.tas = p.tas || at(o, {"metadata", "annotations", a}) != nullptr;
  if (const doc_node* spec = o.find("spec"))
    p.requests = pod_requests(*spec, errors, child(path, "spec"));
  c.pods.push_back(std::move(p));
}

// Kueue applies LimitRanges and RuntimeClasses to a Workload whenever it queues it: the
// requests of the Workloads already read follow one read later.
void refresh_requests(cluster_objects& c, const std::string* ns) {
  for (auto& w : c.workloads)
    if (!ns || w.namespace_ == *ns)
      for (auto& ps : w.podsets)
        ps.requests = kueue_requests(c, w.namespace_, ps.resources, &ps.request_sources);
}

// A bound merged as Kueue summarises LimitRanges: the highest min, the lowest max.
void keep_bound(resource_amounts& into, const std::string& k, std::int64_t v, bool highest) {
  const auto [it, fresh] = into.emplace(k, v);
  if (!fresh && (highest ? v > it->second : v < it->second)) it->second = v;
}

void read_limit_range(cluster_objects& c, const doc_node& o, const std::string& path,
                      error_list& errors) {
  limit_range lr;
  lr.namespace_ = meta_namespace(o);
  lr.name = meta_name(o);
  if (const doc_node* items = at(o, {"spec", "limits"}); items && items->is_sequence()) {
    for (std::size_t i = 0; i < items->items.size(); ++i) {
      const doc_node& item = items->items[i];
      const std::string type = text_of(item.find("type"));
      const std::string ip = index(child(path, "spec.limits"), i);
      if (type == "Container" || type == "Pod") {
        const bool pod = type == "Pod";
        for (const auto& [k, v] : amounts_of(item.find("max"), errors, child(ip, "max")))
          keep_bound(pod ? lr.pod_max : lr.container_max, k, v, false);
        for (const auto& [k, v] : amounts_of(item.find("min"), errors, child(ip, "min")))
          keep_bound(pod ? lr.pod_min : lr.container_min, k, v, true);
      }
      if (type != "Container") continue;
      lr.has_container_item = true;
      for (const auto& [field, into] :
           {std::pair{"default", &lr.default_limits}, {"defaultRequest", &lr.default_requests}})
        for (const auto& [k, v] : amounts_of(item.find(field), errors, child(ip, field)))
          into->emplace(k, v);
    }
  }
  c.limit_ranges.push_back(std::move(lr));
  refresh_requests(c, &c.limit_ranges.back().namespace_);
}

void read_runtime_class(cluster_objects& c, const doc_node& o, const std::string& path,
                        error_list& errors) {
  runtime_class rc;
  rc.name = meta_name(o);
  if (const doc_node* oh = o.find("overhead"); oh && oh->is_mapping())
    rc.overhead = amounts_of(oh->find("podFixed"), errors, child(path, "overhead.podFixed"));
  c.runtime_classes.push_back(std::move(rc));
  refresh_requests(c, nullptr);
}

void collect_progress(const doc_node& n, const std::string& path, model_deployment& d, int depth) {
  if (depth > 6) return;
  if (n.is_mapping()) {
    for (const auto& [k, v] : n.map) {
      if (depth == 0 && k == "conditions") continue;
      if (v.is_scalar() && (k == "message" || k == "progress" || k == "phase" || k == "reason"))
        d.progress.emplace_back(child(path, k), v.text);
      else
        collect_progress(v, child(path, k), d, depth + 1);
    }
  } else if (n.is_sequence()) {
    for (std::size_t i = 0; i < n.items.size(); ++i) {
      const doc_node& item = n.items[i];
      const std::string name = text_of(item.find("name"));
      collect_progress(item, name.empty() ? index(path, i) : key(path, name), d, depth + 1);
    }
  }
}

void read_deployment(cluster_objects& c, const doc_node& o) {
  model_deployment d;
  d.namespace_ = meta_namespace(o);
  d.name = meta_name(o);
  if (const doc_node* roles = at(o, {"spec", "roles"}); roles && roles->is_sequence()) {
    for (const doc_node& r : roles->items) {
      deployment_role role;
      role.name = text_of(r.find("name"));
      role.required_level = text_of(at(r, {"topology", "requiredLevel"}));
      role.replicas = int_of(r.find("replicas"));
      role.size = int_of(r.find("size"));
      d.roles.push_back(std::move(role));
    }
  }
  const doc_node* status = o.find("status");
  d.conditions = conditions_of(status);
  if (status) collect_progress(*status, "status", d, 0);
  c.deployments.push_back(std::move(d));
}

void read_source(cluster_objects& c, const doc_node& o, const std::string& path,
                 error_list& errors) {
  topology_source_object s;
  s.name = meta_name(o);
  if (const doc_node* levels = at(o, {"spec", "levels"}); levels && levels->is_sequence())
    for (const doc_node& l : levels->items) s.levels.push_back(l.text);
  if (const doc_node* sel = at(o, {"spec", "nodeSelector"}); sel && !sel->is_null()) {
    label_selector ls;
    validate_label_selector(*sel, child(path, "spec.nodeSelector"), "T14", errors, &ls);
    s.node_selector = std::move(ls);
  }
  s.uid = text_of(at(o, {"metadata", "uid"}));
  for (const char* arm : {"configMap", "webhook"})
    if (const doc_node* a = at(o, {"spec", arm}); a && !a->is_null()) s.writes = true;
  if (const doc_node* w = at(o, {"spec", "webhook"}); w && !w->is_null()) s.webhook = true;
  if (const doc_node* cm = at(o, {"spec", "configMap"}); cm && cm->is_mapping()) {
    s.config_map_namespace = text_of(at(*cm, {"configMapRef", "namespace"}));
    s.config_map_name = text_of(at(*cm, {"configMapRef", "name"}));
    s.config_map_key = text_of(cm->find("key"));
  }
  s.conditions = conditions_of(o.find("status"));
  c.sources.push_back(std::move(s));
}

void read_node_feature(cluster_objects& c, const doc_node& o) {
  node_feature f;
  f.namespace_ = meta_namespace(o);
  f.name = meta_name(o);
  f.labels = labels_of(at(o, {"metadata", "labels"}));
  f.owners = owners_of(o);
  f.spec_labels = labels_of(at(o, {"spec", "labels"}));
  c.node_features.push_back(std::move(f));
  c.node_features_read = true;
}

void read_config_map(cluster_objects& c, const doc_node& o) {
  config_map m;
  m.namespace_ = meta_namespace(o);
  m.name = meta_name(o);
  if (const doc_node* d = o.find("data"); d && d->is_mapping())
    for (const auto& [k, v] : d->map)
      if (v.is_scalar()) m.data[k] = v.text;
  c.config_maps.push_back(std::move(m));
}

std::string_view group_of(std::string_view api_version) {
  const auto slash = api_version.find('/');
  return slash == std::string_view::npos ? std::string_view() : api_version.substr(0, slash);
}

}  // namespace

const std::string* find_label(const label_map& labels, std::string_view k) noexcept {
  auto it = std::lower_bound(labels.begin(), labels.end(), k,
                             [](const auto& l, std::string_view x) { return l.first < x; });
  if (it == labels.end() || it->first != k) return nullptr;
  return &it->second;
}

const object_condition* find_condition(const std::vector<object_condition>& conditions,
                                       std::string_view type) noexcept {
  for (const auto& c : conditions)
    if (c.type == type) return &c;
  return nullptr;
}

bool workload::quota_reserved() const noexcept {
  const auto* c = find_condition(conditions, "QuotaReserved");
  return c && c->status == "True";
}
bool workload::admitted() const noexcept {
  const auto* c = find_condition(conditions, "Admitted");
  return c && c->status == "True";
}

const k8s_node* cluster_objects::node(std::string_view n) const noexcept {
  for (const auto& x : nodes)
    if (x.name == n) return &x;
  return nullptr;
}
const kueue_topology* cluster_objects::topology(std::string_view n) const noexcept {
  for (const auto& x : topologies)
    if (x.name == n) return &x;
  return nullptr;
}
const resource_flavor* cluster_objects::flavor(std::string_view n) const noexcept {
  for (const auto& x : flavors)
    if (x.name == n) return &x;
  return nullptr;
}
const cluster_queue* cluster_objects::queue(std::string_view n) const noexcept {
  for (const auto& x : cluster_queues)
    if (x.name == n) return &x;
  return nullptr;
}
const cohort_object* cluster_objects::cohort(std::string_view n) const noexcept {
  for (const auto& x : cohorts)
    if (x.name == n) return &x;
  return nullptr;
}
const admission_check* cluster_objects::check(std::string_view n) const noexcept {
  for (const auto& x : admission_checks)
    if (x.name == n) return &x;
  return nullptr;
}
const local_queue* cluster_objects::local(std::string_view ns, std::string_view n) const noexcept {
  for (const auto& x : local_queues)
    if (x.namespace_ == ns && x.name == n) return &x;
  return nullptr;
}
const k8s_namespace* cluster_objects::namespace_of(std::string_view n) const noexcept {
  for (const auto& x : namespaces)
    if (x.name == n) return &x;
  return nullptr;
}
const workload* cluster_objects::find_workload(std::string_view ns,
                                               std::string_view n) const noexcept {
  for (const auto& x : workloads)
    if (x.name == n && (ns.empty() || x.namespace_ == ns)) return &x;
  return nullptr;
}
const config_map* cluster_objects::find_config_map(std::string_view ns,
                                                   std::string_view n) const noexcept {
  for (const auto& m : config_maps)
    if (m.namespace_ == ns && m.name == n) return &m;
  return nullptr;
}

const model_deployment* cluster_objects::deployment(std::string_view ns,
                                                    std::string_view n) const noexcept {
  for (const auto& x : deployments)
    if (x.name == n && x.namespace_ == ns) return &x;
  return nullptr;
}

pod_resources read_pod_resources(const doc_node& spec, error_list& errors, std::string_view path) {
  pod_resources p;
  auto read = [&](const char* field, std::vector<container_resources>& into) {
    const doc_node* cs = spec.find(field);
    if (!cs || !cs->is_sequence()) return;
    for (std::size_t i = 0; i < cs->items.size(); ++i) {
      const doc_node& c = cs->items[i];
      const std::string cp = index(child(path, field), i);
      container_resources r;
      r.name = text_of(c.find("name"));
      r.requests =
          amounts_of(at(c, {"resources", "requests"}), errors, child(cp, "resources.requests"));
      r.limits = amounts_of(at(c, {"resources", "limits"}), errors, child(cp, "resources.limits"));
      r.sidecar = text_of(c.find("restartPolicy")) == "Always";
      into.push_back(std::move(r));
    }
  };
  read("containers", p.containers);
  read("initContainers", p.init_containers);
  p.pod_requests =
      amounts_of(at(spec, {"resources", "requests"}), errors, child(path, "resources.requests"));
  p.overhead = amounts_of(spec.find("overhead"), errors, child(path, "overhead"));
  p.runtime_class = text_of(spec.find("runtimeClassName"));
  return p;
}

namespace {

// Resources a Pod may request at Pod level (PodLevelResources): cpu, memory, hugepages-*.
bool pod_level_resource(std::string_view r) {
  return r == "cpu" || r == "memory" || r.starts_with("hugepages-");
}

// Adds the keys of `from` that `into` lacks (Kueue's MergeResourceListKeepFirst); their
// names are appended to `added`.
void keep_first(resource_amounts& into, const resource_amounts& from,
                std::vector<std::string>& added) {
  for (const auto& [k, v] : from)
    if (into.emplace(k, v).second) added.push_back(k);
}

std::string added_text(const container_resources& c, const std::vector<std::string>& keys) {
  return "container " + c.name + ": " + detail::join(keys, ", ");
}

}  // namespace

resource_amounts pod_requests(const pod_resources& pod) {
  resource_amounts containers;
  for (const auto& c : pod.containers) add_into(containers, c.requests);
  resource_amounts sidecars;
  resource_amounts init_peak;
  for (const auto& ic : pod.init_containers) {
    if (ic.sidecar) {
      add_into(sidecars, ic.requests);  // a sidecar keeps running beside everything after it
      max_into(init_peak, sidecars);
    } else {
      resource_amounts during = sidecars;
      add_into(during, ic.requests);
      max_into(init_peak, during);
    }
  }
  add_into(containers, sidecars);
  max_into(containers, init_peak);
  // Pod-level requests, when they name a resource that may be set at Pod level, replace the
  // containers' sum for each such resource they name.
  for (const auto& [k, v] : pod.pod_requests)
    if (pod_level_resource(k)) containers[k] = v;
  add_into(containers, pod.overhead);
  for (auto it = containers.begin(); it != containers.end();)
    it = it->second == 0 ? containers.erase(it) : std::next(it);
  return containers;
}

resource_amounts pod_requests(const doc_node& spec, error_list& errors, std::string_view path) {
  return pod_requests(read_pod_resources(spec, errors, path));
}

pod_resources kueue_pod(const cluster_objects& c, std::string_view ns,
                        const pod_resources& template_pod, std::vector<std::string>* sources) {
  pod_resources pod = template_pod;
  std::vector<std::string> said;
  // 1. RuntimeClass overhead, only when the template sets none.
  if (!pod.runtime_class.empty() && pod.overhead.empty())
    for (const auto& rc : c.runtime_classes)
      if (rc.name == pod.runtime_class && rc.overhead) {
        pod.overhead = *rc.overhead;
        said.push_back("overhead of RuntimeClass " + rc.name);
      }
  // 2. The namespace's LimitRanges with a Container item, summarised: the first default
  // (and defaultRequest) per resource, in name order.
  std::vector<const limit_range*> ranges;
  for (const auto& lr : c.limit_ranges)
    if (lr.namespace_ == ns && lr.has_container_item) ranges.push_back(&lr);
  std::sort(ranges.begin(), ranges.end(),
            [](const limit_range* a, const limit_range* b) { return a->name < b->name; });
  resource_amounts def_limits, def_requests;
  std::vector<std::string> names, ignored;
  for (const limit_range* lr : ranges) {
    keep_first(def_limits, lr->default_limits, ignored);
    keep_first(def_requests, lr->default_requests, ignored);
    names.push_back(lr->name);
  }
  std::vector<std::string> from_ranges, from_limits;
  for (auto* list : {&pod.init_containers, &pod.containers})
    for (auto& ct : *list) {
      std::vector<std::string> added;
      if (!ranges.empty()) {
        keep_first(ct.limits, def_limits, added);
        for (auto& a : added) a = "limits " + a;
        std::vector<std::string> req;
        keep_first(ct.requests, def_requests, req);
        for (const auto& r : req) added.push_back("requests " + r);
        if (!added.empty()) from_ranges.push_back(added_text(ct, added));
      }
      // 3. Limits for the requests a container leaves unset.
      std::vector<std::string> filled;
      keep_first(ct.requests, ct.limits, filled);
      if (!filled.empty()) from_limits.push_back(added_text(ct, filled));
    }
  if (!from_ranges.empty())
    said.push_back("LimitRange defaults (" + std::string(ns) + ": " + detail::join(names, ", ") +
                   ") for " + detail::join(from_ranges, "; "));
  if (!from_limits.empty())
    said.push_back("limits as requests for " + detail::join(from_limits, "; "));
  bool pod_level = false;
  for (const auto& [k, v] : pod.pod_requests) pod_level = pod_level || pod_level_resource(k);
  if (pod_level) said.push_back("Pod-level requests (spec.resources)");
  if (sources) *sources = std::move(said);
  return pod;
}

resource_amounts kueue_requests(const cluster_objects& c, std::string_view ns,
                                const pod_resources& template_pod,
                                std::vector<std::string>* sources) {
  return pod_requests(kueue_pod(c, ns, template_pod, sources));
}

std::string kueue_resources_invalid(const cluster_objects& c, const workload& w) {
  std::vector<std::string> errs;
  for (std::size_t i = 0; i < w.podsets.size(); ++i) {
    const pod_resources pod = kueue_pod(c, w.namespace_, w.podsets[i].resources, nullptr);
    for (const auto& [list, field] : {std::pair{&pod.init_containers, "initContainers"},
                                      std::pair{&pod.containers, "containers"}})
      for (std::size_t j = 0; j < list->size(); ++j) {
        const auto& ct = (*list)[j];
        std::vector<std::string> over;  // resource_amounts is ordered: the names sorted
        for (const auto& [r, v] : ct.requests)
          if (auto l = ct.limits.find(r); l != ct.limits.end() && v > l->second)
            over.push_back("\"" + r + "\"");
        if (!over.empty())
          errs.push_back("spec.podSets[" + std::to_string(i) + "].template.spec." + field + "[" +
                         std::to_string(j) + "]: Invalid value: [" + detail::join(over, ",") +
                         "]: requests must not exceed its limits");
      }
  }
  if (errs.empty()) return {};
  // Kubernetes' aggregate error: one error as it is, several in brackets.
  return "resources validation failed: " +
         (errs.size() == 1 ? errs.front() : "[" + detail::join(errs, ", ") + "]");
}

namespace {

// Kueue's GreaterKeys: the resources both name where `a`'s amount is above `b`'s, quoted.
std::vector<std::string> greater_keys(const resource_amounts& a, const resource_amounts& b) {
  std::vector<std::string> out;
  for (const auto& [r, v] : a)
    if (const auto it = b.find(r); it != b.end() && v > it->second) out.push_back("\"" + r + "\"");
  return out;
}

// Each resource of either list; where both name it, the lower (or the higher) amount.
resource_amounts merged(const resource_amounts& a, const resource_amounts& b, bool highest) {
  resource_amounts out = a;
  for (const auto& [k, v] : b) keep_bound(out, k, v, highest);
  return out;
}

}  // namespace

std::string kueue_limit_range_invalid(const cluster_objects& c, const workload& w) {
  limit_range sum;
  bool any = false;
  for (const auto& lr : c.limit_ranges) {
    if (lr.namespace_ != w.namespace_) continue;
    any = true;
    for (const auto& [k, v] : lr.container_max) keep_bound(sum.container_max, k, v, false);
    for (const auto& [k, v] : lr.container_min) keep_bound(sum.container_min, k, v, true);
    for (const auto& [k, v] : lr.pod_max) keep_bound(sum.pod_max, k, v, false);
    for (const auto& [k, v] : lr.pod_min) keep_bound(sum.pod_min, k, v, true);
  }
  if (!any) return {};
  std::vector<std::string> errs;
  const auto check = [&](const std::string& at, const resource_amounts& low,
                         const resource_amounts& high, const resource_amounts& max,
                         const resource_amounts& min) {
    if (auto above = greater_keys(high, max); !above.empty())
      errs.push_back(at + ": Invalid value: [" + detail::join(above, ",") +
                     "]: requests must not be above the limitRange max");
    if (auto below = greater_keys(min, low); !below.empty())
      errs.push_back(at + ": Invalid value: [" + detail::join(below, ",") +
                     "]: requests must not be below the limitRange min");
  };
  for (std::size_t i = 0; i < w.podsets.size(); ++i) {
    const pod_resources pod = kueue_pod(c, w.namespace_, w.podsets[i].resources, nullptr);
    const std::string spec = "spec.podSets[" + std::to_string(i) + "].template.spec";
    for (const auto& [list, field] : {std::pair{&pod.init_containers, "initContainers"},
                                      std::pair{&pod.containers, "containers"}})
      for (std::size_t j = 0; j < list->size(); ++j) {
        const auto& ct = (*list)[j];
        check(spec + "." + field + "[" + std::to_string(j) + "]",
              merged(ct.requests, ct.limits, false), merged(ct.requests, ct.limits, true),
              sum.container_max, sum.container_min);
      }
    const resource_amounts total = pod_requests(pod);
    check(spec, total, total, sum.pod_max, sum.pod_min);
  }
  if (errs.empty()) return {};
  return "resources didn't satisfy LimitRange constraints: " +
         (errs.size() == 1 ? errs.front() : "[" + detail::join(errs, ", ") + "]");
}

bool source_selects(const topology_source_object& src, const label_map& labels) {
  return !src.node_selector || src.node_selector->matches(labels);
}

error_list add_object(cluster_objects& into, const doc_node& o, std::string_view path_sv) {
  error_list errors;
  const std::string path(path_sv);
  if (!o.is_mapping()) {
    errors.push_back(invalid("", path, "", "must be a Kubernetes object"));
    return errors;
  }
  const std::string kind = text_of(o.find("kind"));
  const std::string group(group_of(text_of(o.find("apiVersion"))));
  if (kind.ends_with("List")) {
    // An empty NodeFeatureList still says the API serves NodeFeatures.
    if (kind == "NodeFeatureList" && group == "nfd.k8s-sigs.io") into.node_features_read = true;
    if (kind == "AdmissionCheckList" && group == "kueue.x-k8s.io")
      into.admission_checks_read = true;
    const doc_node* items = o.find("items");
    if (!items || items->is_null()) return errors;
    if (!items->is_sequence()) {
      errors.push_back(invalid("", child(path, "items"), "", "must be a list of objects"));
      return errors;
    }
    for (std::size_t i = 0; i < items->items.size(); ++i) {
      const doc_node& item = items->items[i];
      // The API's typed lists (NodeList, WorkloadList) leave kind and apiVersion off their
      // items; they are the list's.
      if (item.is_mapping() && kind != "List" && (!item.find("kind") || !item.find("apiVersion"))) {
        doc_node copy = item;
        auto set = [&copy](std::string_view field, std::string value) {
          if (copy.find(field)) return;
          doc_node v;
          v.k = doc_node::kind::scalar;
          v.text = std::move(value);
          copy.map.emplace_back(std::string(field), std::move(v));
        };
        set("kind", kind.substr(0, kind.size() - 4));
        set("apiVersion", text_of(o.find("apiVersion")));
        auto e = add_object(into, copy, index(child(path, "items"), i));
        errors.insert(errors.end(), e.begin(), e.end());
        continue;
      }
      auto e = add_object(into, item, index(child(path, "items"), i));
      errors.insert(errors.end(), e.begin(), e.end());
    }
    return errors;
  }
  if (meta_name(o).empty()) {
    errors.push_back(required("", child(path, "metadata.name")));
    return errors;
  }
  const bool kueue = group == "kueue.x-k8s.io";
  const bool gpustack = group == "worker.gpustack.ai";
  if (kind == "Node" && group.empty()) {
    read_node(into, o, path, errors);
  } else if (kind == "Pod" && group.empty()) {
    read_pod(into, o, path, errors);
  } else if (kind == "Topology" && kueue) {
    read_topology(into, o);
  } else if (kind == "ResourceFlavor" && kueue) {
    read_flavor(into, o);
  } else if (kind == "ClusterQueue" && kueue) {
    read_cluster_queue(into, o, path, errors);
  } else if (kind == "LocalQueue" && kueue) {
    read_local_queue(into, o);
  } else if (kind == "Workload" && kueue) {
    read_workload(into, o, path, errors);
  } else if (kind == "ModelDeployment" && gpustack) {
    read_deployment(into, o);
  } else if (kind == "LimitRange" && group.empty()) {
    read_limit_range(into, o, path, errors);
  } else if (kind == "RuntimeClass" && group == "node.k8s.io") {
    read_runtime_class(into, o, path, errors);
  } else if (kind == "Namespace" && group.empty()) {
    into.namespaces.push_back({meta_name(o), labels_of(at(o, {"metadata", "labels"}))});
  } else if (kind == "TopologySource" && gpustack) {
    read_source(into, o, path, errors);
  } else if (kind == "NodeFeature" && group == "nfd.k8s-sigs.io") {
    read_node_feature(into, o);
  } else if (kind == "ConfigMap" && group.empty()) {
    read_config_map(into, o);
  } else if (kind == "Cohort" && kueue) {
    read_cohort(into, o, path, errors);
  } else if (kind == "AdmissionCheck" && kueue) {
    read_admission_check(into, o);
  } else {
    ++into.skipped;
  }
  return errors;
}

error_list add_objects(cluster_objects& into, std::string_view text, std::string_view origin) {
  decode_limits limits;
  limits.max_bytes = max_input_bytes;
  limits.max_depth = 128;
  limits.max_expanded_nodes = std::size_t{1} << 26;
  decode_result d = decode_any(text, "", limits);
  error_list errors;
  auto prefix = [&](field_error e) {
    e.path = e.path.empty() ? std::string(origin) : std::string(origin) + ": " + e.path;
    return e;
  };
  for (auto& e : d.errors) errors.push_back(prefix(std::move(e)));
  if (!d.ok()) return errors;
  for (auto& e : add_object(into, d.root, "")) errors.push_back(prefix(std::move(e)));
  return errors;
}

}  // namespace topogate::diagnose

// The NFD hop of the scheduling chain (docs/operations.md, "## `topogate diagnose chain`",
// "NFD hop"): for each writing (configMap or webhook) TopologySource, the NodeFeatures the
// consumer writes for the Nodes its revision describes, and the labels nfd-master put on
// those Nodes from them.

#include <algorithm>
#include <map>
#include <set>

#include "core/profile.hpp"
#include "core/snapshot.hpp"
#include "diagnose/diagnose.hpp"
#include "diagnose/diagnose_internal.hpp"

namespace topogate::diagnose {

std::string nfd_feature_name(std::string_view source_uid, std::string_view node) {
  std::string bytes(source_uid);
  bytes += '\0';
  bytes += node;
  const std::uint64_t h = core::fnv1a64(bytes);
  static constexpr char hex[] = "0123456789abcdef";
  std::string out = "gpustack-topology-";
  for (int shift = 60; shift >= 0; shift -= 4) out += hex[(h >> shift) & 0xf];
  return out;
}

bool is_standard_label_key(std::string_view key) {
  const auto slash = key.find('/');
  if (slash == std::string_view::npos) return false;
  const std::string_view prefix = key.substr(0, slash);
  return prefix == "kubernetes.io" || prefix.ends_with(".kubernetes.io");
}

namespace detail {
namespace {

constexpr std::string_view nfd_default_ns = "feature.node.kubernetes.io";

struct finding_sink {
  chain_report& r;
  void operator()(std::string check, std::string object, std::string field,
                  std::string detail) const {
    r.findings.push_back({std::move(check), std::move(object), std::move(field),
                          std::string(step_verify_chain), std::move(detail)});
  }
};

std::string feature_object(const node_feature& f) {
  return "NodeFeature/" + f.namespace_ + "/" + f.name;
}

std::string label_field(std::string_view where, std::string_view key) {
  return std::string(where) + "[" + std::string(key) + "]";
}

label_map private_only(const label_map& labels) {
  label_map out;
  for (const auto& kv : labels)
    if (!is_standard_label_key(kv.first)) out.push_back(kv);
  return out;
}

std::string render_labels(const label_map& labels) {
  std::vector<std::string> parts;
  for (const auto& [k, v] : labels) parts.push_back(k + "=" + v);
  return parts.empty() ? std::string("none") : join(parts, ", ");
}

// "k=v missing", "k=v (<have_name> w)" for every key of `want` `have` lacks or holds with
// another value, and with `extra` "k=v not expected" for every key only `have` holds; "" when
// none.
std::string label_differences(const label_map& want, const label_map& have,
                              std::string_view have_name, bool extra = true) {
  std::vector<std::string> out;
  for (const auto& [k, v] : want) {
    const std::string* got = find_label(have, k);
    if (!got)
      out.push_back(k + "=" + v + " missing");
    else if (*got != v)
      out.push_back(k + "=" + v + " (" + std::string(have_name) + " " + *got + ")");
  }
  if (extra)
    for (const auto& [k, v] : have)
      if (!find_label(want, k)) out.push_back(k + "=" + v + " not expected");
  return join(out, ", ");
}

// Whether the feature is the source's: an ownerReference or the source-uid label names it.
bool of_source(const node_feature& f, const topology_source_object& s) {
  for (const auto& o : f.owners)
    if (o.uid == s.uid) return true;
  const std::string* uid = find_label(f.labels, source_uid_label);
  return uid && *uid == s.uid;
}

// The source a NodeFeature is written for: its controller's UID, else its source-uid label.
std::string source_uid_of(const node_feature& f) {
  for (const auto& o : f.owners)
    if (o.controller && o.kind == "TopologySource") return o.uid;
  const std::string* uid = find_label(f.labels, source_uid_label);
  return uid ? *uid : std::string();
}

struct revision {
  bool known = false;
  std::string origin;                      // "ConfigMap ns/name[key]", "the revision given for it"
  std::string why;                         // why it is not known
  std::string name;                        // the snapshot's revision
  std::map<std::string, label_map> nodes;  // described Node -> its private labels
};

revision revision_of(const cluster_objects& c, const topology_source_object& s) {
  revision rev;
  const std::string* text = nullptr;
  if (!s.webhook) {
    rev.origin = "ConfigMap " + s.config_map_namespace + "/" + s.config_map_name + "[" +
                 s.config_map_key + "]";
    const config_map* m = c.find_config_map(s.config_map_namespace, s.config_map_name);
    if (!m) {
      rev.why = "ConfigMap " + s.config_map_namespace + "/" + s.config_map_name +
                " is not among the objects read";
      return rev;
    }
    auto it = m->data.find(s.config_map_key);
    if (it == m->data.end()) {
      rev.why = rev.origin + " does not exist";
      return rev;
    }
    text = &it->second;
  } else {
    rev.origin = "the revision given for it (--snapshot)";
    auto it = c.revision_texts.find(s.name);
    if (it == c.revision_texts.end()) it = c.revision_texts.find("");
    if (it == c.revision_texts.end()) {
      rev.why =
          "the revision topogate serves for this webhook source was not given "
          "(--snapshot [SOURCE=]FILE)";
      return rev;
    }
    text = &it->second;
  }
  const auto d = core::decode_snapshot(*text);
  if (!d.ok()) {
    rev.why = rev.origin + " is not a snapshot: " + d.errors.front().to_string();
    return rev;
  }
  rev.known = true;
  rev.name = d.value.revision;
  for (const auto& n : d.value.nodes) {
    label_map labels;
    for (const auto& l : n.labels) labels.emplace_back(l.key, l.value);
    std::sort(labels.begin(), labels.end());
    rev.nodes[n.name] = private_only(labels);
  }
  return rev;
}

bool listed(const std::set<std::string>& annotated, const std::string& key) {
  if (annotated.count(key)) return true;
  // nfd-master lists keys of its own namespace without the prefix.
  const std::string own = std::string(nfd_default_ns) + "/";
  return key.starts_with(own) && annotated.count(key.substr(own.size()));
}

std::string namespace_of_key(const std::string& key) {
  const auto slash = key.find('/');
  return slash == std::string::npos ? std::string(nfd_default_ns) : key.substr(0, slash);
}

// Why the Node's labels are not its NodeFeature's: the likely causes in order, each with the
// evidence the objects show, those the objects rule out left out. `want` are the labels NFD
// should have applied; `wrong` the keys of them the Node lacks or holds with another value.
std::string not_applied_causes(const cluster_objects& c, const k8s_node& n, const label_map& want,
                               const std::vector<std::string>& wrong) {
  std::vector<std::string> causes;
  if (!c.node_features_read) {
    causes.push_back(
        "no NodeFeature CRD (evidence: no NodeFeatures read, the API serves none "
        "or no nodefeatures dump was given)");
  } else if (!n.nfd_feature_labels) {
    // No annotation: nfd-master never applied a label here, or removed all it had (every
    // key denied or disabled since): the namespaces are named, which one is not known.
    causes.push_back("nfd-master has never touched the Node: is it running? (evidence: no " +
                     std::string(nfd_feature_labels_annotation) + " annotation)");
    std::set<std::string> namespaces;
    for (const auto& k : wrong) namespaces.insert(namespace_of_key(k));
    for (const auto& ns : namespaces)
      causes.push_back("namespace " + ns + " is denied (-deny-label-ns=" + ns +
                       " without -extra-label-ns=" + ns + ")");
    causes.push_back("labels are disabled (restrictions.disableLabels)");
  } else {
    std::set<std::string> annotated;
    std::string_view rest = *n.nfd_feature_labels;
    while (!rest.empty()) {
      const auto comma = rest.find(',');
      std::string_view item = rest.substr(0, comma);
      while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
      while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
      if (!item.empty()) annotated.insert(std::string(item));
      rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    }
    std::map<std::string, std::vector<std::string>> unlisted;  // namespace -> keys
    std::vector<std::string> stale;
    for (const auto& k : wrong)
      (listed(annotated, k) ? stale : unlisted[namespace_of_key(k)]).push_back(k);
    bool every_key_missing = true;
    for (const auto& [k, v] : want)
      every_key_missing = every_key_missing && !find_label(n.labels, k);
    if (!unlisted.empty()) {
      const bool disabled = annotated.empty() && every_key_missing;
      for (const auto& [ns, keys] : unlisted) {
        bool namespace_listed = false;
        for (const auto& a : annotated)
          namespace_listed = namespace_listed || namespace_of_key(a) == ns;
        std::string cause = "namespace " + ns + " is denied (-deny-label-ns=" + ns +
                            " without -extra-label-ns=" + ns + ")";
        if (!annotated.empty() && !namespace_listed)
          cause += " (evidence: the annotation lists " + std::to_string(annotated.size()) +
                   " keys, none of " + ns + ")";
        causes.push_back(std::move(cause));
      }
      if (disabled)
        causes.push_back("labels are disabled (restrictions.disableLabels) (evidence: the " +
                         std::string(nfd_feature_labels_annotation) +
                         " annotation is empty and every key is missing)");
      else if (!annotated.empty())
        causes.push_back("nfd-master has not caught up (stopped, or within its 1 s tick)");
    }
    if (!stale.empty())
      causes.push_back("nfd-master applied " + join(stale, ", ") +
                       " before and has not caught up with the NodeFeature (stopped, or within "
                       "its 1 s tick), or someone else changed the label (evidence: listed in the "
                       "annotation)");
  }
  std::string out = "NFD has not applied them; likely causes, in order: ";
  for (std::size_t i = 0; i < causes.size(); ++i)
    out += (i ? "; " : "") + std::to_string(i + 1) + ") " + causes[i];
  return out;
}

// The Node's labels against those NFD should have applied to it.
void check_applied(const cluster_objects& c, const finding_sink& add, const k8s_node& n,
                   const label_map& want, const std::string& from) {
  std::vector<std::string> wrong;
  for (const auto& [k, v] : want)
    if (const std::string* got = find_label(n.labels, k); !got || *got != v) wrong.push_back(k);
  if (wrong.empty()) return;
  add("nfd-not-applied", "Node/" + n.name, "metadata.labels",
      "Node labels differ from " + from + ": " +
          label_differences(want, n.labels, "Node has", false) + ". " +
          not_applied_causes(c, n, want, wrong));
}

void check_source(const cluster_objects& c, const finding_sink& add, chain_report& r,
                  const topology_source_object& s) {
  const std::string src = "TopologySource/" + s.name;
  const revision rev = revision_of(c, s);
  if (!rev.known)
    r.notes.push_back(src + ": its revision is not read (" + rev.why +
                      "): NodeFeatures are not compared with it and missing ones not looked for");
  if (!c.node_features_read) {
    add("nfd-crd", src, s.webhook ? "spec.webhook" : "spec.configMap",
        "no NodeFeature (nfd.k8s-sigs.io/v1alpha1) read: the API serves none (the CRD is not "
        "installed) or no nodefeatures dump was given; the consumer publishes this source's "
        "labels through NodeFeatures only");
    if (rev.known)
      for (const auto& [node, want] : rev.nodes)
        if (const k8s_node* n = c.node(node); n && !want.empty())
          check_applied(c, add, *n, want, rev.origin + " (revision " + rev.name + ")");
    return;
  }
  if (s.uid.empty()) {
    r.notes.push_back(src + ": no metadata.uid: its NodeFeatures cannot be named");
    return;
  }
  // The source's NodeFeatures by the Node they name.
  std::map<std::string, std::vector<const node_feature*>> by_node;
  for (const auto& f : c.node_features) {
    if (!of_source(f, s)) continue;
    const std::string object = feature_object(f);
    if (f.namespace_ != c.worker_namespace)
      add("nfd-feature-namespace", object, "metadata.namespace",
          "NodeFeature of " + src + " outside the worker namespace " + c.worker_namespace +
              ": the consumer neither updates nor deletes it, nfd-master still applies it");
    const std::string* node = find_label(f.labels, nfd_node_name_label);
    if (!node || node->empty()) {
      add("nfd-feature-labels", object, label_field("metadata.labels", nfd_node_name_label),
          "no Node name label: nfd-master applies this NodeFeature to no Node");
      continue;
    }
    const std::string want_name = nfd_feature_name(s.uid, *node);
    if (f.name != want_name)
      add("nfd-feature-name", object, "metadata.name",
          "expected " + want_name + " (FNV-1a 64 of source UID " + s.uid + ", NUL, Node " + *node +
              ")");
    const std::string* uid = find_label(f.labels, source_uid_label);
    if (!uid || *uid != s.uid)
      add("nfd-feature-labels", object, label_field("metadata.labels", source_uid_label),
          uid ? "is " + *uid + ", not the UID of " + src + " (" + s.uid + ")"
              : "missing: expected " + s.uid + " (" + src + ")");
    const owner_ref* controller = nullptr;
    for (const auto& o : f.owners)
      if (o.controller) controller = &o;
    if (!controller || controller->kind != "TopologySource" || controller->uid != s.uid)
      add("nfd-feature-owner", object, "metadata.ownerReferences",
          controller ? "controlled by " + controller->kind + "/" + controller->name + " (uid " +
                           controller->uid + "), not by " + src + " (uid " + s.uid + ")"
                     : "no controller ownerReference: expected " + src + " (uid " + s.uid + ")");
    for (const auto& [k, v] : f.spec_labels)
      if (is_standard_label_key(k))
        add("nfd-feature-standard", object, label_field("spec.labels", k),
            "standard key in a NodeFeature: NodeFeature.spec.labels contains private inventory "
            "labels only (standard cloud region and zone keys may be read as parents but must "
            "not appear there; nfd-master refuses the kubernetes.io namespaces)");
    const bool gone = rev.known ? !rev.nodes.count(*node) : !c.node(*node);
    if (gone) {
      add("nfd-feature-left-behind", object, label_field("metadata.labels", nfd_node_name_label),
          "Node " + *node + " is not described by " + src +
              (rev.known ? " (revision " + rev.name + " of " + rev.origin + ")"
                         : " (no such Node)") +
              ": the consumer deletes such NodeFeatures; nfd-master still applies it");
      continue;
    }
    by_node[*node].push_back(&f);
  }

  // Per Node: exactly one NodeFeature, with what the revision says, applied to the Node.
  std::set<std::string> nodes;
  for (const auto& [n, fs] : by_node) nodes.insert(n);
  if (rev.known)
    for (const auto& [n, want] : rev.nodes)
      if (!want.empty()) nodes.insert(n);
  for (const auto& node : nodes) {
    const std::string want_name = nfd_feature_name(s.uid, node);
    const std::string where = c.worker_namespace + "/" + want_name;
    const auto it = by_node.find(node);
    const std::vector<const node_feature*> fs =
        it == by_node.end() ? std::vector<const node_feature*>() : it->second;
    const label_map* want = nullptr;
    if (rev.known)
      if (auto w = rev.nodes.find(node); w != rev.nodes.end()) want = &w->second;
    if (fs.empty()) {
      add("nfd-feature-missing", "Node/" + node, "NodeFeature[" + where + "]",
          "no NodeFeature of " + src + " for this Node: expected " + where + " with " +
              render_labels(*want) + " (revision " + rev.name + " of " + rev.origin + ")");
      if (const k8s_node* n = c.node(node))
        check_applied(c, add, *n, *want, rev.origin + " (revision " + rev.name + ")");
      continue;
    }
    const node_feature* f = fs.front();
    for (const auto* x : fs)
      if (x->name == want_name && x->namespace_ == c.worker_namespace) f = x;
    if (fs.size() > 1) {
      std::vector<std::string> names;
      for (const auto* x : fs) names.push_back(x->namespace_ + "/" + x->name);
      add("nfd-feature-duplicate", "Node/" + node, "NodeFeature[" + where + "]",
          std::to_string(fs.size()) + " NodeFeatures of " + src + " for this Node (" +
              join(names, ", ") + "): expected exactly one, " + where);
    }
    if (want) {
      const std::string diff =
          label_differences(*want, private_only(f->spec_labels), "NodeFeature has");
      if (!diff.empty())
        add("nfd-feature-revision", feature_object(*f), "spec.labels",
            "not what revision " + rev.name + " of " + rev.origin + " says for Node " + node +
                ": " + diff +
                (want->empty() ? " (the revision gives this Node no private label: the "
                                 "consumer writes no NodeFeature for it and leaves this one)"
                               : ""));
    }
    if (const k8s_node* n = c.node(node))
      check_applied(c, add, *n, private_only(f->spec_labels),
                    "NodeFeature " + f->namespace_ + "/" + f->name);
  }
}

}  // namespace

void check_nfd_hop(const cluster_objects& c, chain_report& r) {
  const finding_sink add{r};
  for (const auto& s : c.sources)
    if (s.writes) check_source(c, add, r, s);

  // One Node written by NodeFeatures of two sources with keys in common: nfd-master merges
  // them in name order, so the later name's value wins.
  std::map<std::string, std::map<std::string, std::vector<const node_feature*>>> by_node;
  for (const auto& f : c.node_features) {
    const std::string* node = find_label(f.labels, nfd_node_name_label);
    const std::string uid = source_uid_of(f);
    if (node && !node->empty() && !uid.empty()) by_node[*node][uid].push_back(&f);
  }
  const auto source_name = [&](const std::string& uid) {
    for (const auto& s : c.sources)
      if (s.uid == uid) return "TopologySource/" + s.name;
    return "source uid " + uid + " (no such TopologySource)";
  };
  for (const auto& [node, by_uid] : by_node) {
    for (auto a = by_uid.begin(); a != by_uid.end(); ++a) {
      for (auto b = std::next(a); b != by_uid.end(); ++b) {
        std::set<std::string> keys_a, common;
        for (const auto* f : a->second)
          for (const auto& kv : f->spec_labels) keys_a.insert(kv.first);
        for (const auto* f : b->second)
          for (const auto& kv : f->spec_labels)
            if (keys_a.count(kv.first)) common.insert(kv.first);
        if (common.empty()) continue;
        std::vector<std::string> names;
        for (const auto* side : {&a->second, &b->second})
          for (const auto* f : *side) names.push_back(f->namespace_ + "/" + f->name);
        add("nfd-node-sources", "Node/" + node,
            label_field("NodeFeature.spec.labels", *common.begin()),
            "written by two sources, " + source_name(a->first) + " and " + source_name(b->first) +
                " (NodeFeatures " + join(names, ", ") + "), both setting " +
                join(std::vector<std::string>(common.begin(), common.end()), ", ") +
                ": nfd-master merges NodeFeatures in name order, the later one's value wins");
      }
    }
  }
}

}  // namespace detail
}  // namespace topogate::diagnose

#pragma once
// The audit of what is already in the cluster: every TopologySource and ModelDeployment
// (worker.gpustack.ai) re-checked with the rules admission applies on CREATE, for objects
// that never met the webhook (created before topogate was installed, admitted while it was
// down under failurePolicy Ignore, or outside its namespace and object selectors). Pure: a
// function from decoded objects (`kubectl get -o json` output or API list pages) to the
// objects that violate a rule; `topogate audit` and the server's periodic audit read the
// objects and render or export the result.
//
// Admission checks UPDATE exactly as CREATE (no rule compares the new object with the old
// one), so an audit sees every rule admission enforces: T1-T14 and M1-M2. When the objects
// include the cluster's Nodes, it also finds the ownership conflicts the consumer acts on at
// run time (core/ownership): writing sources that would each stop the other publishing.

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/admitted_kinds.hpp"
#include "core/document.hpp"
#include "core/field_error.hpp"
#include "core/ownership.hpp"
#include "core/topology_source.hpp"

namespace topogate::diagnose {

inline constexpr std::string_view topology_source_kind =
    core::admitted(core::admission_route::topology_sources).kind;
inline constexpr std::string_view model_deployment_kind =
    core::admitted(core::admission_route::model_deployments).kind;

struct audit_options {
  // The admission options (workerNamespace for T13, reservedPrefixes for T6).
  core::validation_options validation;
  // ModelDeployments outside these namespaces are left out (counted in out_of_scope); empty:
  // every namespace. TopologySources are cluster-scoped and always checked.
  std::vector<std::string> namespaces;
};

// One object with at least one violation; `errors` in the order validation reports them.
struct audited_object {
  std::string kind;        // TopologySource or ModelDeployment
  std::string namespace_;  // "" for a TopologySource
  std::string name;
  core::error_list errors;

  // "NAMESPACE/NAME", or "NAME" for a cluster-scoped object.
  [[nodiscard]] std::string id() const;
  // The distinct rule ids of `errors`, sorted as core::rule_less sorts them ("" for an error that
  // names no rule: a malformed object).
  [[nodiscard]] std::vector<std::string> rules() const;
};

struct audit_report {
  std::size_t topology_sources = 0;                 // checked
  std::size_t model_deployments = 0;                // checked
  std::size_t ignored = 0;                          // objects of other kinds or groups
  std::size_t out_of_scope = 0;                     // ModelDeployments in namespaces not audited
  std::vector<audited_object> violating;            // sorted by kind, namespace, name (finish())
  std::size_t nodes = 0;                            // Nodes read (for ownership conflicts)
  std::vector<core::ownership_conflict> conflicts;  // found by finish()

  // What audit_objects keeps for finish(): each TopologySource's levels, selector and arm,
  // and each Node's labels.
  struct source_seen {
    std::string name;
    std::vector<std::string> levels;
    std::optional<core::label_selector> selector;
    bool writes = false;
  };
  std::vector<source_seen> sources_seen;
  std::vector<std::pair<std::string, std::vector<std::pair<std::string, std::string>>>> nodes_seen;

  [[nodiscard]] std::size_t checked() const noexcept {
    return topology_sources + model_deployments;
  }
  [[nodiscard]] bool clean() const noexcept { return violating.empty() && conflicts.empty(); }
  // How many objects of each kind violate each rule: {kind, rule} -> objects.
  [[nodiscard]] std::map<std::pair<std::string, std::string>, std::size_t> objects_by_rule() const;
  // How many field errors name each rule, over every kind (the summary's counts).
  [[nodiscard]] std::map<std::string, std::size_t> violations_by_rule() const;
  [[nodiscard]] std::size_t violation_count() const noexcept;
};

// Checks every object of `object`: a List, a typed list (TopologySourceList, whose items may
// leave kind and apiVersion to the list) or one object. Other kinds are counted as ignored.
void audit_objects(audit_report& into, const core::doc_node& object, const audit_options& opts);
// Sorts `violating` and finds the ownership conflicts (call once every object was added).
void finish(audit_report& report);

// One line per violation, `KIND NAMESPACE/NAME: RULE path: message` (NAME alone for a
// TopologySource, `-` for an error that names no rule), then one line per source in an
// ownership conflict, then the summary line.
[[nodiscard]] std::string render_audit_text(const audit_report& report);
// {"violations":[{kind,namespace,name,rule,path,type,message}...],"summary":{...}}.
[[nodiscard]] std::string render_audit_json(const audit_report& report);
// The summary line alone (no newline): objects checked, objects violating, violations by rule.
[[nodiscard]] std::string audit_summary(const audit_report& report);

}  // namespace topogate::diagnose

// People's tables and JSON for the diagnosis reports (the command line prints these).
#include <algorithm>
#include <limits>
#include <set>

#include "diagnose/diagnose.hpp"
#include "diagnose/quantity.hpp"

namespace topogate::diagnose {

// Built on the core: its documents, field errors and rules are used by their names here.
using namespace core;

namespace {

// Left-aligned columns, two spaces apart; a cell never wraps.
std::string table(const std::vector<std::vector<std::string>>& rows, std::string_view indent = "") {
  std::vector<std::size_t> width;
  for (const auto& row : rows)
    for (std::size_t i = 0; i < row.size(); ++i) {
      if (width.size() <= i) width.push_back(0);
      width[i] = std::max(width[i], row[i].size());
    }
  std::string out;
  for (const auto& row : rows) {
    std::string line(indent);
    for (std::size_t i = 0; i < row.size(); ++i) {
      line += row[i];
      if (i + 1 < row.size()) line.append(width[i] - row[i].size() + 2, ' ');
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  return out;
}

std::string amount(const resource_amounts& r, const std::string& k) {
  auto it = r.find(k);
  return format_amount(k, it == r.end() ? 0 : it->second);
}

std::string fits_text(std::int64_t v) {
  return v == std::numeric_limits<std::int64_t>::max() ? "unbounded" : std::to_string(v);
}

void json_str(std::string& out, std::string_view key, std::string_view v, bool comma = true) {
  if (comma) out += ',';
  append_json_string(out, key);
  out += ':';
  append_json_string(out, v);
}
void json_int(std::string& out, std::string_view key, std::int64_t v) {
  out += ',';
  append_json_string(out, key);
  out += ':' + std::to_string(v);
}
void json_bool(std::string& out, std::string_view key, bool v) {
  out += ',';
  append_json_string(out, key);
  out += v ? ":true" : ":false";
}
void json_amounts(std::string& out, std::string_view key, const resource_amounts& r) {
  out += ',';
  append_json_string(out, key);
  out += ":{";
  bool first = true;
  for (const auto& [k, v] : r) {
    if (!first) out += ',';
    first = false;
    append_json_string(out, k);
    out += ':' + std::to_string(v);
  }
  out += '}';
}
void json_strings(std::string& out, std::string_view key, const std::vector<std::string>& v) {
  out += ',';
  append_json_string(out, key);
  out += ":[";
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (i) out += ',';
    append_json_string(out, v[i]);
  }
  out += ']';
}

}  // namespace

std::string render_chain_text(const chain_report& r) {
  std::string out;
  if (!r.findings.empty()) {
    std::vector<std::vector<std::string>> rows{
        {"CHECK", "OBJECT", "FIELD", "RUNBOOK STEP", "DETAIL"}};
    for (const auto& f : r.findings) rows.push_back({f.check, f.object, f.field, f.step, f.detail});
    out += table(rows);
    out += "\n";
  }
  out += "checked " + std::to_string(r.managed_nodes) + " managed Nodes, " +
         std::to_string(r.flavors) + " ResourceFlavors, " + std::to_string(r.topologies) +
         " Topologies, " + std::to_string(r.queues) + " ClusterQueues, " +
         std::to_string(r.requests) + " level requests: " +
         (r.findings.empty() ? std::string("the scheduling chain is complete")
                             : std::to_string(r.findings.size()) + " finding" +
                                   (r.findings.size() == 1 ? "" : "s")) +
         "\n";
  for (const auto& n : r.notes) out += "note: " + n + "\n";
  return out;
}

std::string render_chain_json(const chain_report& r) {
  std::string out = "{\"clean\":";
  out += r.clean() ? "true" : "false";
  json_int(out, "managedNodes", static_cast<std::int64_t>(r.managed_nodes));
  json_int(out, "resourceFlavors", static_cast<std::int64_t>(r.flavors));
  json_int(out, "topologies", static_cast<std::int64_t>(r.topologies));
  json_int(out, "clusterQueues", static_cast<std::int64_t>(r.queues));
  json_int(out, "levelRequests", static_cast<std::int64_t>(r.requests));
  out += ",\"findings\":[";
  for (std::size_t i = 0; i < r.findings.size(); ++i) {
    const auto& f = r.findings[i];
    if (i) out += ',';
    out += '{';
    json_str(out, "check", f.check, false);
    json_str(out, "object", f.object);
    json_str(out, "field", f.field);
    json_str(out, "step", f.step);
    json_str(out, "detail", f.detail);
    out += '}';
  }
  out += "]";
  if (!r.notes.empty()) json_strings(out, "notes", r.notes);
  out += "}\n";
  return out;
}

std::string render_pending_text(const pending_report& r) {
  std::string out = "Workload " + r.workload;
  if (!r.deployment.empty()) out += " (ModelDeployment " + r.deployment + ")";
  out += "\n";
  if (!r.found) return out + r.conclusion + "\n";
  for (const auto& s : r.steps) {
    out += "\n" + std::to_string(s.number) + ". " + s.title + ": " +
           std::string(to_string(s.result)) + "\n";
    for (const auto& l : s.lines) out += "   " + l + "\n";
  }
  for (const auto& pf : r.fits) {
    std::set<std::string> names{"cpu", "memory"};
    for (const auto& [k, v] : pf.per_pod) names.insert(k);
    names.erase("pods");
    std::vector<std::string> res(names.begin(), names.end());
    out += "\nPodSet " + pf.podset + ": " + std::to_string(pf.count) + " Pods, each ";
    std::string each;
    for (const auto& k : res) {
      if (!each.empty()) each += " ";
      each += k + " " + amount(pf.per_pod, k);
    }
    out += each + "; level " +
           (pf.level.empty() ? std::string("(none: one cluster-wide domain)") : pf.level) +
           (pf.required        ? " (required)"
            : pf.level.empty() ? ""
                               : " (preferred)") +
           "\n";
    std::vector<std::vector<std::string>> rows;
    std::vector<std::string> head{"FLAVOR", "DOMAIN", "NODE"};
    for (const auto& k : res) head.push_back(k + " FREE/ALLOC");
    head.push_back("FIT");
    head.push_back("HOLDS " + std::to_string(pf.count));
    rows.push_back(head);
    for (const auto& fc : pf.flavors) {
      if (!fc.level_in_topology) {
        std::vector<std::string> row{fc.flavor,
                                     "(Topology " +
                                         (fc.topology.empty() ? std::string("none") : fc.topology) +
                                         " has no " + pf.level + " level)",
                                     "-"};
        for (std::size_t i = 0; i < res.size(); ++i) row.push_back("-");
        row.push_back(fits_text(fc.fits));
        row.push_back("no");
        rows.push_back(row);
        continue;
      }
      for (const auto& d : fc.domains) {
        const std::string dom = d.values.empty() ? std::string("(cluster)") : d.values.back();
        for (const auto& n : d.nodes) {
          std::vector<std::string> row{fc.flavor, dom, n.name};
          for (const auto& k : res)
            row.push_back(amount(n.free, k) + "/" + amount(n.allocatable, k));
          row.push_back(fits_text(n.fits));
          row.push_back("");
          rows.push_back(row);
        }
        std::vector<std::string> row{fc.flavor, dom, "(domain)"};
        for (std::size_t i = 0; i < res.size(); ++i) row.push_back("");
        row.push_back(fits_text(d.fits));
        row.push_back(d.holds ? "yes" : "no");
        rows.push_back(row);
      }
    }
    out += table(rows, "  ");
    for (const auto& fc : pf.flavors)
      for (const auto& [node, why] : fc.excluded)
        out += "  not counted in " + fc.flavor + ": " + node + " (" + why + ")\n";
    out += "  cluster-wide " + fits_text(pf.cluster_fits) + " fit; largest " +
           (pf.level.empty() ? std::string("domain") : pf.level + " domain") + " holds " +
           fits_text(pf.best_domain) + "; the PodSet needs " + std::to_string(pf.count) +
           (pf.preferred() ? " in one domain, or (preferred) spread: together they hold " +
                                 fits_text(pf.best_spanning)
                           : std::string(" in one domain")) +
           "\n";
  }
  if (!r.groups.empty()) {
    out += "\nGroups of ModelDeployment " + r.deployment + ":\n";
    std::vector<std::vector<std::string>> rows{
        {"ROLE", "WORKLOAD", "QUOTA RESERVED", "ADMITTED", "DOMAIN", "ASSIGNMENT"}};
    for (const auto& g : r.groups)
      rows.push_back({g.role, g.workload, g.quota_reserved ? "True" : "False",
                      g.admitted ? "True" : "False",
                      g.quota_reserved ? "held"
                      : g.fits         ? "fits"
                                       : "none",
                      g.assignment.empty() ? "-" : g.assignment});
    out += table(rows, "  ");
  }
  out += "\n" + r.conclusion + "\n";
  return out;
}

std::string render_pending_json(const pending_report& r) {
  std::string out = "{";
  json_str(out, "workload", r.workload, false);
  json_bool(out, "found", r.found);
  json_str(out, "modelDeployment", r.deployment);
  out += ",\"steps\":[";
  for (std::size_t i = 0; i < r.steps.size(); ++i) {
    const auto& s = r.steps[i];
    if (i) out += ',';
    out += "{\"step\":" + std::to_string(s.number);
    json_str(out, "title", s.title);
    json_str(out, "verdict", to_string(s.result));
    json_strings(out, "details", s.lines);
    out += '}';
  }
  out += "],\"podSets\":[";
  for (std::size_t i = 0; i < r.fits.size(); ++i) {
    const auto& pf = r.fits[i];
    if (i) out += ',';
    out += '{';
    json_str(out, "name", pf.podset, false);
    json_str(out, "level", pf.level);
    json_bool(out, "required", pf.required);
    json_int(out, "count", pf.count);
    json_amounts(out, "perPod", pf.per_pod);
    json_int(out, "clusterFits", pf.cluster_fits);
    json_int(out, "largestDomainFits", pf.best_domain);
    json_bool(out, "fitsOneDomain", pf.fits_one_domain());
    json_int(out, "spanningFits", pf.best_spanning);
    json_bool(out, "fits", pf.fits());
    out += ",\"flavors\":[";
    for (std::size_t j = 0; j < pf.flavors.size(); ++j) {
      const auto& fc = pf.flavors[j];
      if (j) out += ',';
      out += '{';
      json_str(out, "name", fc.flavor, false);
      json_str(out, "topology", fc.topology);
      json_bool(out, "levelInTopology", fc.level_in_topology);
      json_int(out, "fits", fc.fits);
      out += ",\"domains\":[";
      for (std::size_t k = 0; k < fc.domains.size(); ++k) {
        const auto& d = fc.domains[k];
        if (k) out += ',';
        out += "{\"values\":[";
        for (std::size_t v = 0; v < d.values.size(); ++v) {
          if (v) out += ',';
          append_json_string(out, d.values[v]);
        }
        out += ']';
        json_int(out, "fits", d.fits);
        json_bool(out, "holds", d.holds);
        out += ",\"nodes\":[";
        for (std::size_t n = 0; n < d.nodes.size(); ++n) {
          const auto& nc = d.nodes[n];
          if (n) out += ',';
          out += '{';
          json_str(out, "name", nc.name, false);
          json_amounts(out, "allocatable", nc.allocatable);
          json_amounts(out, "used", nc.used);
          json_amounts(out, "free", nc.free);
          json_int(out, "fits", nc.fits);
          out += '}';
        }
        out += "]}";
      }
      out += "],\"excluded\":[";
      for (std::size_t k = 0; k < fc.excluded.size(); ++k) {
        if (k) out += ',';
        out += '{';
        json_str(out, "node", fc.excluded[k].first, false);
        json_str(out, "reason", fc.excluded[k].second);
        out += '}';
      }
      out += "]}";
    }
    out += "]}";
  }
  out += "],\"groups\":[";
  for (std::size_t i = 0; i < r.groups.size(); ++i) {
    const auto& g = r.groups[i];
    if (i) out += ',';
    out += '{';
    json_str(out, "workload", g.workload, false);
    json_str(out, "role", g.role);
    json_bool(out, "quotaReserved", g.quota_reserved);
    json_bool(out, "admitted", g.admitted);
    json_bool(out, "fitsOneDomain", g.fits_one_domain);
    json_bool(out, "fits", g.fits);
    json_str(out, "assignment", g.assignment);
    out += '}';
  }
  out += ']';
  const auto& k = r.kueue;
  out += ",\"kueue\":{";
  out += k.modelled ? "\"modelled\":true" : "\"modelled\":false";
  json_bool(out, "admissible", k.admissible);
  json_bool(out, "noDecision", k.no_decision);
  json_str(out, "step", k.step);
  json_str(out, "podSet", k.podset);
  json_str(out, "message", k.message);
  json_str(out, "reason", k.reason);
  json_bool(out, "partial", k.partial);
  json_strings(out, "preempts", k.preempts);
  out += ",\"podSets\":[";
  for (std::size_t i = 0; i < k.podsets.size(); ++i) {
    const auto& p = k.podsets[i];
    if (i) out += ',';
    out += '{';
    json_str(out, "name", p.podset, false);
    json_str(out, "group", p.group);
    json_int(out, "count", p.count);
    json_int(out, "specCount", p.spec_count);
    json_str(out, "flavor", p.flavor);
    json_str(out, "stage", p.stage);
    json_str(out, "detail", p.detail);
    out += '}';
  }
  out += ']';
  json_strings(out, "notes", k.notes);
  out += '}';
  json_str(out, "conclusion", r.conclusion);
  out += "}\n";
  return out;
}

}  // namespace topogate::diagnose

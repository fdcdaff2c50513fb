"""Scenario files: read, checked, and the views of them the lab builds on (the inventory's
revision, the scenario after its `change`). The format is documented in docs/operations.md
("The TAS lab"); a new field is checked in `check` below and read where it is used."""
import hashlib
import json
import re

# The lab's names: every object a scenario creates carries OWNED (value: the scenario's name).
OWNED = "tas-lab.topogate.invalid/scenario"
NS = "default"
QUEUE = "gpustack"
PROFILE = "topology.gpustack.ai/profile"
HOSTNAME = "kubernetes.io/hostname"
ROLE = "worker.gpustack.ai/role"

DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
LEVEL_KEY = re.compile(r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")


class Invalid(Exception):
    """A scenario file that cannot be read or breaks the format: every problem, in one text."""


def load(path):
    """The scenario at PATH, checked; `workloads` defaults to []."""
    try:
        with open(path) as f:
            s = json.load(f)
    except (OSError, ValueError) as e:
        raise Invalid(f"{path}: {e}") from None
    errs = check(s) if isinstance(s, dict) else ["a JSON object is required"]
    if errs:
        raise Invalid(f"{path}: " + "; ".join(errs))
    s.setdefault("workloads", [])
    return s


def _levels_ok(levels):
    return isinstance(levels, list) and 1 <= len(levels) <= 16 and \
        all(isinstance(level, str) and LEVEL_KEY.match(level) for level in levels)


def check(s):
    """Every problem of scenario S, as "path: what is expected"."""
    errs = []
    if not isinstance(s.get("name"), str) or not DNS_LABEL.match(s.get("name", "")):
        errs.append("name: a DNS label is required")
    ts = s.get("topologySource") or {}
    levels = ts.get("levels")
    if not _levels_ok(levels):
        errs.append("topologySource.levels: 1 to 16 label keys")
    elif HOSTNAME in levels:
        errs.append("topologySource.levels: kubernetes.io/hostname is appended, not listed")
    nodes = s.get("nodes")
    if not isinstance(nodes, list) or not nodes:
        errs.append("nodes: at least one Node")
        nodes = []
    names = set()
    for i, n in enumerate(nodes):
        if not isinstance(n.get("name"), str) or n["name"] in names:
            errs.append(f"nodes[{i}].name: missing or repeated")
        names.add(n.get("name"))
        if not isinstance(n.get("allocatable"), dict) or not n["allocatable"]:
            errs.append(f"nodes[{i}].allocatable: required")
        for key in (n.get("labels") or {}):
            if key not in (levels or []):
                errs.append(f"nodes[{i}].labels[{key}]: not a level of topologySource")
        for key in (n.get("nodeLabels") or {}):
            if key in (levels or []) or key in (HOSTNAME, PROFILE, OWNED):
                errs.append(f"nodes[{i}].nodeLabels[{key}]: a topology, profile or lab label")
    wnames = set()
    for i, w in enumerate(s.get("workloads") or []):
        if not isinstance(w.get("name"), str) or w["name"] in wnames:
            errs.append(f"workloads[{i}].name: missing or repeated")
        wnames.add(w.get("name"))
        if not w.get("podSets"):
            errs.append(f"workloads[{i}].podSets: at least one")
        for j, p in enumerate(w.get("podSets") or []):
            if not isinstance(p.get("count"), int) or p["count"] < 1:
                errs.append(f"workloads[{i}].podSets[{j}].count: a positive integer")
            if p.get("sliceSize") is not None and not (isinstance(p["sliceSize"], int) and p["sliceSize"] >= 1):
                errs.append(f"workloads[{i}].podSets[{j}].sliceSize: a positive integer")
            if p.get("minCount") is not None and not (isinstance(p["minCount"], int) and
                                                      1 <= p["minCount"] <= p.get("count", 0)):
                errs.append(f"workloads[{i}].podSets[{j}].minCount: 1 to count")
            if p.get("required") and p.get("preferred"):
                errs.append(f"workloads[{i}].podSets[{j}]: required or preferred, not both")
            for field in ("requests", "limits", "podRequests"):
                if p.get(field) is not None and not isinstance(p[field], dict):
                    errs.append(f"workloads[{i}].podSets[{j}].{field}: resource -> quantity")
    for i, lr in enumerate(s.get("limitRanges") or []):
        if not isinstance(lr, dict) or not isinstance(lr.get("name"), str) or not isinstance(lr.get("limits"), list):
            errs.append(f"limitRanges[{i}]: {{name, limits}}")
    for i, rc in enumerate(s.get("runtimeClasses") or []):
        if not isinstance(rc, dict) or not isinstance(rc.get("name"), str):
            errs.append(f"runtimeClasses[{i}]: {{name, overhead}}")
    for i, n in enumerate(s.get("namespaces") or []):
        if not isinstance(n, dict) or not isinstance(n.get("name"), str) or n["name"] == NS or \
                not DNS_LABEL.match(n["name"]):
            errs.append(f"namespaces[{i}]: {{name, labels}}, a DNS label other than {NS}")
    known_ns = {NS} | {n.get("name") for n in s.get("namespaces") or [] if isinstance(n, dict)}
    for i, lq in enumerate(s.get("localQueues") or []):
        if not isinstance(lq, dict) or not isinstance(lq.get("name"), str) or \
                not isinstance(lq.get("clusterQueue"), str) or lq.get("namespace", NS) not in known_ns:
            errs.append(f"localQueues[{i}]: {{name, clusterQueue, namespace (of namespaces)}}")
    for i, w in enumerate(s.get("workloads") or []):
        if w.get("namespace", NS) not in known_ns:
            errs.append(f"workloads[{i}].namespace: {NS} or one of namespaces")
    for field in ("borrowingLimit", "lendingLimit"):
        if s.get(field) is not None and not isinstance(s[field], dict):
            errs.append(f"{field}: resource -> quantity")
    if s.get("preemption") is not None and (not isinstance(s["preemption"], dict) or set(s["preemption"]) - {
            "withinClusterQueue", "reclaimWithinCohort", "borrowWithinCohort"}):
        errs.append("preemption: {withinClusterQueue, reclaimWithinCohort, borrowWithinCohort}")
    for i, w in enumerate(s.get("workloads") or []):
        if w.get("priority") is not None and not isinstance(w["priority"], int):
            errs.append(f"workloads[{i}].priority: an integer")
    if s.get("cohort") is not None and not (isinstance(s["cohort"], str) and DNS_LABEL.match(s["cohort"])):
        errs.append("cohort: a DNS label")
    for i, cq in enumerate(s.get("clusterQueues") or []):
        if not isinstance(cq, dict) or not isinstance(cq.get("name"), str) or cq.get("name") == QUEUE or \
                not isinstance(cq.get("quota") or {}, dict) or set(cq) - {"name", "cohort", "quota", "borrowingLimit",
                                                                       "lendingLimit"}:
            errs.append(f"clusterQueues[{i}]: {{name (not {QUEUE}), cohort, quota, borrowingLimit, lendingLimit}}")
    q = s.get("queue")
    if q is not None and (not isinstance(q, dict) or set(q) - {"stopPolicy", "missingFlavor"}):
        errs.append("queue: {stopPolicy, missingFlavor}")
    md = s.get("modelDeployment")
    if md is not None and (not isinstance(md, dict) or not isinstance(md.get("name"), str) or
                           not isinstance(md.get("spec"), dict)):
        errs.append("modelDeployment: {name, spec}")
    for i, w in enumerate(s.get("workloads") or []):
        if w.get("owner") and md is None:
            errs.append(f"workloads[{i}].owner: the scenario has no modelDeployment")
    if s.get("admissionCheck") is not None and not (isinstance(s["admissionCheck"], str) and
                                                   DNS_LABEL.match(s["admissionCheck"])):
        errs.append("admissionCheck: a DNS label")
    errs += _check_groups(s, names)
    ch = s.get("change")
    if ch is not None:
        clevels = (ch.get("topologySource") or {}).get("levels") if isinstance(ch, dict) else None
        if not _levels_ok(clevels) or HOSTNAME in clevels:
            errs.append("change.topologySource.levels: 1 to 16 label keys, kubernetes.io/hostname appended")
        cnodes = ch.get("nodes") if isinstance(ch, dict) else None
        if not isinstance(cnodes, dict) or set(cnodes) - names:
            errs.append("change.nodes: {Node of nodes: labels}")
        else:
            for n, labels in cnodes.items():
                for key in labels or {}:
                    if key not in (clevels or []):
                        errs.append(f"change.nodes[{n}][{key}]: not a level of change.topologySource")
    return errs


def _check_groups(s, nodes):
    """`resourceGroups`: each {coveredResources, flavors}, a resource in one group only, a
    flavor in one group only; a flavor is {profileOf: NODE} (that Node's profile flavor) or
    {name, nodeLabels, topologyOf: NODE or topology: [levels], quota, nodeTaints, tolerations}."""
    groups = s.get("resourceGroups")
    if groups is None:
        return []
    if not isinstance(groups, list) or not groups:
        return ["resourceGroups: a list of {coveredResources, flavors}"]
    errs = []
    if s.get("coveredResourcesOnly") is not None or s.get("change") is not None:
        errs.append("resourceGroups: not with coveredResourcesOnly or change")
    seen_res, seen_flavors = set(), set()
    for i, g in enumerate(groups):
        res = g.get("coveredResources") if isinstance(g, dict) else None
        if not isinstance(res, list) or not res or not all(isinstance(r, str) for r in res):
            errs.append(f"resourceGroups[{i}].coveredResources: at least one resource name")
            continue
        for r in res:
            if r in seen_res:
                errs.append(f"resourceGroups[{i}].coveredResources: {r} is in an earlier group")
            seen_res.add(r)
        for j, f in enumerate(g.get("flavors") or []):
            where = f"resourceGroups[{i}].flavors[{j}]"
            if not isinstance(f, dict):
                errs.append(f"{where}: {{profileOf}} or {{name, ...}}")
                continue
            if f.get("profileOf") is not None:
                key = ("profile", f["profileOf"])
                if f["profileOf"] not in nodes or set(f) - {"profileOf", "quota"}:
                    errs.append(f"{where}: profileOf names a Node (and only quota beside it)")
            else:
                key = ("name", f.get("name"))
                if not isinstance(f.get("name"), str) or not DNS_LABEL.match(f["name"]) or \
                        f["name"].startswith("gpustack-") or set(f) - {
                            "name", "nodeLabels", "topologyOf", "topology", "quota", "nodeTaints", "tolerations"}:
                    errs.append(f"{where}: {{name (a DNS label, not gpustack-*), nodeLabels, topologyOf or "
                                "topology, quota, nodeTaints, tolerations}")
                if f.get("topologyOf") is not None and f["topologyOf"] not in nodes:
                    errs.append(f"{where}.topologyOf: a Node of nodes")
                if f.get("topology") is not None and (f.get("topologyOf") is not None or not _levels_ok(f["topology"])):
                    errs.append(f"{where}.topology: 1 to 16 label keys, not with topologyOf")
            if key in seen_flavors:
                errs.append(f"{where}: a flavor is in one group only")
            seen_flavors.add(key)
            if f.get("quota") is not None and not isinstance(f["quota"], dict):
                errs.append(f"{where}.quota: resource -> quantity")
    return errs


def owned(s):
    """The lab's label for the objects of scenario S."""
    return {OWNED: s["name"]}


def source_name(s):
    return s["topologySource"].get("name", "lab")


def levels(s):
    return s["topologySource"]["levels"]


def revision(s):
    """The snapshot revision of S's inventory: its name and a digest of its levels and labels."""
    inv = {"levels": levels(s), "nodes": {n["name"]: n.get("labels") or {} for n in s["nodes"]}}
    return f"{s['name']}-{hashlib.sha256(json.dumps(inv, sort_keys=True).encode()).hexdigest()[:12]}"


def changed(s):
    """S after its `change`: the same Nodes under the new levels and labels (a Node the
    change does not list keeps its labels)."""
    ch = s.get("change")
    if not ch:
        raise Invalid(f"scenario {s['name']}: no change section")
    return dict(s, topologySource=dict(s["topologySource"], levels=ch["topologySource"]["levels"]),
                nodes=[dict(n, labels=ch["nodes"].get(n["name"], n.get("labels") or {})) for n in s["nodes"]])


def covered(s):
    """The ClusterQueue's covered resources (one resource group; `resourceGroups` sets
    several): coveredResourcesOnly, else cpu, memory, every
    resource a PodSet requests (its containers' requests or limits, its Pod-level requests)
    and coveredResources."""
    if s.get("coveredResourcesOnly"):
        return list(s["coveredResourcesOnly"])
    res = ["cpu", "memory"]
    for w in s["workloads"]:
        for p in w["podSets"]:
            for r in [*(p.get("requests") or {}), *(p.get("limits") or {}), *(p.get("podRequests") or {})]:
                if r not in res:
                    res.append(r)
    for r in s.get("coveredResources") or []:
        if r not in res:
            res.append(r)
    return res

#!/usr/bin/env python3
"""Object handling of the TAS lab (scripts/tas-lab.sh): scenario files in, Kubernetes
objects out (through kubectl), Kueue's decisions and `topogate diagnose pending`
verdicts back. The scenario format is documented in docs/operations.md ("The TAS lab").

Subcommands (the lab's environment comes from tas-lab.sh: KUBECTL, KUBECONFIG,
TOPOGATE_BINARY, TAS_LAB_DIR):
  check SCENARIO                 validate a scenario file, print its name
  inventory SCENARIO OUTDIR      write OUTDIR/topologysource.yaml, snapshot.yaml, levels
  nodes SCENARIO                 create the Nodes (status: capacity, allocatable, Ready)
                                 and the bound Pods of their existing usage
  source SCENARIO REVISION       the TopologySource object (before the labeler: it owns the
                                 NodeFeatures); prints its name
  chain SCENARIO LABELS_JSON     the TopologySource object, one Topology and one
                                 ResourceFlavor per profile the labeler applied, the
                                 ClusterQueue and LocalQueue; waits until the queue is Active
  workloads SCENARIO             create the Workloads, wait for Kueue to decide, run
                                 diagnose, print one JSON line per Workload
  change-inventory SCENARIO OUTDIR   write the scenario's `change` (new levels and labels)
                                 as OUTDIR/topologysource.yaml, snapshot.yaml, levels
  node-profiles                  {Node: topology.gpustack.ai/profile} of the lab's Nodes
  migrate SCENARIO LABELS_JSON IMPACT_JSON BEFORE_JSON
                                 the live hierarchy change after the labeler applied the new
                                 revision: compare the Nodes relabelled with topogate's
                                 impact, then do what GPUStack does (replacement flavors,
                                 HoldAndDrain, switch, restore), print what Kueue evicted and
                                 readmitted
  unload                         delete every object the lab created (by label)
  status                         one line per kind: what the lab holds
"""
import hashlib
import http.client
import json
import os
import re
import ssl
import subprocess
import sys
import time
import urllib.parse

import yaml

OWNED = "tas-lab.topogate.invalid/scenario"
NS = "default"
QUEUE = "gpustack"
PROFILE = "topology.gpustack.ai/profile"
HOSTNAME = "kubernetes.io/hostname"
KUBECTL = os.environ.get("KUBECTL", "kubectl")
ROLE = "worker.gpustack.ai/role"
KINDS = ["workloads.kueue.x-k8s.io", "localqueues.kueue.x-k8s.io", "clusterqueues.kueue.x-k8s.io",
         "resourceflavors.kueue.x-k8s.io", "topologies.kueue.x-k8s.io", "admissionchecks.kueue.x-k8s.io",
         "modeldeployments.worker.gpustack.ai", "topologysources.worker.gpustack.ai", "limitranges",
         "runtimeclasses.node.k8s.io", "pods", "nodes"]


def die(msg, code=1):
    print(f"tas-lab: {msg}", file=sys.stderr)
    sys.exit(code)


def k(*args, input=None, check=True):
    r = subprocess.run([KUBECTL, *args], input=input, text=True, capture_output=True)
    if check and r.returncode:
        die(f"kubectl {' '.join(args[:3])}: {r.stderr.strip()}")
    return r


def kjson(*args):
    return json.loads(k(*args, "-o", "json").stdout)


# Reads that are polled go to the API directly: a kubectl process costs a few hundred
# milliseconds of CPU, and the differential polls several labs at once.
RESOURCES = {  # kind (as KINDS names it) -> (API prefix, plural, namespaced)
    "workloads.kueue.x-k8s.io": ("/apis/kueue.x-k8s.io/v1beta2", "workloads", True),
    "localqueues.kueue.x-k8s.io": ("/apis/kueue.x-k8s.io/v1beta2", "localqueues", True),
    "clusterqueues.kueue.x-k8s.io": ("/apis/kueue.x-k8s.io/v1beta2", "clusterqueues", False),
    "resourceflavors.kueue.x-k8s.io": ("/apis/kueue.x-k8s.io/v1beta2", "resourceflavors", False),
    "topologies.kueue.x-k8s.io": ("/apis/kueue.x-k8s.io/v1beta2", "topologies", False),
    "admissionchecks.kueue.x-k8s.io": ("/apis/kueue.x-k8s.io/v1beta2", "admissionchecks", False),
    "modeldeployments.worker.gpustack.ai": ("/apis/worker.gpustack.ai/v1", "modeldeployments", True),
    "topologysources.worker.gpustack.ai": ("/apis/worker.gpustack.ai/v1", "topologysources", False),
    "limitranges": ("/api/v1", "limitranges", True),
    "runtimeclasses.node.k8s.io": ("/apis/node.k8s.io/v1", "runtimeclasses", False),
    "pods": ("/api/v1", "pods", True),
    "nodes": ("/api/v1", "nodes", False),
    "nodefeatures.nfd.k8s-sigs.io": ("/apis/nfd.k8s-sigs.io/v1alpha1", "nodefeatures", True),
}
# The consumer's NodeFeatures (the labeler writes them in the worker namespace): found by
# their source-UID label, as they carry no lab label.
NF_SELECTOR = "topology.gpustack.ai/source-uid"
NF_NS = "gpustack-system"
_api = {}


def _connection(fresh=False):
    """The lab API's HTTPS connection, kept open between calls: a case makes hundreds of
    calls (polls included), and a TLS handshake for each costs the apiserver more CPU than
    the answers do."""
    url, ctx, _ = _api["ctx"]
    if fresh or _api.get("conn") is None:
        if _api.get("conn") is not None:
            _api["conn"].close()
        u = urllib.parse.urlsplit(url)
        _api["conn"] = http.client.HTTPSConnection(u.hostname, u.port or 443, context=ctx, timeout=30)
    return _api["conn"]


def api_call(method, path, body=None, content_type="application/json", missing_ok=False):
    """One request to the lab's API with the admin token: the decoded answer, None on 404;
    kubectl (get --raw) when the control plane's environment is not set (GET only)."""
    if "ctx" not in _api:
        url, ca, tok = (os.environ.get(v) for v in ("TOPOGATE_CP_URL", "TOPOGATE_CP_CA", "TOPOGATE_CP_ADMIN_TOKEN_FILE"))
        _api["ctx"] = (url, ssl.create_default_context(cafile=ca), open(tok).read().strip()) if url and ca and tok else None
    if _api["ctx"] is None:
        if method != "GET":
            die("the control plane's environment (TOPOGATE_CP_URL, ...) is not set")
        r = k("get", "--raw", path, check=False)
        return json.loads(r.stdout) if r.returncode == 0 else None
    _, _, tok = _api["ctx"]
    headers = {"Authorization": f"Bearer {tok}", "Accept": "application/json"}
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        headers["Content-Type"] = content_type
    deadline = time.time() + 60
    stale_retry = True
    while True:
        try:
            conn = _connection()
            conn.request(method, path, body=data, headers=headers)
            r = conn.getresponse()
            payload = r.read()
        except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError) as e:
            # The server closed the kept connection between two calls: once at once on a new
            # one, then as for any connection failure.
            _connection(fresh=True)
            if stale_retry:
                stale_retry = False
                continue
            if time.time() < deadline:
                time.sleep(1)
                continue
            die(f"{method} {path}: {e}")
        except (OSError, http.client.HTTPException) as e:
            _connection(fresh=True)
            if time.time() < deadline:
                time.sleep(1)
                continue
            die(f"{method} {path}: {e}")
        if 200 <= r.status < 300:
            return json.loads(payload) if payload else {}
        if r.status == 404 and (missing_ok or method in ("GET", "DELETE")):
            return None
        # 429 (a CRD's storage still initialising, priority and fairness) and 5xx (a webhook
        # starting) are the API saying "again shortly", as client-go retries them.
        if (r.status == 429 or r.status >= 500) and time.time() < deadline:
            time.sleep(float(r.getheader("Retry-After") or 1))
            continue
        die(f"{method} {path}: HTTP {r.status}: {payload[:300].decode(errors='replace')}")


def api_get(path):
    return api_call("GET", path)


def obj_path(kind, name, ns=None):
    prefix, plural, namespaced = RESOURCES[kind]
    return f"{prefix}/namespaces/{ns}/{plural}/{name}" if namespaced else f"{prefix}/{plural}/{name}"


def api_obj(kind, name, ns=None):
    return api_get(obj_path(kind, name, ns))


def collection_path(kind, ns=NS):
    prefix, plural, namespaced = RESOURCES[kind]
    return f"{prefix}/namespaces/{ns}/{plural}" if namespaced else f"{prefix}/{plural}"


def create(kind, obj):
    api_call("POST", collection_path(kind, obj["metadata"].get("namespace", NS)), obj)


def delete_owned(kinds, selector=OWNED, grace0=False):
    """kubectl delete KINDS -l SELECTOR --wait=false, in NS and every namespace holding such
    an object; grace0: --grace-period=0 --force."""
    opts = {"apiVersion": "v1", "kind": "DeleteOptions", "propagationPolicy": "Background"}
    if grace0:
        opts["gracePeriodSeconds"] = 0
    for kind in kinds:
        namespaces = {NS}
        prefix, plural, namespaced = RESOURCES[kind]
        if namespaced:  # the scenario's namespaces too
            lst = api_get(f"{prefix}/{plural}?labelSelector={urllib.parse.quote(selector)}") or {}
            namespaces |= {i["metadata"]["namespace"] for i in lst.get("items") or []}
        for ns in sorted(namespaces):
            api_call("DELETE", f"{collection_path(kind, ns)}?labelSelector={urllib.parse.quote(selector)}", opts)


def owned_names(kinds, selector=OWNED):
    """kubectl's `get KINDS -A -l SELECTOR -o name` through the API: ["kind.group/name", ...]."""
    out = []
    for kind in kinds:
        prefix, plural, _ = RESOURCES[kind]
        lst = api_get(f"{prefix}/{plural}?labelSelector={urllib.parse.quote(selector)}") or {}
        plural_name, _, group = kind.partition(".")
        single = plural_name[:-3] + "y" if plural_name.endswith("ies") else \
            plural_name[:-2] if plural_name.endswith("sses") else plural_name[:-1]
        single = f"{single}.{group}" if group else single
        out += [f"{single}/{i['metadata']['name']}" for i in lst.get("items") or []]
    return out


KIND_OF = {"Topology": "topologies.kueue.x-k8s.io", "ResourceFlavor": "resourceflavors.kueue.x-k8s.io",
           "ClusterQueue": "clusterqueues.kueue.x-k8s.io", "LocalQueue": "localqueues.kueue.x-k8s.io",
           "AdmissionCheck": "admissionchecks.kueue.x-k8s.io", "Workload": "workloads.kueue.x-k8s.io",
           "TopologySource": "topologysources.worker.gpustack.ai",
           "ModelDeployment": "modeldeployments.worker.gpustack.ai"}


def apply_obj(obj):
    """Server-side apply (field manager tas-lab, conflicts forced), as `kubectl apply
    --server-side --force-conflicts` does."""
    meta = obj["metadata"]
    path = obj_path(KIND_OF[obj["kind"]], meta["name"], meta.get("namespace"))
    api_call("PATCH", path + "?fieldManager=tas-lab&force=true", obj, "application/apply-patch+yaml")


def status_patch(kind, name, status, ns=None):
    api_call("PATCH", obj_path(kind, name, ns) + "/status", {"status": status}, "application/merge-patch+json")


# ---------------------------------------------------------------- scenario

LEVEL_KEY = re.compile(r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")


def load(path):
    try:
        s = json.load(open(path))
    except (OSError, ValueError) as e:
        die(f"{path}: {e}", 2)
    errs = []
    if not isinstance(s.get("name"), str) or not re.match(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", s.get("name", "")):
        errs.append("name: a DNS label is required")
    ts = s.get("topologySource") or {}
    levels = ts.get("levels")
    if not isinstance(levels, list) or not 1 <= len(levels) <= 16 or not all(isinstance(l, str) and LEVEL_KEY.match(l) for l in levels):
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
                not re.match(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", n["name"]):
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
    if s.get("cohort") is not None and not (isinstance(s["cohort"], str) and
                                           re.match(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", s["cohort"])):
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
    if md is not None and (not isinstance(md, dict) or not isinstance(md.get("name"), str) or not isinstance(md.get("spec"), dict)):
        errs.append("modelDeployment: {name, spec}")
    for i, w in enumerate(s.get("workloads") or []):
        if w.get("owner") and md is None:
            errs.append(f"workloads[{i}].owner: the scenario has no modelDeployment")
    if s.get("admissionCheck") is not None and not (isinstance(s["admissionCheck"], str) and
                                                   re.match(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", s["admissionCheck"])):
        errs.append("admissionCheck: a DNS label")
    ch = s.get("change")
    if ch is not None:
        clevels = (ch.get("topologySource") or {}).get("levels") if isinstance(ch, dict) else None
        if not isinstance(clevels, list) or not 1 <= len(clevels) <= 16 or HOSTNAME in clevels or \
                not all(isinstance(l, str) and LEVEL_KEY.match(l) for l in clevels):
            errs.append("change.topologySource.levels: 1 to 16 label keys, kubernetes.io/hostname appended")
        cnodes = ch.get("nodes") if isinstance(ch, dict) else None
        if not isinstance(cnodes, dict) or set(cnodes) - names:
            errs.append("change.nodes: {Node of nodes: labels}")
        else:
            for n, labels in cnodes.items():
                for key in labels or {}:
                    if key not in (clevels or []):
                        errs.append(f"change.nodes[{n}][{key}]: not a level of change.topologySource")
    if errs:
        die(f"{path}: " + "; ".join(errs), 2)
    s.setdefault("workloads", [])
    return s


def revision(s):
    inv = {"levels": s["topologySource"]["levels"],
           "nodes": {n["name"]: n.get("labels") or {} for n in s["nodes"]}}
    return f"{s['name']}-{hashlib.sha256(json.dumps(inv, sort_keys=True).encode()).hexdigest()[:12]}"


def cmd_inventory(path, out):
    write_inventory(load(path), out)


def cmd_change_inventory(path, out):
    """The scenario's `change`: the same Nodes under the new levels and labels."""
    s = load(path)
    if not s.get("change"):
        die(f"{path}: no change section", 2)
    ch = s["change"]
    t = dict(s, topologySource=dict(s["topologySource"], levels=ch["topologySource"]["levels"]),
             nodes=[dict(n, labels=ch["nodes"].get(n["name"], n.get("labels") or {})) for n in s["nodes"]])
    write_inventory(t, out)


def write_inventory(s, out):
    ts = {
        "apiVersion": "worker.gpustack.ai/v1", "kind": "TopologySource",
        "metadata": {"name": s["topologySource"].get("name", "lab")},
        "spec": {"nodeSelector": {}, "levels": s["topologySource"]["levels"],
                 "configMap": {"configMapRef": {"namespace": "gpustack-system", "name": "topology-inventory"},
                               "key": "snapshot.yaml", "maxStaleness": "10m"}},
    }
    snap = {"apiVersion": "topology.gpustack.ai/v1alpha1", "revision": revision(s),
            "nodes": {n["name"]: dict(n.get("labels") or {}) for n in s["nodes"]}}
    os.makedirs(out, exist_ok=True)
    yaml.safe_dump(ts, open(os.path.join(out, "topologysource.yaml"), "w"), sort_keys=False)
    # Written aside and renamed: topogate watches the file and must see it whole.
    tmp = os.path.join(out, ".snapshot.yaml.tmp")
    yaml.safe_dump(snap, open(tmp, "w"), sort_keys=False)
    os.replace(tmp, os.path.join(out, "snapshot.yaml"))
    open(os.path.join(out, "levels"), "w").write(",".join(s["topologySource"]["levels"]) + "\n")
    print(snap["revision"])


# ---------------------------------------------------------------- Nodes

OVERCOMMITABLE = ("cpu", "memory", "ephemeral-storage")


def container_resources(amounts, limits=None):
    """requests as given; limits as given, and equal to requests for the resources the
    apiserver does not let a Pod overcommit (extended resources such as nvidia.com/gpu,
    hugepages-*): "Limit must be set for non overcommitable resources" otherwise."""
    req = {r: str(v) for r, v in (amounts or {}).items()}
    out = {"requests": req} if amounts is not None or not limits else {}
    lim = {r: str(v) for r, v in (limits or {}).items()}
    for r, v in req.items():
        if r not in OVERCOMMITABLE:
            lim.setdefault(r, v)
    if lim:
        out["limits"] = lim
    return out


def cmd_nodes(path):
    """Create the Nodes, set their status, lift the not-ready taint, create the usage Pods;
    batched (one kubectl call per step) so a 64-Node scenario loads in seconds."""
    s = load(path)
    owned = {OWNED: s["name"]}
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    nodes, statuses, pods = [], [], []
    for n in s["nodes"]:
        name = n["name"]
        # Read-only topology labels (topology.kubernetes.io/*) are the cloud's, on the Node
        # from its start; topogate checks the snapshot's copies against them (S6).
        cloud = {k: v for k, v in (n.get("labels") or {}).items() if k.startswith("topology.kubernetes.io/")}
        nodes.append({"apiVersion": "v1", "kind": "Node",
                      "metadata": {"name": name,
                                   "labels": {**(n.get("nodeLabels") or {}), HOSTNAME: name, **cloud, **owned},
                                   # as the controllers annotate a Node: nfd-master's JSON patch
                                   # adds its annotation under an existing map
                                   "annotations": {"node.alpha.kubernetes.io/ttl": "0"}},
                      "spec": {"unschedulable": bool(n.get("unschedulable", False)), "taints": n.get("taints", [])}})
        alloc = {r: str(v) for r, v in n["allocatable"].items()}
        if not n.get("noPodsAllocatable"):
            alloc.setdefault("pods", "110")
        cap = {r: str(v) for r, v in (n.get("capacity") or alloc).items()}
        ready = n.get("ready", True)
        # ready: true, false, or "missing" (the Node reports no Ready condition at all)
        conds = [] if ready == "missing" else [
            {"type": "Ready", "status": "True" if ready else "False",
             "reason": "KubeletReady" if ready else "KubeletNotReady",
             "message": "set by the TAS lab (no kubelet)",
             "lastHeartbeatTime": now, "lastTransitionTime": now}]
        statuses.append({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}, "status": {
            "capacity": cap, "allocatable": alloc, "conditions": conds}})
        for i, u in enumerate(n.get("usage") or []):
            pods.append({"apiVersion": "v1", "kind": "Pod",
                         "metadata": {"name": f"usage-{name}-{i}", "namespace": NS, "labels": owned},
                         "spec": {"nodeName": name, "restartPolicy": "Never",
                                  "tolerations": [{"operator": "Exists"}],
                                  "containers": [{"name": "usage", "image": "registry.k8s.io/pause:3.10",
                                                  "resources": container_resources(u)}]}})
    for node, st in zip(nodes, statuses):
        create("nodes", node)
        status_patch("nodes", node["metadata"]["name"], st["status"])
        # TaintNodesByCondition taints a new Node not-ready; no node lifecycle controller runs
        # here to lift it once the Node reports Ready: back to the scenario's own taints.
        api_call("PATCH", obj_path("nodes", node["metadata"]["name"]),
                 {"spec": {"taints": node["spec"]["taints"] or []}}, "application/merge-patch+json")
    for pod in pods:
        create("pods", pod)
    print(len(nodes))


# ---------------------------------------------------------------- chain

def covered(s):
    if s.get("coveredResourcesOnly"):
        return list(s["coveredResourcesOnly"])
    res = ["cpu", "memory"]
    for w in s["workloads"]:
        for p in w["podSets"]:
            for r in (p.get("requests") or {}):
                if r not in res:
                    res.append(r)
    for r in s.get("coveredResources") or []:
        if r not in res:
            res.append(r)
    return res


def parse_quantity(v):
    m = re.match(r"^([0-9.]+(?:[eE][-+]?[0-9]+)?)([a-zA-Z]*)$", str(v))
    if not m:
        die(f"quantity {v!r} is not understood")
    num, suf = float(m.group(1)), m.group(2)
    mult = {"": 1, "m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15,
            "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50}
    if suf not in mult:
        die(f"quantity {v!r}: unknown suffix")
    return num * mult[suf]


def fmt_quantity(r, x):
    return f"{int(round(x * 1000))}m" if r == "cpu" else str(int(round(x)))


def profiles_of(s, lab):
    """The profiles the labeler applied, in the order of the scenario's Nodes, and their Nodes."""
    profiles, members = [], {}
    for n in s["nodes"]:
        p = lab["nodes"][n["name"]]["profile"]
        if p not in members:
            profiles.append(p)
            members[p] = []
        members[p].append(n)
    return profiles, members


def queue_flavors(flavors, quota, borrowing, lending):
    """The flavor entries of another ClusterQueue over the same flavors: nominalQuota from
    `quota` (0 for a resource it leaves out), and the limits it sets."""
    out = []
    for f in flavors:
        rq = []
        for r in f["resources"]:
            e = {"name": r["name"], "nominalQuota": str((quota or {}).get(r["name"], 0))}
            if r["name"] in (borrowing or {}):
                e["borrowingLimit"] = str(borrowing[r["name"]])
            if r["name"] in (lending or {}):
                e["lendingLimit"] = str(lending[r["name"]])
            rq.append(e)
        out.append({"name": f["name"], "resources": rq})
    return out


def make_flavors(s, lab):
    """One Topology and one ResourceFlavor (pinned to the profile) per profile; the
    ClusterQueue's flavor entries for them."""
    owned = {OWNED: s["name"]}
    profiles, members = profiles_of(s, lab)
    res = covered(s)
    quota = s.get("quota") or {}
    flavors = []
    for p in profiles:
        name = f"gpustack-{p}"
        apply_obj({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Topology",
                   "metadata": {"name": name, "labels": owned},
                   "spec": {"levels": [{"nodeLabel": l} for l in lab["profiles"][p]]}})
        rf_spec = {"nodeLabels": {PROFILE: p}, "topologyName": name}
        fl = s.get("flavor") or {}  # the scenario's nodeTaints and tolerations, on every flavor
        if fl.get("nodeTaints"):
            rf_spec["nodeTaints"] = fl["nodeTaints"]
        if fl.get("tolerations"):
            rf_spec["tolerations"] = fl["tolerations"]
        apply_obj({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
                   "metadata": {"name": name, "labels": owned}, "spec": rf_spec})
        rq = []
        for r in res:
            if r in quota:
                q = str(quota[r])
            else:
                q = fmt_quantity(r, sum(parse_quantity(n["allocatable"].get(r, 0)) for n in members[p]))
            e = {"name": r, "nominalQuota": q}
            for field in ("borrowingLimit", "lendingLimit"):  # the scenario's limits (cohort)
                if r in (s.get(field) or {}):
                    e[field] = str(s[field][r])
            rq.append(e)
        flavors.append({"name": name, "resources": rq})
    return profiles, members, res, flavors


def apply_topology_source(s, levels, revision):
    owned = {OWNED: s["name"]}
    ts_name = s["topologySource"].get("name", "lab")
    apply_obj({"apiVersion": "worker.gpustack.ai/v1", "kind": "TopologySource",
               "metadata": {"name": ts_name, "labels": owned},
               "spec": {"nodeSelector": {}, "levels": levels,
                        "configMap": {"configMapRef": {"namespace": "gpustack-system", "name": "topology-inventory"},
                                      "key": "snapshot.yaml", "maxStaleness": "10m"}}})
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    status_patch("topologysources.worker.gpustack.ai", ts_name, {"conditions": [
        {"type": "Ready", "status": "True", "reason": "Reconciled", "lastTransitionTime": now,
         "message": f"revision {revision} applied by the TAS lab's labeler"}]})


def wait_queue_state(active, timeout=60, name=QUEUE):
    """Until Kueue reports the ClusterQueue Active (or, active False, not Active)."""
    deadline = time.time() + timeout
    while True:
        cq = api_obj("clusterqueues.kueue.x-k8s.io", name) or {}
        conds = {c["type"]: c for c in (cq.get("status") or {}).get("conditions", [])}
        if (conds.get("Active", {}).get("status") == "True") == active and "Active" in conds:
            return cq
        if time.time() > deadline:
            die(f"ClusterQueue {name} Active is not {active} after {timeout} s: {conds.get('Active')}")
        time.sleep(0.3)


def wait_queue_active(timeout=60):
    return wait_queue_state(True, timeout)


def cmd_chain(path, labels_path):
    s = load(path)
    lab = json.load(open(labels_path))
    owned = {OWNED: s["name"]}
    apply_topology_source(s, s["topologySource"]["levels"], lab["revision"])
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    profiles, members, res, flavors = make_flavors(s, lab)
    cq_spec = {"namespaceSelector": s.get("namespaceSelector", {}),
               "resourceGroups": [{"coveredResources": res, "flavors": flavors}]}
    if s.get("cohort"):
        cq_spec["cohortName"] = s["cohort"]
    if s.get("preemption"):
        cq_spec["preemption"] = s["preemption"]
    # Other ClusterQueues over the same flavors (e.g. lenders of the cohort).
    for other in s.get("clusterQueues") or []:
        spec = {"namespaceSelector": {}, "resourceGroups": [{"coveredResources": res, "flavors": queue_flavors(
            flavors, other.get("quota"), other.get("borrowingLimit"), other.get("lendingLimit"))}]}
        if other.get("cohort"):
            spec["cohortName"] = other["cohort"]
        apply_obj({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
                   "metadata": {"name": other["name"], "labels": owned}, "spec": spec})
    if s.get("admissionCheck"):
        # GPUStack's joint check of a multi-role deployment: the lab marks the check Active
        # (standing in for its controller) and never marks a Workload's check Ready, so a
        # Workload that gets quota stays reserved and not admitted, held for its set.
        ac = s["admissionCheck"]
        apply_obj({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "AdmissionCheck",
                   "metadata": {"name": ac, "labels": owned},
                   "spec": {"controllerName": "tas-lab.topogate.invalid/joint-check"}})
        status_patch("admissionchecks.kueue.x-k8s.io", ac, {"conditions": [
            {"type": "Active", "status": "True", "reason": "Active", "lastTransitionTime": now,
             "message": "the TAS lab stands in for the joint check's controller"}]})
        cq_spec["admissionChecksStrategy"] = {"admissionChecks": [{"name": ac}]}
    apply_obj({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
               "metadata": {"name": QUEUE, "labels": owned}, "spec": cq_spec})
    # Namespaces stay (no namespace controller runs to finish a deletion); their labels are
    # the scenario's. Each holds a LocalQueue gpustack.
    for n in s.get("namespaces") or []:
        if api_get(f"/api/v1/namespaces/{n['name']}") is None:
            api_call("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                    "metadata": {"name": n["name"]}})
        api_call("PATCH", f"/api/v1/namespaces/{n['name']}", {"metadata": {"labels": n.get("labels") or {}}},
                 "application/merge-patch+json")
    for ns in [NS] + [n["name"] for n in s.get("namespaces") or []]:
        apply_obj({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
                   "metadata": {"name": QUEUE, "namespace": ns, "labels": owned},
                   "spec": {"clusterQueue": QUEUE}})
    for lq in s.get("localQueues") or []:
        spec = {"clusterQueue": lq["clusterQueue"]}
        if lq.get("stopPolicy"):
            spec["stopPolicy"] = lq["stopPolicy"]
        apply_obj({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
                   "metadata": {"name": lq["name"], "namespace": lq.get("namespace", NS), "labels": owned},
                   "spec": spec})
    if s.get("modelDeployment"):
        md = s["modelDeployment"]
        apply_obj({"apiVersion": "worker.gpustack.ai/v1", "kind": "ModelDeployment",
                   "metadata": {"name": md["name"], "namespace": NS, "labels": owned}, "spec": md["spec"]})
    cq = wait_queue_active()
    for other in s.get("clusterQueues") or []:
        wait_queue_state(True, name=other["name"])
    # GPUStack's condition on its managed queue (the lab stands in for the operator here).
    conds = cq["status"].get("conditions", [])
    if not any(c["type"] == "TopologyReady" for c in conds):
        conds.append({"type": "TopologyReady", "status": "True", "reason": "Ready",
                      "message": "Topology-aware flavors are ready", "lastTransitionTime": now,
                      "observedGeneration": cq["metadata"].get("generation", 1)})
        status_patch("clusterqueues.kueue.x-k8s.io", QUEUE, {"conditions": conds})
    q = s.get("queue") or {}
    if q.get("stopPolicy"):
        patch_queue({"stopPolicy": q["stopPolicy"]})
    if q.get("missingFlavor"):
        # A flavor entry naming a ResourceFlavor that does not exist, last in the group.
        extra = {"name": q["missingFlavor"], "resources": [dict(r) for r in flavors[0]["resources"]]}
        api_call("PATCH", obj_path("clusterqueues.kueue.x-k8s.io", QUEUE),
                 [{"op": "add", "path": "/spec/resourceGroups/0/flavors/-", "value": extra}],
                 "application/json-patch+json")
    if q:
        wait_queue_state(False)
    print(json.dumps({"profiles": {p: len(members[p]) for p in profiles}, "flavors": [f["name"] for f in flavors]}))


# ---------------------------------------------------------------- workloads

def workload_obj(s, w):
    pod_sets = []
    for p in w["podSets"]:
        tr = {}
        if p.get("required"):
            tr["required"] = p["required"]
        elif p.get("preferred"):
            tr["preferred"] = p["preferred"]
        elif not p.get("sliceLevel"):
            tr["unconstrained"] = True
        if p.get("sliceLevel"):
            tr["podSetSliceRequiredTopology"] = p["sliceLevel"]
        if p.get("sliceSize") is not None:
            tr["podSetSliceSize"] = p["sliceSize"]
        if p.get("podSetGroupName"):
            tr["podSetGroupName"] = p["podSetGroupName"]
        spec = {"restartPolicy": "Never", "containers": [{
            "name": "main", "image": "registry.k8s.io/pause:3.10",
            "resources": container_resources(p.get("requests"), p.get("limits"))}]}
        if p.get("podRequests"):
            spec["resources"] = {"requests": {r: str(v) for r, v in p["podRequests"].items()}}
        if p.get("runtimeClassName"):
            spec["runtimeClassName"] = p["runtimeClassName"]
        if p.get("tolerations"):
            spec["tolerations"] = p["tolerations"]
        if p.get("nodeSelector"):
            spec["nodeSelector"] = p["nodeSelector"]
        if p.get("nodeAffinity") is not None:
            spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": p["nodeAffinity"]}}}
        entry = {"name": p.get("name", "main"), "count": p["count"], "topologyRequest": tr,
                 "template": {"spec": spec}}
        if p.get("minCount") is not None:
            entry["minCount"] = p["minCount"]
        pod_sets.append(entry)
    meta = {"name": w["name"], "namespace": w.get("namespace", NS), "labels": {OWNED: s["name"]}}
    if w.get("role"):
        meta["labels"][ROLE] = w["role"]
    if w.get("owner"):
        md = kjson("get", "modeldeployments.worker.gpustack.ai", "-n", NS, s["modelDeployment"]["name"])
        meta["ownerReferences"] = [{"apiVersion": "worker.gpustack.ai/v1", "kind": "ModelDeployment",
                                    "name": md["metadata"]["name"], "uid": md["metadata"]["uid"], "controller": True}]
    spec = {"queueName": w.get("queueName", QUEUE), "podSets": pod_sets}
    if w.get("priority") is not None:
        spec["priority"] = w["priority"]
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload", "metadata": meta, "spec": spec}


def decode_assignment(ta):
    """v1beta2 TopologyAssignment (levels + slices) -> [{"values": [...], "count": n}]."""
    if not ta:
        return None
    out = []
    for sl in ta.get("slices") or []:
        n = sl.get("domainCount", 0)
        cols = []
        for lv in sl.get("valuesPerLevel") or []:
            if lv.get("universal") is not None:
                cols.append([lv["universal"]] * n)
            else:
                ind = lv.get("individual") or {}
                pre, suf = ind.get("prefix") or "", ind.get("suffix") or ""
                cols.append([pre + r + suf for r in ind.get("roots") or []])
        pc = sl.get("podCounts") or {}
        counts = [pc["universal"]] * n if pc.get("universal") is not None else list(pc.get("individual") or [])
        for i in range(n):
            out.append({"values": [c[i] for c in cols], "count": counts[i] if i < len(counts) else None})
    if not out and ta.get("domains"):  # v1beta1 layout
        out = [{"values": d["values"], "count": d["count"]} for d in ta["domains"]]
    return {"levels": ta.get("levels"), "domains": out}


def kueue_decision(wl):
    st = wl.get("status") or {}
    conds = {c["type"]: c for c in st.get("conditions") or []}
    qr = conds.get("QuotaReserved")
    d = {"decision": None, "quotaReserved": qr and qr["status"], "admitted": (conds.get("Admitted") or {}).get("status")}
    if qr is None:
        return d
    if qr["status"] == "True":
        d["decision"] = "admitted"
        psa = []
        for a in (st.get("admission") or {}).get("podSetAssignments") or []:
            psa.append({"podSet": a.get("name"), "flavors": a.get("flavors"), "count": a.get("count"),
                        "topologyAssignment": decode_assignment(a.get("topologyAssignment"))})
        d["clusterQueue"] = (st.get("admission") or {}).get("clusterQueue")
        d["assignments"] = psa
    else:
        d["decision"] = "pending"
        d["reason"] = qr.get("reason")
        d["message"] = qr.get("message")
    return d


def diagnose(name, ns=NS):
    """diagnose pending through the API (the online reader)."""
    tg = os.environ["TOPOGATE_BINARY"]
    env = dict(os.environ)
    env.pop("KUBERNETES_SERVICE_HOST", None)
    src = ["--kubeconfig", os.environ["KUBECONFIG"]]
    r = subprocess.run([tg, "diagnose", "pending", f"{ns}/{name}", *src,
                        "--output", "json"], text=True, capture_output=True, env=env)
    try:
        rep = json.loads(r.stdout)
    except ValueError:
        return {"verdict": "error", "exit": r.returncode, "stderr": r.stderr.strip()[:500]}, None
    ps = [{"name": p.get("name"), "level": p.get("level"), "required": p.get("required"), "count": p.get("count"),
           "clusterFits": p.get("clusterFits"), "largestDomainFits": p.get("largestDomainFits"),
           "spanningFits": p.get("spanningFits"), "fitsOneDomain": p.get("fitsOneDomain"),
           "fits": p.get("fits")} for p in rep.get("podSets") or []]
    # `fits`: Kueue's decision as diagnose follows it (quota and flavor, then placement PodSet
    # by PodSet); without a ClusterQueue, one domain of the level holds each PodSet, or
    # (preferred) the domains together.
    kq = rep.get("kueue") or {}
    if kq.get("modelled"):
        fits = bool(kq.get("admissible"))
    else:
        fits = bool(ps) and all(p["fits"] for p in ps)
    return {"verdict": "fits" if fits else "no-domain", "exit": r.returncode, "podSets": ps,
            "kueue": dict({k: kq.get(k) for k in ("admissible", "noDecision", "step", "podSet", "message",
                                                  "reason", "partial", "notes")},
                          counts=[p.get("count") for p in kq.get("podSets") or []]),
            "conclusion": rep.get("conclusion")}, rep


def chain():
    tg = os.environ["TOPOGATE_BINARY"]
    r = subprocess.run([tg, "diagnose", "chain", "--kubeconfig", os.environ["KUBECONFIG"], "--output", "json"],
                       text=True, capture_output=True)
    try:
        rep = json.loads(r.stdout)
        return {"exit": r.returncode, "findings": [f"{f.get('check')} {f.get('object')}" for f in rep.get("findings", [])]}
    except ValueError:
        return {"exit": r.returncode, "error": r.stderr.strip()[:300]}


def wait_decision(s, name, timeout, settle, ns=NS):
    """Poll the Workload until Kueue has decided (QuotaReserved present) and the decision
    has not changed for `settle` seconds."""
    deadline = time.time() + timeout
    last, since = None, time.time()
    while True:
        d = kueue_decision(api_obj("workloads.kueue.x-k8s.io", name, ns) or {})
        if d["decision"] != last:
            last, since = d["decision"], time.time()
        # Admission is final here (no preemption in these scenarios); a Pending decision must
        # hold for `settle` seconds.
        if last == "admitted" or (last is not None and time.time() - since >= settle):
            return d
        if time.time() > deadline:
            print(f"tas-lab: Kueue did not decide {ns}/{name} within {timeout:.0f} s", file=sys.stderr)
            return d
        time.sleep(0.2)


def check_expect(s, exp, kd, dg):
    ok = True
    if "kueue" in exp:
        ok &= kd["decision"] == exp["kueue"]
    if "diagnose" in exp:
        ok &= dg["verdict"] == exp["diagnose"]
    if "clusterFits" in exp:
        ok &= [p.get("clusterFits") for p in dg.get("podSets") or []][:1] == [exp["clusterFits"]]
    if "largestDomainFits" in exp:
        ok &= [p.get("largestDomainFits") for p in dg.get("podSets") or []][:1] == [exp["largestDomainFits"]]
    if exp.get("assignmentWithin"):
        lvl = exp["assignmentWithin"]
        for a in kd.get("assignments") or []:
            ta = a.get("topologyAssignment") or {}
            vals = set()
            for d in ta.get("domains") or []:
                host = d["values"][-1] if d["values"] else None
                n = next((n for n in s["nodes"] if n["name"] == host), None)
                vals.add((n.get("labels") or {}).get(lvl) if n else None)
            ok &= len(vals) == 1 and None not in vals
        ok &= bool(kd.get("assignments"))
    if "admittedCondition" in exp:
        ok &= kd.get("admitted") == exp["admittedCondition"]
    for text in exp.get("conclusionContains") or []:
        ok &= text in (dg.get("conclusion") or "")
    if "messageContains" in exp:
        ok &= exp["messageContains"] in (kd.get("message") or "")
    if "reason" in exp:
        ok &= kd.get("reason") == exp["reason"]
    if "admittedCount" in exp:  # the first PodSet's count: Kueue's admission and diagnose's
        ok &= [a.get("count") for a in kd.get("assignments") or []][:1] == [exp["admittedCount"]]
        ok &= ((dg.get("kueue") or {}).get("counts") or [None])[:1] == [exp["admittedCount"]]
    if exp.get("sameMessage"):
        kq = dg.get("kueue") or {}
        ok &= kd.get("message") == kq.get("message") and kd.get("reason") == kq.get("reason")
    return bool(ok)


def cmd_workloads(path, timeout=60.0, settle=1.5):
    """Submit the Workloads one at a time in file order; each is decided by Kueue and
    diagnosed before the next is created, so Kueue's order is the file's and diagnose
    sees the cluster Kueue decided on. Afterwards every decision is read again."""
    s = load(path)
    ch = None
    lines = []
    owned = {OWNED: s["name"]}
    for lr in s.get("limitRanges") or []:
        create("limitranges", {"apiVersion": "v1", "kind": "LimitRange",
                               "metadata": {"name": lr["name"], "namespace": NS, "labels": owned},
                               "spec": {"limits": lr["limits"]}})
    for rc in s.get("runtimeClasses") or []:
        obj = {"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass",
               "metadata": {"name": rc["name"], "labels": owned}, "handler": rc.get("handler", rc["name"])}
        if rc.get("overhead"):
            obj["overhead"] = {"podFixed": {r: str(v) for r, v in rc["overhead"].items()}}
        create("runtimeclasses.node.k8s.io", obj)
    if s.get("limitRanges") or s.get("runtimeClasses"):
        time.sleep(1.0)  # Kueue's caches see the LimitRanges and RuntimeClasses first
    for w in s["workloads"]:
        wns = w.get("namespace", NS)
        create("workloads.kueue.x-k8s.io", workload_obj(s, w))
        wait = timeout
        if any(p.get("podSetGroupName") for p in w["podSets"]):
            # A leader + workers group can meet a Kueue v0.17.0 bug that leaves the Workload
            # undecided; when diagnose foresees it, waiting the full timeout tells nothing more.
            pre, _ = diagnose(w["name"], wns)
            if (pre.get("kueue") or {}).get("noDecision"):
                wait = 3.0
        kd = wait_decision(s, w["name"], wait, settle, wns)
        dg, _ = diagnose(w["name"], wns)
        lines.append((w, kd, dg))
    ch = chain()
    rc = 0
    for w, kd, dg in lines:
        wns = w.get("namespace", NS)
        final = kueue_decision(api_obj("workloads.kueue.x-k8s.io", w["name"], wns) or {})
        agree = bool(kd["decision"]) and dg["verdict"] != "error" and \
            (kd["decision"] == "admitted") == (dg["verdict"] == "fits")
        if kd["decision"] is None and (dg.get("kueue") or {}).get("noDecision"):
            agree = True  # diagnose foresaw Kueue's bug: no decision at all
        line = {"scenario": s["name"], "workload": f"{wns}/{w['name']}", "kueue": kd, "diagnose": dg,
                "agree": agree, "chain": ch}
        if final["decision"] != kd["decision"]:
            line["decisionLater"] = final["decision"]
        exp = w.get("expect")
        if exp:
            line["expect"] = exp
            line["expectMet"] = check_expect(s, exp, kd, dg)
            if not line["expectMet"]:
                rc = 3
        print(json.dumps(line), flush=True)
    return rc


# ---------------------------------------------------------------- live hierarchy change

def cmd_node_profiles():
    nodes = kjson("get", "nodes", "-l", OWNED)
    print(json.dumps({n["metadata"]["name"]: (n["metadata"].get("labels") or {}).get(PROFILE, "")
                      for n in nodes["items"]}, sort_keys=True))


def queue_state():
    cq = api_obj("clusterqueues.kueue.x-k8s.io", QUEUE)
    return {"uid": cq["metadata"]["uid"], "stopPolicy": cq["spec"].get("stopPolicy", "None"),
            "reservingWorkloads": (cq.get("status") or {}).get("reservingWorkloads", 0),
            "admittedWorkloads": (cq.get("status") or {}).get("admittedWorkloads", 0),
            "flavors": [f["name"] for g in cq["spec"]["resourceGroups"] for f in g["flavors"]]}


def patch_queue(spec):
    api_call("PATCH", obj_path("clusterqueues.kueue.x-k8s.io", QUEUE), {"spec": spec}, "application/merge-patch+json")


def reserved_workloads(s):
    out = set()
    for w in s["workloads"]:
        if kueue_decision(api_obj("workloads.kueue.x-k8s.io", w["name"], NS) or {})["decision"] == "admitted":
            out.add(w["name"])
    return out


def release_if_evicted(name):
    """What a job integration does when Kueue evicts its Workload: stop the Pods and release
    the reservation (QuotaReserved=False, no admission). These Workloads have no job behind
    them, so the lab does it, as Kueue's jobframework would, and Kueue then requeues them."""
    wl = api_obj("workloads.kueue.x-k8s.io", name, NS) or {"metadata": {}}
    st = wl.get("status") or {}
    conds = {c["type"]: c for c in st.get("conditions") or []}
    ev, qr = conds.get("Evicted"), conds.get("QuotaReserved")
    if not (ev and ev["status"] == "True" and qr and qr["status"] == "True"):
        return False
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    gen = wl["metadata"].get("generation", 1)
    new = [c for c in st.get("conditions") or [] if c["type"] not in ("QuotaReserved", "Admitted")]
    new.append({"type": "QuotaReserved", "status": "False", "reason": "Pending", "message": ev.get("message", ""),
                "lastTransitionTime": now, "observedGeneration": gen})
    new.append({"type": "Admitted", "status": "False", "reason": "NoReservation",
                "message": "The workload has no reservation", "lastTransitionTime": now, "observedGeneration": gen})
    status_patch("workloads.kueue.x-k8s.io", name, {"conditions": new, "admission": None}, NS)
    return True


def cmd_migrate(path, labels_path, impact_path, before_path, timeout=60.0, settle=1.5):
    """The runbook's "Change a live hierarchy" after topogate served the new revision and the
    labeler applied it: (1) the Nodes whose profile label changed must be exactly the Nodes
    topogate's impact listed; (2) the lab does what GPUStack does with the managed queue:
    replacement Topology and flavors first, HoldAndDrain, wait for zero reservations, switch
    the flavor set on the same queue, restore the stop policy; (3) Kueue's evictions and
    readmissions and diagnose's verdicts are printed, one JSON line per Workload."""
    s = load(path)
    lab = json.load(open(labels_path))
    status = json.load(open(impact_path))
    before = json.load(open(before_path))
    after = {n["metadata"]["name"]: (n["metadata"].get("labels") or {}).get(PROFILE, "")
             for n in kjson("get", "nodes", "-l", OWNED)["items"]}
    la = status.get("lastAttempt") or {}
    impact = la.get("impact") or {}
    listed = {}
    for key in ("changedNodes", "addedNodes", "removedNodes"):
        for it in (impact.get(key) or {}).get("items") or []:
            listed[it["node"]] = [it.get("from") or "", it.get("to") or ""]
    relabelled = {n: [before.get(n, ""), after.get(n, "")] for n in sorted(set(before) | set(after))
                  if before.get(n, "") != after.get(n, "")}
    matches = relabelled == {n: v for n, v in listed.items()} and \
        not any((impact.get(k) or {}).get("truncated") for k in ("changedNodes", "addedNodes", "removedNodes"))
    line = {"scenario": s["name"], "change": "hierarchy", "revision": la.get("revision"),
            "impact": {"baseline": impact.get("baseline"), "profileChanges": impact.get("profileChanges"),
                       "flavorChanges": impact.get("flavorChanges"),
                       "appearedProfiles": [p["id"] for p in impact.get("appearedProfiles") or []],
                       "disappearedProfiles": [p["id"] for p in impact.get("disappearedProfiles") or []],
                       "nodes": listed},
            "relabelled": relabelled, "impactMatchesCluster": matches}

    # GPUStack's migration of the managed queue, step by step.
    q0 = queue_state()
    held0 = reserved_workloads(s)
    ch = s["change"]
    t = dict(s, topologySource=dict(s["topologySource"], levels=ch["topologySource"]["levels"]),
             nodes=[dict(n, labels=ch["nodes"].get(n["name"], n.get("labels") or {})) for n in s["nodes"]])
    apply_topology_source(t, t["topologySource"]["levels"], lab["revision"])
    _, _, _, flavors = make_flavors(t, lab)  # replacement flavors first
    patch_queue({"stopPolicy": "HoldAndDrain"})
    deadline = time.time() + timeout
    while queue_state()["reservingWorkloads"] and time.time() < deadline:
        for w in s["workloads"]:
            release_if_evicted(w["name"])
        time.sleep(0.3)
    drained = queue_state()
    evicted = sorted(held0 - reserved_workloads(s))
    api_call("PATCH", obj_path("clusterqueues.kueue.x-k8s.io", QUEUE),
             [{"op": "replace", "path": "/spec/resourceGroups/0/flavors", "value": flavors}], "application/json-patch+json")
    patch_queue({"stopPolicy": q0["stopPolicy"]})
    # Old flavors and their Topology go once nothing references them.
    new_names = {f["name"] for f in flavors}
    for old in q0["flavors"]:
        if old not in new_names:
            api_call("DELETE", obj_path("resourceflavors.kueue.x-k8s.io", old))
    end = time.time() + 30
    while any(api_obj("resourceflavors.kueue.x-k8s.io", o) for o in q0["flavors"] if o not in new_names) and \
            time.time() < end:
        time.sleep(0.3)
    for old in q0["flavors"]:
        if old not in new_names:
            api_call("DELETE", obj_path("topologies.kueue.x-k8s.io", old))
    q1 = queue_state()
    line["queue"] = {"before": q0, "drained": {"reservingWorkloads": drained["reservingWorkloads"]},
                     "after": q1, "sameQueue": q0["uid"] == q1["uid"]}
    line["evicted"] = evicted
    print(json.dumps(line), flush=True)
    rc = 0 if matches and q0["uid"] == q1["uid"] and not drained["reservingWorkloads"] else 3
    for w in s["workloads"]:
        kd = wait_decision(s, w["name"], timeout, settle)
        dg, _ = diagnose(w["name"])
        agree = bool(kd["decision"]) and dg["verdict"] != "error" and \
            (kd["decision"] == "admitted") == (dg["verdict"] == "fits")
        out = {"scenario": s["name"], "workload": f"{NS}/{w['name']}", "phase": "after-change",
               "heldBefore": w["name"] in held0, "evicted": w["name"] in evicted,
               "readmitted": w["name"] in evicted and kd["decision"] == "admitted",
               "kueue": kd, "diagnose": dg, "agree": agree}
        exp = (w.get("expectAfterChange") or {})
        if exp:
            out["expect"] = exp
            out["expectMet"] = check_expect(t, exp, kd, dg)
            if not out["expectMet"]:
                rc = 3
        print(json.dumps(out), flush=True)
    return rc


# ---------------------------------------------------------------- unload / status

def delete_node_features():
    path = f"{collection_path('nodefeatures.nfd.k8s-sigs.io', NF_NS)}?labelSelector={urllib.parse.quote(NF_SELECTOR)}"
    if (api_get(path) or {}).get("items"):
        api_call("DELETE", path, {"apiVersion": "v1", "kind": "DeleteOptions"})


def cmd_unload(timeout=90.0):
    sel = OWNED
    delete_node_features()
    left = owned_names(KINDS, sel)
    if not left:
        return
    # Workloads first (Kueue's finalizers on queues and flavors wait for them), then the
    # rest; bound Pods have no kubelet to confirm their deletion.
    delete_owned(KINDS[:1], sel)
    end = time.time() + 30
    while owned_names(KINDS[:1], sel) and time.time() < end:
        time.sleep(0.2)
    delete_owned(["pods"], sel, grace0=True)
    delete_owned([x for x in KINDS[1:] if x not in ("pods", "topologies.kueue.x-k8s.io")], sel)
    # Topologies last, once their ResourceFlavors are gone: Kueue v0.17.0 re-checks a
    # terminating Topology when a referencing flavor is deleted, but can still find the
    # flavor in its cache then and keeps the resource-in-use finalizer with no retry.
    end = time.time() + 30
    while owned_names(["resourceflavors.kueue.x-k8s.io"], sel) and time.time() < end:
        time.sleep(0.2)
    delete_owned(["topologies.kueue.x-k8s.io"], sel)
    deadline = time.time() + timeout
    kicked = 0.0
    while True:
        left = owned_names(KINDS, sel)
        if not left:
            break
        if time.time() > deadline:
            die(f"objects not deleted after {timeout:.0f} s: {' '.join(left[:10])}")
        stuck = [n for n in left if n.startswith("topology.kueue.x-k8s.io/")]
        if stuck and time.time() - kicked > 3:
            # A no-op change makes Kueue reconcile the Topology again (see above).
            kicked = time.time()
            for n in stuck:
                api_call("PATCH", obj_path("topologies.kueue.x-k8s.io", n.split("/", 1)[1]),
                         {"metadata": {"annotations": {"tas-lab.topogate.invalid/retry": str(int(kicked))}}},
                         "application/merge-patch+json", missing_ok=True)
        time.sleep(0.2)


def cmd_status():
    for kind in KINDS:
        names = k("get", kind, "-A", "-l", OWNED, "-o", "name", check=False).stdout.split()
        print(f"  {kind.split('.')[0]}: {len(names)}" + (f" ({', '.join(n.split('/')[-1] for n in names[:8])}{', ...' if len(names) > 8 else ''})" if names else ""))


def main(argv):
    if not argv:
        die(__doc__, 2)
    c, a = argv[0], argv[1:]
    if c == "check":
        print(load(a[0])["name"])
    elif c == "inventory":
        cmd_inventory(a[0], a[1])
    elif c == "nodes":
        cmd_nodes(a[0])
    elif c == "source":
        sc = load(a[0])
        apply_topology_source(sc, sc["topologySource"]["levels"], a[1])
        print(sc["topologySource"].get("name", "lab"))
    elif c == "chain":
        cmd_chain(a[0], a[1])
    elif c == "workloads":
        sys.exit(cmd_workloads(a[0]))
    elif c == "change-inventory":
        cmd_change_inventory(a[0], a[1])
    elif c == "node-profiles":
        cmd_node_profiles()
    elif c == "migrate":
        sys.exit(cmd_migrate(*a[:4]))
    elif c == "unload":
        cmd_unload()
    elif c == "status":
        cmd_status()
    else:
        die(f"unknown subcommand {c}", 2)


if __name__ == "__main__":
    main(sys.argv[1:])

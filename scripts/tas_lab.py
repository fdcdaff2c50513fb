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
  chain SCENARIO LABELS_JSON     the TopologySource object, one Topology and one
                                 ResourceFlavor per profile the labeler applied, the
                                 ClusterQueue and LocalQueue; waits until the queue is Active
  workloads SCENARIO             create the Workloads, wait for Kueue to decide, run
                                 diagnose, print one JSON line per Workload
  unload                         delete every object the lab created (by label)
  status                         one line per kind: what the lab holds
"""
import hashlib
import json
import os
import re
import subprocess
import sys
import time

import yaml

OWNED = "tas-lab.topogate.invalid/scenario"
NS = "default"
QUEUE = "gpustack"
PROFILE = "topology.gpustack.ai/profile"
HOSTNAME = "kubernetes.io/hostname"
KUBECTL = os.environ.get("KUBECTL", "kubectl")
KINDS = ["workloads.kueue.x-k8s.io", "localqueues.kueue.x-k8s.io", "clusterqueues.kueue.x-k8s.io",
         "resourceflavors.kueue.x-k8s.io", "topologies.kueue.x-k8s.io",
         "topologysources.worker.gpustack.ai", "pods", "nodes"]


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


def apply_obj(obj):
    k("apply", "--server-side", "--force-conflicts", "--field-manager", "tas-lab", "-f", "-",
      input=json.dumps(obj))


def status_patch(kind, name, status, ns=None):
    cmd = ["patch", kind, name, "--subresource=status", "--type=merge", "-p", json.dumps({"status": status})]
    if ns:
        cmd += ["-n", ns]
    k(*cmd)


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
            if p.get("required") and p.get("preferred"):
                errs.append(f"workloads[{i}].podSets[{j}]: required or preferred, not both")
    if errs:
        die(f"{path}: " + "; ".join(errs), 2)
    s.setdefault("workloads", [])
    return s


def revision(s):
    inv = {"levels": s["topologySource"]["levels"],
           "nodes": {n["name"]: n.get("labels") or {} for n in s["nodes"]}}
    return f"{s['name']}-{hashlib.sha256(json.dumps(inv, sort_keys=True).encode()).hexdigest()[:12]}"


def cmd_inventory(path, out):
    s = load(path)
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

def cmd_nodes(path):
    """Create the Nodes, set their status, lift the not-ready taint, create the usage Pods;
    batched (one kubectl call per step) so a 64-Node scenario loads in seconds."""
    s = load(path)
    owned = {OWNED: s["name"]}
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    nodes, statuses, pods = [], [], []
    for n in s["nodes"]:
        name = n["name"]
        nodes.append({"apiVersion": "v1", "kind": "Node",
                      "metadata": {"name": name, "labels": {HOSTNAME: name, **owned}},
                      "spec": {"unschedulable": bool(n.get("unschedulable", False)), "taints": n.get("taints", [])}})
        alloc = {r: str(v) for r, v in n["allocatable"].items()}
        alloc.setdefault("pods", "110")
        cap = {r: str(v) for r, v in (n.get("capacity") or alloc).items()}
        ready = n.get("ready", True)
        statuses.append({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}, "status": {
            "capacity": cap, "allocatable": alloc,
            "conditions": [{"type": "Ready", "status": "True" if ready else "False",
                            "reason": "KubeletReady" if ready else "KubeletNotReady",
                            "message": "set by the TAS lab (no kubelet)",
                            "lastHeartbeatTime": now, "lastTransitionTime": now}]}})
        for i, u in enumerate(n.get("usage") or []):
            pods.append({"apiVersion": "v1", "kind": "Pod",
                         "metadata": {"name": f"usage-{name}-{i}", "namespace": NS, "labels": owned},
                         "spec": {"nodeName": name, "restartPolicy": "Never",
                                  "tolerations": [{"operator": "Exists"}],
                                  "containers": [{"name": "usage", "image": "registry.k8s.io/pause:3.10",
                                                  "resources": {"requests": {r: str(v) for r, v in u.items()}}}]}})
    lst = lambda items: json.dumps({"apiVersion": "v1", "kind": "List", "items": items})
    k("create", "-f", "-", "-o", "name", input=lst(nodes))
    k("apply", "--server-side", "--force-conflicts", "--field-manager", "tas-lab", "--subresource=status",
      "-f", "-", input=lst(statuses))
    # TaintNodesByCondition taints a new Node not-ready; no node lifecycle controller runs
    # here to lift it once the Node reports Ready.
    k("taint", "nodes", "-l", f"{OWNED}={s['name']}", "node.kubernetes.io/not-ready:NoSchedule-", check=False)
    if pods:
        k("create", "-f", "-", "-o", "name", input=lst(pods))
    print(len(nodes))


# ---------------------------------------------------------------- chain

def covered(s):
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


def cmd_chain(path, labels_path):
    s = load(path)
    lab = json.load(open(labels_path))
    profiles = []  # in the order of the scenario's Nodes
    members = {}
    for n in s["nodes"]:
        p = lab["nodes"][n["name"]]["profile"]
        if p not in members:
            profiles.append(p)
            members[p] = []
        members[p].append(n)
    owned = {OWNED: s["name"]}
    ts_name = s["topologySource"].get("name", "lab")
    apply_obj({"apiVersion": "worker.gpustack.ai/v1", "kind": "TopologySource",
               "metadata": {"name": ts_name, "labels": owned},
               "spec": {"nodeSelector": {}, "levels": s["topologySource"]["levels"],
                        "configMap": {"configMapRef": {"namespace": "gpustack-system", "name": "topology-inventory"},
                                      "key": "snapshot.yaml", "maxStaleness": "10m"}}})
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    status_patch("topologysources.worker.gpustack.ai", ts_name, {"conditions": [
        {"type": "Ready", "status": "True", "reason": "Reconciled", "lastTransitionTime": now,
         "message": f"revision {lab['revision']} applied by the TAS lab's labeler"}]})
    res = covered(s)
    quota = s.get("quota") or {}
    flavors = []
    for p in profiles:
        name = f"gpustack-{p}"
        apply_obj({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Topology",
                   "metadata": {"name": name, "labels": owned},
                   "spec": {"levels": [{"nodeLabel": l} for l in lab["profiles"][p]]}})
        apply_obj({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
                   "metadata": {"name": name, "labels": owned},
                   "spec": {"nodeLabels": {PROFILE: p}, "topologyName": name}})
        rq = []
        for r in res:
            if r in quota:
                q = str(quota[r])
            else:
                q = fmt_quantity(r, sum(parse_quantity(n["allocatable"].get(r, 0)) for n in members[p]))
            rq.append({"name": r, "nominalQuota": q})
        flavors.append({"name": name, "resources": rq})
    apply_obj({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
               "metadata": {"name": QUEUE, "labels": owned},
               "spec": {"namespaceSelector": {}, "resourceGroups": [{"coveredResources": res, "flavors": flavors}]}})
    apply_obj({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
               "metadata": {"name": QUEUE, "namespace": NS, "labels": owned},
               "spec": {"clusterQueue": QUEUE}})
    deadline = time.time() + 60
    while True:
        cq = kjson("get", "clusterqueues.kueue.x-k8s.io", QUEUE)
        conds = {c["type"]: c for c in cq.get("status", {}).get("conditions", [])}
        if conds.get("Active", {}).get("status") == "True":
            break
        if time.time() > deadline:
            die(f"ClusterQueue {QUEUE} not Active after 60 s: {conds.get('Active')}")
        time.sleep(0.3)
    # GPUStack's condition on its managed queue (the lab stands in for the operator here).
    conds = cq["status"].get("conditions", [])
    if not any(c["type"] == "TopologyReady" for c in conds):
        conds.append({"type": "TopologyReady", "status": "True", "reason": "Ready",
                      "message": "Topology-aware flavors are ready", "lastTransitionTime": now,
                      "observedGeneration": cq["metadata"].get("generation", 1)})
        status_patch("clusterqueues.kueue.x-k8s.io", QUEUE, {"conditions": conds})
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
        else:
            tr["unconstrained"] = True
        pod_sets.append({
            "name": p.get("name", "main"), "count": p["count"], "topologyRequest": tr,
            "template": {"spec": {"restartPolicy": "Never", "containers": [{
                "name": "main", "image": "registry.k8s.io/pause:3.10",
                "resources": {"requests": {r: str(v) for r, v in (p.get("requests") or {}).items()}}}]}}})
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
            "metadata": {"name": w["name"], "namespace": NS, "labels": {OWNED: s["name"]}},
            "spec": {"queueName": QUEUE, "podSets": pod_sets}}


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


def diagnose(name):
    tg = os.environ["TOPOGATE_BINARY"]
    env = dict(os.environ)
    env.pop("KUBERNETES_SERVICE_HOST", None)
    r = subprocess.run([tg, "diagnose", "pending", f"{NS}/{name}", "--kubeconfig", os.environ["KUBECONFIG"],
                        "--output", "json"], text=True, capture_output=True, env=env)
    try:
        rep = json.loads(r.stdout)
    except ValueError:
        return {"verdict": "error", "exit": r.returncode, "stderr": r.stderr.strip()[:500]}, None
    ps = [{"name": p.get("name"), "level": p.get("level"), "required": p.get("required"), "count": p.get("count"),
           "clusterFits": p.get("clusterFits"), "largestDomainFits": p.get("largestDomainFits"),
           "fitsOneDomain": p.get("fitsOneDomain")} for p in rep.get("podSets") or []]
    fits = bool(ps) and all(p["fitsOneDomain"] for p in ps)
    return {"verdict": "fits" if fits else "no-domain", "exit": r.returncode, "podSets": ps,
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


def wait_decision(s, name, timeout, settle):
    """Poll the Workload until Kueue has decided (QuotaReserved present) and the decision
    has not changed for `settle` seconds."""
    deadline = time.time() + timeout
    last, since = None, time.time()
    while True:
        d = kueue_decision(kjson("get", "workloads.kueue.x-k8s.io", "-n", NS, name))
        if d["decision"] != last:
            last, since = d["decision"], time.time()
        # Admission is final here (no preemption in these scenarios); a Pending decision must
        # hold for `settle` seconds.
        if last == "admitted" or (last is not None and time.time() - since >= settle):
            return d
        if time.time() > deadline:
            print(f"tas-lab: Kueue did not decide {NS}/{name} within {timeout:.0f} s", file=sys.stderr)
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
    return bool(ok)


def cmd_workloads(path, timeout=60.0, settle=1.5):
    """Submit the Workloads one at a time in file order; each is decided by Kueue and
    diagnosed before the next is created, so Kueue's order is the file's and diagnose
    sees the cluster Kueue decided on. Afterwards every decision is read again."""
    s = load(path)
    ch = None
    lines = []
    for w in s["workloads"]:
        k("create", "-f", "-", "-o", "name", input=json.dumps(workload_obj(s, w)))
        kd = wait_decision(s, w["name"], timeout, settle)
        dg, _ = diagnose(w["name"])
        lines.append((w, kd, dg))
    ch = chain()
    rc = 0
    for w, kd, dg in lines:
        final = kueue_decision(kjson("get", "workloads.kueue.x-k8s.io", "-n", NS, w["name"]))
        agree = bool(kd["decision"]) and dg["verdict"] != "error" and \
            (kd["decision"] == "admitted") == (dg["verdict"] == "fits")
        line = {"scenario": s["name"], "workload": f"{NS}/{w['name']}", "kueue": kd, "diagnose": dg,
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


# ---------------------------------------------------------------- unload / status

def cmd_unload(timeout=90.0):
    sel = OWNED
    left = k("get", ",".join(KINDS), "-A", "-l", sel, "-o", "name", check=False).stdout.split()
    if not left:
        return
    # Workloads first (Kueue's finalizers on queues and flavors wait for them), then the
    # rest; bound Pods have no kubelet to confirm their deletion.
    k("delete", KINDS[0], "-A", "-l", sel, "--wait=false", "--ignore-not-found", check=False)
    end = time.time() + 30
    while k("get", KINDS[0], "-A", "-l", sel, "-o", "name", check=False).stdout.strip() and time.time() < end:
        time.sleep(0.2)
    k("delete", "pods", "-A", "-l", sel, "--wait=false", "--ignore-not-found", "--grace-period=0", "--force", check=False)
    k("delete", ",".join(x for x in KINDS[1:] if x not in ("pods", "topologies.kueue.x-k8s.io")), "-A", "-l", sel,
      "--wait=false", "--ignore-not-found", check=False)
    # Topologies last, once their ResourceFlavors are gone: Kueue v0.17.0 re-checks a
    # terminating Topology when a referencing flavor is deleted, but can still find the
    # flavor in its cache then and keeps the resource-in-use finalizer with no retry.
    end = time.time() + 30
    while k("get", "resourceflavors.kueue.x-k8s.io", "-l", sel, "-o", "name", check=False).stdout.strip() and time.time() < end:
        time.sleep(0.2)
    k("delete", "topologies.kueue.x-k8s.io", "-l", sel, "--wait=false", "--ignore-not-found", check=False)
    deadline = time.time() + timeout
    kicked = 0.0
    while True:
        left = k("get", ",".join(KINDS), "-A", "-l", sel, "-o", "name", check=False).stdout.split()
        if not left:
            break
        if time.time() > deadline:
            die(f"objects not deleted after {timeout:.0f} s: {' '.join(left[:10])}")
        stuck = [n for n in left if n.startswith("topology.kueue.x-k8s.io/")]
        if stuck and time.time() - kicked > 3:
            # A no-op change makes Kueue reconcile the Topology again (see above).
            kicked = time.time()
            for n in stuck:
                k("annotate", n, f"tas-lab.topogate.invalid/retry={int(kicked)}", "--overwrite", check=False)
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
    elif c == "chain":
        cmd_chain(a[0], a[1])
    elif c == "workloads":
        sys.exit(cmd_workloads(a[0]))
    elif c == "unload":
        cmd_unload()
    elif c == "status":
        cmd_status()
    else:
        die(f"unknown subcommand {c}", 2)


if __name__ == "__main__":
    main(sys.argv[1:])

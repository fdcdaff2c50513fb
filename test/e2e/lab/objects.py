"""A scenario's inventory and Nodes: the files topogate serves (TopologySource, snapshot),
the Node objects with their status and existing usage, the TopologySource object; and the
lab's clean-up, every object it created found by its label."""
import os
import time

import yaml

from .scenario import HOSTNAME, NS, OWNED, PROFILE, levels, owned, revision, source_name

# What the lab creates, in the order `unload` reasons about (Workloads first).
KINDS = ["workloads.kueue.x-k8s.io", "localqueues.kueue.x-k8s.io", "clusterqueues.kueue.x-k8s.io",
         "cohorts.kueue.x-k8s.io",
         "resourceflavors.kueue.x-k8s.io", "topologies.kueue.x-k8s.io", "admissionchecks.kueue.x-k8s.io",
         "modeldeployments.worker.gpustack.ai", "topologysources.worker.gpustack.ai", "limitranges",
         "runtimeclasses.node.k8s.io", "pods", "nodes"]
# The consumer's NodeFeatures (the labeler writes them in the worker namespace): found by
# their source-UID label, as they carry no lab label.
NF_SELECTOR = "topology.gpustack.ai/source-uid"
NF_NS = "gpustack-system"
OVERCOMMITABLE = ("cpu", "memory", "ephemeral-storage")


def now():
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def topology_source_spec(levels_):
    return {"nodeSelector": {}, "levels": levels_,
            "configMap": {"configMapRef": {"namespace": "gpustack-system", "name": "topology-inventory"},
                          "key": "snapshot.yaml", "maxStaleness": "10m"}}


def write_inventory(s, out):
    """OUT/topologysource.yaml, snapshot.yaml and levels for topogate; returns the revision."""
    ts = {"apiVersion": "worker.gpustack.ai/v1", "kind": "TopologySource",
          "metadata": {"name": source_name(s)}, "spec": topology_source_spec(levels(s))}
    snap = {"apiVersion": "topology.gpustack.ai/v1alpha1", "revision": revision(s),
            "nodes": {n["name"]: dict(n.get("labels") or {}) for n in s["nodes"]}}
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "topologysource.yaml"), "w") as f:
        yaml.safe_dump(ts, f, sort_keys=False)
    # Written aside and renamed: topogate watches the file and must see it whole.
    tmp = os.path.join(out, ".snapshot.yaml.tmp")
    with open(tmp, "w") as f:
        yaml.safe_dump(snap, f, sort_keys=False)
    os.replace(tmp, os.path.join(out, "snapshot.yaml"))
    with open(os.path.join(out, "levels"), "w") as f:
        f.write(",".join(levels(s)) + "\n")
    return snap["revision"]


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


def create_nodes(api, s):
    """The Nodes, their status, the not-ready taint lifted, and the usage Pods."""
    labels = owned(s)
    stamp = now()
    for n in s["nodes"]:
        name = n["name"]
        # Read-only topology labels (topology.kubernetes.io/*) are the cloud's, on the Node
        # from its start; topogate checks the snapshot's copies against them (S6).
        cloud = {k: v for k, v in (n.get("labels") or {}).items() if k.startswith("topology.kubernetes.io/")}
        api.create("nodes", {"apiVersion": "v1", "kind": "Node",
                             "metadata": {"name": name,
                                          "labels": {**(n.get("nodeLabels") or {}), HOSTNAME: name, **cloud, **labels},
                                          # as the controllers annotate a Node: nfd-master's JSON
                                          # patch adds its annotation under an existing map
                                          "annotations": {"node.alpha.kubernetes.io/ttl": "0"}},
                             "spec": {"unschedulable": bool(n.get("unschedulable", False)),
                                      "taints": n.get("taints", [])}})
        alloc = {r: str(v) for r, v in n["allocatable"].items()}
        if not n.get("noPodsAllocatable"):
            alloc.setdefault("pods", "110")
        cap = {r: str(v) for r, v in (n.get("capacity") or alloc).items()}
        ready = n.get("ready", True)
        # ready: true, false, or "missing" (the Node reports no Ready condition at all)
        conds = [] if ready == "missing" else [
            {"type": "Ready", "status": "True" if ready else "False",
             "reason": "KubeletReady" if ready else "KubeletNotReady",
             "message": "set by the TAS lab (no kubelet)", "lastHeartbeatTime": stamp, "lastTransitionTime": stamp}]
        api.status_patch("nodes", name, {"capacity": cap, "allocatable": alloc, "conditions": conds})
        # TaintNodesByCondition taints a new Node not-ready; no node lifecycle controller runs
        # here to lift it once the Node reports Ready: back to the scenario's own taints.
        api.patch("nodes", name, {"spec": {"taints": n.get("taints") or []}})
    for n in s["nodes"]:
        for i, u in enumerate(n.get("usage") or []):
            api.create("pods", {"apiVersion": "v1", "kind": "Pod",
                                "metadata": {"name": f"usage-{n['name']}-{i}", "namespace": NS, "labels": labels},
                                "spec": {"nodeName": n["name"], "restartPolicy": "Never",
                                         "tolerations": [{"operator": "Exists"}],
                                         "containers": [{"name": "usage", "image": "registry.k8s.io/pause:3.10",
                                                         "resources": container_resources(u)}]}})
    return len(s["nodes"])


def apply_topology_source(api, s, levels_, rev):
    """The TopologySource object (before the labeler: it owns the NodeFeatures), marked
    Ready with REV; returns its name."""
    name = source_name(s)
    api.apply({"apiVersion": "worker.gpustack.ai/v1", "kind": "TopologySource",
               "metadata": {"name": name, "labels": owned(s)}, "spec": topology_source_spec(levels_)})
    api.status_patch("topologysources.worker.gpustack.ai", name, {"conditions": [
        {"type": "Ready", "status": "True", "reason": "Reconciled", "lastTransitionTime": now(),
         "message": f"revision {rev} applied by the TAS lab's labeler"}]})
    return name


def node_profiles(api):
    """{Node: topology.gpustack.ai/profile} of the lab's Nodes."""
    return {n["metadata"]["name"]: (n["metadata"].get("labels") or {}).get(PROFILE, "")
            for n in api.list("nodes", OWNED)}


def owned_names(api, kinds):
    """kubectl's `get KINDS -A -l OWNED -o name`: ["kind.group/name", ...]."""
    out = []
    for kind in kinds:
        plural, _, group = kind.partition(".")
        single = plural[:-3] + "y" if plural.endswith("ies") else \
            plural[:-2] if plural.endswith("sses") else plural[:-1]
        single = f"{single}.{group}" if group else single
        out += [f"{single}/{i['metadata']['name']}" for i in api.list(kind, OWNED)]
    return out


def delete_owned(api, kinds, grace0=False):
    """kubectl delete KINDS -l OWNED --wait=false, in the default namespace and every
    namespace holding such an object; grace0: --grace-period=0 --force."""
    for kind in kinds:
        namespaces = {NS}
        if api.namespaced(kind):  # the scenario's namespaces too
            namespaces |= {i["metadata"]["namespace"] for i in api.list(kind, OWNED)}
            for ns in sorted(namespaces):
                api.delete_collection(kind, OWNED, ns, grace0)
        else:
            api.delete_collection(kind, OWNED, None, grace0)


def wait_gone(api, kinds, seconds):
    end = time.time() + seconds
    while owned_names(api, kinds) and time.time() < end:
        time.sleep(0.2)


def unload(api, timeout=90.0):
    """Delete every object the lab created, and the consumer's NodeFeatures."""
    if api.list("nodefeatures.nfd.k8s-sigs.io", NF_SELECTOR, NF_NS):
        api.delete_collection("nodefeatures.nfd.k8s-sigs.io", NF_SELECTOR, NF_NS)
    if not owned_names(api, KINDS):
        return
    # Workloads first (Kueue's finalizers on queues and flavors wait for them), then the
    # rest; bound Pods have no kubelet to confirm their deletion.
    delete_owned(api, KINDS[:1])
    wait_gone(api, KINDS[:1], 30)
    delete_owned(api, ["pods"], grace0=True)
    delete_owned(api, [x for x in KINDS[1:] if x not in ("pods", "topologies.kueue.x-k8s.io")])
    # Topologies last, once their ResourceFlavors are gone: Kueue v0.17.0 re-checks a
    # terminating Topology when a referencing flavor is deleted, but can still find the
    # flavor in its cache then and keeps the resource-in-use finalizer with no retry.
    wait_gone(api, ["resourceflavors.kueue.x-k8s.io"], 30)
    delete_owned(api, ["topologies.kueue.x-k8s.io"])
    deadline = time.time() + timeout
    kicked = 0.0
    while True:
        left = owned_names(api, KINDS)
        if not left:
            return
        if time.time() > deadline:
            raise TimeoutError(f"objects not deleted after {timeout:.0f} s: {' '.join(left[:10])}")
        stuck = [n for n in left if n.startswith("topology.kueue.x-k8s.io/")]
        if stuck and time.time() - kicked > 3:
            # A no-op change makes Kueue reconcile the Topology again (see above).
            kicked = time.time()
            for n in stuck:
                api.patch("topologies.kueue.x-k8s.io", n.split("/", 1)[1],
                          {"metadata": {"annotations": {"tas-lab.topogate.invalid/retry": str(int(kicked))}}},
                          missing_ok=True)
        time.sleep(0.2)


def status_lines(api):
    """One line per kind: what the lab holds."""
    out = []
    for kind in KINDS:
        names = [i["metadata"]["name"] for i in api.list(kind, OWNED)]
        more = ", ..." if len(names) > 8 else ""
        out.append(f"  {kind.split('.')[0]}: {len(names)}" + (f" ({', '.join(names[:8])}{more})" if names else ""))
    return out

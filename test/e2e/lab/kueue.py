"""Kueue's side of a scenario: one Topology and one ResourceFlavor per profile the labeler
applied, the ClusterQueue `gpustack` and its LocalQueues, what GPUStack's operator adds
(the AdmissionCheck of a multi-role set, the TopologyReady condition, the queue migration
of a live hierarchy change), and the Workloads."""
import time

from kubernetes.utils import parse_quantity

from .objects import apply_topology_source, container_resources, now
from .scenario import NS, PROFILE, QUEUE, ROLE, Invalid, covered, levels, owned

CQ = "clusterqueues.kueue.x-k8s.io"
WL = "workloads.kueue.x-k8s.io"


def quota(resource, total):
    """A nominal quota from a sum of quantities (Decimal): CPU in millicores, the rest whole."""
    return f"{int(round(total * 1000))}m" if resource == "cpu" else str(int(round(total)))


def allocatable_sum(nodes, resource):
    try:
        return sum(parse_quantity(n["allocatable"].get(resource, 0)) for n in nodes)
    except ValueError as e:
        raise Invalid(f"allocatable {resource}: {e}") from None


def profiles_of(s, labels):
    """The profiles the labeler applied, in the order of the scenario's Nodes, and their Nodes."""
    profiles, members = [], {}
    for n in s["nodes"]:
        p = labels["nodes"][n["name"]]["profile"]
        if p not in members:
            profiles.append(p)
            members[p] = []
        members[p].append(n)
    return profiles, members


def flavor_entry(name, res, nodes, s, quotas):
    """The ClusterQueue's entry for flavor NAME over resources RES: nominalQuota from QUOTAS
    (else the allocatable sum of NODES), and the scenario's borrowingLimit and lendingLimit."""
    rq = []
    for r in res:
        e = {"name": r, "nominalQuota": str(quotas[r]) if r in quotas else quota(r, allocatable_sum(nodes, r))}
        for field in ("borrowingLimit", "lendingLimit"):  # the scenario's limits (cohort)
            if r in (s.get(field) or {}):
                e[field] = str(s[field][r])
        rq.append(e)
    return {"name": name, "resources": rq}


def make_flavors(api, s, labels):
    """One Topology and one ResourceFlavor (pinned to the profile) per profile, and the
    scenario's own flavors (`resourceGroups`); the ClusterQueue's resource groups over them:
    [{coveredResources, flavors}] (one group of every profile's flavor by default)."""
    profiles, members = profiles_of(s, labels)
    quotas = s.get("quota") or {}
    fl = s.get("flavor") or {}  # the scenario's nodeTaints and tolerations, on every flavor
    for p in profiles:
        name = f"gpustack-{p}"
        api.apply({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Topology",
                   "metadata": {"name": name, "labels": owned(s)},
                   "spec": {"levels": [{"nodeLabel": level} for level in labels["profiles"][p]]}})
        rf_spec = {"nodeLabels": {PROFILE: p}, "topologyName": name}
        for key in ("nodeTaints", "tolerations"):
            if fl.get(key):
                rf_spec[key] = fl[key]
        api.apply({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
                   "metadata": {"name": name, "labels": owned(s)}, "spec": rf_spec})
    node_profile = {n["name"]: labels["nodes"][n["name"]]["profile"] for n in s["nodes"]}
    groups = []
    for g in s.get("resourceGroups") or [{"coveredResources": covered(s)}]:
        res = list(g["coveredResources"])
        entries = []
        for f in g.get("flavors") or [{"profileOf": members[p][0]["name"]} for p in profiles]:
            if f.get("profileOf"):
                p = node_profile[f["profileOf"]]
                entries.append(flavor_entry(f"gpustack-{p}", res, members[p], s, {**quotas, **(f.get("quota") or {})}))
                continue
            # A flavor of the scenario's own: its nodeLabels select Nodes by their nodeLabels;
            # topologyOf: the Topology of that Node's profile (a TAS flavor); topology: a
            # Topology of its own (named after the flavor) with these levels, as listed;
            # else none.
            sel = f.get("nodeLabels") or {}
            nodes = [n for n in s["nodes"] if all((n.get("nodeLabels") or {}).get(k) == v for k, v in sel.items())]
            spec = {"nodeLabels": sel} if sel else {}
            if f.get("topologyOf"):
                spec["topologyName"] = f"gpustack-{node_profile[f['topologyOf']]}"
            elif f.get("topology"):
                api.apply({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Topology",
                           "metadata": {"name": f["name"], "labels": owned(s)},
                           "spec": {"levels": [{"nodeLabel": level} for level in f["topology"]]}})
                spec["topologyName"] = f["name"]
            for key in ("nodeTaints", "tolerations"):
                if f.get(key):
                    spec[key] = f[key]
            api.apply({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
                       "metadata": {"name": f["name"], "labels": owned(s)}, "spec": spec})
            entries.append(flavor_entry(f["name"], res, nodes, s, f.get("quota") or {}))
        groups.append({"coveredResources": res, "flavors": entries})
    return profiles, members, groups


def queue_groups(groups, quota_, borrowing, lending):
    """The resource groups of another ClusterQueue or a Cohort over the same flavors."""
    return [{"coveredResources": g["coveredResources"],
             "flavors": queue_flavors(g["flavors"], quota_, borrowing, lending)} for g in groups]


def queue_flavors(flavors, quota_, borrowing, lending):
    """The flavor entries of another ClusterQueue over the same flavors: nominalQuota from
    `quota_` (0 for a resource it leaves out), and the limits it sets."""
    out = []
    for f in flavors:
        rq = []
        for r in f["resources"]:
            e = {"name": r["name"], "nominalQuota": str((quota_ or {}).get(r["name"], 0))}
            if r["name"] in (borrowing or {}):
                e["borrowingLimit"] = str(borrowing[r["name"]])
            if r["name"] in (lending or {}):
                e["lendingLimit"] = str(lending[r["name"]])
            rq.append(e)
        out.append({"name": f["name"], "resources": rq})
    return out


def wait_queue_state(api, active, timeout=60, name=QUEUE):
    """Until Kueue reports the ClusterQueue Active (or, active False, not Active)."""
    deadline = time.time() + timeout
    while True:
        cq = api.get(CQ, name) or {}
        conds = {c["type"]: c for c in (cq.get("status") or {}).get("conditions", [])}
        if "Active" in conds and (conds["Active"].get("status") == "True") == active:
            return cq
        if time.time() > deadline:
            raise TimeoutError(f"ClusterQueue {name} Active is not {active} after {timeout} s: {conds.get('Active')}")
        time.sleep(0.3)


def patch_queue(api, spec):
    api.patch(CQ, QUEUE, {"spec": spec})


def apply_chain(api, s, labels):
    """The TopologySource object, the flavors, the ClusterQueue and LocalQueues (and what the
    scenario adds: namespaces, an AdmissionCheck, a ModelDeployment, a queue stop policy or
    a missing flavor); waits until Kueue has decided the queue's state. Returns
    {profiles: {profile: Nodes}, flavors: [names]}."""
    apply_topology_source(api, s, levels(s), labels["revision"])
    stamp = now()
    profiles, members, groups = make_flavors(api, s, labels)
    flavors = [f for g in groups for f in g["flavors"]]
    cq_spec = {"namespaceSelector": s.get("namespaceSelector", {}), "resourceGroups": groups}
    if s.get("cohort"):
        cq_spec["cohortName"] = s["cohort"]
    if s.get("preemption"):
        cq_spec["preemption"] = s["preemption"]
    # Other ClusterQueues over the same flavors (e.g. lenders of the cohort).
    for other in s.get("clusterQueues") or []:
        spec = {"namespaceSelector": {}, "resourceGroups": queue_groups(
            groups, other.get("quota"), other.get("borrowingLimit"), other.get("lendingLimit"))}
        if other.get("cohort"):
            spec["cohortName"] = other["cohort"]
        api.apply({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
                   "metadata": {"name": other["name"], "labels": owned(s)}, "spec": spec})
    # Cohort objects: their own quota over the same flavors, and their parents.
    for k in s.get("cohorts") or []:
        spec = {"resourceGroups": queue_groups(
            groups, k.get("quota"), k.get("borrowingLimit"), k.get("lendingLimit"))}
        if k.get("parent"):
            spec["parentName"] = k["parent"]
        api.apply({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Cohort",
                   "metadata": {"name": k["name"], "labels": owned(s)}, "spec": spec})
    if s.get("admissionCheck"):
        # GPUStack's joint check of a multi-role deployment: the lab marks the check Active
        # (standing in for its controller) and never marks a Workload's check Ready, so a
        # Workload that gets quota stays reserved and not admitted, held for its set.
        ac = s["admissionCheck"]
        api.apply({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "AdmissionCheck",
                   "metadata": {"name": ac, "labels": owned(s)},
                   "spec": {"controllerName": "tas-lab.topogate.invalid/joint-check"}})
        # admissionCheckActive: false leaves it inactive (its controller not running).
        active = s.get("admissionCheckActive", True)
        api.status_patch("admissionchecks.kueue.x-k8s.io", ac, {"conditions": [
            {"type": "Active", "status": "True" if active else "False",
             "reason": "Active" if active else "ControllerNotRunning", "lastTransitionTime": stamp,
             "message": "the TAS lab stands in for the joint check's controller"}]})
        cq_spec["admissionChecksStrategy"] = {"admissionChecks": [{"name": ac}]}
    if s.get("missingAdmissionCheck"):
        # A check the ClusterQueue names that does not exist.
        checks = cq_spec.setdefault("admissionChecksStrategy", {"admissionChecks": []})["admissionChecks"]
        checks.append({"name": s["missingAdmissionCheck"]})
    api.apply({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
               "metadata": {"name": QUEUE, "labels": owned(s)}, "spec": cq_spec})
    # Namespaces stay (no namespace controller runs to finish a deletion); their labels are
    # the scenario's. Each holds a LocalQueue gpustack.
    for n in s.get("namespaces") or []:
        if api.get("namespaces", n["name"]) is None:
            api.create("namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n["name"]}})
        api.patch("namespaces", n["name"], {"metadata": {"labels": n.get("labels") or {}}})
    for ns in [NS] + [n["name"] for n in s.get("namespaces") or []]:
        api.apply({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
                   "metadata": {"name": QUEUE, "namespace": ns, "labels": owned(s)}, "spec": {"clusterQueue": QUEUE}})
    for lq in s.get("localQueues") or []:
        spec = {"clusterQueue": lq["clusterQueue"]}
        if lq.get("stopPolicy"):
            spec["stopPolicy"] = lq["stopPolicy"]
        api.apply({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
                   "metadata": {"name": lq["name"], "namespace": lq.get("namespace", NS), "labels": owned(s)},
                   "spec": spec})
    if s.get("modelDeployment"):
        md = s["modelDeployment"]
        api.apply({"apiVersion": "worker.gpustack.ai/v1", "kind": "ModelDeployment",
                   "metadata": {"name": md["name"], "namespace": NS, "labels": owned(s)}, "spec": md["spec"]})
    # A check missing or inactive holds the queue inactive from the start.
    checks_ok = not s.get("missingAdmissionCheck") and s.get("admissionCheckActive", True)
    cq = wait_queue_state(api, bool(checks_ok))
    for other in s.get("clusterQueues") or []:
        wait_queue_state(api, True, name=other["name"])
    # GPUStack's condition on its managed queue (the lab stands in for the operator here).
    conds = cq["status"].get("conditions", [])
    if not any(c["type"] == "TopologyReady" for c in conds):
        conds.append({"type": "TopologyReady", "status": "True", "reason": "Ready",
                      "message": "Topology-aware flavors are ready", "lastTransitionTime": stamp,
                      "observedGeneration": cq["metadata"].get("generation", 1)})
        api.status_patch(CQ, QUEUE, {"conditions": conds})
    q = s.get("queue") or {}
    if q.get("stopPolicy"):
        patch_queue(api, {"stopPolicy": q["stopPolicy"]})
    if q.get("missingFlavor"):
        # A flavor entry naming a ResourceFlavor that does not exist, last in the group.
        extra = {"name": q["missingFlavor"], "resources": [dict(r) for r in groups[0]["flavors"][0]["resources"]]}
        api.patch(CQ, QUEUE, [{"op": "add", "path": "/spec/resourceGroups/0/flavors/-", "value": extra}],
                  content_type="application/json-patch+json")
    if q:
        wait_queue_state(api, False)
    return {"profiles": {p: len(members[p]) for p in profiles}, "flavors": [f["name"] for f in flavors]}


def create_extras(api, s):
    """The scenario's LimitRanges and RuntimeClasses, before its Workloads."""
    for lr in s.get("limitRanges") or []:
        api.create("limitranges", {"apiVersion": "v1", "kind": "LimitRange",
                                   "metadata": {"name": lr["name"], "namespace": NS, "labels": owned(s)},
                                   "spec": {"limits": lr["limits"]}})
    for rc in s.get("runtimeClasses") or []:
        obj = {"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass",
               "metadata": {"name": rc["name"], "labels": owned(s)}, "handler": rc.get("handler", rc["name"])}
        if rc.get("overhead"):
            obj["overhead"] = {"podFixed": {r: str(v) for r, v in rc["overhead"].items()}}
        api.create("runtimeclasses.node.k8s.io", obj)
    if s.get("limitRanges") or s.get("runtimeClasses"):
        time.sleep(1.0)  # Kueue's caches see the LimitRanges and RuntimeClasses first


def workload(api, s, w):
    """The Workload object of the scenario's entry W."""
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
        for key in ("runtimeClassName", "tolerations", "nodeSelector"):
            if p.get(key):
                spec[key] = p[key]
        if p.get("nodeAffinity") is not None:
            spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": p["nodeAffinity"]}}}
        entry = {"name": p.get("name", "main"), "count": p["count"], "topologyRequest": tr,
                 "template": {"spec": spec}}
        if p.get("minCount") is not None:
            entry["minCount"] = p["minCount"]
        pod_sets.append(entry)
    meta = {"name": w["name"], "namespace": w.get("namespace", NS), "labels": owned(s)}
    if w.get("role"):
        meta["labels"][ROLE] = w["role"]
    if w.get("owner"):
        md = api.get("modeldeployments.worker.gpustack.ai", s["modelDeployment"]["name"], NS)
        meta["ownerReferences"] = [{"apiVersion": "worker.gpustack.ai/v1", "kind": "ModelDeployment",
                                    "name": md["metadata"]["name"], "uid": md["metadata"]["uid"], "controller": True}]
    spec = {"queueName": w.get("queueName", QUEUE), "podSets": pod_sets}
    if w.get("priority") is not None:
        spec["priority"] = w["priority"]
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload", "metadata": meta, "spec": spec}


def queue_state(api):
    cq = api.get(CQ, QUEUE)
    st = cq.get("status") or {}
    return {"uid": cq["metadata"]["uid"], "stopPolicy": cq["spec"].get("stopPolicy", "None"),
            "reservingWorkloads": st.get("reservingWorkloads", 0), "admittedWorkloads": st.get("admittedWorkloads", 0),
            "flavors": [f["name"] for g in cq["spec"]["resourceGroups"] for f in g["flavors"]]}


def release_if_evicted(api, name):
    """What a job integration does when Kueue evicts its Workload: stop the Pods and release
    the reservation (QuotaReserved=False, no admission). These Workloads have no job behind
    them, so the lab does it, as Kueue's jobframework would, and Kueue then requeues them."""
    wl = api.get(WL, name, NS) or {"metadata": {}}
    st = wl.get("status") or {}
    conds = {c["type"]: c for c in st.get("conditions") or []}
    ev, qr = conds.get("Evicted"), conds.get("QuotaReserved")
    if not (ev and ev["status"] == "True" and qr and qr["status"] == "True"):
        return False
    stamp = now()
    gen = wl["metadata"].get("generation", 1)
    new = [c for c in st.get("conditions") or [] if c["type"] not in ("QuotaReserved", "Admitted")]
    new.append({"type": "QuotaReserved", "status": "False", "reason": "Pending", "message": ev.get("message", ""),
                "lastTransitionTime": stamp, "observedGeneration": gen})
    new.append({"type": "Admitted", "status": "False", "reason": "NoReservation",
                "message": "The workload has no reservation", "lastTransitionTime": stamp, "observedGeneration": gen})
    api.status_patch(WL, name, {"conditions": new, "admission": None}, NS)
    return True


def migrate_queue(api, s, t, labels, reserved, timeout=60.0):
    """GPUStack's migration of the managed queue to the changed scenario T, step by step:
    replacement Topology and flavors first, HoldAndDrain, wait for zero reservations (the
    evicted Workloads released), switch the flavor set on the same queue, restore the stop
    policy, then the old flavors and Topologies go; when the flavor set stays the same (Nodes
    moved between the profiles there were), only the quotas change, nothing is drained.
    RESERVED() names the Workloads holding
    a reservation. Returns the queue's state before, the Workloads held before, the queue
    drained, the queue after, and the Workloads evicted."""
    q0 = queue_state(api)
    held0 = reserved()
    apply_topology_source(api, t, levels(t), labels["revision"])
    _, _, groups = make_flavors(api, t, labels)
    flavors = groups[0]["flavors"]  # one group (scenario.check refuses a change with several)
    # Nodes moved between the profiles there were (the same flavors, their quotas updated):
    # GPUStack drains nothing, there is no flavor to replace.
    same = sorted(f["name"] for f in flavors) == sorted(q0["flavors"])
    if not same:
        patch_queue(api, {"stopPolicy": "HoldAndDrain"})
    deadline = time.time() + timeout
    # Drained: the queue's status counts no reservation and none of the Workloads holds one
    # (the status may lag behind the Workloads: read alone, it can say 0 before any eviction).
    while not same and (queue_state(api)["reservingWorkloads"] or reserved()) and time.time() < deadline:
        for w in s["workloads"]:
            release_if_evicted(api, w["name"])
        time.sleep(0.3)
    drained = queue_state(api)
    evicted = sorted(held0 - reserved())
    api.patch(CQ, QUEUE, [{"op": "replace", "path": "/spec/resourceGroups/0/flavors", "value": flavors}],
              content_type="application/json-patch+json")
    patch_queue(api, {"stopPolicy": q0["stopPolicy"]})
    # Old flavors and their Topology go once nothing references them.
    old = [f for f in q0["flavors"] if f not in {f["name"] for f in flavors}]
    for name in old:
        api.delete("resourceflavors.kueue.x-k8s.io", name)
    end = time.time() + 30
    while any(api.get("resourceflavors.kueue.x-k8s.io", name) for name in old) and time.time() < end:
        time.sleep(0.3)
    for name in old:
        api.delete("topologies.kueue.x-k8s.io", name)
    return q0, held0, drained, queue_state(api), evicted

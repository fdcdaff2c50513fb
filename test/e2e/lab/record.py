"""Recording decisions: what Kueue decided for each Workload (read from its status), what
`topogate diagnose pending` says of it (online, against the lab), whether they agree and
whether the scenario's `expect` is met; one JSON line per Workload on stdout."""
import json
import os
import subprocess
import sys
import time

from .scenario import NS

WL = "workloads.kueue.x-k8s.io"


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
    """Kueue's decision in a Workload's status: admitted (with its assignments), pending (with
    QuotaReserved's reason and message), or None (not decided yet)."""
    st = wl.get("status") or {}
    conds = {c["type"]: c for c in st.get("conditions") or []}
    qr = conds.get("QuotaReserved")
    d = {"decision": None, "quotaReserved": qr and qr["status"], "admitted": (conds.get("Admitted") or {}).get("status")}
    if qr is None:
        return d
    if qr["status"] == "True":
        d["decision"] = "admitted"
        d["clusterQueue"] = (st.get("admission") or {}).get("clusterQueue")
        d["assignments"] = [{"podSet": a.get("name"), "flavors": a.get("flavors"), "count": a.get("count"),
                             "topologyAssignment": decode_assignment(a.get("topologyAssignment"))}
                            for a in (st.get("admission") or {}).get("podSetAssignments") or []]
    else:
        d["decision"] = "pending"
        d["reason"] = qr.get("reason")
        d["message"] = qr.get("message")
    return d


def decision(api, name, ns=NS):
    return kueue_decision(api.get(WL, name, ns) or {})


def wait_decision(api, name, timeout, settle, ns=NS):
    """Poll the Workload until Kueue has decided (QuotaReserved present) and the decision
    has not changed for `settle` seconds."""
    deadline = time.time() + timeout
    last, since = None, time.time()
    while True:
        d = decision(api, name, ns)
        if d["decision"] != last:
            last, since = d["decision"], time.time()
        # An admission is recorded at once (a later preemption of it shows as decisionLater);
        # a Pending decision must hold for `settle` seconds.
        if last == "admitted" or (last is not None and time.time() - since >= settle):
            return d
        if time.time() > deadline:
            print(f"tas-lab: Kueue did not decide {ns}/{name} within {timeout:.0f} s", file=sys.stderr)
            return d
        time.sleep(0.2)


def topogate(*args):
    env = dict(os.environ)
    env.pop("KUBERNETES_SERVICE_HOST", None)
    return subprocess.run([os.environ["TOPOGATE_BINARY"], "diagnose", *args, "--kubeconfig", os.environ["KUBECONFIG"],
                           "--output", "json"], text=True, capture_output=True, env=env)


def diagnose(name, ns=NS):
    """`diagnose pending` through the API (the online reader), summarised."""
    r = topogate("pending", f"{ns}/{name}")
    try:
        rep = json.loads(r.stdout)
    except ValueError:
        return {"verdict": "error", "exit": r.returncode, "stderr": r.stderr.strip()[:500]}
    ps = [{k: p.get(k) for k in ("name", "level", "required", "count", "clusterFits", "largestDomainFits",
                                  "spanningFits", "fitsOneDomain", "fits")} for p in rep.get("podSets") or []]
    # `fits`: Kueue's decision as diagnose follows it (quota and flavor, then placement PodSet
    # by PodSet); without a ClusterQueue, one domain of the level holds each PodSet, or
    # (preferred) the domains together.
    kq = rep.get("kueue") or {}
    fits = bool(kq.get("admissible")) if kq.get("modelled") else bool(ps) and all(p["fits"] for p in ps)
    return {"verdict": "fits" if fits else "no-domain", "exit": r.returncode, "podSets": ps,
            "kueue": dict({k: kq.get(k) for k in ("admissible", "noDecision", "step", "podSet", "message",
                                                  "reason", "partial", "notes")},
                          counts=[p.get("count") for p in kq.get("podSets") or []]),
            "conclusion": rep.get("conclusion")}


def chain():
    """`diagnose chain`: its exit status and findings."""
    r = topogate("chain")
    try:
        rep = json.loads(r.stdout)
        return {"exit": r.returncode, "findings": [f"{f.get('check')} {f.get('object')}" for f in rep.get("findings", [])]}
    except ValueError:
        return {"exit": r.returncode, "error": r.stderr.strip()[:300]}


def agree(kd, dg):
    """Kueue admitted exactly when diagnose says it fits; or diagnose foresaw that Kueue
    would not decide at all."""
    if kd["decision"] is None and (dg.get("kueue") or {}).get("noDecision"):
        return True
    return bool(kd["decision"]) and dg["verdict"] != "error" and (kd["decision"] == "admitted") == (dg["verdict"] == "fits")


def expect_met(s, exp, kd, dg):
    """Whether Kueue's decision KD and diagnose's verdict DG meet the expectation EXP."""
    ok = True
    if "kueue" in exp:
        ok &= kd["decision"] == exp["kueue"]
    if "diagnose" in exp:
        ok &= dg["verdict"] == exp["diagnose"]
    for key in ("clusterFits", "largestDomainFits"):
        if key in exp:
            ok &= [p.get(key) for p in dg.get("podSets") or []][:1] == [exp[key]]
    if exp.get("assignmentWithin"):
        level = exp["assignmentWithin"]
        for a in kd.get("assignments") or []:
            vals = set()
            for d in (a.get("topologyAssignment") or {}).get("domains") or []:
                host = d["values"][-1] if d["values"] else None
                n = next((n for n in s["nodes"] if n["name"] == host), None)
                vals.add((n.get("labels") or {}).get(level) if n else None)
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


def emit(line, s, exp_key, w, kd, dg):
    """Print LINE with the Workload's expectation (W[EXP_KEY]) checked; True when met."""
    exp = w.get(exp_key) or {}
    met = True
    if exp:
        line["expect"] = exp
        line["expectMet"] = met = expect_met(s, exp, kd, dg)
    print(json.dumps(line), flush=True)
    return met


def run_workloads(api, s, create_workload, timeout=60.0, settle=1.5):
    """Submit the Workloads one at a time in file order; each is decided by Kueue and
    diagnosed before the next is created, so Kueue's order is the file's and diagnose
    sees the cluster Kueue decided on. Afterwards every decision is read again. Returns 3
    when an expectation is not met, else 0."""
    seen = []
    for w in s["workloads"]:
        wns = w.get("namespace", NS)
        create_workload(w)
        wait = timeout
        if any(p.get("podSetGroupName") for p in w["podSets"]):
            # A leader + workers group can meet a Kueue v0.17.0 bug that leaves the Workload
            # undecided; when diagnose foresees it, waiting the full timeout tells nothing more.
            if (diagnose(w["name"], wns).get("kueue") or {}).get("noDecision"):
                wait = 3.0
        kd = wait_decision(api, w["name"], wait, settle, wns)
        seen.append((w, kd, diagnose(w["name"], wns)))
        if "Pending the preemption" in (kd.get("message") or ""):
            settle_preemption(api, s, w["name"], wns)
    ch = chain()
    rc = 0
    for w, kd, dg in seen:
        wns = w.get("namespace", NS)
        line = {"scenario": s["name"], "workload": f"{wns}/{w['name']}", "kueue": kd, "diagnose": dg,
                "agree": agree(kd, dg), "chain": ch}
        final = decision(api, w["name"], wns)
        if final["decision"] != kd["decision"]:
            line["decisionLater"] = final["decision"]
        if not emit(line, s, "expect", w, kd, dg):
            rc = 3
    return rc


def settle_preemption(api, s, name, ns=NS, timeout=30.0):
    """After Kueue decided to preempt for NAME: complete the evictions as a job integration
    would (release_if_evicted) until NAME is admitted or no longer waits for a preemption,
    and none of the scenario's Workloads holds a reservation while evicted. Without it Kueue
    v0.17.0 keeps NAME at the head of its ClusterQueue, waiting, and never takes the
    Workloads queued after it."""
    from .kueue import release_if_evicted
    deadline = time.time() + timeout
    while time.time() < deadline:
        released = [release_if_evicted(api, w["name"]) for w in s["workloads"] if w.get("namespace", NS) == NS]
        d = decision(api, name, ns)
        waiting = d["decision"] != "admitted" and "Pending the preemption" in (d.get("message") or "")
        if not any(released) and not waiting:
            return d
        time.sleep(0.3)
    print(f"tas-lab: the preemption for {ns}/{name} did not settle within {timeout:.0f} s", file=sys.stderr)
    return decision(api, name, ns)


def reserved(api, s):
    """The scenario's Workloads (default namespace) that hold a reservation."""
    return {w["name"] for w in s["workloads"] if decision(api, w["name"])["decision"] == "admitted"}


def impact_lines(s, status, before, after):
    """The change line's start: topogate's profile impact (from its status) against the
    Nodes whose profile label changed (BEFORE and AFTER: {Node: profile})."""
    la = status.get("lastAttempt") or {}
    impact = la.get("impact") or {}
    keys = ("changedNodes", "addedNodes", "removedNodes")
    listed = {}
    for key in keys:
        for it in (impact.get(key) or {}).get("items") or []:
            listed[it["node"]] = [it.get("from") or "", it.get("to") or ""]
    relabelled = {n: [before.get(n, ""), after.get(n, "")] for n in sorted(set(before) | set(after))
                  if before.get(n, "") != after.get(n, "")}
    matches = relabelled == listed and not any((impact.get(k) or {}).get("truncated") for k in keys)
    return {"scenario": s["name"], "change": "hierarchy", "revision": la.get("revision"),
            "impact": {"baseline": impact.get("baseline"), "profileChanges": impact.get("profileChanges"),
                       "flavorChanges": impact.get("flavorChanges"),
                       "appearedProfiles": [p["id"] for p in impact.get("appearedProfiles") or []],
                       "disappearedProfiles": [p["id"] for p in impact.get("disappearedProfiles") or []],
                       "nodes": listed},
            "relabelled": relabelled, "impactMatchesCluster": matches}


def predict_change(s, revision, source):
    """`diagnose change` on the cluster as it is, before the revision is applied: which admitted
    Workloads the migration evicts and which the new hierarchy admits again. Printed as the
    prediction line; returns the report (None when the command failed)."""
    r = topogate("change", "--revision", revision, "--source", source)
    try:
        rep = json.loads(r.stdout)
    except ValueError:
        print(json.dumps({"scenario": s["name"], "phase": "prediction", "error": r.stderr.strip()[:500]}), flush=True)
        return None
    print(json.dumps({"scenario": s["name"], "phase": "prediction", "summary": rep.get("summary"),
                      "workloads": {w["workload"]: {"evicted": w["evicted"], "admittedAgain": w["admittedAgain"],
                                                    "podSets": [p["verdict"] for p in w["podSets"]]}
                                    for w in rep.get("workloads") or []},
                      "notes": rep.get("notes") or []}), flush=True)
    return rep


def change_agreement(api, s, predicted, evicted):
    """The prediction against what Kueue did: the Workloads evicted, admitted again and still
    Pending, each side; `agree` when the three sets are equal."""
    held = reserved(api, s)
    observed = {"evicted": sorted(f"{NS}/{n}" for n in evicted),
                "admittedAgain": sorted(f"{NS}/{n}" for n in evicted if n in held),
                "stranded": sorted(f"{NS}/{n}" for n in evicted if n not in held)}
    ws = (predicted or {}).get("workloads") or []
    pred = {"evicted": sorted(w["workload"] for w in ws if w["evicted"]),
            "admittedAgain": sorted(w["workload"] for w in ws if w["evicted"] and w["admittedAgain"]),
            "stranded": sorted(w["workload"] for w in ws if w["evicted"] and not w["admittedAgain"])}
    line = {"scenario": s["name"], "phase": "agreement", "predicted": pred, "observed": observed,
            "agree": predicted is not None and pred == observed}
    print(json.dumps(line), flush=True)
    return line["agree"]


def after_change(api, s, t, held0, evicted, timeout=60.0, settle=1.5):
    """One line per Workload after the change: Kueue's decision and diagnose's verdict again,
    `expectAfterChange` checked against the changed scenario T. False when one is not met."""
    ok = True
    for w in s["workloads"]:
        kd = wait_decision(api, w["name"], timeout, settle)
        dg = diagnose(w["name"])
        line = {"scenario": s["name"], "workload": f"{NS}/{w['name']}", "phase": "after-change",
                "heldBefore": w["name"] in held0, "evicted": w["name"] in evicted,
                "readmitted": w["name"] in evicted and kd["decision"] == "admitted",
                "kueue": kd, "diagnose": dg, "agree": agree(kd, dg)}
        ok &= emit(line, t, "expectAfterChange", w, kd, dg)
    return ok

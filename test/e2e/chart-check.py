#!/usr/bin/env python3
"""Asserts properties of a rendered helm/topogate manifest.

Usage: chart-check.py RENDERED.yaml CASE
Reads the rendered objects and checks what the chart promises for every
values case (hardening, probes, webhook settings) and what depends on the case
(RBAC only when used, TLS mode, credential mounts). Prints one line per
failed check and exits 1 if any failed.
"""
import json
import sys
from pathlib import Path

import yaml

rendered, case = sys.argv[1], sys.argv[2]
docs = [d for d in yaml.safe_load_all(open(rendered)) if d]
by_kind = {}
for d in docs:
    by_kind.setdefault(d["kind"], []).append(d)

failures = []


def check(cond, msg):
    if not cond:
        failures.append(msg)


def one(kind):
    objs = by_kind.get(kind, [])
    check(len(objs) == 1, f"expected one {kind}, got {len(objs)}")
    return objs[0] if objs else {}


values_file = f"{case}.yaml"
dep = one("Deployment")
pod = dep.get("spec", {}).get("template", {}).get("spec", {})
ctr = (pod.get("containers") or [{}])[0]
single = case == "file-store-single"

# Availability: >= 2 replicas, PDB, spread, no unavailable Pod during rollout.
if not single:
    check(dep["spec"]["replicas"] >= 2, "replicas < 2")
    pdb = one("PodDisruptionBudget")
    check(pdb.get("spec", {}).get("maxUnavailable") == 1, "PDB maxUnavailable != 1")
else:
    check("PodDisruptionBudget" not in by_kind, "PDB rendered although disabled")
check(dep["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"] == 0, "rollout may drop a replica")
aff = pod.get("affinity", {}).get("podAntiAffinity", {})
check(aff.get("preferredDuringSchedulingIgnoredDuringExecution"), "no pod anti-affinity")
keys = {c["topologyKey"] for c in pod.get("topologySpreadConstraints", [])}
check({"kubernetes.io/hostname", "topology.kubernetes.io/zone"} <= keys, f"spread keys {keys}")

# Hardening.
psc, csc = pod.get("securityContext", {}), ctr.get("securityContext", {})
check(psc.get("runAsNonRoot") is True and csc.get("runAsNonRoot") is True, "not runAsNonRoot")
check(csc.get("readOnlyRootFilesystem") is True, "root filesystem writable")
check(csc.get("allowPrivilegeEscalation") is False, "privilege escalation allowed")
check(csc.get("capabilities", {}).get("drop") == ["ALL"], "capabilities not dropped")
check(ctr.get("resources", {}).get("requests", {}).get("cpu"), "no CPU request")
check(ctr.get("resources", {}).get("requests", {}).get("memory"), "no memory request")
check(ctr.get("livenessProbe", {}).get("httpGet", {}).get("path") == "/livez", "liveness not /livez")
check(ctr.get("readinessProbe", {}).get("httpGet", {}).get("path") == "/readyz", "readiness not /readyz")
check(ctr.get("args") == ["serve", "--config", "/etc/topogate/config.yaml"], f"args {ctr.get('args')}")
mounts = {m["mountPath"] for m in ctr.get("volumeMounts", [])}
check("/tmp" in mounts, "no writable /tmp")

# Configuration.
cm = [c for c in by_kind.get("ConfigMap", []) if c["metadata"]["name"].endswith("-config")]
check(len(cm) == 1, "no config ConfigMap")
cfg = yaml.safe_load(cm[0]["data"]["config.yaml"]) if cm else {}
invs = cfg.get("inventories", [])
for inv in invs:
    src_key = inv["source"].rsplit("/", 1)[-1]
    check(src_key in cm[0]["data"], f"source file {src_key} not in the ConfigMap")
    src = yaml.safe_load(cm[0]["data"].get(src_key, "{}"))
    check(src.get("kind") == "TopologySource" and src.get("metadata", {}).get("name") == inv["name"],
          f"source object for {inv['name']}")
    for role in ("readers", "writers"):
        for f in inv.get(role, {}).get("bearerTokenFiles", []) + [inv.get(role, {}).get("clientCAFile", "")]:
            if f:
                check(any(f.startswith(m + "/") for m in mounts), f"{inv['name']} {role} file {f} not mounted")
    if "snapshot" in inv:
        check(any(inv["snapshot"].startswith(m + "/") for m in mounts), f"snapshot {inv['snapshot']} not mounted")

# RBAC only for what is used: each cluster-wide role exists exactly when the rendered
# configuration uses it, and grants nothing more.
node_watch = any(i.get("nodesFromAPI") for i in invs)
metrics_kube = cfg.get("metrics", {}).get("auth") == "kubernetes"
audit = bool(cfg.get("audit", {}).get("enabled"))
ownership_check = bool(cfg.get("admission", {}).get("ownershipCheck", {}).get("enabled"))
workload_impact = any(i.get("workloadImpact") for i in invs)


def rule_set(rules):
    return sorted((tuple(r.get("apiGroups", [])), tuple(r.get("resources", [])), tuple(r.get("nonResourceURLs", [])),
                   tuple(sorted(r["verbs"]))) for r in rules)


expected_roles = {  # name suffix -> (rendered when, its rules)
    "-nodes": (node_watch, [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch"]}]),
    "-metrics-auth": (metrics_kube, [
        {"apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"], "verbs": ["create"]},
        {"apiGroups": ["authorization.k8s.io"], "resources": ["subjectaccessreviews"], "verbs": ["create"]}]),
    "-metrics-reader": (metrics_kube, [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]),
    "-audit": (audit, [{"apiGroups": ["worker.gpustack.ai"], "resources": ["topologysources", "modeldeployments"],
                        "verbs": ["list"]},
                       {"apiGroups": [""], "resources": ["nodes"], "verbs": ["list"]}]),
    "-workload-impact": (workload_impact, [
        {"apiGroups": [""], "resources": ["nodes", "pods", "limitranges", "namespaces"], "verbs": ["list"]},
        {"apiGroups": ["node.k8s.io"], "resources": ["runtimeclasses"], "verbs": ["list"]},
        {"apiGroups": ["kueue.x-k8s.io"],
         "resources": ["topologies", "resourceflavors", "clusterqueues", "localqueues", "workloads"], "verbs": ["list"]},
        {"apiGroups": ["worker.gpustack.ai"], "resources": ["topologysources", "modeldeployments"], "verbs": ["list"]}]),
    "-ownership-check": (ownership_check, [
        {"apiGroups": ["worker.gpustack.ai"], "resources": ["topologysources"], "verbs": ["list"]},
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["list"]}]),
}
cluster_roles = {cr["metadata"]["name"]: cr for cr in by_kind.get("ClusterRole", [])}
matched = set()
for suffix, (wanted, rules) in expected_roles.items():
    names = [n for n in cluster_roles if n.endswith(suffix)]
    matched.update(names)
    check(len(names) == (1 if wanted else 0), f"ClusterRole *{suffix}: {len(names)} rendered, wanted {int(wanted)}")
    for n in names:
        check(rule_set(cluster_roles[n]["rules"]) == rule_set(rules),
              f"ClusterRole {n} grants {cluster_roles[n]['rules']}, not {rules}")
check(set(cluster_roles) == matched, f"unexpected ClusterRoles {sorted(set(cluster_roles) - matched)}")
bound = {b["roleRef"]["name"] for b in by_kind.get("ClusterRoleBinding", [])}
for n in cluster_roles:
    if not n.endswith("-metrics-reader"):  # bound to the scrapers the user names, if any
        check(n in bound, f"ClusterRole {n} has no ClusterRoleBinding")
kube_store = cfg.get("store", {}).get("type") == "kubernetes"
check(bool(by_kind.get("Role")) == kube_store, "store Role iff store.type=kubernetes")
uses_api = kube_store or node_watch or metrics_kube or audit or ownership_check
check(pod.get("automountServiceAccountToken") == uses_api, "token mounted when unused or missing")

# Webhook.
vwc = one("ValidatingWebhookConfiguration")
for w in vwc.get("webhooks", []):
    check(w["sideEffects"] == "None", "sideEffects")
    check(w["admissionReviewVersions"] == ["v1"], "admissionReviewVersions")
    check(1 <= w["timeoutSeconds"] <= 30, "timeoutSeconds")
    check(w["failurePolicy"] in ("Fail", "Ignore"), "failurePolicy")
    for r in w["rules"]:
        check("DELETE" not in r["operations"] and "*" not in r["operations"], "DELETE is sent to the webhook")
    cc = w["clientConfig"]
    if case == "secret-mtls-nonodes":
        check(cc.get("caBundle"), "no caBundle in secret mode")
    else:
        check("caBundle" not in cc, "caBundle set although cert-manager injects it")
certmgr = case != "secret-mtls-nonodes"
check(("cert-manager.io/inject-ca-from" in (vwc.get("metadata", {}).get("annotations") or {})) == certmgr,
      "CA injection annotation iff cert-manager")
check(bool(by_kind.get("Certificate")) == certmgr, "Certificate iff cert-manager")

# Alerts and the dashboard (docs/alerts.md): rendered only when enabled. The PrometheusRule's
# rules are what test/observability/render_rules.py (the promtool tests' renderer) makes of
# files/alerts.yaml for the same values, so the promtool tests test what the chart ships.
case_values = {}
case_file = Path(__file__).resolve().parent / "chart-values" / values_file
if case_file.exists():
    case_values = yaml.safe_load(case_file.read_text()) or {}


def leaves(d, prefix=""):
    for k, v in d.items():
        if isinstance(v, dict) and v:
            yield from leaves(v, f"{prefix}{k}.")
        else:
            yield f"{prefix}{k}", v


# Each inventory setting the values give reaches the configuration as given (0 included:
# maxStrandedWorkloads 0 strands none).
for v_inv in case_values.get("inventories") or []:
    rendered = next((i for i in invs if i.get("name") == v_inv.get("name")), {})
    for key in ("historySize", "maxProfileChanges", "maxStrandedWorkloads", "driftGracePeriod",
                "unknownNodes", "maxAge"):
        if key in v_inv:
            check(rendered.get(key) == v_inv[key],
                  f"{v_inv.get('name')}.{key}: {rendered.get(key)!r} rendered, {v_inv[key]!r} given")
rule_on = (case_values.get("prometheusRule") or {}).get("enabled", False)
rules = by_kind.get("PrometheusRule", [])
check(len(rules) == (1 if rule_on else 0), f"{len(rules)} PrometheusRules, prometheusRule.enabled={rule_on}")
if rule_on and rules:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "observability"))
    import render_rules  # noqa: E402

    overrides = dict(leaves({k: case_values[k] for k in ("prometheusRule", "webhook") if k in case_values}))
    expected = yaml.safe_load(render_rules.render(overrides, namespace=dep["metadata"]["namespace"],
                                                  fullname=dep["metadata"]["name"]))
    check(rules[0].get("spec") == expected, "the PrometheusRule's spec is not render_rules.py's rendering")
    check(rules[0]["metadata"]["labels"].get("release") == (case_values["prometheusRule"].get("labels") or {}).get("release"),
          "prometheusRule.labels not on the PrometheusRule")
dash_on = (case_values.get("grafanaDashboard") or {}).get("enabled", False)
dashboards = [c for c in by_kind.get("ConfigMap", []) if c["metadata"]["name"].endswith("-dashboard")]
check(len(dashboards) == (1 if dash_on else 0), f"{len(dashboards)} dashboard ConfigMaps, grafanaDashboard.enabled={dash_on}")
if dash_on and dashboards:
    model = json.loads((Path(__file__).resolve().parents[2] / "helm/topogate/files/dashboard.json").read_text())
    check(json.loads(dashboards[0]["data"]["topogate.json"]) == model, "the dashboard ConfigMap does not hold files/dashboard.json")
    check(dashboards[0]["metadata"]["labels"].get("grafana_dashboard") == "1", "no grafana_dashboard: \"1\" label")

for f in failures:
    print(f"chart-check {case}: FAIL {f}")
sys.exit(1 if failures else 0)

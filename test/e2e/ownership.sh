#!/usr/bin/env bash
# The admission ownership warning (admission.ownershipCheck) against a real kube-apiserver
# (control-plane.sh) with the CRDs of test/e2e/crds:
#
#   setup    Nodes gpu-1..gpu-3 (pool a) and gpu-9 (pool b); a writing TopologySource
#            "rack-a" (configMap, levels [rack], pool a); the chart's ownership-check
#            ClusterRole bound to the user topogate runs as
#   warning  `topogate serve` with the check on: an AdmissionReview of a new writing source
#            on the rack level and every Node is allowed with a warning naming rack-a, the
#            level and the shared Nodes; an UPDATE of rack-a itself, a source on pool b, and a
#            nodeLabels source get none
#   audit    the same server's periodic audit (the chart's audit ClusterRole) lists the Nodes'
#            metadata: topogate_audit_ownership_conflicts is 0, then 1 once a second writing
#            source on the same Nodes is created, and 0 again once rack-a is deleted (and the
#            admission warning goes at the view's next list); without list on nodes (a
#            ClusterRole for the two kinds only) a run still succeeds, with a note, and the
#            gauge is NaN (unknown)
#
# Usage: ownership.sh   Env: TOPOGATE_BINARY, TOPOGATE_CP_DIR (default: inside the work
# folder), E2E_KEEP=1
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)

cp_dir=${TOPOGATE_CP_DIR:-}
. "$here/lib.sh"
e2e_init ownership
[[ -n $cp_dir ]] && export TOPOGATE_CP_DIR=$cp_dir
server_pid=
stop_server() { e2e_stop_pid "$server_pid"; }
e2e_on_exit stop_server

section setup
e2e_cp_start
e2e_test_crds
for n in gpu-1:a gpu-2:a gpu-3:a gpu-9:b; do
  k apply -f - >/dev/null <<YAML
apiVersion: v1
kind: Node
metadata: {name: ${n%:*}, labels: {pool: ${n#*:}}}
YAML
done
k apply -f - >/dev/null <<'YAML'
apiVersion: worker.gpustack.ai/v1
kind: TopologySource
metadata: {name: rack-a}
spec:
  nodeSelector: {matchLabels: {pool: a}}
  levels: [topology.gpustack.ai/rack]
  configMap:
    configMapRef: {namespace: gpustack-system, name: rack-a}
    key: snapshot.yaml
    maxStaleness: 10m
YAML
pass "4 Nodes and the writing source rack-a"
"$helm" template topogate "$repo/helm/topogate" --namespace gpustack-system --show-only templates/rbac.yaml \
  --set ownershipCheck.enabled=true --set audit.enabled=true --set store.type=file --set replicaCount=1 |
  python3 -c 'import sys, yaml
for d in yaml.safe_load_all(sys.stdin):
    if d and d["kind"] == "ClusterRole" and d["metadata"]["name"].endswith(("-ownership-check", "-audit")):
        print("---"); print(yaml.safe_dump(d))' >"$work/role.yaml"
if grep -q "name: topogate-ownership-check" "$work/role.yaml" && grep -q "name: topogate-audit" "$work/role.yaml"; then
  pass "the chart renders the ownership-check and audit ClusterRoles"
else fail "ClusterRoles not rendered"; fi
k apply -f "$work/role.yaml" >/dev/null
k create clusterrolebinding topogate-e2e-ownership --clusterrole topogate-ownership-check --user topogate-e2e >/dev/null
k create clusterrolebinding topogate-e2e-audit --clusterrole topogate-audit --user topogate-e2e >/dev/null

section warning
export CERTS_QUIET=1
"$repo/certs/make-ca.sh" --out "$work/pki" --name ca --cn "topogate e2e ownership CA"
"$repo/certs/make-server-cert.sh" --ca-cert "$work/pki/ca.crt" --ca-key "$work/pki/ca.key" --out "$work/pki" \
  --name serving --ip 127.0.0.1 --dns localhost --days 2
health=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cat >"$work/topogate.yaml" <<CFG
listen: {address: 127.0.0.1, port: 0, healthPort: $health}
tls: {certFile: $work/pki/serving.crt, keyFile: $work/pki/serving.key}
store: {type: none, apiServer: $TOPOGATE_CP_URL, tokenFile: $TOPOGATE_CP_USER_TOKEN_FILE, caFile: $TOPOGATE_CP_CA}
admission: {ownershipCheck: {enabled: true, interval: 5s, timeout: 5s}}
audit: {enabled: true, interval: 2s, timeout: 10s}
logging: {level: debug}
CFG
env -u KUBERNETES_SERVICE_HOST "$topogate" serve --config "$work/topogate.yaml" 2>"$work/serve.log" &
server_pid=$!
listed() { grep -q '"ownership view: listed"' "$work/serve.log"; }
if poll 30 listed; then pass "the view listed the TopologySources and Nodes"; else
  fail "the view never listed"; tail -20 "$work/serve.log"; fi
port=$(python3 -c '
import json, sys
for line in open(sys.argv[1]):
    try: e = json.loads(line)
    except ValueError: continue
    if e.get("msg") == "listening": print(e["port"]); break' "$work/serve.log")
grep -q '"topologysources":1' "$work/serve.log" && grep -q '"nodes":4' "$work/serve.log" &&
  pass "1 TopologySource and 4 Nodes in the view" || fail "view counts: $(grep 'ownership view' "$work/serve.log" | head -2)"

# review OP NAME SPEC: the AdmissionReview response for TopologySource NAME with SPEC (JSON).
review() {
  local body
  body=$(printf '{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u-%s","kind":{"group":"worker.gpustack.ai","version":"v1","kind":"TopologySource"},"name":"%s","operation":"%s","object":{"apiVersion":"worker.gpustack.ai/v1","kind":"TopologySource","metadata":{"name":"%s"},"spec":%s}}}' \
    "$2" "$2" "$1" "$2" "$3")
  curl -sS --cacert "$work/pki/ca.crt" -H 'Content-Type: application/json' --data-binary "$body" \
    "https://127.0.0.1:$port/validate/topologysources?timeout=10s"
}
cm='"configMap":{"configMapRef":{"namespace":"gpustack-system","name":"x"},"key":"s.yaml","maxStaleness":"10m"}'
warnings() { python3 -c 'import json, sys; r = json.load(sys.stdin)["response"]; print(r["allowed"]); [print(w) for w in r.get("warnings", [])]'; }

review CREATE everywhere "{\"nodeSelector\":{},\"levels\":[\"topology.gpustack.ai/zone\",\"topology.gpustack.ai/rack\"],$cm}" |
  warnings >"$work/overlap.txt"
want='OwnershipConflict with TopologySource rack-a, neither publishes: topology.gpustack.ai/rack on 3 Nodes (gpu-1, +2)'
if [[ $(head -1 "$work/overlap.txt") == True ]] && grep -qxF "$want" "$work/overlap.txt"; then
  pass "an overlapping source is allowed with the warning: $want"
else fail "overlap answered: $(cat "$work/overlap.txt")"; fi

review UPDATE rack-a "{\"nodeSelector\":{},\"levels\":[\"topology.gpustack.ai/rack\"],$cm}" | warnings >"$work/self.txt"
[[ $(cat "$work/self.txt") == True ]] && pass "an UPDATE of rack-a itself: no warning" ||
  fail "UPDATE of rack-a: $(cat "$work/self.txt")"
review CREATE pool-b "{\"nodeSelector\":{\"matchLabels\":{\"pool\":\"b\"}},\"levels\":[\"topology.gpustack.ai/rack\"],$cm}" |
  warnings >"$work/disjoint.txt"
[[ $(cat "$work/disjoint.txt") == True ]] && pass "a source on other Nodes: no warning" ||
  fail "disjoint: $(cat "$work/disjoint.txt")"
review CREATE labels '{"nodeSelector":{},"levels":["topology.gpustack.ai/rack"],"nodeLabels":{}}' | warnings >"$work/nl.txt"
[[ $(cat "$work/nl.txt") == True ]] && pass "a nodeLabels source (no writer): no warning" || fail "nodeLabels: $(cat "$work/nl.txt")"

section audit
metric() { # SERIES: its value, or "absent"
  curl -sf "http://127.0.0.1:$health/metrics" 2>/dev/null |
    awk -v s="$1" 'index($0, s " ") == 1 { print $2; found = 1 } END { if (!found) print "absent" }'
}
conflicts_are() { [[ $(metric topogate_audit_ownership_conflicts | tr '[:upper:]' '[:lower:]') == "$1" ]]; }
if poll 20 conflicts_are 0; then pass "the audit lists the Nodes: no conflict with one writing source"; else
  fail "topogate_audit_ownership_conflicts $(metric topogate_audit_ownership_conflicts)"; tail -5 "$work/serve.log"; fi
k apply -f - >/dev/null <<'YAML'
apiVersion: worker.gpustack.ai/v1
kind: TopologySource
metadata: {name: everywhere}
spec:
  nodeSelector: {}
  levels: [topology.gpustack.ai/zone, topology.gpustack.ai/rack]
  configMap:
    configMapRef: {namespace: gpustack-system, name: everywhere}
    key: snapshot.yaml
    maxStaleness: 10m
YAML
if poll 20 conflicts_are 1; then pass "a second writer on the same Nodes: topogate_audit_ownership_conflicts 1"; else
  fail "topogate_audit_ownership_conflicts $(metric topogate_audit_ownership_conflicts)"; fi
grep -q '"audit: ownership conflict".*rack-a and everywhere\|"audit: ownership conflict".*everywhere and rack-a' "$work/serve.log" &&
  pass "the audit logs the conflict naming both" || fail "no conflict log line"

# Deleted, rack-a conflicts with nothing: the gauge drops, and the warning goes at the next list.
k delete topologysource rack-a >/dev/null
if poll 20 conflicts_are 0; then pass "rack-a deleted: topogate_audit_ownership_conflicts 0"; else
  fail "topogate_audit_ownership_conflicts $(metric topogate_audit_ownership_conflicts)"; fi
gone() { review CREATE everywhere "{\"nodeSelector\":{},\"levels\":[\"topology.gpustack.ai/rack\"],$cm}" | warnings | grep -q OwnershipConflict && return 1 || return 0; }
if poll 20 gone; then pass "rack-a deleted: the warning goes at the next list"; else fail "the warning stayed after rack-a was deleted"; fi

# Without list on nodes: a note, not a failed run; the conflicts are unknown.
k create clusterrole tg-e2e-no-nodes --verb list --resource topologysources.worker.gpustack.ai \
  --resource modeldeployments.worker.gpustack.ai >/dev/null
k create clusterrolebinding tg-e2e-no-nodes --clusterrole tg-e2e-no-nodes --user topogate-e2e >/dev/null
k delete clusterrolebinding topogate-e2e-audit topogate-e2e-ownership >/dev/null
failed_before=$(metric 'topogate_audit_runs_total{result="failure"}')
if poll 20 conflicts_are nan; then pass "nodes forbidden: topogate_audit_ownership_conflicts NaN"; else
  fail "topogate_audit_ownership_conflicts $(metric topogate_audit_ownership_conflicts)"; fi
grep -q '"audit: the API refuses to list nodes' "$work/serve.log" && pass "logged as a note" || fail "no note logged"
sleep 3
[[ $(metric 'topogate_audit_runs_total{result="failure"}') == "$failed_before" ]] &&
  pass "no failed run while nodes are forbidden" ||
  fail "failed runs: $failed_before -> $(metric 'topogate_audit_runs_total{result="failure"}')"

echo "$checks checks, $fails failed"
((fails == 0))

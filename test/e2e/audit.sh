#!/usr/bin/env bash
# `topogate audit` and the server's periodic audit against a real kube-apiserver
# (control-plane.sh) with the CRDs of test/e2e/crds and no ValidatingWebhookConfiguration:
# objects written with no webhook registered (as while topogate is down under
# failurePolicy Ignore) are never checked at write time.
#
#   online     an invalid TopologySource (stored as v1alpha1) and an invalid
#              ModelDeployment created with kubectl are reported with their rule
#              ids (exit 1); valid ones are not; the online report equals the
#              offline one on `kubectl get -o json`; -n limits ModelDeployments
#   rbac       the user topogate runs as, without RBAC: exit 2 (403); with the
#              chart's audit ClusterRole (helm template, audit.enabled=true): the
#              same report
#   serve      `topogate serve` with `audit: {interval: 2s}` as that user:
#              /metrics shows topogate_audit_violations for the objects' rules and
#              the log names each object once; fixed with kubectl, the gauges drop
#              to 0 and `topogate audit` exits 0
#   crd        with the ModelDeployment CRD deleted: a note, not an error (exit 0)
#
# Usage: audit.sh   Env: TOPOGATE_BINARY, E2E_KEEP=1
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)

. "$here/lib.sh"
e2e_init audit
server_pid=
stop_server() { e2e_stop_pid "$server_pid"; }
e2e_on_exit stop_server

section setup
e2e_cp_start
e2e_test_crds
pass "chart CRDs established"
if [[ -z $(k get validatingwebhookconfigurations -o name) ]]; then
  pass "no webhook registered: nothing checks a write"
else
  fail "a webhook is registered: $(k get validatingwebhookconfigurations -o name)"
fi
k create namespace team-a >/dev/null

# A valid and an invalid object of each kind. The invalid TopologySource is written as
# v1alpha1 (the API stores it as v1): T9 (http) and T13 (a Secret outside gpustack-system).
k apply -f - >/dev/null <<'YAML'
apiVersion: worker.gpustack.ai/v1
kind: TopologySource
metadata: {name: data-center}
spec:
  nodeSelector: {}
  levels: [topology.gpustack.ai/region, topology.gpustack.ai/zone, topology.gpustack.ai/rack]
  configMap:
    configMapRef: {namespace: gpustack-system, name: topology-inventory}
    key: snapshot.yaml
    maxStaleness: 10m
---
apiVersion: worker.gpustack.ai/v1alpha1
kind: TopologySource
metadata: {name: bad-webhook}
spec:
  levels: [topology.gpustack.ai/rack]
  webhook:
    url: http://inventory.example.com/snapshot
    pollInterval: 1m
    timeout: 10s
    maxStaleness: 10m
    bearerTokenSecretRef: {namespace: default, name: inventory-token}
---
apiVersion: worker.gpustack.ai/v1
kind: ModelDeployment
metadata: {name: llama, namespace: default}
spec:
  roles:
    - {name: prefill, replicas: 1, size: 2, topology: {requiredLevel: topology.kubernetes.io/zone}}
---
apiVersion: worker.gpustack.ai/v1
kind: ModelDeployment
metadata: {name: qwen, namespace: team-a}
spec:
  roles:
    - {name: prefill, replicas: 1, size: 2, topology: {requiredLevel: topology.kubernetes.io/zone}}
    - {name: decode, replicas: 1, size: 2, topology: {requiredLevel: "zone a"}}
YAML
pass "2 invalid and 2 valid objects created with kubectl (no webhook to refuse them)"

tg() { env -u KUBERNETES_SERVICE_HOST "$topogate" audit "$@"; }

# expect NAME RC OUTFILE ERRFILE ARGS...: run `topogate audit ARGS`, check the exit status.
expect() {
  local name=$1 want=$2 out=$3 err=$4 rc=0; shift 4
  tg "$@" >"$out" 2>"$err" || rc=$?
  if [[ $rc == "$want" ]]; then pass "$name: exit $rc"; else
    fail "$name: exit $rc, want $want: $(head -c 400 "$err")"; fi
}
has() { # NAME FILE LINE
  if grep -qxF -- "$3" "$2"; then pass "$1"; else fail "$1: no line '$3' in: $(cat "$2")"; fi
}
hasnt() { # NAME FILE TEXT
  if grep -qF -- "$3" "$2"; then fail "$1: '$3' in: $(cat "$2")"; else pass "$1"; fi
}

section online
expect "audit online finds the violations" 1 "$work/a.txt" "$work/a.err" --kubeconfig "$KUBECONFIG"
has "T9 of bad-webhook" "$work/a.txt" \
  'TopologySource bad-webhook: T9 spec.webhook.url: Invalid value: "http://inventory.example.com/snapshot": scheme must be https (the snapshot is fetched only over TLS)'
has "T13 of bad-webhook" "$work/a.txt" \
  'TopologySource bad-webhook: T13 spec.webhook.bearerTokenSecretRef.namespace: Forbidden: "default" is outside the worker namespace "gpustack-system"; every reference must be in it'
if grep -q '^ModelDeployment team-a/qwen: M1 spec.roles\[1\].topology.requiredLevel: Invalid value: "zone a": ' "$work/a.txt"; then
  pass "M1 of team-a/qwen"
else fail "no M1 line for team-a/qwen: $(cat "$work/a.txt")"; fi
hasnt "valid objects are not reported" "$work/a.txt" "data-center"
hasnt "valid ModelDeployment not reported" "$work/a.txt" "llama"
has "summary" "$work/a.txt" \
  "audit: 4 objects checked (2 TopologySources, 2 ModelDeployments), 2 violating; 3 violations by rule: M1=1 T9=1 T13=1"

k get topologysources,modeldeployments -A -o json >"$work/objects.json"
expect "online json" 1 "$work/online.json" "$work/online.err" --kubeconfig "$KUBECONFIG" --output json
expect "offline json on kubectl get -o json" 1 "$work/offline.json" "$work/offline.err" -f "$work/objects.json" --output json
if python3 -c '
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
sys.exit(0 if a == b and len(a["violations"]) == 3 else 1)' "$work/online.json" "$work/offline.json"; then
  pass "online report == offline report"
else
  fail "online and offline reports differ"; diff "$work/online.json" "$work/offline.json" | head -20 || true
fi
expect "-n default: the valid deployment only" 1 "$work/n.txt" "$work/n.err" --kubeconfig "$KUBECONFIG" -n default
hasnt "-n default leaves team-a out" "$work/n.txt" "team-a/qwen"
has "-n default summary" "$work/n.txt" \
  "audit: 3 objects checked (2 TopologySources, 1 ModelDeployment), 1 violating; 2 violations by rule: T9=1 T13=1"

section rbac
user=(--server "$TOPOGATE_CP_URL" --token-file "$TOPOGATE_CP_USER_TOKEN_FILE" --ca-file "$TOPOGATE_CP_CA")
expect "without RBAC the API refuses" 2 "$work/r.txt" "$work/r.err" "${user[@]}"
if grep -q "403" "$work/r.err"; then pass "the error names the 403"; else fail "no 403 in: $(cat "$work/r.err")"; fi
hasnt "the token is never printed" "$work/r.err" "$(cat "$TOPOGATE_CP_USER_TOKEN_FILE")"
# The chart's ClusterRole for the audit, bound to the user topogate runs as.
"$helm" template topogate "$repo/helm/topogate" --namespace gpustack-system --show-only templates/rbac.yaml \
  --set audit.enabled=true --set store.type=file --set replicaCount=1 |
  python3 -c 'import sys, yaml
for d in yaml.safe_load_all(sys.stdin):
    if d and d["kind"] == "ClusterRole" and d["metadata"]["name"].endswith("-audit"):
        print("---"); print(yaml.safe_dump(d))' >"$work/audit-role.yaml"
if grep -q "name: topogate-audit" "$work/audit-role.yaml"; then pass "the chart renders the audit ClusterRole"; else
  fail "no audit ClusterRole rendered"; fi
k apply -f "$work/audit-role.yaml" >/dev/null
k create clusterrolebinding topogate-e2e-audit --clusterrole topogate-audit --user topogate-e2e >/dev/null
# RBAC takes effect at once in the authorizer's cache, but give it a moment to be safe.
for _ in $(seq 50); do tg "${user[@]}" >/dev/null 2>&1 && break; [[ $? == 1 ]] && break; sleep 0.2; done
expect "with the chart's ClusterRole" 1 "$work/r2.json" "$work/r2.err" "${user[@]}" --output json
if cmp -s "$work/r2.json" "$work/online.json"; then pass "same report as the admin's"; else fail "report differs from the admin's"; fi

section serve
export CERTS_QUIET=1
"$repo/certs/make-ca.sh" --out "$work/pki" --name ca --cn "topogate e2e audit CA"
"$repo/certs/make-server-cert.sh" --ca-cert "$work/pki/ca.crt" --ca-key "$work/pki/ca.key" --out "$work/pki" \
  --name serving --ip 127.0.0.1 --dns localhost --days 2
health=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cat >"$work/topogate.yaml" <<CFG
listen: {address: 127.0.0.1, port: 0, healthPort: $health}
tls: {certFile: $work/pki/serving.crt, keyFile: $work/pki/serving.key}
store: {type: none, apiServer: $TOPOGATE_CP_URL, tokenFile: $TOPOGATE_CP_USER_TOKEN_FILE, caFile: $TOPOGATE_CP_CA}
audit: {enabled: true, interval: 2s, timeout: 10s}
CFG
env -u KUBERNETES_SERVICE_HOST "$topogate" serve --config "$work/topogate.yaml" 2>"$work/serve.log" &
server_pid=$!

metric() { # SERIES: its value, or "absent"
  curl -sf "http://127.0.0.1:$health/metrics" 2>/dev/null |
    awk -v s="$1" 'index($0, s " ") == 1 { print $2; found = 1 } END { if (!found) print "absent" }'
}
v_t9='topogate_audit_violations{kind="TopologySource",rule="T9"}'
v_t13='topogate_audit_violations{kind="TopologySource",rule="T13"}'
v_m1='topogate_audit_violations{kind="ModelDeployment",rule="M1"}'
v_t4='topogate_audit_violations{kind="TopologySource",rule="T4"}'
ok_runs='topogate_audit_runs_total{result="success"}'
failed_runs='topogate_audit_runs_total{result="failure"}'
# wait_metrics SECONDS 'SERIES=VALUE'...: until every series has its value.
wait_metrics() {
  local limit=$1 deadline s all; shift
  deadline=$((SECONDS + limit))
  while ((SECONDS < deadline)); do
    all=1
    for s in "$@"; do [[ $(metric "${s%=*}") == "${s##*=}" ]] || { all=0; break; }; done
    ((all)) && return 0
    kill -0 "$server_pid" 2>/dev/null || return 1
    sleep 0.5
  done
  return 1
}
# wait_ge SECONDS SERIES N: until the series is at least N.
wait_ge() {
  local deadline=$((SECONDS + $1)) v
  while ((SECONDS < deadline)); do
    v=$(metric "$2")
    [[ $v != absent ]] && python3 -c 'import sys; sys.exit(0 if float(sys.argv[1]) >= float(sys.argv[2]) else 1)' "$v" "$3" &&
      return 0
    kill -0 "$server_pid" 2>/dev/null || return 1
    sleep 0.5
  done
  return 1
}
if wait_metrics 30 "$v_t9=1" "$v_t13=1" "$v_m1=1" "$v_t4=0"; then
  pass "the periodic audit exports the violations (T9=1 T13=1 M1=1, T4=0)"
else
  fail "violations not exported: T9=$(metric "$v_t9") T13=$(metric "$v_t13") M1=$(metric "$v_m1") T4=$(metric "$v_t4")"
  tail -20 "$work/serve.log"
fi
[[ $(metric "$failed_runs") == 0 ]] && pass "no failed run" || fail "failed runs: $(metric "$failed_runs")"
first_success=$(metric topogate_audit_last_success_timestamp_seconds)
python3 -c 'import sys; sys.exit(0 if float(sys.argv[1]) > 1.7e9 else 1)' "$first_success" &&
  pass "last success timestamp set" || fail "last success timestamp $first_success"
# Several runs later, each object was logged once.
wait_ge 20 "$ok_runs" 4 || fail "fewer than 4 successful runs: $(metric "$ok_runs")"
n=$(python3 -c '
import json, sys
n = [0, 0]
for line in open(sys.argv[1]):
    try: e = json.loads(line)
    except ValueError: continue
    if e.get("msg") == "audit: object violates rules":
        if e.get("object") == "bad-webhook" and e.get("rules") == "T9,T13": n[0] += 1
        if e.get("object") == "team-a/qwen" and e.get("rules") == "M1": n[1] += 1
print(*n)' "$work/serve.log")
[[ $n == "1 1" ]] && pass "each violating object logged once over several runs" || fail "log counts: $n"
hasnt "the API token is not in the log" "$work/serve.log" "$(cat "$TOPOGATE_CP_USER_TOKEN_FILE")"

section fix
k patch topologysource bad-webhook --type merge -p \
  '{"spec":{"webhook":{"url":"https://inventory.example.com/snapshot","bearerTokenSecretRef":{"namespace":"gpustack-system","name":"inventory-token"}}}}' >/dev/null
k -n team-a patch modeldeployment qwen --type json \
  -p '[{"op":"replace","path":"/spec/roles/1/topology/requiredLevel","value":"topology.kubernetes.io/zone"}]' >/dev/null
pass "objects fixed with kubectl"
if wait_metrics 30 "$v_t9=0" "$v_t13=0" "$v_m1=0"; then
  pass "the gauges drop to 0 once the objects are fixed"
else
  fail "gauges after the fix: T9=$(metric "$v_t9") T13=$(metric "$v_t13") M1=$(metric "$v_m1")"
fi
python3 -c 'import sys; sys.exit(0 if float(sys.argv[1]) > float(sys.argv[2]) else 1)' \
  "$(metric topogate_audit_last_success_timestamp_seconds)" "$first_success" &&
  pass "last success timestamp advanced" || fail "last success timestamp did not advance"
cleared=$(grep -c '"msg":"audit: object no longer violates any rule' "$work/serve.log" || true)
[[ $cleared == 2 ]] && pass "both objects logged as no longer violating" || fail "cleared log lines: $cleared"
expect "audit after the fix" 0 "$work/f.txt" "$work/f.err" --kubeconfig "$KUBECONFIG"
has "clean summary" "$work/f.txt" "audit: 4 objects checked (2 TopologySources, 2 ModelDeployments), 0 violating"

section crd
k delete crd modeldeployments.worker.gpustack.ai --wait >/dev/null
for _ in $(seq 50); do [[ $(k get --raw /apis/worker.gpustack.ai/v1 | grep -c modeldeployments) == 0 ]] && break; sleep 0.2; done
expect "a CRD missing is no error" 0 "$work/c.txt" "$work/c.err" --kubeconfig "$KUBECONFIG"
if grep -q "note: the API serves no modeldeployments.worker.gpustack.ai" "$work/c.err"; then pass "and says so"; else
  fail "no note: $(cat "$work/c.err")"; fi
has "TopologySources still checked" "$work/c.txt" "audit: 2 objects checked (2 TopologySources, 0 ModelDeployments), 0 violating"
before=$(metric "$ok_runs")
if wait_ge 20 "$ok_runs" $((${before%.*} + 2)) && [[ $(metric "$failed_runs") == 0 ]]; then pass "the periodic audit keeps succeeding without the CRD"; else
  fail "runs after the CRD went: success=$(metric "$ok_runs") failure=$(metric "$failed_runs")"; fi

kill -TERM "$server_pid"
t0=$SECONDS rc=0
wait "$server_pid" || rc=$?
server_pid=
[[ $rc == 0 && $((SECONDS - t0)) -le 5 ]] && pass "serve stops cleanly (exit $rc)" || fail "serve exit $rc after $((SECONDS - t0)) s"

echo "== $checks checks, $fails failed"
((fails == 0))

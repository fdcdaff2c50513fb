#!/usr/bin/env bash
# `topogate diagnose chain|pending|change` online, against a real kube-apiserver
# (control-plane.sh) with the Kueue CRDs (sigs.k8s.io/kueue v0.17.0, from the Go
# module proxy) and the chart's CRDs installed. The runbook scenarios of
# test/fixtures/diagnose/ are created with kubectl (objects, then their status
# through the status subresource; no Kueue controller, kubelet or scheduler
# runs, so nothing changes them), then:
#
#   online        the report read from the API equals the offline report on the
#                 fixture files (chain and pending, JSON)
#   kubectl-files `kubectl get KIND -A -o json` files of the live objects give
#                 the same report offline (--from)
#   access        kubeconfig with tokenFile / inline token + CA data,
#                 --server/--token-file/--ca-file; an RBAC-less user is refused
#                 (exit 2) and the token never appears in the output
#
# Usage: diagnose.sh   Env: TOPOGATE_BINARY, E2E_KEEP=1, KUEUE_VERSION (v0.17.0)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
fx="$repo/test/fixtures/diagnose"
t_start=$SECONDS
kueue_version=${KUEUE_VERSION:-v0.17.0}
export KUEUE_VERSION=$kueue_version

. "$here/lib.sh"
e2e_init diagnose

section setup
crds=$(e2e_kueue_crds)
e2e_cp_start
for c in topologies resourceflavors clusterqueues localqueues workloads; do
  k apply --server-side -f "$crds/kueue.x-k8s.io_$c.yaml" >/dev/null
done
e2e_test_crds
pass "Kueue $kueue_version and chart CRDs established"

# load_scenario DIR [FILE...]: create every object of the fixture files with kubectl,
# then set its status through the status subresource.
load_scenario() {
  python3 - "$KUBECTL" "$@" <<'PY'
import json, subprocess, sys
kubectl, files = sys.argv[1], sys.argv[2:]
import glob, os
paths = []
for f in files:
    paths += sorted(glob.glob(os.path.join(f, "*.json"))) if os.path.isdir(f) else [f]
def items(p):
    o = json.load(open(p))
    return o["items"] if o.get("kind", "").endswith("List") else [o]
objs = [o for p in paths for o in items(p)]
# Namespaces first; Nodes and flavors before what refers to them (order only matters to people).
for ns in sorted({o["metadata"].get("namespace") for o in objs} - {None, "default", "kube-system"}):
    subprocess.run([kubectl, "create", "namespace", ns], check=False, capture_output=True)
for o in objs:
    status = o.pop("status", None)
    body = json.loads(json.dumps(o))
    for f in ("resourceVersion", "uid", "creationTimestamp"):
        body["metadata"].pop(f, None)
    r = subprocess.run([kubectl, "create", "-f", "-", "-o", "name"], input=json.dumps(body), text=True, capture_output=True)
    if r.returncode:
        sys.exit(f"create {o['kind']}/{o['metadata']['name']}: {r.stderr}")
    name = r.stdout.strip()
    if o["kind"] == "Node":
        # The TaintNodesByCondition admission plugin taints a new Node not-ready; the node
        # lifecycle controller (not running here) lifts it once the Node reports Ready.
        subprocess.run([kubectl, "taint", "node", o["metadata"]["name"], "node.kubernetes.io/not-ready:NoSchedule-"],
                       capture_output=True)
    if status:
        ns = o["metadata"].get("namespace")
        cmd = [kubectl, "patch", name, "--subresource=status", "--type=merge", "-p", json.dumps({"status": status})]
        if ns:
            cmd += ["-n", ns]
        r = subprocess.run(cmd, text=True, capture_output=True)
        if r.returncode:
            sys.exit(f"status of {name}: {r.stderr}")
print(len(objs))
PY
}
# unload_scenario DIR [FILE...]: delete what load_scenario created.
unload_scenario() {
  local f
  # A bound Pod waits for its kubelet to confirm the deletion (none runs here), and the
  # diagnosis rightly counts a terminating Pod's requests: delete at once.
  for f in "$@"; do k delete -f "$f" --grace-period=0 --force --wait=false >/dev/null 2>&1; done
  gone() {
    [[ -z $(k get nodes,pods,topologies.kueue.x-k8s.io,resourceflavors.kueue.x-k8s.io,clusterqueues.kueue.x-k8s.io,workloads.kueue.x-k8s.io -A -o name) ]]
  }
  local deadline=$((SECONDS + 60))
  until gone; do ((SECONDS < deadline)) || return 1; sleep 0.2; done
}

tg() { env -u KUBERNETES_SERVICE_HOST "$topogate" diagnose "$@"; }

# same_report NAME RC ARGS...: online (kubeconfig) report == offline report on the fixture
# files, and the exit status is RC for both.
same_report() {
  local name=$1 want=$2 files=$3; shift 3
  local on=0 off=0 from=()
  tg "$@" --kubeconfig "$KUBECONFIG" --output json >"$work/online.json" 2>"$work/online.err" || on=$?
  for f in $files; do if [[ -d $f ]]; then from+=(--from "$f"); else from+=(-f "$f"); fi; done
  tg "$@" "${from[@]}" --output json >"$work/offline.json" 2>"$work/offline.err" || off=$?
  if [[ $on == "$want" && $off == "$want" ]] && python3 -c '
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
sys.exit(0 if a == b else 1)' "$work/online.json" "$work/offline.json"; then
    pass "$name: online == offline (exit $on)"
  else
    fail "$name: online exit $on, offline exit $off (want $want); $(head -c 300 "$work/online.err")"
    diff <(python3 -m json.tool "$work/online.json" 2>&1) <(python3 -m json.tool "$work/offline.json" 2>&1) | head -20 || true
  fi
}

section "online: four Nodes in two zones"
n=$(load_scenario "$fx/two-zones" "$fx/zone-pair.json")
pass "two-zones: $n objects created with kubectl"
same_report "chain complete" 0 "$fx/two-zones $fx/zone-pair.json" chain
same_report "size three stays Pending" 1 "$fx/two-zones $fx/zone-pair.json" pending default/zone-trio
same_report "size two fits one zone" 1 "$fx/two-zones $fx/zone-pair.json" pending default/zone-pair
out=$(tg pending default/zone-trio --kubeconfig "$KUBECONFIG" || true)
grep -q "cluster-wide 4 fit; largest topology.kubernetes.io/zone domain holds 2; the PodSet needs 3 in one domain" <<<"$out" &&
  pass "table: cluster-wide 4 fit, no zone holds 3" || fail "table: $(tail -n 5 <<<"$out")"

section "kubectl-files: kubectl get -o json output read offline"
mkdir -p "$work/dump"
for r in nodes pods topologies.kueue.x-k8s.io resourceflavors.kueue.x-k8s.io clusterqueues.kueue.x-k8s.io \
  localqueues.kueue.x-k8s.io workloads.kueue.x-k8s.io topologysources.worker.gpustack.ai modeldeployments.worker.gpustack.ai \
  limitranges runtimeclasses.node.k8s.io; do
  k get "$r" -A -o json >"$work/dump/$r.json"
done
same_report "kubectl dump: pending" 1 "$work/dump" pending default/zone-trio
same_report "kubectl dump: chain" 0 "$work/dump" chain

section access
rc=0
tg chain --server "$TOPOGATE_CP_URL" --token-file "$TOPOGATE_CP_ADMIN_TOKEN_FILE" --ca-file "$TOPOGATE_CP_CA" >/dev/null || rc=$?
[[ $rc == 0 ]] && pass "--server/--token-file/--ca-file" || fail "--server: exit $rc"
python3 - "$KUBECONFIG" "$work/inline.kubeconfig" <<'PY'
import base64, sys, yaml
kc = yaml.safe_load(open(sys.argv[1]))
for c in kc["clusters"]:
    c["cluster"]["certificate-authority-data"] = base64.b64encode(open(c["cluster"].pop("certificate-authority"), "rb").read()).decode()
for u in kc["users"]:
    u["user"]["token"] = open(u["user"].pop("tokenFile")).read().strip()
open(sys.argv[2], "w").write(yaml.safe_dump(kc))
PY
rc=0
tg chain --kubeconfig "$work/inline.kubeconfig" >/dev/null || rc=$?
[[ $rc == 0 ]] && pass "kubeconfig with inline token and certificate-authority-data" || fail "inline kubeconfig: exit $rc"
leftover=$(find "${TMPDIR:-/tmp}" -maxdepth 1 -name 'topogate-diagnose.??????' -type f 2>/dev/null | wc -l)
[[ $leftover == 0 ]] && pass "inline credentials' temporary files removed" || fail "$leftover temporary credential files left"
rc=0
out=$(tg chain --kubeconfig "$work/inline.kubeconfig" --context e2e-user 2>&1) || rc=$?
user_token=$(cat "$TOPOGATE_CP_USER_TOKEN_FILE")
[[ $rc == 2 && $out == *403* && $out != *"$user_token"* ]] && pass "user without RBAC: exit 2, 403, token not shown" ||
  fail "RBAC-less user: exit $rc: $(head -c 300 <<<"$out")"

section "online: multi-role deployment"
unload_scenario "$fx/two-zones" "$fx/zone-pair.json" && pass "two-zones objects deleted" || fail "two-zones objects remain"
n=$(load_scenario "$fx/multi-role")
pass "multi-role: $n objects created with kubectl"
same_report "multi-role: decode short of a domain" 1 "$fx/multi-role" pending default/llm-decode-0
same_report "multi-role: prefill holds its reservation" 0 "$fx/multi-role" pending default/llm-prefill-0
out=$(tg pending default/llm-decode-0 --kubeconfig "$KUBECONFIG" || true)
grep -q "short of a domain: decode (default/llm-decode-0)" <<<"$out" && pass "multi-role conclusion names the short role" ||
  fail "multi-role conclusion: $(tail -n 2 <<<"$out")"

section "online: capacity split between a zone and a hostname-only profile"
unload_scenario "$fx/multi-role" && pass "multi-role objects deleted" || fail "multi-role objects remain"
n=$(load_scenario "$fx/split-profiles")
pass "split-profiles: $n objects created with kubectl"
same_report "split profiles: Pending" 1 "$fx/split-profiles" pending default/zone-trio

section "online: Kueue's decision followed (PodSets in order, an uncovered resource)"
unload_scenario "$fx/split-profiles" && pass "split-profiles objects deleted" || fail "split-profiles objects remain"
n=$(load_scenario "$fx/kueue-decision")
pass "kueue-decision: $n objects created with kubectl"
same_report "kueue-decision: third PodSet stops" 1 "$fx/kueue-decision" pending default/three-podsets
same_report "kueue-decision: uncovered resource" 1 "$fx/kueue-decision" pending default/gpu-uncovered
out=$(tg pending default/three-podsets --kubeconfig "$KUBECONFIG" || true)
grep -q "PodSet c (1 Pods; alone: cluster-wide 4 fit, the largest domain holds 2) stops the Workload once the PodSets before it are placed" <<<"$out" &&
  pass "kueue-decision conclusion names PodSet c and the PodSets before it" || fail "kueue-decision conclusion: $(tail -n 1 <<<"$out")"

section "online: per-Pod requests from a LimitRange and a RuntimeClass"
unload_scenario "$fx/kueue-decision" && pass "kueue-decision objects deleted" || fail "kueue-decision objects remain"
# Recorded from the API: the items of a typed list carry no kind (kubectl wants them), and
# Kueue's finalizers, which no Kueue controller here would ever remove.
mkdir -p "$work/kueue-requests"
python3 - "$fx/kueue-requests" "$work/kueue-requests" <<'PY'
import glob, json, os, sys
for p in sorted(glob.glob(os.path.join(sys.argv[1], "*.json"))):
    o = json.load(open(p))
    for i in o.get("items") or []:
        i.setdefault("kind", o["kind"][:-len("List")])
        i.setdefault("apiVersion", o["apiVersion"])
        i["metadata"].pop("finalizers", None)
    json.dump(o, open(os.path.join(sys.argv[2], os.path.basename(p)), "w"))
PY
n=$(load_scenario "$work/kueue-requests")
pass "kueue-requests: $n objects created with kubectl"
same_report "kueue-requests: LimitRange defaults stop it" 1 "$fx/kueue-requests" pending default/defaulted
same_report "kueue-requests: RuntimeClass overhead stops it" 1 "$fx/kueue-requests" pending default/runtime-overhead
same_report "kueue-requests: its own request holds a reservation" 0 "$fx/kueue-requests" pending default/own-request
out=$(tg pending default/defaulted --kubeconfig "$KUBECONFIG" || true)
grep -q "LimitRange" <<<"$out" && pass "kueue-requests: online report names what the LimitRange added" ||
  fail "kueue-requests: no LimitRange in the online report: $(tail -n 2 <<<"$out")"
out=$(tg pending default/runtime-overhead --kubeconfig "$KUBECONFIG" || true)
grep -q "RuntimeClass" <<<"$out" && pass "kueue-requests: online report names the RuntimeClass overhead" ||
  fail "kueue-requests: no RuntimeClass in the online report: $(tail -n 2 <<<"$out")"

section "online: a broken chain"
unload_scenario "$work/kueue-requests" && pass "kueue-requests objects deleted" || fail "kueue-requests objects remain"
n=$(load_scenario "$fx/broken-chain")
pass "broken-chain: $n objects created with kubectl"
same_report "broken chain: findings" 1 "$fx/broken-chain" chain
tg chain --kubeconfig "$KUBECONFIG" --output json >"$work/chain.json" || true
found=$(python3 -c 'import json, sys; print(len(json.load(open(sys.argv[1]))["findings"]))' "$work/chain.json")
[[ $found == 8 ]] && pass "broken chain: 8 findings online" || fail "broken chain: $found findings online"

section "online: a hierarchy change before it is published (diagnose change)"
unload_scenario "$fx/broken-chain" && pass "broken-chain objects deleted" || fail "broken-chain objects remain"
n=$(load_scenario "$fx/change-zone-rack")
pass "change-zone-rack: $n objects created with kubectl"
# Kueue's queue order reads each Workload's creationTimestamp and UID, which the API set:
# the offline side is a kubectl dump of the live objects, not the fixture files.
mkdir -p "$work/change-dump"
for r in nodes pods topologies.kueue.x-k8s.io resourceflavors.kueue.x-k8s.io clusterqueues.kueue.x-k8s.io \
  localqueues.kueue.x-k8s.io workloads.kueue.x-k8s.io topologysources.worker.gpustack.ai; do
  k get "$r" -A -o json >"$work/change-dump/$r.json"
done
same_report "zone -> zone + rack: one pair stranded" 1 "$work/change-dump" change \
  --revision "$fx/change-zone-rack-revision.yaml" --source "$fx/change-zone-rack-source.json"
same_report "same profiles: nothing evicted" 0 "$work/change-dump" change --revision "$fx/change-zone-rack-same.yaml"
tg change --revision "$fx/change-zone-rack-revision.yaml" --source "$fx/change-zone-rack-source.json" \
  --kubeconfig "$KUBECONFIG" --output json >"$work/change.json" 2>"$work/change.err" || true
cat "$work/change.err" >&2
got=$(python3 -c 'import json, sys; s = json.load(open(sys.argv[1]))["summary"]; print(s["evicted"], s["admittedAgain"], s["stranded"])' "$work/change.json")
[[ $got == "2 1 1" ]] && pass "zone -> zone + rack online: evicted 2, admitted again 1, stranded 1" ||
  fail "zone -> zone + rack online: $got"

section "online: a dry run's Workload answer (workloadImpact) and maxStrandedWorkloads"
# topogate serves an inventory for the rack source with nodesFromAPI, workloadImpact and
# maxStrandedWorkloads 0; a dry run of the rack revision answers the push's 409 with the
# Workload answer the command gives and stores nothing; the push itself is refused and
# recorded, and published once it accepts the impact.
export CERTS_QUIET=1
pki="$work/pki"
"$repo/certs/make-ca.sh" --out "$pki" --name ca --cn "topogate e2e diagnose CA" >/dev/null
"$repo/certs/make-server-cert.sh" --ca-cert "$pki/ca.crt" --ca-key "$pki/ca.key" --out "$pki" \
  --name serving --ip 127.0.0.1 --dns localhost --days 2 >/dev/null
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
printf 'dry-run-writer-token-0123456789abcdef\n' >"$work/writer.token"
cat >"$work/serve.yaml" <<CFG
listen: {address: 127.0.0.1, port: $port}
tls: {certFile: $pki/serving.crt, keyFile: $pki/serving.key}
store: {type: file, directory: $work/store, apiServer: $TOPOGATE_CP_URL, tokenFile: $TOPOGATE_CP_ADMIN_TOKEN_FILE, caFile: $TOPOGATE_CP_CA}
inventories:
  - name: racks
    source: $fx/change-zone-rack-source.json
    nodesFromAPI: true
    workloadImpact: true
    maxStrandedWorkloads: 0
    allowEmptyStart: true
    readers: {bearerTokenFiles: [$work/writer.token]}
    writers: {bearerTokenFiles: [$work/writer.token]}
CFG
"$topogate" serve --config "$work/serve.yaml" >"$work/serve.log" 2>&1 &
serve_pid=$!
stop_serve() { kill "$serve_pid" 2>/dev/null || true; }
e2e_on_exit stop_serve
put_racks() { # FILE QUERY [HEADER...]
  local f=$1 q=$2; shift 2
  curl -sS --cacert "$pki/ca.crt" -H "Authorization: Bearer $(cat "$work/writer.token")" -X PUT \
    -H 'Content-Type: application/yaml' "$@" --data-binary @"$f" -o "$work/dry.json" -w '%{http_code}' \
    "https://127.0.0.1:$port/snapshots/racks$q" 2>/dev/null || echo 000
}
poll 30 test -n "$(curl -sS --cacert "$pki/ca.crt" "https://127.0.0.1:$port/healthz" 2>/dev/null)" || true
code=$(put_racks "$fx/change-zone-rack-revision.yaml" "?dryRun=All")
got=$(python3 -c 'import json, sys
d = json.load(open(sys.argv[1])); s = d["workloads"]["summary"]
print(d["reason"], s["evicted"], s["admittedAgain"], s["stranded"])' "$work/dry.json" 2>&1 || true)
[[ $code == 409 && $got == "Conflict 2 1 1" ]] && pass "dry run of the rack revision: 409 (maxStrandedWorkloads 0), evicted 2, admitted again 1, stranded 1" ||
  fail "dry run: HTTP $code, $got; $(tail -n 3 "$work/serve.log")"
# The same answer; what the lists left out (the command's notes on stderr) leads its notes.
python3 -c 'import json, sys
a = json.load(open(sys.argv[1]))["workloads"]; b = json.load(open(sys.argv[2]))
listed = [l.split("diagnose: note: ", 1)[1] for l in open(sys.argv[3]).read().splitlines() if "diagnose: note: " in l]
n = len(listed)
sys.exit(0 if a["notes"][:n] == listed and dict(a, notes=a["notes"][n:]) == b else 1)' \
  "$work/dry.json" "$work/change.json" "$work/change.err" &&
  pass "the dry run's Workload answer equals diagnose change's, its notes led by the lists' ($(grep -c 'diagnose: note: ' "$work/change.err"))" ||
  fail "the dry run's Workload answer differs from diagnose change's"
[[ -z $(ls -A "$work/store" 2>/dev/null) ]] && pass "the dry run stored nothing" || fail "the store holds $(ls "$work/store")"
code=$(put_racks "$fx/change-zone-rack-revision.yaml" "")
[[ $code == 409 ]] && grep -q "would leave 1 admitted Workload(s) Pending" "$work/dry.json" &&
  pass "the push is refused: it would strand 1 Workload" || fail "push: HTTP $code $(head -c 300 "$work/dry.json")"
code=$(put_racks "$fx/change-zone-rack-revision.yaml" "" -H 'Topogate-Accept-Impact: *')
[[ $code == 201 ]] && pass "accepted (Topogate-Accept-Impact: *): published" || fail "accepted push: HTTP $code $(head -c 300 "$work/dry.json")"
curl -sS --cacert "$pki/ca.crt" -H "Authorization: Bearer $(cat "$work/writer.token")" \
  "https://127.0.0.1:$port/snapshots/racks/history" -o "$work/history.json" 2>/dev/null || true
python3 -c 'import json, sys
h = json.load(open(sys.argv[1]))["items"]
sys.exit(0 if h[0]["result"] == "accepted" and h[1].get("strandedRefused") and h[1]["strandedWorkloads"] == 1 else 1)' \
  "$work/history.json" && pass "history: the refusal with strandedWorkloads 1, then the published revision" ||
  fail "history: $(head -c 400 "$work/history.json")"
curl -sS --cacert "$pki/ca.crt" "https://127.0.0.1:$port/metrics" -o "$work/metrics.txt" 2>/dev/null || true
grep -q '^topogate_inventory_stranded_refusals_total{inventory="racks"} 1' "$work/metrics.txt" &&
  pass "metrics: 1 stranded refusal" ||
  fail "metrics: $(grep -c . "$work/metrics.txt") lines, $(grep stranded "$work/metrics.txt" | head -3)"
kill "$serve_pid" 2>/dev/null; wait "$serve_pid" 2>/dev/null || true

echo "diagnose: $((checks - fails)) passed, $fails failed in $((SECONDS - t_start)) s"
((fails == 0))

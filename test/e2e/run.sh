#!/usr/bin/env bash
# End-to-end tests of topogate's admission webhook against a real
# kube-apiserver (built by build-kube-bins.sh, started by control-plane.sh):
# the chart's CRDs and its ValidatingWebhookConfiguration (rendered by real
# `helm template`, clientConfig.url pointing at a topogate on 127.0.0.1) and
# real kubectl calls.
#
#   runbook       every valid runbook example is applied and created
#   invalid       invalid objects are denied; every field error topogate
#                 reports (`topogate validate`) is in the message kubectl prints
#   warnings      admission warnings reach kubectl
#   dry-run       --dry-run=server is validated and creates nothing
#   delete        DELETE is never blocked, even with topogate down
#   down          topogate stopped: failurePolicy Fail blocks, Ignore admits
#   rotation      serving-certificate rotation with an overlapping caBundle
#                 while kubectl applies in a loop: no failed call
#   nodes         nodesFromAPI: Nodes created, relabelled, deleted with kubectl
#                 change what topogate serves (reject and prune policies)
#   store         the kubernetes store with two topogate processes: replication,
#                 If-Match race (one 412), restarts, apiserver down (503 on push)
#
# Usage: run.sh [test ...]       (default: all, in the order above)
# Env: TOPOGATE_BINARY (default build/{dev,debug,...}/cli/topogate),
#      E2E_KEEP=1 keeps the work folder and control plane for debugging,
#      E2E_ROTATION_CALLS (default 10): kubectl apply calls per rotation phase.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
fx="$here/fixtures"
t_start=$SECONDS

. "$here/lib.sh"
e2e_init e2e
tg_pid=
loop_pid=
stop_processes() {
  declare -F inst_stop_all >/dev/null && inst_stop_all
  [[ -n $loop_pid ]] && kill "$loop_pid" 2>/dev/null || true
  [[ -n $tg_pid ]] && kill "$tg_pid" 2>/dev/null || true
}
e2e_on_exit stop_processes

# ---------------------------------------------------------------- setup
section setup
"$here/control-plane.sh" start
eval "$("$here/control-plane.sh" env)"
k() { "$KUBECTL" "$@"; }

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
port=$(free_port) health=$(free_port)
export CERTS_QUIET=1
pki="$work/pki"
"$repo/certs/make-ca.sh" --out "$pki" --name ca1 --cn "topogate e2e webhook CA 1"
"$repo/certs/make-ca.sh" --out "$pki" --name ca2 --cn "topogate e2e webhook CA 2"
for n in 1 2; do
  "$repo/certs/make-server-cert.sh" --ca-cert "$pki/ca$n.crt" --ca-key "$pki/ca$n.key" --out "$pki" \
    --name serving$n --ip 127.0.0.1 --dns localhost --days 2
done
cat "$pki/ca1.crt" "$pki/ca2.crt" >"$pki/ca1+2.crt"

# The serving certificate in the Secret-volume layout (..data symlink swapped
# atomically), which is how it changes in a Pod.
tls="$work/tls"
mkdir -p "$tls/..v1" "$tls/..v2"
cp "$pki/serving1.crt" "$tls/..v1/tls.crt"; cp "$pki/serving1.key" "$tls/..v1/tls.key"
cp "$pki/serving2.crt" "$tls/..v2/tls.crt"; cp "$pki/serving2.key" "$tls/..v2/tls.key"
ln -s ..v1 "$tls/..data"
ln -s ..data/tls.crt "$tls/tls.crt"
ln -s ..data/tls.key "$tls/tls.key"

openssl rand -hex 24 >"$work/reader.token"
cp "$fx/runbook/data-center.snapshot.yaml" "$work/snapshot.yaml"
cat >"$work/topogate.yaml" <<EOF
listen: {address: 127.0.0.1, port: $port, healthPort: $health}
tls: {certFile: $tls/tls.crt, keyFile: $tls/tls.key}
admission: {workerNamespace: gpustack-system}
inventories:
  - name: data-center
    source: $fx/runbook/data-center.yaml
    snapshot: $work/snapshot.yaml
    readers: {bearerTokenFiles: [$work/reader.token]}
EOF

start_topogate() {
  "$topogate" serve --config "$work/topogate.yaml" >>"$work/topogate.log" 2>&1 &
  tg_pid=$!
  poll 60 curl -fsS -o /dev/null --noproxy '*' "http://127.0.0.1:$health/readyz" 2>/dev/null ||
    { tail -n 40 "$work/topogate.log"; echo "topogate did not become ready" >&2; exit 1; }
}
stop_topogate() {
  kill -TERM "$tg_pid"
  local rc=0
  wait "$tg_pid" || rc=$?
  tg_pid=
  return $rc
}
start_topogate
pass "topogate ready on 127.0.0.1:$port"

e2e_test_crds
k create namespace gpustack-system --dry-run=client -o yaml | k apply -f - >/dev/null
pass "CRDs established"

# The chart's webhook configuration, as `helm template` renders it, aimed at
# the local topogate. The objectSelector leaves objects labelled for the probe
# webhook below to that probe.
render_webhook() { # FAILURE_POLICY CA_BUNDLE_FILE
  "$helm" template topogate "$repo/helm/topogate" --namespace gpustack-system \
    --show-only templates/webhook.yaml \
    --set tls.mode=secret --set tls.existingSecret=unused \
    --set-file tls.caBundle="$2" \
    --set webhook.urlOverride="https://127.0.0.1:$port" \
    --set webhook.failurePolicy="$1" \
    --set 'webhook.objectSelector.matchExpressions[0].key=topogate-e2e/probe' \
    --set 'webhook.objectSelector.matchExpressions[0].operator=DoesNotExist'
}

# The apiserver picks up webhook configuration changes asynchronously. A probe
# webhook (URL on a closed port, failurePolicy Fail) is re-labelled after each
# change; once an object with the new label is refused by the probe, every
# earlier change has been loaded too (one informer, processed in order).
probe_gen=0
probe_refuses() {
  local out
  out=$(k apply --dry-run=server -f - 2>&1 <<EOF
apiVersion: worker.gpustack.ai/v1
kind: TopologySource
metadata:
  name: probe
  labels: {topogate-e2e/probe: "g$probe_gen"}
spec: {levels: [topology.gpustack.ai/rack], nodeLabels: {}}
EOF
) && return 1
  [[ $out == *probe.topogate-e2e.gpustack.ai* ]]
}
sync_webhooks() {
  probe_gen=$((probe_gen + 1))
  k apply -f - >/dev/null <<EOF
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: topogate-e2e-probe}
webhooks:
  - name: probe.topogate-e2e.gpustack.ai
    admissionReviewVersions: [v1]
    sideEffects: None
    failurePolicy: Fail
    timeoutSeconds: 5
    clientConfig: {url: "https://127.0.0.1:1/probe"}
    objectSelector: {matchLabels: {topogate-e2e/probe: "g$probe_gen"}}
    rules:
      - {apiGroups: [worker.gpustack.ai], apiVersions: ["*"], operations: [CREATE, UPDATE], resources: [topologysources]}
EOF
  poll 60 probe_refuses || { echo "webhook configuration change not loaded after 60 s" >&2; return 1; }
}

apply_webhook() { # FAILURE_POLICY CA_BUNDLE_FILE
  render_webhook "$1" "$2" >"$work/webhook.yaml"
  k apply -f "$work/webhook.yaml" >/dev/null
  sync_webhooks
}
apply_webhook Fail "$pki/ca1.crt"
url=$(k get validatingwebhookconfiguration topogate -o jsonpath='{.webhooks[0].clientConfig.url}')
[[ $url == "https://127.0.0.1:$port/validate/topologysources" ]] &&
  pass "chart webhook applied (url $url)" || fail "chart webhook url $url"

want() { [[ $# -eq 0 || " ${selected[*]} " == *" $1 "* ]]; }
selected=("$@")
((${#selected[@]})) || selected=(runbook invalid warnings dry-run delete down rotation nodes store)

# ---------------------------------------------------------------- runbook
if want runbook; then
  section "runbook examples"
  for f in "$fx"/runbook/*.yaml; do
    [[ $f == *.snapshot.yaml ]] && continue
    if out=$(k apply -f "$f" 2>&1); then
      [[ $out == *created* || $out == *configured* || $out == *unchanged* ]] &&
        pass "apply $(basename "$f"): $out" || fail "apply $(basename "$f"): $out"
    else
      fail "apply $(basename "$f"): $out"
    fi
  done
  n=$(k get topologysources.worker.gpustack.ai -o name | wc -l)
  ((n >= 4)) && pass "$n TopologySources stored" || fail "$n TopologySources stored, want >= 4"
fi

# ---------------------------------------------------------------- invalid
# Every error `topogate validate` reports for a file must be in kubectl's
# message, and the message must come from topogate's webhook.
check_denied() { # FILE KIND [EXTRA_KUBECTL_ARGS...]
  local f=$1 kind=$2; shift 2
  local name out expected missing=0 n=0
  name=$(basename "$f")
  if out=$(k apply "$@" -f "$f" 2>&1); then
    fail "$name was admitted: $out"; return
  fi
  # kubectl prints a 422 Invalid with causes as "The <Kind> "<name>" is
  # invalid:" and one "* <field>: <message>" line per cause; topogate's cause
  # messages start with the rule id, which no schema error has.
  if [[ $out != *"admission webhook \"$kind.topogate.gpustack.ai\" denied the request"* &&
        ! $out =~ \[[TM][0-9]+\] ]]; then
    fail "$name denied, but not by topogate: $out"; return
  fi
  expected=$("$topogate" validate "${kind%s}" "$f" 2>&1 || true)
  while IFS= read -r line; do
    # "[T4] spec.levels[1]: Duplicate value: ..." -> rule, field path, type
    [[ $line =~ ^\[([A-Z][0-9]+)\]\ ([^:]+):\ (Required value|Invalid value|Forbidden|Duplicate value|Too many|Unsupported value|Too long|Not found) ]] || continue
    n=$((n + 1))
    local rule=${BASH_REMATCH[1]} path=${BASH_REMATCH[2]} type=${BASH_REMATCH[3]}
    if [[ $out != *"$path: [$rule] $type"* && $out != *"$path: $type"* ]]; then
      echo "     missing from kubectl: $line"
      missing=$((missing + 1))
    fi
  done <<<"$expected"
  if ((n == 0)); then
    fail "$name: topogate validate reported no field errors: $expected"
  elif ((missing)); then
    fail "$name: $missing of $n field errors missing from kubectl's message"
  else
    pass "$name denied by topogate with all $n field errors in kubectl's message $*"
  fi
  echo "$out" >"$work/denied-$name.txt"
}

# What the apiserver itself answers (kubectl reformats it): a 422 whose message
# names topogate's webhook and lists every error, with the causes as details.
check_raw_denial() { # FILE RESOURCE_PATH (e.g. namespaces/default/modeldeployments)
  local json code
  json=$(k create --dry-run=client -o json -f "$1")
  code=$(curl -sS --noproxy '*' --cacert "$TOPOGATE_CP_CA" -o "$work/raw.json" -w '%{http_code}' \
    -H "Authorization: Bearer $(cat "$TOPOGATE_CP_ADMIN_TOKEN_FILE")" -H 'Content-Type: application/json' \
    -X POST --data-binary "$json" "$TOPOGATE_CP_URL/apis/worker.gpustack.ai/v1/$2?dryRun=All")
  if [[ $code == 422 ]] && python3 - "$work/raw.json" "${2##*/}" <<'EOF'
import json, sys
s = json.load(open(sys.argv[1]))
prefix = 'admission webhook "%s.topogate.gpustack.ai" denied the request: ' % sys.argv[2]
causes = s.get("details", {}).get("causes", [])
ok = s["message"].startswith(prefix) and s["reason"] == "Invalid" and causes and \
     all(c["field"] in s["message"] for c in causes)
print(s["message"][:160])
sys.exit(0 if ok else 1)
EOF
  then
    pass "apiserver answer for $(basename "$1"): 422, $(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["details"]["causes"]))' "$work/raw.json") causes, message names the webhook"
  else
    fail "apiserver answer for $(basename "$1"): HTTP $code $(head -c 400 "$work/raw.json")"
  fi
}

if want invalid; then
  section "invalid objects"
  check_denied "$fx/invalid/many-errors.yaml" topologysources
  check_denied "$fx/invalid/empty-levels.yaml" topologysources
  check_denied "$fx/invalid/modeldeployment-bare-word.yaml" modeldeployments
  check_raw_denial "$fx/invalid/many-errors.yaml" topologysources
  check_raw_denial "$fx/invalid/modeldeployment-bare-word.yaml" namespaces/default/modeldeployments
  for f in many-errors empty-levels; do
    k get topologysource "$f" >/dev/null 2>&1 && fail "$f was stored" || pass "$f not stored"
  done
  # An UPDATE that breaks a valid object is denied too.
  k apply -f "$fx/runbook/cloud-zones.yaml" >/dev/null
  if out=$(k patch topologysource cloud-zones --type merge \
      -p '{"spec":{"levels":["topology.kubernetes.io/zone","topology.kubernetes.io/zone"]}}' 2>&1); then
    fail "UPDATE to duplicate levels admitted"
  else
    [[ $out == *'spec.levels[1]: [T4] Duplicate value'* ]] && pass "UPDATE denied: spec.levels[1]: [T4] Duplicate value" ||
      fail "UPDATE denial message: $out"
  fi
fi

# ---------------------------------------------------------------- warnings
if want warnings; then
  section warnings
  if out=$(k apply -f "$fx/warning/short-staleness.yaml" 2>&1); then
    [[ $out == *"Warning:"* ]] && pass "warning reached kubectl: $(grep Warning: <<<"$out" | head -n 3 | tr '\n' ' ')" ||
      fail "no warning printed: $out"
  else
    fail "short-staleness denied: $out"
  fi
fi

# ---------------------------------------------------------------- dry-run
if want dry-run; then
  section "server-side dry run"
  check_denied "$fx/invalid/many-errors.yaml" topologysources --dry-run=server
  sed 's/name: data-center/name: dry-run-only/' "$fx/runbook/data-center.yaml" >"$work/dry.yaml"
  if out=$(k apply --dry-run=server -f "$work/dry.yaml" 2>&1) && [[ $out == *"(server dry run)"* ]]; then
    pass "valid object accepted with --dry-run=server: $out"
  else
    fail "dry run of a valid object: $out"
  fi
  k get topologysource dry-run-only >/dev/null 2>&1 && fail "dry run created the object" ||
    pass "dry run created nothing"
fi

# ---------------------------------------------------------------- delete
if want delete; then
  section delete
  k apply -f "$fx/runbook/inventory-service.yaml" >/dev/null 2>&1 || true
  sed 's/name: inventory-service/name: delete-me/' "$fx/runbook/inventory-service.yaml" | k apply -f - >/dev/null
  out=$(k delete topologysource delete-me 2>&1) && pass "DELETE with topogate up: $out" || fail "DELETE: $out"
fi

# ---------------------------------------------------------------- down
if want down; then
  section "topogate stopped"
  sed 's/name: cloud-zones/name: while-down/' "$fx/runbook/cloud-zones.yaml" >"$work/while-down.yaml"
  sed 's/name: cloud-zones/name: keep-me/' "$fx/runbook/cloud-zones.yaml" | k apply -f - >/dev/null
  stop_topogate && pass "topogate exited cleanly on SIGTERM" || fail "topogate exit status after SIGTERM"
  if out=$(k apply -f "$work/while-down.yaml" 2>&1); then
    fail "failurePolicy Fail: write admitted with topogate down: $out"
  else
    [[ $out == *'failed calling webhook "topologysources.topogate.gpustack.ai"'* ]] &&
      pass "failurePolicy Fail blocks: $(head -c 200 <<<"$out")" || fail "failurePolicy Fail message: $out"
  fi
  out=$(k delete topologysource keep-me 2>&1) && pass "DELETE with topogate down and Fail: $out" || fail "DELETE blocked: $out"

  apply_webhook Ignore "$pki/ca1.crt"
  if out=$(k apply -f "$work/while-down.yaml" 2>&1); then
    pass "failurePolicy Ignore admits: $out"
  else
    fail "failurePolicy Ignore: $out"
  fi
  sed 's/name: many-errors/name: invalid-while-down/' "$fx/invalid/many-errors.yaml" >"$work/invalid-while-down.yaml"
  if out=$(k apply -f "$work/invalid-while-down.yaml" 2>&1); then
    pass "failurePolicy Ignore also admits an invalid object unvalidated (documented risk)"
    k delete -f "$work/invalid-while-down.yaml" >/dev/null
  else
    fail "Ignore with topogate down refused: $out"
  fi
  k delete -f "$work/while-down.yaml" >/dev/null 2>&1 || true
  apply_webhook Fail "$pki/ca1.crt"
  start_topogate
  check_denied "$fx/invalid/empty-levels.yaml" topologysources
fi

# ---------------------------------------------------------------- rotation
served_fp() {
  openssl s_client -connect "127.0.0.1:$port" -servername localhost </dev/null 2>/dev/null |
    openssl x509 -noout -fingerprint -sha256 2>/dev/null
}
apply_loop() { # runs until $work/loop.stop exists; one line per call in $work/loop.log
  local i=0
  : >"$work/loop.log"
  while [[ ! -e $work/loop.stop ]]; do
    i=$((i + 1))
    if out=$(sed "s/^metadata:/metadata:\n  annotations: {topogate-e2e\/iteration: \"$i\"}/" \
        "$fx/runbook/data-center.yaml" | k apply -f - 2>&1); then
      echo "ok $i" >>"$work/loop.log"
    else
      echo "FAIL $i $out" >>"$work/loop.log"
    fi
  done
}
loop_calls() { grep -c . "$work/loop.log" || true; }
loop_wait_calls() { # N: wait until N more calls completed
  local target=$(($(loop_calls) + $1))
  poll 120 bash -c "(( \$(grep -c . '$work/loop.log' || true) >= $target ))"
}
if want rotation; then
  section "serving-certificate rotation"
  fp1=$(openssl x509 -in "$pki/serving1.crt" -noout -fingerprint -sha256)
  fp2=$(openssl x509 -in "$pki/serving2.crt" -noout -fingerprint -sha256)
  [[ $(served_fp) == "$fp1" ]] && pass "serving certificate 1 (CA 1)" || fail "not serving certificate 1"
  admission_calls() { grep -c '"msg":"request".*topologysources' "$work/topogate.log" || true; }
  calls_before=$(admission_calls)
  rm -f "$work/loop.stop"
  apply_loop &
  loop_pid=$!
  per_phase=${E2E_ROTATION_CALLS:-10}
  loop_wait_calls "$per_phase"
  # 1. caBundle: old + new CA.
  apply_webhook Fail "$pki/ca1+2.crt"
  loop_wait_calls "$per_phase"
  # 2. The new certificate, by the kubelet's atomic ..data swap.
  ln -sfn ..v2 "$tls/..data.tmp" && mv -T "$tls/..data.tmp" "$tls/..data"
  if poll 60 bash -c "[[ \$(openssl s_client -connect 127.0.0.1:$port -servername localhost </dev/null 2>/dev/null | openssl x509 -noout -fingerprint -sha256) == '$fp2' ]]"; then
    pass "topogate serves certificate 2 after the swap"
  else
    fail "topogate still serves the old certificate 60 s after the swap"
  fi
  loop_wait_calls "$per_phase"
  # 3. Drop the old CA.
  apply_webhook Fail "$pki/ca2.crt"
  loop_wait_calls "$per_phase"
  touch "$work/loop.stop"
  wait "$loop_pid" || true
  loop_pid=
  total=$(loop_calls)
  failed=$(grep -c '^FAIL' "$work/loop.log" || true)
  reviewed=$(($(admission_calls) - calls_before))
  if ((failed == 0 && total >= 4 * per_phase && reviewed >= total)); then
    pass "rotation: $total kubectl apply calls during the rotation, 0 failed, $reviewed admission reviews served by topogate"
  else
    fail "rotation: $failed of $total kubectl apply calls failed ($reviewed admission reviews logged by topogate)"
    grep '^FAIL' "$work/loop.log" | head -n 5
  fi
  # The apiserver now trusts only CA 2, and topogate still validates.
  check_denied "$fx/invalid/many-errors.yaml" topologysources --dry-run=server
fi

# ---------------------------------------------------------------- extra topogate instances
declare -A inst_pid inst_health inst_port
inst_start() { # NAME CONFIG_FILE
  local name=$1 cfg=$2
  "$topogate" serve --config "$cfg" >>"$work/$name.log" 2>&1 &
  inst_pid[$name]=$!
  if ! poll 60 curl -fsS -o /dev/null --noproxy '*' "http://127.0.0.1:${inst_health[$name]}/livez" 2>/dev/null; then
    tail -n 20 "$work/$name.log"; return 1
  fi
}
inst_stop() { # NAME
  local name=$1 rc=0
  [[ -n ${inst_pid[$name]:-} ]] || return 0
  kill -TERM "${inst_pid[$name]}" 2>/dev/null || true
  wait "${inst_pid[$name]}" || rc=$?
  inst_pid[$name]=
  return $rc
}
inst_stop_all() { local n; for n in "${!inst_pid[@]}"; do inst_stop "$n" || true; done; }
# http_code NAME METHOD PATH TOKEN_FILE [curl args...]: status on stdout,
# body in $work/body, headers in $work/headers.
http_code() {
  local name=$1 method=$2 path=$3 tokf=$4; shift 4
  curl -sS --noproxy '*' --cacert "$pki/ca1.crt" -X "$method" -o "$work/body" -D "$work/headers" \
    -w '%{http_code}' -H "Authorization: Bearer $(cat "$tokf")" "$@" \
    "https://127.0.0.1:${inst_port[$name]}$path" 2>/dev/null || echo 000
}
get_is() { # NAME INVENTORY STATUS [REVISION]
  local code
  code=$(http_code "$1" GET "/snapshots/$2" "$work/reader.token")
  [[ $code == "$3" ]] || return 1
  [[ -z ${4:-} ]] || grep -q "\"revision\":\"$4\"" "$work/body"
}
kube_cfg() { # NAME STORE_TYPE INVENTORIES_YAML
  inst_port[$1]=$(free_port); inst_health[$1]=$(free_port)
  cat >"$work/$1.yaml" <<CFG
listen: {address: 127.0.0.1, port: ${inst_port[$1]}, healthPort: ${inst_health[$1]}}
tls: {certFile: $pki/serving1.crt, keyFile: $pki/serving1.key}
admission: {workerNamespace: gpustack-system}
resyncInterval: 2s
store:
  type: $2
  directory: $work/$1-store
  namespace: gpustack-system
  apiServer: $TOPOGATE_CP_URL
  tokenFile: $TOPOGATE_CP_USER_TOKEN_FILE
  caFile: $TOPOGATE_CP_CA
inventories:
$3
CFG
}
node_yaml() { # NAME POOL
  printf 'apiVersion: v1\nkind: Node\nmetadata:\n  name: %s\n  labels: {topogate-e2e/pool: %s}\n' "$1" "$2"
}
# The chart's RBAC objects of one kind, rendered by helm with extra --set flags.
chart_rbac() { # KIND [--set ...]
  local kind=$1; shift
  "$helm" template topogate "$repo/helm/topogate" --namespace gpustack-system --show-only templates/rbac.yaml "$@" |
    python3 -c 'import sys, yaml
for d in yaml.safe_load_all(sys.stdin):
    if d and d["kind"] == sys.argv[1]:
        print("---"); print(yaml.safe_dump(d))' "$kind"
}

# ---------------------------------------------------------------- nodes
if want nodes; then
  section "Node watch (nodesFromAPI) against the apiserver"
  # The chart's ClusterRole for nodesFromAPI, bound to the unprivileged user the
  # topogate process authenticates as: shows the chart's RBAC is enough.
  chart_rbac ClusterRole --set 'inventories[0].name=x' --set 'inventories[0].source.levels[0]=a' \
    --set 'inventories[0].nodesFromAPI=true' --set 'inventories[0].readers.bearer.existingSecret=s' |
    k apply -f - >/dev/null
  k create clusterrolebinding topogate-e2e-nodes --clusterrole topogate-nodes --user topogate-e2e \
    --dry-run=client -o yaml | k apply -f - >/dev/null
  sed -e 's/name: data-center/name: pool-gpu/' \
    -e 's/nodeSelector: {}/nodeSelector: {matchLabels: {topogate-e2e\/pool: gpu}}/' \
    "$fx/runbook/data-center.yaml" >"$work/pool-source.yaml"
  sed 's/worker-b/worker-c/' "$work/snapshot.yaml" >"$work/snapshot-late.yaml"
  kube_cfg nodes file "  - name: nodes-reject
    source: $work/pool-source.yaml
    snapshot: $work/snapshot.yaml
    nodesFromAPI: true
    unknownNodes: reject
    allowEmptyStart: true
    readers: {bearerTokenFiles: [$work/reader.token]}
  - name: nodes-prune
    source: $work/pool-source.yaml
    snapshot: $work/snapshot.yaml
    nodesFromAPI: true
    unknownNodes: prune
    allowEmptyStart: true
    readers: {bearerTokenFiles: [$work/reader.token]}
  - name: nodes-late
    source: $work/pool-source.yaml
    snapshot: $work/snapshot-late.yaml
    nodesFromAPI: true
    unknownNodes: reject
    allowEmptyStart: true
    readers: {bearerTokenFiles: [$work/reader.token]}"
  k delete node worker-a worker-b worker-c --ignore-not-found >/dev/null
  { node_yaml worker-a gpu; echo ---; node_yaml worker-b gpu; } | k apply -f - >/dev/null
  status_of() { echo "$(http_code nodes GET "/snapshots/$1" "$work/reader.token") $(head -c 300 "$work/body")"; }
  if inst_start nodes "$work/nodes.yaml"; then
    poll 30 get_is nodes nodes-reject 200 inventory-42 && pass "Nodes listed at start: inventory-42 served" ||
      fail "Nodes listed at start: $(status_of nodes-reject)"
    poll 30 get_is nodes nodes-late 503 && pass "snapshot naming the absent worker-c is not served (503)" ||
      fail "absent worker-c: $(status_of nodes-late)"
    k label node worker-b topogate-e2e/pool=cpu --overwrite >/dev/null
    poll 30 get_is nodes nodes-reject 503 && pass "worker-b relabelled out of the nodeSelector (kubectl label): reject stops serving (503)" ||
      fail "after relabel: $(status_of nodes-reject)"
    k label node worker-b topogate-e2e/pool=gpu --overwrite >/dev/null
    poll 30 get_is nodes nodes-reject 200 inventory-42 && pass "worker-b relabelled back: served again" ||
      fail "after relabel back: $(status_of nodes-reject)"
    k delete node worker-b >/dev/null
    poll 30 get_is nodes nodes-reject 503 && pass "worker-b deleted (kubectl delete): reject stops serving (503)" ||
      fail "after delete (reject): $(status_of nodes-reject)"
    pruned() { get_is nodes nodes-prune 200 && grep -q worker-a "$work/body" && ! grep -q worker-b "$work/body"; }
    poll 30 pruned && pass "worker-b deleted: prune serves worker-a only ($(grep -o '"revision":"[^"]*"' "$work/body"))" ||
      fail "after delete (prune): $(status_of nodes-prune)"
    node_yaml worker-b gpu | k apply -f - >/dev/null
    poll 30 get_is nodes nodes-reject 200 inventory-42 && pass "worker-b created again: served again" ||
      fail "after re-create: $(status_of nodes-reject)"
    node_yaml worker-c gpu | k apply -f - >/dev/null
    poll 30 get_is nodes nodes-late 200 && pass "worker-c created (kubectl apply): the waiting snapshot is served" ||
      fail "after creating worker-c: $(status_of nodes-late)"
    inst_stop nodes && pass "Node-watching topogate exited cleanly" || fail "Node-watching topogate exit status"
  else
    fail "topogate with nodesFromAPI did not start: $(tail -n 3 "$work/nodes.log")"
  fi
  k delete node worker-a worker-b worker-c --ignore-not-found >/dev/null
fi

# ---------------------------------------------------------------- store
if want store; then
  section "kubernetes store with two topogate processes"
  chart_rbac Role | k apply -f - >/dev/null
  k -n gpustack-system create rolebinding topogate-e2e-store --role topogate-store --user topogate-e2e \
    --dry-run=client -o yaml | k apply -f - >/dev/null
  openssl rand -hex 24 >"$work/writer.token"
  invs="  - name: pushed
    source: $fx/runbook/data-center.yaml
    allowEmptyStart: true
    readers: {bearerTokenFiles: [$work/reader.token]}
    writers: {bearerTokenFiles: [$work/writer.token]}"
  kube_cfg a kubernetes "$invs"
  kube_cfg b kubernetes "$invs"
  snap() { sed "s/^revision: .*/revision: $1/" "$fx/runbook/data-center.snapshot.yaml" >"$work/$1.yaml"; }
  push() { # NAME REVISION [curl args]
    local n=$1 r=$2; shift 2
    snap "$r"
    http_code "$n" PUT /snapshots/pushed "$work/writer.token" -H 'Content-Type: application/yaml' \
      --data-binary @"$work/$r.yaml" "$@"
  }
  etag_of() { sed -n 's/^etag: *//Ip' "$work/headers" | tr -d '\r'; }
  if inst_start a "$work/a.yaml" && inst_start b "$work/b.yaml"; then
    code=$(push a rev-1)
    [[ $code == 200 || $code == 201 ]] && pass "push rev-1 to A: $code" || fail "push rev-1 to A: $code $(cat "$work/body")"
    poll 30 get_is b pushed 200 rev-1 && pass "B serves rev-1 pushed to A" || fail "B does not serve rev-1"
    get_is a pushed 200 rev-1 || true
    e1=$(etag_of)
    get_is b pushed 200 rev-1 || true
    eb=$(etag_of)
    [[ -n $e1 && $e1 == "$eb" ]] && pass "A and B serve the same ETag $e1" || fail "ETags differ: A '$e1', B '$eb'"
    cms=$(k -n gpustack-system get configmaps -l app.kubernetes.io/managed-by=topogate -o name | tr '\n' ' ')
    [[ -n $cms ]] && pass "revision stored in the apiserver: $cms" || fail "no topogate ConfigMap in gpustack-system"
    # Concurrent pushes with the same If-Match, one to each replica.
    snap rev-2a; snap rev-2b
    for r in a b; do
      curl -sS --noproxy '*' --cacert "$pki/ca1.crt" -X PUT -o /dev/null -w '%{http_code}' \
        -H "Authorization: Bearer $(cat "$work/writer.token")" -H "If-Match: $e1" \
        -H 'Content-Type: application/yaml' --data-binary @"$work/rev-2$r.yaml" \
        "https://127.0.0.1:${inst_port[$r]}/snapshots/pushed" >"$work/race-$r" 2>/dev/null &
    done
    wait "$!" || true
    poll 30 bash -c "[[ -s '$work/race-a' && -s '$work/race-b' ]]" || true
    ra=$(cat "$work/race-a") rb=$(cat "$work/race-b")
    if [[ ($ra =~ ^20[01]$ && $rb == 412) || ($rb =~ ^20[01]$ && $ra == 412) ]]; then
      pass "concurrent If-Match pushes: A $ra, B $rb (one wins, the other 412)"
    else
      fail "concurrent If-Match pushes: A $ra, B $rb"
    fi
    winner=rev-2a; [[ $rb =~ ^20[01]$ ]] && winner=rev-2b
    poll 30 get_is a pushed 200 $winner && poll 30 get_is b pushed 200 $winner &&
      pass "both replicas serve the winner $winner" || fail "replicas do not both serve $winner"
    inst_stop a && pass "A exited cleanly on SIGTERM" || fail "A exit status"
    inst_start a "$work/a.yaml" || fail "A did not restart"
    get_is a pushed 200 $winner && pass "A restarted: serves $winner at once" ||
      fail "A after restart: $(http_code a GET /snapshots/pushed "$work/reader.token")"
    inst_stop b || true
    inst_start b "$work/b.yaml" || fail "B did not restart"
    get_is b pushed 200 $winner && pass "B restarted: serves $winner at once" || fail "B after restart"
    # The apiserver goes away: pushes fail with 503, reads keep the last revision.
    "$here/control-plane.sh" apiserver-stop
    code=$(push a rev-3)
    [[ $code == 503 ]] && pass "apiserver down: push answered 503: $(head -c 160 "$work/body")" ||
      fail "apiserver down: push answered $code $(head -c 200 "$work/body")"
    get_is a pushed 200 $winner && get_is b pushed 200 $winner && pass "apiserver down: A and B still serve $winner" ||
      fail "apiserver down: reads failed"
    "$here/control-plane.sh" apiserver-start || fail "apiserver did not restart"
    pushed_again() { local c; c=$(push a rev-3); [[ $c == 200 || $c == 201 ]]; }
    poll 60 pushed_again && poll 30 get_is b pushed 200 rev-3 && pass "apiserver back: rev-3 pushed to A, served by B" ||
      fail "apiserver back: push or replication failed"
    inst_stop a && inst_stop b && pass "A and B exited cleanly" || fail "A/B exit status"
  else
    fail "topogate with the kubernetes store did not start: $(tail -n 3 "$work/a.log" "$work/b.log" 2>/dev/null)"
  fi
  inst_stop_all
fi

section summary
if [[ -n $tg_pid ]]; then
  stop_topogate && pass "topogate exited cleanly on SIGTERM" || fail "topogate exit status after SIGTERM"
fi
echo "e2e: $((checks - fails)) passed, $fails failed in $((SECONDS - t_start)) s"
((fails == 0))

#!/usr/bin/env bash
# The TAS lab: Kueue's real controller manager deciding Topology-Aware Scheduling
# admissions on a local control plane, with topology labels delivered the way
# production does (topogate serves a snapshot; a consumer reads it over HTTPS and
# labels the Nodes with it and their profile), so that `topogate diagnose` can be
# held to what Kueue decides. See docs/operations.md ("The TAS lab").
#
# Usage: tas-lab.sh up [SCENARIO.json]   start (idempotent) and load the base inventory
#                                       (default test/e2e/tas/eks-validation.json,
#                                       its Nodes and chain only); prints export KUBECONFIG=...
#        tas-lab.sh run [--keep] SCENARIO.json
#                                       replace the loaded inventory with the scenario's,
#                                       create its Workloads, wait for Kueue, run
#                                       `topogate diagnose pending` for each, print one JSON
#                                       line per Workload, remove the scenario's objects
#                                       (--keep leaves them). Exit 3 when an `expect` of the
#                                       scenario is not met.
#        tas-lab.sh change [--keep] SCENARIO.json
#                                       the runbook's live hierarchy change, rehearsed: run's
#                                       steps, then the scenario's `change` published through
#                                       topogate; prints the profile impact against the Nodes
#                                       relabelled, and which Workloads Kueue evicted and
#                                       readmitted (exit 3 when they disagree or an
#                                       expectation is not met)
#        tas-lab.sh nfd start|stop     start or stop nfd-master alone (TAS_LAB_NFD_FLAGS)
#        tas-lab.sh relabel            the labeler once more, against the snapshot topogate serves
#        tas-lab.sh status | down | env
#
# Pieces (all under the state directory, nothing else on the machine is changed):
#   control plane   test/e2e/control-plane.sh start (etcd + kube-apiserver), own TOPOGATE_CP_DIR
#   Kueue           the manager built by test/e2e/build-kueue.sh (pinned sigs.k8s.io/kueue),
#                   its CRDs from the same module, run as a local process: leader election
#                   off, its webhooks served on 127.0.0.1 with a certificate from certs/ and
#                   registered with the apiserver by URL (so defaulting and validation happen
#                   as in production), metrics and health on free local ports
#   Nodes           Node objects whose status (capacity, allocatable, Ready) is set through
#                   the status subresource; no kubelet. Existing usage = Pods bound to a
#                   Node (spec.nodeName), which Kueue's TAS and diagnose both count
#   topogate        `topogate serve` with the scenario's TopologySource and snapshot
#   NFD             the real nfd-master built by test/e2e/build-nfd.sh, its CRDs from the same
#                   module, run as a local process (-kubeconfig, its HTTP port free, NODE_NAME a
#                   Node that exists while it starts); TAS_LAB_NFD_FLAGS adds flags
#   labeler         conformance/labeler: reads the snapshot over HTTPS with the conformance
#                   consumer, takes the profile topogate computed, writes the consumer's
#                   NodeFeatures (gpustack-system), waits until nfd-master applied them
#                   (TAS_LAB_NFD_WAIT s, default 60), then the profile label on the Nodes
# Env: TAS_LAB_DIR (state; default ${TMPDIR:-/tmp}/topogate-tas-lab-$UID), TOPOGATE_BINARY,
#      TOPOGATE_CACHE, TAS_LAB_TIMEOUT (readiness deadline, default 180 s),
#      TAS_LAB_DRIFT_GRACE (topogate's driftGracePeriod for the lab inventory, default 5m).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
e2e=$repo/test/e2e
lab=${TAS_LAB_DIR:-${TMPDIR:-/tmp}/topogate-tas-lab-$(id -u)}
timeout=${TAS_LAB_TIMEOUT:-180}
base_scenario=$e2e/tas/eks-validation.json
py=$here/tas_lab.py
export TOPOGATE_CP_DIR=$lab/cp

log() { echo "tas-lab: $*" >&2; }
die() { log "$*"; exit 1; }
# The interpreter behind python3, resolved once: a version manager's shim (pyenv's is a shell
# script that runs pyenv) costs about 0.1 s a call, and a case makes a dozen calls.
python=$(python3 -c 'import sys; print(sys.executable)')
# PIDFILE names a process that runs: not gone, and not a zombie (a process whose parent
# exited is reaped by PID 1, which may take a second after it exited).
alive() {
  local pid state
  [[ -s $1 ]] && pid=$(cat "$1") && kill -0 "$pid" 2>/dev/null || return 1
  state=$(sed 's/^.*) //' "/proc/$pid/stat" 2>/dev/null) || return 1
  [[ ${state:0:1} != Z ]]
}
free_port() { "$python" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

stop_pid() { # PIDFILE NAME: SIGTERM, SIGKILL after 15 s
  local pf=$1 pid i
  alive "$pf" || { rm -f "$pf"; return 0; }
  pid=$(cat "$pf")
  kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < 300; i++)); do alive "$pf" || break; sleep 0.05; done
  alive "$pf" && { log "$2 did not exit after SIGTERM, sending SIGKILL"; kill -KILL "$pid" 2>/dev/null || true; }
  rm -f "$pf"
}

find_topogate() {
  local p
  if [[ -n ${TOPOGATE_BINARY:-} ]]; then echo "$TOPOGATE_BINARY"; return; fi
  for p in dev release debug; do
    [[ -x $repo/build/$p/cli/topogate ]] && { echo "$repo/build/$p/cli/topogate"; return; }
  done
  log "no topogate binary: building the dev preset"
  (cd "$repo" && cmake --preset dev >&2 && nice -n 10 cmake --build --preset dev --target topogate >&2)
  echo "$repo/build/dev/cli/topogate"
}

# Binaries and paths; cheap when everything is cached. `up` records the result in
# $lab/prepared.env, which run and change reuse (each check runs go list and every cached
# binary's --version: seconds per case otherwise).
prepare() {
  if [[ -s $lab/prepared.env && -x $lab/bin/labeler ]]; then
    local want=${TOPOGATE_BINARY:-}
    # shellcheck disable=SC1091
    . "$lab/prepared.env"
    [[ -n $want ]] && export TOPOGATE_BINARY=$want
    [[ -x $KUBECTL && -x $TOPOGATE_BINARY && -x $KUEUE_BIN_DIR/kueue-manager && -x ${NFD_BIN_DIR:-/nonexistent}/nfd-master ]] && return 0
  fi
  mkdir -p "$lab/bin"
  eval "$("$e2e/build-kube-bins.sh" --print-env)"
  export KUBE_BIN_DIR
  eval "$("$e2e/build-kueue.sh" --print-env)"
  eval "$("$e2e/build-nfd.sh" --print-env)"
  topogate=$(find_topogate)
  [[ -x $topogate ]] || die "no topogate binary at $topogate"
  if [[ ! -x $lab/bin/labeler || -n $(find "$repo/conformance" -name '*.go' -newer "$lab/bin/labeler" -print -quit) ]]; then
    (cd "$repo/conformance" && GOTOOLCHAIN=local GOFLAGS=-mod=readonly nice -n 10 go build -o "$lab/bin/labeler" ./labeler)
  fi
  export KUBECTL=$KUBE_BIN_DIR/kubectl TOPOGATE_BINARY=$topogate TAS_LAB_DIR=$lab
  declare -p KUBE_BIN_DIR KUEUE_BIN_DIR KUEUE_VERSION KUEUE_CRD_DIR NFD_BIN_DIR NFD_VERSION NFD_CRD_DIR KUBECTL TOPOGATE_BINARY 2>/dev/null |
    sed 's/^declare -[-a-z]* /export /' >"$lab/prepared.env"
}

cp_env() { eval "$("$e2e/control-plane.sh" env)"; export KUBECONFIG KUBECTL; }
k() { "$KUBECTL" "$@"; }

make_pki() {
  local pki=$lab/pki
  mkdir -p "$pki"
  export CERTS_QUIET=1
  "$repo/certs/make-ca.sh" --out "$pki" --cn "topogate TAS lab CA" >/dev/null
  "$repo/certs/make-server-cert.sh" --ca-cert "$pki/ca.crt" --ca-key "$pki/ca.key" --out "$pki" \
    --name kueue-webhook --ip 127.0.0.1 --dns localhost --days 30 >/dev/null
  "$repo/certs/make-server-cert.sh" --ca-cert "$pki/ca.crt" --ca-key "$pki/ca.key" --out "$pki" \
    --name kueue-metrics --ip 127.0.0.1 --dns localhost --days 30 >/dev/null
  "$repo/certs/make-server-cert.sh" --ca-cert "$pki/ca.crt" --ca-key "$pki/ca.key" --out "$pki" \
    --name topogate --ip 127.0.0.1 --dns localhost --days 30 >/dev/null
  [[ -s $pki/reader.token ]] || (umask 077; head -c 32 /dev/urandom | base64 | tr -d '/+=\n' >"$pki/reader.token")
  mkdir -p "$lab/kueue/webhook-certs" "$lab/kueue/metrics-certs"
  cp "$pki/kueue-webhook.crt" "$lab/kueue/webhook-certs/tls.crt"; cp "$pki/kueue-webhook.key" "$lab/kueue/webhook-certs/tls.key"
  cp "$pki/kueue-metrics.crt" "$lab/kueue/metrics-certs/tls.crt"; cp "$pki/kueue-metrics.key" "$lab/kueue/metrics-certs/tls.key"
}

install_crds() {
  local f
  for f in "$KUEUE_CRD_DIR"/*.yaml; do k apply --server-side -f "$f" >/dev/null; done
  k apply --server-side -f "$repo/test/e2e/crds/" >/dev/null
  k apply --server-side -f "$NFD_CRD_DIR/nfd-api-crds.yaml" >/dev/null
  # kubectl wait fails outright on a CRD whose status is not written yet ("accessor error"):
  # retry until every CRD is Established.
  local i
  for ((i = 0; i < 60; i++)); do
    k wait --for condition=Established --timeout 60s crd --all >/dev/null 2>&1 && break
    sleep 1
  done
  ((i < 60)) || die "the CRDs were not Established after 60 s"
  local ns
  for ns in kueue-system gpustack-system node-feature-discovery; do
    k get namespace "$ns" >/dev/null 2>&1 || k create namespace "$ns" >/dev/null
  done
}

# Kueue's own webhook manifests (config/components/webhook) for its kueue.x-k8s.io
# kinds, pointed by URL at the local manager; the job-framework webhooks (Pods, Jobs,
# ...) are left out with their integrations.
register_webhooks() {
  local port=$1
  "$python" - "$KUEUE_CRD_DIR/../../webhook/manifests.yaml" "$port" "$lab/pki/ca.crt" <<'PY' | k apply --server-side --force-conflicts -f - >/dev/null
import base64, json, sys, yaml
src, port, ca = sys.argv[1], sys.argv[2], base64.b64encode(open(sys.argv[3], "rb").read()).decode()
items = []
for doc in yaml.safe_load_all(open(src)):
    hooks = []
    for w in doc["webhooks"]:
        if not any("kueue.x-k8s.io" in r.get("apiGroups", []) for r in w["rules"]):
            continue
        path = w["clientConfig"]["service"]["path"]
        w["clientConfig"] = {"url": f"https://127.0.0.1:{port}{path}", "caBundle": ca}
        w["timeoutSeconds"] = 10
        hooks.append(w)
    doc["metadata"] = {"name": "kueue-" + doc["metadata"]["name"], "labels": {"tas-lab.topogate.invalid/kueue": "webhook"}}
    doc["webhooks"] = hooks
    items.append(doc)
print(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
PY
}

start_kueue() {
  local d=$lab/kueue wport hport mport vport
  if alive "$d/pid"; then return 0; fi
  wport=$(free_port); hport=$(free_port); mport=$(free_port); vport=$(free_port)
  cat >"$d/config.yaml" <<EOF
apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
namespace: kueue-system
health:
  healthProbeBindAddress: 127.0.0.1:$hport
metrics:
  bindAddress: 127.0.0.1:$mport
webhook:
  host: 127.0.0.1
  port: $wport
  certDir: $d/webhook-certs
leaderElection:
  leaderElect: false
internalCertManagement:
  enable: false
clientConnection:
  qps: 100
  burst: 200
integrations:
  frameworks: ["batch/job"]
EOF
  echo "$hport" >"$d/health.port"; echo "$mport" >"$d/metrics.port"; echo "$wport" >"$d/webhook.port"
  register_webhooks "$wport"
  # With internal certificate management off, Kueue reads its metrics certificate from the
  # fixed path /etc/kueue/metrics/certs. The manager runs in a private mount namespace whose
  # /etc is an overlay, so that path is the lab's without writing to the machine's /etc.
  mkdir -p "$d/etc-upper" "$d/etc-work"
  unshare --mount --propagation private true 2>/dev/null ||
    die "unshare --mount is not permitted here (the lab needs root or CAP_SYS_ADMIN for Kueue's fixed metrics certificate path)"
  # shellcheck disable=SC2016
  unshare --mount --propagation private sh -c '
    mount -t overlay overlay -o "lowerdir=/etc,upperdir=$1/etc-upper,workdir=$1/etc-work" /etc &&
    mkdir -p /etc/kueue/metrics && rm -rf /etc/kueue/metrics/certs && cp -r "$1/metrics-certs" /etc/kueue/metrics/certs &&
    exec "$2" --config "$1/config.yaml" --kubeconfig "$3" --visibility-server-port "$4" \
      --feature-gates VisibilityOnDemand=false --zap-log-level 2' \
    sh "$d" "$KUEUE_BIN_DIR/kueue-manager" "$KUBECONFIG" "$vport" >"$d/kueue.log" 2>&1 &
  echo $! >"$d/pid"
  local deadline=$((SECONDS + timeout))
  until curl -fsS "http://127.0.0.1:$hport/readyz" >/dev/null 2>&1; do
    alive "$d/pid" || { tail -n 30 "$d/kueue.log" >&2; die "Kueue exited during start-up (log: $d/kueue.log)"; }
    ((SECONDS < deadline)) || { tail -n 30 "$d/kueue.log" >&2; die "Kueue not ready after $timeout s"; }
    sleep 0.3
  done
}

# start_nfd: nfd-master (test/e2e/nfd.sh shows it against a local apiserver). It patches its
# own Node once at start (NODE_NAME must exist then): a Node of its own, without capacity or
# profile, that lives only until nfd-master answers /healthz (its informers synced).
nfd_node=tas-lab-nfd-master
start_nfd() {
  local d=$lab/nfd port t0=$SECONDS
  alive "$d/pid" && return 0
  mkdir -p "$d"
  port=$(free_port)
  echo "$port" >"$d/port"
  printf '%s\n' '{}' >"$d/nfd-master.conf"
  printf '{"apiVersion":"v1","kind":"Node","metadata":{"name":"%s","labels":{"kubernetes.io/hostname":"%s"},"annotations":{"node.alpha.kubernetes.io/ttl":"0"}},"spec":{"unschedulable":true}}' \
    "$nfd_node" "$nfd_node" | k create -f - >/dev/null 2>&1 || true
  # shellcheck disable=SC2086
  env -u http_proxy -u https_proxy -u HTTP_PROXY -u HTTPS_PROXY NODE_NAME=$nfd_node KUBERNETES_NAMESPACE=node-feature-discovery \
    "$NFD_BIN_DIR/nfd-master" -kubeconfig "$KUBECONFIG" -port "$port" -config "$d/nfd-master.conf" -v=2 \
    ${TAS_LAB_NFD_FLAGS:-} </dev/null >>"$d/nfd-master.log" 2>&1 &
  echo $! >"$d/pid"
  printf '%s\n' "${TAS_LAB_NFD_FLAGS:-}" >"$d/flags"
  until curl -fsS --noproxy '*' --max-time 1 "http://127.0.0.1:$port/healthz" >/dev/null 2>&1; do
    alive "$d/pid" || { tail -n 20 "$d/nfd-master.log" >&2; die "nfd-master exited during start-up (log: $d/nfd-master.log)"; }
    ((SECONDS - t0 < 60)) || die "nfd-master not ready after 60 s (log: $d/nfd-master.log)"
    sleep 0.05
  done
  k delete node "$nfd_node" --wait=false >/dev/null 2>&1 || true
}

# start_topogate DIR: topogate serve for the inventory in DIR (restarted: the
# TopologySource, hence the levels, is read at start).
start_topogate() {
  local d=$lab/topogate port
  stop_pid "$d/pid" topogate
  port=$(free_port)
  cat >"$d/topogate.yaml" <<EOF
listen:
  address: 127.0.0.1
  port: $port
tls:
  certFile: $lab/pki/topogate.crt
  keyFile: $lab/pki/topogate.key
logging:
  level: warn
  accessLog: false
# The Node list from the lab's API: the first revision's profile impact is measured against
# the profiles the Nodes carry (what a restart with new levels reports in production).
store:
  type: none
  apiServer: $TOPOGATE_CP_URL
  tokenFile: $TOPOGATE_CP_ADMIN_TOKEN_FILE
  caFile: $TOPOGATE_CP_CA
inventories:
  - name: lab
    source: topologysource.yaml
    snapshot: snapshot.yaml
    nodesFromAPI: true
    driftGracePeriod: ${TAS_LAB_DRIFT_GRACE:-5m}
    readers:
      bearerTokenFiles: [$lab/pki/reader.token]
EOF
  echo "$port" >"$d/port"
  "$TOPOGATE_BINARY" serve --config "$d/topogate.yaml" >"$d/topogate.log" 2>&1 &
  echo $! >"$d/pid"
  local deadline=$((SECONDS + 30))
  until curl -fsS --cacert "$lab/pki/ca.crt" "https://127.0.0.1:$port/readyz" >/dev/null 2>&1; do
    alive "$d/pid" || { tail -n 20 "$d/topogate.log" >&2; die "topogate exited (log: $d/topogate.log)"; }
    ((SECONDS < deadline)) || die "topogate not ready after 30 s"
    sleep 0.1
  done
}

# The consumer's side: the labeler reads topogate's revision over HTTPS, writes the
# NodeFeatures, waits for nfd-master, writes the profiles.
label() {
  alive "$lab/nfd/pid" || log "nfd-master is not running: the NodeFeatures will not be applied"
  "$lab/bin/labeler" --nfd-wait "${TAS_LAB_NFD_WAIT:-60}s" --source "$(cat "$lab/topogate/source")" --url "https://127.0.0.1:$(cat "$lab/topogate/port")/snapshots/lab" --ca "$lab/pki/ca.crt" \
    --token-file "$lab/pki/reader.token" --levels "$(cat "$lab/topogate/levels")" \
    --api "$TOPOGATE_CP_URL" --api-ca "$TOPOGATE_CP_CA" --api-token-file "$TOPOGATE_CP_ADMIN_TOKEN_FILE"
}

# load SCENARIO: inventory through topogate and the labeler, then the chain.
load() {
  local s=$1 d=$lab/topogate rev
  mkdir -p "$d"
  "$python" "$py" unload
  rev=$("$python" "$py" inventory "$s" "$d")
  "$python" "$py" nodes "$s" >/dev/null
  start_topogate
  "$python" "$py" source "$s" "$rev" >"$d/source"
  label >"$lab/labels.json"
  "$python" "$py" chain "$s" "$lab/labels.json" >"$lab/chain.json"
  printf '%s\n' "$s" >"$lab/loaded"
  log "loaded $(basename "$s") (revision $rev): $(cat "$lab/chain.json")"
}

cmd_up() {
  local s=${1:-$base_scenario} t0=$SECONDS
  "$python" "$py" check "$s" >/dev/null
  mkdir -p "$lab/kueue" "$lab/topogate"
  prepare
  log "binaries ready in $((SECONDS - t0)) s"
  "$e2e/control-plane.sh" start >&2
  cp_env
  make_pki
  install_crds
  start_kueue
  log "Kueue ready in $((SECONDS - t0)) s (log: $lab/kueue/kueue.log)"
  start_nfd
  log "nfd-master $NFD_VERSION ready in $((SECONDS - t0)) s (log: $lab/nfd/nfd-master.log)"
  load "$s"
  log "lab up in $((SECONDS - t0)) s"
  echo "export KUBECONFIG=$KUBECONFIG"
}

require_up() {
  [[ -f $TOPOGATE_CP_DIR/env ]] && alive "$lab/kueue/pid" || die "the lab is not up (scripts/tas-lab.sh up)"
}

cmd_run() {
  local keep=0 s rc=0
  [[ ${1:-} == --keep ]] && { keep=1; shift; }
  s=${1:?usage: tas-lab.sh run [--keep] SCENARIO.json}
  "$python" "$py" check "$s" >/dev/null
  prepare
  require_up
  cp_env
  load "$s"
  "$python" "$py" workloads "$s" || rc=$?
  if ((keep == 0)); then
    "$python" "$py" unload
    rm -f "$lab/loaded"
  fi
  return "$rc"
}

# change SCENARIO: the runbook's "Change a live hierarchy", rehearsed. Loads the scenario,
# submits its Workloads (as run does), then publishes its `change` (new levels and labels):
# topogate restarts with the new TopologySource (as the chart restarts it on a configuration
# change) and reports the profile impact of its first revision against the Nodes' labels;
# the labeler applies the revision; the Nodes relabelled must be exactly those the impact
# listed; then the queue is migrated as GPUStack does (replacement flavors, HoldAndDrain,
# zero reservations, switch, restore) and Kueue's evictions and readmissions are printed.
cmd_change() {
  local keep=0 s rc=0 d=$lab/topogate
  [[ ${1:-} == --keep ]] && { keep=1; shift; }
  s=${1:?usage: tas-lab.sh change [--keep] SCENARIO.json}
  "$python" "$py" check "$s" >/dev/null
  prepare
  require_up
  cp_env
  load "$s"
  "$python" "$py" workloads "$s" || rc=$?
  "$python" "$py" node-profiles >"$lab/profiles-before.json"
  "$python" "$py" change-inventory "$s" "$d" >/dev/null
  start_topogate
  curl -fsS --cacert "$lab/pki/ca.crt" -H "Authorization: Bearer $(cat "$lab/pki/reader.token")" \
    "https://127.0.0.1:$(cat "$d/port")/snapshots/lab/status" >"$lab/impact.json" ||
    die "cannot read topogate's status"
  label >"$lab/labels-after.json"
  "$python" "$py" migrate "$s" "$lab/labels-after.json" "$lab/impact.json" "$lab/profiles-before.json" || rc=$?
  if ((keep == 0)); then
    "$python" "$py" unload
    rm -f "$lab/loaded"
  fi
  return "$rc"
}

cmd_status() {
  local up=0
  echo "state: $lab"
  if [[ -f $TOPOGATE_CP_DIR/env ]]; then
    cp_env
    k get --raw /readyz >/dev/null 2>&1 && { echo "control plane: ready ($TOPOGATE_CP_URL)"; up=1; } || echo "control plane: not ready"
  else
    echo "control plane: not started"
  fi
  if alive "$lab/kueue/pid"; then
    curl -fsS "http://127.0.0.1:$(cat "$lab/kueue/health.port")/readyz" >/dev/null 2>&1 &&
      echo "kueue: ready (pid $(cat "$lab/kueue/pid"), $(grep -o '"gitVersion":"[^"]*"' "$lab/kueue/kueue.log" | head -1))" ||
      echo "kueue: running, not ready (pid $(cat "$lab/kueue/pid"))"
  else
    echo "kueue: not running"
  fi
  alive "$lab/nfd/pid" && echo "nfd-master: running (pid $(cat "$lab/nfd/pid"), port $(cat "$lab/nfd/port"), flags: $(cat "$lab/nfd/flags" 2>/dev/null))" ||
    echo "nfd-master: not running"
  alive "$lab/topogate/pid" && echo "topogate: serving https://127.0.0.1:$(cat "$lab/topogate/port")/snapshots/lab" ||
    echo "topogate: not running"
  [[ -f $lab/loaded ]] && echo "loaded: $(cat "$lab/loaded")"
  if ((up)); then
    export KUBECTL
    "$python" "$py" status
    echo "export KUBECONFIG=$KUBECONFIG"
  fi
  ((up)) && alive "$lab/kueue/pid"
}

cmd_down() {
  stop_pid "$lab/topogate/pid" topogate
  stop_pid "$lab/nfd/pid" nfd-master
  stop_pid "$lab/kueue/pid" kueue
  if [[ -d $TOPOGATE_CP_DIR ]]; then
    "$e2e/control-plane.sh" stop >&2 || true
  fi
  # Only a directory this script laid out.
  if [[ -d $lab/kueue || -d $lab/topogate || -d $lab/cp || ! -e $lab ]]; then
    rm -rf "$lab"
  else
    log "$lab does not look like a TAS lab state directory: left in place"
  fi
  log "down"
}

case ${1:-} in
  up) shift; cmd_up "$@" ;;
  run) shift; cmd_run "$@" ;;
  change) shift; cmd_change "$@" ;;
  status) cmd_status ;;
  nfd) prepare; require_up; cp_env
    case ${2:-} in
      start) start_nfd ;;
      stop) stop_pid "$lab/nfd/pid" nfd-master ;;
      *) die "usage: tas-lab.sh nfd start|stop" ;;
    esac ;;
  relabel) prepare; require_up; cp_env; label ;;
  down) cmd_down ;;
  env) [[ -f $TOPOGATE_CP_DIR/env ]] && { cp_env; echo "export KUBECONFIG=$KUBECONFIG"; } ;;
  *) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2 ;;
esac

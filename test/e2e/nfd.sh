#!/usr/bin/env bash
# NFD's real nfd-master (sigs.k8s.io/node-feature-discovery v0.18.3, built by
# build-nfd.sh) against a real kube-apiserver (control-plane.sh) with NFD's CRDs and
# the CRDs of test/e2e/crds, fed NodeFeatures written as the consumer writes them: one
# per described Node in the worker namespace gpustack-system, named gpustack-topology-
# + FNV-1a 64 (hex) over (source UID, NUL, Node name), labelled with
# nfd.node.kubernetes.io/node-name and topology.gpustack.ai/source-uid, controlled by
# the TopologySource (the runbook's data-center, with its snapshot's labels), spec.labels
# = the Node's snapshot labels without topology.kubernetes.io/* and kubernetes.io/*.
# nfd-master runs as a local process: -kubeconfig, no leader election, its one HTTP port
# (/healthz, /metrics) on a free port, NODE_NAME naming an existing Node, a config file
# of the suite's own. Nodes are plain Node objects (nfd-master reads and patches only
# their metadata), created with the labels and an annotation a kubelet and the
# controllers would give them.
#
#   needs       without NODE_NAME nfd-master exits ("failed to update master node")
#   apply   (a) a NodeFeature's labels reach its Node; the Node's
#               nfd.node.kubernetes.io/feature-labels annotation lists them
#   standard(d) topology.kubernetes.io/zone in a NodeFeature is refused (a kubernetes.io
#               namespace) and logged; the Node's own zone label stays
#   delete  (b) the NodeFeature deleted: its labels leave the Node, the annotation goes,
#               a label nfd-master does not own (same namespace) stays
#   bare        a Node with no labels and no annotations at all cannot be patched
#               (JSON patch under a missing map): nfd-master logs and retries
#   offline (e) nfd-master stopped: a NodeFeature changed and another created leave the
#               Nodes as they were; started again, it catches up
#   disable (f) restrictions.disableLabels: true (config file): no label applied, and
#               those it had applied are removed
#   deny    (c) -deny-label-ns=topology.gpustack.ai: none applied, each logged
#               "namespace ... is not allowed"
#   extra       -extra-label-ns=topology.gpustack.ai,topology.kubernetes.io beside that
#               deny: applied, and the Node's own topology.kubernetes.io/zone overwritten
#
# Usage: nfd.sh   Env: E2E_KEEP=1 (keep the control plane and logs), TOPOGATE_CACHE
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
t_start=$SECONDS
fx=$repo/test/e2e/fixtures/runbook
ns=gpustack-system
nfd_ns=node-feature-discovery
wait_s=15

. "$here/lib.sh"
# As e2e_init, without a topogate binary: this suite runs none.
eval "$("$here/build-kube-bins.sh" --print-env)"
eval "$("$here/build-nfd.sh" --print-env)"
work=$(mktemp -d "${TMPDIR:-/tmp}/topogate-nfd.XXXXXX")
export TOPOGATE_CP_DIR="$work/cp"
trap e2e_cleanup EXIT

now_ms() { echo $(($(date +%s%N) / 1000000)); }
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

nfd_pid= nfd_log= nfd_port= nfd_ready_ms=
nfd_stop() { e2e_stop_pid "$nfd_pid"; nfd_pid=; }
e2e_on_exit nfd_stop
healthz() { curl -fsS --noproxy '*' --max-time 1 "http://127.0.0.1:$nfd_port/healthz" >/dev/null 2>&1; }
# nfd_run NAME CONFIG_YAML [FLAG...]: nfd-master in the background, log $work/nfd-NAME.log,
# config file $work/nfd-NAME.conf; waits until /healthz answers (informer caches synced,
# the updater started), and sets nfd_ready_ms. NODE_NAME is what the Pod spec gives it.
nfd_run() {
  local name=$1 conf=$2 t0; shift 2
  nfd_log=$work/nfd-$name.log nfd_port=$(free_port)
  printf '%s\n' "$conf" >"$work/nfd-$name.conf"
  t0=$(now_ms)
  env -u http_proxy -u https_proxy -u HTTP_PROXY -u HTTPS_PROXY \
    NODE_NAME=${NFD_NODE_NAME-control-plane-1} KUBERNETES_NAMESPACE=$nfd_ns \
    "$NFD_BIN_DIR/nfd-master" -kubeconfig "$KUBECONFIG" -port "$nfd_port" \
    -config "$work/nfd-$name.conf" -v=2 "$@" </dev/null >"$nfd_log" 2>&1 &
  nfd_pid=$!
  until healthz; do
    kill -0 "$nfd_pid" 2>/dev/null || { nfd_ready_ms=; return 1; }
    (($(now_ms) - t0 < 30000)) || { nfd_ready_ms=; return 1; }
    sleep 0.05
  done
  nfd_ready_ms=$(($(now_ms) - t0))
}

# node_view NODE: its topology.* labels (sorted k=v) and nfd-master's feature-labels annotation.
node_view() {
  k get node "$1" -o json | python3 -c 'import json, sys
m = json.load(sys.stdin)["metadata"]
labels = " ".join(f"{k}={v}" for k, v in sorted((m.get("labels") or {}).items()) if k.startswith("topology."))
print(labels + " | owned=" + (m.get("annotations") or {}).get("nfd.node.kubernetes.io/feature-labels", ""))'
}
node_is() { [[ $(node_view "$1") == "$2" ]]; }
# wait_node NODE EXPECTED: polls until node_view is EXPECTED (for wait_s); sets took_ms.
took_ms=
wait_node() {
  local t0; t0=$(now_ms)
  if poll "$wait_s" node_is "$1" "$2"; then took_ms=$(($(now_ms) - t0)); return 0; fi
  took_ms=$(($(now_ms) - t0)); echo "  $1 is: $(node_view "$1")"; echo "  wanted: $2"; return 1
}

# The consumer's NodeFeature, from the snapshot's labels of NODE (nf_json NODE [EXTRA_JSON]):
# EXTRA_JSON adds labels the consumer would not write (the standard-key case).
nf_name() {
  python3 - "$1" "$2" <<'PY'
import sys
def fnv1a64(b):
    h = 0xcbf29ce484222325
    for c in b:
        h = ((h ^ c) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return h
assert fnv1a64(b"a") == 0xaf63dc4c8601ec8c  # the published FNV-1a 64 vector
print("gpustack-topology-%016x" % fnv1a64(sys.argv[1].encode() + b"\0" + sys.argv[2].encode()))
PY
}
nf_json() { # NODE SNAPSHOT_LABELS_JSON [EXTRA_JSON]
  local name; name=$(nf_name "$src_uid" "$1")
  python3 - "$1" "$name" "$ns" "$src_name" "$src_uid" "$2" "${3:-}" <<'PY'
import json, sys
node, name, ns, src, uid, labels, extra = sys.argv[1:]
def standard(k):
    p = k.split("/", 1)[0] if "/" in k else ""
    return p in ("kubernetes.io", "topology.kubernetes.io")
spec = {k: v for k, v in json.loads(labels).items() if not standard(k)}
spec.update(json.loads(extra or "{}"))
print(json.dumps({
    "apiVersion": "nfd.k8s-sigs.io/v1alpha1", "kind": "NodeFeature",
    "metadata": {"name": name, "namespace": ns,
                 "labels": {"nfd.node.kubernetes.io/node-name": node, "topology.gpustack.ai/source-uid": uid},
                 "ownerReferences": [{"apiVersion": "worker.gpustack.ai/v1", "kind": "TopologySource", "name": src,
                                      "uid": uid, "controller": True, "blockOwnerDeletion": True}]},
    "spec": {"labels": spec}}))
PY
}
# nf_write NODE SNAPSHOT_LABELS_JSON [EXTRA_JSON]: server-side apply, one field manager
# (a label dropped from spec.labels leaves the object).
nf_write() {
  nf_json "$@" | k apply --server-side --force-conflicts --field-manager gpustack-topology -f - >/dev/null
}
nf_delete() { k -n "$ns" delete nodefeature "$(nf_name "$src_uid" "$1")" --wait=true >/dev/null; }
# snap NODE: the node's labels in the runbook's data-center snapshot, as JSON.
snap() {
  python3 -c 'import json, sys, yaml; print(json.dumps(yaml.safe_load(open(sys.argv[1]))["nodes"][sys.argv[2]]))' \
    "$fx/data-center.snapshot.yaml" "$1"
}
# expected NODE_LABELS... : the node_view of a Node carrying exactly these topology.*
# labels, nfd-master owning those in OWNED (space-separated keys).
expect() { # "k=v k=v" "owned keys"
  python3 -c 'import sys
labels = " ".join(sorted(x for x in sys.argv[1].split() if x.startswith("topology.")))
print(labels + " | owned=" + ",".join(sorted(sys.argv[2].split())))' "$1" "$2"
}
t_section=
sec() { section "$1"; t_section=$SECONDS; }
secs() { echo "$((SECONDS - t_section)) s"; }

sec setup
e2e_cp_start
k apply --server-side -f "$NFD_CRD_DIR/nfd-api-crds.yaml" >/dev/null
e2e_test_crds
k create namespace "$ns" >/dev/null
k apply -f "$fx/data-center.yaml" >/dev/null
src_name=data-center
src_uid=$(k get topologysource "$src_name" -o jsonpath='{.metadata.uid}')
# Nodes as a kubelet registers them and the controllers annotate them; worker-b in a
# cloud zone of its own. control-plane-1 is where nfd-master "runs" (NODE_NAME).
for n in control-plane-1 worker-a worker-b worker-c; do
  zone=
  [[ $n == worker-b ]] && zone=', "topology.kubernetes.io/zone": "us-east-1b"'
  printf '{"apiVersion":"v1","kind":"Node","metadata":{"name":"%s","labels":{"kubernetes.io/hostname":"%s","kubernetes.io/os":"linux"%s},"annotations":{"node.alpha.kubernetes.io/ttl":"0"}}}' \
    "$n" "$n" "$zone" | k create -f - >/dev/null
done
# A Node object with no labels and no annotations (no kubelet ever registered it).
echo '{"apiVersion":"v1","kind":"Node","metadata":{"name":"bare-1"}}' | k create -f - >/dev/null
snap_a=$(snap worker-a) snap_b=$(snap worker-b)
name_a=$(nf_name "$src_uid" worker-a)
[[ $name_a =~ ^gpustack-topology-[0-9a-f]{16}$ ]] &&
  pass "NFD $NFD_VERSION CRDs and the chart CRDs established; TopologySource $src_name ($src_uid); NodeFeature names like $name_a ($(secs))" ||
  fail "NodeFeature name $name_a"

sec needs
rc=0
NFD_NODE_NAME= nfd_run no-node-name '{}' || rc=$?
wait "$nfd_pid" 2>/dev/null || rc=$?
nfd_pid=
if ((rc != 0)) && grep -q 'failed to update master node: resource name may not be empty' "$nfd_log"; then
  pass "without NODE_NAME nfd-master exits: $(grep -o '"error while running".*' "$nfd_log") ($(secs))"
else
  fail "without NODE_NAME: rc=$rc"; tail -n 5 "$nfd_log"
fi

sec "apply (a)"
if nfd_run default '{}'; then
  pass "nfd-master $NFD_VERSION ready (/healthz) in $nfd_ready_ms ms after start"
else
  fail "nfd-master did not become ready"; tail -n 20 "$nfd_log"; exit 1
fi
ready1=$nfd_ready_ms
nf_write worker-a "$snap_a"
want_a=$(expect "topology.gpustack.ai/rack=rack-01 topology.gpustack.ai/region=region-a topology.gpustack.ai/zone=zone-a" \
  "topology.gpustack.ai/rack topology.gpustack.ai/region topology.gpustack.ai/zone")
wait_node worker-a "$want_a" &&
  pass "(a) worker-a's NodeFeature labels on worker-a, listed in nfd.node.kubernetes.io/feature-labels, $took_ms ms after the write" ||
  fail "(a) labels not applied in $wait_s s"
k label node worker-a topology.gpustack.ai/maintainer=ops >/dev/null
k -n "$ns" get nodefeature "$name_a" -o json | python3 -c 'import json, sys
o = json.load(sys.stdin); m = o["metadata"]; uid = sys.argv[1]
ok = (m["labels"] == {"nfd.node.kubernetes.io/node-name": "worker-a", "topology.gpustack.ai/source-uid": uid}
      and [(r["kind"], r["uid"], r.get("controller")) for r in m["ownerReferences"]] == [("TopologySource", uid, True)]
      and sorted(o["spec"]["labels"]) == ["topology.gpustack.ai/rack", "topology.gpustack.ai/region", "topology.gpustack.ai/zone"])
sys.exit(0 if ok else 1)' "$src_uid" &&
  pass "(a) the NodeFeature as stored: its two labels, the TopologySource as controller, the three private labels" ||
  fail "(a) the NodeFeature as stored differs"

sec "standard key (d)"
nf_write worker-b "$snap_b" '{"topology.kubernetes.io/zone": "zone-a"}'
want_b=$(expect "topology.gpustack.ai/rack=rack-02 topology.gpustack.ai/region=region-a topology.gpustack.ai/zone=zone-a topology.kubernetes.io/zone=us-east-1b" \
  "topology.gpustack.ai/rack topology.gpustack.ai/region topology.gpustack.ai/zone")
if wait_node worker-b "$want_b" && poll 5 grep -q 'ignoring label.*namespace \\"topology.kubernetes.io\\" is not allowed.*labelKey="topology.kubernetes.io/zone"' "$nfd_log"; then
  pass "(d) topology.kubernetes.io/zone refused ($took_ms ms), the Node's own zone us-east-1b kept; log: $(grep -o '"ignoring label" err="namespace \\"topology.kubernetes.io\\" is not allowed" labelKey="[^"]*"' "$nfd_log" | head -1)"
else
  fail "(d) standard key"; grep 'ignoring label' "$nfd_log" | head -3
fi

sec "delete (b)"
nf_delete worker-a
want=$(expect "topology.gpustack.ai/maintainer=ops" "")
wait_node worker-a "$want" &&
  pass "(b) NodeFeature deleted: its three labels and the feature-labels annotation gone in $took_ms ms; topology.gpustack.ai/maintainer (not listed as nfd-master's) stays ($(secs))" ||
  fail "(b) labels not removed"

sec bare
nf_write bare-1 "$snap_a"
if poll "$wait_s" grep -q '"retrying node update" nodeName="bare-1".*error while patching node object' "$nfd_log" &&
   node_is bare-1 " | owned="; then
  pass "a Node without labels or annotations is not patched: $(grep -o '"failed to update node" err="[^"]*"' "$nfd_log" | head -1), retried ($(secs))"
else
  fail "bare Node: $(node_view bare-1)"; grep bare-1 "$nfd_log" | head -3
fi
nf_delete bare-1

sec "offline (e)"
nfd_stop
nf_write worker-b '{"topology.gpustack.ai/region": "region-a", "topology.gpustack.ai/zone": "zone-b", "topology.gpustack.ai/rack": "rack-07"}'
nf_write worker-c '{"topology.gpustack.ai/region": "region-a", "topology.gpustack.ai/zone": "zone-b", "topology.gpustack.ai/rack": "rack-08"}'
want_c0=$(expect "" "")
sleep 2
if node_is worker-b "$want_b" && node_is worker-c "$want_c0"; then
  pass "(e) nfd-master stopped: worker-b keeps its old labels and worker-c gets none 2 s after the writes"
else
  fail "(e) changed while nfd-master was stopped: $(node_view worker-b); $(node_view worker-c)"
fi
t0=$(now_ms)
nfd_run restart '{}' || fail "(e) nfd-master did not start again"
want_b2=$(expect "topology.gpustack.ai/rack=rack-07 topology.gpustack.ai/region=region-a topology.gpustack.ai/zone=zone-b topology.kubernetes.io/zone=us-east-1b" \
  "topology.gpustack.ai/rack topology.gpustack.ai/region topology.gpustack.ai/zone")
want_c=$(expect "topology.gpustack.ai/rack=rack-08 topology.gpustack.ai/region=region-a topology.gpustack.ai/zone=zone-b" \
  "topology.gpustack.ai/rack topology.gpustack.ai/region topology.gpustack.ai/zone")
if wait_node worker-b "$want_b2" && wait_node worker-c "$want_c"; then
  pass "(e) started again (ready in $nfd_ready_ms ms): caught up on worker-b and worker-c $(($(now_ms) - t0)) ms after start"
else
  fail "(e) no catch-up"
fi
nfd_stop

sec "disableLabels (f)"
nf_write worker-a "$snap_a"
t0=$(now_ms)
nfd_run disable-labels 'restrictions: {disableLabels: true}' || fail "(f) nfd-master did not start"
want_b3=$(expect "topology.kubernetes.io/zone=us-east-1b" "")
if wait_node worker-b "$want_b3" && wait_node worker-c "$want_c0" && node_is worker-a "$(expect "topology.gpustack.ai/maintainer=ops" "")" &&
   grep -q 'node labels are disabled in configuration (restrictions.disableLabels=true)' "$nfd_log"; then
  pass "(f) restrictions.disableLabels: true: no NodeFeature label applied (worker-a), those applied before removed (worker-b, worker-c) $(($(now_ms) - t0)) ms after start; log: node labels are disabled in configuration ($(secs))"
else
  fail "(f) disableLabels: $(node_view worker-a); $(node_view worker-b)"
fi
nfd_stop

sec "deny-label-ns (c)"
nfd_run deny '{}' -deny-label-ns=topology.gpustack.ai || fail "(c) nfd-master did not start"
# Its first pass over every Node runs a second after it is ready.
if poll "$wait_s" grep -q '"ignoring label" err="namespace \\"topology.gpustack.ai\\" is not allowed" labelKey="topology.gpustack.ai/rack"' "$nfd_log"; then
  sleep 1
  denied=$(grep -c '"ignoring label" err="namespace \\"topology.gpustack.ai\\" is not allowed"' "$nfd_log" || true)
  if node_is worker-a "$(expect "topology.gpustack.ai/maintainer=ops" "")" && node_is worker-b "$want_b3" && node_is worker-c "$want_c0"; then
    pass "(c) -deny-label-ns=topology.gpustack.ai: no label applied on worker-a, -b, -c; $denied refusals logged, e.g. $(grep -o '"ignoring label" err="namespace \\"topology.gpustack.ai\\" is not allowed" labelKey="[^"]*"' "$nfd_log" | head -1) ($(secs))"
  else
    fail "(c) labels applied: $(node_view worker-a); $(node_view worker-b); $(node_view worker-c)"
  fi
else
  fail "(c) no refusal logged"; grep 'ignoring label' "$nfd_log" | head -3
fi
nfd_stop

sec "extra-label-ns"
# -extra-label-ns lets a namespace through that -deny-label-ns or the kubernetes.io rule refuses.
nf_write worker-b "$snap_b" '{"topology.kubernetes.io/zone": "zone-a"}'
nfd_run extra '{}' -deny-label-ns=topology.gpustack.ai -extra-label-ns=topology.gpustack.ai,topology.kubernetes.io ||
  fail "extra-label-ns: nfd-master did not start"
want_b4=$(expect "topology.gpustack.ai/rack=rack-02 topology.gpustack.ai/region=region-a topology.gpustack.ai/zone=zone-a topology.kubernetes.io/zone=zone-a" \
  "topology.gpustack.ai/rack topology.gpustack.ai/region topology.gpustack.ai/zone topology.kubernetes.io/zone")
wait_node worker-b "$want_b4" &&
  pass "-extra-label-ns=topology.gpustack.ai,topology.kubernetes.io beside the deny: applied again, and the Node's own topology.kubernetes.io/zone us-east-1b overwritten with zone-a and taken over as nfd-master's ($(secs))" ||
  fail "extra-label-ns"
nfd_stop

echo "nfd-master start-to-ready: $ready1 ms (first start)"
echo "== $((checks - fails))/$checks passed in $((SECONDS - t_start)) s"
[[ $fails == 0 ]]

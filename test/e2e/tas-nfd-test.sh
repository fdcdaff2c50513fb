#!/usr/bin/env bash
# The TAS lab with NFD in the path (scripts/tas-lab.sh; docs/operations.md, "The TAS lab"):
# the labeler writes the consumer's NodeFeatures and the real nfd-master applies them.
#   (a) the EKS validation with its zone as a private key (topology.gpustack.ai/zone):
#       every expect met, Kueue and diagnose agreeing; the Nodes' zone labels are
#       nfd-master's (nfd.node.kubernetes.io/feature-labels lists them)
#   (b) a Node dropped from the snapshot: its NodeFeature deleted, nfd-master removes its
#       label, its profile follows (region > hostname: the region is the cloud's label)
#   (c) nfd-master restarted with -deny-label-ns=topology.gpustack.ai: the labels are not
#       applied (removed), and the labeler's wait names the Nodes that lack them
#   (d) nfd-master stopped while the snapshot changes: not applied; started again: applied
#
# Usage: tas-nfd-test.sh   Env: TOPOGATE_BINARY, E2E_KEEP=1, TAS_LAB_DIR (default: fresh)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
lab_sh=$here/lab/tas-lab.sh
t_start=$SECONDS
export TAS_LAB_DIR=${TAS_LAB_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/topogate-tas-nfd-test.XXXXXX")}
out=$(mktemp -d "${TMPDIR:-/tmp}/topogate-tas-nfd-out.XXXXXX")
zone=topology.gpustack.ai/zone
fails=0 checks=0
pass() { checks=$((checks + 1)); echo "ok   $*"; }
fail() { checks=$((checks + 1)); fails=$((fails + 1)); echo "FAIL $*"; }
section() { echo "== $*"; }
cleanup() {
  if [[ ${E2E_KEEP:-0} == 1 ]]; then echo "kept: $TAS_LAB_DIR"; else "$lab_sh" down >/dev/null 2>&1 || true; fi
  rm -rf "$out"
}
trap cleanup EXIT
now_ms() { echo $(($(date +%s%N) / 1000000)); }
# view: one line per lab Node: NAME ZONE OWNED PROFILE (- when absent)
view() {
  "$KUBECTL" get nodes -l tas-lab.topogate.invalid/scenario -o json | python3 -c 'import json, sys
for n in json.load(sys.stdin)["items"]:
    m = n["metadata"]; l = m.get("labels") or {}
    print(m["name"], l.get(sys.argv[1], "-"), (m.get("annotations") or {}).get("nfd.node.kubernetes.io/feature-labels", "-") or "-",
          l.get("topology.gpustack.ai/profile", "-"))' "$zone"
}
# wait_view PYTHON-EXPR SECONDS: until EXPR holds over v = {name: (zone, owned, profile)}; sets took_ms
took_ms=
view_is() {
  view | python3 -c 'import sys
v = {p[0]: tuple(p[1:]) for p in (l.split() for l in sys.stdin) if p}
sys.exit(0 if eval(sys.argv[1]) else 1)' "$1"
}
wait_view() {
  local t0 i; t0=$(now_ms)
  for ((i = 0; i < $2 * 10; i++)); do
    view_is "$1" && { took_ms=$(($(now_ms) - t0)); return 0; }
    sleep 0.1
  done
  took_ms=$(($(now_ms) - t0)); view; return 1
}
nf_count() { "$KUBECTL" -n gpustack-system get nodefeatures -o name | wc -l; }

# topogate's label drift (inventory/drift.hpp) counts a Node after 2 s here, not 5 minutes.
export TAS_LAB_DRIFT_GRACE=2s
# drift: topogate's last drift check of the lab inventory (GET /snapshots/lab/status), as
# "DRIFTED MISMATCHED NODE,NODE,..."
drift() {
  curl -fsS --cacert "$TAS_LAB_DIR/pki/ca.crt" -H "Authorization: Bearer $(cat "$TAS_LAB_DIR/pki/reader.token")" \
    "https://127.0.0.1:$(cat "$TAS_LAB_DIR/topogate/port")/snapshots/lab/status" | python3 -c 'import json, sys
d = json.load(sys.stdin).get("drift") or {}
print(d.get("drifted", -1), d.get("mismatched", -1), ",".join(n["name"] for n in d.get("nodes", [])) or "-")'
}
# wait_drift PYTHON-EXPR SECONDS: until EXPR holds over (drifted, mismatched, names); sets drift_seen
drift_seen=
wait_drift() {
  local i
  for ((i = 0; i < $2 * 5; i++)); do
    drift_seen=$(drift 2>/dev/null) || drift_seen=
    [[ -n $drift_seen ]] && python3 -c 'import sys
d, m, names = sys.argv[2].split(); d, m = int(d), int(m); names = names.split(",")
sys.exit(0 if eval(sys.argv[1]) else 1)' "$1" "$drift_seen" && return 0
    sleep 0.2
  done
  return 1
}

# chain_nfd PYTHON-EXPR: `diagnose chain` online; EXPR over f = {object: [check, ...]} of the
# NFD hop's findings (nfd-*); sets chain_seen to them, in words.
chain_seen=
chain_nfd() {
  "$TOPOGATE_BINARY" diagnose chain --kubeconfig "$KUBECONFIG" --output json >"$out/chain.json" 2>/dev/null || true
  chain_seen=$(python3 - "$out/chain.json" "$1" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
f = {}
for x in r.get("findings", []):
    if x["check"].startswith("nfd-"):
        f.setdefault(x["object"].split("/")[-1], []).append(x["check"])
print(", ".join(f"{c} {o}" for o, cs in sorted(f.items()) for c in cs) or "no NFD finding")
sys.exit(0 if eval(sys.argv[2]) else 1)
PY
  )
}

section up
t0=$SECONDS
"$lab_sh" up >"$out/up.out" 2>"$out/up.err" || { fail "up"; tail -n 20 "$out/up.err"; exit 1; }
eval "$(grep '^export KUBECONFIG=' "$out/up.out")"
eval "$(grep -E '^export (KUBECTL|TOPOGATE_BINARY)=' "$TAS_LAB_DIR/prepared.env")"
grep -q '^nfd-master: running' <("$lab_sh" status) &&
  pass "up in $((SECONDS - t0)) s; $(grep -o 'nfd-master v[^ ]* ready in [0-9]* s' "$out/up.err") (Kueue: $(grep -o 'Kueue ready in [0-9]* s' "$out/up.err"))" ||
  fail "status: nfd-master not running"

section "(a) the EKS validation through NFD"
sed "s|topology.kubernetes.io/zone|$zone|g" "$here/tas/eks-validation.json" >"$out/eks-nfd.json"
t0=$SECONDS rc=0
"$lab_sh" run --keep "$out/eks-nfd.json" >"$out/a.jsonl" 2>"$out/a.err" || rc=$?
agreed=$(python3 -c 'import json, sys
ws = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
print(sum(1 for w in ws if w["agree"] and w.get("expectMet", True)), len(ws))' "$out/a.jsonl")
[[ $rc == 0 && $agreed == "2 2" ]] &&
  pass "(a) run: exit 0 in $((SECONDS - t0)) s, zone-trio Pending and zone-pair admitted as without NFD, both agree ($(grep -o 'applied [0-9]* NodeFeature(s) ([0-9]* deleted) in [0-9]* ms' "$out/a.err"))" ||
  { fail "(a) run: exit $rc, $agreed agree"; tail -n 5 "$out/a.err"; }
view_is "len(v) == 4 and all(z != '-' and o == '$zone' and p != '-' for z, o, p in v.values())" &&
  pass "(a) every Node's $zone is nfd-master's (feature-labels lists it), $(nf_count) NodeFeatures, profile set" ||
  { fail "(a) Nodes: "; view; }
chain_nfd "f == {}" && pass "(a) diagnose chain: $chain_seen" || fail "(a) diagnose chain: $chain_seen"

section "(b) a Node dropped from the snapshot"
snap=$TAS_LAB_DIR/topogate/snapshot.yaml
cp "$snap" "$out/snapshot.orig.yaml"
python3 - "$snap" <<'PY'
import os, sys, yaml
s = yaml.safe_load(open(sys.argv[1])); del s["nodes"]["worker-b2"]; s["revision"] += "-b"
yaml.safe_dump(s, open(sys.argv[1] + ".tmp", "w")); os.replace(sys.argv[1] + ".tmp", sys.argv[1])
PY
# The consumer derives the profile from the labels the Node carries: the region stays (the
# cloud's, a standard key), so worker-b2's profile is region > hostname.
region_only=fnv64-$(printf 'topology.kubernetes.io/region\0kubernetes.io/hostname' | python3 -c 'import sys
h = 0xcbf29ce484222325
for c in sys.stdin.buffer.read(): h = ((h ^ c) * 0x100000001b3) & (2**64 - 1)
print("%016x" % h)')
t0=$(now_ms) rc=1
for ((i = 0; i < 50 && rc != 0; i++)); do
  rc=0; "$lab_sh" relabel >"$out/b.json" 2>"$out/b.err" || rc=$?
  [[ $rc == 0 ]] && ! grep -q '"worker-b2"' "$out/b.json" || { rc=1; sleep 0.2; }
done
if [[ $rc == 0 ]] && view_is "v['worker-b2'] == ('-', '-', '$region_only') and all(z != '-' for n, (z, o, p) in v.items() if n != 'worker-b2')" && [[ $(nf_count) == 3 ]]; then
  pass "(b) worker-b2 dropped: its NodeFeature deleted, nfd-master removed its $zone and annotation, its profile follows: $region_only (region > hostname; the region is the cloud's); 3 NodeFeatures left ($(grep -o 'in [0-9]* ms' "$out/b.err" | tail -1) after the labeler's writes, $(($(now_ms) - t0)) ms from the snapshot change)"
else
  fail "(b) rc=$rc"; tail -n 3 "$out/b.err"; view
fi
chain_nfd "f == {}" && pass "(b) diagnose chain: $chain_seen (nothing left behind)" || fail "(b) diagnose chain: $chain_seen"

section "(c) nfd-master with -deny-label-ns=topology.gpustack.ai"
"$lab_sh" nfd stop
t0=$(now_ms)
TAS_LAB_NFD_FLAGS=-deny-label-ns=topology.gpustack.ai "$lab_sh" nfd start
if wait_view "all(z == '-' and o == '-' for z, o, p in v.values())" 15 &&
   grep -q 'namespace \\"topology.gpustack.ai\\" is not allowed' "$TAS_LAB_DIR/nfd/nfd-master.log"; then
  pass "(c) restarted with -deny-label-ns: no Node carries $zone ($(($(now_ms) - t0)) ms after the restart: those applied removed); refusals logged"
else
  fail "(c) labels still applied"
fi
# What `diagnose chain` (online) makes of it: the NFD hop's finding on each Node that lacks
# its labels, the denied namespace named among the likely causes.
"$TOPOGATE_BINARY" diagnose chain --kubeconfig "$KUBECONFIG" --output json >"$out/chain-c.json" 2>/dev/null || true
if python3 - "$out/chain-c.json" <<'PY'; then
import json, sys
r = json.load(open(sys.argv[1]))
hits = {f["object"]: f for f in r.get("findings", []) if f.get("check") == "nfd-not-applied"}
want = {"Node/worker-a1", "Node/worker-a2", "Node/worker-b1"}
ok = set(hits) == want and all("topology.gpustack.ai is denied" in json.dumps(f) for f in hits.values())
print("findings:", ", ".join(f["check"] + " " + f["object"] for f in r.get("findings", [])))
sys.exit(0 if ok else 1)
PY
  pass "(c) diagnose chain: nfd-not-applied on worker-a1, worker-a2, worker-b1, naming the denied namespace"
else
  fail "(c) diagnose chain: $(cat "$out/chain-c.json" | head -c 2000)"
fi
rc=0
TAS_LAB_NFD_WAIT=3 "$lab_sh" relabel >/dev/null 2>"$out/c.err" || rc=$?
[[ $rc != 0 ]] && grep -q 'nfd-master did not apply the NodeFeatures within 3s: 3 Node(s) lack their labels: worker-a1, worker-a2, worker-b1' "$out/c.err" &&
  pass "(c) the labeler's wait fails after 3 s naming the Nodes: $(grep -o 'nfd-master did not.*' "$out/c.err")" ||
  { fail "(c) relabel: exit $rc"; cat "$out/c.err"; }

section "(d) nfd-master stopped while the snapshot changes"
"$lab_sh" nfd stop
cp "$out/snapshot.orig.yaml" "$snap.tmp" && mv "$snap.tmp" "$snap"
rc=0
for ((i = 0; i < 50; i++)); do
  rc=0; TAS_LAB_NFD_WAIT=2 "$lab_sh" relabel >"$out/d.json" 2>"$out/d.err" || rc=$?
  grep -q 'worker-b2' "$out/d.err" && break; sleep 0.2
done
[[ $rc != 0 ]] && grep -q 'lack their labels: worker-a1, worker-a2, worker-b1, worker-b2' "$out/d.err" && view_is "all(z == '-' for z, o, p in v.values())" &&
  pass "(d) stopped: worker-b2 back in the snapshot, its NodeFeature written; no Node labelled, the labeler's wait names all four" ||
  { fail "(d) while stopped: exit $rc"; cat "$out/d.err"; view; }
# topogate sees it: the four Nodes lack the zone the served revision gives them; past the
# grace they count as drifted.
t0=$(now_ms)
wait_drift "d == 4 and m == 4 and names == ['worker-a1', 'worker-a2', 'worker-b1', 'worker-b2']" 20 &&
  pass "(d) topogate's drift: $(cut -d' ' -f1 <<<"$drift_seen") Nodes drifted (topogate_inventory_nodes_drifted), $(cut -d' ' -f3 <<<"$drift_seen"), counted $(($(now_ms) - t0)) ms after the wait (grace 2 s)" ||
  fail "(d) drift not counted: $drift_seen"
chain_nfd "sorted(f) == ['worker-a1', 'worker-a2', 'worker-b1', 'worker-b2'] and all(c == ['nfd-not-applied'] for c in f.values())" &&
  pass "(d) diagnose chain: $chain_seen" || fail "(d) diagnose chain: $chain_seen"
t0=$(now_ms)
"$lab_sh" nfd start
wait_view "len(v) == 4 and all(z != '-' and o == '$zone' for z, o, p in v.values())" 15 &&
  pass "(d) started again: all four Nodes carry their $zone, $took_ms ms after nfd-master was ready ($(($(now_ms) - t0)) ms from its start)" ||
  fail "(d) not caught up"
rc=0
"$lab_sh" relabel >/dev/null 2>"$out/d2.err" || rc=$?
[[ $rc == 0 ]] && pass "(d) the labeler's next pass completes: $(grep -o 'applied.*' "$out/d2.err")" || { fail "(d) relabel: exit $rc"; cat "$out/d2.err"; }
wait_drift "d == 0 and m == 0" 20 &&
  pass "(d) topogate's drift back to 0: $drift_seen (drifted, mismatched, listed)" || fail "(d) drift stays: $drift_seen"
chain_nfd "f == {}" && pass "(d) diagnose chain after the catch-up: $chain_seen" || fail "(d) diagnose chain: $chain_seen"

echo "tas-nfd: $((checks - fails)) passed, $fails failed in $((SECONDS - t_start)) s"
((fails == 0))

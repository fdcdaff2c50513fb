#!/usr/bin/env bash
# The runbook's "Validate on a temporary EKS cluster", locally, against the real Kueue
# (scripts/tas-lab.sh): four Nodes in two zones; a size-three zone-constrained PodSet is
# Pending although four Pods fit cluster-wide, and a size-two PodSet is admitted with a
# topologyAssignment inside one zone. Then the runbook's capacity split between a zone
# profile and a hostname-only profile (two flavors). Kueue's decisions are asserted, and
# `topogate diagnose pending` / `diagnose chain` (online, against the lab) must agree.
# Then the runbook's multi-role deployment (one group held for its set, the other short of a
# domain) and the live hierarchy change from zone to zone > rack (topogate's impact names
# exactly the Nodes relabelled; the queue migration's evictions and readmissions). Then every
# scenario of tas/kueue-decision/ (Kueue's decision step by step: quota, cohorts, preemption, queues, taints,
# requests, affinity, slices, partial admission...), each Workload's verdict agreeing.
#
# Usage: tas-lab-test.sh   Env: TOPOGATE_BINARY, E2E_KEEP=1 (leave the lab up),
#                               TAS_LAB_DIR (default: a fresh temporary directory)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
lab_sh=$here/lab/tas-lab.sh
scenario=$here/tas/eks-validation.json
t_start=$SECONDS
export TAS_LAB_DIR=${TAS_LAB_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/topogate-tas-lab-test.XXXXXX")}
out=$(mktemp -d "${TMPDIR:-/tmp}/topogate-tas-lab-out.XXXXXX")

fails=0 checks=0
pass() { checks=$((checks + 1)); echo "ok   $*"; }
fail() { checks=$((checks + 1)); fails=$((fails + 1)); echo "FAIL $*"; }
section() { echo "== $*"; }

cleanup() {
  if [[ ${E2E_KEEP:-0} == 1 ]]; then
    echo "kept: $TAS_LAB_DIR (stop with TAS_LAB_DIR=$TAS_LAB_DIR $lab_sh down)"
  else
    "$lab_sh" down >/dev/null 2>&1 || true
  fi
  rm -rf "$out"
}
trap cleanup EXIT

section up
t0=$SECONDS
rc=0
"$lab_sh" up >"$out/up.out" 2>"$out/up.err" || rc=$?
if [[ $rc == 0 ]] && grep -q '^export KUBECONFIG=' "$out/up.out"; then
  pass "tas-lab.sh up: exit 0 in $((SECONDS - t0)) s, prints export KUBECONFIG=..."
else
  fail "tas-lab.sh up: exit $rc"; tail -n 30 "$out/up.err"; exit 1
fi
eval "$(grep '^export KUBECONFIG=' "$out/up.out")"
rc=0
"$lab_sh" status >"$out/status.out" 2>&1 || rc=$?
[[ $rc == 0 ]] && grep -q '^kueue: ready' "$out/status.out" && grep -q 'gitVersion":"v0.17.0' "$out/status.out" &&
  pass "status: Kueue v0.17.0 ready" || fail "status: exit $rc: $(cat "$out/status.out")"
grep -q 'nodes: 4' "$out/status.out" && pass "status: the base inventory's four Nodes" || fail "status: $(grep nodes "$out/status.out")"

section "run eks-validation.json"
t0=$SECONDS
rc=0
"$lab_sh" run "$scenario" >"$out/run.jsonl" 2>"$out/run.err" || rc=$?
[[ $rc == 0 ]] && pass "tas-lab.sh run: exit 0 in $((SECONDS - t0)) s (every expect met)" ||
  { fail "tas-lab.sh run: exit $rc"; tail -n 20 "$out/run.err"; }
cat "$out/run.jsonl"

# check NAME PYTHON-EXPRESSION: evaluated with w = the Workload's line
check() {
  local name=$1 expr=$2 what=$3
  if python3 - "$out/run.jsonl" "$name" "$expr" <<'PY'; then pass "$name: $what"; else fail "$name: $what"; fi
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
w = next((l for l in lines if l["workload"] == "default/" + sys.argv[2]), None)
sys.exit(0 if w is not None and eval(sys.argv[3]) else 1)
PY
}
z=topology.kubernetes.io/zone
check zone-trio 'w["kueue"]["decision"] == "pending" and "gpustack-fnv64-570aeab478df5111" in w["kueue"]["message"]' \
  "Kueue: Pending (QuotaReserved=False, the Topology cannot fit 3)"
check zone-trio 'w["diagnose"]["verdict"] == "no-domain" and w["diagnose"]["exit"] == 1' \
  "diagnose: no $z domain holds it (exit 1)"
check zone-trio 'w["diagnose"]["podSets"][0]["clusterFits"] == 4 and w["diagnose"]["podSets"][0]["largestDomainFits"] == 2' \
  "diagnose: cluster-wide 4 fit, largest zone holds 2"
check zone-trio 'w["agree"]' "Kueue and diagnose agree"
check zone-pair 'w["kueue"]["decision"] == "admitted" and w["kueue"]["admitted"] == "True"' "Kueue: admitted"
check zone-pair 'len({tuple(d["values"]) for d in w["kueue"]["assignments"][0]["topologyAssignment"]["domains"]}) == 2 and sum(d["count"] for d in w["kueue"]["assignments"][0]["topologyAssignment"]["domains"]) == 2' \
  "Kueue: topologyAssignment places 2 Pods on 2 Nodes"
check zone-pair 'w["expectMet"]' "Kueue: the assigned Nodes are in one zone"
check zone-pair 'w["diagnose"]["verdict"] == "fits" and w["diagnose"]["exit"] == 0' "diagnose: a zone holds it, reservation held (exit 0)"
check zone-pair 'w["agree"]' "Kueue and diagnose agree"
check zone-pair 'w["chain"]["exit"] == 0 and not w["chain"]["findings"]' "diagnose chain: complete"

section "run split-profiles.json"
rc=0
"$lab_sh" run "$here/tas/split-profiles.json" >"$out/run.jsonl" 2>"$out/run.err" || rc=$?
[[ $rc == 0 ]] && pass "tas-lab.sh run: exit 0 (every expect met)" || { fail "tas-lab.sh run: exit $rc"; tail -n 20 "$out/run.err"; }
grep -q '"fnv64-87bf574bea2a4f23": 2' "$out/run.err" && grep -q '"fnv64-570aeab478df5111": 2' "$out/run.err" &&
  pass "labeler: two profiles (zone, hostname-only), two Nodes each" || fail "profiles: $(grep loaded "$out/run.err")"
check zone-trio 'w["kueue"]["decision"] == "pending" and "does not contain the requested level" in w["kueue"]["message"]' \
  "Kueue: Pending; the hostname-only flavor lacks the zone level"
check zone-trio 'w["diagnose"]["verdict"] == "no-domain" and w["diagnose"]["podSets"][0]["clusterFits"] == 4 and w["diagnose"]["podSets"][0]["largestDomainFits"] == 2' \
  "diagnose: cluster-wide 4 fit, no zone holds 3"
check zone-trio 'w["agree"]' "Kueue and diagnose agree"
check zone-pair 'w["kueue"]["decision"] == "admitted" and w["expectMet"] and w["agree"]' \
  "Kueue: admitted in zone-a; diagnose agrees"
check zone-pair 'w["chain"]["exit"] == 0' "diagnose chain: complete with two flavors"

section "run multi-role.json"
rc=0
"$lab_sh" run "$here/tas/multi-role.json" >"$out/run.jsonl" 2>"$out/run.err" || rc=$?
[[ $rc == 0 ]] && pass "tas-lab.sh run: exit 0 (every expect met)" || { fail "tas-lab.sh run: exit $rc"; tail -n 20 "$out/run.err"; }
cat "$out/run.jsonl"
check llm-prefill-0 'w["kueue"]["quotaReserved"] == "True" and w["kueue"]["admitted"] != "True"' \
  "Kueue: prefill holds quota, not admitted (the joint check is Pending): held for its set"
check llm-prefill-0 'w["expectMet"]' "Kueue: prefill's topologyAssignment is inside one zone"
check llm-prefill-0 'w["diagnose"]["verdict"] == "fits" and "held for its set" in w["diagnose"]["conclusion"] and w["agree"]' \
  "diagnose: prefill holds a reservation, held for its set; agrees"
check llm-decode-0 'w["kueue"]["decision"] == "pending" and "allows to fit only 2 out of 3 pod(s)" in w["kueue"]["message"]' \
  "Kueue: decode Pending, the Topology fits only 2 of 3"
check llm-decode-0 'w["diagnose"]["verdict"] == "no-domain" and "short of a domain: decode" in w["diagnose"]["conclusion"] and "held for the set: prefill" in w["diagnose"]["conclusion"]' \
  "diagnose: decode short of a domain, prefill reserved and held for the set"
check llm-decode-0 'w["agree"]' "Kueue and diagnose agree"

section "change zone-to-rack.json (the live hierarchy change)"
rc=0
"$lab_sh" change "$here/tas/zone-to-rack.json" >"$out/change.jsonl" 2>"$out/change.err" || rc=$?
[[ $rc == 0 ]] && pass "tas-lab.sh change: exit 0" || { fail "tas-lab.sh change: exit $rc"; tail -n 20 "$out/change.err"; }
cat "$out/change.jsonl"
cx() { # NAME PYTHON-EXPRESSION WHAT: c = the change line, ws = {workload: after-change line}
  if python3 - "$out/change.jsonl" "$2" <<'PY'; then pass "$1: $3"; else fail "$1: $3"; fi
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
c = next((l for l in lines if l.get("change") == "hierarchy"), None)
ws = {l["workload"].split("/")[1]: l for l in lines if l.get("phase") == "after-change"}
before = {l["workload"].split("/")[1]: l for l in lines if "workload" in l and "phase" not in l}
agreement = next((l for l in lines if l.get("phase") == "agreement"), {})
sys.exit(0 if c is not None and eval(sys.argv[2]) else 1)
PY
}
cx before 'all(before[n]["kueue"]["decision"] == "admitted" and before[n]["agree"] for n in ("pair-1", "pair-2"))' \
  "both pairs admitted before the change, one per zone; diagnose agrees"
cx impact 'c["impact"]["baseline"] == "nodeLabels" and sorted(c["impact"]["nodes"]) == ["worker-a1", "worker-a2", "worker-b1"]' \
  "topogate's first revision after the restart: impact against the Nodes' labels names worker-a1, worker-a2, worker-b1"
cx relabel 'sorted(c["relabelled"]) == ["worker-a1", "worker-a2", "worker-b1"] and c["impactMatchesCluster"]' \
  "exactly those three Nodes' profile labels changed in the cluster (worker-b2 kept its own)"
cx queue 'c["queue"]["sameQueue"] and c["queue"]["drained"]["reservingWorkloads"] == 0 and c["queue"]["after"]["stopPolicy"] == "None" and len(c["queue"]["after"]["flavors"]) == 2' \
  "migration: HoldAndDrain reached zero reservations; same queue, two flavors, stop policy restored"
cx evicted 'sorted(c["evicted"]) == ["pair-1", "pair-2"]' "Kueue evicted both pairs during the drain"
cx readmitted 'sorted(w["readmitted"] for w in ws.values()) == [False, True]' \
  "exactly one pair readmitted: zone-b is now split between the rack and the zone profile"
cx agree 'all(w["agree"] for w in ws.values())' "diagnose agrees with Kueue on both after the change"
cx prediction 'agreement.get("agree") is True and len(agreement["observed"]["stranded"]) == 1' \
  "diagnose change's prediction before the change (evicted 2, admitted again 1, stranded 1) names what Kueue did"

# One scenario per input diagnose's step 7 follows (docs/operations.md, "The TAS lab"): each
# Workload decided by the real Kueue, diagnose's verdict agreeing, every `expect` met (exit 3
# otherwise).
section "Kueue's decision followed: tas/kueue-decision/"
for f in "$here"/tas/kueue-decision/*.json; do
  name=$(basename "$f" .json)
  t0=$SECONDS
  rc=0
  "$lab_sh" run "$f" >"$out/$name.jsonl" 2>"$out/$name.err" || rc=$?
  counts=$(python3 - "$out/$name.jsonl" <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
ws = [l for l in lines if "workload" in l and "phase" not in l]
print(len(ws), sum(1 for w in ws if w.get("agree")), sum(1 for w in ws if w.get("expectMet", True)))
PY
  ) || counts="0 0 0"
  read -r n agreed met <<<"$counts"
  if [[ $rc == 0 && $n -gt 0 && $agreed == "$n" && $met == "$n" ]]; then
    pass "$name: $n Workload(s), Kueue and diagnose agree, every expect met ($((SECONDS - t0)) s)"
  else
    fail "$name: exit $rc, $n Workload(s), $agreed agree, $met expectations met"
    tail -n 20 "$out/$name.err"
    cat "$out/$name.jsonl"
  fi
done

section cleanup
left=$("$lab_sh" status 2>/dev/null | grep -E '^  (workloads|nodes|clusterqueues): [1-9]' || true)
[[ -z $left ]] && pass "run removed the scenario's objects" || fail "left after run: $left"
if [[ ${E2E_KEEP:-0} != 1 ]]; then
  kueue_pid=$(cat "$TAS_LAB_DIR/kueue/pid")
  "$lab_sh" down >/dev/null 2>&1 && ! kill -0 "$kueue_pid" 2>/dev/null && [[ ! -e $TAS_LAB_DIR ]] &&
    pass "down: Kueue stopped, state removed" || fail "down left Kueue (pid $kueue_pid) or $TAS_LAB_DIR"
fi

echo "tas-lab: $((checks - fails)) passed, $fails failed in $((SECONDS - t_start)) s"
((fails == 0))

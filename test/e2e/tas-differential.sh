#!/usr/bin/env bash
# The differential against Kueue: seeded random clusters and Workloads
# (test/e2e/tas/generate.py), each loaded into the TAS lab (scripts/tas-lab.sh run), where
# the real Kueue decides (admitted with a topologyAssignment, or Pending) and
# `topogate diagnose pending` gives its verdict (a domain holds every PodSet, or none
# does). Prints the seed, every disagreeing case with the command that replays it, and
# the agreement table (Workloads, agreed, each disagreement class with its count).
#
# Usage: tas-differential.sh [--seed N] [--cases C] [--keep-cases DIR]
#   Uses the lab at TAS_LAB_DIR when it is up, else brings one up and down.
# Exit 0 when every disagreement falls in a named class (see docs/operations.md), 1 when
# one is unclassified or a case fails to run.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
lab_sh=$repo/scripts/tas-lab.sh
seed=$(( $(date +%s) % 100000 )) cases=20 keep=
while (($#)); do
  case $1 in
    --seed) seed=$2; shift 2 ;;
    --cases) cases=$2; shift 2 ;;
    --keep-cases) keep=$2; shift 2 ;;
    *) echo "usage: tas-differential.sh [--seed N] [--cases C] [--keep-cases DIR]" >&2; exit 2 ;;
  esac
done
t_start=$SECONDS
work=$(mktemp -d "${TMPDIR:-/tmp}/topogate-tas-diff.XXXXXX")
own_lab=0
cleanup() {
  ((own_lab)) && "$lab_sh" down >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

echo "seed $seed, $cases cases"
if ! "$lab_sh" status >/dev/null 2>&1; then
  own_lab=1
  "$lab_sh" up >/dev/null
fi
casedir=${keep:-$work/cases}
python3 "$here/tas/generate.py" --seed "$seed" --cases "$cases" --out "$casedir" >/dev/null
failed=0
for ((i = 0; i < cases; i++)); do
  f=$casedir/case-$seed-$i.json
  rc=0
  "$lab_sh" run "$f" >"$work/$i.jsonl" 2>"$work/$i.err" || rc=$?
  if [[ $rc != 0 && $rc != 3 ]]; then
    failed=$((failed + 1))
    echo "FAIL case $i: tas-lab.sh run exit $rc: $(tail -n 3 "$work/$i.err" | tr '\n' ' ')"
  fi
  cat "$work/$i.jsonl" >>"$work/all.jsonl"
done
touch "$work/all.jsonl"
rc=0
python3 - "$work/all.jsonl" "$seed" "$casedir" <<'PY' || rc=$?
import collections, json, sys
path, seed, casedir = sys.argv[1:]
lines = [json.loads(l) for l in open(path) if l.strip()]
scen = {}
def scenario(name):
    if name not in scen:
        scen[name] = json.load(open(f"{casedir}/{name}.json"))
    return scen[name]

def classify(l):
    """A named gap of diagnose's model, or None."""
    k, d = l["kueue"], l["diagnose"]
    s = scenario(l["scenario"])
    w = next(w for w in s["workloads"] if f"default/{w['name']}" == l["workload"])
    ps = w["podSets"][0]
    msg = k.get("message") or ""
    if d["verdict"] == "error" or k["decision"] is None:
        return "no decision / diagnose error"
    if k["decision"] == "admitted" and d["verdict"] == "no-domain" and ps.get("preferred"):
        return "preferred level: Kueue may span domains"
    if k["decision"] == "pending" and d["verdict"] == "fits" and "insufficient quota" in msg:
        return "quota: ClusterQueue nominalQuota"
    return None

agreed = sum(1 for l in lines if l["agree"])
classes = collections.Counter()
unclassified = []
for l in lines:
    if l["agree"]:
        continue
    c = classify(l)
    if c:
        classes[c] += 1
    else:
        unclassified.append(l)
    i = l["scenario"].rsplit("-", 1)[1]
    print(f"disagree {l['scenario']} {l['workload']}: Kueue {l['kueue']['decision']}"
          f" ({(l['kueue'].get('message') or '')[:140]}), diagnose {l['diagnose']['verdict']}"
          f" ({(l['diagnose'].get('conclusion') or '')[:140]}) -> {c or 'UNCLASSIFIED'}")
    print(f"  replay: python3 test/e2e/tas/generate.py --seed {seed} --only {i} --out /tmp/cases &&"
          f" scripts/tas-lab.sh run /tmp/cases/{l['scenario']}.json")
dec = collections.Counter((l["kueue"]["decision"], l["diagnose"]["verdict"]) for l in lines)
print()
print(f"| seed {seed} | count |")
print("|---|---|")
print(f"| cases | {len({l['scenario'] for l in lines})} |")
print(f"| Workloads | {len(lines)} |")
print(f"| agreed | {agreed} |")
for (kd, dv), n in sorted(dec.items()):
    print(f"| Kueue {kd} / diagnose {dv} | {n} |")
for c, n in classes.most_common():
    print(f"| disagreement: {c} | {n} |")
print(f"| disagreement: unclassified | {len(unclassified)} |")
sys.exit(1 if unclassified else 0)
PY
echo "differential: seed $seed, $cases cases, $failed failed to run, in $((SECONDS - t_start)) s"
((rc == 0 && failed == 0))

#!/usr/bin/env bash
# The differential against Kueue: seeded random clusters and Workloads
# (test/e2e/tas/generate.py), each loaded into a TAS lab (scripts/tas-lab.sh run), where
# the real Kueue decides (admitted with a topologyAssignment, or Pending) and
# `topogate diagnose pending` gives its verdict (a domain holds every PodSet, or, for a
# preferred level, the domains together do; or not). Prints the seed, every disagreeing
# case with the command that replays it, and the agreement table (Workloads, agreed, each
# disagreement class with its count).
#
# Usage: tas-differential.sh [--seed N] [--cases C] [--labs L] [--keep-cases DIR]
#   --labs L   run the cases on L labs at once (default 1 when the lab at TAS_LAB_DIR is
#              up, which is then used; else 3). Each lab is a control plane and a Kueue of
#              its own, so cases never share a scheduler; case i runs on lab i mod L, in
#              order, so a seed gives the same cases and the same decisions whatever L is.
# Exit 0 when every disagreement falls in a named class (see docs/operations.md), 1 when
# one is unclassified or a case fails to run.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
lab_sh=$repo/scripts/tas-lab.sh
seed=$(( $(date +%s) % 100000 )) cases=20 keep= labs=
while (($#)); do
  case $1 in
    --seed) seed=$2; shift 2 ;;
    --cases) cases=$2; shift 2 ;;
    --labs) labs=$2; shift 2 ;;
    --keep-cases) keep=$2; shift 2 ;;
    *) echo "usage: tas-differential.sh [--seed N] [--cases C] [--labs L] [--keep-cases DIR]" >&2; exit 2 ;;
  esac
done
[[ -z $labs || $labs =~ ^[1-9][0-9]?$ ]] || { echo "tas-differential.sh: --labs must be 1-99" >&2; exit 2; }
t_start=$SECONDS
work=$(mktemp -d "${TMPDIR:-/tmp}/topogate-tas-diff.XXXXXX")
own_labs=()
cleanup() {
  local d
  for d in "${own_labs[@]}"; do TAS_LAB_DIR=$d "$lab_sh" down >/dev/null 2>&1 || true; done
  rm -rf "$work"
}
trap cleanup EXIT

lab_dirs=()
if [[ -z $labs || $labs == 1 ]] && "$lab_sh" status >/dev/null 2>&1; then
  lab_dirs=("${TAS_LAB_DIR:-${TMPDIR:-/tmp}/topogate-tas-lab-$(id -u)}")  # the lab that is up
else
  labs=${labs:-3}
  t0=$SECONDS
  pids=()
  for ((j = 0; j < labs; j++)); do
    lab_dirs+=("$work/lab-$j")
    own_labs+=("$work/lab-$j")
    TAS_LAB_DIR=$work/lab-$j "$lab_sh" up >"$work/up-$j.out" 2>"$work/up-$j.err" &
    pids+=($!)
  done
  for ((j = 0; j < labs; j++)); do
    wait "${pids[$j]}" || { echo "lab $j did not come up:"; tail -n 20 "$work/up-$j.err"; exit 1; }
  done
  echo "$labs labs up in $((SECONDS - t0)) s"
fi
echo "seed $seed, $cases cases, ${#lab_dirs[@]} lab(s)"
casedir=${keep:-$work/cases}
python3 "$here/tas/generate.py" --seed "$seed" --cases "$cases" --out "$casedir" >/dev/null

# worker J: cases J, J+L, J+2L, ... on lab J, one at a time.
worker() {
  local j=$1 i f rc
  for ((i = j; i < cases; i += ${#lab_dirs[@]})); do
    f=$casedir/case-$seed-$i.json
    rc=0
    TAS_LAB_DIR=${lab_dirs[$j]} "$lab_sh" run "$f" >"$work/$i.jsonl" 2>"$work/$i.err" || rc=$?
    if [[ $rc != 0 && $rc != 3 ]]; then
      echo "FAIL case $i: tas-lab.sh run exit $rc: $(tail -n 3 "$work/$i.err" | tr '\n' ' ')" >>"$work/failed"
    fi
  done
}
t0=$SECONDS
pids=()
for ((j = 0; j < ${#lab_dirs[@]}; j++)); do
  worker "$j" &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p"; done
echo "$cases cases run in $((SECONDS - t0)) s"
failed=0
if [[ -f $work/failed ]]; then
  cat "$work/failed"
  failed=$(wc -l <"$work/failed")
fi
: >"$work/all.jsonl"
for ((i = 0; i < cases; i++)); do
  [[ -f $work/$i.jsonl ]] && cat "$work/$i.jsonl" >>"$work/all.jsonl"
done
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

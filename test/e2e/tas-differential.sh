#!/usr/bin/env bash
# The differential against Kueue: seeded random clusters and Workloads
# (test/e2e/tas/generate.py), each loaded into a TAS lab (scripts/tas-lab.sh run), where
# the real Kueue decides (admitted with a topologyAssignment, or Pending) and
# `topogate diagnose pending` gives its verdict (a domain holds every PodSet, or, for a
# preferred level, the domains together do; or not). Prints the seed, every disagreeing
# case with the command that replays it, and the agreement table (Workloads, agreed, each
# disagreement class with its count).
#
# With --changes K, also K change cases (generate.py --changes): each loaded with
# `tas-lab.sh change`, where `topogate diagnose change` predicts which admitted Workloads the
# hierarchy change evicts and which are admitted again, and the lab migrates the queue as
# GPUStack does; the change agreement table holds the prediction to what Kueue did.
#
# Usage: tas-differential.sh [--seed N] [--cases C] [--changes K] [--labs L]
#                            [--keep-cases DIR] [--min-agreed F]
#   --labs L   run the cases on L labs at once (default 1 when the lab at TAS_LAB_DIR is
#              up, which is then used; else 3). Each lab is a control plane and a Kueue of
#              its own, so cases never share a scheduler; case i runs on lab i mod L, in
#              order, so a seed gives the same cases and the same decisions whatever L is;
#              change case i runs on lab i mod L too, after that lab's pending cases.
#   --keep-cases DIR  the generated cases in DIR, and each case's results (the lab's lines,
#              stderr, exit status) in DIR/results
#   --min-agreed F  the floor: at least this fraction of the Workloads generated agree
#              (default 0.95, tas/report.py), in the pending cases and in the change cases
# Exit 0 when every case ran (exit 3, an `expect` not met, included), every Workload has
# one result with a Kueue decision and a diagnose verdict, every disagreement falls in a
# named class (see docs/operations.md) and agreement is at or above the floor; the same for
# the change cases (every one ran, `tas-lab.sh change` exit 0, a prediction and an
# agreement line); else 1.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
lab_sh=$here/lab/tas-lab.sh
seed=$(( $(date +%s) % 100000 )) cases=20 changes=0 keep= labs= min_agreed=
while (($#)); do
  case $1 in
    --seed) seed=$2; shift 2 ;;
    --cases) cases=$2; shift 2 ;;
    --changes) changes=$2; shift 2 ;;
    --labs) labs=$2; shift 2 ;;
    --keep-cases) keep=$2; shift 2 ;;
    --min-agreed) min_agreed=$2; shift 2 ;;
    *) echo "usage: tas-differential.sh [--seed N] [--cases C] [--changes K] [--labs L] [--keep-cases DIR] [--min-agreed F]" >&2; exit 2 ;;
  esac
done
[[ $cases =~ ^[0-9]+$ && $changes =~ ^[0-9]+$ ]] || { echo "tas-differential.sh: --cases and --changes take a count" >&2; exit 2; }
[[ -z $labs || $labs =~ ^[1-9][0-9]?$ ]] || { echo "tas-differential.sh: --labs must be 1-99" >&2; exit 2; }
t_start=$SECONDS
work=$(mktemp -d "${TMPDIR:-/tmp}/topogate-tas-diff.XXXXXX")
own_labs=()
cleanup() {
  local d
  for d in "${own_labs[@]}"; do TAS_LAB_DIR=$d "$lab_sh" down >/dev/null 2>&1 || true; done
  if [[ -n $keep ]]; then  # the results beside the cases kept
    mkdir -p "$keep/results" && cp -p "$work"/*.jsonl "$work"/*.err "$work"/*.rc "$keep/results/" 2>/dev/null || true
  fi
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
echo "seed $seed, $cases cases, $changes change cases, ${#lab_dirs[@]} lab(s)"
casedir=${keep:-$work/cases}
python3 "$here/tas/generate.py" --seed "$seed" --cases "$cases" --out "$casedir" >/dev/null
python3 "$here/tas/generate.py" --seed "$seed" --cases "$changes" --changes --out "$casedir" >/dev/null

# worker J: cases J, J+L, J+2L, ... on lab J, one at a time, then change cases J, J+L, ...
# the same way. Each case leaves its result lines, its stderr and its exit status for
# tas/report.py (RESULTS/<i>.* and RESULTS/change-<i>.*).
worker() {
  local j=$1 i rc cmd n prefix
  for cmd in run change; do
    if [[ $cmd == run ]]; then n=$cases prefix=; else n=$changes prefix=change-; fi
    for ((i = j; i < n; i += ${#lab_dirs[@]})); do
      rc=0
      TAS_LAB_DIR=${lab_dirs[$j]} "$lab_sh" "$cmd" "$casedir/${prefix:-case-}$seed-$i.json" \
        >"$work/$prefix$i.jsonl" 2>"$work/$prefix$i.err" || rc=$?
      echo "$rc" >"$work/$prefix$i.rc"
    done
  done
}
t0=$SECONDS
pids=()
for ((j = 0; j < ${#lab_dirs[@]}; j++)); do
  worker "$j" &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p"; done
echo "$cases cases and $changes change cases run in $((SECONDS - t0)) s"
rc=0
python3 "$here/tas/report.py" --results "$work" --cases-dir "$casedir" --seed "$seed" \
  --cases "$cases" --changes "$changes" ${min_agreed:+--min-agreed "$min_agreed"} || rc=$?
echo "differential: seed $seed, $cases cases, $changes change cases, $( ((rc == 0)) && echo held || echo FAILED) in $((SECONDS - t_start)) s"
exit $rc

#!/usr/bin/env bash
# Linearizability of the push API on the kubernetes store (test/linearizability): topogate
# replicas on a real control plane of their own (control-plane.sh), each behind its own
# fault proxy, pushes, compare-and-sets and reads recorded while a seeded fault schedule
# runs, the history checked with Porcupine (P1-P5, see test/linearizability/README.md).
#
# Usage: linearizability.sh                 one seeded run (at most 3 minutes): the test
#        linearizability.sh table N D       N seeded runs of D seconds each, then a table
#                                           (seed, replicas, operations, indeterminate
#                                           operations, faults by kind, verdict per P1-P5)
#        linearizability.sh run FLAGS...    one run of lincheck with these flags, e.g.
#                                           -plan lost-update -replicas 2 -seed 7 -duration 40s
# Env: TOPOGATE_BINARY (default build/{dev,debug,release}/cli/topogate),
#      LIN_SEED (first seed, default 1), LIN_DURATION (the test's run, default 90s),
#      LIN_REPLICAS (the test's, default 2), LIN_PLAN (default all),
#      E2E_KEEP=1 keeps the work folder and the control plane.
# Histories, reports and Porcupine's visualizations go to build/linearizability/.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)

. "$here/lib.sh"
e2e_init linearizability
mode=${1:-test}
[[ $# -gt 0 ]] && shift

section "build lincheck"
out=$repo/build/linearizability
mkdir -p "$out"
(cd "$repo/test/linearizability" && GOTOOLCHAIN=local GOFLAGS=-mod=readonly go build -o "$work/lincheck" ./cmd/lincheck)
pass "lincheck built"

section "control plane"
e2e_cp_start
pass "control plane at $TOPOGATE_CP_URL"

lincheck() {
  "$work/lincheck" -topogate "$topogate" -control-plane "$here/control-plane.sh" \
    -work "$work/runs" -artifacts "$out" "$@"
}

case $mode in
  test)
    seed=${LIN_SEED:-1}
    section "one seeded run: seed $seed, ${LIN_REPLICAS:-2} replicas, plan ${LIN_PLAN:-all}, ${LIN_DURATION:-90s}"
    if lincheck -seed "$seed" -replicas "${LIN_REPLICAS:-2}" -plan "${LIN_PLAN:-all}" \
      -duration "${LIN_DURATION:-90s}" -summary "$work/summary.jsonl"; then
      pass "seed $seed: P1-P5 hold"
    else
      fail "seed $seed: see $out/lincheck-$seed.report.txt"
    fi
    ;;
  table)
    n=${1:?table N D}
    d=${2:?table N D}
    first=${LIN_SEED:-1}
    for ((i = 0; i < n; i++)); do
      seed=$((first + i))
      reps=$((2 + i % 2))
      section "run $((i + 1))/$n: seed $seed, $reps replicas, plan ${LIN_PLAN:-all}, ${d}s"
      if lincheck -seed "$seed" -replicas "$reps" -plan "${LIN_PLAN:-all}" -duration "${d}s" \
        -summary "$work/summary.jsonl" >"$out/lincheck-$seed.out" 2>&1; then
        pass "seed $seed"
      else
        fail "seed $seed: see $out/lincheck-$seed.report.txt"
      fi
      tail -n 1 "$out/lincheck-$seed.out"
    done
    section "table"
    "$work/lincheck" table "$work/summary.jsonl" | tee "$out/table.txt" || true
    ;;
  run)
    if lincheck "$@"; then pass "lincheck $*"; else fail "lincheck $*"; fi
    ;;
  *)
    sed -n '2,20p' "$0" >&2
    exit 2
    ;;
esac

echo "linearizability: $((checks - fails)) passed, $fails failed"
((fails == 0))

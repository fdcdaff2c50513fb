#!/usr/bin/env python3
"""Instruction-count guard (CTest `perf_guard.instructions`, label perf-guard).

Runs the two drivers under `valgrind --tool=callgrind --instr-atstart=no`; each driver
switches instrumentation on only around its instr_region() call, so only that is
counted, and compares the counts with bench/instr_baseline.json for the build type
(Debug for the dev preset that CI builds, Release for the release preset):

  validate_1mib_json  check_snapshot on the ~1 MiB JSON snapshot (~8000 Nodes x 3 levels)
  admission_N         N AdmissionReviews (alternately valid and invalid, ~2.6 KiB each)
                      in-process; N = 10 000 by default (--reviews), the count is linear in N
  node_event_N        100 Node watch events that change a label no rule reads, parsed and
                      applied to a view of N Nodes (1 000 and 10 000): the two must stay
                      equal within the tolerance, whatever the cluster's size
  node_change_10000   10 Node changes that matter (a Node out of the nodeSelector and back)
                      at 10 000 Nodes, each applied and re-evaluated (a new served revision):
                      the departures cut from the served rendering, the returns in full
  node_label_10000    10 changes of a label the rules read (a described Node's rack) at
                      10 000 Nodes that change nothing served: decided from that Node alone

Instruction counts are deterministic for one binary on one machine kind (same compiler,
same libraries, same CPU features: simdjson and the core pick AVX2 at run time), so the
guard needs no wall-clock threshold. It fails only when a count exceeds the baseline by
more than the tolerance; a count far below the baseline passes with a hint to re-baseline.

Exit codes: 0 pass, 1 regression, 2 driver failure, 77 skipped (no valgrind, or no
baseline recorded for this build type).

Re-baseline (after an intended change; commit the JSON):
  TOPOGATE_INSTR_UPDATE=1 ctest --test-dir build/dev -R perf_guard --output-on-failure
or directly:
  bench/instr_guard.py --update --build-type Debug \\
      --validate build/dev/bench/instr_validate --admission build/dev/bench/instr_admission
"""

import argparse
import concurrent.futures
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
BASELINE = HERE / "instr_baseline.json"
DEFAULT_TOLERANCE = 0.10
# Below this fraction of the baseline the guard suggests recording a new one, so that a
# later regression of the improved code is caught.
DEFAULT_REBASELINE_BELOW = 0.80


def callgrind_count(valgrind, cmd):
    """Instructions executed inside instr_region() (and what it calls)."""
    with tempfile.TemporaryDirectory(prefix="instr-guard-") as d:
        out_file = Path(d) / "callgrind.out"
        # The driver switches instrumentation on just around its instr_region() call
        # (CALLGRIND_START/STOP_INSTRUMENTATION): everything instrumented is counted.
        full = [valgrind, "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out_file}", *cmd]
        start = time.monotonic()
        proc = subprocess.run(full, capture_output=True, text=True)
        elapsed = time.monotonic() - start
        if proc.returncode != 0:
            sys.stderr.write(proc.stdout + proc.stderr)
            raise SystemExit(f"driver failed ({proc.returncode}): {' '.join(cmd)}")
        text = out_file.read_text()
        # "totals:" is the sum over the run; "summary:" stays 0 when instrumentation
        # starts switched off.
        m = re.search(r"^totals:\s+(\d+)", text, re.M)
        if not m:
            raise SystemExit(f"no instruction total in the callgrind output of {cmd[0]}")
        return int(m.group(1)), elapsed, proc.stdout


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build-type", required=True, help="CMAKE_BUILD_TYPE of the drivers (baseline key)")
    ap.add_argument("--validate", required=True, help="path to instr_validate")
    ap.add_argument("--admission", required=True, help="path to instr_admission")
    ap.add_argument("--node-event", help="path to instr_node_event")
    ap.add_argument("--node-change", help="path to instr_node_change")
    ap.add_argument("--valgrind", default="", help="valgrind executable (default: from PATH)")
    ap.add_argument("--reviews", type=int, default=10000,
                    help="admission reviews handled in the counted region (the count is linear in it)")
    ap.add_argument("--baseline", default=str(BASELINE))
    ap.add_argument("--update", action="store_true", help="record the measured counts as the baseline")
    args = ap.parse_args()
    update = args.update or os.environ.get("TOPOGATE_INSTR_UPDATE") == "1"

    valgrind = args.valgrind if args.valgrind and not args.valgrind.endswith("-NOTFOUND") else shutil.which("valgrind")
    if not valgrind:
        print("perf guard skipped: valgrind not found (scripts/install-deps.sh installs it)")
        return 77
    build_type = args.build_type or "none"

    cases = {
        "validate_1mib_json": [args.validate],
        f"admission_{args.reviews}": [args.admission, str(HERE / "http/review-valid.json"),
                                      str(HERE / "http/review-invalid.json"), str(args.reviews)],
    }
    if args.node_event:
        for n in (1000, 10000):
            cases[f"node_event_{n}"] = [args.node_event, str(n)]
    if args.node_change:
        cases["node_change_10000"] = [args.node_change, "10000"]
        cases["node_label_10000"] = [args.node_change, "10000", "label"]
    baseline_path = Path(args.baseline)
    data = json.loads(baseline_path.read_text()) if baseline_path.exists() else {}
    tolerance = float(data.get("tolerance", DEFAULT_TOLERANCE))
    rebaseline_below = float(data.get("rebaseline_below", DEFAULT_REBASELINE_BELOW))
    recorded = data.get("counts", {}).get(build_type, {})

    measured = {}
    # The two drivers are independent: run them side by side (CI machines have 2 cores).
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        runs = {name: pool.submit(callgrind_count, valgrind, cmd) for name, cmd in cases.items()}
        counted = {name: f.result() for name, f in runs.items()}
    print(f"instruction counts, build type {build_type}, tolerance +{tolerance:.0%} "
          f"(callgrind, instr_region only)")
    print(f"{'case':<22}{'measured':>16}{'baseline':>16}{'ratio':>8}  verdict   (valgrind time)")
    failed = False
    for name in cases:
        count, elapsed, _ = counted[name]
        measured[name] = count
        base = recorded.get(name)
        if base is None:
            verdict, ratio_text = "no baseline", "-"
        else:
            ratio = count / base
            ratio_text = f"{ratio:.3f}"
            if ratio > 1 + tolerance:
                verdict, failed = "REGRESSED", True
            elif ratio < rebaseline_below:
                verdict = "improved: re-baseline"
            else:
                verdict = "ok"
        print(f"{name:<22}{count:>16,}{(base or 0):>16,}{ratio_text:>8}  {verdict}   ({elapsed:.1f} s)")

    if "node_event_1000" in measured and "node_event_10000" in measured:
        # The per-event cost must not grow with the cluster: ten times the Nodes, the same count.
        growth = measured["node_event_10000"] / measured["node_event_1000"]
        flat = growth <= 1 + tolerance
        print(f"node_event growth from 1 000 to 10 000 Nodes: {growth:.3f} "
              f"({'flat' if flat else 'GROWS WITH THE CLUSTER'})")
        failed = failed or not flat
    if update:
        data.setdefault("tolerance", DEFAULT_TOLERANCE)
        data.setdefault("rebaseline_below", DEFAULT_REBASELINE_BELOW)
        data.setdefault("counts", {}).setdefault(build_type, {}).update(measured)
        baseline_path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
        print(f"baseline for {build_type} written to {baseline_path}")
        return 0
    if failed:
        print(f"FAILED: instruction count above the baseline by more than {tolerance:.0%}; if the increase "
              "is intended, re-baseline (see bench/README.md) and commit bench/instr_baseline.json")
        return 1
    if not any(k in recorded for k in measured):
        print(f"perf guard skipped: no baseline for build type {build_type!r} in {baseline_path}")
        return 77
    if any(measured[k] < rebaseline_below * recorded[k] for k in measured if k in recorded):
        print("hint: a count is far below its baseline; record the improvement so a later regression "
              "is caught: TOPOGATE_INSTR_UPDATE=1 ctest -R perf_guard (then commit bench/instr_baseline.json)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

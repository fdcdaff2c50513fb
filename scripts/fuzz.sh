#!/usr/bin/env bash
# Builds the libFuzzer targets (test/fuzz: clang's -fsanitize=fuzzer with ASan+UBSan) in
# build/fuzz and runs each for a bounded time, seeded from conformance/cases/.
#   scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]
# Prints executions per second and total executions per target. Exits non-zero when a
# target crashes, leaks, times out on one input or fails a differential property; the
# input is saved under build/fuzz/artifacts/<target>/ (replay: build/fuzz/<target> FILE).
# Environment: FUZZ_BUILD_DIR (default build/fuzz), FUZZ_JOBS (build jobs and targets run
# at once, default 2), FUZZ_SKIP_BUILD=1 (run the targets already built), FUZZ_CXX
# (default clang++-16). No target compiles the Kubernetes client (kube/), whose Asio coroutines
# clang 14 cannot instrument ("Cannot represent a difference across sections") and clang 16
# takes about ten minutes on: fuzz_http links the request path without it (test/fuzz).
set -uo pipefail
cd "$(dirname "$0")/.."

seconds=${1:-60}
shift || true
all_targets=(fuzz_syntax fuzz_snapshot fuzz_snapshot_diff fuzz_objects fuzz_admission fuzz_http fuzz_tls fuzz_session)
targets=("$@")
((${#targets[@]})) || targets=("${all_targets[@]}")
build=${FUZZ_BUILD_DIR:-build/fuzz}
jobs=${FUZZ_JOBS:-2}

if [[ ! -f $build/build.ninja ]]; then
  cxx=${FUZZ_CXX:-clang++-16}
  CXX=$cxx CC=${cxx/clang++/clang} cmake -S test/fuzz -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null || exit 2
fi
if [[ ${FUZZ_SKIP_BUILD:-0} != 1 ]]; then
  nice -n 5 cmake --build "$build" -j "$jobs" --target "${targets[@]}" || exit 2
fi

rm -rf "$build/seeds"
python3 test/fuzz/make_corpus.py . "$build/seeds" >/dev/null || exit 2

# libFuzzer's leak checker runs at exit; the registry's threads are stopped only then.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:symbolize=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

run_target() { # TARGET: runs it, writes $build/<target>.result (the summary line)
  local t=$1 corpus=$build/corpus/$1 artifacts=$build/artifacts/$1/ log=$build/$1.log rc runs rate result=ok
  mkdir -p "$corpus" "$artifacts"
  # -max_len: large enough for a multi-node snapshot, small enough to keep the execution
  # rate useful (the 1 MiB seeds are cut; the size limits have their own unit tests).
  # -timeout: one input slower than this is a finding (a parser that can be stalled).
  nice -n 5 "$build/$t" "$corpus" "$build/seeds/$t" -max_total_time="$seconds" -max_len=65536 -timeout=20 \
    -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$artifacts" >"$log" 2>&1
  rc=$?
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  if ((rc != 0)); then
    result=FAILED
    local artifact
    artifact=$(ls -t "$artifacts" | head -1)
    {
      echo "== $t FAILED (log: $log)"
      # The property's own message (up to 20 lines), or the sanitizer's summary.
      grep -A20 'PROPERTY FAILED' "$log" | sed '/ERROR: libFuzzer/,$d' | head -20
      grep -E 'ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error|SUMMARY' "$log" | head -5
      echo "   artifact: $artifact"
      # The input itself, so that a failure seen only in CI's output can be replayed:
      # base64 -d > FILE; build/fuzz/<target> FILE.
      if [[ -n $artifact && -f $artifacts$artifact ]]; then
        if (($(stat -c %s "$artifacts$artifact") <= 16384)); then
          echo "   input (base64): $(base64 -w0 "$artifacts$artifact")"
        else
          echo "   input: $(stat -c %s "$artifacts$artifact") bytes, too large to print"
        fi
      fi
    } >&2
  fi
  printf '%-20s %8s %14s %12s %8s\n' "$t" "$seconds" "${runs:-?}" "${rate:-?}" "$result" >"$build/$t.result"
}

# Up to $jobs targets at once (one core each).
echo "== fuzzing ${#targets[@]} targets, ${seconds}s each, $jobs at a time"
running=0
for t in "${targets[@]}"; do
  rm -f "$build/$t.result"
  run_target "$t" &
  running=$((running + 1))
  if ((running >= jobs)); then
    wait -n
    running=$((running - 1))
  fi
done
wait

status=0
printf '%-20s %8s %14s %12s %8s\n' target seconds executions "exec/s" result >"$build/summary.txt"
for t in "${targets[@]}"; do
  if [[ -f $build/$t.result ]]; then cat "$build/$t.result"; else printf '%-20s %8s %14s %12s %8s\n' "$t" "$seconds" ? ? FAILED; fi
done >>"$build/summary.txt"
grep -q -E ' (FAILED)$' "$build/summary.txt" && status=1
echo
cat "$build/summary.txt"
exit $status

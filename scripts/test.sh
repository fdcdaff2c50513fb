#!/usr/bin/env bash
# The test command: installs what is needed, builds, and runs every test.
#   ./scripts/test.sh
# Stages, in order (each is built and run even when an earlier one failed):
#   dev         the dev preset: every CTest test (GoogleTest, and pytest against the real
#               binary)
#   asan-ubsan  the same suite built with AddressSanitizer + UndefinedBehaviorSanitizer
#   tsan        ThreadSanitizer: the inventory, server and integration tests (the code
#               with threads: the reconcile loops, the store, the Asio server)
#   fuzz        every libFuzzer target for TOPOGATE_FUZZ_SECONDS with ASan+UBSan
#               (scripts/fuzz.sh, two targets at a time)
#   image       the container image (scripts/image.sh): a release build on a base of Debian
#               packages, run once (version, the demo fetched with curl, SIGTERM)
#   e2e         the Kubernetes end-to-end and conformance suites (test/e2e/all.sh: a real
#               kube-apiserver, etcd, kubectl, helm, kubelet, kube-proxy and controllers
#               built from pinned Go modules and cached in ~/.cache/topogate, containerd
#               and runc from Debian), against the dev binary; its node suite installs
#               the chart with the image on a real node
# The closing `total:` line counts CTest tests of every preset, fuzz targets and
# end-to-end suites; a stage that could not be built counts as one failure.
# Environment:
#   TOPOGATE_PRESETS        presets run over the whole CTest suite (default: dev asan-ubsan)
#   TOPOGATE_TSAN_LABELS    CTest labels run under tsan (default: inventory|server|integration;
#                           empty skips the stage)
#   TOPOGATE_FUZZ_SECONDS   seconds per fuzz target (default 60; 0 skips the stage)
#   TOPOGATE_FUZZ_TARGETS   the targets (default: all eight, as scripts/fuzz.sh lists them; fuzz_http, fuzz_tls and
#                           fuzz_session link the request path, and fuzz_session the whole
#                           server, without the Kubernetes client: about 150 CPU-seconds of
#                           build on top of the libraries the other five build, and a minute
#                           more for the server; the targets run two at a time, four rounds)
#   TOPOGATE_SKIP_IMAGE     set to 1 to skip the image stage (the node suite then builds
#                           the image itself when build/image/topogate-oci.tar is missing)
#   TOPOGATE_SKIP_E2E       set to 1 to skip the Kubernetes stage
#   TOPOGATE_JOBS           build and test parallelism (default: nproc)
set -uo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-deps.sh || exit 2
# The pinned Go toolchain install-deps.sh brought, when no Go >= 1.26 was on PATH.
. scripts/go-path.sh

# The Go-built Kubernetes tools and Kueue (cached in ~/.cache/topogate; a cold build takes
# about 20 minutes on 2 cores) build in the background from the start, at the lowest CPU
# priority, so they use what the C++ stages leave idle. The e2e stage waits for the
# Kubernetes tools only: Kueue, which only the TAS lab's steps near its end need, goes on
# building with what the first suites leave idle (build-kueue.sh makes the lab wait for it).
prebuild_pid=
if [[ ${TOPOGATE_SKIP_E2E:-0} != 1 ]]; then
  mkdir -p build
  rm -f build/prebuild-kube.rc
  (nice -n 19 bash test/e2e/build-kube-bins.sh; echo $? >build/prebuild-kube.rc
   nice -n 19 bash test/e2e/build-kueue.sh) >build/prebuild.log 2>&1 </dev/null &
  prebuild_pid=$!
fi

presets=${TOPOGATE_PRESETS:-dev asan-ubsan}
tsan_labels=${TOPOGATE_TSAN_LABELS-inventory|server|integration}
fuzz_seconds=${TOPOGATE_FUZZ_SECONDS:-60}
# Empty: scripts/fuzz.sh runs every target it knows.
read -r -a fuzz_targets <<<"${TOPOGATE_FUZZ_TARGETS:-}"
jobs=${TOPOGATE_JOBS:-$(nproc)}
passed=0 failed=0 status=0
stages=()

stage_done() { # NAME RESULT T0 DETAIL
  stages+=("$(printf '%-12s %-4s %5d s  %s' "$1" "$2" $((SECONDS - $3)) "$4")")
}

ctest_stage() { # NAME PRESET CTEST_ARGS... -- BUILD_TARGETS...
  local name=$1 preset=$2 t0=$SECONDS args=() targets=() log rc f total
  shift 2
  while (($#)) && [[ $1 != -- ]]; do args+=("$1"); shift; done
  (($#)) && shift
  targets=("$@")
  echo "== $name: build (preset $preset)"
  if ! cmake --preset "$preset" >/dev/null ||
     ! cmake --build --preset "$preset" -j "$jobs" ${targets[@]+--target "${targets[@]}"}; then
    failed=$((failed + 1)) status=1
    stage_done "$name" FAIL "$t0" "build failed"
    return 1
  fi
  echo "== $name: ctest ${args[*]}"
  log=$(mktemp)
  ctest --preset "$preset" -j "$jobs" --timeout 900 "${args[@]}" 2>&1 | tee "$log"
  rc=${PIPESTATUS[0]}
  # "100% tests passed, 0 tests failed out of 573"
  read -r f total < <(sed -n 's/.*tests passed, \([0-9]*\) tests failed out of \([0-9]*\).*/\1 \2/p' "$log" | tail -1)
  rm -f "$log"
  if [[ -z ${total:-} ]]; then f=1 total=1; fi  # ctest did not get as far as its summary
  passed=$((passed + total - f))
  failed=$((failed + f))
  ((rc == 0)) || status=1
  stage_done "$name" "$( ((rc == 0)) && echo ok || echo FAIL)" "$t0" "$((total - f))/$total tests passed"
}

for preset in $presets; do
  ctest_stage "$preset" "$preset"
done

# ThreadSanitizer is 5-15x slower than the plain build: only the tests that exercise
# threads, and only the binaries they need.
if [[ -n $tsan_labels ]]; then
  ctest_stage tsan tsan -L "^($tsan_labels)\$" -- inventory_tests server_tests topogate
fi

if ((fuzz_seconds > 0)); then
  t0=$SECONDS
  echo "== fuzz: ${fuzz_seconds}s per target"
  FUZZ_JOBS=$jobs bash scripts/fuzz.sh "$fuzz_seconds" "${fuzz_targets[@]}"
  rc=$?
  if [[ -f build/fuzz/summary.txt ]] && ((rc != 2)); then
    ok=$(grep -c ' ok$' build/fuzz/summary.txt)
    bad=$(grep -c ' FAILED$' build/fuzz/summary.txt)
  else
    ok=0 bad=1  # the targets could not be built
  fi
  passed=$((passed + ok))
  failed=$((failed + bad))
  ((rc == 0)) || status=1
  stage_done fuzz "$( ((rc == 0)) && echo ok || echo FAIL)" "$t0" "$ok/$((ok + bad)) targets clean"
fi

# The container image (scripts/image.sh: release build, Debian base, run once); the
# e2e stage's node suite installs the chart with it.
if [[ ${TOPOGATE_SKIP_IMAGE:-0} != 1 ]]; then
  t0=$SECONDS
  echo "== image"
  if bash scripts/image.sh; then
    passed=$((passed + 1))
    stage_done image ok "$t0" "built, ran version, the demo and SIGTERM"
  else
    failed=$((failed + 1)) status=1
    stage_done image FAIL "$t0" "scripts/image.sh failed"
  fi
fi

if [[ ${TOPOGATE_SKIP_E2E:-0} != 1 ]]; then
  t0=$SECONDS
  echo "== Kubernetes end-to-end and conformance"
  waited=0
  if [[ -n $prebuild_pid ]]; then
    echo "waiting for the Go-built Kubernetes tools (build/prebuild.log)"
    while [[ ! -s build/prebuild-kube.rc ]] && kill -0 "$prebuild_pid" 2>/dev/null; do sleep 1; done
    [[ $(cat build/prebuild-kube.rc 2>/dev/null) == 0 ]] ||
      echo "the background tool build failed; all.sh builds again (build/prebuild.log):"
    waited=$((SECONDS - t0))
    tail -n 12 build/prebuild.log
  fi
  first=${presets%% *}
  log=$(mktemp)
  TOPOGATE_BINARY=$PWD/build/$first/cli/topogate bash test/e2e/all.sh 2>&1 | tee "$log"
  rc=${PIPESTATUS[0]}
  ok=$(sed -n '/^=== summary/,$p' "$log" | grep -c ' ok ')
  bad=$(sed -n '/^=== summary/,$p' "$log" | grep -c ' FAIL ')
  rm -f "$log"
  ((ok + bad)) || bad=1  # all.sh stopped before its summary
  # Kueue's background build has ended by now unless no step needed it.
  [[ -n $prebuild_pid ]] && { wait "$prebuild_pid" || true; }
  passed=$((passed + ok))
  failed=$((failed + bad))
  ((rc == 0)) || status=1
  stage_done e2e "$( ((rc == 0)) && echo ok || echo FAIL)" "$t0" \
    "$ok/$((ok + bad)) suites passed (of the time, $waited s waiting for the Go-built Kubernetes tools)"
fi

echo "== summary (stage, result, wall time; total: CTest tests of every preset + fuzz targets + end-to-end suites)"
((${#stages[@]})) && printf '%s\n' "${stages[@]}"
printf '%-12s %-4s %5d s\n' all "$( ((status == 0)) && echo ok || echo FAIL)" "$SECONDS"
echo "total: $passed passed, $failed failed"
exit $status

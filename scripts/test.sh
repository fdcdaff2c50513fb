#!/usr/bin/env bash
# The test command: installs what is needed, builds, and runs every test.
#   ./scripts/test.sh
# Stages, in order (each is built and run even when an earlier one failed):
#   dev         the dev preset: every CTest test (GoogleTest, and pytest against the real
#               binary)
#   asan-ubsan  the same suite built with AddressSanitizer + UndefinedBehaviorSanitizer
#   tsan        ThreadSanitizer: the kube-client, inventory, server and integration tests
#               (the code with threads: the API client, the reconcile loops, the store,
#               the Asio server)
#   fuzz        every libFuzzer target for TOPOGATE_FUZZ_SECONDS with ASan+UBSan
#               (scripts/fuzz.sh, two targets at a time)
#   image       the container image (scripts/image.sh): a release build on a base of Debian
#               packages, run once (version, the demo fetched with curl, SIGTERM)
#   kube        the Kube* unit tests (CTest label kube: the inventory's Kubernetes store and
#               Node watch) of every preset built (dev, asan-ubsan, tsan), against a
#               control plane of their own (test/e2e/control-plane.sh); the preset stages
#               leave them out
#   e2e         the Kubernetes end-to-end and conformance suites (test/e2e/all.sh: a real
#               kube-apiserver, etcd, kubectl, helm, kubelet, kube-proxy and controllers
#               built from pinned Go modules and cached in ~/.cache/topogate, containerd
#               and runc from Debian), against the dev binary; its node suite installs
#               the chart with the image on a real node
# Counts: each stage's row and the closing `total:` line count passed, failed and skipped
# separately, from CTest's JUnit report and each pytest file's own (scripts/test_counts.py;
# a pytest file counts as its cases), fuzz targets (one each) and end-to-end suites. A
# stage that could not be built, or found no test, counts as one failure. Every skip is
# listed with its reason; with CI=true (.ci/run) a skip not on test/expected-skips.txt, or
# a stage turned off below, fails the run.
# Environment (each switch that turns a stage off leaves its row, "skipped (...)";
# .ci/run refuses them all):
#   TOPOGATE_PRESETS        presets run over the whole CTest suite (default: dev asan-ubsan)
#   TOPOGATE_TSAN_LABELS    CTest labels run under tsan (default:
#                           kube-client|inventory|server|integration;
#                           empty turns the stage off)
#   TOPOGATE_FUZZ_SECONDS   seconds per fuzz target (default 60; 0 turns the stage off)
#   TOPOGATE_FUZZ_TARGETS   the targets (default: all eight, as scripts/fuzz.sh lists them; fuzz_http, fuzz_tls and
#                           fuzz_session link the request path, and fuzz_session the whole
#                           server, without the Kubernetes client: about 150 CPU-seconds of
#                           build on top of the libraries the other five build, and a minute
#                           more for the server; the targets run two at a time, four rounds)
#   TOPOGATE_SKIP_IMAGE     set to 1 to turn the image stage off (the node suite then builds
#                           the image itself when build/image/topogate-oci.tar is missing)
#   TOPOGATE_SKIP_KUBE      set to 1 to turn the kube stage off (without it, the stage builds
#                           the Go-built control plane when the cache lacks it)
#   TOPOGATE_SKIP_E2E       set to 1 to turn the e2e stage off
#   TOPOGATE_JOBS           build and test parallelism (default: nproc)
set -uo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-deps.sh || exit 2
# The pinned Go toolchain install-deps.sh brought, when no Go >= 1.26 was on PATH.
. scripts/go-path.sh
# Compiled objects are cached outside the checkout (ccache, ~/.cache/ccache): the four
# builds of a run on a machine that ran the command before, from any checkout, take
# minutes less. Paths are taken relative to the checkout so that another clone hits too.
if command -v ccache >/dev/null && [[ -z ${CMAKE_CXX_COMPILER_LAUNCHER:-} ]]; then
  export CMAKE_C_COMPILER_LAUNCHER=ccache CMAKE_CXX_COMPILER_LAUNCHER=ccache
  export CCACHE_BASEDIR=$PWD CCACHE_NOHASHDIR=1 CCACHE_MAXSIZE=${CCACHE_MAXSIZE:-8G}
fi

# The Go-built Kubernetes tools and Kueue (cached in ~/.cache/topogate; a cold build takes
# about 20 minutes on 2 cores) build in the background from the start, at the lowest CPU
# priority, so they use what the C++ stages leave idle. The e2e stage waits for the
# Kubernetes tools only: Kueue, which only the TAS lab's steps near its end need, goes on
# building with what the first suites leave idle (build-kueue.sh makes the lab wait for it).
prebuild_pid=
if [[ ${TOPOGATE_SKIP_E2E:-0} != 1 || ${TOPOGATE_SKIP_KUBE:-0} != 1 ]]; then
  mkdir -p build
  rm -f build/prebuild-kube.rc
  (nice -n 19 bash test/e2e/build-kube-bins.sh; echo $? >build/prebuild-kube.rc
   nice -n 19 bash test/e2e/build-kueue.sh
   # NFD's nfd-master for test/e2e/nfd.sh (build-nfd.sh makes the suite wait for it).
   nice -n 19 bash test/e2e/build-nfd.sh) >build/prebuild.log 2>&1 </dev/null &
  prebuild_pid=$!
fi

default_presets="dev asan-ubsan"
presets=${TOPOGATE_PRESETS:-$default_presets}
tsan_labels=${TOPOGATE_TSAN_LABELS-kube-client|inventory|server|integration}
fuzz_seconds=${TOPOGATE_FUZZ_SECONDS:-60}
# Empty: scripts/fuzz.sh runs every target it knows.
read -r -a fuzz_targets <<<"${TOPOGATE_FUZZ_TARGETS:-}"
jobs=${TOPOGATE_JOBS:-$(nproc)}
passed=0 failed=0 skipped=0 status=0 turned_off=0
stages=()
ci=$([[ ${CI:-} == true ]] && echo 1 || echo 0)
mkdir -p build
skips=$PWD/build/test-skips.txt
: >"$skips"
# Each failed test's name and the end of its output, printed again before the summary.
failures=$PWD/build/test-failures.txt
: >"$failures"

stage_done() { # NAME RESULT T0 PASSED FAILED SKIPPED DETAIL
  stages+=("$(printf '%-16s %-4s %5d s  %4d passed %3d failed %3d skipped  %s' \
    "$1" "$2" $((SECONDS - $3)) "$4" "$5" "$6" "$7")")
  passed=$((passed + $4)) failed=$((failed + $5)) skipped=$((skipped + $6))
  [[ $2 == ok ]] || status=1
}

# A stage turned off from the environment still gets its row; CI runs every stage
# (.ci/run refuses these switches; here, with CI=true, the run fails).
stage_off() { # NAME SWITCH
  stages+=("$(printf '%-16s %-4s %5s    skipped (%s)' "$1" "$( ((ci)) && echo FAIL || echo off)" - "$2")")
  turned_off=$((turned_off + 1))
  ((ci)) && status=1
}

# One CTest run, counted from CTest's JUnit report and pytest's (scripts/test_counts.py):
# a skip is a skip, a run that finds no test fails, and with CI=true a skip not on
# test/expected-skips.txt fails.
ctest_run() { # NAME PRESET T0 CTEST_ARGS...
  local name=$1 preset=$2 t0=$3 rc counts crc p f s detail
  shift 3
  local junit=$PWD/build/$preset/ctest-$name.xml pytest_dir=$PWD/build/$preset/pytest-junit
  rm -rf "$pytest_dir" "$junit"
  echo "== $name: ctest $*"
  ctest --preset "$preset" -j "$jobs" --timeout 900 --output-junit "$junit" "$@" 2>&1
  rc=$?
  crc=0
  counts=$(python3 scripts/test_counts.py --stage "$name" --junit "$junit" \
    --pytest-dir "$pytest_dir" --allow test/expected-skips.txt --skips "$skips" --failures "$failures") || crc=$?
  read -r p f s <<<"$counts"
  # Kept per run: the next run of this preset writes the same directory.
  rm -rf "$pytest_dir-${name//\//-}"
  [[ -d $pytest_dir ]] && mv "$pytest_dir" "$pytest_dir-${name//\//-}"
  detail="ctest $*"
  if ((crc == 4)); then
    f=$((f + 1)) detail="no test found: ctest $*"
  elif ((crc == 3)); then
    detail="a skip CI does not expect (listed above): ctest $*"
  elif ((rc != 0 && f == 0)); then
    f=1 detail="ctest exit $rc with no failed test: ctest $*"
  fi
  stage_done "$name" "$( ((rc == 0 && crc == 0)) && echo ok || echo FAIL)" "$t0" "$p" "$f" "$s" "$detail"
}

ctest_stage() { # NAME PRESET CTEST_ARGS... -- BUILD_TARGETS...
  local name=$1 preset=$2 t0=$SECONDS args=() targets=()
  shift 2
  while (($#)) && [[ $1 != -- ]]; do args+=("$1"); shift; done
  (($#)) && shift
  targets=("$@")
  echo "== $name: build (preset $preset)"
  if ! cmake --preset "$preset" >/dev/null ||
     ! cmake --build --preset "$preset" -j "$jobs" ${targets[@]+--target "${targets[@]}"}; then
    stage_done "$name" FAIL "$t0" 0 1 0 "build failed"
    return 1
  fi
  built+=("$preset")
  ctest_run "$name" "$preset" "$t0" "${args[@]}"
}

# The Kube* tests (label kube) need a kube-apiserver: the preset stages leave them out, and
# the kube stage runs them for every preset built against a control plane of its own.
built=()
for preset in $presets; do
  ctest_stage "$preset" "$preset" -LE '^kube$'
done
for preset in $default_presets; do
  [[ " $presets " == *" $preset "* ]] || stage_off "$preset" "TOPOGATE_PRESETS=$presets"
done

# ThreadSanitizer is 5-15x slower than the plain build: only the tests that exercise
# threads, and only the binaries they need.
if [[ -n $tsan_labels ]]; then
  ctest_stage tsan tsan -L "^($tsan_labels)\$" -- kube_tests inventory_tests server_tests topogate
else
  stage_off tsan "TOPOGATE_TSAN_LABELS empty"
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
  ((ok + bad)) || bad=1  # no target ran
  stage_done fuzz "$( ((rc == 0 && bad == 0)) && echo ok || echo FAIL)" "$t0" "$ok" "$bad" 0 \
    "targets clean, ${fuzz_seconds} s each"
else
  stage_off fuzz "TOPOGATE_FUZZ_SECONDS=$fuzz_seconds"
fi

# The container image (scripts/image.sh: release build, Debian base, run once); the
# e2e stage's node suite installs the chart with it.
if [[ ${TOPOGATE_SKIP_IMAGE:-0} != 1 ]]; then
  t0=$SECONDS
  echo "== image"
  if bash scripts/image.sh; then
    stage_done image ok "$t0" 1 0 0 "built, ran version, the demo and SIGTERM"
  else
    stage_done image FAIL "$t0" 0 1 0 "scripts/image.sh failed"
  fi
else
  stage_off image "TOPOGATE_SKIP_IMAGE=1"
fi

waited=0
wait_kube_tools() {
  local t0=$SECONDS
  [[ -n $prebuild_pid && -z ${kube_tools_waited:-} ]] || return 0
  kube_tools_waited=1
  echo "waiting for the Go-built Kubernetes tools (build/prebuild.log)"
  while [[ ! -s build/prebuild-kube.rc ]] && kill -0 "$prebuild_pid" 2>/dev/null; do sleep 1; done
  [[ $(cat build/prebuild-kube.rc 2>/dev/null) == 0 ]] ||
    echo "the background tool build failed; the stages build again (build/prebuild.log):"
  waited=$((waited + SECONDS - t0))
  tail -n 12 build/prebuild.log
}

# The Kube* tests of every preset built, against one control plane (etcd, kube-apiserver)
# of their own: the Go-built tools are the background build's (or built here).
if [[ ${TOPOGATE_SKIP_KUBE:-0} != 1 ]]; then
  wait_kube_tools
  kube_cp=$PWD/build/kube-cp
  t0=$SECONDS
  echo "== kube: a control plane for the Kube* tests (${built[*]})"
  if ((${#built[@]} == 0)); then
    stage_done kube FAIL "$t0" 0 1 0 "no preset was built"
  elif bash test/e2e/build-kube-bins.sh >/dev/null &&
     TOPOGATE_CP_DIR=$kube_cp bash test/e2e/control-plane.sh start >/dev/null; then
    eval "$(TOPOGATE_CP_DIR=$kube_cp bash test/e2e/control-plane.sh env)"
    for preset in "${built[@]}"; do
      ctest_run "kube/$preset" "$preset" "$SECONDS" -L '^kube$'
    done
    TOPOGATE_CP_DIR=$kube_cp bash test/e2e/control-plane.sh stop >/dev/null 2>&1
    unset TOPOGATE_CP_URL TOPOGATE_CP_CA TOPOGATE_CP_ADMIN_TOKEN_FILE
  else
    stage_done kube FAIL "$t0" 0 1 0 "the control plane did not start"
  fi
else
  stage_off kube "TOPOGATE_SKIP_KUBE=1"
fi

if [[ ${TOPOGATE_SKIP_E2E:-0} != 1 ]]; then
  wait_kube_tools
  t0=$SECONDS
  echo "== Kubernetes end-to-end and conformance"
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
  stage_done e2e "$( ((rc == 0 && bad == 0)) && echo ok || echo FAIL)" "$t0" "$ok" "$bad" 0 \
    "suites ($waited s waiting for the Go-built Kubernetes tools)"
else
  stage_off e2e "TOPOGATE_SKIP_E2E=1"
fi

if [[ -s $skips ]]; then
  echo "== skips ($(wc -l <"$skips"); expected ones: test/expected-skips.txt)"
  cat "$skips"
fi
if [[ -s $failures ]]; then
  echo "== failed tests (the end of each one's output; whole logs in build/<preset>/Testing)"
  cat "$failures"
fi
echo "== summary (stage, result, wall time, passed / failed / skipped: CTest tests with each pytest file's cases, fuzz targets, end-to-end suites)"
printf '%s\n' "${stages[@]}"
((turned_off == 0)) || echo "$turned_off stage(s) turned off from the environment$( ((ci)) && echo ': CI runs every stage')"
printf '%-16s %-4s %5d s\n' all "$( ((status == 0)) && echo ok || echo FAIL)" "$SECONDS"
echo "total: $passed passed, $failed failed, $skipped skipped"
exit $status

#!/usr/bin/env bash
# The test command: installs what is needed, builds, and runs every test.
#   ./scripts/test.sh
# Stages: unit + integration tests (CTest: GoogleTest and pytest against the real
# binary), then the Kubernetes end-to-end and conformance suites (test/e2e/all.sh:
# a real kube-apiserver, etcd, kubectl and helm built from pinned Go modules and
# cached in ~/.cache/topogate).
# Environment:
#   TOPOGATE_PRESETS   CMake presets to build and test (default: dev)
#   TOPOGATE_SKIP_E2E  set to 1 to skip the Kubernetes stage
set -uo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-deps.sh || exit 2

presets=${TOPOGATE_PRESETS:-dev}
jobs=${TOPOGATE_JOBS:-$(nproc)}
passed=0 failed=0 status=0
for preset in $presets; do
  echo "== preset $preset: build"
  cmake --preset "$preset" >/dev/null || exit 2
  cmake --build --preset "$preset" -j "$jobs" || exit 2
  echo "== preset $preset: ctest"
  log=$(mktemp)
  ctest --preset "$preset" -j "$jobs" --timeout 600 2>&1 | tee "$log"
  rc=${PIPESTATUS[0]}
  # "100% tests passed, 0 tests failed out of 573"
  read -r f total < <(sed -n 's/.*tests passed, \([0-9]*\) tests failed out of \([0-9]*\).*/\1 \2/p' "$log" | tail -1)
  rm -f "$log"
  passed=$((passed + ${total:-0} - ${f:-0}))
  failed=$((failed + ${f:-0}))
  ((rc == 0)) || status=1
done

if [[ ${TOPOGATE_SKIP_E2E:-0} != 1 ]]; then
  echo "== Kubernetes end-to-end and conformance"
  first=${presets%% *}
  log=$(mktemp)
  TOPOGATE_BINARY=$PWD/build/$first/server/topogate bash test/e2e/all.sh 2>&1 | tee "$log"
  rc=${PIPESTATUS[0]}
  ok=$(sed -n '/^=== summary/,$p' "$log" | grep -c ' ok ')
  bad=$(sed -n '/^=== summary/,$p' "$log" | grep -c ' FAIL ')
  rm -f "$log"
  passed=$((passed + ok))
  failed=$((failed + bad))
  ((rc == 0)) || status=1
fi

echo "== summary (CTest tests + end-to-end suites)"
echo "total: $passed passed, $failed failed"
exit $status

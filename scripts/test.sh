#!/usr/bin/env bash
# The test command: installs what is needed, builds, and runs every test.
#   ./scripts/test.sh            dev build (warnings as errors) + the whole suite
# Environment: TOPOGATE_PRESETS="dev asan-ubsan tsan" to choose presets (default: dev).
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-deps.sh

presets=${TOPOGATE_PRESETS:-dev}
jobs=${TOPOGATE_JOBS:-$(nproc)}
for preset in $presets; do
  echo "== preset $preset"
  cmake --preset "$preset" >/dev/null
  cmake --build --preset "$preset" -j "$jobs"
  ctest --preset "$preset" -j "$jobs" --timeout 600
done

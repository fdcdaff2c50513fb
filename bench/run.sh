#!/usr/bin/env bash
# The benchmark in one command: builds a release topogate (the release preset, build/release)
# and the controller-runtime peer (cached, bench/peers/build-crwebhook.sh), then runs every
# scenario against topogate and its peers (nginx, crwebhook) in one run and prints the
# markdown table (bench/http/run.py; see bench/README.md).
#
#   bench/run.sh [run.py options, e.g. --duration 10 --scenarios get1m,post-valid --json out.json]
#
# Env: TOPOGATE_BENCH_BUILD_DIR (default build/release; configured with the release preset
# when it does not exist), TOPOGATE_BENCH_JOBS (default 2), TOPOGATE_CACHE (peer cache).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
build_dir=${TOPOGATE_BENCH_BUILD_DIR:-build/release}
jobs=${TOPOGATE_BENCH_JOBS:-2}

for tool in wrk nginx taskset openssl go cmake; do
  command -v "$tool" >/dev/null || [[ -x /usr/sbin/$tool ]] || { echo "bench/run.sh: $tool is required" >&2; exit 1; }
done

if [[ ! -f $build_dir/CMakeCache.txt ]]; then
  if [[ $build_dir == build/release ]]; then
    cmake --preset release >&2
  else
    cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release >&2
  fi
fi
grep -q '^CMAKE_BUILD_TYPE:STRING=Release$' "$build_dir/CMakeCache.txt" ||
  echo "bench/run.sh: warning: $build_dir is not a Release build" >&2
echo "bench/run.sh: building topogate in $build_dir" >&2
nice -n 5 cmake --build "$build_dir" -j "$jobs" --target topogate >&2
peer=$(bench/peers/build-crwebhook.sh)

exec python3 bench/http/run.py --binary "$build_dir/cli/topogate" --peer "$peer" "$@"

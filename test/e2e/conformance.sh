#!/usr/bin/env bash
# Replays conformance/cases/** against a live topogate over HTTPS with the Go
# runner (conformance/runner), which starts topogate with a generated
# configuration and checks every served snapshot with the consumer-faithful
# reader (conformance/internal/consumer) over bearer and mTLS.
# Usage: conformance.sh [runner flags, e.g. -v -run REGEXP]
# Env: TOPOGATE_BINARY (default build/{dev,debug,...}/cli/topogate).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
topogate=${TOPOGATE_BINARY:-}
if [[ -z $topogate ]]; then
  for p in dev debug release rules; do
    [[ -x $repo/build/$p/cli/topogate ]] && { topogate=$repo/build/$p/cli/topogate; break; }
  done
fi
[[ -n $topogate && -x $topogate ]] || { echo "conformance.sh: no topogate binary (set TOPOGATE_BINARY)" >&2; exit 2; }
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
(cd "$repo/conformance" && GOTOOLCHAIN=local GOFLAGS=-mod=readonly go build -o "$bin/" ./runner ./client)
cd "$repo"
"$bin/runner" --topogate "$topogate" --cases conformance/cases --certs certs "$@"

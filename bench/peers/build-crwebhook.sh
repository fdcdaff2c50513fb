#!/usr/bin/env bash
# Builds the controller-runtime admission peer (bench/peers/crwebhook) into a cache folder
# keyed by a hash of its sources, go.mod/go.sum and the Go version, like the kube bins of
# test/e2e/build-kube-bins.sh:
#
#   ${TOPOGATE_CACHE:-$HOME/.cache/topogate}/crwebhook-<hash>/crwebhook
#
# A binary already built from the same inputs is never rebuilt. Modules come from the Go
# module proxy (go.sum pins them). Prints the binary's path on stdout; progress on stderr.
# Env: TOPOGATE_CACHE, GOFLAGS (e.g. -p=1 on a busy machine).
set -euo pipefail

src=$(cd "$(dirname "$0")/crwebhook" && pwd)
cache=${TOPOGATE_CACHE:-${HOME:-/root}/.cache/topogate}
export GOTOOLCHAIN=local
export CGO_ENABLED=0

command -v go >/dev/null || { echo "build-crwebhook: go not found in PATH" >&2; exit 1; }

key=$( (go version; cd "$src" && cat go.mod go.sum $(ls ./*.go | LC_ALL=C sort)) | sha256sum | cut -c1-16)
out="$cache/crwebhook-$key/crwebhook"
if [[ -x $out ]]; then
  echo "$out"
  exit 0
fi
mkdir -p "$(dirname "$out")"
echo "build-crwebhook: building $out" >&2
start=$SECONDS
(cd "$src" && nice -n 10 go build -mod=readonly -trimpath -ldflags "-s -w" -o "$out.tmp" .)
mv -f "$out.tmp" "$out"
echo "build-crwebhook: built in $((SECONDS - start)) s" >&2
echo "$out"

#!/usr/bin/env bash
# Builds NFD's real nfd-master (sigs.k8s.io/node-feature-discovery/cmd/nfd-master) from
# the Go module pinned in test/e2e/nfd-bin, into a cache folder keyed by its version:
#
#   ${TOPOGATE_CACHE:-$HOME/.cache/topogate}/nfd-<version>/nfd-master
#
# The same version's CRDs (deployment/base/nfd-crds of the module: NodeFeature,
# NodeFeatureRule, NodeFeatureGroup) are what test/e2e/nfd.sh installs. A cached binary
# is kept when it is executable, was built with the same flags (nfd-master.flags) and its
# embedded build information (`go version -m`) names the module
# sigs.k8s.io/node-feature-discovery at the pinned version.
#
# Usage: build-nfd.sh [--print-env]
#   --print-env   print NFD_BIN_DIR=..., NFD_VERSION=... and NFD_CRD_DIR=... (shell
#                 syntax) and nothing else on stdout; progress goes to stderr.
# Env: TOPOGATE_CACHE, GOFLAGS (e.g. -p=1 on a busy machine), GOMAXPROCS.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
cache=${TOPOGATE_CACHE:-${HOME:-/root}/.cache/topogate}
print_env=0
[[ ${1:-} == --print-env ]] && print_env=1

log() { echo "build-nfd: $*" >&2; }

export GOTOOLCHAIN=local
# Upstream builds its binaries static (Makefile: -tags osusergo,netgo, -extldflags=-static);
# without cgo the same tags give a static binary without a C toolchain.
export CGO_ENABLED=0

command -v go >/dev/null || { log "go not found in PATH"; exit 1; }

mod=$here/nfd-bin
nfd_mod=sigs.k8s.io/node-feature-discovery
nfd_ver=$(cd "$mod" && go list -m -f '{{if .Replace}}{{.Replace.Version}}{{else}}{{.Version}}{{end}}' "$nfd_mod")
nfd_src=$(cd "$mod" && go mod download -json "$nfd_mod" |
  python3 -c 'import json, sys; print(json.load(sys.stdin)["Dir"])')
dir=$cache/nfd-$nfd_ver
out=$dir/nfd-master
mkdir -p "$dir"

pkg=$nfd_mod/cmd/nfd-master
tags=osusergo,netgo
# As upstream's Makefile (BUILD_FLAGS): the version nfd-master logs at start and prints
# with -version.
ldflags="-s -w -X $nfd_mod/pkg/version.version=$nfd_ver"
flags="$pkg|$tags|$ldflags"

have() {
  [[ -x $out && -f $out.flags && $(cat "$out.flags") == "$flags" ]] &&
    go version -m "$out" 2>/dev/null |
      grep -Eq "^[[:space:]]+(mod|dep)[[:space:]]+sigs\.k8s\.io/node-feature-discovery[[:space:]]+$nfd_ver([[:space:]]|$)"
}

# One build at a time: a second caller (the suite, while scripts/test.sh still builds in
# the background) waits for the first and then finds the binary.
exec 9>"$dir/.build.lock"
if ! flock -n 9; then
  log "waiting for the nfd-master build in progress"
  flock 9
fi
if ! have; then
  start=$SECONDS
  log "building nfd-master $nfd_ver from $pkg (a few minutes the first time)"
  (cd "$mod" && nice -n 10 go build -trimpath -tags "$tags" -ldflags "$ldflags" -o "$out.tmp" "$pkg")
  mv -f "$out.tmp" "$out"
  printf '%s' "$flags" >"$out.flags"
  have || { log "built $out but its build information does not name $nfd_mod $nfd_ver"; exit 1; }
  log "built nfd-master in $((SECONDS - start)) s"
fi

crds=$nfd_src/deployment/base/nfd-crds
[[ -s $crds/nfd-api-crds.yaml ]] || { log "no NFD CRDs in $crds"; exit 1; }

if ((print_env)); then
  printf 'NFD_BIN_DIR=%q\nNFD_VERSION=%q\nNFD_CRD_DIR=%q\n' "$dir" "$nfd_ver" "$crds"
else
  log "nfd-master $nfd_ver in $dir"
fi

#!/usr/bin/env bash
# Builds the real Kueue controller manager (sigs.k8s.io/kueue/cmd/kueue) from the
# Go module pinned in test/e2e/kueue-bin, into a cache folder keyed by its version:
#
#   ${TOPOGATE_CACHE:-$HOME/.cache/topogate}/kueue-<version>/kueue-manager
#
# The same version's CRDs (config/components/crd/bases of the module) are what
# test/e2e/diagnose.sh and scripts/tas-lab.sh install. Kueue's manager has no
# --version flag: a cached binary is kept when it is executable, was built with
# the same flags (kueue-manager.flags) and its embedded build information
# (`go version -m`) names the module sigs.k8s.io/kueue at the pinned version.
#
# Usage: build-kueue.sh [--print-env]
#   --print-env   print KUEUE_BIN_DIR=..., KUEUE_VERSION=... and KUEUE_CRD_DIR=...
#                 (shell syntax) and nothing else on stdout; progress goes to stderr.
# Env: TOPOGATE_CACHE, GOFLAGS (e.g. -p=1 on a busy machine), GOMAXPROCS.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
cache=${TOPOGATE_CACHE:-${HOME:-/root}/.cache/topogate}
print_env=0
[[ ${1:-} == --print-env ]] && print_env=1

log() { echo "build-kueue: $*" >&2; }

export GOTOOLCHAIN=local
# Upstream builds the manager static (Makefile CGO_ENABLED ?= 0).
export CGO_ENABLED=0

command -v go >/dev/null || { log "go not found in PATH"; exit 1; }

mod=$here/kueue-bin
kueue_ver=$(cd "$mod" && go list -m -f '{{if .Replace}}{{.Replace.Version}}{{else}}{{.Version}}{{end}}' sigs.k8s.io/kueue)
kueue_src=$(cd "$mod" && go mod download -json sigs.k8s.io/kueue |
  python3 -c 'import json, sys; print(json.load(sys.stdin)["Dir"])')
dir=$cache/kueue-$kueue_ver
out=$dir/kueue-manager
mkdir -p "$dir"

pkg=sigs.k8s.io/kueue/cmd/kueue
# As upstream's Makefile (LD_FLAGS): the version the manager logs at start.
ldflags="-s -w -X sigs.k8s.io/kueue/pkg/version.GitVersion=$kueue_ver -X sigs.k8s.io/kueue/pkg/version.GitCommit=$kueue_ver"
flags="$pkg|$ldflags"

have() {
  [[ -x $out && -f $out.flags && $(cat "$out.flags") == "$flags" ]] &&
    go version -m "$out" 2>/dev/null | grep -Eq "^[[:space:]]+(mod|dep)[[:space:]]+sigs\.k8s\.io/kueue[[:space:]]+$kueue_ver([[:space:]]|$)"
}

# One build at a time: a second caller (the TAS lab, while scripts/test.sh still builds in
# the background) waits for the first and then finds the binary.
exec 9>"$dir/.build.lock"
if ! flock -n 9; then
  log "waiting for the kueue-manager build in progress"
  flock 9
fi
if ! have; then
  start=$SECONDS
  log "building kueue-manager $kueue_ver from $pkg (a few minutes the first time)"
  (cd "$mod" && nice -n 10 go build -trimpath -ldflags "$ldflags" -o "$out.tmp" "$pkg")
  mv -f "$out.tmp" "$out"
  printf '%s' "$flags" >"$out.flags"
  have || { log "built $out but its build information does not name sigs.k8s.io/kueue $kueue_ver"; exit 1; }
  log "built kueue-manager in $((SECONDS - start)) s"
fi

if ((print_env)); then
  printf 'KUEUE_BIN_DIR=%q\nKUEUE_VERSION=%q\nKUEUE_CRD_DIR=%q\n' "$dir" "$kueue_ver" "$kueue_src/config/components/crd/bases"
else
  log "kueue-manager $kueue_ver in $dir"
fi

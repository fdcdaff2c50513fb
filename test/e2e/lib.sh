# The common start of the end-to-end suites against a control plane of their own. Sourced
# by a suite right after `set -euo pipefail`, with `here` (test/e2e) and `repo` set:
#
#   e2e_init NAME   topogate: the binary under test ($TOPOGATE_BINARY, else the first of
#                   build/{dev,debug,release}/cli/topogate; exit 2 without one);
#                   KUBE_BIN_DIR, HELM_BIN_DIR and helm (build-kube-bins.sh, cached);
#                   work: a fresh folder, and TOPOGATE_CP_DIR and HELM_*_HOME inside it;
#                   an EXIT trap that runs the suite's e2e_on_exit hooks (last first), then
#                   stops the control plane and removes work (E2E_KEEP=1 keeps both)
#   e2e_on_exit F   run function F when the suite exits, before the control plane stops
#   e2e_cp_start    start the control plane (control-plane.sh), load its environment
#                   (KUBECONFIG, KUBECTL, TOPOGATE_CP_*) and define k (kubectl)
#   e2e_kueue_crds  print the folder of the Kueue CRDs (KUEUE_VERSION, default v0.17.0,
#                   from the Go module proxy)
#   e2e_test_crds   apply the operator's CRDs the suites use (test/e2e/crds) and wait until
#                   every CRD of the cluster is Established (any applied before included)
#   e2e_stop_pid P  SIGTERM the process P if it runs, and reap it
#   pass/fail TEXT  count a check (checks, fails) and print it; section TEXT heads a part
#   poll S CMD...   run CMD until it succeeds, for at most S seconds
# shellcheck shell=bash

e2e_exit_hooks=()
fails=0 checks=0
pass() { checks=$((checks + 1)); echo "ok   $*"; }
fail() { checks=$((checks + 1)); fails=$((fails + 1)); echo "FAIL $*"; }
section() { echo "== $*"; }

e2e_on_exit() { e2e_exit_hooks+=("$1"); }

e2e_cleanup() {
  local i
  for ((i = ${#e2e_exit_hooks[@]} - 1; i >= 0; i--)); do "${e2e_exit_hooks[$i]}" || true; done
  if [[ ${E2E_KEEP:-0} == 1 ]]; then
    echo "kept: $work (stop with TOPOGATE_CP_DIR=$TOPOGATE_CP_DIR $here/control-plane.sh stop)"
  else
    "$here/control-plane.sh" stop >/dev/null 2>&1 || true
    rm -rf "$work"
  fi
}

e2e_init() {
  local name=$1 p
  topogate=${TOPOGATE_BINARY:-}
  if [[ -z $topogate ]]; then
    for p in dev debug release; do
      [[ -x $repo/build/$p/cli/topogate ]] && { topogate=$repo/build/$p/cli/topogate; break; }
    done
  fi
  [[ -n $topogate && -x $topogate ]] || { echo "$(basename "$0"): no topogate binary (set TOPOGATE_BINARY)" >&2; exit 2; }
  eval "$("$here/build-kube-bins.sh" --print-env)"
  helm="$HELM_BIN_DIR/helm"
  work=$(mktemp -d "${TMPDIR:-/tmp}/topogate-$name.XXXXXX")
  export TOPOGATE_CP_DIR="$work/cp"
  export HELM_CACHE_HOME="$work/helm" HELM_CONFIG_HOME="$work/helm" HELM_DATA_HOME="$work/helm"
  trap e2e_cleanup EXIT
}

e2e_cp_start() {
  "$here/control-plane.sh" start
  eval "$("$here/control-plane.sh" env)"
  k() { "$KUBECTL" --kubeconfig "$TOPOGATE_CP_DIR/kubeconfig" "$@"; }
}

e2e_kueue_crds() {
  local dir
  dir=$(cd "$work" && GOFLAGS=-mod=mod go mod download -json "sigs.k8s.io/kueue@${KUEUE_VERSION:-v0.17.0}" |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["Dir"])')/config/components/crd/bases
  [[ -s $dir/kueue.x-k8s.io_workloads.yaml ]] || { echo "no Kueue CRDs in $dir" >&2; return 1; }
  echo "$dir"
}

e2e_test_crds() {
  k apply --server-side -f "$repo/test/e2e/crds/" >/dev/null
  # Retried: a wait on a CRD just created can find no condition at all yet.
  poll 60 k wait --for condition=Established --timeout 5s crd --all >/dev/null 2>&1 ||
    { echo "the CRDs are not Established after 60 s" >&2; return 1; }
}

e2e_stop_pid() {
  [[ -n ${1:-} ]] && kill -0 "$1" 2>/dev/null || return 0
  kill -TERM "$1" 2>/dev/null || true
  wait "$1" 2>/dev/null || true
}

# poll DEADLINE_SECONDS COMMAND...: until COMMAND succeeds (no fixed sleeps).
poll() {
  local deadline=$((SECONDS + $1)); shift
  until "$@"; do
    ((SECONDS < deadline)) || return 1
    sleep 0.2
  done
}

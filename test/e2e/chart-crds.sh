#!/usr/bin/env bash
# The chart never owns gpustack-operator's API (docs/kubernetes.md), against a real apiserver:
#  1. with the operator's v1alpha1 TopologySource CRD already there, helm install leaves it as
#     it was (same resourceVersion, generation and versions) and the webhook registers for
#     v1alpha1 with matchPolicy Equivalent, CREATE and UPDATE;
#  2. with no CRD, helm install creates none;
#  3. crds.install=true creates the v1alpha1 CRD (short name toposrc, columns Kind, Revision,
#     Ready, a status subresource), and helm uninstall keeps it.
# Uses the running control plane (test/e2e/control-plane.sh; TOPOGATE_CP_DIR picks its state),
# or starts one and stops it at the end.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
chart="$repo/helm/topogate"
crd="$chart/files/crds/topologysources.worker.gpustack.ai.yaml"
checks=0 fails=0
pass() { checks=$((checks + 1)); echo "ok   $*"; }
fail() { checks=$((checks + 1)); fails=$((fails + 1)); echo "FAIL $*"; }

eval "$("$here/build-kube-bins.sh" --print-env)"
helm="$HELM_BIN_DIR/helm"
work=$(mktemp -d)
export HELM_CACHE_HOME="$work/helm-cache" HELM_CONFIG_HOME="$work/helm-config" HELM_DATA_HOME="$work/helm-data"
started=0
ns=chart-crds
cleanup() {
  "$helm" uninstall chart-crds -n "$ns" >/dev/null 2>&1 || true
  ((started)) && "$here/control-plane.sh" stop || true
  rm -rf "$work"
}
trap cleanup EXIT
if ! "$here/control-plane.sh" status 2>/dev/null | grep -q 'apiserver running'; then
  "$here/control-plane.sh" start
  started=1
fi
eval "$("$here/control-plane.sh" env)"
k() { "$KUBECTL" "$@"; }
crd_state() {
  k get crd topologysources.worker.gpustack.ai \
    -o jsonpath='{.metadata.resourceVersion} {.metadata.generation} {.spec.versions[*].name}' 2>/dev/null
}
k apply --server-side -f "$here/fixtures/cert-manager-crds.yaml" -f "$here/fixtures/servicemonitor-crd.yaml" >/dev/null
k create namespace "$ns" --dry-run=client -o yaml | k apply -f - >/dev/null
k delete crd topologysources.worker.gpustack.ai modeldeployments.worker.gpustack.ai --ignore-not-found >/dev/null

# 1. The operator's CRD is there first.
k apply --server-side -f "$crd" >/dev/null
k wait --for condition=Established --timeout 60s crd --all >/dev/null
before=$(crd_state)
if "$helm" install chart-crds "$chart" -n "$ns" >"$work/install.log" 2>&1; then
  after=$(crd_state)
  [[ $before == "$after" ]] && pass "existing v1alpha1 CRD unchanged by helm install ($after)" ||
    fail "helm install changed the CRD: $before -> $after"
  rules=$(k get validatingwebhookconfiguration -l app.kubernetes.io/instance=chart-crds -o jsonpath='{range .items[*].webhooks[*]}{.matchPolicy} {.rules[*].apiVersions} {.rules[*].operations};{end}')
  [[ $rules == 'Equivalent ["v1alpha1"] ["CREATE","UPDATE"];Equivalent ["v1alpha1"] ["CREATE","UPDATE"];' ]] &&
    pass "webhook rules: $rules" || fail "webhook rules: $rules"
else
  fail "helm install with the CRD present: $(cat "$work/install.log")"
fi
"$helm" uninstall chart-crds -n "$ns" >/dev/null 2>&1

# 2. No CRD: none is created.
k delete crd topologysources.worker.gpustack.ai >/dev/null
if "$helm" install chart-crds "$chart" -n "$ns" >"$work/install.log" 2>&1; then
  n=$(k get crd -o name | grep -c 'worker\.gpustack\.ai' || true)
  [[ $n == 0 ]] && pass "no CRD created by default" || fail "$n worker.gpustack.ai CRDs created by default"
else
  fail "helm install without CRDs: $(cat "$work/install.log")"
fi
"$helm" uninstall chart-crds -n "$ns" >/dev/null 2>&1

# 3. The opt-in.
if "$helm" install chart-crds "$chart" -n "$ns" --set crds.install=true >"$work/install.log" 2>&1; then
  got=$(k get crd topologysources.worker.gpustack.ai -o jsonpath='{.spec.versions[*].name} {.spec.names.shortNames[*]} {.spec.versions[0].additionalPrinterColumns[*].name} {.spec.versions[0].subresources.status}')
  [[ $got == 'v1alpha1 toposrc Kind Revision Ready {}' ]] && pass "crds.install=true: $got" ||
    fail "crds.install=true: $got"
  "$helm" uninstall chart-crds -n "$ns" >/dev/null 2>&1
  k get crd topologysources.worker.gpustack.ai >/dev/null 2>&1 && pass "the opted-in CRD is kept on uninstall" ||
    fail "the opted-in CRD was deleted on uninstall"
else
  fail "helm install --set crds.install=true: $(cat "$work/install.log")"
fi
k delete crd topologysources.worker.gpustack.ai --ignore-not-found >/dev/null

echo "chart-crds: $((checks - fails)) passed, $fails failed"
((fails == 0))

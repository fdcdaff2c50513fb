#!/usr/bin/env bash
# Every Kubernetes-facing and conformance test, in order, with durations:
# the tool build (cached), certs/ scripts, the consumer client's Go tests, the
# chart against the real apiserver, the webhook end to end, the conformance
# corpus over HTTPS, `topogate diagnose` online against the Kueue CRDs, kubeconfigs
# as clusters issue them (client certificates, exec plugins, kubectl topogate), and the
# chart installed from the image on a real node, and the TAS lab (the runbook's
# EKS validation against the real Kueue). Runs all of them and fails if any failed.
# Env: TOPOGATE_BINARY (default build/{dev,debug,release}/cli/topogate).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
if [[ -z ${TOPOGATE_BINARY:-} ]]; then
  for p in dev debug release; do
    [[ -x $repo/build/$p/cli/topogate ]] && { export TOPOGATE_BINARY=$repo/build/$p/cli/topogate; break; }
  done
fi
results=() failed=0
step() { # NAME COMMAND...
  local name=$1 t0=$SECONDS rc=0; shift
  echo "=== $name"
  "$@" || rc=$?
  results+=("$(printf '%-22s %-4s %4d s' "$name" "$([[ $rc == 0 ]] && echo ok || echo FAIL)" $((SECONDS - t0)))")
  ((rc == 0)) || failed=1
}
step build-kube-bins "$here/build-kube-bins.sh"
step certs-test "$here/certs-test.sh"
step consumer-go-test bash -c "cd '$repo/conformance' && GOTOOLCHAIN=local go test ./..."
step chart-test "$here/chart-test.sh"
# The chart over the operator's own v1alpha1 CRD and over none: it never installs or changes one
# unless asked (crds.install).
step chart-crds "$here/chart-crds.sh"
step e2e "$here/run.sh"
# The push API as a replicated register (test/linearizability): replicas behind fault
# proxies on a control plane of their own, a seeded fault schedule, the history checked
# with Porcupine (one run of 90 s; `linearizability.sh table N D` for more).
step linearizability "$here/linearizability.sh"
# (The inventory's Kubernetes store and Node watch unit tests, CTest label kube, run in
# scripts/test.sh's kube stage for every preset, against a control plane of its own.)
step conformance "$here/conformance.sh"
step diagnose "$here/diagnose.sh"
# Kubeconfigs as clusters issue them (client certificates, exec plugins) and kubectl topogate.
step kubeconfig "$here/kubeconfig.sh"
# The chart on a real node (kubelet, containerd), with the image scripts/image.sh built.
step node python3 "$here/node_test.py"
# The TAS lab: the runbook's EKS validation against the real Kueue, diagnose agreeing.
step tas-lab "$here/tas-lab-test.sh"
# The differential against Kueue: 200 seeded random cases on three labs at once; every case
# must run and give each Workload a decision and a verdict, every disagreement must fall in
# a class docs/operations.md lists, and 95 % must agree (TAS_DIFF_CASES overrides the count).
# Then, on the same labs, 30 random hierarchy changes: `diagnose change`'s prediction
# (evicted, admitted again, stranded) held to Kueue's migration the same way
# (TAS_DIFF_CHANGES overrides the count).
step tas-differential "$here/tas-differential.sh" --seed 2026 --cases "${TAS_DIFF_CASES:-200}" \
  --changes "${TAS_DIFF_CHANGES:-30}" --labs 3
# NFD's real nfd-master (build-nfd.sh, v0.18.3) fed NodeFeatures as the consumer writes them.
step nfd "$here/nfd.sh"
# The TAS lab with nfd-master applying the NodeFeatures: dropped Node, -deny-label-ns, stopped.
step tas-nfd "$here/tas-nfd-test.sh"
# `topogate audit` and the server's periodic audit: objects created with no webhook registered.
step audit "$here/audit.sh"
# The admission ownership warning from the view of TopologySources and Nodes.
step ownership "$here/ownership.sh"
# metrics.auth kubernetes: scrapes with an allowed and a refused ServiceAccount token.
step metrics-auth "$here/metrics-auth.sh"
echo "=== summary"
printf '%s\n' "${results[@]}"
exit $failed

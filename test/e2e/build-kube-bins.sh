#!/usr/bin/env bash
# Builds the real Kubernetes tools the end-to-end tests run (kube-apiserver, etcd,
# kubectl, kubelet, kube-proxy, kube-controller-manager, kube-scheduler, helm) from
# Go modules pinned in test/e2e/kube-bins and test/e2e/helm-bin, into a cache folder
# keyed by their versions:
#
#   ${TOPOGATE_CACHE:-$HOME/.cache/topogate}/kube-<k8s>-etcd-<etcd>/{kube-apiserver,etcd,kubectl,
#                                                kubelet,kube-proxy,kube-controller-manager,kube-scheduler}
#   ${TOPOGATE_CACHE:-$HOME/.cache/topogate}/helm-<helm>/helm
#
# The cache lives outside the repository so every checkout on a machine shares
# one build; a binary that is present and answers --version is never rebuilt.
# Usage: build-kube-bins.sh [--print-env]
#   --print-env   print KUBE_BIN_DIR=... and HELM_BIN_DIR=... (shell syntax) and
#                 nothing else on stdout; progress goes to stderr.
# Env: TOPOGATE_CACHE, GOFLAGS (e.g. -p=1 on a busy machine), GOMAXPROCS.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
cache=${TOPOGATE_CACHE:-${HOME:-/root}/.cache/topogate}
print_env=0
[[ ${1:-} == --print-env ]] && print_env=1

log() { echo "build-kube-bins: $*" >&2; }

# A newer toolchain would be fetched from the proxy silently otherwise; the
# pinned releases build with the installed Go (go line 1.26.0).
export GOTOOLCHAIN=local
# Upstream builds these binaries static (hack/lib/golang.sh KUBE_STATIC_BINARIES).
export CGO_ENABLED=0

command -v go >/dev/null || { log "go not found in PATH"; exit 1; }

modver() { # module version required by go.mod in dir $1
  (cd "$1" && go list -m -f '{{if .Replace}}{{.Replace.Version}}{{else}}{{.Version}}{{end}}' "$2")
}

k8s_ver=$(modver "$here/kube-bins" k8s.io/kubernetes)
etcd_ver=$(modver "$here/kube-bins" go.etcd.io/etcd/server/v3)
helm_ver=$(modver "$here/helm-bin" helm.sh/helm/v3)
kube_dir="$cache/kube-$k8s_ver-etcd-$etcd_ver"
helm_dir="$cache/helm-$helm_ver"
mkdir -p "$kube_dir" "$helm_dir"

k8s_minor=$(echo "$k8s_ver" | cut -d. -f2)
build_date=$(date -u +%Y-%m-%dT%H:%M:%SZ)
kube_ldflags="-s -w"
for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  # Without these the binaries report v0.0.0-master, which breaks chart
  # kubeVersion constraints and anything that parses the server version.
  kube_ldflags+=" -X $p.gitVersion=$k8s_ver -X $p.gitMajor=1 -X $p.gitMinor=$k8s_minor"
  kube_ldflags+=" -X $p.gitTreeState=clean -X $p.buildDate=$build_date"
done
# helm assumes Kubernetes v1.20 for `helm template`/`lint` unless told which
# client-go it was built with (its Makefile's K8S_MODULES_*_VER): v0.36.x -> 1.36.
helm_k8s=$(modver "$here/helm-bin" k8s.io/client-go)
helm_k8s_minor=$(echo "$helm_k8s" | cut -d. -f2)
helm_ldflags="-s -w -X helm.sh/helm/v3/internal/version.version=$helm_ver -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
for p in helm.sh/helm/v3/pkg/lint/rules helm.sh/helm/v3/pkg/chartutil; do
  helm_ldflags+=" -X $p.k8sVersionMajor=1 -X $p.k8sVersionMinor=$helm_k8s_minor"
done

# have BINARY VERSION_TEXT BUILD_FLAGS VERSION_ARGS...: the binary exists, was
# built with the same flags (BINARY.flags, without the build date) and its
# version output contains VERSION_TEXT.
have() {
  local out
  [[ -x $1 && -f $1.flags && $(cat "$1.flags") == "$3" ]] &&
    out=$("$1" "${@:4}" 2>/dev/null) && [[ $out == *"$2"* ]]
}

flags_of() { # pkg ldflags tags -> the build's identity without the build date
  echo "$1|$2|$3" | sed 's/ -X [^ ]*buildDate=[^ ]*//g'
}

build() { # dir out pkg ldflags [tags]
  local dir=$1 out=$2 pkg=$3 ldflags=$4 tags=${5:-}
  local start=$SECONDS
  log "building $(basename "$out") from $pkg"
  (cd "$dir" && nice -n 10 go build -trimpath ${tags:+-tags "$tags"} -ldflags "$ldflags" -o "$out.tmp" "$pkg")
  mv -f "$out.tmp" "$out"
  printf '%s' "$(flags_of "$pkg" "$ldflags" "$tags")" >"$out.flags"
  log "built $(basename "$out") in $((SECONDS - start)) s"
}

kube_tags=selinux,notest,grpcnotrace
have "$kube_dir/etcd" "etcd Version: ${etcd_ver#v}" "$(flags_of go.etcd.io/etcd/server/v3 "-s -w" "")" --version ||
  build "$here/kube-bins" "$kube_dir/etcd" go.etcd.io/etcd/server/v3 "-s -w"
have "$kube_dir/kube-apiserver" "Kubernetes $k8s_ver" \
  "$(flags_of k8s.io/kubernetes/cmd/kube-apiserver "$kube_ldflags" $kube_tags)" --version ||
  build "$here/kube-bins" "$kube_dir/kube-apiserver" k8s.io/kubernetes/cmd/kube-apiserver "$kube_ldflags" $kube_tags
have "$kube_dir/kubectl" "Client Version: $k8s_ver" \
  "$(flags_of k8s.io/kubernetes/cmd/kubectl "$kube_ldflags" $kube_tags)" version --client ||
  build "$here/kube-bins" "$kube_dir/kubectl" k8s.io/kubernetes/cmd/kubectl "$kube_ldflags" $kube_tags
# The node: kubelet, kube-proxy, kube-controller-manager and kube-scheduler,
# for the suite that runs Pods (test/e2e/node_test.py).
for bin in kubelet kube-proxy kube-controller-manager kube-scheduler; do
  have "$kube_dir/$bin" "Kubernetes $k8s_ver" \
    "$(flags_of k8s.io/kubernetes/cmd/$bin "$kube_ldflags" $kube_tags)" --version ||
    build "$here/kube-bins" "$kube_dir/$bin" k8s.io/kubernetes/cmd/$bin "$kube_ldflags" $kube_tags
done
have "$helm_dir/helm" "Version:\"$helm_ver\"" "$(flags_of helm.sh/helm/v3/cmd/helm "$helm_ldflags" "")" version ||
  build "$here/helm-bin" "$helm_dir/helm" helm.sh/helm/v3/cmd/helm "$helm_ldflags"

if ((print_env)); then
  printf 'KUBE_BIN_DIR=%q\nHELM_BIN_DIR=%q\n' "$kube_dir" "$helm_dir"
else
  log "kube-apiserver, etcd, kubectl, kubelet, kube-proxy, kube-controller-manager, kube-scheduler in $kube_dir"
  log "helm in $helm_dir"
fi

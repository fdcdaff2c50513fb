#!/usr/bin/env bash
# Installs every build and test dependency from Debian's packages. Idempotent: a
# package already present is not touched, and apt is only consulted when one is missing.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git
  libboost1.81-dev libssl-dev libsimdjson-dev libyaml-cpp-dev prometheus-cpp-dev
  libgtest-dev googletest libbenchmark-dev
  clang clang-format clang-tidy libclang-rt-14-dev
  curl ca-certificates openssl python3 python3-yaml prometheus wrk nginx-light valgrind
  zlib1g-dev
  python3-pytest
  # The TAS lab's Kubernetes client (test/e2e/lab: kubeconfig, TLS, retries, discovery,
  # quantities).
  python3-kubernetes
  # The root-only fault tests (a loop-mounted ext4 frozen with fsfreeze, a full tmpfs),
  # which CI requires to run (scripts/test.sh fails on their skip with CI=true).
  e2fsprogs util-linux mount
  clang-16 libclang-rt-16-dev
  ccache
  # The image (scripts/image.sh) and the end-to-end node: a root filesystem from
  # Debian's packages, podman to build and run the image, containerd, runc and the
  # CNI plugins under the kubelet.
  mmdebstrap podman skopeo runc containerd containernetworking-plugins iptables
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if ((${#missing[@]})); then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "installing: ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# Go, for the Kubernetes tools, Kueue and the conformance consumer (their go.mod files say
# go 1.26.0). A Go >= 1.26 on PATH is used as it is. Otherwise (Debian 12 ships 1.19) the
# pinned toolchain comes from the Go module proxy, the registry the Kubernetes modules come
# from: the module golang.org/toolchain, checked against its pinned SHA-256, unpacked into
# the cache; scripts/go-path.sh puts it on PATH.
go_version=1.26.8
go_zip_sha256=30c2b1bf7dcc88d3eb0a1364e47ddd9128edb3110a30e8a0ef61cd5856b31de7
go_dir=${TOPOGATE_CACHE:-${HOME:-/root}/.cache/topogate}/go-$go_version
go_ok() { # a go binary of 1.26 or later
  local v
  v=$("$1" env GOVERSION 2>/dev/null) || return 1
  v=${v#go}
  [[ $v =~ ^1\.([0-9]+) ]] && ((BASH_REMATCH[1] >= 26))
}
if ! { command -v go >/dev/null && go_ok go; } && ! go_ok "$go_dir/bin/go"; then
  proxy=${GOPROXY:-https://proxy.golang.org}
  proxy=${proxy%%,*}
  [[ $proxy == direct || $proxy == off ]] && proxy=https://proxy.golang.org
  mod="golang.org/toolchain/@v/v0.0.1-go$go_version.linux-amd64.zip"
  echo "installing: Go $go_version from $proxy into $go_dir"
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  curl -fsSL --retry 3 -o "$tmp/go.zip" "$proxy/$mod"
  echo "$go_zip_sha256  $tmp/go.zip" | sha256sum -c --quiet -
  python3 - "$tmp/go.zip" "$tmp/x" <<'PY'
import os, stat, sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
z.extractall(sys.argv[2])
for info in z.infolist():
    mode = info.external_attr >> 16
    path = os.path.join(sys.argv[2], info.filename)
    if mode and not info.is_dir():
        os.chmod(path, stat.S_IMODE(mode))
    elif "/bin/" in info.filename or "/pkg/tool/" in info.filename:
        os.chmod(path, 0o755)
PY
  mkdir -p "$(dirname "$go_dir")"
  rm -rf "$go_dir"
  mv "$tmp/x/golang.org/toolchain@v0.0.1-go$go_version.linux-amd64" "$go_dir"
  go_ok "$go_dir/bin/go" || { echo "install-deps: the Go toolchain in $go_dir does not run" >&2; exit 1; }
fi

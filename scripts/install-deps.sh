#!/usr/bin/env bash
# Installs every build and test dependency from Debian's packages. Idempotent: a
# package already present is not touched, and apt is only consulted when one is missing.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git
  libboost1.81-dev libssl-dev libsimdjson-dev libyaml-cpp-dev prometheus-cpp-dev
  libgtest-dev googletest libbenchmark-dev
  clang clang-format clang-tidy libclang-rt-14-dev
  curl openssl python3 python3-yaml prometheus wrk nginx-light valgrind
  zlib1g-dev
  python3-pytest
  clang-16 libclang-rt-16-dev
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

#!/usr/bin/env bash
# Builds topogate's container image from this project and Debian's packages only (no
# registry), then runs it once to prove it works.
#
#   ./scripts/image.sh [--no-check] [--compare]
#
# Steps:
#   1. a release build of topogate (cmake preset "release");
#   2. the base: a root filesystem holding only the Debian packages that own the shared
#      libraries topogate links (found with ldd and dpkg -S) and their dependencies, extracted by
#      mmdebstrap from the archive apt already uses; documentation other than copyright
#      files, apt's and dpkg's state are removed, and each package's control record is kept
#      in /var/lib/dpkg/status.d/ so image scanners can list them. Imported into podman as
#      localhost/topogate-base:VERSION;
#   3. Containerfile on top of it: the binary, /etc/passwd with the nonroot user 65532,
#      USER 65532, ENTRYPOINT topogate. Loaded as localhost/topogate:VERSION and saved as
#      the OCI archive build/image/topogate-oci.tar;
#   4. (unless --no-check) a run of the image with a read-only root filesystem as 65532:
#      `topogate version`, then the demo served from a mounted directory, a snapshot and
#      /readyz fetched with curl over HTTPS, then SIGTERM and a check of a clean exit (0)
#      within the stop timeout.
# --compare also extracts the package set of distroless's cc-debian12 image the same way
# and prints both sizes.
# Output: build/image/{topogate-oci.tar,packages.txt,image.env}. image.env holds
# TOPOGATE_IMAGE=localhost/topogate:VERSION and TOPOGATE_IMAGE_ARCHIVE=... for the tests.
# Env: TOPOGATE_JOBS (build parallelism, default nproc).
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
out=$repo/build/image
check=1 compare=0

# Called back by mmdebstrap's extract hook: records the packages extracted into $2 as
# "name version" lines, and each one's control record in /var/lib/dpkg/status.d/.
if [[ ${1:-} == _record ]]; then
  root=$2 list=$3
  mkdir -p "$root/var/lib/dpkg/status.d"
  : >"$list"
  for deb in "$root"/var/cache/apt/archives/*.deb; do
    name=$(dpkg-deb -f "$deb" Package)
    dpkg-deb -f "$deb" >"$root/var/lib/dpkg/status.d/$name"
    printf '%s %s\n' "$name" "$(dpkg-deb -f "$deb" Version)" >>"$list"
  done
  sort -o "$list" "$list"
  exit 0
fi

while (($#)); do
  case $1 in
    --no-check) check=0 ;;
    --compare) compare=1 ;;
    *) sed -n '2,27p' "$0" >&2; exit 2 ;;
  esac
  shift
done

log() { echo "image: $*" >&2; }
die() { log "$*"; exit 1; }

bash scripts/install-deps.sh
t0=$SECONDS

# 1. The binary.
cmake --preset release >/dev/null
cmake --build --preset release -j "${TOPOGATE_JOBS:-$(nproc)}" --target topogate
bin=$repo/build/release/cli/topogate
version=$("$bin" version | awk 'NR == 1 {print $2}')
[[ $version =~ ^[0-9A-Za-z.+-]+$ ]] || die "cannot read the version from '$bin version'"
image=localhost/topogate:$version
base=localhost/topogate-base:$version

# podman as this machine allows it: runc (crun refuses hybrid cgroups), cgroupfs, and
# ulimits within the hard limit (podman's default nofile=1048576 is refused; an nproc
# above 32768 was refused too, whatever the hard limit said).
mkdir -p "$out"
nofile=$(ulimit -Hn) nproc=$(ulimit -Hu)
[[ $nofile == unlimited ]] && nofile=1048576
[[ $nproc == unlimited || $nproc -gt 32768 ]] && nproc=32768
cat >"$out/containers.conf" <<EOF
[containers]
default_ulimits = ["nofile=$nofile:$nofile", "nproc=$nproc:$nproc"]
[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
EOF
export CONTAINERS_CONF=$out/containers.conf

# The apt sources this machine already uses (deb822 or one-line), given to mmdebstrap
# as files so no mirror address is written anywhere.
sources=()
for f in /etc/apt/sources.list.d/*.sources /etc/apt/sources.list.d/*.list /etc/apt/sources.list; do
  [[ -s $f ]] && grep -qE '^[[:space:]]*(deb |Types:)' "$f" && sources+=("$f")
done
((${#sources[@]})) || die "no apt sources found"

# extract_rootfs TAR LIST PACKAGES: mmdebstrap's extract variant (the packages and their
# dependencies, unpacked, no maintainer scripts), then trimmed to what runs: no
# documentation but copyright files, no apt or dpkg state, no device nodes (the runtime
# mounts /dev). The tar is sorted, owned by 0:0 and dated SOURCE_DATE_EPOCH.
extract_rootfs() {
  local tar=$1 list=$2 pkgs=$3 root epoch
  epoch=$(git -C "$repo" log -1 --format=%ct 2>/dev/null || date +%s)
  root=$(mktemp -d "$out/rootfs.XXXXXX")
  rmdir "$root"
  SOURCE_DATE_EPOCH=$epoch mmdebstrap --quiet --variant=extract --include="$pkgs" \
    --extract-hook="bash '$repo/scripts/image.sh' _record \"\$1\" '$list'" \
    bookworm "$root" "${sources[@]}"
  rm -rf "$root"/etc/apt "$root"/var/cache/apt "$root"/var/lib/apt "$root"/var/log/* \
    "$root"/usr/share/man "$root"/usr/share/info "$root"/usr/share/lintian \
    "$root"/usr/share/locale "$root"/usr/share/gcc "$root"/usr/share/gdb "$root"/dev/* \
    "$root"/var/lib/dpkg/{alternatives,info,triggers,updates,arch,status,available,diversions,statoverride}
  find "$root/usr/share/doc" -mindepth 1 ! -type d ! -name copyright -delete 2>/dev/null || true
  find "$root/usr/share/doc" -mindepth 1 -type d -empty -delete 2>/dev/null || true
  # os-release (what scanners read to know the distribution): base-files would bring it
  # with an awk interpreter, so it is taken from the host, which is the same release.
  if grep -qx 'VERSION_CODENAME=bookworm' /usr/lib/os-release; then
    cp /usr/lib/os-release "$root/usr/lib/os-release"
    ln -sfn ../usr/lib/os-release "$root/etc/os-release"
  fi
  tar --sort=name --numeric-owner --owner=0 --group=0 --mtime="@$epoch" -C "$root" -cf "$tar" .
  rm -rf "$root"
}

# 2. The base: the packages owning every library topogate links.
libs=$(ldd "$bin" | awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// {print $1}')
pkgs=()
for lib in $libs; do
  owner=$(dpkg -S "$lib" 2>/dev/null || dpkg -S "$(readlink -f "$lib")" 2>/dev/null ||
    dpkg -S "*/$(basename "$lib")" 2>/dev/null) || die "no Debian package owns $lib"
  pkgs+=("${owner%%:*}")
done
pkg_csv=$(printf '%s\n' "${pkgs[@]}" | sort -u | paste -sd,)
log "base packages (with their dependencies): $pkg_csv"
rm -f "$out/rootfs.tar"
extract_rootfs "$out/rootfs.tar" "$out/packages.txt" "$pkg_csv"
podman rmi -f "$image" "$base" >/dev/null 2>&1 || true
podman import --quiet "$out/rootfs.tar" "$base" >/dev/null

# 3. The image.
ctx=$out/context
rm -rf "$ctx" && mkdir -p "$ctx"
cp "$bin" "$ctx/topogate"
strip --strip-unneeded "$ctx/topogate"
printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' >"$ctx/passwd"
printf 'root:x:0:\nnonroot:x:65532:\n' >"$ctx/group"
podman build --quiet --pull=never --build-arg "VERSION=$version" \
  --timestamp "$(git -C "$repo" log -1 --format=%ct 2>/dev/null || date +%s)" \
  -t "$image" -f "$repo/Containerfile" "$ctx" >/dev/null
rm -f "$out/topogate-oci.tar"
podman save --quiet --format oci-archive -o "$out/topogate-oci.tar" "$image"
podman rmi "$base" >/dev/null 2>&1 || true
printf 'TOPOGATE_IMAGE=%q\nTOPOGATE_IMAGE_ARCHIVE=%q\n' "$image" "$out/topogate-oci.tar" >"$out/image.env"

size=$(podman image inspect --format '{{.Size}}' "$image")
mib() { awk -v b="$1" 'BEGIN {printf "%.1f MiB", b / 1048576}'; }
# The archive's layers are gzip'd: its size is what a registry stores and a node pulls.
log "built $image in $((SECONDS - t0)) s: $(mib "$size") unpacked, $(mib "$(stat -c %s "$out/topogate-oci.tar")") compressed (the OCI archive)"
log "binary: $(mib "$(stat -c %s "$ctx/topogate")") stripped; Debian packages:"
sed 's/^/  /' "$out/packages.txt" >&2

if ((compare)); then
  # distroless's cc-debian12: base-files, netbase, tzdata, ca-certificates, libc6,
  # libssl3, libgcc-s1, libgomp1, libstdc++6.
  extract_rootfs "$out/distroless-cc.tar" "$out/distroless-cc-packages.txt" \
    base-files,netbase,tzdata,ca-certificates,libc6,libssl3,libgcc-s1,libgomp1,libstdc++6
  log "for comparison, distroless cc-debian12's package set extracted the same way:" \
    "$(mib "$(stat -c %s "$out/distroless-cc.tar")") unpacked, $(mib "$(gzip -6 -c "$out/distroless-cc.tar" | wc -c)") gzip'd;" \
    "topogate's base without the binary: $(mib "$(stat -c %s "$out/rootfs.tar")") unpacked," \
    "$(mib "$(gzip -6 -c "$out/rootfs.tar" | wc -c)") gzip'd"
fi
rm -f "$out/rootfs.tar" "$out/distroless-cc.tar"

((check)) || exit 0

# 4. Run it: read-only root, the chart's user, PID 1.
ver_out=$(podman run --rm --read-only --user 65532:65532 --network none "$image" version)
[[ $ver_out == *"$version"* ]] || die "'topogate version' in the image printed: $ver_out"
log "run: topogate version -> $ver_out"

demo=$out/demo
rm -rf "$demo" && mkdir -p "$demo" && chown 65532:65532 "$demo"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
name=topogate-image-check-$$
cleanup() { podman rm -f "$name" >/dev/null 2>&1 || true; }
trap cleanup EXIT
podman run -d --name "$name" --read-only --user 65532:65532 --network host \
  -v "$demo:/demo" "$image" demo --dir /demo --port "$port" >/dev/null
url=https://127.0.0.1:$port
for ((i = 0; i < 100; i++)); do
  [[ -s $demo/token && -s $demo/ca.crt ]] &&
    curl -fsS --noproxy '*' --max-time 2 --cacert "$demo/ca.crt" "$url/readyz" >/dev/null 2>&1 && break
  [[ $(podman inspect --format '{{.State.Running}}' "$name") == true ]] ||
    { podman logs "$name" >&2; die "the demo container exited"; }
  sleep 0.1
done
body=$(curl -fsS --noproxy '*' --max-time 5 --cacert "$demo/ca.crt" \
  -H "Authorization: Bearer $(cat "$demo/token")" "$url/snapshots/demo") ||
  { podman logs "$name" >&2; die "GET /snapshots/demo failed"; }
[[ $body == *inventory-42* ]] || die "GET /snapshots/demo returned an unexpected body: $body"
log "run: demo on $url, GET /snapshots/demo -> 200 (revision inventory-42), /readyz -> 200"

[[ $(podman inspect --format '{{.State.Pid}}' "$name") -gt 0 ]] || die "no PID"
top=$(podman top "$name" user pid args | awk 'NR == 2')
t1=$SECONDS
podman stop -t 20 "$name" >/dev/null
code=$(podman inspect --format '{{.State.ExitCode}}' "$name")
podman logs "$name" 2>&1 | tail -n 3 | sed 's/^/  log: /' >&2
((code == 0)) || die "topogate exited $code after SIGTERM"
((SECONDS - t1 < 20)) || die "topogate did not exit before the stop timeout (SIGKILL)"
log "run: process [$top]; SIGTERM -> exit 0 in $((SECONDS - t1)) s"
log "ok: $image, archive $out/topogate-oci.tar"

#!/usr/bin/env bash
# Runs the README's two commands on a bare Debian 12: a fresh bookworm root filesystem built
# from Debian's packages (mmdebstrap, variant minbase: no compiler, no Go, no Python), this
# checkout cloned into it, then, chrooted in a private mount namespace (its /proc, /sys and
# /dev mounts vanish with it):
#   1. ./scripts/demo.sh      until the demo server answers GET /snapshots/demo (its
#                             bearer token and CA), then SIGTERM
#   2. ./scripts/test.sh      the whole suite (TOPOGATE_* settings are passed through)
# Not part of CI (about an hour on two cores: nothing is cached inside). Needs root.
# Usage: scripts/bare-debian.sh [--keep] [--reuse] [--demo-only]
#   --keep       leave the root filesystem in place; --reuse: start from the one a --keep run
#                left (its clone fast-forwarded to this checkout's HEAD) instead of a new one
# Env: BARE_DEBIAN_DIR (default
#        ${TMPDIR:-/tmp}/topogate-bare-debian), TOPOGATE_* (passed to test.sh)
# Prints a transcript summary: each step, its exit status and duration.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
keep=0 demo_only=0 reuse=0
for a in "$@"; do
  case $a in
    --keep) keep=1 ;;
    --reuse) reuse=1 ;;
    --demo-only) demo_only=1 ;;
    *) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2 ;;
  esac
done
[[ $(id -u) == 0 ]] || { echo "bare-debian.sh: needs root (mmdebstrap, chroot, mounts)" >&2; exit 2; }
dir=${BARE_DEBIAN_DIR:-${TMPDIR:-/tmp}/topogate-bare-debian}
root=$dir/root
log=$dir/log
summary=()
step() { # NAME COMMAND...: run, record status and duration
  local name=$1 t0=$SECONDS rc=0
  shift
  echo "=== $name" | tee -a "$log/transcript.txt"
  : >"$log/$name.log" # each run's logs start empty (a --reuse run keeps the directory)
  "$@" >>"$log/$name.log" 2>&1 || rc=$?
  summary+=("$(printf '%-10s exit %-3s %5d s' "$name" "$rc" $((SECONDS - t0)))")
  echo "    exit $rc in $((SECONDS - t0)) s (log: $log/$name.log)" | tee -a "$log/transcript.txt"
  return $rc
}
cleanup() {
  if ((keep == 0)); then rm -rf "$root"; fi
}
trap cleanup EXIT

mkdir -p "$log"
: >"$log/transcript.txt"
git -C "$repo" diff --quiet HEAD || echo "note: uncommitted changes are not in the clone" | tee -a "$log/transcript.txt"
if ((reuse)) && [[ -d $root/src/.git ]]; then
  step pull git -C "$root/src" pull -q --ff-only "$repo" HEAD
else
  rm -rf "$root"
  mkdir -p "$root"
  # The mirror apt already uses on this machine (never written into the project).
  mirror=$(sed -n 's/^URIs: *//p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -1)
  [[ -n $mirror ]] || mirror=$(awk '$1 == "deb" {print $2; exit}' /etc/apt/sources.list 2>/dev/null)
  [[ -n $mirror ]] || { echo "bare-debian.sh: cannot tell which Debian mirror apt uses" >&2; exit 1; }
  command -v mmdebstrap >/dev/null || apt-get install -y -qq --no-install-recommends mmdebstrap >/dev/null
  # A minimal Debian 12 with git (to clone the checkout); nothing else.
  step rootfs mmdebstrap --variant=minbase --include=git,ca-certificates bookworm "$root" \
    "deb $mirror bookworm main" "deb $mirror bookworm-updates main" \
    "deb ${mirror%/debian*}/debian-security bookworm-security main"
  cp /etc/resolv.conf "$root/etc/resolv.conf"
  step clone git clone -q "$repo" "$root/src"
fi
# A machine whose HTTPS egress passes a TLS-inspecting proxy trusts its CA through
# /usr/local/share/ca-certificates; the new root gets the same local CAs (as its
# administrator would do on that network), nothing else.
if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
  mkdir -p "$root/usr/local/share/ca-certificates"
  cp /usr/local/share/ca-certificates/*.crt "$root/usr/local/share/ca-certificates/"
  chroot "$root" update-ca-certificates >/dev/null 2>&1 || true
fi
echo "rootfs: $(du -sh "$root" | cut -f1), go: $(chroot "$root" sh -c 'command -v go || echo none'), gcc: $(chroot "$root" sh -c 'command -v gcc || echo none')" | tee -a "$log/transcript.txt"

# in_root COMMAND: run COMMAND (a shell string) inside the root, in a private mount namespace.
in_root() {
  unshare --mount --propagation private bash -c '
    set -e
    r=$1
    # The root a mount point of its own, as in a container: podman and unshare --mount make
    # "/" private (mount --make-rprivate /), which a plain directory refuses (EINVAL).
    mount --bind "$r" "$r"
    mount --rbind /proc "$r/proc"
    mount --rbind /sys "$r/sys"
    mount --rbind /dev "$r/dev"
    mount -t tmpfs tmpfs "$r/tmp"
    mkdir -p "$r/run" && mount -t tmpfs tmpfs "$r/run"
    exec chroot "$r" /usr/bin/env -i HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
      LANG=C.UTF-8 TERM=dumb $(env | grep -E "^TOPOGATE_" | tr "\n" " ") bash -c "$2"' \
    bash "$root" "$1"
}

demo() {
  in_root '
    cd /src
    ./scripts/demo.sh >/tmp/demo.out 2>&1 &
    pid=$!
    for i in $(seq 1 1800); do
      if [ -s topogate-demo/demo.env ] &&
         curl -fsS --cacert topogate-demo/ca.crt -H "Authorization: Bearer $(cat topogate-demo/token)" \
           https://127.0.0.1:8443/snapshots/demo -o /tmp/snapshot.json 2>/dev/null; then
        echo "demo answered after ${i} s: $(head -c 120 /tmp/snapshot.json)"
        kill -TERM $pid; wait $pid || true
        exit 0
      fi
      kill -0 $pid 2>/dev/null || { tail -n 30 /tmp/demo.out; exit 1; }
      sleep 1
    done
    tail -n 30 /tmp/demo.out; kill $pid; exit 1'
}
rc=0
step demo demo || rc=1
if ((demo_only == 0)); then
  step test in_root 'cd /src && ./scripts/test.sh' || rc=1
  grep -E '^(total:|dev |asan|tsan|fuzz|image|e2e )' "$log/test.log" | tee -a "$log/transcript.txt" || true
fi
echo "=== summary" | tee -a "$log/transcript.txt"
printf '%s\n' "${summary[@]}" | tee -a "$log/transcript.txt"
exit $rc

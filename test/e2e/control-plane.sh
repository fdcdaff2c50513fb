#!/usr/bin/env bash
# A real Kubernetes control plane for the end-to-end tests: etcd and kube-apiserver
# built by build-kube-bins.sh and, with --node, a real node: containerd, runc and the
# CNI plugins from Debian, and kubelet, kube-proxy, kube-controller-manager and
# kube-scheduler built from the same pinned Kubernetes module.
#
# Usage: control-plane.sh start [--node] | stop | status | env | load-image ARCHIVE
#                         | apiserver-stop | apiserver-start
#   start            start etcd and kube-apiserver (no-op when already running
#                    and ready), write DIR/kubeconfig and DIR/env, wait for /readyz
#   start --node     also the node: a Pod network (bridge tg-e2e0, 10.244.77.0/24,
#                    the host at .1), containerd with its own root, state and socket
#                    under DIR, a locally built pause image, the controllers, kube-proxy
#                    (iptables) and a kubelet; waits until the Node is Ready and the
#                    default ServiceAccount exists. kube-apiserver then listens on all
#                    addresses (Pods reach it at 10.244.77.1 and through the kubernetes
#                    Service) and the ServiceAccount admission plugin is on.
#   stop             stop everything (SIGTERM, then SIGKILL after 20 s), remove the
#                    node's containers, mounts, cgroups, bridge and iptables rules,
#                    restore the sysctls the kubelet changed, and remove DIR
#   env              print the shell lines of DIR/env (eval "$(control-plane.sh env)")
#   load-image A     import the OCI or docker archive A into the node's containerd
#   apiserver-stop   stop only kube-apiserver (etcd keeps the data; SIGKILL after 5 s)
#   apiserver-start  start kube-apiserver again on the same port
# Env: TOPOGATE_CP_DIR (state, default ${TMPDIR:-/tmp}/topogate-control-plane-$UID),
#      KUBE_BIN_DIR (binaries; default: build-kube-bins.sh output),
#      TOPOGATE_CP_TIMEOUT (readiness deadline in seconds, default 180).
#
# Authentication: a static token file with an admin token (group system:masters)
# and an unprivileged user token (user "topogate-e2e", for RBAC tests), and
# client certificates from DIR/pki/ca.crt. Authorization: Node and RBAC. Without
# --node the ServiceAccount admission plugin is off because no token controller
# runs, and the endpoint reconciler is off because a loopback address may not be
# published as the kubernetes Service's endpoint.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
dir=${TOPOGATE_CP_DIR:-${TMPDIR:-/tmp}/topogate-control-plane-$(id -u)}
timeout=${TOPOGATE_CP_TIMEOUT:-180}
# The node's names and networks (fixed: one node suite runs on a machine at a time).
node_name=topogate-e2e-node
bridge=tg-e2e0
pod_cidr=10.244.77.0/24
node_ip=10.244.77.1
service_cidr=10.0.0.0/24
service_ip=10.0.0.1
pause_image=localhost/topogate-e2e-pause:1

log() { echo "control-plane: $*" >&2; }
die() { log "$*"; exit 1; }

bins() {
  if [[ -z ${KUBE_BIN_DIR:-} ]]; then
    eval "$("$here/build-kube-bins.sh" --print-env)"
  fi
  local b need=(etcd kube-apiserver kubectl)
  [[ -f $dir/node || ${want_node:-0} == 1 ]] &&
    need+=(kubelet kube-proxy kube-controller-manager kube-scheduler)
  for b in "${need[@]}"; do
    [[ -x $KUBE_BIN_DIR/$b ]] || die "$KUBE_BIN_DIR/$b missing (run test/e2e/build-kube-bins.sh)"
  done
}

alive() { [[ -s $1 ]] && kill -0 "$(cat "$1")" 2>/dev/null; }

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# stop_pid PIDFILE NAME [SECONDS]: SIGTERM, wait for exit, SIGKILL after
# SECONDS (default 20).
stop_pid() {
  local pf=$1 name=$2 limit=$((${3:-20} * 10)) pid i
  alive "$pf" || { rm -f "$pf"; return 0; }
  pid=$(cat "$pf")
  kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < limit; i++)); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$pid" 2>/dev/null; then
    log "$name did not exit after SIGTERM, sending SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -f "$pf"
}

# wait_for DESCRIPTION PIDFILE LOG COMMAND...: poll COMMAND until it succeeds,
# the process dies, or the deadline passes.
wait_for() {
  local what=$1 pf=$2 logf=$3; shift 3
  local deadline=$((SECONDS + timeout))
  until "$@" >/dev/null 2>&1; do
    if ! alive "$pf"; then
      tail -n 30 "$logf" >&2 || true
      die "$what exited during start-up (log: $logf)"
    fi
    ((SECONDS < deadline)) || { tail -n 30 "$logf" >&2; die "$what not ready after $timeout s (log: $logf)"; }
    sleep 0.2
  done
}

make_pki() {
  local pki="$dir/pki"
  mkdir -p "$pki"
  export CERTS_QUIET=1
  "$repo/certs/make-ca.sh" --out "$pki" --cn "topogate e2e cluster CA"
  # The names kube-apiserver is reached by here and in-cluster.
  "$repo/certs/make-server-cert.sh" --ca-cert "$pki/ca.crt" --ca-key "$pki/ca.key" --out "$pki" \
    --name apiserver --ip 127.0.0.1 --ip "$node_ip" --ip "$service_ip" --dns localhost \
    --dns kubernetes --dns kubernetes.default --dns kubernetes.default.svc \
    --dns kubernetes.default.svc.cluster.local --days 30
  "$repo/certs/make-client-cert.sh" --ca-cert "$pki/ca.crt" --ca-key "$pki/ca.key" --out "$pki" \
    --name admin --cn e2e-admin --org system:masters --days 30
  if [[ -f $dir/node ]]; then
    # The kubelet as the Node authorizer expects it; the controllers and kube-proxy
    # as the identities their default RBAC roles are bound to.
    "$repo/certs/make-client-cert.sh" --ca-cert "$pki/ca.crt" --ca-key "$pki/ca.key" --out "$pki" \
      --name kubelet --cn "system:node:$node_name" --org system:nodes --days 30
    "$repo/certs/make-client-cert.sh" --ca-cert "$pki/ca.crt" --ca-key "$pki/ca.key" --out "$pki" \
      --name controller-manager --cn system:kube-controller-manager --days 30
    "$repo/certs/make-client-cert.sh" --ca-cert "$pki/ca.crt" --ca-key "$pki/ca.key" --out "$pki" \
      --name scheduler --cn system:kube-scheduler --days 30
    "$repo/certs/make-client-cert.sh" --ca-cert "$pki/ca.crt" --ca-key "$pki/ca.key" --out "$pki" \
      --name kube-proxy --cn system:kube-proxy --days 30
  fi
  [[ -s $pki/sa.key ]] || {
    openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$pki/sa.key" 2>/dev/null
    openssl pkey -in "$pki/sa.key" -pubout -out "$pki/sa.pub"
  }
  if [[ ! -s $dir/tokens.csv ]]; then
    local admin user
    admin=$(openssl rand -hex 24) user=$(openssl rand -hex 24)
    printf '%s' "$admin" >"$dir/admin.token"
    printf '%s' "$user" >"$dir/user.token"
    # token,user,uid,"groups" (kube-apiserver --token-auth-file format)
    printf '%s,e2e-admin,e2e-admin,"system:masters"\n%s,topogate-e2e,topogate-e2e\n' \
      "$admin" "$user" >"$dir/tokens.csv"
    chmod 600 "$dir/tokens.csv" "$dir/admin.token" "$dir/user.token"
  fi
}

start_etcd() {
  alive "$dir/etcd.pid" && return 0
  local cport pport
  cport=$(cat "$dir/etcd.port" 2>/dev/null || free_port)
  pport=$(free_port)
  echo "$cport" >"$dir/etcd.port"
  mkdir -p "$dir/etcd"
  # --unsafe-no-fsync: test data only; a crash loses nothing a test needs.
  setsid "$KUBE_BIN_DIR/etcd" --name e2e --data-dir "$dir/etcd" \
    --listen-client-urls "http://127.0.0.1:$cport" --advertise-client-urls "http://127.0.0.1:$cport" \
    --listen-peer-urls "http://127.0.0.1:$pport" --initial-advertise-peer-urls "http://127.0.0.1:$pport" \
    --initial-cluster "e2e=http://127.0.0.1:$pport" --unsafe-no-fsync --log-level warn \
    </dev/null >>"$dir/etcd.log" 2>&1 &
  echo $! >"$dir/etcd.pid"
  wait_for etcd "$dir/etcd.pid" "$dir/etcd.log" \
    curl -fsS --max-time 2 --noproxy '*' "http://127.0.0.1:$cport/health"
}

start_apiserver() {
  alive "$dir/apiserver.pid" && return 0
  local port etcd_port node_flags=()
  port=$(cat "$dir/apiserver.port" 2>/dev/null || free_port)
  echo "$port" >"$dir/apiserver.port"
  etcd_port=$(cat "$dir/etcd.port")
  mkdir -p "$dir/apiserver-certs"
  if [[ -f $dir/node ]]; then
    # Pods reach the apiserver on the bridge's host address, directly or through the
    # kubernetes Service (kube-proxy); it calls webhooks at ready Pod IPs
    # (aggregator routing makes its service resolver use the EndpointSlices).
    node_flags=(--bind-address 0.0.0.0 --advertise-address "$node_ip"
      --enable-aggregator-routing=true
      --kubelet-client-certificate "$dir/pki/admin.crt" --kubelet-client-key "$dir/pki/admin.key"
      --kubelet-preferred-address-types InternalIP,Hostname
      --enable-admission-plugins NodeRestriction)
  else
    node_flags=(--bind-address 127.0.0.1 --advertise-address 127.0.0.1
      --disable-admission-plugins ServiceAccount --endpoint-reconciler-type none)
  fi
  # The apiserver calls admission webhooks itself: no proxy may sit between it
  # and a webhook on 127.0.0.1.
  env -u http_proxy -u https_proxy -u HTTP_PROXY -u HTTPS_PROXY -u no_proxy -u NO_PROXY \
    setsid "$KUBE_BIN_DIR/kube-apiserver" \
    --etcd-servers "http://127.0.0.1:$etcd_port" \
    --secure-port "$port" "${node_flags[@]}" \
    --cert-dir "$dir/apiserver-certs" \
    --tls-cert-file "$dir/pki/apiserver.crt" --tls-private-key-file "$dir/pki/apiserver.key" \
    --client-ca-file "$dir/pki/ca.crt" \
    --token-auth-file "$dir/tokens.csv" \
    --authorization-mode Node,RBAC \
    --service-account-issuer "https://127.0.0.1:$port" \
    --service-account-key-file "$dir/pki/sa.pub" \
    --service-account-signing-key-file "$dir/pki/sa.key" \
    --service-cluster-ip-range "$service_cidr" \
    --allow-privileged=true --profiling=false \
    </dev/null >>"$dir/apiserver.log" 2>&1 &
  echo $! >"$dir/apiserver.pid"
  wait_for kube-apiserver "$dir/apiserver.pid" "$dir/apiserver.log" \
    curl -fsS --max-time 5 --noproxy '*' --cacert "$dir/pki/ca.crt" \
      -H "Authorization: Bearer $(cat "$dir/admin.token")" "https://127.0.0.1:$port/readyz"
}

write_env() {
  local port
  port=$(cat "$dir/apiserver.port")
  cat >"$dir/kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: e2e
  cluster:
    server: https://127.0.0.1:$port
    certificate-authority: $dir/pki/ca.crt
users:
- name: e2e-admin
  user:
    tokenFile: $dir/admin.token
- name: topogate-e2e
  user:
    tokenFile: $dir/user.token
contexts:
- name: e2e
  context: {cluster: e2e, user: e2e-admin}
- name: e2e-user
  context: {cluster: e2e, user: topogate-e2e}
current-context: e2e
EOF
  chmod 600 "$dir/kubeconfig"
  {
    printf 'export KUBECONFIG=%q\n' "$dir/kubeconfig"
    printf 'export KUBE_BIN_DIR=%q\n' "$KUBE_BIN_DIR"
    printf 'export KUBECTL=%q\n' "$KUBE_BIN_DIR/kubectl"
    printf 'export TOPOGATE_CP_DIR=%q\n' "$dir"
    printf 'export TOPOGATE_CP_URL=%q\n' "https://127.0.0.1:$port"
    printf 'export TOPOGATE_CP_CA=%q\n' "$dir/pki/ca.crt"
    printf 'export TOPOGATE_CP_ADMIN_TOKEN_FILE=%q\n' "$dir/admin.token"
    printf 'export TOPOGATE_CP_USER_TOKEN_FILE=%q\n' "$dir/user.token"
  } >"$dir/env"
}

# ---- the node (start --node) ------------------------------------------------------

ctr_() { ctr --address "$dir/containerd/containerd.sock" -n k8s.io "$@"; }

# kubeconfig_for NAME: DIR/NAME.kubeconfig authenticating with DIR/pki/NAME.{crt,key}.
kubeconfig_for() {
  local port
  port=$(cat "$dir/apiserver.port")
  cat >"$dir/$1.kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: e2e
  cluster: {server: "https://127.0.0.1:$port", certificate-authority: "$dir/pki/ca.crt"}
users:
- name: $1
  user: {client-certificate: "$dir/pki/$1.crt", client-key: "$dir/pki/$1.key"}
contexts:
- name: e2e
  context: {cluster: e2e, user: $1}
current-context: e2e
EOF
  chmod 600 "$dir/$1.kubeconfig"
}

# The host changes the kubelet makes, recorded once so stop can undo them.
save_host_state() {
  [[ -s $dir/host-state ]] && return 0
  local k d
  {
    for k in kernel/panic kernel/panic_on_oops vm/overcommit_memory net/ipv4/ip_forward \
      net/bridge/bridge-nf-call-iptables net/ipv4/conf/all/route_localnet; do
      [[ -r /proc/sys/$k ]] && echo "sysctl $k $(cat "/proc/sys/$k")"
    done
    for d in /var/lib/kubelet /var/log/containers /var/log/pods; do
      [[ -e $d ]] || echo "created $d"
    done
    # The kubelet's own filter chain (kube-proxy --cleanup leaves it).
    iptables -w 5 -S KUBE-FIREWALL >/dev/null 2>&1 || echo "chain KUBE-FIREWALL"
  } >"$dir/host-state"
}

start_network() {
  mkdir -p "$dir/cni/net.d" "$dir/cni/ipam"
  # The bridge exists before any Pod so the apiserver can advertise its address.
  ip link show "$bridge" >/dev/null 2>&1 || ip link add "$bridge" type bridge
  ip addr replace "$node_ip/${pod_cidr#*/}" dev "$bridge"
  ip link set "$bridge" up
  cat >"$dir/cni/net.d/10-topogate-e2e.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "topogate-e2e",
  "plugins": [
    {
      "type": "bridge", "bridge": "$bridge", "isGateway": true, "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local", "dataDir": "$dir/cni/ipam",
        "ranges": [[{"subnet": "$pod_cidr", "gateway": "$node_ip"}]],
        "routes": [{"dst": "0.0.0.0/0"}]
      }
    }
  ]
}
EOF
}

start_containerd() {
  alive "$dir/containerd.pid" && return 0
  local c=$dir/containerd
  mkdir -p "$c/root" "$c/state" "$c/opt"
  cat >"$c/config.toml" <<EOF
version = 2
root = "$c/root"
state = "$c/state"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs"]
[grpc]
  address = "$c/containerd.sock"
[ttrpc]
  address = "$c/containerd.sock.ttrpc"
[plugins."io.containerd.internal.v1.opt"]
  path = "$c/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$pause_image"
  restrict_oom_score_adj = true
  disable_apparmor = true
  netns_mounts_under_state_dir = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$dir/cni/net.d"
EOF
  setsid containerd --config "$c/config.toml" </dev/null >>"$dir/containerd.log" 2>&1 &
  echo $! >"$dir/containerd.pid"
  wait_for containerd "$dir/containerd.pid" "$dir/containerd.log" ctr_ version
}

# load_image ARCHIVE: imports an OCI archive into the node's containerd; the image keeps
# the name podman saved it under (the index's org.opencontainers.image.ref.name, e.g.
# localhost/topogate:0.1.0), which Pod specs then use with imagePullPolicy: Never.
load_image() {
  ctr_ images import --all-platforms "$1" >&2
}

# The Pod sandbox image, built from test/e2e/node/pause.c (no registry here).
load_pause() {
  ctr_ images ls -q | grep -qx "$pause_image" && return 0
  local b=$dir/pause-build
  rm -rf "$b" && mkdir -p "$b/rootfs"
  gcc -static -O2 -o "$b/rootfs/pause" "$here/node/pause.c"
  tar --numeric-owner --owner=0 --group=0 -C "$b/rootfs" -cf "$b/rootfs.tar" .
  podman import --quiet --change 'ENTRYPOINT ["/pause"]' --change 'USER 65535:65535' \
    "$b/rootfs.tar" "$pause_image" >/dev/null
  podman save --quiet --format oci-archive -o "$b/pause.tar" "$pause_image"
  load_image "$b/pause.tar"
  rm -rf "$b"
}

start_controllers() {
  kubeconfig_for controller-manager
  kubeconfig_for scheduler
  if ! alive "$dir/controller-manager.pid"; then
    mkdir -p "$dir/flexvolume"
    setsid "$KUBE_BIN_DIR/kube-controller-manager" \
      --kubeconfig "$dir/controller-manager.kubeconfig" \
      --authentication-kubeconfig "$dir/controller-manager.kubeconfig" \
      --authorization-kubeconfig "$dir/controller-manager.kubeconfig" \
      --leader-elect=false --secure-port 0 \
      --service-account-private-key-file "$dir/pki/sa.key" --root-ca-file "$dir/pki/ca.crt" \
      --use-service-account-credentials=true \
      --service-cluster-ip-range "$service_cidr" --cluster-cidr "$pod_cidr" \
      --allocate-node-cidrs=false --flex-volume-plugin-dir "$dir/flexvolume" \
      --controllers '*,-nodeipam,-cloud-node-lifecycle,-service-lb-controller' \
      </dev/null >>"$dir/controller-manager.log" 2>&1 &
    echo $! >"$dir/controller-manager.pid"
  fi
  if ! alive "$dir/scheduler.pid"; then
    setsid "$KUBE_BIN_DIR/kube-scheduler" \
      --kubeconfig "$dir/scheduler.kubeconfig" \
      --authentication-kubeconfig "$dir/scheduler.kubeconfig" \
      --authorization-kubeconfig "$dir/scheduler.kubeconfig" \
      --leader-elect=false --secure-port 0 \
      </dev/null >>"$dir/scheduler.log" 2>&1 &
    echo $! >"$dir/scheduler.pid"
  fi
}

start_kube_proxy() {
  alive "$dir/kube-proxy.pid" && return 0
  kubeconfig_for kube-proxy
  cat >"$dir/kube-proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: "$dir/kube-proxy.kubeconfig"}
hostnameOverride: $node_name
mode: iptables
clusterCIDR: $pod_cidr
conntrack: {maxPerCore: 0, min: 0}
iptables: {localhostNodePorts: false}
metricsBindAddress: 127.0.0.1:$(free_port)
healthzBindAddress: ""
EOF
  setsid "$KUBE_BIN_DIR/kube-proxy" --config "$dir/kube-proxy.yaml" \
    </dev/null >>"$dir/kube-proxy.log" 2>&1 &
  echo $! >"$dir/kube-proxy.pid"
}

start_kubelet() {
  alive "$dir/kubelet.pid" && return 0
  local k=$dir/kubelet port
  port=$(free_port)
  mkdir -p "$k/root" "$k/certs" "$k/manifests" "$k/pod-logs" "$k/volume-plugins"
  kubeconfig_for kubelet
  cat >"$k/config.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $node_ip
port: $port
readOnlyPort: 0
healthzPort: 0
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: "$dir/pki/ca.crt"}
authorization: {mode: Webhook}
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
containerRuntimeEndpoint: unix://$dir/containerd/containerd.sock
imageServiceEndpoint: unix://$dir/containerd/containerd.sock
staticPodPath: $k/manifests
podLogsDir: $k/pod-logs
volumePluginDir: $k/volume-plugins
makeIPTablesUtilChains: false
clusterDomain: cluster.local
resolvConf: ""
# Local images only (nothing can be pulled again): never collect them.
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: 100Mi, nodefs.available: "1%", imagefs.available: "1%"}
serializeImagePulls: false
# Mounted Secrets and ConfigMaps are refreshed on each Pod sync: every 10 s instead
# of the default minute, so rotation tests do not wait a minute each.
syncFrequency: 10s
EOF
  setsid "$KUBE_BIN_DIR/kubelet" --config "$k/config.yaml" \
    --kubeconfig "$dir/kubelet.kubeconfig" --hostname-override "$node_name" \
    --node-ip "$node_ip" --root-dir "$k/root" --cert-dir "$k/certs" \
    </dev/null >>"$dir/kubelet.log" 2>&1 &
  echo $! >"$dir/kubelet.pid"
}

# kube-proxy has programmed the kubernetes Service (Pods reach the API through it).
proxy_ready() {
  iptables -w 5 -t nat -S KUBE-SERVICES 2>/dev/null | grep -q -- "-d $service_ip/32"
}

node_ready() {
  "$KUBE_BIN_DIR/kubectl" --kubeconfig "$dir/kubeconfig" get node "$node_name" \
    -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null | grep -qx True &&
    "$KUBE_BIN_DIR/kubectl" --kubeconfig "$dir/kubeconfig" -n default get serviceaccount default >/dev/null 2>&1
}

start_node() {
  save_host_state
  start_containerd
  load_pause
  start_controllers
  start_kube_proxy
  start_kubelet
  wait_for kube-proxy "$dir/kube-proxy.pid" "$dir/kube-proxy.log" proxy_ready
  wait_for "the node" "$dir/kubelet.pid" "$dir/kubelet.log" node_ready
}

# Undoes start_node: Pods first (their containers, mounts and network), then the
# processes, then what they left on the host.
stop_node() {
  local p m c what a b
  if alive "$dir/containerd.pid"; then
    for p in $(ctr_ tasks ls -q 2>/dev/null); do ctr_ tasks kill -s SIGKILL "$p" >/dev/null 2>&1 || true; done
  fi
  stop_pid "$dir/kubelet.pid" kubelet 10
  stop_pid "$dir/kube-proxy.pid" kube-proxy 5
  stop_pid "$dir/scheduler.pid" kube-scheduler 5
  stop_pid "$dir/controller-manager.pid" kube-controller-manager 5
  if alive "$dir/containerd.pid"; then
    for p in $(ctr_ tasks ls -q 2>/dev/null); do ctr_ tasks delete -f "$p" >/dev/null 2>&1 || true; done
    for p in $(ctr_ containers ls -q 2>/dev/null); do ctr_ containers delete "$p" >/dev/null 2>&1 || true; done
  fi
  stop_pid "$dir/containerd.pid" containerd 10
  # Shims of containers containerd could not end.
  pkill -KILL -f "containerd-shim-runc-v2 .*-address $dir/containerd/" 2>/dev/null || true
  if [[ -x ${KUBE_BIN_DIR:-}/kube-proxy ]]; then
    "$KUBE_BIN_DIR/kube-proxy" --cleanup >/dev/null 2>&1 || true
  fi
  # Mounts under DIR (Pod volumes, network namespaces, root filesystems), deepest first.
  findmnt -rn -o TARGET | grep "^$dir/" | sort -r | while read -r m; do
    umount -l "$m" 2>/dev/null || true
  done
  # The Pods' cgroups, leaves first.
  for c in /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/kubepods; do
    [[ -d $c ]] && { find "$c" -depth -type d -exec rmdir {} + 2>/dev/null || true; }
  done
  ip link del "$bridge" 2>/dev/null || true
  if [[ -s $dir/host-state ]]; then
    while read -r what a b; do
      case $what in
        sysctl) echo "$b" >"/proc/sys/$a" 2>/dev/null || true ;;
        created) rm -rf "$a" ;;
        chain)
          iptables -w 5 -S | grep -- "-j $a\$" | sed 's/^-A /-D /' | while read -r rule; do
            # shellcheck disable=SC2086
            iptables -w 5 $rule 2>/dev/null || true
          done
          iptables -w 5 -F "$a" 2>/dev/null || true
          iptables -w 5 -X "$a" 2>/dev/null || true
          ;;
      esac
    done <"$dir/host-state"
  fi
}

cmd=${1:-}
case $cmd in
  start)
    want_node=0
    [[ ${2:-} == --node ]] && want_node=1
    [[ -z ${2:-} || $want_node == 1 ]] || die "start: unknown option ${2:-}"
    if [[ -s $dir/env ]] && { [[ $want_node == 1 && ! -f $dir/node ]] || [[ $want_node == 0 && -f $dir/node ]]; }; then
      die "another kind of control plane is running in $dir; stop it first"
    fi
    bins
    mkdir -p "$dir"
    chmod 700 "$dir"
    ((want_node)) && touch "$dir/node"
    t0=$SECONDS
    ((want_node)) && start_network
    make_pki
    start_etcd
    start_apiserver
    write_env
    ((want_node)) && start_node
    log "ready in $((SECONDS - t0)) s at https://127.0.0.1:$(cat "$dir/apiserver.port")$( ((want_node)) && echo " with node $node_name") (state in $dir)"
    ;;
  load-image)
    [[ -f $dir/node && -n ${2:-} ]] || die "load-image: needs a running node (start --node) and an archive"
    load_image "$2"
    ;;
  stop)
    [[ -d $dir ]] || exit 0
    if [[ -f $dir/node ]]; then
      [[ -n ${KUBE_BIN_DIR:-} ]] || eval "$("$here/build-kube-bins.sh" --print-env 2>/dev/null)" || true
      stop_node
    fi
    stop_pid "$dir/apiserver.pid" kube-apiserver
    stop_pid "$dir/etcd.pid" etcd
    rm -rf "$dir"
    log "stopped"
    ;;
  apiserver-stop)
    # Open watches keep a terminating apiserver waiting; an outage need not be graceful.
    stop_pid "$dir/apiserver.pid" kube-apiserver 5
    ;;
  apiserver-start)
    bins
    [[ -s $dir/etcd.port ]] || die "not started (run: $0 start)"
    start_apiserver
    ;;
  status)
    for p in etcd apiserver containerd controller-manager scheduler kube-proxy kubelet; do
      [[ -e $dir/$p.pid || $p == etcd || $p == apiserver ]] || continue
      if alive "$dir/$p.pid"; then echo "$p running (pid $(cat "$dir/$p.pid"))"; else echo "$p stopped"; fi
    done
    ;;
  env)
    [[ -s $dir/env ]] || die "not started (run: $0 start)"
    cat "$dir/env"
    ;;
  *)
    sed -n '2,32p' "$0" >&2
    exit 2
    ;;
esac

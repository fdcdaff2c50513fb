#!/usr/bin/env bash
# A real Kubernetes control plane on loopback for the end-to-end tests: etcd
# and kube-apiserver built by build-kube-bins.sh, no kubelet, no controllers.
#
# Usage: control-plane.sh start | stop | status | env | apiserver-stop | apiserver-start
#   start            start etcd and kube-apiserver (no-op when already running
#                    and ready), write DIR/kubeconfig and DIR/env, wait for /readyz
#   stop             stop both (SIGTERM, then SIGKILL after 20 s) and remove DIR
#   env              print the shell lines of DIR/env (eval "$(control-plane.sh env)")
#   apiserver-stop   stop only kube-apiserver (etcd keeps the data; SIGKILL after 5 s)
#   apiserver-start  start kube-apiserver again on the same port
# Env: TOPOGATE_CP_DIR (state, default ${TMPDIR:-/tmp}/topogate-control-plane-$UID),
#      KUBE_BIN_DIR (binaries; default: build-kube-bins.sh output),
#      TOPOGATE_CP_TIMEOUT (readiness deadline in seconds, default 180).
#
# Authentication: a static token file with an admin token (group system:masters)
# and an unprivileged user token (user "topogate-e2e", for RBAC tests), and
# client certificates from DIR/pki/ca.crt. Authorization: RBAC. The
# ServiceAccount admission plugin is off because no token controller runs; the
# endpoint reconciler is off because a loopback address may not be published
# as the kubernetes Service's endpoint.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
dir=${TOPOGATE_CP_DIR:-${TMPDIR:-/tmp}/topogate-control-plane-$(id -u)}
timeout=${TOPOGATE_CP_TIMEOUT:-180}

log() { echo "control-plane: $*" >&2; }
die() { log "$*"; exit 1; }

bins() {
  if [[ -z ${KUBE_BIN_DIR:-} ]]; then
    eval "$("$here/build-kube-bins.sh" --print-env)"
  fi
  for b in etcd kube-apiserver kubectl; do
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
    --name apiserver --ip 127.0.0.1 --dns localhost --dns kubernetes.default.svc \
    --dns kubernetes.default.svc.cluster.local --days 30
  "$repo/certs/make-client-cert.sh" --ca-cert "$pki/ca.crt" --ca-key "$pki/ca.key" --out "$pki" \
    --name admin --cn e2e-admin --org system:masters --days 30
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
  local port etcd_port
  port=$(cat "$dir/apiserver.port" 2>/dev/null || free_port)
  echo "$port" >"$dir/apiserver.port"
  etcd_port=$(cat "$dir/etcd.port")
  mkdir -p "$dir/apiserver-certs"
  # The apiserver calls admission webhooks itself: no proxy may sit between it
  # and a webhook on 127.0.0.1.
  env -u http_proxy -u https_proxy -u HTTP_PROXY -u HTTPS_PROXY -u no_proxy -u NO_PROXY \
    setsid "$KUBE_BIN_DIR/kube-apiserver" \
    --etcd-servers "http://127.0.0.1:$etcd_port" \
    --bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "$port" \
    --cert-dir "$dir/apiserver-certs" \
    --tls-cert-file "$dir/pki/apiserver.crt" --tls-private-key-file "$dir/pki/apiserver.key" \
    --client-ca-file "$dir/pki/ca.crt" \
    --token-auth-file "$dir/tokens.csv" \
    --authorization-mode RBAC \
    --service-account-issuer "https://127.0.0.1:$port" \
    --service-account-key-file "$dir/pki/sa.pub" \
    --service-account-signing-key-file "$dir/pki/sa.key" \
    --service-cluster-ip-range 10.0.0.0/24 \
    --disable-admission-plugins ServiceAccount \
    --allow-privileged=true --profiling=false \
    --endpoint-reconciler-type none \
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

cmd=${1:-}
case $cmd in
  start)
    bins
    mkdir -p "$dir"
    chmod 700 "$dir"
    t0=$SECONDS
    make_pki
    start_etcd
    start_apiserver
    write_env
    log "ready in $((SECONDS - t0)) s at https://127.0.0.1:$(cat "$dir/apiserver.port") (state in $dir)"
    ;;
  stop)
    [[ -d $dir ]] || exit 0
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
    for p in etcd apiserver; do
      if alive "$dir/$p.pid"; then echo "$p running (pid $(cat "$dir/$p.pid"))"; else echo "$p stopped"; fi
    done
    ;;
  env)
    [[ -s $dir/env ]] || die "not started (run: $0 start)"
    cat "$dir/env"
    ;;
  *)
    sed -n '2,20p' "$0" >&2
    exit 2
    ;;
esac

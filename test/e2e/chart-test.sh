#!/usr/bin/env bash
# Tests helm/topogate with the real helm and kube-apiserver:
#  1. helm lint and helm template for every values case in chart-values/
#     (plus the defaults), checked by chart-check.py;
#  2. values.schema.json refuses bad values;
#  3. every rendered object (and the CRDs) is accepted by the real apiserver
#     with kubectl apply --dry-run=server, cert-manager and ServiceMonitor CRDs
#     installed from fixtures/;
#  4. each inventory's rendered TopologySource passes `topogate validate`, and
#     topogate starts with each rendered config.yaml (mount paths mapped to a
#     temp folder), when the topogate binary exists.
# Starts the control plane when none is running (and stops it again).
# Env: TOPOGATE_BINARY, KUBE_BIN_DIR/HELM_BIN_DIR (default: build-kube-bins.sh).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
chart="$repo/helm/topogate"
t0=$SECONDS

eval "$("$here/build-kube-bins.sh" --print-env)"
helm="$HELM_BIN_DIR/helm"
work=$(mktemp -d)
export HELM_CACHE_HOME="$work/helm-cache" HELM_CONFIG_HOME="$work/helm-config" HELM_DATA_HOME="$work/helm-data"
started=0
cleanup() {
  ((started)) && "$here/control-plane.sh" stop || true
  rm -rf "$work"
}
trap cleanup EXIT

fails=0 checks=0
pass() { checks=$((checks + 1)); echo "ok   $*"; }
fail() { checks=$((checks + 1)); fails=$((fails + 1)); echo "FAIL $*"; }

topogate=${TOPOGATE_BINARY:-}
if [[ -z $topogate ]]; then
  for p in dev debug rules; do
    [[ -x $repo/build/$p/cli/topogate ]] && { topogate=$repo/build/$p/cli/topogate; break; }
  done
fi

# A serving certificate and client CA for the "given certificate" case.
export CERTS_QUIET=1
"$repo/certs/make-ca.sh" --out "$work/pki"
release=topogate ns=gpustack-system
common=(--namespace "$ns" --kube-version 1.36.3)
declare -A extra
extra[secret-mtls-nonodes]="--set-file tls.caBundle=$work/pki/ca.crt --set-file inventories[0].readers.mtls.clientCA=$work/pki/ca.crt"

cases=(defaults)
for f in "$here"/chart-values/*.yaml; do cases+=("$(basename "$f" .yaml)"); done

for c in "${cases[@]}"; do
  args=("${common[@]}")
  [[ $c != defaults ]] && args+=(-f "$here/chart-values/$c.yaml")
  # shellcheck disable=SC2206
  [[ -n ${extra[$c]:-} ]] && args+=(${extra[$c]})
  if "$helm" lint --strict "$chart" "${args[@]}" >"$work/$c.lint" 2>&1; then
    pass "helm lint --strict ($c)"
  else
    fail "helm lint --strict ($c)"; cat "$work/$c.lint"
  fi
  if "$helm" template "$release" "$chart" "${args[@]}" --include-crds >"$work/$c.yaml" 2>"$work/$c.err"; then
    pass "helm template ($c): $(grep -c '^kind:' "$work/$c.yaml") objects"
    if python3 "$here/chart-check.py" "$work/$c.yaml" "$c"; then pass "rendered objects ($c)"; else fail "rendered objects ($c)"; fi
  else
    fail "helm template ($c)"; cat "$work/$c.err"
  fi
done

# The schema refuses what topogate or the apiserver would refuse later.
bad=(
  "webhook.failurePolicy=Maybe"
  "webhook.timeoutSeconds=31"
  "webhook.timeoutSeconds=0"
  "tls.mode=secret"
  "store.type=file"
  "store.type=etcd"
  "replicaCount=0"
  "logLevel=verbose"
  "inventories[0].name=Bad_Name"
  "unknownKey=1"
)
for b in "${bad[@]}"; do
  set_args=(--set "$b")
  [[ $b == inventories* ]] && set_args+=(--set "inventories[0].source.levels[0]=a" --set "inventories[0].readers.bearer.existingSecret=s")
  if "$helm" template "$release" "$chart" "${common[@]}" "${set_args[@]}" >/dev/null 2>&1; then
    fail "schema refuses $b"
  else
    pass "schema refuses $b"
  fi
done

# Rendered TopologySources are valid for topogate itself.
if [[ -n $topogate ]]; then
  for c in "${cases[@]}"; do
    python3 - "$work/$c.yaml" "$work/src-$c" <<'EOF'
import sys, yaml, os
os.makedirs(sys.argv[2], exist_ok=True)
for d in yaml.safe_load_all(open(sys.argv[1])):
    if d and d["kind"] == "ConfigMap" and d["metadata"]["name"].endswith("-config"):
        for k, v in d["data"].items():
            if k.startswith("source-"):
                open(os.path.join(sys.argv[2], k), "w").write(v)
EOF
    for s in "$work/src-$c"/source-*.yaml; do
      [[ -e $s ]] || continue
      if "$topogate" validate topologysource "$s" >"$work/v.out" 2>&1; then
        pass "topogate validate $(basename "$s") ($c)"
      else
        fail "topogate validate $(basename "$s") ($c)"; cat "$work/v.out"
      fi
    done
  done
  # The rendered config.yaml starts topogate: the chart's mount paths are
  # mapped into a temp folder holding the files the volumes would.
  for c in "${cases[@]}"; do
    root="$work/run-$c"
    python3 - "$work/$c.yaml" "$root" "$work/pki/ca.crt" "$here/fixtures/runbook/data-center.snapshot.yaml" <<'EOF'
import os, socket, sys, yaml, shutil
rendered, root, ca, snapshot = sys.argv[1:5]
def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p
def local(p):
    for prefix, sub in (("/etc/topogate/", "etc/"), ("/var/run/topogate/", "run/"), ("/var/lib/topogate", "lib")):
        if p.startswith(prefix):
            return os.path.join(root, sub + p[len(prefix):])
    return p
def put(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    open(path, "w").write(text)
data = next(d for d in yaml.safe_load_all(open(rendered)) if d and d["kind"] == "ConfigMap" and d["metadata"]["name"].endswith("-config"))["data"]
cfg = yaml.safe_load(data["config.yaml"])
for k, v in data.items():
    if k != "config.yaml":
        put(os.path.join(root, "etc", k), v)
cfg["listen"].update(address="127.0.0.1", port=free_port(), healthPort=free_port())
cfg["tls"] = {"certFile": os.path.join(root, "tls.crt"), "keyFile": os.path.join(root, "tls.key")}
if cfg.get("store", {}).get("type") == "file":
    cfg["store"]["directory"] = local(cfg["store"]["directory"])
    os.makedirs(cfg["store"]["directory"], exist_ok=True)
for inv in cfg.get("inventories") or []:  # none: a webhook-only install
    inv["source"] = local(inv["source"])
    if "snapshot" in inv:
        inv["snapshot"] = local(inv["snapshot"])
        os.makedirs(os.path.dirname(inv["snapshot"]), exist_ok=True)
        shutil.copy(snapshot, inv["snapshot"])
    for role in ("readers", "writers"):
        r = inv.get(role, {})
        r["bearerTokenFiles"] = [local(f) for f in r.get("bearerTokenFiles", [])]
        for f in r["bearerTokenFiles"]:
            put(f, os.urandom(16).hex())
        if not r["bearerTokenFiles"]:
            del r["bearerTokenFiles"]
        if "clientCAFile" in r:
            r["clientCAFile"] = local(r["clientCAFile"])
            put(r["clientCAFile"], open(ca).read())
# Reviews of metrics.auth kubernetes, the audit and a dry run's Workload answer
# (workloadImpact) need to know where the API is (in a cluster, the ServiceAccount's): here
# an address nothing answers on, so topogate starts and only those calls fail.
if (cfg.get("metrics", {}).get("auth") == "kubernetes" or cfg.get("audit", {}).get("enabled")
        or any(i.get("workloadImpact") for i in cfg.get("inventories") or [])):
    store = cfg.setdefault("store", {})
    if "apiServer" not in store:
        store.update(apiServer="https://127.0.0.1:9", caFile=ca, tokenFile=os.path.join(root, "run/sa-token"))
        put(store["tokenFile"], os.urandom(16).hex())
put(os.path.join(root, "config.yaml"), yaml.safe_dump(cfg))
EOF
    [[ -s $root/config.yaml ]] || { fail "config of $c not prepared"; continue; }
    "$repo/certs/make-server-cert.sh" --ca-cert "$work/pki/ca.crt" --ca-key "$work/pki/ca.key" --out "$root" \
      --name tls --dns localhost --days 1
    hp=$(python3 -c 'import sys, yaml; print(yaml.safe_load(open(sys.argv[1]))["listen"]["healthPort"])' "$root/config.yaml")
    "$topogate" serve --config "$root/config.yaml" >"$root/log" 2>&1 &
    pid=$!
    deadline=$((SECONDS + 30)) up=0
    while ((SECONDS < deadline)) && kill -0 "$pid" 2>/dev/null; do
      curl -fsS -o /dev/null --noproxy '*' "http://127.0.0.1:$hp/livez" 2>/dev/null && { up=1; break; }
      sleep 0.2
    done
    if ((up)); then
      pass "topogate starts with the rendered config.yaml ($c)"
    else
      fail "topogate does not start with the rendered config.yaml ($c)"; tail -n 5 "$root/log"
    fi
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
else
  echo "skip topogate validate of rendered sources: no topogate binary (set TOPOGATE_BINARY)"
fi

# The real apiserver accepts every rendered object.
if [[ ${CHART_TEST_NO_SERVER:-0} != 1 ]]; then
  if ! "$here/control-plane.sh" status 2>/dev/null | grep -q 'apiserver running'; then
    "$here/control-plane.sh" start
    started=1
  fi
  eval "$("$here/control-plane.sh" env)"
  k() { "$KUBECTL" "$@"; }
  k apply --server-side -f "$here/fixtures/cert-manager-crds.yaml" -f "$here/fixtures/servicemonitor-crd.yaml" >/dev/null
  k apply --server-side -f "$repo/test/e2e/crds/" >/dev/null
  k wait --for condition=Established --timeout 60s crd --all >/dev/null
  k create namespace "$ns" --dry-run=client -o yaml | k apply -f - >/dev/null
  for c in "${cases[@]}"; do
    if k apply --dry-run=server -f "$work/$c.yaml" >"$work/$c.apply" 2>&1; then
      pass "kubectl apply --dry-run=server ($c): $(wc -l <"$work/$c.apply") objects"
    else
      fail "kubectl apply --dry-run=server ($c)"; cat "$work/$c.apply"
    fi
  done
  # helm itself against the apiserver (capabilities from the server, NOTES.txt rendered).
  for c in "${cases[@]}"; do
    args=(--namespace "$ns")
    [[ $c != defaults ]] && args+=(-f "$here/chart-values/$c.yaml")
    # shellcheck disable=SC2206
    [[ -n ${extra[$c]:-} ]] && args+=(${extra[$c]})
    if "$helm" install --dry-run=server "$release" "$chart" "${args[@]}" >"$work/$c.install" 2>&1 &&
        grep -q 'failurePolicy=' "$work/$c.install"; then
      pass "helm install --dry-run=server ($c), NOTES rendered"
    else
      fail "helm install --dry-run=server ($c)"; tail -n 20 "$work/$c.install"
    fi
  done
fi

echo "chart-test: $((checks - fails)) passed, $fails failed in $((SECONDS - t0)) s"
((fails == 0))

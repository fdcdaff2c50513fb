#!/usr/bin/env bash
# metrics.auth: kubernetes against the real kube-apiserver (control-plane.sh), real
# kubectl, real helm and Debian's Prometheus:
#
#   chart     `helm template` renders what the chart promises: with metrics.auth
#             kubernetes the ServiceMonitor scrapes the https port with Prometheus'
#             token and a tlsConfig, ClusterRoles let topogate create TokenReviews and
#             SubjectAccessReviews and a metrics-reader role grants get on /metrics;
#             tokenfile, insecureSkipVerify and healthPort-false variants; the default
#             install unchanged;
#             the schema refuses bad values; the apiserver accepts the objects
#             (kubectl apply --dry-run=server)
#   no-rbac   topogate's ServiceAccount without the chart's RBAC: a scrape is 503
#             naming the missing permission (and is not cached)
#   scrape    with the chart's RBAC objects applied (rendered by helm): the token of
#             the ServiceAccount bound to metrics-reader gets 200 with metrics, another
#             ServiceAccount's token 403, no token 401, a garbage token 401; kubectl
#             auth can-i agrees; health stays open; the plain port serves no /metrics
#   audiences a second topogate with metrics.audiences [topogate-metrics]: the allowed
#             account's token for that audience 200, its default token 401, a refused
#             account's audience token still 403; the first (no audiences) refuses the
#             audience-bound token (401)
#   prometheus  Prometheus scrapes with each token: up for the allowed one, down with a
#             403 for the other
#   logs      no token in topogate's log
#
# topogate runs on the host with the `metrics` block the chart renders, pointed at the
# apiserver with store.apiServer/tokenFile/caFile (the token of its own ServiceAccount).
# Env: TOPOGATE_BINARY (default build/{dev,debug,release}/cli/topogate), E2E_KEEP=1.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
chart="$repo/helm/topogate"

. "$here/lib.sh"
e2e_init metrics-auth
tg_pid= prom_pid=
stop_processes() {
  [[ -n $prom_pid ]] && { kill "$prom_pid" 2>/dev/null; wait "$prom_pid" 2>/dev/null; } || true
  [[ -n $tg_pid ]] && { kill "$tg_pid" 2>/dev/null; wait "$tg_pid" 2>/dev/null; } || true
}
e2e_on_exit stop_processes
check() { # DESCRIPTION COMMAND...
  local what=$1; shift
  if "$@"; then pass "$what"; else fail "$what"; fi
}
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

ns=metrics-e2e release=topogate
render() { "$helm" template "$release" "$chart" --namespace "$ns" --kube-version 1.36.3 "$@"; }

# ---------------------------------------------------------------- chart
section chart
render --set metrics.auth=kubernetes --set serviceMonitor.enabled=true \
  --set "metrics.readers[0].name=prometheus" --set "metrics.readers[0].namespace=$ns" >"$work/kube.yaml"
render --set serviceMonitor.enabled=true >"$work/default.yaml"
render --set metrics.auth=tokenfile --set metrics.tokenSecret.name=scrape-token --set serviceMonitor.enabled=true \
  --set metrics.healthPort=true >"$work/tokenfile.yaml"
render --set metrics.auth=kubernetes --set serviceMonitor.enabled=true \
  --set serviceMonitor.tlsConfig.insecureSkipVerify=true --set serviceMonitor.authorizationSecret.name=prom-token \
  >"$work/insecure.yaml"
render --set serviceMonitor.enabled=true --set metrics.healthPort=false >"$work/plainoff.yaml"
if python3 - "$work" "$ns" <<'EOF'
import sys, yaml
work, ns = sys.argv[1:3]
failures = []
def check(cond, msg):
    if not cond:
        failures.append(msg)
def load(name):
    docs = [d for d in yaml.safe_load_all(open(f"{work}/{name}.yaml")) if d]
    return {(d["kind"], d["metadata"]["name"]): d for d in docs}
def config(objs):
    cm = objs[("ConfigMap", "topogate-config")]
    return yaml.safe_load(cm["data"]["config.yaml"])
def endpoint(objs):
    return objs[("ServiceMonitor", "topogate")]["spec"]["endpoints"][0]

k = load("kube")
ep = endpoint(k)
check(ep["port"] == "https" and ep["scheme"] == "https" and ep["path"] == "/metrics", f"kube: endpoint {ep}")
check(ep.get("bearerTokenFile") == "/var/run/secrets/kubernetes.io/serviceaccount/token", "kube: bearerTokenFile")
check(ep.get("tlsConfig") == {"ca": {"secret": {"name": "topogate-serving", "key": "ca.crt"}},
                              "serverName": f"topogate.{ns}.svc"}, f"kube: tlsConfig {ep.get('tlsConfig')}")
role = k.get(("ClusterRole", "topogate-metrics-auth"), {})
check({(r["apiGroups"][0], r["resources"][0], tuple(r["verbs"])) for r in role.get("rules", [])} ==
      {("authentication.k8s.io", "tokenreviews", ("create",)),
       ("authorization.k8s.io", "subjectaccessreviews", ("create",))}, f"kube: metrics-auth rules {role}")
binding = k.get(("ClusterRoleBinding", "topogate-metrics-auth"), {})
check(binding.get("subjects") == [{"kind": "ServiceAccount", "name": "topogate", "namespace": ns}],
      "kube: metrics-auth binding subject")
reader = k.get(("ClusterRole", "topogate-metrics-reader"), {})
check(reader.get("rules") == [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}], f"kube: reader {reader}")
rb = k.get(("ClusterRoleBinding", "topogate-metrics-reader"), {})
check(rb.get("subjects") == [{"kind": "ServiceAccount", "name": "prometheus", "namespace": ns}],
      "kube: metrics.readers binding")
check(config(k).get("metrics") == {"auth": "kubernetes", "reviewTimeout": "5s", "cacheTTL": "1m"},
      f"kube: config metrics {config(k).get('metrics')}")
pod = k[("Deployment", "topogate")]["spec"]["template"]["spec"]
check(pod.get("automountServiceAccountToken") is True, "kube: the ServiceAccount token is mounted")

d = load("default")
ep = endpoint(d)
check(ep["port"] == "health" and ep["scheme"] == "http" and "tlsConfig" not in ep, f"default: endpoint {ep}")
check(not any(n.endswith("metrics-auth") or n.endswith("metrics-reader") for _, n in d), "default: no metrics RBAC")
check("metrics" not in config(d), "default: no metrics block in the config")

t = load("tokenfile")
ep = endpoint(t)
check(ep["port"] == "https" and ep.get("authorization") ==
      {"type": "Bearer", "credentials": {"name": "scrape-token", "key": "token"}}, f"tokenfile: endpoint {ep}")
check(config(t).get("metrics") == {"auth": "tokenfile", "tokenFile": "/var/run/topogate/metrics/token",
                                   "healthPort": True}, f"tokenfile: config {config(t).get('metrics')}")
tpod = t[("Deployment", "topogate")]["spec"]["template"]["spec"]
check({"name": "metrics-token", "secret": {"secretName": "scrape-token", "defaultMode": 0o440}} in tpod["volumes"],
      "tokenfile: the Secret volume")
check({"name": "metrics-token", "mountPath": "/var/run/topogate/metrics", "readOnly": True}
      in tpod["containers"][0]["volumeMounts"], "tokenfile: the mount")
check(not any(n.endswith("metrics-auth") for _, n in t), "tokenfile: no review RBAC")

i = load("insecure")
ep = endpoint(i)
check(ep.get("tlsConfig") == {"insecureSkipVerify": True}, f"insecure: tlsConfig {ep.get('tlsConfig')}")
check(ep.get("authorization", {}).get("credentials") == {"name": "prom-token", "key": "token"} and
      "bearerTokenFile" not in ep, "insecure: authorization from the Secret")

p = load("plainoff")
ep = endpoint(p)
check(ep["port"] == "https" and "authorization" not in ep and "bearerTokenFile" not in ep and "ca" in ep["tlsConfig"],
      f"healthPort false without auth: https without a token {ep}")
check(config(p).get("metrics") == {"healthPort": False}, f"plainoff: config {config(p).get('metrics')}")
check(not any(n.endswith("metrics-auth") for _, n in p), "plainoff: no review RBAC")
for f in failures:
    print("  " + f)
sys.exit(1 if failures else 0)
EOF
then pass "rendered ServiceMonitor, RBAC, config and mounts"; else fail "rendered ServiceMonitor, RBAC, config and mounts"; fi
for bad in "metrics.auth=basic" "metrics.auth=tokenfile" "metrics.cacheTTL=60" "metrics.unknown=1" \
  "serviceMonitor.tlsConfig.insecureSkipVerify=yes"; do
  if render --set "$bad" >/dev/null 2>&1; then fail "schema refuses $bad"; else pass "schema refuses $bad"; fi
done

# ---------------------------------------------------------------- control plane
section setup
"$here/control-plane.sh" start >/dev/null
eval "$("$here/control-plane.sh" env)"
k() { "$KUBECTL" "$@"; }
k apply --server-side -f "$here/fixtures/cert-manager-crds.yaml" -f "$here/fixtures/servicemonitor-crd.yaml" >/dev/null
e2e_test_crds
k create namespace "$ns" >/dev/null
for f in kube tokenfile insecure plainoff; do
  if k apply --dry-run=server -f "$work/$f.yaml" >"$work/$f.apply" 2>&1; then
    pass "kubectl apply --dry-run=server ($f render)"
  else
    fail "kubectl apply --dry-run=server ($f render)"; cat "$work/$f.apply"
  fi
done
for sa in topogate prometheus intruder; do k -n "$ns" create serviceaccount "$sa" >/dev/null; done
k -n "$ns" create token topogate --duration 1h >"$work/topogate.token"
k -n "$ns" create token prometheus --duration 1h >"$work/prometheus.token"
k -n "$ns" create token intruder --duration 1h >"$work/intruder.token"
chmod 600 "$work"/*.token
pass "ServiceAccounts topogate, prometheus, intruder and their tokens"

export CERTS_QUIET=1
"$repo/certs/make-ca.sh" --out "$work/pki" --cn "metrics-auth e2e CA"
"$repo/certs/make-server-cert.sh" --ca-cert "$work/pki/ca.crt" --ca-key "$work/pki/ca.key" --out "$work/pki" \
  --ip 127.0.0.1 --dns localhost --days 1
port=$(free_port) health=$(free_port)
# The chart's metrics block, as rendered, plus where the API is.
python3 - "$work/kube.yaml" "$work/metrics.json" <<'EOF'
import json, sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
cm = next(d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"] == "topogate-config")
json.dump(yaml.safe_load(cm["data"]["config.yaml"])["metrics"], open(sys.argv[2], "w"))
EOF
cat >"$work/topogate.yaml" <<EOF
listen: {address: 127.0.0.1, port: $port, healthPort: $health}
tls: {certFile: $work/pki/server.crt, keyFile: $work/pki/server.key}
logging: {level: debug}
store: {apiServer: '$TOPOGATE_CP_URL', tokenFile: $work/topogate.token, caFile: $TOPOGATE_CP_CA}
metrics: $(cat "$work/metrics.json")
EOF
"$topogate" serve --config "$work/topogate.yaml" >"$work/topogate.log" 2>&1 &
tg_pid=$!
if poll 30 curl -fsS -o /dev/null --noproxy '*' "http://127.0.0.1:$health/readyz" 2>/dev/null; then
  pass "topogate serving with metrics.auth kubernetes against $TOPOGATE_CP_URL"
else
  fail "topogate did not start"; tail -n 20 "$work/topogate.log"; exit 1
fi

# scrape [TOKEN_FILE|none|garbage]: prints "STATUS" and leaves the body in $work/body.
scrape() {
  local auth=()
  case $1 in
    none) ;;
    garbage) auth=(-H "Authorization: Bearer not-a-token-$(openssl rand -hex 8)") ;;
    *) auth=(-H "Authorization: Bearer $(cat "$1")") ;;
  esac
  curl -sS --noproxy '*' --max-time 20 --cacert "$work/pki/ca.crt" -o "$work/body" -w '%{http_code}' \
    "${auth[@]}" "https://127.0.0.1:$port/metrics" || true
}
status_is() { # WANT TOKEN
  [[ $(scrape "$2") == "$1" ]]
}

# ---------------------------------------------------------------- no-rbac
section no-rbac
code=$(scrape "$work/prometheus.token")
if [[ $code == 503 ]] && grep -q "TokenReview: HTTP 403" "$work/body" &&
  grep -q "create on tokenreviews" "$work/body"; then
  pass "without RBAC for topogate: 503 naming tokenreviews"
else
  fail "without RBAC for topogate: got $code $(cat "$work/body")"
fi

# ---------------------------------------------------------------- scrape
section scrape
# The chart's own RBAC objects: topogate's reviews, the reader role bound to prometheus.
python3 - "$work/kube.yaml" "$work/rbac.yaml" <<'EOF'
import sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
keep = [d for d in docs if d["kind"] in ("ClusterRole", "ClusterRoleBinding") and "metrics" in d["metadata"]["name"]]
yaml.safe_dump_all(keep, open(sys.argv[2], "w"))
EOF
k apply -f "$work/rbac.yaml" >/dev/null
pass "applied the chart's metrics RBAC ($(grep -c '^kind:' "$work/rbac.yaml") objects)"
can_i() { # SERVICEACCOUNT ANSWER
  [[ $(k auth can-i get /metrics --as "system:serviceaccount:$ns:$1" 2>/dev/null || true) == "$2" ]]
}
check "kubectl auth can-i: prometheus may get /metrics" poll 30 can_i prometheus yes
check "kubectl auth can-i: intruder may not" can_i intruder no
# The 503 before was not cached: once RBAC is in, the same token is reviewed again.
if poll 30 status_is 200 "$work/prometheus.token" && grep -q '^topogate_http_requests_total' "$work/body"; then
  pass "allowed ServiceAccount token: 200 with metrics"
else
  fail "allowed ServiceAccount token: $(scrape "$work/prometheus.token") $(head -c 300 "$work/body")"
fi
code=$(scrape "$work/intruder.token")
if [[ $code == 403 ]] && grep -q "system:serviceaccount:$ns:intruder" "$work/body"; then
  pass "refused ServiceAccount token: 403 naming the user"
else
  fail "refused ServiceAccount token: got $code $(cat "$work/body")"
fi
code=$(scrape none)
[[ $code == 401 ]] && pass "no token: 401" || fail "no token: got $code"
code=$(scrape garbage)
[[ $code == 401 ]] && pass "garbage token: 401" || fail "garbage token: got $code $(cat "$work/body")"
code=$(scrape "$work/topogate.token")
[[ $code == 403 ]] && pass "topogate's own token (no reader role): 403" || fail "topogate's own token: got $code"
for probe in healthz livez readyz; do
  code=$(curl -sS --noproxy '*' --cacert "$work/pki/ca.crt" -o /dev/null -w '%{http_code}' "https://127.0.0.1:$port/$probe")
  [[ $code == 200 ]] && pass "/$probe open without a token" || fail "/$probe: $code"
done
code=$(curl -sS --noproxy '*' -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $(cat "$work/prometheus.token")" \
  "http://127.0.0.1:$health/metrics")
[[ $code == 404 ]] && pass "the plain health port serves no /metrics" || fail "plain port /metrics: $code"
scrape "$work/prometheus.token" >/dev/null
value() { awk -v s="$1" '$1 == s {print $2}' "$work/body"; }
if [[ $(value 'topogate_metrics_auth_reviews_total{result="forbidden"}') -ge 2 &&
  $(value 'topogate_metrics_auth_reviews_total{result="unauthenticated"}') -ge 1 &&
  $(value 'topogate_metrics_auth_total{result="forbidden"}') -ge 2 ]]; then
  pass "topogate_metrics_auth_total and _reviews_total count the outcomes"
else
  fail "counters: $(grep '^topogate_metrics_auth' "$work/body" | tr '\n' ' ')"
fi

# ---------------------------------------------------------------- audiences
section audiences
# A second topogate that accepts only tokens issued for the audience topogate-metrics.
k -n "$ns" create token prometheus --duration 1h --audience topogate-metrics >"$work/prometheus-aud.token"
k -n "$ns" create token intruder --duration 1h --audience topogate-metrics >"$work/intruder-aud.token"
chmod 600 "$work"/*.token
aport=$(free_port) ahealth=$(free_port)
python3 - "$work/metrics.json" "$work/metrics-aud.json" <<'EOF'
import json, sys
m = json.load(open(sys.argv[1]))
m["audiences"] = ["topogate-metrics"]
json.dump(m, open(sys.argv[2], "w"))
EOF
sed -e "s/port: $port, healthPort: $health/port: $aport, healthPort: $ahealth/" \
  -e "s|^metrics: .*|metrics: $(cat "$work/metrics-aud.json")|" "$work/topogate.yaml" >"$work/topogate-aud.yaml"
"$topogate" serve --config "$work/topogate-aud.yaml" >"$work/topogate-aud.log" 2>&1 &
tg_aud_pid=$!
stop_aud() { [[ -n ${tg_aud_pid:-} ]] && { kill "$tg_aud_pid" 2>/dev/null; wait "$tg_aud_pid" 2>/dev/null; } || true; }
e2e_on_exit stop_aud
scrape_aud() { # TOKEN_FILE: prints the status, the body in $work/body
  curl -sS --noproxy '*' --max-time 20 --cacert "$work/pki/ca.crt" -o "$work/body" -w '%{http_code}' \
    -H "Authorization: Bearer $(cat "$1")" "https://127.0.0.1:$aport/metrics" || true
}
if poll 30 curl -fsS -o /dev/null --noproxy '*' "http://127.0.0.1:$ahealth/readyz" 2>/dev/null; then
  code=$(scrape_aud "$work/prometheus-aud.token")
  if [[ $code == 200 ]] && grep -q '^topogate_http_requests_total' "$work/body"; then
    pass "audiences: the allowed account's token for topogate-metrics: 200"
  else
    fail "audiences: token for topogate-metrics: $code $(head -c 300 "$work/body")"
  fi
  code=$(scrape_aud "$work/prometheus.token")
  if [[ $code == 401 ]] && grep -q 'invalid for the target audiences' "$work/body"; then
    pass "audiences: the same account's default token: 401 ($(grep -o 'token audiences[^]]*]' "$work/body" | head -1))"
  else
    fail "audiences: default token: $code $(head -c 300 "$work/body")"
  fi
  code=$(scrape_aud "$work/intruder-aud.token")
  [[ $code == 403 ]] && pass "audiences: a refused account's token for the audience: still 403" ||
    fail "audiences: intruder's audience token: $code $(head -c 300 "$work/body")"
  # The first topogate (no audiences) refuses the audience-bound token: it was not issued for the API.
  code=$(scrape "$work/prometheus-aud.token")
  [[ $code == 401 ]] && pass "no audiences configured: a token for topogate-metrics only is 401" ||
    fail "no audiences: the audience-bound token got $code"
else
  fail "topogate with metrics.audiences did not start"; tail -n 20 "$work/topogate-aud.log"
fi
stop_aud
tg_aud_pid=
for f in prometheus-aud intruder-aud; do
  grep -qF "$(cat "$work/$f.token")" "$work/topogate-aud.log" && fail "a token is in the second topogate's log"
done

# ---------------------------------------------------------------- prometheus
section prometheus
if command -v prometheus >/dev/null; then
  pport=$(free_port)
  cat >"$work/prometheus.yml" <<EOF
global: {scrape_interval: 1s, scrape_timeout: 1s}
scrape_configs:
$(for job in prometheus intruder; do cat <<JOB
  - job_name: $job
    scheme: https
    authorization: {type: Bearer, credentials_file: $work/$job.token}
    tls_config: {ca_file: $work/pki/ca.crt, server_name: localhost}
    static_configs: [{targets: ['127.0.0.1:$port']}]
JOB
done)
EOF
  prometheus --config.file="$work/prometheus.yml" --storage.tsdb.path="$work/prom-data" \
    --web.listen-address="127.0.0.1:$pport" >"$work/prometheus.log" 2>&1 &
  prom_pid=$!
  target() { # JOB FIELD: the target's health or lastError
    curl -fsS --noproxy '*' "http://127.0.0.1:$pport/api/v1/targets" 2>/dev/null | python3 -c '
import json, sys
job, field = sys.argv[1:3]
try:
    targets = json.load(sys.stdin)["data"]["activeTargets"]
except ValueError:
    targets = []  # Prometheus not answering yet
for t in targets:
    if t["labels"]["job"] == job:
        print(t[field])' "$1" "$2" || true
  }
  target_is() { [[ $(target "$1" health) == "$2" ]]; }
  check "Prometheus with the allowed token: target up" poll 60 target_is prometheus up
  if poll 60 target_is intruder down && target intruder lastError | grep -q 403; then
    pass "Prometheus with the refused token: target down, $(target intruder lastError)"
  else
    fail "Prometheus with the refused token: $(target intruder health) $(target intruder lastError)"
  fi
else
  fail "prometheus (Debian package) is not installed"
fi

# ---------------------------------------------------------------- logs
section logs
kill -TERM "$tg_pid"; wait "$tg_pid" || true; tg_pid=
leaked=0
for f in topogate prometheus intruder; do
  grep -qF "$(cat "$work/$f.token")" "$work/topogate.log" && leaked=1
done
((leaked == 0)) && pass "no token in topogate's log" || fail "a token is in topogate's log"
# Sanitizer builds (TOPOGATE_BINARY from the asan-ubsan or tsan preset) report on stderr.
if grep -qE 'WARNING: ThreadSanitizer|ERROR: (Address|Leak)Sanitizer|runtime error:' "$work/topogate.log"; then
  fail "sanitizer report in topogate's log"; grep -m1 -A20 -E 'Sanitizer|runtime error:' "$work/topogate.log"
else
  pass "no sanitizer report in topogate's log"
fi
grep -q '"msg":"metrics scrape refused: not authorized".*"user":"system:serviceaccount:'"$ns"':intruder"' \
  "$work/topogate.log" && pass "the refusal is logged with the user" || fail "no refusal log line naming the user"

echo "metrics-auth: $((checks - fails))/$checks checks passed in $SECONDS s"
((fails == 0))

#!/usr/bin/env bash
# Kubeconfigs as clusters issue them, against a real kube-apiserver (control-plane.sh)
# with the Kueue CRDs (sigs.k8s.io/kueue v0.17.0, from the Go module proxy), the chart's
# CRDs and the runbook's two-zone objects (test/fixtures/diagnose/two-zones, created with
# kubectl). Every credential below must give `topogate diagnose` the same report as the
# admin token, or be refused with a clear message (exit 2):
#
#   client-cert   client-certificate/client-key files (relative to the kubeconfig) and
#                 inline -data, signed by the cluster's CA for a user RBAC lets list what
#                 diagnose reads; a certificate RBAC refuses (403); a key of another
#                 certificate; tls-server-name right and wrong; insecure-skip-tls-verify
#   exec          ExecCredential plugins (scripts): a token (found on PATH, with args and
#                 env, run once per run), a client certificate, an already expired
#                 credential (run again), a credential the API answers 401 (run again),
#                 v1beta1 with provideClusterInfo (KUBERNETES_EXEC_INFO checked by the
#                 plugin), a failing, a garbage-printing and a missing plugin
#   kubectl       `cmake --install` puts bin/topogate and the kubectl-topogate link in a
#                 prefix; the real kubectl runs `kubectl topogate diagnose chain|pending`
#                 with --context, -n, the context's namespace, $KUBECONFIG (a merged list)
#                 and ~/.kube/config
#   secrets       no token, key or certificate data in any output of any run above
#
# Usage: kubeconfig.sh   Env: TOPOGATE_BINARY, E2E_KEEP=1, KUEUE_VERSION (v0.17.0)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
fx="$repo/test/fixtures/diagnose"
t_start=$SECONDS
kueue_version=${KUEUE_VERSION:-v0.17.0}
export KUEUE_VERSION=$kueue_version

. "$here/lib.sh"
e2e_init kubeconfig

section setup
crds=$(e2e_kueue_crds)
e2e_cp_start
for c in topologies resourceflavors clusterqueues localqueues workloads; do
  k apply --server-side -f "$crds/kueue.x-k8s.io_$c.yaml" >/dev/null
done
e2e_test_crds
# The objects without their status (no controller runs; the Workload is Pending).
python3 - "$fx/two-zones" "$fx/zone-pair.json" <<'PY' | k create -f - >/dev/null
import glob, json, os, sys
items = []
for f in sys.argv[1:]:
    for p in sorted(glob.glob(os.path.join(f, "*.json"))) if os.path.isdir(f) else [f]:
        o = json.load(open(p))
        for i in (o["items"] if o.get("kind", "").endswith("List") else [o]):
            i.pop("status", None)
            for m in ("resourceVersion", "uid", "creationTimestamp"):
                i["metadata"].pop(m, None)
            items.append(i)
print(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
PY
pass "Kueue $kueue_version CRDs and the two-zone objects created"

# Who may read what diagnose lists: the group of the reader's client certificate.
k create clusterrole topogate-diagnose-reader --verb=list \
  --resource=nodes,pods,topologies.kueue.x-k8s.io,resourceflavors.kueue.x-k8s.io,clusterqueues.kueue.x-k8s.io,localqueues.kueue.x-k8s.io,workloads.kueue.x-k8s.io,topologysources.worker.gpustack.ai,modeldeployments.worker.gpustack.ai >/dev/null
k create clusterrolebinding topogate-diagnose-readers --clusterrole topogate-diagnose-reader \
  --group topogate-readers >/dev/null
kc=$work/kc
mkdir -p "$kc/plugins" "$work/bin" "$work/counts"
export CERTS_QUIET=1
"$repo/certs/make-client-cert.sh" --ca-cert "$TOPOGATE_CP_DIR/pki/ca.crt" --ca-key "$TOPOGATE_CP_DIR/pki/ca.key" \
  --out "$kc" --name reader --cn topogate-reader --org topogate-readers --days 2
"$repo/certs/make-client-cert.sh" --ca-cert "$TOPOGATE_CP_DIR/pki/ca.crt" --ca-key "$TOPOGATE_CP_DIR/pki/ca.key" \
  --out "$kc" --name nobody --cn topogate-nobody --days 2
cp "$TOPOGATE_CP_DIR/pki/ca.crt" "$kc/ca.crt"
cp "$TOPOGATE_CP_ADMIN_TOKEN_FILE" "$kc/admin.token"
chmod 600 "$kc/admin.token"
admin_token=$(cat "$TOPOGATE_CP_ADMIN_TOKEN_FILE")
user_token=$(cat "$TOPOGATE_CP_USER_TOKEN_FILE")

# The plugins: shell scripts that record each run in $work/counts/NAME, talk on stderr
# and print an ExecCredential (or fail to).
# plugin PATH NAME: the script's first lines; its body follows on stdin.
plugin() {
  { printf '#!/bin/sh\necho x >> %s\necho "%s plugin: issuing a credential" >&2\n' "$work/counts/$2" "$2"; cat; } >"$1"
  chmod 700 "$1"
}
# Found on PATH by its name; checks the args and env the kubeconfig gives it.
plugin "$work/bin/topogate-e2e-token" token <<'SH'
[ "$1 $2" = '--mode token' ] && [ "$TOKEN_KIND" = admin ] || { echo 'token plugin: bad args or env' >&2; exit 9; }
printf '{"kind":"ExecCredential","apiVersion":"client.authentication.k8s.io/v1","status":{"token":"%s"}}' "$(cat "$TOKEN_FILE")"
SH
python3 - "$kc" <<'PY'
import json, sys
kc = sys.argv[1]
st = {"clientCertificateData": open(f"{kc}/reader.crt").read(), "clientKeyData": open(f"{kc}/reader.key").read()}
open(f"{kc}/reader-cred.json", "w").write(json.dumps({"kind": "ExecCredential",
    "apiVersion": "client.authentication.k8s.io/v1", "status": st}))
PY
chmod 600 "$kc/reader-cred.json"
plugin "$kc/plugins/cert" cert <<SH
cat '$kc/reader-cred.json'
SH
# The first credential has already expired, the next ones are valid until 2100.
plugin "$kc/plugins/expired" expired <<SH
if [ \$(wc -l < '$work/counts/expired') = 1 ]; then exp=2000-01-01T00:00:00Z; else exp=2100-01-01T00:00:00Z; fi
printf '{"kind":"ExecCredential","apiVersion":"client.authentication.k8s.io/v1","status":{"token":"%s","expirationTimestamp":"%s"}}' "\$(cat '$kc/admin.token')" \$exp
SH
# The first token is one the API does not know (401), the next ones are valid.
plugin "$kc/plugins/stale" stale <<SH
if [ \$(wc -l < '$work/counts/stale') = 1 ]; then t=not-a-valid-token; else t=\$(cat '$kc/admin.token'); fi
printf '{"kind":"ExecCredential","apiVersion":"client.authentication.k8s.io/v1","status":{"token":"%s"}}' \$t
SH
# v1beta1 with provideClusterInfo: KUBERNETES_EXEC_INFO must describe the cluster.
plugin "$kc/plugins/info" info <<SH
python3 - '$TOPOGATE_CP_URL' <<'PY' || { echo 'info plugin: unexpected KUBERNETES_EXEC_INFO' >&2; exit 7; }
import json, os, sys
i = json.loads(os.environ["KUBERNETES_EXEC_INFO"])
c = i["spec"]["cluster"]
ok = (i["apiVersion"] == "client.authentication.k8s.io/v1beta1" and i["kind"] == "ExecCredential"
      and i["spec"]["interactive"] is False and c["server"] == sys.argv[1]
      and c["certificate-authority-data"] != "" and c["config"] == {"audience": "e2e"})
sys.exit(0 if ok else 7)
PY
printf '{"kind":"ExecCredential","apiVersion":"client.authentication.k8s.io/v1beta1","status":{"token":"%s"}}' "\$(cat '$kc/admin.token')"
SH
plugin "$kc/plugins/failing" failing <<SH
echo 'failing plugin: no session, run the login first' >&2
cat '$kc/admin.token'
exit 4
SH
plugin "$kc/plugins/garbage" garbage <<SH
echo "token: \$(cat '$kc/admin.token')"
SH
pass "client certificates (reader, nobody) and exec plugins made"

# One kubeconfig with a context per case; relative paths are relative to its folder.
python3 - "$kc" "$TOPOGATE_CP_URL" <<'PY'
import base64, sys, yaml
kc, url = sys.argv[1:]
b64 = lambda p: base64.b64encode(open(f"{kc}/{p}", "rb").read()).decode()
def cluster(name, **extra):
    return {"name": name, "cluster": {"server": url, "certificate-authority": "ca.crt", **extra}}
def exec_user(name, command, api="client.authentication.k8s.io/v1", **extra):
    e = {"command": command, "apiVersion": api, **extra}
    if api.endswith("/v1") and "interactiveMode" not in e:
        e["interactiveMode"] = "Never"
    return {"name": name, "user": {"exec": e}}
clusters = [cluster("e2e"), cluster("e2e-sni", **{"tls-server-name": "kubernetes"}),
            cluster("e2e-badsni", **{"tls-server-name": "wrong.example"}),
            cluster("e2e-insecure", **{"insecure-skip-tls-verify": True}),
            cluster("e2e-ext", extensions=[{"name": "client.authentication.k8s.io/exec", "extension": {"audience": "e2e"}}])]
users = [
    {"name": "admin", "user": {"tokenFile": "admin.token"}},
    {"name": "reader-files", "user": {"client-certificate": "reader.crt", "client-key": "reader.key"}},
    {"name": "reader-inline", "user": {"client-certificate-data": b64("reader.crt"), "client-key-data": b64("reader.key")}},
    {"name": "nobody", "user": {"client-certificate": "nobody.crt", "client-key": "nobody.key"}},
    {"name": "mismatch", "user": {"client-certificate": "reader.crt", "client-key-data": b64("nobody.key")}},
    exec_user("exec-token", "topogate-e2e-token", args=["--mode", "token"],
              env=[{"name": "TOKEN_FILE", "value": f"{kc}/admin.token"}, {"name": "TOKEN_KIND", "value": "admin"}]),
    exec_user("exec-cert", "./plugins/cert"),
    exec_user("exec-expired", "./plugins/expired"),
    exec_user("exec-stale", "./plugins/stale"),
    exec_user("exec-info", "./plugins/info", api="client.authentication.k8s.io/v1beta1", provideClusterInfo=True),
    exec_user("exec-failing", "./plugins/failing"),
    exec_user("exec-garbage", "./plugins/garbage"),
    exec_user("exec-missing", "topogate-e2e-absent-plugin", installHint="install topogate-e2e-absent-plugin from the e2e kit"),
    exec_user("exec-always", "./plugins/cert", interactiveMode="Always"),
]
ctx = lambda name, cl, user, **extra: {"name": name, "context": {"cluster": cl, "user": user, **extra}}
contexts = [ctx("admin", "e2e", "admin"), ctx(f"sni-ok", "e2e-sni", "admin"), ctx("sni-wrong", "e2e-badsni", "admin"),
            ctx("insecure", "e2e-insecure", "admin"), ctx("ns-default", "e2e", "reader-files", namespace="default"),
            ctx("ns-other", "e2e", "reader-files", namespace="other")]
contexts += [ctx(u["name"], "e2e-ext" if u["name"] == "exec-info" else "e2e", u["name"]) for u in users[1:]]
cfg = {"apiVersion": "v1", "kind": "Config", "clusters": clusters, "users": users, "contexts": contexts,
       "current-context": "admin"}
open(f"{kc}/config", "w").write(yaml.safe_dump(cfg, sort_keys=False))
PY
chmod 600 "$kc/config"

export PATH="$work/bin:$PATH"
log=$work/all-output.log
: >"$log"
# tg NAME ARGS...: topogate diagnose with the kubeconfig; stdout in $work/NAME.out, stderr in
# $work/NAME.err, both appended to the log the secrets are looked for in; sets rc.
tg() {
  local name=$1; shift
  rc=0
  env -u KUBERNETES_SERVICE_HOST -u KUBECONFIG "$topogate" diagnose "$@" >"$work/$name.out" 2>"$work/$name.err" || rc=$?
  cat "$work/$name.out" "$work/$name.err" >>"$log"
}
runs() { [[ -f $work/counts/$1 ]] && wc -l <"$work/counts/$1" || echo 0; }
same() { cmp -s "$work/$1.out" "$work/$2.out"; }
err() { head -c 400 "$work/$1.err"; }

tg base-pending pending default/zone-trio --kubeconfig "$kc/config" --context admin --output json
[[ $rc == 1 ]] && python3 -c 'import json, sys; json.load(open(sys.argv[1]))' "$work/base-pending.out" &&
  pass "admin token: pending default/zone-trio reports Pending (exit 1)" || fail "admin baseline: exit $rc: $(err base-pending)"
base_rc=0
tg base chain --kubeconfig "$kc/config" --context admin --output json; base_rc=$rc

section client-cert
for c in reader-files reader-inline; do
  tg "$c" chain --kubeconfig "$kc/config" --context "$c" --output json
  [[ $rc == "$base_rc" ]] && same "$c" base && pass "$c: the admin's report (exit $rc)" || fail "$c: exit $rc: $(err "$c")"
done
tg nobody chain --kubeconfig "$kc/config" --context nobody
[[ $rc == 2 ]] && grep -q 'HTTP 403' "$work/nobody.err" && grep -q 'topogate-nobody' "$work/nobody.err" &&
  pass "a certificate RBAC does not allow: exit 2, 403 for topogate-nobody" || fail "nobody: exit $rc: $(err nobody)"
tg mismatch chain --kubeconfig "$kc/config" --context mismatch
[[ $rc == 2 ]] && grep -q 'user "mismatch": the client key does not match the client certificate' "$work/mismatch.err" &&
  pass "a key of another certificate: exit 2 before any request" || fail "mismatch: exit $rc: $(err mismatch)"
tg sni-ok chain --kubeconfig "$kc/config" --context sni-ok --output json
[[ $rc == "$base_rc" ]] && same sni-ok base && pass "tls-server-name kubernetes (a name of the API's certificate)" ||
  fail "sni-ok: exit $rc: $(err sni-ok)"
tg sni-wrong chain --kubeconfig "$kc/config" --context sni-wrong
[[ $rc == 2 ]] && grep -q 'TLS handshake' "$work/sni-wrong.err" && pass "tls-server-name wrong.example: the handshake fails (exit 2)" ||
  fail "sni-wrong: exit $rc: $(err sni-wrong)"
tg insecure chain --kubeconfig "$kc/config" --context insecure
[[ $rc == 2 ]] && grep -q 'insecure-skip-tls-verify is not supported' "$work/insecure.err" &&
  pass "insecure-skip-tls-verify refused (exit 2)" || fail "insecure: exit $rc: $(err insecure)"

section exec
tg exec-token chain --kubeconfig "$kc/config" --context exec-token --output json
[[ $rc == "$base_rc" ]] && same exec-token base && [[ $(runs token) == 1 ]] &&
  grep -q 'token plugin: issuing a credential' "$work/exec-token.err" &&
  pass "token plugin on PATH (args, env): the admin's report, run once for every list, its stderr shown" ||
  fail "exec-token: exit $rc, runs $(runs token): $(err exec-token)"
tg exec-cert chain --kubeconfig "$kc/config" --context exec-cert --output json
[[ $rc == "$base_rc" ]] && same exec-cert base && [[ $(runs cert) == 1 ]] &&
  pass "client certificate plugin: the admin's report" || fail "exec-cert: exit $rc, runs $(runs cert): $(err exec-cert)"
tg exec-expired chain --kubeconfig "$kc/config" --context exec-expired --output json
[[ $rc == "$base_rc" ]] && same exec-expired base && [[ $(runs expired) == 2 ]] &&
  pass "an expired credential: the plugin ran again once (2 runs)" ||
  fail "exec-expired: exit $rc, runs $(runs expired): $(err exec-expired)"
tg exec-stale chain --kubeconfig "$kc/config" --context exec-stale --output json
[[ $rc == "$base_rc" ]] && same exec-stale base && [[ $(runs stale) == 2 ]] &&
  pass "a credential answered 401: the plugin ran again and the call was repeated (2 runs)" ||
  fail "exec-stale: exit $rc, runs $(runs stale): $(err exec-stale)"
tg exec-info chain --kubeconfig "$kc/config" --context exec-info --output json
[[ $rc == "$base_rc" ]] && same exec-info base &&
  pass "v1beta1 with provideClusterInfo: KUBERNETES_EXEC_INFO carries the cluster and interactive false" ||
  fail "exec-info: exit $rc: $(err exec-info)"
tg exec-failing chain --kubeconfig "$kc/config" --context exec-failing
[[ $rc == 2 ]] && grep -q 'exec plugin "./plugins/failing" exited with status 4' "$work/exec-failing.err" &&
  grep -q 'failing plugin: no session' "$work/exec-failing.err" &&
  pass "a failing plugin: exit 2 naming it, its stderr shown" || fail "exec-failing: exit $rc: $(err exec-failing)"
tg exec-garbage chain --kubeconfig "$kc/config" --context exec-garbage
[[ $rc == 2 ]] && grep -q 'exec plugin "./plugins/garbage" printed no ExecCredential' "$work/exec-garbage.err" &&
  pass "a plugin printing garbage: exit 2" || fail "exec-garbage: exit $rc: $(err exec-garbage)"
tg exec-missing chain --kubeconfig "$kc/config" --context exec-missing
[[ $rc == 2 ]] && grep -q 'not found' "$work/exec-missing.err" &&
  grep -q 'install topogate-e2e-absent-plugin from the e2e kit' "$work/exec-missing.err" &&
  pass "a missing plugin: exit 2 with its installHint" || fail "exec-missing: exit $rc: $(err exec-missing)"
rc=0
env -u KUBERNETES_SERVICE_HOST "$topogate" diagnose chain --kubeconfig "$kc/config" --context exec-always \
  </dev/null >"$work/exec-always.out" 2>"$work/exec-always.err" || rc=$?
cat "$work/exec-always.out" "$work/exec-always.err" >>"$log"
[[ $rc == 2 ]] && grep -q 'needs a terminal (interactiveMode Always)' "$work/exec-always.err" && [[ $(runs cert) == 1 ]] &&
  pass "interactiveMode Always without a terminal: exit 2, the plugin not run" || fail "exec-always: exit $rc: $(err exec-always)"

section kubectl
prefix=$work/prefix
builddir=$(cd "$(dirname "$topogate")/.." && pwd)
if [[ -f $builddir/cmake_install.cmake ]]; then
  cmake --install "$builddir" --prefix "$prefix" >/dev/null
  [[ -x $prefix/bin/topogate && -L $prefix/bin/kubectl-topogate && $(readlink "$prefix/bin/kubectl-topogate") == topogate ]] &&
    pass "cmake --install: bin/topogate and bin/kubectl-topogate -> topogate" || fail "install: $(ls -l "$prefix/bin" 2>&1)"
else
  mkdir -p "$prefix/bin"
  ln -s "$topogate" "$prefix/bin/kubectl-topogate"
  echo "note: $topogate is not in a CMake build directory; kubectl-topogate linked by hand"
fi
export PATH="$prefix/bin:$PATH"
"$KUBECTL" plugin list 2>/dev/null | grep -q "$prefix/bin/kubectl-topogate" && pass "kubectl plugin list shows kubectl-topogate" ||
  fail "kubectl plugin list: $("$KUBECTL" plugin list 2>&1 | head -5)"
# kc NAME ARGS...: the real kubectl running the plugin, as tg records it.
kc_run() {
  local name=$1; shift
  rc=0
  env -u KUBERNETES_SERVICE_HOST "$KUBECTL" topogate "$@" >"$work/$name.out" 2>"$work/$name.err" || rc=$?
  cat "$work/$name.out" "$work/$name.err" >>"$log"
}
kc_run help -h
[[ $rc == 0 ]] && grep -q '^usage: kubectl topogate <command>' "$work/help.out" && pass "kubectl topogate -h" ||
  fail "kubectl topogate -h: exit $rc: $(head -3 "$work/help.out")"
kc_run dhelp diagnose --help
[[ $rc == 0 ]] && grep -q 'kubectl topogate diagnose pending WORKLOAD' "$work/dhelp.out" && pass "kubectl topogate diagnose --help" ||
  fail "kubectl topogate diagnose --help: exit $rc"
KUBECONFIG=$kc/config kc_run k-chain diagnose chain --context exec-token --output json
[[ $rc == "$base_rc" ]] && same k-chain base && pass "kubectl topogate diagnose chain --context exec-token (\$KUBECONFIG)" ||
  fail "kubectl chain: exit $rc: $(err k-chain)"
KUBECONFIG=$kc/config kc_run k-pending diagnose pending zone-trio -n default --context reader-inline --output json
[[ $rc == 1 ]] && same k-pending base-pending && pass "kubectl topogate diagnose pending zone-trio -n default --context reader-inline" ||
  fail "kubectl pending -n: exit $rc: $(err k-pending)"
KUBECONFIG=$kc/config kc_run k-nsctx diagnose pending zone-trio --context ns-default --output json
[[ $rc == 1 ]] && same k-nsctx base-pending && pass "the context's namespace is the default (ns-default)" ||
  fail "context namespace default: exit $rc: $(err k-nsctx)"
KUBECONFIG=$kc/config kc_run k-nsother diagnose pending zone-trio --context ns-other
[[ $rc == 2 ]] && grep -q 'other/zone-trio' "$work/k-nsother.err" && pass "context namespace other: no Workload other/zone-trio (exit 2)" ||
  fail "context namespace other: exit $rc: $(err k-nsother)"
KUBECONFIG=$kc/config kc_run k-nsflag diagnose pending zone-trio --context ns-other --namespace=default --output json
[[ $rc == 1 ]] && same k-nsflag base-pending && pass "--namespace overrides the context's namespace" ||
  fail "--namespace over context: exit $rc: $(err k-nsflag)"
KUBECONFIG=$work/absent:$kc/config kc_run k-list diagnose pending default/zone-trio --context exec-cert --output json
[[ $rc == 1 ]] && same k-list base-pending && pass "\$KUBECONFIG as a list (a missing file skipped)" ||
  fail "KUBECONFIG list: exit $rc: $(err k-list)"
kc_run k-flag diagnose chain --kubeconfig "$kc/config" --context sni-ok --output json
[[ $rc == "$base_rc" ]] && same k-flag base && pass "kubectl topogate ... --kubeconfig FILE" || fail "--kubeconfig: exit $rc: $(err k-flag)"
mkdir -p "$work/home/.kube"
cp "$kc/config" "$work/home/.kube/config"
sed -i "s|certificate-authority: ca.crt|certificate-authority: $kc/ca.crt|; s|tokenFile: admin.token|tokenFile: $kc/admin.token|" \
  "$work/home/.kube/config"
rc=0
env -u KUBECONFIG -u KUBERNETES_SERVICE_HOST HOME="$work/home" "$KUBECTL" topogate diagnose chain --output json \
  >"$work/k-home.out" 2>"$work/k-home.err" || rc=$?
cat "$work/k-home.out" "$work/k-home.err" >>"$log"
[[ $rc == "$base_rc" ]] && same k-home base && pass "no --kubeconfig and no \$KUBECONFIG: ~/.kube/config, as kubectl" ||
  fail "~/.kube/config: exit $rc: $(err k-home)"
rc=0
env -u KUBECONFIG -u KUBERNETES_SERVICE_HOST HOME="$work/home" "$topogate" diagnose chain >/dev/null 2>"$work/t-home.err" || rc=$?
[[ $rc == 2 ]] && grep -q 'no input' "$work/t-home.err" && pass "topogate itself (not the plugin) does not read ~/.kube/config implicitly" ||
  fail "topogate without input: exit $rc"

section secrets
leaks=()
for name in admin_token user_token; do
  grep -qF -- "${!name}" "$log" && leaks+=("$name")
done
for f in reader nobody; do
  # Every base64 line of the keys and certificates, and the one-line inline data.
  while read -r line; do
    [[ ${#line} -ge 40 && $line != -----* ]] && grep -qF -- "$line" "$log" && leaks+=("$f line ${line:0:8}...")
  done < <(cat "$kc/$f.key" "$kc/$f.crt")
  grep -qF -- "$(base64 -w0 "$kc/$f.key" | head -c 60)" "$log" && leaks+=("$f.key data")
done
grep -q 'PRIVATE KEY' "$log" && leaks+=("PRIVATE KEY")
((${#leaks[@]} == 0)) && pass "no token, key or certificate data in $(wc -l <"$log") lines of output" ||
  fail "secrets in the output: ${leaks[*]}"

echo "kubeconfig: $((checks - fails)) passed, $fails failed in $((SECONDS - t_start)) s"
((fails == 0))

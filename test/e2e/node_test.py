#!/usr/bin/env python3
"""The chart on a real node: topogate's image run by a kubelet, installed with helm.

Starts the test control plane with a node (test/e2e/control-plane.sh start --node:
containerd, runc, CNI, kubelet, kube-proxy, controllers), imports the image built by
scripts/image.sh into containerd, installs helm/topogate with the values a user would
give (the default kubernetes store, a Node watch, bearer and mTLS readers, an mTLS
writer, a serving certificate from a Secret) and checks what the chart promises:

  pods        2 Pods Running and Ready, with the local image
  security    each container runs as 65532 with a read-only root filesystem, read
              from the running process (/proc) and containerd's OCI spec
  webhook     kubectl apply of the runbook's examples is allowed, a broken
              TopologySource is denied with every field error; the apiserver reached
              topogate through the chart's Service (its admission counters moved)
  snapshot    GET through each of the Service's endpoints and through its ClusterIP
              (kube-proxy): bearer 200, mTLS 200, none 401; a PUT to one Pod of
              a push-fed inventory is served by every Pod (the kubernetes store,
              through the API)
  rollout     helm upgrade with a changed value while kubectl apply --dry-run=server
              runs continuously: zero failed admissions
  pod-delete  a Pod deleted under the same load: zero failed admissions
  rotation    the serving certificate and a reader token rotated by updating their
              Secrets: every Pod serves the new ones without a restart, and no
              admission or snapshot request fails meanwhile

Prints one line per check and a summary with the request counts; exits 1 on any
failure. Env: TOPOGATE_BINARY (for `topogate validate`), TOPOGATE_IMAGE_ARCHIVE
(default build/image/topogate-oci.tar, built by scripts/image.sh when missing),
TOPOGATE_NODE_KEEP=1 leaves the cluster running (its KUBECONFIG is printed).
"""

import base64
import hashlib
import json
import os
import re
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
from http.client import HTTPSConnection

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
FX = os.path.join(HERE, "fixtures")
NS = "gpustack-system"
RELEASE = "topogate"
SVC_NAME = f"{RELEASE}.{NS}.svc"
INVENTORY = "data-center"
PUSHED = "pushed"
NODE = "topogate-e2e-node"
LEVELS = ["topology.gpustack.ai/region", "topology.gpustack.ai/zone", "topology.gpustack.ai/rack"]

passed = 0
failed = 0
figures = {}


def check(name, ok, detail=""):
    global passed, failed
    if ok:
        passed += 1
        print(f"ok   {name}{': ' + detail if detail else ''}", flush=True)
    else:
        failed += 1
        print(f"FAIL {name}{': ' + detail if detail else ''}", flush=True)
    return ok


def run(args, env=None, input=None, timeout=300, check_rc=True):
    p = subprocess.run(args, env=env, input=input, capture_output=True, text=True, timeout=timeout)
    if check_rc and p.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} exited {p.returncode}:\n{p.stdout}\n{p.stderr}")
    return p


class Cluster:
    def __init__(self, work):
        self.work = work
        self.env = dict(os.environ)
        self.env["TOPOGATE_CP_DIR"] = os.path.join(work, "cp")
        for k in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY"):
            self.env.pop(k, None)
        bins = run([os.path.join(HERE, "build-kube-bins.sh"), "--print-env"], env=self.env).stdout
        for line in bins.splitlines():
            k, _, v = line.partition("=")
            self.env[k] = v.strip("'\"")
        self.helm_bin = os.path.join(self.env["HELM_BIN_DIR"], "helm")
        for d in ("helm-cache", "helm-config", "helm-data"):
            self.env["HELM_" + d.split("-")[1].upper() + "_HOME"] = os.path.join(work, d)

    def cp(self, *args, timeout=600):
        return run([os.path.join(HERE, "control-plane.sh"), *args], env=self.env, timeout=timeout)

    def start(self):
        t0 = time.monotonic()
        self.cp("start", "--node")
        figures["node start (s)"] = round(time.monotonic() - t0, 1)
        for line in self.cp("env").stdout.splitlines():
            m = re.match(r"export (\w+)=(.*)", line)
            if m:
                self.env[m.group(1)] = m.group(2).strip("'\"")
        self.kubectl_bin = self.env["KUBECTL"]

    def k(self, *args, input=None, check_rc=True, timeout=120):
        return run([self.kubectl_bin, *args], env=self.env, input=input, check_rc=check_rc, timeout=timeout)

    def kj(self, *args):
        return json.loads(self.k(*args, "-o", "json").stdout)

    def helm(self, *args, timeout=600):
        return run([self.helm_bin, *args], env=self.env, timeout=timeout)


# ---------------------------------------------------------------- TLS clients


def tls_context(ca, cert=None, key=None):
    ctx = ssl.create_default_context(cafile=ca)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    if cert:
        ctx.load_cert_chain(cert, key)
    return ctx


class _ServiceConnection(HTTPSConnection):
    """HTTPS to an address (a Pod's or the ClusterIP) whose certificate names the Service."""

    def __init__(self, ip, port, ctx, timeout):
        super().__init__(ip, port, timeout=timeout, context=ctx)
        self._ctx = ctx

    def connect(self):
        raw = socket.create_connection((self.host, self.port), self.timeout)
        self.sock = self._ctx.wrap_socket(raw, server_hostname=SVC_NAME)


def https(ip, port, ctx, method="GET", path="/", headers=None, body=None, timeout=10):
    """One request on a new connection; returns (status, body bytes, peer cert DER)."""
    conn = _ServiceConnection(ip, port, ctx, timeout)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        r = conn.getresponse()
        data = r.read()
        return r.status, data, conn.sock.getpeercert(binary_form=True)
    finally:
        conn.close()


# ---------------------------------------------------------------- load


class AdmissionLoad:
    """kubectl apply --dry-run=server in a loop: a valid object must be allowed and an
    invalid one denied by topogate; anything else (webhook unreachable, timeout,
    connection refused) is a failed admission."""

    def __init__(self, cluster, threads=2):
        self.c = cluster
        self.stop_evt = threading.Event()
        self.lock = threading.Lock()
        self.sent = 0
        self.failed = 0
        self.errors = []
        self.threads = [threading.Thread(target=self.loop, args=(i,), daemon=True) for i in range(threads)]

    def loop(self, i):
        good = os.path.join(FX, "runbook", "data-center.yaml")
        bad = os.path.join(FX, "invalid", "many-errors.yaml")
        n = 0
        while not self.stop_evt.is_set():
            f = bad if (n + i) % 2 else good
            n += 1
            p = self.c.k("apply", "--dry-run=server", "-f", f, check_rc=False, timeout=60)
            out = p.stdout + p.stderr
            if f == good:
                ok = p.returncode == 0 and "(server dry run)" in out
            else:
                # kubectl prints topogate's 422 as "... is invalid:" with one line per
                # field error, each carrying its rule id.
                ok = p.returncode != 0 and "[T4] Duplicate value" in out
            with self.lock:
                self.sent += 1
                if not ok:
                    self.failed += 1
                    if len(self.errors) < 5:
                        self.errors.append(out.strip()[:300])

    def __enter__(self):
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc):
        self.stop_evt.set()
        for t in self.threads:
            t.join()


class SnapshotLoad:
    """GET /snapshots/data-center through the Service's ClusterIP in a loop, with the
    token `token()` returns at the time of each request."""

    def __init__(self, ip, ctx, token):
        self.ip, self.ctx, self.token = ip, ctx, token
        self.stop_evt = threading.Event()
        self.sent = 0
        self.failed = 0
        self.errors = []
        self.thread = threading.Thread(target=self.loop, daemon=True)

    def loop(self):
        while not self.stop_evt.is_set():
            try:
                st, body, _ = https(self.ip, 443, self.ctx, path=f"/snapshots/{INVENTORY}",
                                    headers={"Authorization": f"Bearer {self.token()}"})
                ok = st == 200
                err = f"status {st}: {body[:200]!r}"
            except Exception as e:  # noqa: BLE001 - every failure counts
                ok, err = False, repr(e)
            self.sent += 1
            if not ok:
                self.failed += 1
                if len(self.errors) < 5:
                    self.errors.append(err)
            time.sleep(0.05)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop_evt.set()
        self.thread.join()


# ---------------------------------------------------------------- helpers


def pods(c):
    items = c.kj("-n", NS, "get", "pods", "-l", f"app.kubernetes.io/instance={RELEASE}")["items"]
    return [p for p in items if not p["metadata"].get("deletionTimestamp")]


def ready(p):
    conds = {x["type"]: x["status"] for x in p.get("status", {}).get("conditions", [])}
    return p.get("status", {}).get("phase") == "Running" and conds.get("Ready") == "True"


def wait(what, pred, timeout=180, interval=0.5):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(interval)
    raise TimeoutError(f"timed out after {timeout} s waiting for {what}")


def wait_settled(c, count=2, timeout=240):
    """count Pods, all Ready, none terminating, one ReplicaSet generation."""

    def ok():
        ps = c.kj("-n", NS, "get", "pods", "-l", f"app.kubernetes.io/instance={RELEASE}")["items"]
        return len(ps) == count and all(ready(p) and not p["metadata"].get("deletionTimestamp") for p in ps) and ps

    return wait("settled Pods", ok, timeout)


def endpoint_ips(c):
    slices = c.kj("-n", NS, "get", "endpointslices", "-l", f"kubernetes.io/service-name={RELEASE}")["items"]
    ips = []
    for s in slices:
        for e in s.get("endpoints") or []:
            if (e.get("conditions") or {}).get("ready"):
                ips.extend(e["addresses"])
    return sorted(ips)


def admission_count(c, ip):
    """Sum of topogate_admission_decisions_total on one Pod (health port)."""
    out = run(["curl", "-fsS", "--noproxy", "*", "--max-time", "5", f"http://{ip}:8080/metrics"]).stdout
    total = 0.0
    for line in out.splitlines():
        if line.startswith("topogate_admission_decisions_total"):
            total += float(line.rsplit(" ", 1)[1])
    return total


def container_state(c, pod):
    """(uids, root mount options, OCI spec readonly, OCI uid) of the topogate container,
    read from the node: the process's /proc status and mountinfo, containerd's spec."""
    cid = next(s["containerID"] for s in pod["status"]["containerStatuses"] if s["name"] == "topogate")
    cid = cid.split("://", 1)[1]
    ctr = ["ctr", "--address", os.path.join(c.env["TOPOGATE_CP_DIR"], "containerd", "containerd.sock"), "-n", "k8s.io"]
    info = json.loads(run([*ctr, "containers", "info", cid]).stdout)
    spec = info["Spec"]
    pid = None
    for line in run([*ctr, "tasks", "ls"]).stdout.splitlines()[1:]:
        f = line.split()
        if f and f[0] == cid:
            pid = int(f[1])
    with open(f"/proc/{pid}/status") as fh:
        uids = next(line.split()[1:] for line in fh if line.startswith("Uid:"))
    with open(f"/proc/{pid}/mountinfo") as fh:
        root_opts = next(line.split()[5] for line in fh if line.split()[4] == "/")
    return uids, root_opts, spec["root"].get("readonly", False), spec["process"]["user"]["uid"], pid


def source_for(inventory):
    """The TopologySource spec GPUStack would hold for an inventory served by the chart."""
    return {
        "nodeSelector": {},
        "levels": LEVELS,
        "webhook": {
            "url": f"https://{SVC_NAME}/snapshots/{inventory}",
            "pollInterval": "1m", "timeout": "10s", "maxStaleness": "5m",
            "caBundleConfigMapRef": {"namespace": NS, "name": "topogate-ca"},
            "bearerTokenSecretRef": {"namespace": NS, "name": "topology-inventory-token"},
        },
    }


def containers_by_pod(ps):
    """Pod name -> (restart count, container ID) of its topogate container."""
    return {p["metadata"]["name"]: (p["status"]["containerStatuses"][0]["restartCount"],
                                    p["status"]["containerStatuses"][0]["containerID"]) for p in ps}


def replace_secret(c, *create_args):
    """Updates a Secret in place, as a user rotating it would (kubectl apply of its new data)."""
    manifest = c.k("-n", NS, "create", "secret", *create_args, "--dry-run=client", "-o", "yaml").stdout
    c.k("apply", "-f", "-", input=manifest)


def cert_sha(path):
    pem = open(path).read()
    der = ssl.PEM_cert_to_DER_cert(pem[pem.index("-----BEGIN CERTIFICATE-----"):])
    return hashlib.sha256(der).hexdigest()


# ---------------------------------------------------------------- the suite


def main():
    work = tempfile.mkdtemp(prefix="topogate-node.")
    c = Cluster(work)
    keep = os.environ.get("TOPOGATE_NODE_KEEP") == "1"
    t_all = time.monotonic()
    try:
        c.start()
        suite(c, work)
    except Exception as e:  # noqa: BLE001 - reported as a failed check, then cleaned up
        check("suite ran to the end", False, f"{type(e).__name__}: {e}")
        for name in ("kubelet", "containerd", "apiserver"):
            log = os.path.join(c.env["TOPOGATE_CP_DIR"], f"{name}.log")
            if os.path.exists(log):
                print(f"--- last lines of {name}.log")
                print("".join(open(log, errors="replace").readlines()[-15:]))
    finally:
        if keep:
            print(f"cluster kept: export KUBECONFIG={c.env.get('KUBECONFIG')}")
        else:
            t0 = time.monotonic()
            try:
                c.cp("stop", timeout=180)
            except Exception as e:  # noqa: BLE001
                check("control plane stopped", False, str(e))
            figures["teardown (s)"] = round(time.monotonic() - t0, 1)
            shutil.rmtree(work, ignore_errors=True)
    figures["suite (s)"] = round(time.monotonic() - t_all, 1)
    print("=== figures")
    for k, v in figures.items():
        print(f"{k}: {v}")
    print(f"node suite: {passed} passed, {failed} failed")
    return 1 if failed or not passed else 0


def suite(c, work):
    topogate = os.environ.get("TOPOGATE_BINARY") or next(
        (p for p in (os.path.join(REPO, "build", b, "cli", "topogate") for b in ("dev", "release")) if os.access(p, os.X_OK)),
        None,
    )
    # ---- the image
    archive = os.environ.get("TOPOGATE_IMAGE_ARCHIVE") or os.path.join(REPO, "build", "image", "topogate-oci.tar")
    if not os.path.exists(archive):
        run([os.path.join(REPO, "scripts", "image.sh"), "--no-check"], timeout=1800)
    env_file = os.path.join(os.path.dirname(archive), "image.env")
    image = dict(line.split("=", 1) for line in open(env_file).read().split())["TOPOGATE_IMAGE"].strip("'\"")
    c.cp("load-image", archive)
    repo_name, tag = image.rsplit(":", 1)

    # ---- what the user creates before installing: namespace, Secrets, ConfigMap
    pki = os.path.join(work, "pki")
    cenv = dict(c.env, CERTS_QUIET="1")
    run([os.path.join(REPO, "certs", "make-ca.sh"), "--out", pki, "--cn", "topogate node-test CA"], env=cenv)
    ca, ca_key = os.path.join(pki, "ca.crt"), os.path.join(pki, "ca.key")
    mk_server = [os.path.join(REPO, "certs", "make-server-cert.sh"), "--ca-cert", ca, "--ca-key", ca_key,
                 "--service", RELEASE, "--namespace", NS]
    run([*mk_server, "--out", pki, "--name", "serving"], env=cenv)
    for name, cn in (("reader", "inventory-reader"), ("writer", "inventory-writer")):
        run([os.path.join(REPO, "certs", "make-client-cert.sh"), "--ca-cert", ca, "--ca-key", ca_key,
             "--out", pki, "--name", name, "--cn", cn], env=cenv)
    c.k("create", "namespace", NS)
    c.k("-n", NS, "create", "secret", "tls", "topogate-tls",
        "--cert", os.path.join(pki, "serving.crt"), "--key", os.path.join(pki, "serving.key"))
    token1 = base64.b32encode(os.urandom(20)).decode().lower()
    c.k("-n", NS, "create", "secret", "generic", "topology-inventory-token", f"--from-literal=token={token1}")
    for s in ("inventory-reader-ca", "inventory-writer-ca"):
        c.k("-n", NS, "create", "secret", "generic", s, f"--from-file=ca.crt={ca}")
    snapshot = {
        "apiVersion": "topology.gpustack.ai/v1alpha1",
        "revision": "node-test-1",
        "nodes": {NODE: {LEVELS[0]: "region-a", LEVELS[1]: "zone-a", LEVELS[2]: "rack-01"}},
    }
    c.k("-n", NS, "create", "configmap", "topology-snapshot", f"--from-literal=snapshot.yaml={json.dumps(snapshot)}")
    values = {
        "image": {"repository": repo_name, "tag": tag, "pullPolicy": "Never"},
        "tls": {"mode": "secret", "existingSecret": "topogate-tls", "caBundle": open(ca).read()},
        "inventories": [{
            "name": INVENTORY,
            "source": source_for(INVENTORY),
            "snapshotConfigMap": {"name": "topology-snapshot", "key": "snapshot.yaml"},
            "nodesFromAPI": True,
            "unknownNodes": "reject",
            "readers": {
                "bearer": {"existingSecret": "topology-inventory-token", "keys": ["token"]},
                "mtls": {"existingSecret": "inventory-reader-ca", "allowedSubjects": ["inventory-reader"]},
            },
        }, {
            # Fed by pushes only: kept in the kubernetes store, shared by the replicas.
            "name": PUSHED,
            "source": source_for(PUSHED),
            "allowEmptyStart": True,
            "readers": {"bearer": {"existingSecret": "topology-inventory-token", "keys": ["token"]}},
            "writers": {"mtls": {"existingSecret": "inventory-writer-ca", "allowedSubjects": ["inventory-writer"]}},
        }],
    }
    values_file = os.path.join(work, "values.json")
    with open(values_file, "w") as f:
        json.dump(values, f)

    # ---- install: the chart installs no CRD (the operator owns worker.gpustack.ai); the
    # suite brings the ones it needs from test/e2e/crds, as the cluster's operator would.
    c.k("apply", "--server-side", "-f", os.path.join(REPO, "test", "e2e", "crds"))
    c.k("wait", "--for=condition=Established", "--timeout=60s", "crd/topologysources.worker.gpustack.ai",
        "crd/modeldeployments.worker.gpustack.ai")
    t0 = time.monotonic()
    c.helm("install", RELEASE, os.path.join(REPO, "helm", "topogate"), "-n", NS, "-f", values_file,
           "--wait", "--timeout", "4m")
    figures["helm install --wait (s)"] = round(time.monotonic() - t0, 1)
    ps = wait_settled(c)
    check("pods: 2 Running and Ready", len(ps) == 2 and all(ready(p) for p in ps),
          ", ".join(f"{p['metadata']['name']} {p['status'].get('podIP')}" for p in ps))
    images = {s["image"] for p in ps for s in p["status"]["containerStatuses"]}
    check("pods: the container runs the local image", images == {image},
          ", ".join(sorted(images)))

    # ---- security, from the running containers
    for p in ps:
        uids, root_opts, spec_ro, spec_uid, pid = container_state(c, p)
        check(f"security: {p['metadata']['name']} process {pid} runs as 65532",
              set(uids) == {"65532"} and spec_uid == 65532, f"Uid: {' '.join(uids)}; OCI uid {spec_uid}")
        check(f"security: {p['metadata']['name']} root filesystem is read-only",
              root_opts.split(",")[0] == "ro" and spec_ro, f"mountinfo '/' {root_opts}; OCI root.readonly {spec_ro}")

    # ---- webhook through the Service
    vwc = c.kj("get", "validatingwebhookconfigurations", RELEASE)
    svc_refs = [w["clientConfig"].get("service") for w in vwc["webhooks"]]
    check("webhook: registered with the chart's Service", all(s and s["name"] == RELEASE and s["namespace"] == NS for s in svc_refs),
          json.dumps(svc_refs))
    ips = endpoint_ips(c)
    before = sum(admission_count(c, ip) for ip in ips)
    runbook = sorted(f for f in os.listdir(os.path.join(FX, "runbook")) if f.endswith(".yaml") and "snapshot" not in f)
    for f in runbook:
        p = c.k("apply", "-f", os.path.join(FX, "runbook", f), check_rc=False)
        check(f"webhook: runbook example {f} allowed", p.returncode == 0, (p.stdout + p.stderr).strip()[:200])
    bad = os.path.join(FX, "invalid", "many-errors.yaml")
    p = c.k("apply", "-f", bad, check_rc=False)
    out = p.stdout + p.stderr
    expected = run([topogate, "validate", "topologysource", bad], check_rc=False).stdout if topogate else ""
    want = [m.groups() for m in re.finditer(r"^\[([A-Z][0-9]+)\] ([^:]+): (Required value|Invalid value|Forbidden|Duplicate value|Too many|Unsupported value|Too long|Not found)", expected, re.M)]
    missing = [w for w in want if f"{w[1]}: [{w[0]}] {w[2]}" not in out and f"{w[1]}: {w[2]}" not in out]
    check("webhook: a broken TopologySource is denied with every field error",
          p.returncode != 0 and bool(re.search(r"\[T[0-9]+\]", out)) and want and not missing,
          f"{len(want) - len(missing)} of {len(want)} field errors in kubectl's message" + (f"; missing {missing}" if missing else ""))
    after = sum(admission_count(c, ip) for ip in ips)
    check("webhook: the apiserver called topogate's Pods through the Service",
          after - before >= len(runbook) + 1, f"admission decisions on the Pods: {before:.0f} -> {after:.0f}")

    # ---- snapshots through the Service's endpoints and ClusterIP
    bearer_ctx = tls_context(ca)
    mtls_ctx = tls_context(ca, os.path.join(pki, "reader.crt"), os.path.join(pki, "reader.key"))
    cluster_ip = c.kj("-n", NS, "get", "service", RELEASE)["spec"]["clusterIP"]
    path = f"/snapshots/{INVENTORY}"
    for ip, port, via in [(ip, 8443, f"endpoint {ip}") for ip in ips] + [(cluster_ip, 443, f"ClusterIP {cluster_ip}")]:
        st_b, body, _ = https(ip, port, bearer_ctx, path=path, headers={"Authorization": f"Bearer {token1}"})
        st_m, _, _ = https(ip, port, mtls_ctx, path=path)
        st_n, _, _ = https(ip, port, bearer_ctx, path=path)
        check(f"snapshot: GET via {via}: bearer {st_b}, mTLS {st_m}, none {st_n}",
              st_b == 200 and st_m == 200 and st_n == 401 and b"node-test-1" in body)
    # A PUT to one Pod reaches the other through the kubernetes store.
    writer_ctx = tls_context(ca, os.path.join(pki, "writer.crt"), os.path.join(pki, "writer.key"))
    snap2 = dict(snapshot, revision="node-test-2")
    push_path = f"/snapshots/{PUSHED}"
    st, body, _ = https(ips[0], 8443, writer_ctx, "PUT", push_path, {"Content-Type": "application/json"}, json.dumps(snap2))
    check(f"snapshot: PUT revision node-test-2 of inventory {PUSHED} to {ips[0]} -> {st}", st in (200, 201), body[:200].decode(errors="replace"))
    seen = {}

    def served_everywhere():
        for ip in ips:
            s, b, _ = https(ip, 8443, bearer_ctx, path=push_path, headers={"Authorization": f"Bearer {token1}"})
            seen[ip] = (s, b"node-test-2" in b)
        return all(v == (200, True) for v in seen.values())

    try:
        wait("the pushed revision on every Pod", served_everywhere, timeout=30)
        check("snapshot: the pushed revision is served by every Pod (kubernetes store)", True, json.dumps(seen))
    except TimeoutError:
        check("snapshot: the pushed revision is served by every Pod (kubernetes store)", False, json.dumps(seen))

    # ---- rolling update under load
    old = {p["metadata"]["name"] for p in ps}
    with AdmissionLoad(c) as load:
        time.sleep(2)
        t0 = time.monotonic()
        c.helm("upgrade", RELEASE, os.path.join(REPO, "helm", "topogate"), "-n", NS, "-f", values_file,
               "--set", "logLevel=debug", "--wait", "--timeout", "4m")
        ps = wait_settled(c)
        figures["rollout (s)"] = round(time.monotonic() - t0, 1)
        time.sleep(2)
    new = {p["metadata"]["name"] for p in ps}
    check("rollout: every Pod replaced", not (old & new), f"{sorted(old)} -> {sorted(new)}")
    figures["rollout admissions sent/failed"] = f"{load.sent}/{load.failed}"
    check(f"rollout: {load.sent} admissions sent during the rollout, {load.failed} failed",
          load.sent >= 10 and load.failed == 0, "; ".join(load.errors))

    # ---- a Pod deleted under load
    victim = sorted(new)[0]
    with AdmissionLoad(c) as load:
        time.sleep(2)
        t0 = time.monotonic()
        c.k("-n", NS, "delete", "pod", victim, "--wait=true", timeout=120)
        ps = wait_settled(c)
        figures["pod replaced (s)"] = round(time.monotonic() - t0, 1)
        time.sleep(2)
    figures["pod-delete admissions sent/failed"] = f"{load.sent}/{load.failed}"
    check(f"pod-delete: {load.sent} admissions sent while {victim} was deleted and replaced, {load.failed} failed",
          load.sent >= 5 and load.failed == 0 and victim not in {p["metadata"]["name"] for p in ps}, "; ".join(load.errors))

    # ---- rotation of the serving certificate and a reader token
    ips = endpoint_ips(c)
    restarts = containers_by_pod(ps)
    old_sha = cert_sha(os.path.join(pki, "serving.crt"))
    current = {"token": token1}
    token2 = base64.b32encode(os.urandom(20)).decode().lower()

    def serving_sha(ip):
        _, _, der = https(ip, 8443, bearer_ctx, path="/healthz")
        return hashlib.sha256(der).hexdigest()

    def token_status(ip, tok):
        s, _, _ = https(ip, 8443, bearer_ctx, path=path, headers={"Authorization": f"Bearer {tok}"})
        return s

    with AdmissionLoad(c, threads=1) as load, SnapshotLoad(cluster_ip, bearer_ctx, lambda: current["token"]) as snap:
        time.sleep(2)
        t0 = time.monotonic()
        run([*mk_server, "--out", pki, "--name", "serving", "--force"], env=cenv)
        new_sha = cert_sha(os.path.join(pki, "serving.crt"))
        replace_secret(c, "tls", "topogate-tls", "--cert", os.path.join(pki, "serving.crt"),
                       "--key", os.path.join(pki, "serving.key"))
        try:
            wait("the new serving certificate on every Pod", lambda: all(serving_sha(ip) == new_sha for ip in ips), timeout=150)
            figures["certificate picked up (s)"] = round(time.monotonic() - t0, 1)
            check("rotation: every Pod serves the new certificate", new_sha != old_sha, f"after {figures['certificate picked up (s)']} s")
        except TimeoutError:
            check("rotation: every Pod serves the new certificate", False, str({ip: serving_sha(ip)[:12] for ip in ips}))
        # Token: old and new together, the client moves to the new, then the old goes.
        t0 = time.monotonic()
        replace_secret(c, "generic", "topology-inventory-token", f"--from-literal=token={token1}\n{token2}")
        try:
            wait("the new token on every Pod", lambda: all(token_status(ip, token2) == 200 for ip in ips), timeout=150)
            current["token"] = token2
            replace_secret(c, "generic", "topology-inventory-token", f"--from-literal=token={token2}")
            wait("the old token refused on every Pod", lambda: all(token_status(ip, token1) == 403 for ip in ips), timeout=150)
            figures["token rotated (s)"] = round(time.monotonic() - t0, 1)
            check("rotation: the new reader token is accepted and the old one refused on every Pod", True,
                  f"in {figures['token rotated (s)']} s")
        except TimeoutError as e:
            check("rotation: the new reader token is accepted and the old one refused on every Pod", False, str(e))
        time.sleep(1)
    figures["rotation admissions sent/failed"] = f"{load.sent}/{load.failed}"
    figures["rotation snapshot GETs sent/failed"] = f"{snap.sent}/{snap.failed}"
    check(f"rotation: {load.sent} admissions and {snap.sent} snapshot GETs during the rotation, "
          f"{load.failed + snap.failed} failed", load.failed == 0 and snap.failed == 0 and snap.sent >= 10,
          "; ".join(load.errors + snap.errors))
    after = containers_by_pod(pods(c))
    check("rotation: no Pod restarted", after == restarts, json.dumps(after))


if __name__ == "__main__":
    sys.exit(main())

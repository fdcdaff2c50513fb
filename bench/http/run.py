#!/usr/bin/env python3
"""HTTP benchmark: topogate against Debian's nginx set up equivalently.

Both servers get the same ECDSA P-256 certificate, TLS 1.3 only on the client side,
a bearer-token check, the same 1 KiB and ~1 MiB snapshot bodies (nginx serves the exact
bytes topogate renders), and for the admission route nginx returns a static
AdmissionReview reply while topogate validates a ~2.6 KiB TopologySource for real.
The server runs on one core, wrk on another (taskset); both servers use one worker.

Prints requests/s, p50/p99 latency and the server's CPU microseconds per request for
each case, and the topogate/nginx ratios. Not a test: numbers depend on the machine.

usage: bench/http/run.py [--binary build/release/server/topogate] [--duration 10]
                         [--connections 32] [--server-cpu 0] [--client-cpu 1]
"""

import argparse
import json
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

TOKEN = "bench-token-0123456789abcdef0123456789abcdef"
CLK_TCK = os.sysconf("SC_CLK_TCK")

SOURCE = """apiVersion: worker.gpustack.ai/v1
kind: TopologySource
metadata: {name: bench}
spec:
  levels: [topology.gpustack.ai/region, topology.gpustack.ai/zone, topology.gpustack.ai/rack]
  configMap:
    configMapRef: {namespace: gpustack-system, name: topology-inventory}
    key: snapshot.yaml
    maxStaleness: 10m
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def sh(*cmd, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw)


def snapshot_yaml(target_json_bytes):
    """A valid snapshot whose JSON rendering is close to (not above) target bytes."""
    lines = ["apiVersion: topology.gpustack.ai/v1alpha1", "revision: bench-1", "nodes:"]
    # ~150 bytes of JSON per node (three labels); the wrapper is ~70 bytes.
    per_node = 150
    n = max(1, (target_json_bytes - 80) // per_node)
    for i in range(n):
        region, zone, rack = i // 4096, i // 256, i // 16
        lines.append(f"  gpu-node-{i:06d}:")
        lines.append(f"    topology.gpustack.ai/region: region-{region:02d}")
        lines.append(f"    topology.gpustack.ai/zone: zone-{zone:04d}")
        lines.append(f"    topology.gpustack.ai/rack: rack-{rack:05d}")
    return "\n".join(lines) + "\n"


def admission_review():
    """A ~2.6 KiB AdmissionReview for a valid webhook TopologySource, shaped like what
    the apiserver sends (metadata with managedFields and annotations)."""
    obj = {
        "apiVersion": "worker.gpustack.ai/v1", "kind": "TopologySource",
        "metadata": {
            "name": "inventory-service", "uid": "2f7a4d36-9c0e-4f57-8f5e-3f1a6b0c9d21", "generation": 3,
            "creationTimestamp": "2026-11-01T08:00:00Z", "resourceVersion": "918273",
            "labels": {"app.kubernetes.io/managed-by": "helm", "app.kubernetes.io/part-of": "gpustack"},
            "annotations": {"meta.helm.sh/release-name": "gpustack", "meta.helm.sh/release-namespace": "gpustack-system",
                            "kubectl.kubernetes.io/last-applied-configuration-hash": "sha256-" + "9f" * 32,
                            "gpustack.ai/owner": "platform-team@example.com"},
            "managedFields": [{
                "manager": "helm", "operation": "Update", "apiVersion": "worker.gpustack.ai/v1",
                "time": "2026-11-01T08:00:00Z", "fieldsType": "FieldsV1",
                "fieldsV1": {"f:metadata": {"f:labels": {".": {}, "f:app.kubernetes.io/managed-by": {},
                                                          "f:app.kubernetes.io/part-of": {}}},
                             "f:spec": {".": {}, "f:levels": {}, "f:nodeSelector": {}, "f:webhook": {
                                 ".": {}, "f:url": {}, "f:pollInterval": {}, "f:timeout": {}, "f:maxStaleness": {},
                                 "f:caBundleConfigMapRef": {}, "f:bearerTokenSecretRef": {}}}}}]},
        "spec": {
            "nodeSelector": {"matchLabels": {"node-role.kubernetes.io/gpu": "true"},
                             "matchExpressions": [{"key": "topology.gpustack.ai/pool", "operator": "In",
                                                   "values": ["training", "inference"]}]},
            "levels": ["topology.gpustack.ai/region", "topology.gpustack.ai/zone", "topology.gpustack.ai/block",
                       "topology.gpustack.ai/rack"],
            "webhook": {"url": "https://topology-inventory.gpustack-system.svc/snapshots/data-center",
                        "pollInterval": "1m", "timeout": "10s", "maxStaleness": "5m",
                        "caBundleConfigMapRef": {"namespace": "gpustack-system", "name": "topology-inventory-ca"},
                        "bearerTokenSecretRef": {"namespace": "gpustack-system", "name": "topology-inventory-token"}}}}
    review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
        "kind": {"group": "worker.gpustack.ai", "version": "v1", "kind": "TopologySource"},
        "resource": {"group": "worker.gpustack.ai", "version": "v1", "resource": "topologysources"},
        "requestKind": {"group": "worker.gpustack.ai", "version": "v1", "kind": "TopologySource"},
        "requestResource": {"group": "worker.gpustack.ai", "version": "v1", "resource": "topologysources"},
        "name": "inventory-service", "operation": "CREATE",
        "userInfo": {"username": "system:serviceaccount:gpustack-system:helm", "uid": "b3c1e2d4-0000-4000-8000-000000000001",
                     "groups": ["system:serviceaccounts", "system:serviceaccounts:gpustack-system", "system:authenticated"]},
        "object": obj, "oldObject": None, "dryRun": False,
        "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions", "fieldManager": "helm"}}}
    return json.dumps(review, separators=(",", ":"))


def make_certs(d: Path):
    sh("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
       "-keyout", str(d / "ca.key"), "-out", str(d / "ca.crt"), "-subj", "/CN=bench CA", "-days", "2")
    sh("openssl", "req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
       "-keyout", str(d / "server.key"), "-out", str(d / "server.csr"), "-subj", "/CN=localhost")
    (d / "san.ext").write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    sh("openssl", "x509", "-req", "-in", str(d / "server.csr"), "-CA", str(d / "ca.crt"), "-CAkey", str(d / "ca.key"),
       "-CAcreateserial", "-out", str(d / "server.crt"), "-days", "2", "-extfile", str(d / "san.ext"))
    os.chmod(d / "server.key", 0o644)  # nginx workers may run as another user


def wait_port(port, proc, timeout=30):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"server exited with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"port {port} did not open")


def cpu_ticks(pids):
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime
    return total


def nginx_pids(master):
    out = subprocess.run(["pgrep", "-P", str(master)], capture_output=True, text=True).stdout.split()
    return [master] + [int(p) for p in out]


def parse_wrk(text):
    def latency(label):
        m = re.search(rf"^\s*{label}%\s+([\d.]+)(us|ms|s)\s*$", text, re.M)
        if not m:
            return float("nan")
        v, unit = float(m.group(1)), m.group(2)
        return v / 1000 if unit == "us" else v * 1000 if unit == "s" else v

    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", text).group(1))
    total = int(re.search(r"(\d+) requests in", text).group(1))
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
    sock_err = re.search(r"Socket errors: (.*)", text)
    return {"rps": rps, "p50": latency("50"), "p99": latency("99"), "requests": total,
            "non2xx": int(errors.group(1)) if errors else 0, "socket_errors": sock_err.group(1) if sock_err else ""}


def run_wrk(args, url, pids, script=None):
    cmd = ["taskset", "-c", str(args.client_cpu), "wrk", "-t1", f"-c{args.connections}", f"-d{args.duration}s",
           "--latency", "-H", f"Authorization: Bearer {TOKEN}"]
    if script:
        cmd += ["-s", str(script)]
    # Warm-up (connections, caches), not measured.
    subprocess.run(cmd[:4] + ["-d2s"] + cmd[5:] + [url], capture_output=True, text=True)
    before = cpu_ticks(pids)
    out = subprocess.run(cmd + [url], capture_output=True, text=True, check=True).stdout
    after = cpu_ticks(pids)
    res = parse_wrk(out)
    res["cpu_us_per_req"] = (after - before) * 1e6 / CLK_TCK / max(res["requests"], 1)
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    root = Path(__file__).resolve().parents[2]
    ap.add_argument("--binary", default=str(root / "build/release/server/topogate"))
    ap.add_argument("--duration", type=int, default=10)
    ap.add_argument("--connections", type=int, default=32)
    ap.add_argument("--server-cpu", type=int, default=0)
    ap.add_argument("--client-cpu", type=int, default=1)
    ap.add_argument("--keep", action="store_true", help="keep the working directory")
    args = ap.parse_args()
    for tool in ("wrk", "nginx", "taskset", "openssl"):
        if not shutil.which(tool) and not Path(f"/usr/sbin/{tool}").exists():
            raise SystemExit(f"{tool} is required")
    work = Path(tempfile.mkdtemp(prefix="topogate-bench-"))
    os.chmod(work, 0o755)  # nginx workers may run as another user
    make_certs(work)
    (work / "token").write_text(TOKEN + "\n")
    (work / "source.yaml").write_text(SOURCE)
    (work / "small.yaml").write_text(snapshot_yaml(1200))
    (work / "large.yaml").write_text(snapshot_yaml(1_000_000))
    review = admission_review()
    (work / "review.json").write_text(review)
    (work / "post.lua").write_text(
        'wrk.method = "POST"\nwrk.headers["Content-Type"] = "application/json"\n'
        f'local f = io.open("{work / "review.json"}", "rb")\nwrk.body = f:read("*a")\nf:close()\n')

    tg_port = free_port()
    (work / "topogate.yaml").write_text(f"""listen: {{address: 127.0.0.1, port: {tg_port}}}
tls: {{certFile: server.crt, keyFile: server.key}}
threads: 1
logging: {{accessLog: false, level: warn}}
inventories:
  - {{name: small, source: source.yaml, snapshot: small.yaml, readers: {{bearerTokenFiles: [token]}}}}
  - {{name: large, source: source.yaml, snapshot: large.yaml, readers: {{bearerTokenFiles: [token]}}}}
""")
    tg = subprocess.Popen(["taskset", "-c", str(args.server_cpu), args.binary, "serve", "--config",
                           str(work / "topogate.yaml")], stdout=subprocess.DEVNULL, stderr=open(work / "topogate.log", "w"))
    results = {}
    try:
        wait_port(tg_port, tg)
        ctx = ssl.create_default_context(cafile=str(work / "ca.crt"))
        for name in ("small", "large"):
            req = urllib.request.Request(f"https://127.0.0.1:{tg_port}/snapshots/{name}",
                                         headers={"Authorization": f"Bearer {TOKEN}"})
            with urllib.request.urlopen(req, context=ctx) as r:
                (work / f"{name}.json").write_bytes(r.read())
        req = urllib.request.Request(f"https://127.0.0.1:{tg_port}/validate/topologysources", data=review.encode(),
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, context=ctx) as r:
            reply = r.read()
        assert json.loads(reply)["response"]["allowed"] is True, reply
        (work / "review-reply.json").write_bytes(reply)
        sizes = {n: (work / f"{n}.json").stat().st_size for n in ("small", "large")}
        print(f"bodies: small {sizes['small']} B, large {sizes['large']} B, review {len(review)} B", flush=True)
        for case, path, script in (("GET 1 KiB", "/snapshots/small", None), ("GET 1 MiB", "/snapshots/large", None),
                                   ("POST admission", "/validate/topologysources", work / "post.lua")):
            results[("topogate", case)] = run_wrk(args, f"https://127.0.0.1:{tg_port}{path}", [tg.pid], script)
    finally:
        tg.send_signal(signal.SIGTERM)
        tg.wait(timeout=60)

    ng_port = free_port()
    escaped_reply = (work / "review-reply.json").read_text().replace("'", "\\'")
    (work / "nginx.conf").write_text(f"""daemon off;
master_process on;
worker_processes 1;
worker_cpu_affinity auto;
pid {work}/nginx.pid;
error_log {work}/nginx-error.log warn;
events {{ worker_connections 4096; }}
http {{
  access_log off;
  keepalive_requests 100000000;
  keepalive_timeout 90s;
  client_body_temp_path {work}/nginx-body;
  proxy_temp_path {work}/nginx-proxy;
  fastcgi_temp_path {work}/nginx-fastcgi;
  uwsgi_temp_path {work}/nginx-uwsgi;
  scgi_temp_path {work}/nginx-scgi;
  map_hash_bucket_size 128;
  map $http_authorization $authorized {{ "Bearer {TOKEN}" 1; default 0; }}
  server {{
    listen 127.0.0.1:{ng_port} ssl;
    ssl_certificate {work}/server.crt;
    ssl_certificate_key {work}/server.key;
    ssl_protocols TLSv1.2 TLSv1.3;
    client_max_body_size 7m;
    location = /snapshots/small {{ if ($authorized = 0) {{ return 401; }} default_type application/json; alias {work}/small.json; }}
    location = /snapshots/large {{ if ($authorized = 0) {{ return 401; }} default_type application/json; alias {work}/large.json; }}
    location = /validate/topologysources {{ default_type application/json; return 200 '{escaped_reply}'; }}
  }}
}}
""")
    ng = subprocess.Popen(["taskset", "-c", str(args.server_cpu), "nginx", "-p", str(work), "-c", str(work / "nginx.conf")],
                          stdout=subprocess.DEVNULL, stderr=open(work / "nginx.log", "w"))
    try:
        wait_port(ng_port, ng)
        pids = nginx_pids(ng.pid)
        for case, path, script in (("GET 1 KiB", "/snapshots/small", None), ("GET 1 MiB", "/snapshots/large", None),
                                   ("POST admission", "/validate/topologysources", work / "post.lua")):
            results[("nginx", case)] = run_wrk(args, f"https://127.0.0.1:{ng_port}{path}", pids, script)
    finally:
        ng.send_signal(signal.SIGQUIT)
        try:
            ng.wait(timeout=30)
        except subprocess.TimeoutExpired:
            ng.kill()

    print(f"\nwrk -t1 -c{args.connections} -d{args.duration}s, TLS 1.3, server on CPU {args.server_cpu}, "
          f"wrk on CPU {args.client_cpu}, one server worker each\n")
    hdr = f"{'case':<16}{'server':<10}{'req/s':>11}{'p50 ms':>9}{'p99 ms':>9}{'CPU us/req':>12}{'non-2xx':>9}"
    print(hdr)
    print("-" * len(hdr))
    for case in ("GET 1 KiB", "GET 1 MiB", "POST admission"):
        for srv in ("topogate", "nginx"):
            r = results[(srv, case)]
            print(f"{case:<16}{srv:<10}{r['rps']:>11.0f}{r['p50']:>9.3f}{r['p99']:>9.3f}{r['cpu_us_per_req']:>12.1f}"
                  f"{r['non2xx']:>9}")
        t, n = results[("topogate", case)], results[("nginx", case)]
        print(f"{'':<16}{'ratio':<10}{t['rps'] / n['rps']:>10.2f}x{t['p50'] / n['p50']:>8.2f}x"
              f"{t['p99'] / n['p99']:>8.2f}x{t['cpu_us_per_req'] / max(n['cpu_us_per_req'], 1e-9):>11.2f}x")
    if args.keep:
        print(f"\nfiles in {work}")
    else:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())

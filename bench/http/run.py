#!/usr/bin/env python3
"""Side-by-side HTTP benchmark: topogate versus Debian's nginx set up equivalently.

Both servers get the same certificate (ECDSA P-256), TLS 1.3 only, the same bearer check,
the same snapshot bodies (topogate's own rendering of a ~1 KiB and a ~1 MiB revision), and
for the admission route nginx returns a static AdmissionReview response while topogate
validates the request for real. Each server runs one worker pinned to one core; wrk runs
pinned to the other core. Prints a markdown table with req/s, p50/p99 latency, the
server's CPU microseconds per request (from /proc/PID/stat) and the topogate/nginx ratios.

Usage: bench/http/run.py [--topogate BUILD/server/topogate] [--duration 10] [--connections 32]
This is a benchmark, not a test: it asserts nothing and its numbers vary between runs.
"""
import argparse
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
import ssl

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
TOKEN = "bench-token-0123456789abcdef0123456789abcdef"
CLK_TCK = os.sysconf("SC_CLK_TCK")

LEVELS = ["topology.gpustack.ai/region", "topology.gpustack.ai/zone", "topology.gpustack.ai/rack"]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw)


def make_certs(d):
    run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
         "-nodes", "-keyout", f"{d}/ca.key", "-out", f"{d}/ca.crt", "-days", "2",
         "-subj", "/CN=bench-ca"])
    run(["openssl", "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
         "-keyout", f"{d}/tls.key", "-out", f"{d}/tls.csr", "-subj", "/CN=localhost"])
    with open(f"{d}/ext.cnf", "w") as f:
        f.write("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    run(["openssl", "x509", "-req", "-in", f"{d}/tls.csr", "-CA", f"{d}/ca.crt", "-CAkey",
         f"{d}/ca.key", "-CAcreateserial", "-out", f"{d}/tls.crt", "-days", "2",
         "-extfile", f"{d}/ext.cnf"])


def snapshot(target_bytes):
    """A valid snapshot whose canonical JSON is close to (and below) target_bytes."""
    nodes = {}
    i = 0
    while True:
        name = f"worker-{i:06d}"
        labels = {LEVELS[0]: f"region-{i // 4096}", LEVELS[1]: f"zone-{i // 256}",
                  LEVELS[2]: f"rack-{i // 16:05d}"}
        nodes[name] = labels
        size = len(json.dumps({"apiVersion": "topology.gpustack.ai/v1alpha1",
                               "nodes": nodes, "revision": "bench"}, separators=(",", ":")))
        if size > target_bytes:
            del nodes[name]
            break
        i += 1 if target_bytes < 4096 else 0
        if target_bytes >= 4096:
            # grow in bulk for the large body, then refine one by one
            step = max(1, (target_bytes - size) // 160)
            for j in range(1, step):
                k = i + j
                nodes[f"worker-{k:06d}"] = {LEVELS[0]: f"region-{k // 4096}",
                                            LEVELS[1]: f"zone-{k // 256}",
                                            LEVELS[2]: f"rack-{k // 16:05d}"}
            i += step
    return {"apiVersion": "topology.gpustack.ai/v1alpha1", "revision": "bench", "nodes": nodes}


SOURCE = """apiVersion: worker.gpustack.ai/v1
kind: TopologySource
metadata:
  name: {name}
spec:
  nodeSelector: {{}}
  levels:
    - topology.gpustack.ai/region
    - topology.gpustack.ai/zone
    - topology.gpustack.ai/rack
  configMap:
    configMapRef:
      namespace: gpustack-system
      name: topology-inventory
    key: snapshot.yaml
    maxStaleness: 10m
"""


def admission_review():
    obj = {
        "apiVersion": "worker.gpustack.ai/v1", "kind": "TopologySource",
        "metadata": {"name": "inventory-service", "uid": "0b4e7a3c-5b1f-4d7e-9a63-2f1c0e8d9b71",
                     "labels": {"app.kubernetes.io/part-of": "gpustack",
                                "app.kubernetes.io/managed-by": "helm"},
                     "annotations": {"meta.helm.sh/release-name": "gpustack",
                                     "meta.helm.sh/release-namespace": "gpustack-system"}},
        "spec": {"nodeSelector": {"matchLabels": {"node-role.kubernetes.io/worker": ""},
                                  "matchExpressions": [{"key": "nvidia.com/gpu.present",
                                                        "operator": "In", "values": ["true"]}]},
                 "levels": ["topology.gpustack.ai/region", "topology.gpustack.ai/zone",
                            "topology.gpustack.ai/rack"],
                 "webhook": {"url": "https://topology-inventory.gpustack-system.svc/snapshot",
                             "pollInterval": "1m", "timeout": "10s", "maxStaleness": "5m",
                             "caBundleConfigMapRef": {"namespace": "gpustack-system",
                                                      "name": "topology-inventory-ca"},
                             "bearerTokenSecretRef": {"namespace": "gpustack-system",
                                                      "name": "topology-inventory-token"}}}}
    review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
              "request": {"uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
                          "kind": {"group": "worker.gpustack.ai", "version": "v1",
                                   "kind": "TopologySource"},
                          "resource": {"group": "worker.gpustack.ai", "version": "v1",
                                       "resource": "topologysources"},
                          "requestKind": {"group": "worker.gpustack.ai", "version": "v1",
                                          "kind": "TopologySource"},
                          "requestResource": {"group": "worker.gpustack.ai", "version": "v1",
                                              "resource": "topologysources"},
                          "name": "inventory-service", "operation": "CREATE",
                          "userInfo": {"username": "system:admin",
                                       "groups": ["system:masters", "system:authenticated"]},
                          "object": obj, "oldObject": None, "dryRun": False,
                          "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions",
                                      "fieldManager": "kubectl-client-side-apply"}}}
    body = json.dumps(review, indent=2)
    # Pad with a managedFields-like annotation to the ~2.6 KiB of a real kubectl request.
    pad = max(0, 2600 - len(body))
    obj["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"] = "x" * pad
    return json.dumps(review, indent=2)


def cpu_ticks(pids):
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])  # utime + stime
        except FileNotFoundError:
            pass
    return total


def children(pid):
    out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout
    return [int(p) for p in out.split()]


def parse_wrk(out):
    def dur(s):
        m = re.match(r"([\d.]+)(us|ms|s)", s)
        v = float(m.group(1))
        return v / 1000.0 if m.group(2) == "us" else v * 1000.0 if m.group(2) == "s" else v
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    reqs = int(re.search(r"(\d+) requests in", out).group(1))
    p50 = dur(re.search(r"\s50%\s+(\S+)", out).group(1))
    p99 = dur(re.search(r"\s99%\s+(\S+)", out).group(1))
    errors = 0
    m = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    if m:
        errors += int(m.group(1))
    m = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    if m:
        errors += sum(int(x) for x in m.groups())
    return {"rps": rps, "requests": reqs, "p50_ms": p50, "p99_ms": p99, "errors": errors}


def wrk(url, pids, args, lua=None):
    cmd = ["taskset", "-c", "1", "wrk", "-t1", f"-c{args.connections}", f"-d{args.duration}s",
           "--latency", "-H", f"Authorization: Bearer {TOKEN}"]
    if lua:
        cmd += ["-s", lua]
    cmd.append(url)
    before = cpu_ticks(pids)
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    after = cpu_ticks(pids)
    r = parse_wrk(out)
    r["cpu_us_per_req"] = (after - before) / CLK_TCK * 1e6 / max(1, r["requests"])
    return r


def wait_https(port, path="/healthz", timeout=20):
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            urllib.request.urlopen(f"https://127.0.0.1:{port}{path}", context=ctx, timeout=1)
            return
        except urllib.error.HTTPError:
            return
        except Exception:
            time.sleep(0.1)
    raise RuntimeError(f"server on port {port} did not come up")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--topogate", default=os.path.join(ROOT, "build/release/server/topogate"))
    ap.add_argument("--duration", type=int, default=10)
    ap.add_argument("--connections", type=int, default=32)
    args = ap.parse_args()
    for tool in ("wrk", "nginx", "taskset", "openssl"):
        if not shutil.which(tool) and not os.path.exists(f"/usr/sbin/{tool}"):
            sys.exit(f"missing {tool}: run scripts/install-deps.sh")

    d = tempfile.mkdtemp(prefix="topogate-bench-")
    make_certs(d)
    with open(f"{d}/token", "w") as f:
        f.write(TOKEN + "\n")
    bodies = {"small": snapshot(1024), "large": snapshot(1024 * 1024 - 64)}
    inventories = []
    for name, snap in bodies.items():
        with open(f"{d}/{name}.json", "w") as f:
            json.dump(snap, f)
        with open(f"{d}/{name}-source.yaml", "w") as f:
            f.write(SOURCE.format(name=name))
        inventories.append(f"""  - name: {name}
    source: {name}-source.yaml
    snapshot: {name}.json
    readers:
      bearerTokenFiles: [token]
""")
    tg_port, ng_port = free_port(), free_port()
    with open(f"{d}/topogate.yaml", "w") as f:
        f.write(f"""listen: {{address: 127.0.0.1, port: {tg_port}}}
tls: {{certFile: tls.crt, keyFile: tls.key}}
threads: 1
inventories:
{''.join(inventories)}""")
    review = admission_review()
    with open(f"{d}/review.json", "w") as f:
        f.write(review)
    with open(f"{d}/post.lua", "w") as f:
        f.write('wrk.method = "POST"\nwrk.headers["Content-Type"] = "application/json"\n'
                f'local f = io.open("{d}/review.json")\nwrk.body = f:read("*a")\nf:close()\n')

    tg = subprocess.Popen(["taskset", "-c", "0", args.topogate, "serve", "--config",
                           f"{d}/topogate.yaml"], stderr=subprocess.DEVNULL)
    ng = None
    try:
        wait_https(tg_port)
        # nginx serves exactly the bytes topogate serves, and topogate's answer to the review.
        ctx = ssl.create_default_context(cafile=f"{d}/ca.crt")
        os.makedirs(f"{d}/www/snapshots", exist_ok=True)
        for name in bodies:
            req = urllib.request.Request(f"https://127.0.0.1:{tg_port}/snapshots/{name}",
                                         headers={"Authorization": f"Bearer {TOKEN}"})
            with urllib.request.urlopen(req, context=ctx) as r, \
                    open(f"{d}/www/snapshots/{name}", "wb") as out:
                out.write(r.read())
        req = urllib.request.Request(f"https://127.0.0.1:{tg_port}/validate/topologysources",
                                     data=review.encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, context=ctx) as r:
            static_reply = r.read().decode()
        with open(f"{d}/nginx.conf", "w") as f:
            f.write(f"""daemon off;
worker_processes 1;
worker_cpu_affinity 01;
pid {d}/nginx.pid;
error_log {d}/nginx-error.log error;
events {{ worker_connections 4096; }}
http {{
  access_log off;
  keepalive_requests 100000000;
  keepalive_timeout 90s;
  sendfile on;
  server {{
    listen 127.0.0.1:{ng_port} ssl;
    ssl_certificate {d}/tls.crt;
    ssl_certificate_key {d}/tls.key;
    ssl_protocols TLSv1.3;
    ssl_session_tickets off;
    root {d}/www;
    location /snapshots/ {{
      if ($http_authorization != "Bearer {TOKEN}") {{ return 401; }}
      default_type application/json;
    }}
    location = /validate/topologysources {{
      default_type application/json;
      client_max_body_size 7m;
      return 200 '{static_reply}';
    }}
    location = /healthz {{ return 200 'ok'; }}
  }}
}}
""")
        ng = subprocess.Popen(["taskset", "-c", "0", "nginx", "-c", f"{d}/nginx.conf"],
                              stderr=subprocess.DEVNULL)
        wait_https(ng_port)
        tg_pids = [tg.pid]
        ng_pids = [ng.pid] + children(ng.pid)

        rows = []
        scenarios = [
            ("snapshot GET 1 KiB", "/snapshots/small", None, args.connections),
            ("snapshot GET 1 MiB", "/snapshots/large", None, args.connections),
            ("snapshot GET 1 KiB, 1 conn", "/snapshots/small", None, 1),
            ("admission POST 2.6 KiB", "/validate/topologysources", f"{d}/post.lua",
             args.connections),
        ]
        for label, path, lua, conns in scenarios:
            a = argparse.Namespace(**vars(args))
            a.connections = conns
            t = wrk(f"https://127.0.0.1:{tg_port}{path}", tg_pids, a, lua)
            n = wrk(f"https://127.0.0.1:{ng_port}{path}", ng_pids, a, lua)
            rows.append((label, t, n))

        print(f"\nwrk {args.duration}s per run, server pinned to cpu0 (1 thread/worker), "
              f"wrk pinned to cpu1; review body {len(review)} bytes; "
              f"bodies {os.path.getsize(f'{d}/www/snapshots/small')} and "
              f"{os.path.getsize(f'{d}/www/snapshots/large')} bytes\n")
        print("| scenario | server | req/s | p50 ms | p99 ms | CPU µs/req | errors | ratio req/s |")
        print("|---|---|---:|---:|---:|---:|---:|---:|")
        for label, t, n in rows:
            ratio = t["rps"] / n["rps"] if n["rps"] else float("nan")
            for who, r in (("topogate", t), ("nginx", n)):
                print(f"| {label} | {who} | {r['rps']:.0f} | {r['p50_ms']:.3f} | "
                      f"{r['p99_ms']:.3f} | {r['cpu_us_per_req']:.1f} | {r['errors']} | "
                      f"{ratio:.2f} |" if who == "topogate" else
                      f"| {label} | {who} | {r['rps']:.0f} | {r['p50_ms']:.3f} | "
                      f"{r['p99_ms']:.3f} | {r['cpu_us_per_req']:.1f} | {r['errors']} | |")
    finally:
        for p in (tg, ng):
            if p and p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    p.kill()
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()

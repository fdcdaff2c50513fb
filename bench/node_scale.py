#!/usr/bin/env python3
"""topogate's Node watch at cluster scale, against a real kube-apiserver. A benchmark, not a
test: it prints a table of measured figures and asserts nothing.

For each cluster size it creates that many Node objects with the ~20 labels cloud GPU Nodes
carry (instance type, zone, region, NFD and GPU-operator labels, node group), starts topogate
(release build, threads: 1) with one inventory that lists Nodes through the API
(nodesFromAPI: true, unknownNodes: prune) and a snapshot describing up to 7,000 of them, then:

- start to ready, and RSS once the list is in;
- irrelevant churn: a label no rule reads (example.com/heartbeat) changed on random Nodes at
  --rate per second for --seconds: topogate's CPU time per change (the run time of all its
  threads, /proc/PID/task/*/schedstat), RSS during and after;
- relevant churn: a Node's selector label (node-group) flipped out of and back into the
  inventory's nodeSelector, at the same rate: CPU per change, and the time from each flip to
  the served revision's ETag changing (p50/p99, polled with If-None-Match every 5 ms);
- a relist: etcd's history compacted, so the watch gets 410 Gone and lists again: the relist's
  wall time and the peak RSS (VmHWM) around it.

Usage: bench/node_scale.py [--sizes 1000,5000,10000,20000] [--rate 10] [--seconds 20]
                           [--binary build/release/cli/topogate] [--json FILE]
It starts its own control plane (test/e2e/control-plane.sh, state in a temporary folder).
"""

import argparse
import http.client
import json
import os
import random
import shutil
import ssl
import statistics
import subprocess
import sys
import tempfile
import threading
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CP = os.path.join(REPO, "test", "e2e", "control-plane.sh")
SNAPSHOT_NODES = 7000  # about 920 KB: the consumer's 1 MiB limit holds about 7,900 of these
LEVELS = ["topology.gpustack.ai/region", "topology.gpustack.ai/zone", "topology.gpustack.ai/rack"]


class Api:
    """The admin's kept-alive HTTPS connection to the apiserver."""

    def __init__(self, url, ca, token):
        host = url.split("://", 1)[1]
        self.host, self.port = host.rsplit(":", 1)
        self.ctx = ssl.create_default_context(cafile=ca)
        self.token = token
        self.conn = None

    def call(self, method, path, body=None, content_type="application/json"):
        for attempt in range(3):
            try:
                if self.conn is None:
                    self.conn = http.client.HTTPSConnection(self.host, int(self.port), context=self.ctx,
                                                            timeout=60)
                headers = {"Authorization": f"Bearer {self.token}", "Accept": "application/json"}
                data = None
                if body is not None:
                    data = json.dumps(body).encode()
                    headers["Content-Type"] = content_type
                self.conn.request(method, path, body=data, headers=headers)
                r = self.conn.getresponse()
                return r.status, r.read()
            except (OSError, http.client.HTTPException):
                self.conn = None
                if attempt == 2:
                    raise
        raise RuntimeError("unreachable")


def node_object(i):
    name = f"gpu-{i:05d}"
    zone = f"us-east-1{'abcd'[i % 4]}"
    labels = {
        "kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
        "node.kubernetes.io/instance-type": "p5.48xlarge", "beta.kubernetes.io/instance-type": "p5.48xlarge",
        "topology.kubernetes.io/region": "us-east-1", "topology.kubernetes.io/zone": zone,
        "failure-domain.beta.kubernetes.io/zone": zone, "eks.amazonaws.com/nodegroup": f"gpu-ng-{i % 8}",
        "eks.amazonaws.com/capacityType": "ON_DEMAND", "karpenter.sh/capacity-type": "on-demand",
        "nvidia.com/gpu.present": "true", "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
        "nvidia.com/gpu.count": "8", "nvidia.com/gpu.memory": "81559", "nvidia.com/cuda.driver.major": "550",
        "feature.node.kubernetes.io/cpu-model.vendor_id": "AMD",
        "feature.node.kubernetes.io/pci-10de.present": "true",
        "feature.node.kubernetes.io/kernel-version.major": "6",
        "node-group": "gpu", "example.com/heartbeat": "0",
    }
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels}}


def snapshot(n):
    nodes = {}
    for i in range(min(n, SNAPSHOT_NODES)):
        nodes[f"gpu-{i:05d}"] = {LEVELS[0]: "us-east-1", LEVELS[1]: f"us-east-1{'abcd'[i // 16 % 4]}",
                                 LEVELS[2]: f"rack-{i // 16}"}
    return {"apiVersion": "topology.gpustack.ai/v1alpha1", "revision": f"scale-{n}", "nodes": nodes}


TOPOLOGY_SOURCE = """apiVersion: worker.gpustack.ai/v1alpha1
kind: TopologySource
metadata: {name: dc}
spec:
  levels: [topology.gpustack.ai/region, topology.gpustack.ai/zone, topology.gpustack.ai/rack]
  nodeSelector: {matchLabels: {node-group: gpu}}
  webhook:
    url: https://127.0.0.1/snapshots/dc
    pollInterval: 1m
    timeout: 10s
    maxStaleness: 10m
    bearerTokenSecretRef: {namespace: gpustack-system, name: topology-inventory-token, key: token}
"""


def proc_cpu(pid):
    """CPU seconds of every thread of `pid`, in nanoseconds' resolution (schedstat's run time;
    /proc/PID/stat counts clock ticks of 10 ms, too coarse for a change that costs less)."""
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                total += int(f.read().split()[0])
        except OSError:
            pass  # a thread that ended meanwhile
    return total / 1e9


def proc_mem(pid, key):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) / 1024.0  # MiB
    return 0.0


class Topogate:
    def __init__(self, binary, work, cp_env, n):
        self.work = work
        d = work
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                        "-nodes", "-keyout", f"{d}/tls.key", "-out", f"{d}/tls.crt", "-days", "2",
                        "-subj", "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1"],
                       check=True, capture_output=True)
        with open(f"{d}/token", "w") as f:
            f.write("scale-reader-token\n")
        with open(f"{d}/source.yaml", "w") as f:
            f.write(TOPOLOGY_SOURCE)
        with open(f"{d}/snapshot.json", "w") as f:
            json.dump(snapshot(n), f, separators=(",", ":"))
        self.port = free_port()
        with open(f"{d}/config.yaml", "w") as f:
            f.write(f"""listen: {{address: 127.0.0.1, port: {self.port}}}
tls: {{certFile: {d}/tls.crt, keyFile: {d}/tls.key}}
threads: 1
store:
  type: none
  apiServer: {cp_env['TOPOGATE_CP_URL']}
  tokenFile: {cp_env['TOPOGATE_CP_ADMIN_TOKEN_FILE']}
  caFile: {cp_env['TOPOGATE_CP_CA']}
inventories:
  - name: dc
    source: {d}/source.yaml
    snapshot: {d}/snapshot.json
    nodesFromAPI: true
    unknownNodes: prune
    readers: {{bearerTokenFiles: [{d}/token]}}
""")
        self.t0 = time.monotonic()
        self.log = open(f"{d}/topogate.log", "w")
        self.proc = subprocess.Popen([binary, "serve", "--config", f"{d}/config.yaml"],
                                     stdout=self.log, stderr=subprocess.STDOUT)
        self.ctx = ssl.create_default_context(cafile=f"{d}/tls.crt")
        self.conn = None

    def get(self, path, etag=None):
        if self.conn is None:
            self.conn = http.client.HTTPSConnection("127.0.0.1", self.port, context=self.ctx, timeout=10)
        headers = {"Authorization": "Bearer scale-reader-token"}
        if etag:
            headers["If-None-Match"] = etag
        try:
            self.conn.request("GET", path, headers=headers)
            r = self.conn.getresponse()
            r.read()
            return r.status, r.getheader("ETag")
        except (OSError, http.client.HTTPException):
            self.conn = None
            return 0, None

    def wait_ready(self, timeout=120):
        while time.monotonic() - self.t0 < timeout:
            if self.proc.poll() is not None:
                self.log.flush()
                with open(self.work + "/topogate.log") as f:
                    raise RuntimeError("topogate exited:\n" + "".join(f.readlines()[-5:]))
            status, etag = self.get("/snapshots/dc")
            if status == 200:
                return time.monotonic() - self.t0, etag
            time.sleep(0.05)
        self.log.flush()
        with open(self.work + "/topogate.log") as f:
            lines = [l for l in f if '"msg":"request"' not in l]
        raise RuntimeError("topogate not ready in time:\n" + "".join(lines[-6:]))

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()


def free_port():
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def merge_patch(api, name, labels):
    st, body = api.call("PATCH", f"/api/v1/nodes/{name}", {"metadata": {"labels": labels}},
                        "application/merge-patch+json")
    if st != 200:
        raise RuntimeError(f"patch {name}: {st} {body[:200]!r}")


def churn(api, tg, n, rate, seconds, relevant):
    """Changes at `rate` per second for `seconds`; returns (changes, cpu per change ms, latencies)."""
    pid = tg.proc.pid
    rng = random.Random(n)
    cpu0 = proc_cpu(pid)
    latencies = []
    changes = 0
    interval = 1.0 / rate
    start = time.monotonic()
    _, etag = tg.get("/snapshots/dc")
    rss_peak = 0.0
    while time.monotonic() - start < seconds:
        t = time.monotonic()
        i = rng.randrange(min(n, SNAPSHOT_NODES))
        name = f"gpu-{i:05d}"
        if relevant:
            # Out of the nodeSelector and back in: the served revision prunes the Node, then
            # describes it again. Each flip is a change; the ETag moves with each.
            for value in ("cpu", "gpu"):
                t_change = time.monotonic()
                merge_patch(api, name, {"node-group": value})
                changes += 1
                while time.monotonic() - t_change < 10:
                    status, new = tg.get("/snapshots/dc", etag)
                    if status == 200 and new != etag:
                        latencies.append(time.monotonic() - t_change)
                        etag = new
                        break
                    time.sleep(0.005)
        else:
            merge_patch(api, name, {"example.com/heartbeat": str(changes)})
            changes += 1
        rss_peak = max(rss_peak, proc_mem(pid, "VmRSS"))
        pause = interval - (time.monotonic() - t)
        if pause > 0:
            time.sleep(pause)
    time.sleep(1.0)  # the last changes applied (coalescing waits 200 ms)
    cpu = proc_cpu(pid) - cpu0
    return changes, 1000.0 * cpu / max(changes, 1), latencies, rss_peak


def compact(cp_env):
    """Compacts etcd's history at its current revision: every watch then gets 410 Gone."""
    import urllib.request
    with open(os.path.join(cp_env["TOPOGATE_CP_DIR"], "etcd.port")) as f:
        etcd = f"http://127.0.0.1:{f.read().strip()}"
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    rng = opener.open(urllib.request.Request(etcd + "/v3/kv/range", data=json.dumps(
        {"key": "AA=="}).encode(), method="POST"), timeout=10)
    rev = json.loads(rng.read())["header"]["revision"]
    opener.open(urllib.request.Request(etcd + "/v3/kv/compaction", data=json.dumps(
        {"revision": rev, "physical": True}).encode(), method="POST"), timeout=30).read()
    return True


def pct(values, p):
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100.0 * (len(values) - 1))))]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="1000,5000,10000,20000")
    ap.add_argument("--rate", type=float, default=10.0)
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--binary", default=os.path.join(REPO, "build", "release", "cli", "topogate"))
    ap.add_argument("--json")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]

    work = tempfile.mkdtemp(prefix="topogate-node-scale-")
    cp_dir = os.path.join(work, "cp")
    cp_env = {"TOPOGATE_CP_DIR": cp_dir}
    env = dict(os.environ, **cp_env)
    subprocess.run(["bash", CP, "start"], check=True, env=env, stdout=subprocess.DEVNULL)
    try:
        for line in subprocess.run(["bash", CP, "env"], capture_output=True, text=True, env=env,
                                   check=True).stdout.splitlines():
            if "=" in line:
                k, v = line.replace("export ", "", 1).split("=", 1)
                cp_env[k.strip()] = v.strip().strip("'\"")
        with open(cp_env["TOPOGATE_CP_ADMIN_TOKEN_FILE"]) as f:
            token = f.read().strip().split(",")[0]
        api = Api(cp_env["TOPOGATE_CP_URL"], cp_env["TOPOGATE_CP_CA"], token)
        rows = []
        created = 0
        for n in sizes:
            t = time.monotonic()
            while created < n:
                st, body = api.call("POST", "/api/v1/nodes", node_object(created))
                if st not in (201, 409):
                    raise RuntimeError(f"create node {created}: {st} {body[:200]!r}")
                created += 1
            print(f"[{n} Nodes] created in {time.monotonic() - t:.0f} s", file=sys.stderr)
            d = os.path.join(work, f"tg-{n}")
            os.makedirs(d)
            tg = Topogate(args.binary, d, cp_env, n)
            try:
                ready_s, _ = tg.wait_ready()
                time.sleep(1.0)
                rss_listed = proc_mem(tg.proc.pid, "VmRSS")
                # What topogate spends with no change at all (timers, the reconcile loop,
                # the watches' bookmarks), to tell apart from what each change costs.
                cpu0, t_idle = proc_cpu(tg.proc.pid), time.monotonic()
                time.sleep(args.seconds / 2)
                idle_ms_per_s = 1000 * (proc_cpu(tg.proc.pid) - cpu0) / (time.monotonic() - t_idle)
                irr = churn(api, tg, n, args.rate, args.seconds, relevant=False)
                rss_after = proc_mem(tg.proc.pid, "VmRSS")
                rel = churn(api, tg, n, args.rate / 2, args.seconds, relevant=True)
                hwm_before = proc_mem(tg.proc.pid, "VmHWM")
                relist_s = float("nan")
                if compact(cp_env):
                    t = time.monotonic()
                    # One heartbeat after the compaction: the watch resumes from a compacted
                    # version, gets 410 and lists again; the change is seen after the relist.
                    merge_patch(api, "gpu-00000", {"example.com/heartbeat": "relist"})
                    merge_patch(api, "gpu-00000", {"node-group": "cpu"})
                    _, etag = tg.get("/snapshots/dc")
                    while time.monotonic() - t < 60:
                        status, new = tg.get("/snapshots/dc", etag)
                        if status == 200 and new != etag:
                            break
                        time.sleep(0.01)
                    relist_s = time.monotonic() - t
                    merge_patch(api, "gpu-00000", {"node-group": "gpu"})
                row = {
                    "nodes": n, "snapshot_nodes": min(n, SNAPSHOT_NODES),
                    "ready_s": round(ready_s, 2), "rss_listed_mib": round(rss_listed, 1),
                    "idle_cpu_ms_per_s": round(idle_ms_per_s, 3),
                    "irrelevant_changes": irr[0], "irrelevant_cpu_ms": round(irr[1], 3),
                    "irrelevant_net_cpu_ms": round(irr[1] - idle_ms_per_s / args.rate, 3),
                    "rss_churn_peak_mib": round(irr[3], 1), "rss_after_churn_mib": round(rss_after, 1),
                    "relevant_changes": rel[0], "relevant_cpu_ms": round(rel[1], 3),
                    "served_p50_ms": round(1000 * pct(rel[2], 50), 1),
                    "served_p99_ms": round(1000 * pct(rel[2], 99), 1),
                    "relist_s": round(relist_s, 2),
                    "peak_rss_mib": round(max(hwm_before, proc_mem(tg.proc.pid, "VmHWM")), 1),
                }
                rows.append(row)
                print(json.dumps(row), file=sys.stderr)
            finally:
                tg.stop()
        print("| Nodes (snapshot) | ready | RSS listed | idle CPU | irrelevant change CPU (net of idle) "
              "| RSS churn peak / after | relevant change CPU | served p50 / p99 | relist | peak RSS |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        for r in rows:
            print(f"| {r['nodes']} ({r['snapshot_nodes']}) | {r['ready_s']} s | {r['rss_listed_mib']} MiB "
                  f"| {r['idle_cpu_ms_per_s']} ms/s "
                  f"| {r['irrelevant_cpu_ms']} ms ({r['irrelevant_net_cpu_ms']} ms; {r['irrelevant_changes']}) "
                  f"| {r['rss_churn_peak_mib']} / {r['rss_after_churn_mib']} MiB "
                  f"| {r['relevant_cpu_ms']} ms ({r['relevant_changes']}) "
                  f"| {r['served_p50_ms']} / {r['served_p99_ms']} ms | {r['relist_s']} s | {r['peak_rss_mib']} MiB |")
        if args.json:
            with open(args.json, "w") as f:
                json.dump(rows, f, indent=1)
    finally:
        subprocess.run(["bash", CP, "stop"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

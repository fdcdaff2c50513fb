#!/usr/bin/env python3
"""topogate's Node watch at cluster scale, against a real kube-apiserver. A benchmark, not a
test: it prints a table of measured figures and asserts nothing.

For each cluster size it creates that many Node objects with the ~20 labels cloud GPU Nodes
carry (instance type, zone, region, NFD and GPU-operator labels, node group), starts topogate
(release build, threads: 1) with one inventory that lists Nodes through the API
(nodesFromAPI: true, unknownNodes: prune) and a snapshot describing up to 7,000 of them, then:

- start to ready, and RSS once the list is in;
- irrelevant churn: a label no rule reads (example.com/heartbeat) changed on random Nodes at
  --irrelevant-rate per second for --seconds: topogate's CPU time per change (the run time of all its
  threads, /proc/PID/task/*/schedstat), RSS during and after;
- relevant churn: --rate changes a second, each a Node's selector label (node-group) flipped
  out of the inventory's nodeSelector or, 0.5 s after it left, back in (no coalescing window
  holds both, so none cancels out): CPU per change (nothing reads topogate meanwhile) and how
  many revisions topogate accepted for them, over --repeat passes (the median one's figures,
  each pass's net CPU and ratio kept), then for half as long the time from each flip
  to the served revision's ETag changing (p50/p99, polled with If-None-Match every 5 ms);
- a sustained burst (--burst-rate changes a second for --burst-seconds, from four client
  connections): each change takes a different Node out of the selection; the served body is
  read at each new ETag, and a change's latency is the time until the first served revision
  that no longer lists its Node (p50/p99, and how many were never seen within 10 s);
- a relist: etcd's history compacted and the kube-apiserver restarted (a compaction alone ends
  no open watch), so the watch's resume fails and it lists every Node again: the list's own
  time as topogate logs it, the time from the API server being back to a change made then
  being served, and the relist's own peak RSS (VmHWM reset just before it, so the burst's
  peak is not counted as the relist's) beside the RSS after the list;
- admission latency (an AdmissionReview every 50 ms on a kept-alive connection) while idle
  and during each churn, p50/p99, and the p99 of each churn apart: the Node watch must not
  delay the webhook. An irrelevant change costs topogate a tenth of a relevant one but
  the API server as much, so a p99 that rises as much there as under the relevant churn is
  the machine's (the API server, etcd and this script share its cores), not topogate's; so
  too for the burst, beside an irrelevant burst at the same rate from the same writers with
  nothing reading topogate.
  During the relevant churn and the burst, readers poll topogate meanwhile (the served
  latency) and read each new revision's body: with `threads: 1` a review can wait behind
  such a read on the one I/O thread. The CPU figures above are taken in passes without the
  probe (a review costs more than a change);
- the floor: a bare TLS reader of the same metadata-only watch (curl --http1.1, its output
  thrown away) under another irrelevant churn pass, its CPU per change: what receiving an
  event costs before anything is done with it (off with --no-floor);
- with --kueue, the same churn beside the reference: the TAS lab's Kueue v0.17.0 controller
  manager (scripts/tas-lab.sh up: controller-runtime informers over the same Nodes) on the
  same control plane, its CPU per change and RSS, and topogate's as a ratio to Kueue's.

Usage: bench/node_scale.py [--sizes 1000,5000,10000,20000] [--rate 10] [--irrelevant-rate 50]
                           [--seconds 20] [--repeat 3]
                           [--burst-rate 200] [--burst-seconds 5] [--kueue] [--no-floor]
                           [--binary build/release/cli/topogate] [--json FILE]
It starts its own control plane (test/e2e/control-plane.sh, state in a temporary folder),
or with --kueue a TAS lab of its own (TAS_LAB_DIR in the same folder).
"""

import argparse
import collections
import http.client
import itertools
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


def reset_peak(pid):
    """Resets the process's VmHWM to its VmRSS (Linux: 5 written to clear_refs), so that a
    later VmHWM is the peak of what came after, not of the whole run."""
    with open(f"/proc/{pid}/clear_refs", "w") as f:
        f.write("5")


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
        # The log in a folder of its own: topogate watches the snapshot's folder, and each line
        # written there would wake its reconcile loop (an operator's log goes to stdout).
        # Its stderr is a pipe that a thread of this script copies to the file, as a container
        # runtime reads a container's log from a pipe: topogate's own log writes are then what
        # they are in a Pod (a line written by the thread that logs it, when the pipe takes it).
        os.makedirs(f"{d}/log")
        self.log = open(f"{d}/log/topogate.log", "wb", buffering=0)
        self.proc = subprocess.Popen([binary, "serve", "--config", f"{d}/config.yaml"],
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT)

        def copy_log(src, dst):
            while chunk := src.read1(65536):
                dst.write(chunk)
        self.log_copier = threading.Thread(target=copy_log, args=(self.proc.stdout, self.log), daemon=True)
        self.log_copier.start()
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
                self.log_copier.join(timeout=5)
                with open(self.work + "/log/topogate.log") as f:
                    raise RuntimeError("topogate exited:\n" + "".join(f.readlines()[-5:]))
            status, etag = self.get("/snapshots/dc")
            if status == 200:
                return time.monotonic() - self.t0, etag
            time.sleep(0.05)
        with open(self.work + "/log/topogate.log") as f:
            lines = [l for l in f if '"msg":"request"' not in l]
        raise RuntimeError("topogate not ready in time:\n" + "".join(lines[-6:]))

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log_copier.join(timeout=5)
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


class Prober(threading.Thread):
    """An AdmissionReview every 50 ms on a kept-alive connection; keeps each answer's time."""

    def __init__(self, tg):
        super().__init__(daemon=True)
        with open(os.path.join(REPO, "bench", "http", "review-valid.json"), "rb") as f:
            self.body = f.read()
        self.tg, self.times, self.errors, self.stop_at = tg, [], 0, None
        self.lock = threading.Lock()
        self.halt = threading.Event()
        self.running = threading.Event()  # cleared: no review is sent (CPU figures are taken)

    def pause(self):
        self.running.clear()
        time.sleep(0.2)  # a review in flight is answered

    def resume(self):
        self.running.set()

    def take(self):
        """The times since the last take (seconds)."""
        with self.lock:
            out, self.times = self.times, []
        return out

    def run(self):
        conn = None
        while not self.halt.is_set():
            if not self.running.wait(0.1):
                continue
            t = time.monotonic()
            try:
                if conn is None:
                    conn = http.client.HTTPSConnection("127.0.0.1", self.tg.port, context=self.tg.ctx,
                                                       timeout=10)
                conn.request("POST", "/validate/topologysources", body=self.body,
                             headers={"Content-Type": "application/json"})
                r = conn.getresponse()
                r.read()
                if r.status != 200:
                    self.errors += 1
                with self.lock:
                    self.times.append(time.monotonic() - t)
            except (OSError, http.client.HTTPException):
                conn = None
                self.errors += 1
            self.halt.wait(max(0.0, 0.05 - (time.monotonic() - t)))


_PASSES = itertools.count()


# A Node taken out of the selection by the relevant churn returns after this long: more than two
# coalescing windows (200 ms each), so that no window holds both its leaving and its return
# (changes that cancel out within a window cost topogate next to nothing, and how many did
# would depend on where the windows happened to fall).
RETURN_AFTER_S = 0.5


def accepted_revisions(tg):
    """How many revisions topogate has accepted, from its log ("accepted revision" lines)."""
    tg.log.flush()
    with open(os.path.join(tg.work, "log", "topogate.log")) as f:
        return sum(1 for line in f if "accepted revision" in line)


def churn(api, tg, n, rate, seconds, relevant, kueue_pid=None, poll=True):
    """Changes at `rate` per second for `seconds` (relevant: `rate` steps a second, two changes
    each); returns (changes, cpu per change ms, latencies, rss peak, Kueue's cpu per change ms,
    Kueue's rss peak, revisions topogate accepted, the pass's seconds)."""
    pid = tg.proc.pid
    rng = random.Random(n)
    # Each pass writes values of its own: a pass that set the values an earlier one set (the
    # same Nodes in the same order) would patch nothing, and the apiserver sends no event.
    tag = next(_PASSES)
    revisions0 = accepted_revisions(tg)
    cpu0 = proc_cpu(pid)
    kcpu0 = proc_cpu(kueue_pid) if kueue_pid else 0.0
    krss_peak = 0.0
    latencies = []
    changes = 0
    interval = 1.0 / rate
    start = time.monotonic()
    _, etag = tg.get("/snapshots/dc")
    rss_peak = 0.0
    out = collections.deque()  # (when, name) of the Nodes out of the selection, oldest first

    def relevant_change(name, value):
        # Each change moves the ETag: the served revision prunes the Node, or describes it again.
        nonlocal changes, etag
        t_change = time.monotonic()
        merge_patch(api, name, {"node-group": value})
        changes += 1
        if not poll:
            # CPU alone: no reader polling topogate meanwhile (each poll is a request topogate
            # answers, which is not the Node change's cost).
            return
        while time.monotonic() - t_change < 10:
            status, new = tg.get("/snapshots/dc", etag)
            if status == 200 and new != etag:
                latencies.append(time.monotonic() - t_change)
                etag = new
                return
            time.sleep(0.005)

    while time.monotonic() - start < seconds:
        t = time.monotonic()
        if relevant:
            # A Node out of the selection, and one that left RETURN_AFTER_S ago back in: two
            # changes a step, neither cancelled by the other within a window.
            taken = {name for _, name in out}
            while (name := name_of(rng, n)) in taken:
                pass
            relevant_change(name, "cpu")
            out.append((time.monotonic(), name))
            if not poll:
                time.sleep(max(0.0, interval / 2 - (time.monotonic() - t)))
            if time.monotonic() - out[0][0] >= RETURN_AFTER_S:
                relevant_change(out.popleft()[1], "gpu")
        else:
            merge_patch(api, name_of(rng, n), {"example.com/heartbeat": f"{tag}-{changes}"})
            changes += 1
        rss_peak = max(rss_peak, proc_mem(pid, "VmRSS"))
        if kueue_pid:
            krss_peak = max(krss_peak, proc_mem(kueue_pid, "VmRSS"))
        pause = interval - (time.monotonic() - t)
        if pause > 0:
            time.sleep(pause)
    while out:  # the pass leaves every Node as it found it
        relevant_change(out.popleft()[1], "gpu")
    time.sleep(1.0)  # the last changes applied (coalescing waits 200 ms)
    cpu = proc_cpu(pid) - cpu0
    kcpu = (proc_cpu(kueue_pid) - kcpu0) if kueue_pid else float("nan")
    return (changes, 1000.0 * cpu / max(changes, 1), latencies, rss_peak,
            1000.0 * kcpu / max(changes, 1), krss_peak, accepted_revisions(tg) - revisions0,
            time.monotonic() - start)


def name_of(rng, n):
    return f"gpu-{rng.randrange(min(n, SNAPSHOT_NODES)):05d}"


def bare_reader(cp_env, token):
    """curl reading the Node watch as topogate does (metadata only, HTTP/1.1, TLS) from the
    current version, its output thrown away."""
    api = Api(cp_env["TOPOGATE_CP_URL"], cp_env["TOPOGATE_CP_CA"], token)
    st, body = api.call("GET", "/api/v1/nodes?limit=1")
    version = json.loads(body)["metadata"]["resourceVersion"]
    return subprocess.Popen(
        ["curl", "-sN", "--http1.1", "--cacert", cp_env["TOPOGATE_CP_CA"],
         "-H", "Authorization: Bearer " + token,
         "-H", "Accept: application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1",
         cp_env["TOPOGATE_CP_URL"] + "/api/v1/nodes?watch=1&allowWatchBookmarks=true&resourceVersion=" + version],
        stdout=subprocess.DEVNULL)


def served_names(tg, etag):
    """The Node names of the served revision and its ETag; (None, etag) while it is `etag`."""
    try:
        if tg.conn is None:
            tg.conn = http.client.HTTPSConnection("127.0.0.1", tg.port, context=tg.ctx, timeout=10)
        headers = {"Authorization": "Bearer scale-reader-token"}
        if etag:
            headers["If-None-Match"] = etag
        tg.conn.request("GET", "/snapshots/dc", headers=headers)
        r = tg.conn.getresponse()
        body = r.read()
        if r.status != 200:
            return None, None
        return set(json.loads(body)["nodes"]), r.getheader("ETag")
    except (OSError, http.client.HTTPException, ValueError):
        tg.conn = None
        return None, None


def burst(api_factory, tg, n, rate, seconds, relevant=True):
    """`rate` changes a second for `seconds`, each taking a different Node out of the
    selection (four client connections). Returns (changes, latencies, not seen, cpu ms per
    change: the reader's polls every 10 ms with If-None-Match included); the Nodes are put
    back afterwards, unmeasured. Not `relevant`: each change sets a label no rule reads
    instead, and nothing reads topogate meanwhile (the API server's load without topogate's
    work: the control for the admission latency during the burst)."""
    count = min(int(rate * seconds), min(n, SNAPSHOT_NODES) - 1)
    tag = next(_PASSES)
    names = [f"gpu-{i:05d}" for i in random.Random(n + 1).sample(range(min(n, SNAPSHOT_NODES)), count)]
    changed_at = {}
    lock = threading.Lock()
    start = time.monotonic() + 0.5
    workers = 4

    def writer(k):
        api = api_factory()
        for j in range(k, count, workers):
            due = start + j / rate
            pause = due - time.monotonic()
            if pause > 0:
                time.sleep(pause)
            t = time.monotonic()
            merge_patch(api, names[j], {"node-group": "cpu"} if relevant
                        else {"example.com/heartbeat": f"burst-{tag}-{j}"})
            with lock:
                changed_at[names[j]] = t

    cpu0 = proc_cpu(tg.proc.pid)
    threads = [threading.Thread(target=writer, args=(k,), daemon=True) for k in range(workers)]
    for th in threads:
        th.start()
    latencies = {}
    etag = None
    deadline = start + seconds + 10
    while relevant and time.monotonic() < deadline and len(latencies) < count:
        present, new = served_names(tg, etag)
        now = time.monotonic()
        if present is not None and new != etag:
            etag = new
            with lock:
                pending = [(m, t) for m, t in changed_at.items() if m not in latencies]
            for m, t in pending:
                if m not in present:
                    latencies[m] = now - t
        time.sleep(0.01)
    for th in threads:
        th.join()
    cpu = proc_cpu(tg.proc.pid) - cpu0
    if not relevant:
        return count, [], 0, 1000.0 * cpu / max(count, 1)
    api = api_factory()
    for m in names:
        merge_patch(api, m, {"node-group": "gpu"})
    return count, sorted(latencies.values()), count - len(latencies), 1000.0 * cpu / max(count, 1)


def compact(cp_env):
    """Compacts etcd's history at its current revision: a watch that resumes from a version
    before it gets 410 Gone (one that stays open is not ended by it)."""
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


def relist(cp_env, env, api, tg):
    """Makes topogate list every Node again and measures it. A compaction alone ends no open
    watch: the kube-apiserver is also restarted (same port), so the watch ends, its resume from
    a compacted version fails, and the Node watch lists again. Returns the time from the API
    server being back to a change made then being served, and the relist's own time and Node
    count as topogate logs them ("Node watch: listed again N Nodes in M ms"); NaN and 0 when
    no relist was logged."""
    time.sleep(1.0)  # the burst's last changes served first: no ETag of theirs is taken for it
    tg.log.flush()
    with open(os.path.join(tg.work, "log", "topogate.log")) as f:
        f.seek(0, os.SEEK_END)
        mark = f.tell()
    compact(cp_env)
    subprocess.run(["bash", CP, "apiserver-stop"], check=True, env=env, stdout=subprocess.DEVNULL)
    subprocess.run(["bash", CP, "apiserver-start"], check=True, env=env, stdout=subprocess.DEVNULL)
    t = time.monotonic()
    merge_patch(api, "gpu-00000", {"node-group": "cpu"})
    _, etag = tg.get("/snapshots/dc")
    served = float("nan")
    while time.monotonic() - t < 60:
        status, new = tg.get("/snapshots/dc", etag)
        if status == 200 and new != etag:
            served = time.monotonic() - t
            break
        time.sleep(0.01)
    merge_patch(api, "gpu-00000", {"node-group": "gpu"})
    list_ms, nodes = float("nan"), 0
    with open(os.path.join(tg.work, "log", "topogate.log")) as f:
        f.seek(mark)
        for line in f:
            try:
                msg = json.loads(line).get("msg", "")
            except ValueError:
                continue
            if msg.startswith("Node watch: listed again "):
                words = msg.split()
                nodes, list_ms = int(words[4]), float(words[7])
    return served, list_ms, nodes


def ratio(a, b):
    return round(a / b, 3) if b > 0 else float("nan")


def pct(values, p):
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100.0 * (len(values) - 1))))]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="1000,5000,10000,20000")
    ap.add_argument("--rate", type=float, default=10.0)
    ap.add_argument("--irrelevant-rate", type=float, default=50.0,
                    help="irrelevant changes per second in the CPU pass: a change costs tens of "
                         "microseconds, so at 10/s the process's own periodic work (timers, "
                         "resyncs) is as large as the changes and its noise swamps them")
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--repeat", type=int, default=3,
                    help="relevant churn passes for the CPU figures (the median one is reported)")
    ap.add_argument("--burst-rate", type=float, default=200.0)
    ap.add_argument("--burst-seconds", type=float, default=5.0)
    ap.add_argument("--kueue", action="store_true",
                    help="run Kueue's controller manager beside topogate (a TAS lab of its own)")
    ap.add_argument("--no-floor", action="store_true",
                    help="skip the bare TLS reader's pass (curl on the same watch)")
    ap.add_argument("--binary", default=os.path.join(REPO, "build", "release", "cli", "topogate"))
    ap.add_argument("--json")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]

    work = tempfile.mkdtemp(prefix="topogate-node-scale-")
    lab_dir = os.path.join(work, "lab")
    lab_sh = os.path.join(REPO, "scripts", "tas-lab.sh")
    cp_dir = os.path.join(lab_dir, "cp") if args.kueue else os.path.join(work, "cp")
    cp_env = {"TOPOGATE_CP_DIR": cp_dir}
    env = dict(os.environ, **cp_env)
    kueue_pid = None
    if args.kueue:
        # The lab's control plane, its Kueue, and its own topogate and Nodes (a handful).
        subprocess.run(["bash", lab_sh, "up"], check=True, stdout=subprocess.DEVNULL,
                       env=dict(os.environ, TAS_LAB_DIR=lab_dir))
        with open(os.path.join(lab_dir, "kueue", "pid")) as f:
            kueue_pid = int(f.read().strip())
    else:
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
        api_factory = lambda: Api(cp_env["TOPOGATE_CP_URL"], cp_env["TOPOGATE_CP_CA"], token)
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
                # the watches' bookmarks), to tell apart from what each change costs. The CPU
                # figures are taken with nothing else asking topogate anything: the admission
                # prober (whose reviews cost far more than a change) runs in passes of its own.
                prober = Prober(tg)
                prober.start()
                cpu0, t_idle = proc_cpu(tg.proc.pid), time.monotonic()
                kcpu0 = proc_cpu(kueue_pid) if kueue_pid else 0.0
                time.sleep(args.seconds / 2)
                idle_s = time.monotonic() - t_idle
                idle_ms_per_s = 1000 * (proc_cpu(tg.proc.pid) - cpu0) / idle_s
                kidle_ms_per_s = 1000 * (proc_cpu(kueue_pid) - kcpu0) / idle_s if kueue_pid else float("nan")
                irr = churn(api, tg, n, args.irrelevant_rate, args.seconds, relevant=False,
                            kueue_pid=kueue_pid)
                rss_after = proc_mem(tg.proc.pid, "VmRSS")
                floor_ms = float("nan")
                if not args.no_floor:
                    # A pass of its own: the reader's CPU would otherwise weigh on topogate's figure
                    # (two cores, shared with the apiserver and this script).
                    reader = bare_reader(cp_env, token)
                    try:
                        time.sleep(2.0)
                        rc0 = proc_cpu(reader.pid)
                        fl = churn(api, tg, n, args.irrelevant_rate, args.seconds, relevant=False)
                        floor_ms = 1000.0 * (proc_cpu(reader.pid) - rc0) / max(fl[0], 1)
                    finally:
                        reader.kill()
                        reader.wait()
                # Two changes (one out, one back in) a step at rate/2 steps a second; --repeat
                # passes, the figures of the median one (by topogate's CPU per change, or by
                # the ratio to Kueue's with --kueue), each pass's kept in the row.
                rels = [churn(api, tg, n, args.rate / 2, args.seconds, relevant=True,
                              kueue_pid=kueue_pid, poll=False) for _ in range(args.repeat)]
                # Admission latency: idle, then during each kind of churn.
                prober.resume()
                time.sleep(args.seconds / 2)
                adm_idle = prober.take()
                churn(api, tg, n, args.rate, args.seconds / 2, relevant=False)
                adm_irr = prober.take()
                lat = churn(api, tg, n, args.rate / 2, args.seconds / 2, relevant=True)
                adm_rel = prober.take()
                bst = burst(api_factory, tg, n, args.burst_rate, args.burst_seconds)
                adm_burst = prober.take()
                burst(api_factory, tg, n, args.burst_rate, args.burst_seconds, relevant=False)
                adm_burst_irr = prober.take()
                prober.halt.set()
                prober.join()
                hwm_before = proc_mem(tg.proc.pid, "VmHWM")
                # The relist's own peak: VmHWM from just before it (the burst's and the
                # prober's peaks are in hwm_before).
                rss_before_relist = proc_mem(tg.proc.pid, "VmRSS")
                reset_peak(tg.proc.pid)
                relist_s, relist_list_ms, relist_nodes = relist(cp_env, env, api, tg)
                relist_peak = proc_mem(tg.proc.pid, "VmHWM")
                def net(per_change_ms, idle_per_s, p):
                    # Less the process's idle CPU over the pass (its seconds, per change).
                    return per_change_ms - idle_per_s * p[7] / max(p[0], 1)

                def rel_ratio(p):
                    return ratio(net(p[1], idle_ms_per_s, p), net(p[4], kidle_ms_per_s, p))

                rels.sort(key=rel_ratio if kueue_pid else (lambda p: p[1]))
                rel = rels[len(rels) // 2]

                row = {
                    "nodes": n, "snapshot_nodes": min(n, SNAPSHOT_NODES),
                    "ready_s": round(ready_s, 2), "rss_listed_mib": round(rss_listed, 1),
                    "idle_cpu_ms_per_s": round(idle_ms_per_s, 3),
                    "irrelevant_changes": irr[0], "irrelevant_cpu_ms": round(irr[1], 3),
                    "irrelevant_net_cpu_ms": round(net(irr[1], idle_ms_per_s, irr), 3),
                    "rss_churn_peak_mib": round(irr[3], 1), "rss_after_churn_mib": round(rss_after, 1),
                    "relevant_changes": rel[0], "relevant_revisions": rel[6],
                    "relevant_cpu_ms": round(rel[1], 3),
                    "relevant_net_cpu_ms": round(net(rel[1], idle_ms_per_s, rel), 3),
                    "relevant_passes_net_cpu_ms": [round(net(p[1], idle_ms_per_s, p), 3) for p in rels],
                    "served_p50_ms": round(1000 * pct(lat[2], 50), 1),
                    "served_p99_ms": round(1000 * pct(lat[2], 99), 1),
                    "burst_changes": bst[0], "burst_rate": args.burst_rate,
                    "burst_served_p50_ms": round(1000 * pct(bst[1], 50), 1),
                    "burst_served_p99_ms": round(1000 * pct(bst[1], 99), 1),
                    "burst_not_seen": bst[2], "burst_cpu_ms": round(bst[3], 3),
                    "admission_idle_p50_ms": round(1000 * pct(adm_idle, 50), 2),
                    "admission_idle_p99_ms": round(1000 * pct(adm_idle, 99), 2),
                    "admission_churn_p50_ms": round(1000 * pct(adm_irr + adm_rel + adm_burst, 50), 2),
                    "admission_churn_p99_ms": round(1000 * pct(adm_irr + adm_rel + adm_burst, 99), 2),
                    "admission_irrelevant_p99_ms": round(1000 * pct(adm_irr, 99), 2),
                    "admission_relevant_p99_ms": round(1000 * pct(adm_rel, 99), 2),
                    "admission_burst_p99_ms": round(1000 * pct(adm_burst, 99), 2),
                    "admission_irrelevant_burst_p99_ms": round(1000 * pct(adm_burst_irr, 99), 2),
                    "admission_samples": [len(adm_idle), len(adm_irr), len(adm_rel), len(adm_burst),
                                          len(adm_burst_irr)],
                    "admission_errors": prober.errors,
                    "relist_served_s": round(relist_s, 2),
                    "relist_list_ms": relist_list_ms, "relist_nodes": relist_nodes,
                    "bare_reader_cpu_ms": round(floor_ms, 3),
                    "ratio_irrelevant_to_bare_reader": ratio(net(irr[1], idle_ms_per_s, irr), floor_ms),
                    "peak_rss_mib": round(max(hwm_before, relist_peak), 1),
                    "peak_rss_before_relist_mib": round(hwm_before, 1),
                    "rss_before_relist_mib": round(rss_before_relist, 1),
                    "relist_peak_rss_mib": round(relist_peak, 1),
                    "relist_peak_to_listed": ratio(relist_peak, rss_listed),
                }
                if kueue_pid:
                    row.update({
                        "kueue_idle_cpu_ms_per_s": round(kidle_ms_per_s, 3),
                        "kueue_irrelevant_cpu_ms": round(irr[4], 3),
                        "kueue_irrelevant_net_cpu_ms": round(net(irr[4], kidle_ms_per_s, irr), 3),
                        "kueue_relevant_cpu_ms": round(rel[4], 3),
                        "kueue_rss_peak_mib": round(max([irr[5]] + [p[5] for p in rels]), 1),
                        "kueue_relevant_net_cpu_ms": round(net(rel[4], kidle_ms_per_s, rel), 3),
                        # Net of each process's own idle CPU (topogate's includes answering the
                        # admission probe), so that the ratio compares what the changes cost.
                        "ratio_irrelevant_cpu": ratio(net(irr[1], idle_ms_per_s, irr),
                                                      net(irr[4], kidle_ms_per_s, irr)),
                        "ratio_relevant_cpu": rel_ratio(rel),
                        "ratio_relevant_cpu_passes": [rel_ratio(p) for p in rels],
                        # Gross: each process's CPU per change with its idle CPU in it.
                        "ratio_relevant_cpu_gross": ratio(rel[1], rel[4]),
                        "ratio_rss": ratio(max([irr[3]] + [p[3] for p in rels]),
                                           max([irr[5]] + [p[5] for p in rels])),
                    })
                rows.append(row)
                print(json.dumps(row), file=sys.stderr)
            finally:
                tg.stop()
        print("| Nodes (snapshot) | ready | RSS listed | idle CPU | irrelevant change CPU (net of idle) "
              "| RSS churn peak / after | relevant change CPU (net) | served p50 / p99 "
              "| relist: list (Nodes) / change served after API back "
              "| peak RSS: before the relist / the relist's (to RSS listed) |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        for r in rows:
            print(f"| {r['nodes']} ({r['snapshot_nodes']}) | {r['ready_s']} s | {r['rss_listed_mib']} MiB "
                  f"| {r['idle_cpu_ms_per_s']} ms/s "
                  f"| {r['irrelevant_cpu_ms']} ms ({r['irrelevant_net_cpu_ms']} ms; {r['irrelevant_changes']}) "
                  f"| {r['rss_churn_peak_mib']} / {r['rss_after_churn_mib']} MiB "
                  f"| {r['relevant_cpu_ms']} ms ({r['relevant_net_cpu_ms']} ms; {r['relevant_changes']}; "
                  f"{r['relevant_revisions']} revisions) "
                  f"| {r['served_p50_ms']} / {r['served_p99_ms']} ms "
                  f"| {r['relist_list_ms']} ms ({r['relist_nodes']}) / {r['relist_served_s']} s "
                  f"| {r['peak_rss_before_relist_mib']} / {r['relist_peak_rss_mib']} MiB "
                  f"({r['relist_peak_to_listed']}x) |")
        print()
        print(f"| Nodes | burst: changes at {args.burst_rate:g}/s | served p50 / p99 | not served in 10 s "
              "| CPU per burst change | admission p50 / p99 idle | during churn "
              "| p99 during: irrelevant churn / relevant churn / the burst / an irrelevant burst |")
        print("|---|---|---|---|---|---|---|---|")
        for r in rows:
            print(f"| {r['nodes']} | {r['burst_changes']} | {r['burst_served_p50_ms']} / {r['burst_served_p99_ms']} ms "
                  f"| {r['burst_not_seen']} | {r['burst_cpu_ms']} ms "
                  f"| {r['admission_idle_p50_ms']} / {r['admission_idle_p99_ms']} ms "
                  f"| {r['admission_churn_p50_ms']} / {r['admission_churn_p99_ms']} ms "
                  f"| {r['admission_irrelevant_p99_ms']} / {r['admission_relevant_p99_ms']} / "
                  f"{r['admission_burst_p99_ms']} / {r['admission_irrelevant_burst_p99_ms']} ms |")
        if not args.no_floor:
            print()
            print("| Nodes | bare TLS reader of the same watch (curl --http1.1): CPU per change "
                  "| topogate: irrelevant change (net) | topogate / bare reader |")
            print("|---|---|---|---|")
            for r in rows:
                print(f"| {r['nodes']} | {r['bare_reader_cpu_ms']} ms | {r['irrelevant_net_cpu_ms']} ms "
                      f"| {r['ratio_irrelevant_to_bare_reader']}× |")
        if args.kueue:
            print()
            print("| Nodes | Kueue idle CPU | Kueue irrelevant change CPU (net) | Kueue relevant change CPU "
                  "| Kueue RSS peak | topogate / Kueue (net CPU): irrelevant, relevant; RSS peak "
                  "| relevant, each pass (net) | relevant, gross |")
            print("|---|---|---|---|---|---|---|---|")
            for r in rows:
                print(f"| {r['nodes']} | {r['kueue_idle_cpu_ms_per_s']} ms/s | {r['kueue_irrelevant_cpu_ms']} ms "
                      f"({r['kueue_irrelevant_net_cpu_ms']} ms) | {r['kueue_relevant_cpu_ms']} ms ({r['kueue_relevant_net_cpu_ms']} ms) "
                      f"| {r['kueue_rss_peak_mib']} MiB | {r['ratio_irrelevant_cpu']}×, {r['ratio_relevant_cpu']}×, "
                      f"{r['ratio_rss']}× | {', '.join(f'{x}×' for x in r['ratio_relevant_cpu_passes'])} "
                      f"| {r['ratio_relevant_cpu_gross']}× |")
        if args.json:
            with open(args.json, "w") as f:
                json.dump(rows, f, indent=1)
    finally:
        if args.kueue:
            subprocess.run(["bash", lab_sh, "down"], env=dict(os.environ, TAS_LAB_DIR=lab_dir),
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        else:
            subprocess.run(["bash", CP, "stop"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

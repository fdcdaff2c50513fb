#!/usr/bin/env python3
"""HTTP benchmark: topogate side by side with its peers, in one run, on one machine.

Peers:
  nginx      Debian's nginx set up equivalently: the same ECDSA P-256 certificate and key,
             TLS 1.3 negotiated, session tickets and session cache off, the same bearer
             check, the exact snapshot bytes topogate serves, keep-alive without a request
             cap, one worker. For the admission route it returns topogate's reply as a
             static body (the floor of what any webhook can do).
  crwebhook  a Go admission webhook on controller-runtime's webhook server
             (bench/peers/crwebhook, rules T1-T14), GOMAXPROCS=1.

Every server runs pinned to --server-cpu, wrk (one thread) to --client-cpu. All servers
start together and each scenario runs topogate then its peers back to back, so a change
of machine load hits both sides of a ratio alike.

Scenarios (names for --scenarios):
  get1k, get1m        GET a 1 KiB / ~1 MiB snapshot, keep-alive, --connections (32)
  get1k-c1, get1m-c1  the same over one connection (latency)
  handshake           a new TLS connection per request (Connection: close, 1 KiB GET):
                      the server's CPU microseconds per handshake; req/s is the client's limit
  post-valid,         POST /validate/topologysources with a ~2.6 KiB TopologySource
  post-invalid        AdmissionReview (bench/http/review-*.json), --connections (32)
  memory              topogate RSS idle (one 1 KiB inventory), and with 16 inventories of
                      ~1 MiB each after every one was fetched and 3 s of 1 MiB GETs
                      (VmRSS / VmHWM from /proc/PID/status); the peers' idle RSS for reference
  stall               topogate alone (threads: 2, a kubernetes store whose API server completes
                      TLS and never answers): admission p50/p99 idle, then while --stall-pushes
                      PUTs per second hang against the store; an open-loop client of its own,
                      not wrk (bench/http/stall.py says why)

Prints a markdown table: req/s, p50, p99, server CPU us/request (utime+stime from
/proc/PID/stat over the measured run), peak RSS (VmHWM), the topogate/peer ratios, and
the issue's goal with met / not met. Not a test: the figures depend on the machine and
its load (reported with the table).

usage: bench/http/run.py [--binary build/release/cli/topogate] [--peer PATH]
                         [--duration 10] [--connections 32] [--scenarios get1k,...]
                         [--server-cpu 0] [--client-cpu 1] [--repeat 1] [--json FILE] [--keep]
                         [--store-timeout 2s|none] [--stall-rate 100] [--stall-pushes 8]
                         [--stall-threads 2]
bench/run.sh builds topogate (release preset) and the peer, then runs this.
"""

import argparse
import json
import os
import platform
import re
import shutil
import signal
import statistics
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import stall

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
TOKEN = "bench-token-0123456789abcdef0123456789abcdef"
CLK_TCK = os.sysconf("SC_CLK_TCK")
# S10: the served JSON is at most 1 MiB; stay just below it.
LARGE_TARGET = 1_040_000
ALL_SCENARIOS = ["get1k", "get1m", "get1k-c1", "get1m-c1", "handshake", "post-valid", "post-invalid", "memory",
                 "stall"]

SOURCE = """apiVersion: worker.gpustack.ai/v1
kind: TopologySource
metadata: {name: bench}
spec:
  levels: [topology.gpustack.ai/region, topology.gpustack.ai/zone, topology.gpustack.ai/rack]
  configMap:
    configMapRef: {namespace: gpustack-system, name: topology-inventory}
    key: snapshot.json
    maxStaleness: 10m
"""


# ---------------------------------------------------------------- inputs

def snapshot_json(target_bytes, tag="0"):
    """A valid snapshot (JSON, keys sorted, compact: what topogate serves back) of at most
    target_bytes; `tag` makes the node names and revision distinct per inventory."""
    def node(i):
        region, zone, rack = i // 4096, i // 256, i // 16
        return (f"gpu-{tag}-{i:06d}", {"topology.gpustack.ai/rack": f"rack-{rack:05d}",
                                       "topology.gpustack.ai/region": f"region-{region:02d}",
                                       "topology.gpustack.ai/zone": f"zone-{zone:04d}"})

    def render(n):
        return json.dumps({"apiVersion": "topology.gpustack.ai/v1alpha1", "nodes": dict(node(i) for i in range(n)),
                           "revision": f"bench-{tag}"}, separators=(",", ":"), sort_keys=True)

    one = len(render(1))
    per = len(render(2)) - one
    n = max(1, 1 + (target_bytes - one) // per)
    text = render(n)
    while len(text) > target_bytes and n > 1:
        n -= 1
        text = render(n)
    return text


def sh(*cmd, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw)


def make_certs(d: Path):
    sh("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
       "-keyout", str(d / "ca.key"), "-out", str(d / "ca.crt"), "-subj", "/CN=bench CA", "-days", "2")
    sh("openssl", "req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
       "-keyout", str(d / "server.key"), "-out", str(d / "server.csr"), "-subj", "/CN=localhost")
    (d / "san.ext").write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    sh("openssl", "x509", "-req", "-in", str(d / "server.csr"), "-CA", str(d / "ca.crt"), "-CAkey", str(d / "ca.key"),
       "-CAcreateserial", "-out", str(d / "server.crt"), "-days", "2", "-extfile", str(d / "san.ext"))
    os.chmod(d / "server.key", 0o644)  # nginx workers may run as another user


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---------------------------------------------------------------- processes

def proc_status(pid):
    out = {}
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            k, _, v = line.partition(":")
            if k in ("VmRSS", "VmHWM"):
                out[k] = int(v.split()[0]) * 1024
    except OSError:
        pass
    return out


def cpu_ticks(pids):
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime (all threads)
    return total


class Server:
    def __init__(self, name, cmd, port, work, env=None, stop_signal=signal.SIGTERM):
        self.name, self.port, self.stop_signal = name, port, stop_signal
        self.log = work / f"{name}.log"
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=open(self.log, "w"),
                                     env={**os.environ, **(env or {})})

    def wait_ready(self, timeout=60):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise SystemExit(f"{self.name} exited with {self.proc.returncode}; see {self.log}:\n"
                                 + self.log.read_text()[-2000:])
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return
            except OSError:
                time.sleep(0.05)
        raise SystemExit(f"{self.name}: port {self.port} did not open")

    def pids(self):
        # taskset execs the server, so the Popen pid is the server; nginx adds its workers.
        out = subprocess.run(["pgrep", "-P", str(self.proc.pid)], capture_output=True, text=True).stdout.split()
        return [self.proc.pid] + [int(p) for p in out]

    def rss(self):
        """(VmRSS, VmHWM) summed over the server's processes, bytes."""
        rss = hwm = 0
        for pid in self.pids():
            st = proc_status(pid)
            rss += st.get("VmRSS", 0)
            hwm += st.get("VmHWM", 0)
        return rss, hwm

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(self.stop_signal)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


# ---------------------------------------------------------------- load

def parse_wrk(text):
    def latency(label):
        m = re.search(rf"^\s*{label}%\s+([\d.]+)(us|ms|s)\s*$", text, re.M)
        if not m:
            return float("nan")
        v, unit = float(m.group(1)), m.group(2)
        return v / 1000 if unit == "us" else v * 1000 if unit == "s" else v

    m = re.search(r"Requests/sec:\s+([\d.]+)", text)
    if not m:
        raise SystemExit(f"cannot read wrk's output:\n{text}")
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
    sock_err = re.search(r"Socket errors: (.*)", text)
    return {"rps": float(m.group(1)), "p50": latency("50"), "p99": latency("99"),
            "requests": int(re.search(r"(\d+) requests in", text).group(1)),
            "non2xx": int(errors.group(1)) if errors else 0, "socket_errors": sock_err.group(1) if sock_err else ""}


def run_wrk(args, server, path, connections, script=None, headers=(), warmup=2):
    url = f"https://127.0.0.1:{server.port}{path}"
    base = ["taskset", "-c", str(args.client_cpu), "wrk", "-t1", f"-c{connections}", "--latency",
            "-H", f"Authorization: Bearer {TOKEN}"]
    for h in headers:
        base += ["-H", h]
    if script:
        base += ["-s", str(script)]
    if warmup:  # connections, caches, lazy allocations: not measured
        subprocess.run(base + [f"-d{warmup}s", url], capture_output=True, text=True)
    pids = server.pids()
    before = cpu_ticks(pids)
    out = subprocess.run(base + [f"-d{args.duration}s", url], capture_output=True, text=True)
    after = cpu_ticks(pids)
    if out.returncode != 0:
        raise SystemExit(f"wrk failed against {server.name}: {out.stderr}")
    res = parse_wrk(out.stdout)
    res["cpu_us_per_req"] = (after - before) * 1e6 / CLK_TCK / max(res["requests"], 1)
    res["peak_rss"] = server.rss()[1]
    if res["non2xx"] or res["socket_errors"]:
        print(f"  warning: {server.name} {path}: non-2xx {res['non2xx']}, socket errors {res['socket_errors']!r}",
              flush=True)
    return res


def h2load_post(args, server, path, body_file, connections):
    """Cross-check of the POST figures with nghttp2's h2load over HTTP/1.1 (when installed)."""
    cmd = ["taskset", "-c", str(args.client_cpu), "h2load", "--h1", "-t1", f"-c{connections}",
           f"-D{args.duration}", "-d", str(body_file), "-H", "Content-Type: application/json",
           f"https://127.0.0.1:{server.port}{path}"]
    out = subprocess.run(cmd, capture_output=True, text=True).stdout
    m = re.search(r"finished in [\d.]+\w+, ([\d.]+) req/s", out)
    return float(m.group(1)) if m else float("nan")


# ---------------------------------------------------------------- servers

def topogate_config(work, port, inventories, name):
    lines = [f"listen: {{address: 127.0.0.1, port: {port}}}",
             # Like nginx's ssl_session_tickets off and no session cache: no server pays
             # for tickets wrk never uses.
             "tls: {certFile: server.crt, keyFile: server.key, sessionTickets: false}",
             "threads: 1",
             "logging: {accessLog: false, level: warn}"]
    if inventories:
        lines.append("inventories:")
        for inv, snap in inventories:
            lines.append(f"  - {{name: {inv}, source: source.yaml, snapshot: {snap}, "
                         "readers: {bearerTokenFiles: [token]}}")
    path = work / f"{name}.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path


def start_topogate(args, work, inventories, name="topogate"):
    port = free_port()
    cfg = topogate_config(work, port, inventories, name)
    srv = Server(name, ["taskset", "-c", str(args.server_cpu), args.binary, "serve", "--config", str(cfg)], port, work)
    srv.wait_ready()
    return srv


def nginx_quote(text):
    if "$" in text:
        raise SystemExit("the static reply contains '$', which nginx would expand")
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def start_nginx(args, work, replies):
    port = free_port()
    for d in ("nginx-body", "nginx-proxy", "nginx-fastcgi", "nginx-uwsgi", "nginx-scgi"):
        (work / d).mkdir(exist_ok=True)
    (work / "nginx.conf").write_text(f"""daemon off;
master_process on;
worker_processes 1;
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
    listen 127.0.0.1:{port} ssl;
    ssl_certificate {work}/server.crt;
    ssl_certificate_key {work}/server.key;
    ssl_protocols TLSv1.2 TLSv1.3;
    ssl_session_tickets off;
    ssl_session_cache off;
    client_max_body_size 7m;
    client_body_buffer_size 16k;
    location = /snapshots/small {{ if ($authorized = 0) {{ return 401; }} default_type application/json; alias {work}/small.served.json; }}
    location = /snapshots/large {{ if ($authorized = 0) {{ return 401; }} default_type application/json; alias {work}/large.served.json; }}
    location = /validate/topologysources {{ default_type application/json; return 200 {nginx_quote(replies['valid'])}; }}
    location = /validate/topologysources-invalid {{ default_type application/json; return 200 {nginx_quote(replies['invalid'])}; }}
  }}
}}
""")
    srv = Server("nginx", ["taskset", "-c", str(args.server_cpu), "nginx", "-p", str(work), "-c",
                           str(work / "nginx.conf")], port, work, stop_signal=signal.SIGQUIT)
    srv.wait_ready()
    return srv


def start_crwebhook(args, work):
    port = free_port()
    srv = Server("crwebhook", ["taskset", "-c", str(args.server_cpu), args.peer, "--host", "127.0.0.1",
                               "--port", str(port), "--cert-dir", str(work), "--cert-name", "server.crt",
                               "--key-name", "server.key"], port, work, env={"GOMAXPROCS": "1"})
    srv.wait_ready()
    return srv


def https(ctx, port, path, body=None, headers=None):
    req = urllib.request.Request(f"https://127.0.0.1:{port}{path}", data=body, headers=headers or {})
    with urllib.request.urlopen(req, context=ctx, timeout=30) as r:
        return r.read()


def review_reply(ctx, port, path, body):
    return https(ctx, port, path, body, {"Content-Type": "application/json"})


def verdict_of(reply):
    r = json.loads(reply)["response"]
    causes = len(((r.get("status") or {}).get("details") or {}).get("causes") or [])
    return ("allowed" if r["allowed"] else f"denied ({causes} causes)"), r["allowed"]


# ---------------------------------------------------------------- table

GOALS = {
    # scenario: [(peer, description, check(ratio dict, topogate's result) -> bool)]
    "get1k": [("nginx", "req/s >= 1.2x nginx", lambda r, tg: r["rps"] >= 1.2)],
    "get1m": [("nginx", "req/s >= 1.5x nginx", lambda r, tg: r["rps"] >= 1.5)],
    "handshake": [("nginx", "CPU/handshake <= 1.0x nginx", lambda r, tg: r["cpu"] <= 1.0)],
    "post-valid": [("crwebhook", "req/s >= 3x, p99 <= 1/3 of controller-runtime",
                    lambda r, tg: r["rps"] >= 3.0 and r["p99"] <= 1 / 3),
                   ("nginx", "req/s >= 1.0x nginx static reply", lambda r, tg: r["rps"] >= 1.0),
                   ("nginx", "req/s >= 0.8x nginx, p99 <= 1 ms (HTTPS server goal)",
                    lambda r, tg: r["rps"] >= 0.8 and tg["p99"] <= 1.0)],
    "post-invalid": [("crwebhook", "req/s >= 3x, p99 <= 1/3 of controller-runtime",
                      lambda r, tg: r["rps"] >= 3.0 and r["p99"] <= 1 / 3),
                     ("nginx", "req/s >= 1.0x nginx static reply", lambda r, tg: r["rps"] >= 1.0),
                     ("nginx", "req/s >= 0.8x nginx, p99 <= 1 ms (HTTPS server goal)",
                      lambda r, tg: r["rps"] >= 0.8 and tg["p99"] <= 1.0)],
}

TITLES = {
    "get1k": "GET 1 KiB, keep-alive, {c} conn", "get1m": "GET 1 MiB, keep-alive, {c} conn",
    "get1k-c1": "GET 1 KiB, keep-alive, 1 conn", "get1m-c1": "GET 1 MiB, keep-alive, 1 conn",
    "handshake": "new TLS connection per request (1 KiB GET)",
    "post-valid": "admission POST, valid, {c} conn", "post-invalid": "admission POST, invalid, {c} conn",
}


def mib(b):
    return f"{b / 1048576:.1f}"


def ratio(a, b):
    return a / b if b else float("nan")


def round_ratios(tg, r):
    return {"rps": ratio(tg["rps"], r["rps"]), "p99": ratio(tg["p99"], r["p99"]),
            "cpu": ratio(tg["cpu_us_per_req"], r["cpu_us_per_req"])}


def combine_rounds(rounds):
    """One result per server from --repeat rounds: the median of each figure, the highest peak
    RSS, the errors of all rounds, and for each peer the topogate/peer ratios of every round
    (paired within the round, so that a change of machine speed between rounds cancels)."""
    if len(rounds) == 1:
        return rounds[0]
    out = {}
    for srv in rounds[0]:
        rs = [rd[srv] for rd in rounds]
        c = {k: statistics.median([r[k] for r in rs]) for k in ("rps", "p50", "p99", "cpu_us_per_req")}
        c["requests"] = sum(r["requests"] for r in rs)
        c["peak_rss"] = max(r["peak_rss"] for r in rs)
        c["non2xx"] = sum(r["non2xx"] for r in rs)
        c["socket_errors"] = "; ".join(r["socket_errors"] for r in rs if r["socket_errors"])
        c["rounds"] = rs
        if "h2load_rps" in rs[0]:
            c["h2load_rps"] = rs[0]["h2load_rps"]
        if srv != "topogate":
            c["round_ratios"] = [round_ratios(rd["topogate"], rd[srv]) for rd in rounds]
        out[srv] = c
    return out


def print_table(args, results, memory, header_lines):
    out = []
    out += header_lines
    out.append("")
    out.append("| scenario | server | req/s | p50 ms | p99 ms | CPU µs/req | peak RSS MiB | topogate/peer "
               "(req/s · p99 · CPU) | goal | met |")
    out.append("|---|---|---:|---:|---:|---:|---:|---|---|---|")
    verdicts, notes, spreads = [], [], []
    for scen in [s for s in ALL_SCENARIOS if s not in ("memory", "stall")]:
        if scen not in results:
            continue
        title = TITLES[scen].format(c=args.connections)
        tg = results[scen]["topogate"]
        goals = {}
        for peer, desc, check in GOALS.get(scen, []):
            goals.setdefault(peer, []).append((desc, check))
        for srv, r in results[scen].items():
            flagged = r["non2xx"] or any(n != "0" for n in re.findall(r"(\d+)", r["socket_errors"]))
            if flagged:
                notes.append(f"{srv}, {title}: non-2xx {r['non2xx']}, socket errors: {r['socket_errors'] or 'none'}")
            cells = [title if srv == "topogate" else "", srv + (" ⚠" if flagged else ""), f"{r['rps']:.0f}", f"{r['p50']:.3f}", f"{r['p99']:.3f}",
                     f"{r['cpu_us_per_req']:.1f}", mib(r["peak_rss"])]
            if srv == "topogate":
                cells += ["", "", ""]
            else:
                if r.get("round_ratios"):
                    # Several rounds: the median of the ratios paired within each round.
                    per = r["round_ratios"]
                    rr = {k: statistics.median([x[k] for x in per]) for k in ("rps", "p99", "cpu")}
                    spreads.append(f"{title}, topogate/{srv} req/s per round: "
                                 + ", ".join(f"{x['rps']:.2f}×" for x in per)
                                 + f" (median {rr['rps']:.2f}×, range {min(x['rps'] for x in per):.2f}–"
                                 f"{max(x['rps'] for x in per):.2f}×)")
                else:
                    rr = round_ratios(tg, r)
                cells.append(f"{rr['rps']:.2f}× · {rr['p99']:.2f}× · {rr['cpu']:.2f}×")
                if srv in goals:
                    marks = []
                    for desc, check in goals[srv]:
                        met = check(rr, tg)
                        verdicts.append((title, srv, desc, met))
                        marks.append("met" if met else "**not met**")
                    cells += ["; ".join(d for d, _ in goals[srv]), " · ".join(marks)]
                else:
                    cells += ["—", ""]
            out.append("| " + " | ".join(cells) + " |")
    if memory:
        for label, key, limit in (("RSS idle (one 1 KiB inventory)", "idle", 16),
                                  ("RSS with 16 × 1 MiB inventories", "loaded", 96)):
            if key not in memory:
                continue
            rss, hwm = memory[key]
            met = hwm <= limit * 1048576
            verdicts.append((label, "topogate", f"peak RSS <= {limit} MiB", met))
            out.append(f"| {label} | topogate |  |  |  |  | {mib(hwm)} (now {mib(rss)}) |  | "
                       f"peak RSS ≤ {limit} MiB | {'met' if met else '**not met**'} |")
        for peer in ("nginx", "crwebhook"):
            if f"idle-{peer}" in memory and "idle" in memory:
                rss, hwm = memory[f"idle-{peer}"]
                out.append(f"| RSS idle | {peer} |  |  |  |  | {mib(hwm)} (now {mib(rss)}) | "
                           f"{ratio(memory['idle'][1], hwm):.2f}× |  |  |")
    met = sum(1 for v in verdicts if v[3])
    out.append("")
    for n in spreads:
        out.append(f"{n}  ")
    for n in notes:
        out.append(f"⚠ {n}  ")
    out.append(f"goals met: {met} of {len(verdicts)}")
    print("\n".join(out), flush=True)
    return out, verdicts


def load_text():
    return Path("/proc/loadavg").read_text().split()[:3]


# ---------------------------------------------------------------- main

def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--binary", default=str(ROOT / "build/release/cli/topogate"))
    ap.add_argument("--peer", default="", help="crwebhook binary (bench/peers/build-crwebhook.sh prints it)")
    ap.add_argument("--duration", type=int, default=10, help="seconds per measured run (after a 2 s warm-up)")
    ap.add_argument("--connections", type=int, default=32)
    ap.add_argument("--scenarios", default=",".join(ALL_SCENARIOS))
    ap.add_argument("--server-cpu", type=int, default=0)
    ap.add_argument("--client-cpu", type=int, default=1)
    ap.add_argument("--h2load", action="store_true", help="cross-check the POST figures with h2load --h1")
    ap.add_argument("--json", default="", help="also write the results as JSON to this file")
    ap.add_argument("--markdown", default="", help="also write the table to this file")
    ap.add_argument("--keep", action="store_true", help="keep the working directory")
    ap.add_argument("--store-timeout", default="2s",
                    help="stall: store.timeout of the server; 'none' leaves the key out (binaries before it)")
    ap.add_argument("--stall-rate", type=int, default=100, help="stall: admission reviews per second (open loop)")
    ap.add_argument("--stall-pushes", type=int, default=8, help="stall: pushes per second while they hang")
    ap.add_argument("--stall-threads", type=int, default=2, help="stall: the server's threads")
    ap.add_argument("--repeat", type=int, default=1,
                    help="rounds per scenario, each running topogate then its peers back to back; the "
                         "table shows each server's median figures and the median of the ratios paired "
                         "within each round, and lists every round's req/s ratio (this VM's speed drifts)")
    args = ap.parse_args()
    scenarios = [s.strip() for s in args.scenarios.split(",") if s.strip()]
    unknown = set(scenarios) - set(ALL_SCENARIOS)
    if unknown:
        raise SystemExit(f"unknown scenarios: {', '.join(sorted(unknown))}")
    need_peer = any(s.startswith("post-") for s in scenarios)
    for tool in ("wrk", "nginx", "taskset", "openssl", "pgrep"):
        if not shutil.which(tool) and not Path(f"/usr/sbin/{tool}").exists():
            raise SystemExit(f"{tool} is required")
    if not Path(args.binary).exists():
        raise SystemExit(f"{args.binary} not found (bench/run.sh builds it)")
    if need_peer and not (args.peer and Path(args.peer).exists()):
        raise SystemExit("--peer: the crwebhook binary is needed (bench/peers/build-crwebhook.sh)")
    if args.h2load and not shutil.which("h2load"):
        print("h2load not installed (Debian nghttp2-client): no cross-check", flush=True)
        args.h2load = False

    load_before = load_text()
    work = Path(tempfile.mkdtemp(prefix="topogate-bench-"))
    os.chmod(work, 0o755)  # nginx workers may run as another user
    make_certs(work)
    (work / "token").write_text(TOKEN + "\n")
    (work / "source.yaml").write_text(SOURCE)
    (work / "small.json").write_text(snapshot_json(1100, "s"))
    (work / "large.json").write_text(snapshot_json(LARGE_TARGET, "l"))
    bodies = {k: (HERE / f"review-{k}.json").read_bytes() for k in ("valid", "invalid")}
    for k, body in bodies.items():
        (work / f"post-{k}.lua").write_text(
            'wrk.method = "POST"\nwrk.headers["Content-Type"] = "application/json"\n'
            f'local f = io.open("{HERE / f"review-{k}.json"}", "rb")\nwrk.body = f:read("*a")\nf:close()\n')

    results, memory, servers = {}, {}, {}
    ctx = ssl.create_default_context(cafile=str(work / "ca.crt"))
    header = []
    try:
        servers["topogate"] = start_topogate(args, work, [("small", "small.json"), ("large", "large.json")])
        tg = servers["topogate"]
        for name in ("small", "large"):
            (work / f"{name}.served.json").write_bytes(
                https(ctx, tg.port, f"/snapshots/{name}", headers={"Authorization": f"Bearer {TOKEN}"}))
        replies = {k: review_reply(ctx, tg.port, "/validate/topologysources", bodies[k]).decode() for k in bodies}
        if not verdict_of(replies["valid"])[1] or verdict_of(replies["invalid"])[1]:
            raise SystemExit("topogate: expected the valid review allowed and the invalid one denied")
        servers["nginx"] = start_nginx(args, work, replies)
        if need_peer:
            servers["crwebhook"] = start_crwebhook(args, work)
        # Idle RSS of every server before any load.
        for name, srv in servers.items():
            memory[f"idle-{name}" if name != "topogate" else "started"] = srv.rss()

        sizes = {n: (work / f"{n}.served.json").stat().st_size for n in ("small", "large")}
        header.append(f"bodies: snapshot {sizes['small']} B and {sizes['large']} B (served JSON); "
                      f"reviews {len(bodies['valid'])} B valid, {len(bodies['invalid'])} B invalid")
        parity = [f"topogate {verdict_of(replies['valid'])[0]} / {verdict_of(replies['invalid'])[0]}"]
        if need_peer:
            cr = servers["crwebhook"]
            cr_valid = verdict_of(review_reply(ctx, cr.port, "/validate/topologysources", bodies["valid"]))
            cr_invalid = verdict_of(review_reply(ctx, cr.port, "/validate/topologysources", bodies["invalid"]))
            if not cr_valid[1] or cr_invalid[1]:
                raise SystemExit(f"crwebhook disagrees: valid {cr_valid[0]}, invalid {cr_invalid[0]}")
            parity.append(f"crwebhook {cr_valid[0]} / {cr_invalid[0]}")
        header.append("verdicts (valid / invalid review): " + "; ".join(parity))
        print("\n".join(header), flush=True)

        c = args.connections
        plan = {
            "get1k": [("topogate", "/snapshots/small", c, None, ()), ("nginx", "/snapshots/small", c, None, ())],
            "get1m": [("topogate", "/snapshots/large", c, None, ()), ("nginx", "/snapshots/large", c, None, ())],
            "get1k-c1": [("topogate", "/snapshots/small", 1, None, ()), ("nginx", "/snapshots/small", 1, None, ())],
            "get1m-c1": [("topogate", "/snapshots/large", 1, None, ()), ("nginx", "/snapshots/large", 1, None, ())],
            "handshake": [("topogate", "/snapshots/small", c, None, ("Connection: close",)),
                          ("nginx", "/snapshots/small", c, None, ("Connection: close",))],
            "post-valid": [("topogate", "/validate/topologysources", c, work / "post-valid.lua", ()),
                           ("crwebhook", "/validate/topologysources", c, work / "post-valid.lua", ()),
                           ("nginx", "/validate/topologysources", c, work / "post-valid.lua", ())],
            "post-invalid": [("topogate", "/validate/topologysources", c, work / "post-invalid.lua", ()),
                             ("crwebhook", "/validate/topologysources", c, work / "post-invalid.lua", ()),
                             ("nginx", "/validate/topologysources-invalid", c, work / "post-invalid.lua", ())],
        }
        for scen in scenarios:
            if scen not in plan:
                continue
            rounds = []
            for k in range(max(args.repeat, 1)):
                one = {}
                for srv_name, path, conns, script, headers in plan[scen]:
                    label = f" (round {k + 1} of {args.repeat})" if args.repeat > 1 else ""
                    print(f"{scen}: {srv_name}{label} ...", flush=True)
                    one[srv_name] = run_wrk(args, servers[srv_name], path, conns, script, headers)
                    if args.h2load and k == 0 and scen.startswith("post-"):
                        kind = scen.split("-")[1]
                        one[srv_name]["h2load_rps"] = h2load_post(args, servers[srv_name], path,
                                                                  HERE / f"review-{kind}.json", conns)
                rounds.append(one)
            results[scen] = combine_rounds(rounds)
    finally:
        for srv in servers.values():
            srv.stop()

    if "memory" in scenarios:
        print("memory: topogate idle ...", flush=True)
        idle = start_topogate(args, work, [("small", "small.json")], name="topogate-idle")
        try:
            https(ctx, idle.port, "/snapshots/small", headers={"Authorization": f"Bearer {TOKEN}"})
            time.sleep(1)  # settle after start-up (one-off; nothing to poll for)
            memory["idle"] = idle.rss()
        finally:
            idle.stop()
        print("memory: topogate with 16 x 1 MiB inventories ...", flush=True)
        invs = []
        for k in range(16):
            (work / f"inv{k:02d}.json").write_text(snapshot_json(LARGE_TARGET, f"i{k:02d}"))
            invs.append((f"inv{k:02d}", f"inv{k:02d}.json"))
        loaded = start_topogate(args, work, invs, name="topogate-16")
        try:
            for inv, _ in invs:
                https(ctx, loaded.port, f"/snapshots/{inv}", headers={"Authorization": f"Bearer {TOKEN}"})
            saved = args.duration
            args.duration = 3
            run_wrk(args, loaded, "/snapshots/inv00", args.connections, warmup=0)
            args.duration = saved
            memory["loaded"] = loaded.rss()
        finally:
            loaded.stop()

    stalled = None
    if "stall" in scenarios:
        stalled = stall.run(args, work, Server, free_port, bodies["valid"], snapshot_json)

    load_after = load_text()
    header = [f"topogate/peer, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {platform.node()}, "
              f"{os.cpu_count()} CPUs ({cpu_model()}), kernel {platform.release()}",
              f"wrk -t1, {args.duration} s per run after a 2 s warm-up"
              + (f", {args.repeat} rounds per scenario (medians)" if args.repeat > 1 else "")
              + f", servers on CPU {args.server_cpu} "
              f"(one worker/thread each), wrk on CPU {args.client_cpu}; TLS 1.3, ECDSA P-256",
              f"load average before {' '.join(load_before)}, after {' '.join(load_after)}"] + header
    if results or "idle" in memory or "loaded" in memory or not stalled:
        lines, verdicts = print_table(args, results, memory, header)
    else:  # --scenarios stall alone: no wrk table (and no wrk line; stall.render() says how it measures)
        lines, verdicts = [h for h in header if not h.startswith("wrk ")], []
        print("\n".join(lines), flush=True)
    if stalled:
        stall_lines = [""] + stall.render(stalled)
        print("\n".join(stall_lines), flush=True)
        lines += stall_lines
    if args.h2load:
        for scen in ("post-valid", "post-invalid"):
            for srv, r in results.get(scen, {}).items():
                print(f"h2load --h1 cross-check {scen} {srv}: {r.get('h2load_rps', float('nan')):.0f} req/s")
    if args.markdown:
        Path(args.markdown).write_text("\n".join(lines) + "\n")
    if args.json:
        Path(args.json).write_text(json.dumps({"results": results, "memory": memory, "header": header,
                                               "stall": stalled,
                                               "goals": [{"scenario": t, "peer": p, "goal": d, "met": m}
                                                         for t, p, d, m in verdicts]}, indent=2) + "\n")
    if args.keep:
        print(f"\nfiles in {work}")
    else:
        shutil.rmtree(work, ignore_errors=True)
    return 0


def cpu_model():
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.machine()


if __name__ == "__main__":
    sys.exit(main())

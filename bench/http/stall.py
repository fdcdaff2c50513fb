"""The `stall` scenario of bench/http/run.py: admission latency idle, and while pushes hang
against a store that never answers.

topogate runs with `threads: 2` and a kubernetes store whose API server is a stand-in on
127.0.0.1 (HangingApiServer of test/integration/hanging_api.py, shared with the integration
test): it completes TLS with the bench certificate (IP SAN 127.0.0.1; the bench CA is
store.caFile) and then never answers. Inventories: `small` (fed by a file) and `pushed`
(push-only, a writer token). Two phases of --duration seconds each, with
the same client:

  idle           admission reviews only (the store API hangs, nothing pushes);
  pushes hang    the same reviews while --stall-pushes PUTs per second are sent to `pushed`
                 (each on its own connection, at most 64 outstanding), which the store cannot
                 take.

The review client is open-loop (not wrk): reviews are scheduled at --stall-rate per second
and handed to 8 keep-alive connections; a review's latency runs from its scheduled time to
the end of its answer, so time spent waiting behind a stalled server counts. A review still
unanswered 2 s after the phase ends counts with its age then (a lower bound) and is
reported as unanswered. wrk cannot show this: it leaves out of its latency figures every
request that is still pending when the run ends or exceeds its --timeout, so a server that
stops answering looks fast. The client runs in the harness's Python process, pinned to
--client-cpu; topogate to --server-cpu.

--store-timeout (default 2s) sets store.timeout; `none` leaves the key out, for binaries that
predate it (they refuse the unknown key)."""

import http.client
import importlib.util
import os
import queue
import ssl
import threading
import time
from pathlib import Path


def _load(path: Path):
    """Imports a module from its file, without putting its directory on sys.path."""
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# The stand-in API server is the integration tests' (test/integration/hanging_api.py), so
# that the bench and test_store_stall.py hang the store in the same way.
HangingApiServer = _load(Path(__file__).resolve().parents[2] / "test" / "integration" /
                         "hanging_api.py").HangingApiServer

WORKERS = 8
MAX_OUTSTANDING_PUSHES = 64
GRACE_S = 2.0


def percentile(values, p):
    if not values:
        return float("nan")
    s = sorted(values)
    return s[min(len(s) - 1, int(round(p / 100.0 * (len(s) - 1))))]


class OpenLoopReviews:
    """Schedules `rate` reviews per second for `duration` s onto WORKERS keep-alive
    connections; latency from the scheduled time to the end of the answer."""

    def __init__(self, port, ctx, body: bytes, rate):
        self.port, self.ctx, self.body, self.rate = port, ctx, body, rate

    def run(self, duration):
        n = int(self.rate * duration)
        sched = [0.0] * n
        done = [None] * n
        status = [None] * n
        q = queue.Queue()
        conns = []
        lock = threading.Lock()

        def worker():
            conn = None
            while True:
                i = q.get()
                if i is None:
                    break
                try:
                    if conn is None:
                        conn = http.client.HTTPSConnection("127.0.0.1", self.port, context=self.ctx, timeout=120)
                        with lock:
                            conns.append(conn)
                    conn.request("POST", "/validate/topologysources", body=self.body,
                                 headers={"Content-Type": "application/json"})
                    r = conn.getresponse()
                    r.read()
                    status[i] = r.status
                    if r.will_close:
                        conn.close()
                        conn = None
                except (OSError, http.client.HTTPException) as e:
                    status[i] = type(e).__name__
                    if conn is not None:
                        conn.close()
                    conn = None
                done[i] = time.monotonic()

        threads = [threading.Thread(target=worker, daemon=True) for _ in range(WORKERS)]
        for t in threads:
            t.start()
        t0 = time.monotonic()
        for i in range(n):
            sched[i] = t0 + i / self.rate
            wait = sched[i] - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            q.put(i)
        deadline = time.monotonic() + GRACE_S
        while time.monotonic() < deadline and any(d is None for d in done):
            time.sleep(0.05)
        end = time.monotonic()
        # Reviews not sent yet are dropped from the queue; stuck workers are left to the server's
        # stop (their connections close then).
        try:
            while True:
                q.get_nowait()
        except queue.Empty:
            pass
        for _ in threads:
            q.put(None)
        lat = [((d if d is not None else end) - s) * 1000.0 for s, d in zip(sched, done)]
        answered = [i for i in range(n) if done[i] is not None]
        ok = sum(1 for i in answered if status[i] == 200)
        return {"sent_per_s": self.rate, "scheduled": n, "answered": len(answered), "ok_200": ok,
                "unanswered": n - len(answered), "p50": percentile(lat, 50), "p99": percentile(lat, 99),
                "max": max(lat) if lat else float("nan")}


class Pushes:
    """`rate` PUTs per second to /snapshots/pushed, each on its own connection from its own
    thread, never more than MAX_OUTSTANDING_PUSHES at once."""

    def __init__(self, port, ctx, token, body_for, rate):
        self.port, self.ctx, self.token, self.body_for, self.rate = port, ctx, token, body_for, rate
        self.sent = 0
        self.skipped = 0
        self.answers = []          # (status or error, seconds)
        self.outstanding = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _one(self, n):
        started = time.monotonic()
        conn = http.client.HTTPSConnection("127.0.0.1", self.port, context=self.ctx, timeout=120)
        try:
            conn.request("PUT", "/snapshots/pushed", body=self.body_for(n),
                         headers={"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"})
            r = conn.getresponse()
            r.read()
            res = r.status
        except (OSError, http.client.HTTPException) as e:
            res = type(e).__name__
        finally:
            conn.close()
        with self._lock:
            self.answers.append((res, time.monotonic() - started))
            self.outstanding -= 1

    def _run(self):
        t0 = time.monotonic()
        k = 0
        while not self._stop.is_set():
            k += 1
            wait = t0 + k / self.rate - time.monotonic()
            if wait > 0 and self._stop.wait(wait):
                return
            with self._lock:
                if self.outstanding >= MAX_OUTSTANDING_PUSHES:
                    self.skipped += 1
                    continue
                self.outstanding += 1
                self.sent += 1
            threading.Thread(target=self._one, args=(k,), daemon=True).start()

    def start(self):
        self._thread.start()
        return self

    def stop(self):
        self._stop.set()
        self._thread.join(timeout=5)

    def summary(self):
        with self._lock:
            answers = list(self.answers)
            outstanding = self.outstanding
        counts = {}
        for res, _ in answers:
            counts[str(res)] = counts.get(str(res), 0) + 1
        secs = [s * 1000.0 for _, s in answers]
        return {"sent": self.sent, "skipped_at_cap": self.skipped, "answered": len(answers),
                "outstanding": outstanding, "statuses": counts, "p50": percentile(secs, 50),
                "p99": percentile(secs, 99)}


def config(work: Path, port, api: HangingApiServer, store_timeout, threads):
    timeout = "" if store_timeout in ("", "none") else f", timeout: {store_timeout}"
    (work / "store.token").write_text("store-token-never-checked\n")
    (work / "writer.token").write_text("bench-writer-token-0123456789abcdef\n")
    text = f"""listen: {{address: 127.0.0.1, port: {port}}}
tls: {{certFile: server.crt, keyFile: server.key, sessionTickets: false}}
threads: {threads}
limits: {{shutdownTimeout: 3s}}
logging: {{accessLog: false, level: warn}}
store: {{type: kubernetes, apiServer: '{api.url}', tokenFile: store.token, caFile: ca.crt, namespace: gpustack-system{timeout}}}
inventories:
  - {{name: small, source: source.yaml, snapshot: small.json, readers: {{bearerTokenFiles: [token]}}}}
  - {{name: pushed, source: source.yaml, readers: {{bearerTokenFiles: [token]}}, writers: {{bearerTokenFiles: [writer.token]}}}}
"""
    path = work / "topogate-stall.yaml"
    path.write_text(text)
    return path


def run(args, work: Path, server_cls, free_port, review_body: bytes, snapshot_json):
    """Runs both phases; returns {"listening_s", "idle", "hang", "pushes", "config"}."""
    api = HangingApiServer(work / "server.crt", work / "server.key")
    port = free_port()
    cfg = config(work, port, api, args.store_timeout, args.stall_threads)
    ctx = ssl.create_default_context(cafile=str(work / "ca.crt"))
    saved_affinity = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {args.client_cpu})  # this thread and the client threads it starts
    started = time.monotonic()
    srv = server_cls("topogate-stall", ["taskset", "-c", str(args.server_cpu), args.binary, "serve", "--config",
                                        str(cfg)], port, work)
    out = {"config": f"threads: {args.stall_threads}, store.timeout: {args.store_timeout}, "
                     f"{args.stall_rate} reviews/s on {WORKERS} keep-alive connections, "
                     f"{args.stall_pushes} pushes/s; topogate on CPU {args.server_cpu}, client on CPU "
                     f"{args.client_cpu}"}
    try:
        srv.wait_ready(timeout=120)
        out["listening_s"] = time.monotonic() - started
        client = OpenLoopReviews(port, ctx, review_body, args.stall_rate)
        print("stall: admission, idle ...", flush=True)
        client.run(min(2, args.duration))  # warm-up: connections, caches
        out["idle"] = client.run(args.duration)
        print("stall: admission while pushes hang ...", flush=True)
        pushes = Pushes(port, ctx, (work / "writer.token").read_text().strip(),
                        lambda n: snapshot_json(1100, f"p{n}"), args.stall_pushes).start()
        time.sleep(1.0)  # let the first pushes reach the store
        try:
            out["hang"] = client.run(args.duration)
        finally:
            pushes.stop()
        out["pushes"] = pushes.summary()
        out["api_connections"] = api.handshakes
    finally:
        api.stop()  # hung store calls fail now, so that the server can stop
        srv.stop()
        os.sched_setaffinity(0, saved_affinity)
    return out


def render(res):
    """Markdown rows for the result of run()."""
    lines = [f"stall scenario ({res['config']}); topogate listening {res.get('listening_s', float('nan')):.2f} s "
             "after its start, with the store API hanging", "",
             "| scenario | reviews scheduled | answered (200) | unanswered | p50 ms | p99 ms | max ms | pushes | goal | met |",
             "|---|---:|---:|---:|---:|---:|---:|---|---|---|"]
    p = res.get("pushes", {})
    push_cell = (f"sent {p.get('sent')}, answered {p.get('answered')} {p.get('statuses')}, "
                 f"p99 {p.get('p99', float('nan')):.0f} ms, still open {p.get('outstanding')}") if p else ""
    for key, title, pushes in (("idle", "admission p99 idle (store API hangs, no pushes)", "—"),
                               ("hang", "admission p99 while pushes hang", push_cell)):
        r = res.get(key)
        if not r:
            continue
        met = r["p99"] < 1000.0 and r["unanswered"] == 0
        lines.append(f"| {title} | {r['scheduled']} | {r['answered']} ({r['ok_200']}) | {r['unanswered']} | "
                     f"{r['p50']:.2f} | {r['p99']:.2f} | {r['max']:.2f} | {pushes} | p99 < 1000 ms, none unanswered | "
                     f"{'met' if met else '**not met**'} |")
    return lines

"""A store that stops answering must not stall the process (against the real binary).

The defect: with `threads: 2` and a store whose writes hang (a Kubernetes API server that
completes TLS and then never answers, or a file system whose writes block), two concurrent
pushes used to take both I/O threads for up to 15 s, so admission reviews, snapshot GETs
and health checks waited behind them; start-up also waited for the store before listening.

The contract asserted here:
- `store.timeout` (Go duration, default 5s) bounds every store operation: a push whose
  write does not complete in time answers 503 with a Kubernetes Status
  (`reason: ServiceUnavailable`, a message naming the store) and `Retry-After`, within
  store.timeout + 1.5 s;
- at most 4 pushes per inventory are in progress (1 running + 3 waiting): a further push is
  refused at once (503 + Retry-After, well under 1 s);
- while pushes hang, admission reviews, GETs of snapshots (another inventory's, and the
  hanging inventory's last revision), /healthz, /livez and /metrics answer within 1 s;
- start-up does not wait for the store: listening, /healthz and an admission review within
  2 s of the process start; the push-only inventory is not ready (/readyz?verbose names it
  as waiting for the store) while a file-fed inventory serves at once;
- once the store is back (file store: the file system thawed), the next push succeeds and is
  served; a push refused at once (queue full) is never served.

TOPOGATE_TEST_NO_STORE_TIMEOUT=1 leaves `store.timeout` out of the configuration. It is for
binaries that predate the key, which refuse it as unknown (exit 2): with the switch they
start, and the tests show (and fail on) the old stall. The bounds asserted stay those of a
2 s store timeout, so with a binary that knows the key leave the switch unset (its 5 s
default would exceed them). The timings are printed in a results table at the end of the
module (pytest -s, or CTest's output on failure) and appended as JSON lines to
$TOPOGATE_RELIABILITY_LOG when set.

Against the binary before the fix (dev build, 2 CPUs), with the switch: listening 10 s after
the start; the eight pushes answered one at a time, 15 s apart (503 at 15, 30, 45, 60 s...,
none with Retry-After); no probe (admission, GETs, health, metrics) got even its TLS
handshake within the client's 20 s; on the frozen file system every request waited for the
thaw, and then all eight pushes, abandoned by their clients, were published.

The file-store test needs root (a loop-mounted ext4 image, `fsfreeze`); it is skipped with the
reason otherwise. The file system is always thawed and unmounted afterwards, and a detached
watchdog thaws it after WATCHDOG_S even if this process dies (a frozen file system left behind
blocks every later writer to it)."""

import email.utils
import http.client
import json
import os
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

from conftest import FIXTURES, SCHEDULING_MARGIN_S, SNAPSHOT, TOPOLOGY_SOURCE
from hanging_api import HangingApiServer
from hostile_support import Results, client_context

STORE_TIMEOUT_S = 2.0
MARGIN_S = SCHEDULING_MARGIN_S  # a timed-out push answers within STORE_TIMEOUT_S + MARGIN_S
# "Refused at once" (queue full), and the bound for other requests: answered before the
# store's timeout, so it did not wait on the hung store (a timed-out push takes at least that).
AT_ONCE_S = STORE_TIMEOUT_S
STARTUP_S = 2.0             # listening, /healthz and an admission review after the process start
PUSHES = 8
QUEUE = 4                   # 1 running + 3 waiting per inventory
CLIENT_TIMEOUT_S = 20.0     # client socket timeout: long enough to measure the old stall
RECOVERY_S = 10.0           # after the thaw, a push must succeed within this
WATCHDOG_S = 90             # the detached safety thaw
NO_STORE_TIMEOUT = os.environ.get("TOPOGATE_TEST_NO_STORE_TIMEOUT") == "1"
WRITER_TOKEN = "writer-token-stall-0123456789abcdef"
REVIEW = (FIXTURES / "admission" / "allowed.json").read_bytes()

RESULTS = Results("store stall")


@pytest.fixture(scope="module", autouse=True)
def print_results():
    yield
    print()
    print(RESULTS.render())


# ---------------------------------------------------------------- the hanging API server (hanging_api.py)

@pytest.fixture
def hanging_api(pki):
    api = HangingApiServer(pki.server_crt, pki.server_key)
    yield api
    api.stop()


# ---------------------------------------------------------------- a loop-mounted ext4 to freeze

class FreezableFs:
    """A 64 MiB ext4 image loop-mounted at `mnt`; freeze()/thaw() with fsfreeze. Every freeze
    starts a detached watchdog that thaws after WATCHDOG_S should this process die first."""

    def __init__(self, base: Path):
        self.img = base / "store.img"
        self.mnt = base / "mnt"
        self.frozen = False
        self._watchdog = None

    def setup(self):
        self.mnt.mkdir()
        subprocess.run(["truncate", "-s", "64M", str(self.img)], check=True)
        p = subprocess.run(["mkfs.ext4", "-q", "-F", str(self.img)], capture_output=True, text=True)
        if p.returncode != 0:
            return f"mkfs.ext4 failed: {p.stderr.strip()}"
        p = subprocess.run(["mount", "-o", "loop", str(self.img), str(self.mnt)], capture_output=True, text=True)
        if p.returncode != 0:
            return f"loop mount failed: {p.stderr.strip()}"
        p = subprocess.run(["fsfreeze", "-f", str(self.mnt)], capture_output=True, text=True, timeout=30)
        subprocess.run(["fsfreeze", "-u", str(self.mnt)], capture_output=True, timeout=30)
        if p.returncode != 0:
            return f"fsfreeze does not work here: {p.stderr.strip()}"
        return ""

    def freeze(self):
        self._watchdog = subprocess.Popen(["sh", "-c", f"sleep {WATCHDOG_S}; exec fsfreeze -u '{self.mnt}'"],
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                          start_new_session=True)
        subprocess.run(["fsfreeze", "-f", str(self.mnt)], check=True, capture_output=True, timeout=30)
        self.frozen = True

    def thaw(self):
        if self.frozen:
            subprocess.run(["fsfreeze", "-u", str(self.mnt)], capture_output=True, timeout=30)
            self.frozen = False
        if self._watchdog is not None:
            if self._watchdog.poll() is None:
                os.killpg(self._watchdog.pid, signal.SIGKILL)  # the watchdog's own session only
            self._watchdog.wait()
            self._watchdog = None

    def teardown(self):
        self.thaw()
        if os.path.ismount(self.mnt):
            if subprocess.run(["umount", str(self.mnt)], capture_output=True).returncode != 0:
                subprocess.run(["umount", "-l", str(self.mnt)], capture_output=True)
        self.img.unlink(missing_ok=True)


@pytest.fixture
def freezable_fs(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("a loop-mounted ext4 and fsfreeze need root")
    missing = [t for t in ("truncate", "mkfs.ext4", "mount", "umount", "losetup", "fsfreeze") if not shutil.which(t)]
    if missing:
        pytest.skip(f"not installed: {', '.join(missing)}")
    fs = FreezableFs(tmp_path)
    try:
        why = fs.setup()
        if why:
            pytest.skip(f"cannot freeze a loop-mounted ext4 image here: {why}")
        yield fs
    finally:
        fs.teardown()


# ---------------------------------------------------------------- configuration

def write_inputs(d: Path, pki):
    (d / "topologysource.yaml").write_text(TOPOLOGY_SOURCE)
    (d / "snapshot.yaml").write_text(SNAPSHOT.format(revision="files-1"))
    (d / "writer.token").write_text(WRITER_TOKEN + "\n")
    (d / "store.token").write_text("store-token-never-checked\n")


def store_timeout_line():
    return "" if NO_STORE_TIMEOUT else f", timeout: {STORE_TIMEOUT_S:g}s"


def config(pki, d: Path, store: str):
    """threads: 2; `pushed` (push-only, writers) and `files` (fed by snapshot.yaml)."""
    write_inputs(d, pki)
    return f"""listen: {{address: 127.0.0.1, port: 0}}
tls: {{certFile: {pki.server_crt}, keyFile: {pki.server_key}}}
threads: 2
limits: {{shutdownTimeout: 3s}}
logging: {{level: info, accessLog: true}}
store: {store}
inventories:
  - name: pushed
    source: topologysource.yaml
    readers: {{bearerTokenFiles: [{pki.token_file}]}}
    writers: {{bearerTokenFiles: [writer.token]}}
  - name: files
    source: topologysource.yaml
    snapshot: snapshot.yaml
    readers: {{bearerTokenFiles: [{pki.token_file}]}}
"""


def kube_store(api: HangingApiServer, pki, d: Path):
    return (f"{{type: kubernetes, apiServer: '{api.url}', tokenFile: {d / 'store.token'}, caFile: {pki.ca}, "
            f"namespace: gpustack-system{store_timeout_line()}}}")


def file_store(directory: Path):
    return f"{{type: file, directory: {directory}{store_timeout_line()}}}"


# ---------------------------------------------------------------- clients

class Answer:
    def __init__(self, what):
        self.what = what
        self.status = None
        self.headers = {}
        self.body = b""
        self.error = ""
        self.seconds = None
        self.started = None
        self.done = threading.Event()

    def json(self):
        try:
            return json.loads(self.body)
        except ValueError:
            return None

    def header(self, name):
        return self.headers.get(name.lower())

    def __repr__(self):
        s = f"{self.seconds:.2f}s" if self.seconds is not None else "?"
        return f"{self.what}: {self.status or self.error or 'no answer'} in {s}"


def connection(port, pki):
    return http.client.HTTPSConnection("127.0.0.1", port, context=client_context(pki), timeout=CLIENT_TIMEOUT_S)


def exchange(answer: Answer, conn, method, path, body=None, headers=None):
    """One request on `conn`; fills `answer` (the time counts from the request's first byte, or
    from the connection's start when `conn` is not connected yet)."""
    answer.started = time.monotonic()
    try:
        conn.request(method, path, body=body, headers=headers or {})
        r = conn.getresponse()
        answer.body = r.read()
        answer.status = r.status
        answer.headers = {k.lower(): v for k, v in r.getheaders()}
    except (OSError, http.client.HTTPException) as e:
        answer.error = f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
    finally:
        answer.seconds = time.monotonic() - answer.started
        conn.close()
        answer.done.set()
    return answer


def timed(port, pki, what, method, path, token=None, body=None, headers=None):
    """One request on a new connection, handshake included in the time."""
    h = dict(headers or {})
    if token:
        h["Authorization"] = f"Bearer {token}"
    return exchange(Answer(what), connection(port, pki), method, path, body, h)


def review(port, pki, what="admission review"):
    return timed(port, pki, what, "POST", "/validate/topologysources?timeout=10s", body=REVIEW,
                 headers={"Content-Type": "application/json"})


def push_body(revision):
    return SNAPSHOT.format(revision=revision)


def push(port, pki, revision, what=None):
    return timed(port, pki, what or f"PUT {revision}", "PUT", "/snapshots/pushed", WRITER_TOKEN, push_body(revision),
                 {"Content-Type": "application/yaml"})


def get_snapshot(port, pki, name, what=None):
    return timed(port, pki, what or f"GET /snapshots/{name}", "GET", f"/snapshots/{name}", pki.token)


def served(port, pki):
    """(status, revision or None, ETag) of GET /snapshots/pushed."""
    a = get_snapshot(port, pki, "pushed")
    doc = a.json() if a.status == 200 else None
    return a.status, (doc or {}).get("revision"), a.header("etag")


def history(port, pki):
    a = timed(port, pki, "history", "GET", "/snapshots/pushed/history", pki.token)
    return (a.json() or {}).get("items", []) if a.status == 200 else []


def fire_pushes(port, pki, revisions):
    """Connects one client per revision (handshakes done first), then sends every PUT at the
    same moment from its own thread. Returns (answers, the moment they were sent, threads)."""
    conns = []
    for _ in revisions:
        c = connection(port, pki)
        c.connect()
        conns.append(c)
    answers = [Answer(f"PUT {r}") for r in revisions]
    go = threading.Barrier(len(revisions) + 1)

    def one(conn, answer, revision):
        go.wait()
        exchange(answer, conn, "PUT", "/snapshots/pushed", push_body(revision),
                 {"Authorization": f"Bearer {WRITER_TOKEN}", "Content-Type": "application/yaml"})

    threads = [threading.Thread(target=one, args=(c, a, r), daemon=True) for c, a, r in zip(conns, answers, revisions)]
    for t in threads:
        t.start()
    go.wait()
    return answers, time.monotonic(), threads


def probes_at(start, delay, port, pki, label, with_pushed_get=True):
    """Launches, at start + delay, one thread per probe (each on a new connection); returns the
    answers (filled as they complete) and the threads."""
    plan = [
        (f"{label} admission review #1", lambda a: review(port, pki, a)),
        (f"{label} admission review #2", lambda a: review(port, pki, a)),
        (f"{label} GET /snapshots/files", lambda a: get_snapshot(port, pki, "files", a)),
        (f"{label} GET /healthz", lambda a: timed(port, pki, a, "GET", "/healthz")),
        (f"{label} GET /livez", lambda a: timed(port, pki, a, "GET", "/livez")),
        (f"{label} GET /metrics", lambda a: timed(port, pki, a, "GET", "/metrics")),
    ]
    if with_pushed_get:
        plan.insert(3, (f"{label} GET /snapshots/pushed", lambda a: get_snapshot(port, pki, "pushed", a)))
    out = {}
    lock = threading.Lock()

    def run(name, fn):
        wait = start + delay - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        a = fn(name)
        with lock:
            out[name] = a

    threads = [threading.Thread(target=run, args=p, daemon=True) for p in plan]
    for t in threads:
        t.start()
    return out, threads


def join(threads, timeout):
    deadline = time.monotonic() + timeout
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))


def hanging_pushes(port, pki, prefix):
    """PUSHES concurrent pushes (revisions `prefix`-1, -2, ...) against a store that hangs, and
    the probes of probes_at 0.5 s and 1.5 s after they were sent; waits for all of them (at
    most the client timeout) and returns (the push answers, the probe answers by name)."""
    revisions = [f"{prefix}-{i}" for i in range(1, PUSHES + 1)]
    answers, sent, push_threads = fire_pushes(port, pki, revisions)
    probes1, t1 = probes_at(sent, 0.5, port, pki, "t+0.5s")
    probes2, t2 = probes_at(sent, 1.5, port, pki, "t+1.5s")
    join(push_threads + t1 + t2, CLIENT_TIMEOUT_S + 5)
    return answers, {**probes1, **probes2}


def retry_after_ok(value):
    """Retry-After is delay-seconds or an HTTP-date (RFC 9110 section 10.2.3)."""
    if value is None:
        return False
    v = value.strip()
    if v.isdigit():
        return True
    try:
        return email.utils.parsedate_to_datetime(v) is not None
    except (TypeError, ValueError):
        return False


def unavailable_problems(a: Answer):
    """What is wrong with `a` as the 503 of a push the store could not take (empty: nothing)."""
    problems = []
    if a.status != 503:
        problems.append(f"status {a.status or a.error or 'none'}, want 503")
        return problems
    if not retry_after_ok(a.header("retry-after")):
        problems.append(f"Retry-After {a.header('retry-after')!r}")
    doc = a.json()
    if not isinstance(doc, dict) or doc.get("kind") != "Status" or doc.get("reason") != "ServiceUnavailable":
        problems.append(f"body is not a ServiceUnavailable Status: {a.body[:300]!r}")
    elif "store" not in str(doc.get("message", "")).lower():
        problems.append(f"message does not name the store: {doc.get('message')!r}")
    return problems


def fmt(answers):
    """`revision=status@seconds` of each answer (an exception's name when there was none)."""
    return ", ".join(f"{a.what.split(' ', 1)[-1]}={a.status or a.error.split(':')[0] or '-'}@{a.seconds:.2f}s"
                     if a.seconds is not None else f"{a.what}=pending" for a in answers)


def check_probes(probes, snapshots_pushed_etag=None):
    """Problems with the probes sent while pushes hang: each must answer correctly within
    AT_ONCE_S. `snapshots_pushed_etag`: the ETag GET /snapshots/pushed must still carry (None:
    nothing is served, GET must not be 200)."""
    problems = []
    for name, a in sorted(probes.items()):
        if a.seconds is None or a.seconds >= AT_ONCE_S:
            problems.append(f"{name} took {a.seconds if a.seconds is None else round(a.seconds, 2)} s "
                            f"(status {a.status or a.error}), want < {AT_ONCE_S} s")
        if "admission" in name:
            doc = a.json() or {}
            if a.status != 200 or (doc.get("response") or {}).get("allowed") is not True:
                problems.append(f"{name}: {a.status or a.error} {a.body[:200]!r}")
        elif name.endswith("/snapshots/pushed"):
            if snapshots_pushed_etag is None:
                if a.status == 200:
                    problems.append(f"{name}: a revision is served: {a.body[:200]!r}")
            elif a.status != 200 or a.header("etag") != snapshots_pushed_etag:
                problems.append(f"{name}: {a.status or a.error}, ETag {a.header('etag')}, want 200 with "
                                f"{snapshots_pushed_etag}")
        elif a.status != 200:
            problems.append(f"{name}: {a.status or a.error} {a.body[:200]!r}")
    return problems


def check_pushes(answers):
    """Problems with the hanging pushes: every one 503 + Retry-After + Status within the
    store timeout + margin, at least PUSHES - QUEUE of them at once."""
    problems = []
    bound = STORE_TIMEOUT_S + MARGIN_S
    for a in answers:
        if a.seconds is None or a.seconds > bound:
            problems.append(f"{a.what} answered after {a.seconds if a.seconds is None else round(a.seconds, 2)} s "
                            f"({a.status or a.error}), want <= {bound} s")
        problems += [f"{a.what}: {p}" for p in unavailable_problems(a)]
    at_once = [a for a in answers if a.status == 503 and a.seconds is not None and a.seconds < AT_ONCE_S]
    if len(at_once) < PUSHES - QUEUE:
        problems.append(f"{len(at_once)} pushes refused at once (< {AT_ONCE_S} s), want >= {PUSHES - QUEUE}")
    return problems


def record(test, start_s=None, pushes=(), probes=None, **extra):
    row = {"test": test, "store.timeout": "omitted" if NO_STORE_TIMEOUT else f"{STORE_TIMEOUT_S:g}s"}
    if start_s is not None:
        row["listening_s"] = round(start_s, 2)
    if pushes:
        row["pushes"] = fmt(pushes)
    if probes:
        worst = max(probes.values(), key=lambda a: a.seconds if a.seconds is not None else 1e9)
        row["slowest_probe"] = repr(worst)
        adm = [a.seconds for n, a in probes.items() if "admission" in n and a.seconds is not None]
        row["admission_max_s"] = round(max(adm), 2) if adm else None
    row.update(extra)
    RESULTS.add(**row)


# ---------------------------------------------------------------- tests

def test_kubernetes_store_that_hangs(make_server, pki, hanging_api):
    """Eight concurrent pushes against an API server that never answers: each is refused
    (503) within store.timeout + margin, at least four at once; admission, GETs and health
    answer within 1 s meanwhile; nothing is served for the push-only inventory."""
    srv = make_server(lambda d: config(pki, d, kube_store(hanging_api, pki, d)), listen_timeout=40)
    listening_s = time.monotonic() - srv.started_at
    answers, probes = hanging_pushes(srv.port, pki, "stall")
    status_after, revision_after, _ = served(srv.port, pki)
    items = history(srv.port, pki)
    record("kubernetes store hangs: 8 pushes", listening_s, answers, probes,
           api_connections=hanging_api.handshakes, api_requests=sorted(set(hanging_api.requests))[:4],
           pushed_after=f"{status_after} {revision_after}")
    problems = check_pushes(answers) + check_probes(probes)
    if status_after == 200:
        problems.append(f"GET /snapshots/pushed serves {revision_after} although the store never answered")
    accepted = [i.get("revision") for i in items if i.get("result") == "accepted"]
    if accepted:
        problems.append(f"history lists accepted revisions although the store never answered: {accepted}")
    assert hanging_api.handshakes >= 1, "topogate never reached the stand-in API server"
    assert not problems, "\n".join(problems)


def test_startup_does_not_wait_for_the_store(make_server, pki, hanging_api):
    """With the store's API server hanging, the process listens and answers /healthz and an
    admission review within 2 s of its start; the push-only inventory is not ready and says it
    waits for the store; the file-fed inventory serves its snapshot."""
    srv = make_server(lambda d: config(pki, d, kube_store(hanging_api, pki, d)), listen_timeout=40)
    listening_s = time.monotonic() - srv.started_at
    health = timed(srv.port, pki, "GET /healthz", "GET", "/healthz")
    adm = review(srv.port, pki)
    answered_s = time.monotonic() - srv.started_at
    ready = timed(srv.port, pki, "GET /readyz?verbose", "GET", "/readyz?verbose")
    files = get_snapshot(srv.port, pki, "files")
    lines = ready.body.decode(errors="replace").splitlines()
    pushed_line = next((l for l in lines if l.startswith(("[-]inventory/pushed", "[+]inventory/pushed"))), "")
    files_line = next((l for l in lines if "inventory/files" in l), "")
    record("start-up, kubernetes store hangs", listening_s,
           healthz=repr(health), admission=repr(adm), healthz_and_admission_answered_s=round(answered_s, 2),
           readyz=f"{ready.status}: {pushed_line} | {files_line}", files=repr(files))
    problems = []
    if listening_s > STARTUP_S:
        problems.append(f"listening {listening_s:.2f} s after the start, want <= {STARTUP_S} s")
    if answered_s > STARTUP_S:
        problems.append(f"/healthz and an admission review answered {answered_s:.2f} s after the start, "
                        f"want <= {STARTUP_S} s")
    if health.status != 200:
        problems.append(f"/healthz: {health.status or health.error}")
    if adm.status != 200 or ((adm.json() or {}).get("response") or {}).get("allowed") is not True:
        problems.append(f"admission review: {adm.status or adm.error} {adm.body[:200]!r}")
    if ready.status != 503:
        problems.append(f"/readyz?verbose: {ready.status}, want 503:\n{ready.body.decode(errors='replace')}")
    low = pushed_line.lower()
    if not (pushed_line.startswith("[-]inventory/pushed failed: ") and "store" in low and "wait" in low):
        problems.append(f"/readyz?verbose line for pushed: {pushed_line!r}, want '[-]inventory/pushed failed: ' "
                        "saying it waits for the store")
    if not files_line.startswith("[+]inventory/files ok"):
        problems.append(f"/readyz?verbose line for files: {files_line!r}")
    if files.status != 200 or (files.json() or {}).get("revision") != "files-1":
        problems.append(f"GET /snapshots/files: {files.status or files.error} {files.body[:200]!r}")
    assert not problems, "\n".join(problems)


# freezable_fs first: it is torn down last, after make_server has stopped the server.
def test_file_store_on_a_frozen_file_system(freezable_fs, make_server, pki):
    """File store on a loop-mounted ext4 frozen with fsfreeze (writes block in the kernel):
    after one good push, eight concurrent pushes are each refused (503) within store.timeout +
    margin, at least four at once; admission, GETs (the pushed inventory's first revision
    included) and health answer within 1 s; after the thaw a new push succeeds and is served;
    the pushes refused at once are never served."""
    store = freezable_fs.mnt / "store"
    store.mkdir()
    srv = make_server(lambda d: config(pki, d, file_store(store)), listen_timeout=40)
    listening_s = time.monotonic() - srv.started_at
    first = push(srv.port, pki, "first")
    assert first.status in (200, 201), (first, first.body[:500])
    status, revision, etag_first = served(srv.port, pki)
    assert (status, revision) == (200, "first") and etag_first
    answers, probes, recovery, seen_served = [], {}, None, set()
    frozen_after = (None, None, None)
    thaw_s = None
    try:
        freezable_fs.freeze()
        answers, probes = hanging_pushes(srv.port, pki, "frozen")
        # Still frozen: what is served is the first revision.
        frozen_after = served(srv.port, pki)
        seen_served.add(frozen_after[1])
    finally:
        freezable_fs.thaw()
    thawed = time.monotonic()
    # The lane may still be finishing the write that was in flight: retry for RECOVERY_S.
    attempts = []
    while time.monotonic() - thawed < RECOVERY_S:
        recovery = push(srv.port, pki, "after-thaw")
        attempts.append(recovery)
        seen_served.add(served(srv.port, pki)[1])
        if recovery.status in (200, 201):
            thaw_s = time.monotonic() - thawed
            break
        time.sleep(0.25)
    status_final, revision_final, etag_final = served(srv.port, pki)
    items = history(srv.port, pki)
    accepted = [i.get("revision") for i in items if i.get("result") == "accepted"]
    at_once = {a.what.split(" ", 1)[1] for a in answers
               if a.status == 503 and a.seconds is not None and a.seconds < AT_ONCE_S}
    record("file store on a frozen fs: 8 pushes", listening_s, answers, probes,
           frozen_served=f"{frozen_after[0]} {frozen_after[1]}",
           recovery=f"{[a.status or a.error for a in attempts]} after thaw; success after "
                    f"{thaw_s if thaw_s is None else round(thaw_s, 2)} s",
           served_final=f"{status_final} {revision_final}", accepted_history=accepted[:6])
    problems = check_pushes(answers) + check_probes(probes, snapshots_pushed_etag=etag_first)
    if frozen_after[:2] != (200, "first") or frozen_after[2] != etag_first:
        problems.append(f"while frozen, after the pushes, GET /snapshots/pushed: {frozen_after}, want first "
                        f"{etag_first}")
    if recovery is None or recovery.status not in (200, 201):
        problems.append(f"no push succeeded within {RECOVERY_S} s of the thaw: {attempts[-3:]}")
    elif (status_final, revision_final) != (200, "after-thaw") or etag_final != recovery.header("etag"):
        problems.append(f"after the recovery push GET /snapshots/pushed: {status_final} {revision_final} "
                        f"{etag_final}, want after-thaw {recovery.header('etag')}")
    leaked = sorted((at_once & seen_served) | (at_once & set(accepted)))
    if leaked:
        problems.append(f"pushes refused at once (queue full) were served or accepted: {leaked}")
    assert not problems, "\n".join(problems)

"""Helpers for the hostile-client and fault tests: a legitimate client that keeps
requesting while an attack or a fault runs (success rate, p99), peak memory of the server
process, raw TLS sockets, and a results table printed at the end of a module."""

import http.client
import json
import os
import socket
import ssl
import threading
import time
from pathlib import Path

from conftest import TOPOLOGY_SOURCE, SNAPSHOT, Server, wait_for


def proc_status(pid):
    """VmHWM (peak resident set) and VmRSS of a process, in KiB."""
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmHWM", "VmRSS"):
            out[key] = int(value.split()[0])
    return out


def client_context(pki, cert=None, key=None):
    ctx = ssl.create_default_context(cafile=str(pki.ca))
    if cert:
        ctx.load_cert_chain(str(cert), str(key))
    return ctx


def tls_socket(port, pki, timeout=10, cert=None, key=None):
    raw = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    return client_context(pki, cert, key).wrap_socket(raw, server_hostname="127.0.0.1")


def read_until_closed(sock, limit=1 << 20, timeout=15):
    """Reads until EOF, a reset or `timeout`; returns (bytes, closed_by_server, seconds)."""
    started = time.monotonic()
    sock.settimeout(0.5)
    data = b""
    while time.monotonic() - started < timeout and len(data) < limit:
        try:
            chunk = sock.recv(65536)
        except (socket.timeout, TimeoutError):
            continue
        except (ssl.SSLError, ConnectionError, OSError):
            return data, True, time.monotonic() - started
        if not chunk:
            return data, True, time.monotonic() - started
        data += chunk
    return data, False, time.monotonic() - started


def status_of(response: bytes):
    """The status code of the first HTTP response in `response`, or None."""
    if not response.startswith(b"HTTP/1."):
        return None
    try:
        return int(response.split(b" ", 2)[1])
    except (IndexError, ValueError):
        return None


def percentile(values, p):
    if not values:
        return None
    s = sorted(values)
    return s[min(len(s) - 1, int(round(p / 100.0 * (len(s) - 1))))]


class LegitClient:
    """Keeps GETting the snapshot over one keep-alive TLS connection (reconnecting after a
    failure) from a thread, until stopped. Every request either succeeds (200 with a body)
    or counts as failed."""

    def __init__(self, port, pki, path="/snapshots/demo", token=None, interval=0.01, threads=1):
        self.port, self.pki, self.path = port, pki, path
        self.token = token or pki.token
        self.interval = interval
        self.ok = 0
        self.failed = 0
        self.errors = []
        self.latencies = []
        self.connects = 0
        self.bad_status = 0   # answered, but not with 200
        self.no_answer = 0    # sent on an open connection, which closed without an answer
        self.not_connected = 0  # no connection could be made
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._threads = [threading.Thread(target=self._run, daemon=True) for _ in range(threads)]

    def _connect(self):
        conn = http.client.HTTPSConnection("127.0.0.1", self.port, context=client_context(self.pki), timeout=10)
        conn.connect()
        with self._lock:
            self.connects += 1
        return conn

    def _run(self):
        conn = None
        while not self._stop.is_set():
            started = time.monotonic()
            if conn is None:
                try:
                    conn = self._connect()
                except OSError as e:
                    with self._lock:
                        self.failed += 1
                        self.not_connected += 1
                        if len(self.errors) < 5:
                            self.errors.append(repr(e))
                    conn = None
                    self._stop.wait(self.interval)
                    continue
            try:
                conn.request("GET", self.path, headers={"Authorization": f"Bearer {self.token}"})
                r = conn.getresponse()
                body = r.read()
                good = r.status == 200 and body
                if r.will_close:
                    conn.close()
                    conn = None
            except (OSError, http.client.HTTPException) as e:
                good = False
                r = e
                if conn is not None:
                    conn.close()
                conn = None
            elapsed = time.monotonic() - started
            with self._lock:
                if good:
                    self.ok += 1
                    self.latencies.append(elapsed)
                else:
                    self.failed += 1
                    if isinstance(r, http.client.HTTPResponse):
                        self.bad_status += 1
                    else:
                        self.no_answer += 1
                    if len(self.errors) < 5:
                        self.errors.append(repr(getattr(r, "status", r)))
            self._stop.wait(self.interval)
        if conn is not None:
            conn.close()

    def __enter__(self):
        for t in self._threads:
            t.start()
        wait_for(lambda: self.ok + self.failed > 0, timeout=15, what="the legitimate client's first request")
        return self

    def __exit__(self, *exc):
        self._stop.set()
        for t in self._threads:
            t.join(timeout=20)
        return False

    @property
    def total(self):
        return self.ok + self.failed

    @property
    def success_rate(self):
        return self.ok / self.total if self.total else 0.0

    @property
    def p99_ms(self):
        p = percentile(self.latencies, 99)
        return None if p is None else p * 1000.0


class Results:
    """Rows of a results table, printed (and appended as JSON lines to
    $TOPOGATE_RELIABILITY_LOG when set) when the module finishes."""

    def __init__(self, title):
        self.title = title
        self.rows = []

    def add(self, **row):
        self.rows.append(row)
        line = json.dumps({"suite": self.title, **row}, sort_keys=True)
        print(line)
        path = os.environ.get("TOPOGATE_RELIABILITY_LOG")
        if path:
            with open(path, "a") as f:
                f.write(line + "\n")

    def render(self):
        if not self.rows:
            return ""
        keys = list(self.rows[0].keys())
        for r in self.rows[1:]:
            keys += [k for k in r if k not in keys]
        lines = [f"== {self.title}", " | ".join(keys)]
        for r in self.rows:
            lines.append(" | ".join(str(r.get(k, "")) for k in keys))
        return "\n".join(lines)


def secret_dir(base: Path, version, files):
    """Lays out files as a Kubernetes Secret volume does: ..<version>/ holds them, ..data
    points at it and is swapped atomically (rename of a symlink), each name is a symlink
    through ..data."""
    import shutil
    vdir = base / f"..{version}"
    vdir.mkdir(parents=True)
    for name, src in files.items():
        if isinstance(src, (bytes, str)):
            (vdir / name).write_bytes(src if isinstance(src, bytes) else src.encode())
        else:
            shutil.copy(src, vdir / name)
    tmp = base / "..data_tmp"
    os.symlink(vdir.name, tmp)
    os.replace(tmp, base / "..data")
    for name in files:
        link = base / name
        if not link.is_symlink():
            os.symlink(f"..data/{name}", link)


def peer_certificate_der(port, pki):
    s = tls_socket(port, pki)
    try:
        return s.getpeercert(binary_form=True)
    finally:
        s.close()


def write_inventory_files(d: Path, pki, revision="inventory-42"):
    (d / "topologysource.yaml").write_text(TOPOLOGY_SOURCE)
    if not (d / "snapshot.yaml").exists():
        (d / "snapshot.yaml").write_text(SNAPSHOT.format(revision=revision))
    writer = d / "writer.token"
    if not writer.exists():
        writer.write_text("writer-token-0123456789abcdef\n")
    return writer


def start_server(binary, d: Path, config: str, extra_args=()):
    d.mkdir(parents=True, exist_ok=True)
    return Server(binary, d, config, extra_args).start()

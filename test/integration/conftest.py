"""Fixtures for the integration tests: they start the real topogate binary on a free
loopback port and talk to it with real clients (curl, openssl s_client, Python's ssl).

Environment: TOPOGATE_BINARY (the built binary; the tests are skipped without it)."""

import json
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parent / "fixtures"


def _sanitizer_slowdown(path):
    """How much slower the binary's sanitizer build runs the same code (as test/timing.hpp
    says: ThreadSanitizer 5-15x, 15 taken; AddressSanitizer + UBSan about 2-3x, 3), from
    the runtime it links."""
    try:
        libs = subprocess.run(["ldd", path], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return 1
    return 15 if "libtsan" in libs else 3 if "libasan" in libs else 1


SANITIZER_SLOWDOWN = _sanitizer_slowdown(os.environ.get("TOPOGATE_BINARY", ""))
# How long a test may wait beyond the configured timeout a bound is derived from: two
# seconds of scheduling slack on a shared two-core machine, times the slowdown. Anything
# tighter is asserted by the order of events, not by a duration.
SCHEDULING_MARGIN_S = 2.0 * SANITIZER_SLOWDOWN


def wait_for(predicate, timeout=15.0, interval=0.05, what="condition"):
    """Polls `predicate` until it returns a truthy value or the deadline passes."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = predicate()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what} (last: {last!r})")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def closed_port():
    """A loopback port where a connection is refused for the whole test: bound, never listening,
    so no other test can take it."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        yield s.getsockname()[1]


def on_free_port(start, attempts=5):
    """start(port) on a port free when chosen. Another test running at the same time (ctest -j)
    may take it before the bind: when start fails with "address already in use" (an
    AssertionError saying so), it is tried again with another port, up to `attempts` times."""
    for attempt in range(attempts):
        try:
            return start(free_port())
        except AssertionError as e:
            if attempt + 1 == attempts or "address already in use" not in str(e).lower():
                raise


def start_prometheus(config_file: Path, data: Path, log_path: Path, cwd=None):
    """Debian's Prometheus on a free loopback port (on_free_port), ready when its own log says
    so, not when whatever answers on the port does: (process, port, log file)."""
    def start(port):
        log = open(log_path, "w")
        proc = subprocess.Popen(["prometheus", f"--config.file={config_file}", f"--storage.tsdb.path={data}",
                                 f"--web.listen-address=127.0.0.1:{port}"], stdout=log, stderr=log, cwd=cwd)

        def ready():
            if proc.poll() is not None:
                return "exited"
            return "Server is ready to receive web requests" in log_path.read_text(errors="replace") or None

        if wait_for(ready, timeout=60, interval=0.25, what="Prometheus to be ready") is True:
            return proc, port, log
        log.close()
        raise AssertionError(f"prometheus exited with {proc.returncode}:\n"
                             f"{log_path.read_text(errors='replace')[-4000:]}")

    return on_free_port(start)


def run(cmd, check=True, **kw):
    return subprocess.run(cmd, check=check, capture_output=True, text=True, **kw)


@pytest.fixture(scope="session")
def binary():
    path = os.environ.get("TOPOGATE_BINARY")
    if not path or not os.access(path, os.X_OK):
        pytest.skip("TOPOGATE_BINARY is not set to the built topogate binary")
    return path


class Pki:
    """The demo's CA, server and client certificates and token, plus certificates from
    a second, unrelated CA and an RSA server certificate, made with the openssl CLI."""

    def __init__(self, d: Path):
        self.dir = d
        self.ca = d / "ca.crt"
        self.ca_key = d / "ca.key"
        self.server_crt = d / "server.crt"
        self.server_key = d / "server.key"
        self.client_crt = d / "client.crt"
        self.client_key = d / "client.key"
        self.token_file = d / "token"
        self.token = self.token_file.read_text().strip()

    def issue(self, name, cn, san=None, ca=None, ca_key=None, key="ec"):
        key_path = self.dir / f"{name}.key"
        csr = self.dir / f"{name}.csr"
        crt = self.dir / f"{name}.crt"
        newkey = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256"] if key == "ec" else ["-newkey", "rsa:2048"]
        run(["openssl", "req", "-new", *newkey, "-nodes", "-keyout", str(key_path), "-out", str(csr), "-subj", f"/CN={cn}"])
        ext = self.dir / f"{name}.ext"
        lines = ["basicConstraints=CA:FALSE"]
        if san:
            lines.append(f"subjectAltName={san}")
        ext.write_text("\n".join(lines) + "\n")
        run(["openssl", "x509", "-req", "-in", str(csr), "-CA", str(ca or self.ca), "-CAkey", str(ca_key or self.ca_key),
             "-CAcreateserial", "-out", str(crt), "-days", "2", "-extfile", str(ext)])
        return crt, key_path

    def make_ca(self, name, cn):
        key = self.dir / f"{name}.key"
        crt = self.dir / f"{name}.crt"
        run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
             "-keyout", str(key), "-out", str(crt), "-subj", f"/CN={cn}", "-days", "2"])
        return crt, key


@pytest.fixture(scope="session")
def pki(binary, tmp_path_factory):
    d = tmp_path_factory.mktemp("pki")
    proc = subprocess.Popen([binary, "demo", "--dir", str(d), "--port", "0"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: (d / "demo.env").exists(), what="demo.env")
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
    p = Pki(d)
    p.other_ca, p.other_ca_key = p.make_ca("other-ca", "unrelated CA")
    p.stranger_crt, p.stranger_key = p.issue("stranger", "topogate-demo-client", ca=p.other_ca, ca_key=p.other_ca_key)
    p.rsa_crt, p.rsa_key = p.issue("rsa-server", "localhost", san="DNS:localhost,IP:127.0.0.1", key="rsa")
    return p


class Server:
    """One `topogate serve` process with its configuration in its own directory."""

    def __init__(self, binary, directory: Path, config: str, extra_args=()):
        self.binary = binary
        self.dir = directory
        self.config = directory / "topogate.yaml"
        self.config.write_text(config)
        self.log_path = directory / "server.log"
        self.extra_args = list(extra_args)
        self.proc = None
        self.port = None
        self.health_port = None

    def start(self, listen_timeout=15.0):
        """Starts the process and waits (up to `listen_timeout` s) for its `listening` log line;
        `started_at` is the monotonic time just before the process was spawned."""
        self.log = open(self.log_path, "w")
        self.started_at = time.monotonic()
        self.proc = subprocess.Popen([self.binary, "serve", "--config", str(self.config), "--port", "0",
                                      *self.extra_args], stdout=subprocess.DEVNULL, stderr=self.log)

        def listening():
            if self.proc.poll() is not None:
                raise AssertionError(f"topogate exited with {self.proc.returncode}:\n{self.log_path.read_text()}")
            for line in self.log_path.read_text().splitlines():
                try:
                    entry = json.loads(line)
                except ValueError:
                    continue
                if entry.get("msg") == "listening":
                    return entry
            return None

        entry = wait_for(listening, timeout=listen_timeout, what="the listening log line")
        self.port = entry["port"]
        self.health_port = entry.get("health_port")
        return self

    @property
    def url(self):
        return f"https://127.0.0.1:{self.port}"

    def logs(self):
        out = []
        for line in self.log_path.read_text().splitlines():
            try:
                out.append(json.loads(line))
            except ValueError:
                pass
        return out

    def signal(self, sig):
        self.proc.send_signal(sig)

    def stop(self, timeout=30):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc:
            self.log.close()
        return self.proc.returncode if self.proc else None


TOPOLOGY_SOURCE = """apiVersion: worker.gpustack.ai/v1
kind: TopologySource
metadata:
  name: data-center
spec:
  nodeSelector: {}
  levels:
    - topology.gpustack.ai/region
    - topology.gpustack.ai/zone
    - topology.gpustack.ai/rack
  configMap:
    configMapRef: {namespace: gpustack-system, name: topology-inventory}
    key: snapshot.yaml
    maxStaleness: 10m
"""

SNAPSHOT = """apiVersion: topology.gpustack.ai/v1alpha1
revision: {revision}
nodes:
  worker-a:
    topology.gpustack.ai/region: region-a
    topology.gpustack.ai/zone: zone-a
    topology.gpustack.ai/rack: rack-01
  worker-b:
    topology.gpustack.ai/region: region-a
    topology.gpustack.ai/zone: zone-a
    topology.gpustack.ai/rack: rack-02
"""


def default_config(pki, d: Path, extra="", inventory_extra="", readers=None):
    (d / "topologysource.yaml").write_text(TOPOLOGY_SOURCE)
    if not (d / "snapshot.yaml").exists():
        (d / "snapshot.yaml").write_text(SNAPSHOT.format(revision="inventory-42"))
    readers = readers or f"{{bearerTokenFiles: [{pki.token_file}], clientCAFile: {pki.ca}}}"
    return f"""listen: {{address: 127.0.0.1, port: 0}}
tls: {{certFile: {pki.server_crt}, keyFile: {pki.server_key}}}
{extra}
inventories:
  - name: demo
    source: topologysource.yaml
    snapshot: snapshot.yaml
    readers: {readers}
{inventory_extra}
"""


SANITIZER_MARKERS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "WARNING: ThreadSanitizer",
                     "runtime error:")


def sanitizer_report(log: str) -> str:
    """The first lines of a sanitizer report in a server log, or ''."""
    for marker in SANITIZER_MARKERS:
        at = log.find(marker)
        if at >= 0:
            return "\n".join(log[at:].splitlines()[:40])
    return ""


# In make_server's configuration text or extra_args: a port that is free when the server
# starts (on_free_port; the same one wherever it appears, and the Server's `free_port`).
FREE_PORT = "@FREE_PORT@"


@pytest.fixture
def make_server(binary, tmp_path):
    servers = []

    def factory(config, extra_args=(), subdir="srv", listen_timeout=15.0):
        d = tmp_path / subdir
        d.mkdir(exist_ok=True)
        text = config(d) if callable(config) else config
        args = [str(a) for a in extra_args]

        def start(port):
            s = Server(binary, d, text.replace(FREE_PORT, str(port)), [a.replace(FREE_PORT, str(port)) for a in args])
            s.free_port = port
            servers.append(s)
            try:
                return s.start(listen_timeout=listen_timeout)
            except AssertionError:
                s.stop()
                raise

        if FREE_PORT in text or any(FREE_PORT in a for a in args):
            return on_free_port(start)
        return start(None)

    yield factory
    reports = []
    for s in servers:
        s.stop()
        report = sanitizer_report(s.log_path.read_text(errors="replace"))
        if report:
            reports.append(f"{s.log_path}:\n{report}")
    # Under the asan-ubsan and tsan presets the server reports on stderr and may keep running
    # (TSan) or exit at shutdown (LeakSanitizer): the test fails on any report.
    assert not reports, "sanitizer report from topogate:\n" + "\n".join(reports)


@pytest.fixture
def server(make_server, pki):
    return make_server(lambda d: default_config(pki, d))


@pytest.fixture
def hanging_api(pki):
    """An HTTPS API server that accepts every request and never answers (hanging_api.py)."""
    from hanging_api import HangingApiServer
    api = HangingApiServer(pki.server_crt, pki.server_key)
    yield api
    api.stop()


def api_client_config(pki, d, api_url, token, section):
    """topogate with no inventory, calling the Kubernetes API at `api_url` with `token`, and
    `section` (YAML lines: the feature under test, e.g. "audit: {enabled: true}")."""
    (d / "api.token").write_text(token + "\n")
    return f"""listen: {{address: 127.0.0.1, port: 0}}
tls: {{certFile: {pki.server_crt}, keyFile: {pki.server_key}}}
threads: 1
limits: {{shutdownTimeout: 2s}}
store: {{type: none, apiServer: '{api_url}', tokenFile: {d / 'api.token'}, caFile: {pki.ca}}}
{section}
"""


def curl(*args, check=False):
    """curl with -sS; returns (status code, body, stderr, returncode)."""
    p = subprocess.run(["curl", "-sS", "-o", "-", "-w", "\n%{http_code}", *args], capture_output=True, text=True,
                       timeout=60)
    body, _, code = p.stdout.rpartition("\n")
    return int(code or 0), body, p.stderr, p.returncode


def k8s_status(body, code, reason):
    """The error body every answer of topogate's that is not a success carries: a Kubernetes
    metav1.Status (server/response.hpp). Returns it, parsed."""
    status = json.loads(body)
    assert status["kind"] == "Status" and status["apiVersion"] == "v1", body
    assert status["status"] == "Failure" and status["message"], body
    assert status["code"] == code and status["reason"] == reason, body
    return status


def have(tool):
    return shutil.which(tool) is not None

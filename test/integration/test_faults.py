"""Faults under load, against the real binary: certificate, client-CA and token rotation
while clients keep requesting on keep-alive connections; SIGTERM while reads and pushes
run; a full and a read-only store directory during pushes. Every number measured is
printed as a table at the end of the module."""

import http.client
import json
import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

from conftest import Server, wait_for
from hostile_support import (LegitClient, Results, client_context, peer_certificate_der, proc_status,
                             read_until_closed, secret_dir, start_server, status_of, tls_socket, write_inventory_files)

RESULTS = Results("faults under load")
SHUTDOWN_TIMEOUT_S = 5


@pytest.fixture(scope="module", autouse=True)
def print_results():
    yield
    print()
    print(RESULTS.render())


def request(port, pki, method, path, token, body=None, headers=None, cert=None, key=None):
    """One request on a new connection: (status, body bytes)."""
    conn = http.client.HTTPSConnection("127.0.0.1", port, context=client_context(pki, cert, key), timeout=10)
    try:
        h = {"Authorization": f"Bearer {token}"} if token else {}
        h.update(headers or {})
        conn.request(method, path, body=body, headers=h)
        r = conn.getresponse()
        return r.status, r.read()
    finally:
        conn.close()


def der(path: Path):
    import ssl
    return ssl.PEM_cert_to_DER_cert(path.read_text())


def test_rotation_under_load(binary, pki, tmp_path):
    """Serving certificate, client CA (overlapping bundle, then the new CA alone) and bearer
    tokens (add, switch clients, remove) rotated through Secret-volume symlink swaps while
    four clients keep requesting on keep-alive connections: no request fails, no
    established connection is dropped, new connections see each new piece of material."""
    d = tmp_path / "srv"
    d.mkdir()
    write_inventory_files(d, pki)
    secret = tmp_path / "secret"
    secret.mkdir()
    secret_dir(secret, "v1", {"tls.crt": pki.server_crt, "tls.key": pki.server_key, "token": "token-one\n",
                              "ca.crt": pki.ca})
    config = f"""listen: {{address: 127.0.0.1, port: 0}}
tls: {{certFile: {secret / 'tls.crt'}, keyFile: {secret / 'tls.key'}}}
limits: {{idleTimeout: 60s, readTimeout: 10s}}
logging: {{level: info, accessLog: false}}
inventories:
  - name: demo
    source: topologysource.yaml
    snapshot: snapshot.yaml
    readers: {{bearerTokenFiles: [{secret / 'token'}], clientCAFile: {secret / 'ca.crt'}}}
"""
    srv = start_server(binary, d, config)
    new_ca, new_ca_key = pki.make_ca("client-ca-2", "client CA 2")
    new_client, new_client_key = pki.issue("client-ca2-leaf", "reader-2", ca=new_ca, ca_key=new_ca_key)
    server_v2, server_v2_key = pki.issue("server-rot-v2", "localhost", san="DNS:localhost,IP:127.0.0.1")
    bundle = pki.ca.read_text() + new_ca.read_text()
    steps = []
    try:
        with LegitClient(srv.port, pki, token="token-one", threads=4, interval=0.002) as legit:
            started = time.monotonic()
            # 1. serving certificate
            secret_dir(secret, "v2", {"tls.crt": server_v2, "tls.key": server_v2_key, "token": "token-one\n",
                                      "ca.crt": pki.ca})
            wait_for(lambda: peer_certificate_der(srv.port, pki) == der(server_v2), what="the new serving certificate")
            steps.append("serving cert: new connections get v2")
            # 2. client CA: old and new CA overlap
            secret_dir(secret, "v3", {"tls.crt": server_v2, "tls.key": server_v2_key, "token": "token-one\n",
                                      "ca.crt": bundle})
            wait_for(lambda: request(srv.port, pki, "GET", "/snapshots/demo", None, cert=new_client,
                                     key=new_client_key)[0] == 200, what="the new client CA")
            assert request(srv.port, pki, "GET", "/snapshots/demo", None, cert=pki.client_crt,
                           key=pki.client_key)[0] == 200
            steps.append("client CA bundle old+new: both client certs 200")
            # 3. tokens: add the new one, move the clients over
            secret_dir(secret, "v4", {"tls.crt": server_v2, "tls.key": server_v2_key,
                                      "token": "token-one\ntoken-two\n", "ca.crt": bundle})
            wait_for(lambda: request(srv.port, pki, "GET", "/snapshots/demo", "token-two")[0] == 200,
                     what="the new token")
            legit.token = "token-two"
            steps.append("token-two added; clients switched")
            # 4. retire the old token and the old CA
            secret_dir(secret, "v5", {"tls.crt": server_v2, "tls.key": server_v2_key, "token": "token-two\n",
                                      "ca.crt": new_ca})
            wait_for(lambda: request(srv.port, pki, "GET", "/snapshots/demo", "token-one")[0] == 403,
                     what="the old token to be refused")
            wait_for(lambda: request(srv.port, pki, "GET", "/snapshots/demo", None, cert=pki.client_crt,
                                     key=pki.client_key)[0] == 403, what="the old client CA to be refused")
            assert request(srv.port, pki, "GET", "/snapshots/demo", None, cert=new_client,
                           key=new_client_key)[0] == 200
            steps.append("token-one and old CA retired: 403 on new connections")
            # Keep the load a little longer on the final material.
            target = legit.total + 200
            wait_for(lambda: legit.total >= target, what="more load after the rotation")
            elapsed = time.monotonic() - started
        mem = proc_status(srv.proc.pid)
    finally:
        rc = srv.stop()
    RESULTS.add(fault="rotate serving cert, client CA, bearer tokens", load="4 keep-alive clients",
                duration_s=round(elapsed, 1), requests=legit.total, failed=legit.failed,
                reconnects=legit.connects - 4, p99_ms=round(legit.p99_ms or 0, 1), vm_hwm_kib=mem["VmHWM"],
                observed="; ".join(steps))
    assert rc == 0
    assert legit.failed == 0, legit.errors
    assert legit.connects == 4, "an established connection was dropped during rotation"


class Pusher:
    """PUTs revisions push-1, push-2, ... one after another on a keep-alive connection and
    records which were acknowledged."""

    def __init__(self, port, pki, token):
        self.port, self.pki, self.token = port, pki, token
        self.acked = []
        self.refused = []         # answered with a status other than 200/201
        self.no_response = []     # sent, then the connection closed without an answer
        self.not_sent = 0         # could not connect (the listener is gone)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        conn = None
        n = 0
        while not self._stop.is_set():
            n += 1
            revision = f"push-{n}"
            body = SNAPSHOT_FOR_PUSH.format(revision=revision)
            try:
                if conn is None:
                    conn = http.client.HTTPSConnection("127.0.0.1", self.port, context=client_context(self.pki),
                                                       timeout=20)
                    conn.connect()
            except OSError:
                conn = None
                self.not_sent += 1
                n -= 1
                self._stop.wait(0.05)
                continue
            try:
                conn.request("PUT", "/snapshots/push", body=body,
                             headers={"Authorization": f"Bearer {self.token}", "Content-Type": "application/yaml"})
                r = conn.getresponse()
                r.read()
                (self.acked if r.status in (200, 201) else self.refused).append((revision, r.status,
                                                                                 time.monotonic()))
                if r.will_close:
                    conn.close()
                    conn = None
            except (OSError, http.client.HTTPException):
                self.no_response.append(revision)
                conn.close()
                conn = None

    def start(self):
        self._thread.start()
        return self

    def stop(self):
        self._stop.set()
        self._thread.join(timeout=30)


SNAPSHOT_FOR_PUSH = """apiVersion: topology.gpustack.ai/v1alpha1
revision: {revision}
nodes:
  worker-a: {{topology.gpustack.ai/region: region-a, topology.gpustack.ai/zone: zone-a, topology.gpustack.ai/rack: rack-01}}
  worker-b: {{topology.gpustack.ai/region: region-a, topology.gpustack.ai/zone: zone-a, topology.gpustack.ai/rack: rack-02}}
"""


def push_config(pki, d: Path, store: Path, writer: Path, tickets: bool = True):
    return f"""listen: {{address: 127.0.0.1, port: 0}}
tls: {{certFile: {pki.server_crt}, keyFile: {pki.server_key}, sessionTickets: {str(tickets).lower()}}}
limits: {{shutdownTimeout: {SHUTDOWN_TIMEOUT_S}s, idleTimeout: 60s}}
logging: {{level: info, accessLog: false}}
store: {{type: file, directory: {store}}}
inventories:
  - name: push
    source: topologysource.yaml
    allowEmptyStart: true
    readers: {{bearerTokenFiles: [{pki.token_file}]}}
    writers: {{bearerTokenFiles: [{writer}]}}
"""


def served_revision(port, pki):
    status, body = request(port, pki, "GET", "/snapshots/push", pki.token)
    return status, (json.loads(body)["revision"] if status == 200 else None), body


def served_revision_after_start(port, pki, timeout=15):
    """served_revision of a server just started: the store's first load runs on the
    inventory's lane after the listener opens, and until it answers a GET is 503 "waiting for
    the store" (the replica cannot know what the others serve). Any other answer is final."""
    def answered():
        got = served_revision(port, pki)
        return None if got[0] == 503 and b"waiting for the store" in got[2] else got
    return wait_for(answered, timeout=timeout, interval=0.05, what="the store's first answer")


# With and without TLS session tickets: without them the server writes nothing after the
# handshake, so a connection's first request meets the drain with no TLS bytes pending.
@pytest.mark.parametrize("tickets", [True, False], ids=["tickets", "no-tickets"])
def test_sigterm_under_load_and_pushes(binary, pki, tmp_path, tickets):
    d = tmp_path / "srv"
    d.mkdir()
    writer = write_inventory_files(d, pki)
    store = tmp_path / "store"
    config = push_config(pki, d, store, writer, tickets)
    srv = start_server(binary, d, config)
    token = writer.read_text().strip()
    assert request(srv.port, pki, "PUT", "/snapshots/push", token, SNAPSHOT_FOR_PUSH.format(revision="push-0"),
                   {"Content-Type": "application/yaml"})[0] in (200, 201)
    readers = LegitClient(srv.port, pki, path="/snapshots/push", threads=4, interval=0.002)
    pusher = Pusher(srv.port, pki, token)
    with readers:
        pusher.start()
        wait_for(lambda: len(pusher.acked) >= 20 and readers.ok >= 200, timeout=60, what="load and pushes running")
        before = (readers.ok, readers.failed, len(pusher.acked))
        # A request certainly in flight when SIGTERM arrives: a push whose header and half
        # its body are sent before the signal, the rest once the server logs "draining".
        inflight_push = tls_socket(srv.port, pki)
        body = SNAPSHOT_FOR_PUSH.format(revision="push-inflight").encode()
        inflight_push.sendall(b"PUT /snapshots/push HTTP/1.1\r\nHost: x\r\nContent-Type: application/yaml\r\n"
                              b"Authorization: Bearer " + token.encode() + b"\r\nConnection: close\r\n"
                              b"Content-Length: %d\r\n\r\n" % len(body) + body[:len(body) // 2])
        started = time.monotonic()
        srv.signal(signal.SIGTERM)
        wait_for(lambda: any(e.get("msg") == "draining" for e in srv.logs()), what="the draining log line")
        inflight_push.sendall(body[len(body) // 2:])
        push_answer, _, _ = read_until_closed(inflight_push, timeout=SHUTDOWN_TIMEOUT_S + 5)
        inflight_push.close()
        rc = srv.proc.wait(timeout=SHUTDOWN_TIMEOUT_S + 15)
        exit_s = time.monotonic() - started
        pusher.stop()
    srv.log.close()
    # Answers that arrived were all successes; what failed after SIGTERM failed because the
    # connection was closed or refused, never with an error status.
    # The pusher's pushes are sequential; the in-flight push ran beside them, so either may
    # be the last one the store took.
    last_acked = [a[0] for a in pusher.acked if a[0] != "push-inflight"][-1:]
    # Durability: restart on the same store and read it back (the first run's log is kept
    # beside the second's for a failure's diagnosis).
    srv.log_path.rename(d / "server-before-sigterm.log")
    srv2 = start_server(binary, d, config)
    try:
        status, revision, _ = served_revision_after_start(srv2.port, pki)
    finally:
        srv2.stop()
    in_flight = list(pusher.no_response)
    inflight_status = status_of(push_answer)
    if inflight_status in (200, 201):
        last_acked.append("push-inflight")
    RESULTS.add(fault="SIGTERM during reads + pushes", load="4 reader threads + 1 pusher, keep-alive",
                requests=readers.total, failed=readers.failed, reads_ok_before_sigterm=before[0],
                reads_answered_not_200=readers.bad_status,
                reads_unanswered_closed=readers.no_answer, reads_refused=readers.not_connected, pushes_acked=len(pusher.acked), pushes_refused=len(pusher.refused),
                pushes_unanswered=len(pusher.no_response), exit_s=round(exit_s, 2), rc=rc,
                inflight_push_status=inflight_status, last_acked=last_acked, served_after_restart=revision, p99_ms=round(readers.p99_ms or 0, 1),
                observed=f"read failures after SIGTERM (connection closed/refused, no answer): {readers.errors[:3]}")
    assert rc == 0
    assert exit_s < SHUTDOWN_TIMEOUT_S + 3
    assert readers.bad_status == 0, readers.errors
    # Closing an idle keep-alive connection races with the client's next request on it
    # (RFC 9112 section 9.3.1: the client retries); at most one such loss per connection.
    assert readers.no_answer <= 4, readers.errors
    assert not pusher.refused, pusher.refused
    assert inflight_status in (200, 201), push_answer[:500]
    assert status == 200
    # Every acknowledged push is durable: the store holds a last acknowledged revision, or
    # one whose push was written but whose answer was cut by the exit.
    assert revision in last_acked + in_flight, (revision, last_acked, in_flight)


def mount_tmpfs(path: Path, size: str):
    path.mkdir(parents=True, exist_ok=True)
    p = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", str(path)],
                       capture_output=True, text=True)
    return p.returncode == 0, p.stderr.strip()


def fill(path: Path):
    """Fills the file system holding `path`; returns the filler file."""
    filler = path / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        while True:
            os.write(fd, b"\0" * 4096)
    except OSError:
        pass
    finally:
        os.close(fd)
    return filler


def test_full_and_read_only_store(binary, pki, tmp_path):
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    store = tmp_path / "store"
    ok, err = mount_tmpfs(store, "256k")
    if not ok:
        pytest.skip(f"cannot mount a tmpfs here: {err}")
    d = tmp_path / "srv"
    d.mkdir()
    writer = write_inventory_files(d, pki)
    token = writer.read_text().strip()
    srv = None
    steps = []

    def push(revision):
        return request(srv.port, pki, "PUT", "/snapshots/push", token, SNAPSHOT_FOR_PUSH.format(revision=revision),
                       {"Content-Type": "application/yaml"})

    try:
        srv = start_server(binary, d, push_config(pki, d, store, writer))
        assert push("disk-1")[0] in (200, 201)
        with LegitClient(srv.port, pki, path="/snapshots/push", threads=2) as legit:
            _, _, body_before = served_revision(srv.port, pki)
            # Disk full.
            filler = fill(store)
            status, answer = push("disk-2")
            assert 500 <= status < 600, (status, answer)
            s2, rev, body_after = served_revision(srv.port, pki)
            assert (s2, rev) == (200, "disk-1") and body_after == body_before
            steps.append(f"full: push {status}, served disk-1 unchanged")
            filler.unlink()
            assert push("disk-3")[0] in (200, 201)
            assert served_revision(srv.port, pki)[1] == "disk-3"
            steps.append("space back: push 200, disk-3 served")
            # Read-only.
            subprocess.run(["mount", "-o", "remount,ro", str(store)], check=True)
            status, answer = push("ro-1")
            assert 500 <= status < 600, (status, answer)
            assert served_revision(srv.port, pki)[1] == "disk-3"
            steps.append(f"read-only: push {status}, disk-3 unchanged")
            subprocess.run(["mount", "-o", "remount,rw", str(store)], check=True)
            assert push("ro-2")[0] in (200, 201)
            assert served_revision(srv.port, pki)[1] == "ro-2"
            steps.append("writable again: push 200, ro-2 served")
            leftovers = [p.name for p in store.iterdir()]
        mem = proc_status(srv.proc.pid)
        assert srv.stop() == 0
        # Restart: the last acknowledged revision is what the store holds.
        srv = start_server(binary, d, push_config(pki, d, store, writer))
        assert served_revision_after_start(srv.port, pki)[1] == "ro-2"
        steps.append("restart: ro-2")
    finally:
        if srv:
            srv.stop()
        subprocess.run(["umount", "-l", str(store)], capture_output=True)
    RESULTS.add(fault="store full (256 KiB tmpfs), then read-only, during pushes", load="2 reader threads",
                requests=legit.total, failed=legit.failed, p99_ms=round(legit.p99_ms or 0, 1),
                vm_hwm_kib=mem["VmHWM"], observed="; ".join(steps), store_files=",".join(leftovers))
    assert legit.failed == 0, legit.errors
    assert answer  # the 5xx carries a reason

"""Limits (header size, per-route body size, connections, timeouts), the plain health
listener, SIGHUP and SIGTERM draining, against the real binary."""

import http.client
import json
import signal
import socket
import ssl
import subprocess
import time

from conftest import FREE_PORT, SANITIZER_SLOWDOWN, SCHEDULING_MARGIN_S, curl, default_config, k8s_status, wait_for


def tls_conn(srv, pki):
    ctx = ssl.create_default_context(cafile=str(pki.ca))
    conn = http.client.HTTPSConnection("127.0.0.1", srv.port, context=ctx, timeout=10)
    conn.connect()
    return conn


def test_header_limit(make_server, pki):
    srv = make_server(lambda d: default_config(pki, d, extra="limits: {headerBytes: 4096}"))
    ok = curl("--cacert", str(pki.ca), "-H", "X-Pad: " + "a" * 3000, f"{srv.url}/livez")
    assert ok[0] == 200
    big = curl("--cacert", str(pki.ca), "-H", "X-Pad: " + "a" * 5000, f"{srv.url}/livez")
    assert big[0] == 431
    k8s_status(big[1], 431, "BadRequest")


def test_get_routes_take_no_body(server, pki):
    code, body, _, _ = curl("--cacert", str(pki.ca), "-X", "GET", "--data", "x", f"{server.url}/livez")
    assert code == 413
    k8s_status(body, 413, "RequestEntityTooLarge")


def test_a_body_to_no_route_gets_the_routing_answer(server, pki):
    # Refused before the body is read, with the answer the path and method get without one:
    # 404 where no route has the path, 405 (with Allow) where its routes take other methods.
    for method, path, status, reason in (("POST", "/validate/nope", 404, "NotFound"),
                                         ("PUT", "/snapshots/demo/status", 405, "MethodNotAllowed"),
                                         ("PUT", "/snapshots/demo/history", 405, "MethodNotAllowed"),
                                         ("PUT", "/snapshots/demo/other", 404, "NotFound")):
        code, body, _, _ = curl("--cacert", str(pki.ca), "-X", method, "--data", "x" * 100,
                                f"{server.url}{path}")
        assert code == status, (method, path, code)
        k8s_status(body, status, reason)


def test_push_body_limit(make_server, pki):
    srv = make_server(lambda d: default_config(pki, d, extra="limits: {pushBodyBytes: 1000}"))
    # Checked before authentication: the body is never read.
    code, body, _, _ = curl("--cacert", str(pki.ca), "-X", "PUT", "--data-binary", "a" * 1001,
                            f"{srv.url}/snapshots/demo")
    assert code == 413
    assert "exceeds the limit of 1000 bytes" in k8s_status(body, 413, "RequestEntityTooLarge")["message"]
    code, body, _, _ = curl("--cacert", str(pki.ca), "-X", "PUT", "--data-binary", "a" * 1000,
                            f"{srv.url}/snapshots/demo")
    assert code == 401
    k8s_status(body, 401, "Unauthorized")


def test_max_connections(make_server, pki):
    srv = make_server(lambda d: default_config(pki, d, extra="limits: {maxConnections: 2}"))
    a, b = tls_conn(srv, pki), tls_conn(srv, pki)
    # The third connection is closed at accept: the TLS handshake cannot complete.
    ctx = ssl.create_default_context(cafile=str(pki.ca))
    raw = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
    try:
        refused = False
        try:
            ctx.wrap_socket(raw, server_hostname="localhost")
        except (ssl.SSLError, ConnectionError, OSError):
            refused = True
        assert refused
    finally:
        raw.close()
    a.request("GET", "/livez")
    assert a.getresponse().status == 200
    a.close()
    b.close()
    wait_for(lambda: curl("--cacert", str(pki.ca), f"{srv.url}/livez")[0] == 200, what="a free connection slot")


def test_idle_keep_alive_timeout(make_server, pki):
    srv = make_server(lambda d: default_config(pki, d, extra="limits: {idleTimeout: 1s}"))
    conn = tls_conn(srv, pki)
    conn.request("GET", "/livez")
    r = conn.getresponse()
    r.read()
    assert r.status == 200
    sock = conn.sock
    sock.settimeout(10)
    started = time.monotonic()
    # The server closes the idle connection: the read returns EOF (or the TLS close).
    try:
        data = sock.recv(1)
    except (ssl.SSLError, ConnectionError):
        data = b""
    assert data == b""
    assert time.monotonic() - started < 9


def test_handshake_timeout(make_server, pki):
    srv = make_server(lambda d: default_config(pki, d, extra="limits: {handshakeTimeout: 1s}"))
    raw = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
    started = time.monotonic()
    assert raw.recv(1) == b""  # nothing sent: closed after the handshake timeout
    assert time.monotonic() - started < 9
    raw.close()


class MemoryTls:
    """A TLS client over a raw socket (memory BIOs), so that the test decides what goes on
    the wire: a request, a close_notify or not, then the TCP end of the stream."""

    def __init__(self, port, pki):
        ctx = ssl.create_default_context(cafile=str(pki.ca))
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.incoming, self.outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
        self.tls = ctx.wrap_bio(self.incoming, self.outgoing, server_hostname="localhost")
        while True:
            try:
                self.tls.do_handshake()
                break
            except ssl.SSLWantReadError:
                self.flush()
                self.incoming.write(self.sock.recv(65536))
        self.flush()

    def flush(self):
        data = self.outgoing.read()
        if data:
            self.sock.sendall(data)

    def send(self, data: bytes):
        self.tls.write(data)
        self.flush()

    def close_notify(self):
        try:
            self.tls.unwrap()
        except ssl.SSLWantReadError:
            pass  # sent; the server's is read below
        self.flush()

    def seconds_until_server_closes(self):
        """Ends the client's stream (FIN), then reads raw bytes until the server closes."""
        self.sock.shutdown(socket.SHUT_WR)
        started = time.monotonic()
        got = b""
        while True:
            try:
                chunk = self.sock.recv(65536)
            except ConnectionResetError:
                chunk = b""
            if not chunk:
                break
            got += chunk
        self.sock.close()
        self.incoming.write(got)
        self.incoming.write_eof()
        answer = b""
        try:
            while chunk := self.tls.read(65536):
                answer += chunk
        except (ssl.SSLZeroReturnError, ssl.SSLWantReadError, ssl.SSLEOFError):
            pass
        return time.monotonic() - started, answer


CLOSE_NOTIFY_WAIT_S = 2.0  # the server's wait for a client's close_notify


def test_server_closes_at_once_when_the_client_has_ended(server, pki):
    # The server answers a client's end with its close_notify and then waits up to 2 s for
    # the client's. A client whose stream has already ended (a bare FIN, or the end a 413's
    # lingering read reaches) cannot send one: the server closes at once, without holding
    # the connection for those 2 s. Each close below takes milliseconds; the bound is the
    # 2 s wait itself, which the margin cannot be added to without losing what it tells.
    bare = MemoryTls(server.port, pki)
    bare.send(b"GET /livez HTTP/1.1\r\nHost: x\r\n\r\n")
    time.sleep(0.2)  # the response is out; the next read is the one that meets the end
    took, answer = bare.seconds_until_server_closes()
    assert answer.startswith(b"HTTP/1.1 200"), answer[:100]
    assert took < CLOSE_NOTIFY_WAIT_S, f"closed after {took:.2f} s"

    lingered = MemoryTls(server.port, pki)
    lingered.send(b"PUT /snapshots/demo HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999\r\n\r\n" + b"a" * 100)
    time.sleep(0.2)  # the 413 is out and the server reads what follows raw, to the end
    lingered.close_notify()
    took, answer = lingered.seconds_until_server_closes()
    assert answer.startswith(b"HTTP/1.1 413"), answer[:100]
    assert took < CLOSE_NOTIFY_WAIT_S, f"closed after {took:.2f} s"

    # The usual end, close_notify then FIN, as before.
    polite = MemoryTls(server.port, pki)
    polite.send(b"GET /livez HTTP/1.1\r\nHost: x\r\n\r\n")
    time.sleep(0.2)
    polite.close_notify()
    took, answer = polite.seconds_until_server_closes()
    assert answer.startswith(b"HTTP/1.1 200"), answer[:100]
    assert took < CLOSE_NOTIFY_WAIT_S, f"closed after {took:.2f} s"


def test_plain_health_listener(make_server, pki):
    srv = make_server(lambda d: default_config(pki, d, extra=f"listen: {{address: 127.0.0.1, port: 0, healthPort: {FREE_PORT}}}")
                      .replace("listen: {address: 127.0.0.1, port: 0}\n", "", 1))
    hp = srv.free_port
    assert srv.health_port == hp
    conn = http.client.HTTPConnection("127.0.0.1", hp, timeout=10)
    for path, want in (("/healthz", 200), ("/livez", 200), ("/readyz?verbose", 200), ("/metrics", 200),
                       ("/snapshots/demo", 404), ("/validate/topologysources", 404)):
        conn.request("GET", path)
        r = conn.getresponse()
        r.read()
        assert r.status == want, path


def test_sighup_rereads_the_snapshot(make_server, pki):
    srv = make_server(lambda d: default_config(pki, d))
    (srv.dir / "snapshot.yaml").write_text((srv.dir / "snapshot.yaml").read_text().replace("inventory-42", "inventory-43"))
    srv.signal(signal.SIGHUP)

    def revision():
        code, body, _, _ = curl("--cacert", str(pki.ca), "-H", f"Authorization: Bearer {pki.token}",
                                f"{srv.url}/snapshots/demo")
        return code == 200 and json.loads(body)["revision"] == "inventory-43"

    wait_for(revision, what="the new revision after SIGHUP")
    assert srv.proc.poll() is None


def test_sigterm_drains_and_exits(make_server, pki):
    # shutdownTimeout: what waiting for the idle connection would take; scaled with the
    # sanitizer's slowdown so that the drain itself fits well within it.
    timeout_s = 5 * SANITIZER_SLOWDOWN
    srv = make_server(lambda d: default_config(pki, d, extra=f"limits: {{shutdownTimeout: {timeout_s}s}}"))
    idle = tls_conn(srv, pki)
    idle.request("GET", "/livez")
    idle.getresponse().read()
    started = time.monotonic()
    srv.signal(signal.SIGTERM)
    rc = srv.proc.wait(timeout=timeout_s + SCHEDULING_MARGIN_S + 20)
    assert rc == 0
    # The idle keep-alive connection was closed rather than waited for.
    assert time.monotonic() - started < timeout_s
    refused = subprocess.run(["curl", "-sS", "--cacert", str(pki.ca), f"{srv.url}/livez"], capture_output=True)
    assert refused.returncode != 0
    msgs = [e.get("msg") for e in srv.logs()]
    assert "draining" in msgs and "stopped" in msgs


def test_sigterm_with_a_shutdown_delay_keeps_serving_then_drains(make_server, pki):
    # The delay is scaled with the sanitizer's slowdown so that the requests below fit in it.
    delay_s = 2 * SANITIZER_SLOWDOWN
    srv = make_server(lambda d: default_config(
        pki, d, extra=f"limits: {{shutdownDelay: {delay_s}s, shutdownTimeout: 5s}}"))
    kept = tls_conn(srv, pki)
    kept.request("GET", "/livez")
    r = kept.getresponse()
    r.read()
    assert r.getheader("Connection", "").lower() != "close"
    started = time.monotonic()
    srv.signal(signal.SIGTERM)
    wait_for(lambda: curl("--cacert", str(pki.ca), f"{srv.url}/readyz")[0] == 503, what="/readyz failing")
    # During the delay: the open connection and new ones are still served, the snapshot too,
    # and every answer closes its connection.
    kept.request("GET", "/livez")
    r = kept.getresponse()
    r.read()
    assert r.status == 200 and r.getheader("Connection", "").lower() == "close"
    code, body, _, _ = curl("--cacert", str(pki.ca), "-H", f"Authorization: Bearer {pki.token}", f"{srv.url}/snapshots/demo")
    assert code == 200 and json.loads(body)["revision"] == "inventory-42"
    # In that order, not by a duration: all of it was answered before the delay ended (the
    # listener closes at its end), and the process is still there.
    assert srv.proc.poll() is None
    # After it: the listener is closed and the process exits 0.
    rc = srv.proc.wait(timeout=delay_s + 20)
    assert rc == 0
    assert time.monotonic() - started >= delay_s
    refused = subprocess.run(["curl", "-sS", "--cacert", str(pki.ca), f"{srv.url}/livez"], capture_output=True)
    assert refused.returncode != 0
    msgs = [e.get("msg") for e in srv.logs()]
    assert msgs.index("shutdown delay: serving while the endpoints drop this replica") < msgs.index("draining")


def test_second_signal_ends_the_shutdown_delay(make_server, pki):
    srv = make_server(lambda d: default_config(pki, d, extra="limits: {shutdownDelay: 60s}"))
    started = time.monotonic()
    srv.signal(signal.SIGTERM)
    wait_for(lambda: curl("--cacert", str(pki.ca), f"{srv.url}/readyz")[0] == 503, what="/readyz failing")
    assert srv.proc.poll() is None
    srv.signal(signal.SIGTERM)
    assert srv.proc.wait(timeout=20) == 0
    assert time.monotonic() - started < 30
    assert "second shutdown signal: ending the shutdown delay" in [e.get("msg") for e in srv.logs()]


def test_bad_config_exits_2(binary, tmp_path):
    cfg = tmp_path / "bad.yaml"
    cfg.write_text("listen: {port: 1}\nunknownKey: true\n")
    p = subprocess.run([binary, "serve", "--config", str(cfg)], capture_output=True, text=True, timeout=30)
    assert p.returncode == 2
    assert "unknownKey" in p.stderr or "tls" in p.stderr
    p = subprocess.run([binary, "serve"], capture_output=True, text=True, timeout=30)
    assert p.returncode == 2

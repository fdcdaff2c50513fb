"""H1 over real TLS: curl, openssl s_client and Python's ssl/http.client against the
real binary."""

import http.client
import json
import socket
import ssl
import subprocess

from conftest import curl


def bearer(pki):
    return ["-H", f"Authorization: Bearer {pki.token}"]


def test_bearer_token_gets_the_snapshot(server, pki):
    code, body, err, _ = curl("--cacert", str(pki.ca), *bearer(pki), f"{server.url}/snapshots/demo")
    assert code == 200, err
    doc = json.loads(body)
    assert doc["revision"] == "inventory-42"
    assert set(doc["nodes"]) == {"worker-a", "worker-b"}


def test_no_credentials_is_401_with_challenge(server, pki):
    p = subprocess.run(["curl", "-sS", "-i", "--cacert", str(pki.ca), f"{server.url}/snapshots/demo"],
                       capture_output=True, text=True)
    head = p.stdout.split("\r\n\r\n")[0].lower()
    assert head.startswith("http/1.1 401")
    assert "www-authenticate: bearer" in head
    assert "location:" not in head


def test_wrong_token_is_403(server, pki):
    code, _, _, _ = curl("--cacert", str(pki.ca), "-H", "Authorization: Bearer not-the-token",
                         f"{server.url}/snapshots/demo")
    assert code == 403


def test_unknown_name_does_not_leak(server, pki):
    assert curl("--cacert", str(pki.ca), f"{server.url}/snapshots/secret-inventory")[0] == 401
    assert curl("--cacert", str(pki.ca), "-H", "Authorization: Bearer x", f"{server.url}/snapshots/secret-inventory")[0] == 403
    assert curl("--cacert", str(pki.ca), *bearer(pki), f"{server.url}/snapshots/secret-inventory")[0] == 404


def test_client_certificate_gets_the_snapshot(server, pki):
    code, body, err, _ = curl("--cacert", str(pki.ca), "--cert", str(pki.client_crt), "--key", str(pki.client_key),
                              f"{server.url}/snapshot")
    assert code == 200, err
    assert json.loads(body)["revision"] == "inventory-42"


def test_client_certificate_from_another_ca_is_403(server, pki):
    code, _, err, rc = curl("--cacert", str(pki.ca), "--cert", str(pki.stranger_crt), "--key", str(pki.stranger_key),
                            f"{server.url}/snapshot")
    assert rc == 0, err  # the handshake succeeds; the request is refused
    assert code == 403


def test_wrong_server_ca_fails_the_handshake(server, pki):
    _, _, err, rc = curl("--cacert", str(pki.other_ca), *bearer(pki), f"{server.url}/snapshots/demo")
    assert rc == 60, err  # curl: peer certificate cannot be authenticated


def test_tls_1_1_is_refused(server, pki):
    _, _, err, rc = curl("--cacert", str(pki.ca), "--tlsv1.1", "--tls-max", "1.1", f"{server.url}/livez")
    assert rc == 35, err  # SSL connect error


def test_tls_1_2_and_1_3_work(server, pki):
    for args in (["--tlsv1.2", "--tls-max", "1.2"], ["--tlsv1.3"]):
        assert curl("--cacert", str(pki.ca), *args, f"{server.url}/livez")[0] == 200


def test_http2_is_not_negotiated(server, pki):
    p = subprocess.run(["curl", "-sS", "-v", "--http2", "--cacert", str(pki.ca), f"{server.url}/livez"],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert "ALPN: server accepted http/1.1" in p.stderr or "ALPN, server accepted to use http/1.1" in p.stderr
    assert "< HTTP/1.1 200" in p.stderr


def s_client(server, *args, stdin=""):
    return subprocess.run(["openssl", "s_client", "-connect", f"127.0.0.1:{server.port}", "-servername", "localhost",
                           *args], input=stdin, capture_output=True, text=True, timeout=30)


def test_openssl_s_client_alpn_and_versions(server, pki):
    p = s_client(server, "-CAfile", str(pki.ca), "-alpn", "h2")
    assert "No ALPN negotiated" in p.stdout, p.stdout
    p = s_client(server, "-CAfile", str(pki.ca), "-alpn", "h2,http/1.1")
    assert "ALPN protocol: http/1.1" in p.stdout
    p = s_client(server, "-CAfile", str(pki.ca), "-tls1_3")
    assert "Protocol  : TLSv1.3" in p.stdout or "TLSv1.3" in p.stdout
    assert "Verify return code: 0 (ok)" in p.stdout
    p = s_client(server, "-tls1_1")
    assert "Cipher is (NONE)" in p.stdout or p.returncode != 0
    # The server asks for a client certificate (optional) and names the acceptable CA.
    p = s_client(server, "-CAfile", str(pki.ca))
    assert "Acceptable client certificate CA names" in p.stdout
    assert "topogate demo CA" in p.stdout


def test_python_keep_alive_etag_and_yaml(server, pki):
    ctx = ssl.create_default_context(cafile=str(pki.ca))
    conn = http.client.HTTPSConnection("127.0.0.1", server.port, context=ctx)
    headers = {"Authorization": f"Bearer {pki.token}"}
    conn.request("GET", "/snapshots/demo", headers=headers)
    r = conn.getresponse()
    body = r.read()
    assert r.status == 200
    etag = r.getheader("ETag")
    assert etag and etag.startswith('"')
    assert r.getheader("Content-Type") == "application/json"
    sock = conn.sock
    conn.request("GET", "/snapshots/demo", headers={**headers, "If-None-Match": etag})
    r = conn.getresponse()
    assert r.status == 304 and r.read() == b""
    conn.request("GET", "/snapshots/demo", headers={**headers, "Accept": "application/yaml"})
    r = conn.getresponse()
    text = r.read().decode()
    assert r.status == 200 and r.getheader("Content-Type") == "application/yaml"
    assert "revision:" in text and "inventory-42" in text
    assert conn.sock is sock  # one connection for all three requests
    assert len(body) > 0
    conn.close()


def test_rsa_and_ecdsa_certificates(make_server, pki):
    from conftest import default_config

    def config(d):
        cfg = default_config(pki, d)
        return cfg.replace(f"tls: {{certFile: {pki.server_crt}, keyFile: {pki.server_key}}}",
                           f"tls: {{certFile: {pki.server_crt}, keyFile: {pki.server_key}, "
                           f"extraCertificates: [{{certFile: {pki.rsa_crt}, keyFile: {pki.rsa_key}}}]}}")

    srv = make_server(config)
    ecdsa = s_client(srv, "-CAfile", str(pki.ca), "-tls1_2", "-cipher", "ECDHE-ECDSA-AES128-GCM-SHA256")
    assert "Verify return code: 0 (ok)" in ecdsa.stdout, ecdsa.stdout
    assert "id-ecPublicKey" in ecdsa.stdout or "EC" in ecdsa.stdout
    rsa = s_client(srv, "-CAfile", str(pki.ca), "-tls1_2", "-cipher", "ECDHE-RSA-AES128-GCM-SHA256")
    assert "Verify return code: 0 (ok)" in rsa.stdout, rsa.stdout
    assert "rsaEncryption" in rsa.stdout or "RSA" in rsa.stdout
    assert "ECDHE-RSA-AES128-GCM-SHA256" in rsa.stdout


def test_status_and_history(server, pki):
    code, body, _, _ = curl("--cacert", str(pki.ca), *bearer(pki), f"{server.url}/snapshots/demo/status")
    assert code == 200 and json.loads(body)["ready"] is True
    code, body, err, rc = curl("--cacert", str(pki.ca), *bearer(pki), f"{server.url}/snapshots/demo/history")
    assert code == 200, (err, rc)
    assert curl("--cacert", str(pki.ca), f"{server.url}/snapshots/demo/history")[0] == 401


def test_access_log_never_contains_the_token(server, pki):
    curl("--cacert", str(pki.ca), *bearer(pki), f"{server.url}/snapshots/demo")
    curl("--cacert", str(pki.ca), "-H", "Authorization: Bearer wrong-token-value", f"{server.url}/snapshots/demo")
    text = server.log_path.read_text()
    assert pki.token not in text
    assert "wrong-token-value" not in text
    entries = [e for e in server.logs() if e.get("msg") == "request" and e.get("route") == "/snapshots/{name}"]
    assert any(e["status"] == 200 and e["peer"] == "bearer:demo" for e in entries)
    assert any(e["status"] == 403 for e in entries)


def session_after_one_request(srv, pki, ctx, session=None):
    """One GET over a fresh connection; returns (the TLS session, whether it was resumed)."""
    raw = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
    with ctx.wrap_socket(raw, server_hostname="127.0.0.1", session=session) as tls:
        tls.sendall(b"GET /snapshots/demo HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                    b"Authorization: Bearer " + pki.token.encode() + b"\r\n\r\n")
        data = b""
        while chunk := tls.recv(65536):
            data += chunk
        assert data.startswith(b"HTTP/1.1 200 "), data[:200]
        # TLS 1.3 tickets arrive after the handshake; reading the response consumed them.
        return tls.session, tls.session_reused


def tls13_context(pki):
    ctx = ssl.create_default_context(cafile=str(pki.ca))
    ctx.minimum_version = ssl.TLSVersion.TLSv1_3
    return ctx


def test_session_tickets_on_by_default_and_resumable(server, pki):
    ctx = tls13_context(pki)
    session, reused = session_after_one_request(server, pki, ctx)
    assert session.has_ticket and not reused
    _, reused = session_after_one_request(server, pki, ctx, session)
    assert reused


def test_session_tickets_off_issues_none(make_server, pki):
    from conftest import default_config

    def config(d):
        cfg = default_config(pki, d)
        return cfg.replace(f"tls: {{certFile: {pki.server_crt}, keyFile: {pki.server_key}}}",
                           f"tls: {{certFile: {pki.server_crt}, keyFile: {pki.server_key}, sessionTickets: false}}")

    srv = make_server(config)
    ctx = tls13_context(pki)
    session, reused = session_after_one_request(srv, pki, ctx)
    assert not session.has_ticket and not reused
    # Offering the ticketless session back gets a full handshake, and the request works.
    _, reused = session_after_one_request(srv, pki, ctx, session)
    assert not reused


def test_a_node_changes_revision_is_served_as_a_fresh_start_serves_it(make_server, pki):
    """A Node leaving cuts it out of the served rendering, which then shares the bytes of the
    one before (pieces): over TLS, keep-alive and a new connection alike, the body is byte
    for byte the one a process started afresh on the same files serves, ETag included."""
    from conftest import default_config, wait_for

    count = 2000
    names = [f"gpu-node-{i:05d}" for i in range(count)]
    # Long enough values that the body spans many records and write batches (~330 KB).
    lines = ["apiVersion: topology.gpustack.ai/v1alpha1", "revision: inventory-9", "nodes:"]
    for i, name in enumerate(names):
        lines.append(f"  {name}: {{topology.gpustack.ai/region: region-{i // 500}-{'r' * 40}, "
                     f"topology.gpustack.ai/zone: zone-{i // 100}-{'z' * 40}, "
                     f"topology.gpustack.ai/rack: rack-{i // 4}}}")
    snapshot = "\n".join(lines) + "\n"

    def node_list(left_out):
        return json.dumps({"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""},
                           "items": [{"metadata": {"name": n}} for i, n in enumerate(names) if i not in left_out]})

    def config(d):
        (d / "snapshot.yaml").write_text(snapshot)
        (d / "nodes.json").write_text(node_list(set()))
        return default_config(pki, d, inventory_extra="    nodes: nodes.json\n    unknownNodes: prune\n")

    srv = make_server(config)
    ctx = ssl.create_default_context(cafile=str(pki.ca))
    headers = {"Authorization": f"Bearer {pki.token}"}
    conn = http.client.HTTPSConnection("127.0.0.1", srv.port, context=ctx)

    def get(c):
        c.request("GET", "/snapshots/demo", headers=headers)
        r = c.getresponse()
        body = r.read()
        assert r.status == 200, body[:300]
        assert int(r.getheader("Content-Length")) == len(body)
        return r.getheader("ETag"), body

    first_etag, first = get(conn)  # read, as the consumer does: the change applies to it
    assert len(json.loads(first)["nodes"]) == count
    # Nodes leave at both ends, side by side and spread out: several cuts, some within a record.
    left_out = {0, 1, 7, 999, 1000, 1500, 1998, 1999}
    (srv.dir / "nodes.json.tmp").write_text(node_list(left_out))
    (srv.dir / "nodes.json.tmp").rename(srv.dir / "nodes.json")
    changed = {}

    def moved():
        etag, body = get(conn)
        if etag == first_etag:
            return None
        changed["etag"], changed["body"] = etag, body
        return True

    wait_for(moved, timeout=15, what="the revision without the Nodes")
    doc = json.loads(changed["body"])
    assert set(doc["nodes"]) == {n for i, n in enumerate(names) if i not in left_out}
    assert doc["revision"] == f"inventory-9+pruned-{len(left_out)}"
    # A new connection, and curl, get the same bytes.
    again = http.client.HTTPSConnection("127.0.0.1", srv.port, context=ctx)
    assert get(again) == (changed["etag"], changed["body"])
    again.close()
    code, body, err, _ = curl("--cacert", str(pki.ca), *bearer(pki), f"{srv.url}/snapshots/demo")
    assert code == 200, err
    assert body.encode() == changed["body"]
    conn.close()

    # The same files, read by a process started afresh (one full evaluation).
    srv.stop()
    srv.start()
    fresh = http.client.HTTPSConnection("127.0.0.1", srv.port, context=ctx)
    assert get(fresh) == (changed["etag"], changed["body"])
    fresh.close()

"""Certificate and token rotation as a Kubernetes Secret volume does it (a `..data`
symlink swapped atomically): the open keep-alive connection keeps working, new
connections see the new certificate and the new token, and a broken update keeps the
previous material."""

import http.client
import os
import shutil
import ssl

from conftest import curl, wait_for
from test_metrics import sample


def secret_dir(base, version, files):
    """Writes ..<version>/ and points ..data at it, atomically (rename of a symlink)."""
    vdir = base / f"..{version}"
    vdir.mkdir()
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


def der(path):
    return ssl.PEM_cert_to_DER_cert(path.read_text())


def connect(port, ca):
    ctx = ssl.create_default_context(cafile=str(ca))
    conn = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=10)
    conn.connect()
    return conn


def get(conn, path, token):
    conn.request("GET", path, headers={"Authorization": f"Bearer {token}"})
    r = conn.getresponse()
    r.read()
    return r.status


def test_rotation_under_an_open_connection(make_server, pki, tmp_path):
    from conftest import default_config

    secret = tmp_path / "secret"
    secret.mkdir()
    secret_dir(secret, "v1", {"tls.crt": pki.server_crt, "tls.key": pki.server_key, "token": "token-one\n"})
    v2_crt, v2_key = pki.issue("server-v2", "localhost", san="DNS:localhost,IP:127.0.0.1")

    def config(d):
        cfg = default_config(pki, d, readers=f"{{bearerTokenFiles: [{secret / 'token'}]}}")
        return cfg.replace(f"tls: {{certFile: {pki.server_crt}, keyFile: {pki.server_key}}}",
                           f"tls: {{certFile: {secret / 'tls.crt'}, keyFile: {secret / 'tls.key'}}}")

    srv = make_server(config)
    old = connect(srv.port, pki.ca)
    assert get(old, "/snapshots/demo", "token-one") == 200
    old_sock = old.sock
    assert old.sock.getpeercert(binary_form=True) == der(pki.server_crt)

    secret_dir(secret, "v2", {"tls.crt": v2_crt, "tls.key": v2_key, "token": "token-two\n"})

    def new_cert_served():
        c = connect(srv.port, pki.ca)
        try:
            return c.sock.getpeercert(binary_form=True) == der(v2_crt)
        finally:
            c.close()

    wait_for(new_cert_served, timeout=20, interval=0.2, what="new connections to get the new certificate")
    fresh = connect(srv.port, pki.ca)
    wait_for(lambda: get(fresh, "/snapshots/demo", "token-two") == 200, timeout=20, what="the new token")
    assert get(fresh, "/snapshots/demo", "token-one") == 403

    # The connection opened before the rotation is still the same TLS session, with the
    # old certificate, and serves requests authenticated with the new token.
    assert get(old, "/snapshots/demo", "token-two") == 200
    assert old.sock is old_sock
    assert old.sock.getpeercert(binary_form=True) == der(pki.server_crt)
    old.close()
    fresh.close()

    # A broken update (a certificate that is not PEM) keeps the current material.
    def failures():
        _, text, _, _ = curl("--cacert", str(pki.ca), f"{srv.url}/metrics")
        return sample(text, "topogate_credential_reloads_total", kind="tls", result="failure")

    secret_dir(secret, "v3", {"tls.crt": "not a certificate\n", "tls.key": "not a key\n", "token": "token-two\n"})
    wait_for(lambda: (failures() or 0) >= 1, timeout=20, interval=0.2, what="the failed reload to be counted")
    after = connect(srv.port, pki.ca)
    assert after.sock.getpeercert(binary_form=True) == der(v2_crt)
    assert get(after, "/snapshots/demo", "token-two") == 200
    after.close()
    errors = [e for e in srv.logs() if e.get("level") == "error"]
    assert any("reload failed" in e["msg"] for e in errors)
    log_text = srv.log_path.read_text()
    assert "BEGIN" not in log_text and "token-two" not in log_text and "token-one" not in log_text


def test_empty_token_file_keeps_the_previous_tokens(make_server, pki, tmp_path):
    from conftest import default_config

    token = tmp_path / "reader.token"
    token.write_text("first\n")
    srv = make_server(lambda d: default_config(pki, d, readers=f"{{bearerTokenFiles: [{token}]}}"))
    assert curl("--cacert", str(pki.ca), "-H", "Authorization: Bearer first", f"{srv.url}/snapshots/demo")[0] == 200
    tmp = tmp_path / "reader.token.new"
    tmp.write_text("\n")
    os.replace(tmp, token)

    def counted():
        _, text, _, _ = curl("--cacert", str(pki.ca), f"{srv.url}/metrics")
        return (sample(text, "topogate_credential_reloads_total", kind="token", result="failure") or 0) >= 1

    wait_for(counted, timeout=20, interval=0.2, what="the failed token reload")
    assert curl("--cacert", str(pki.ca), "-H", "Authorization: Bearer first", f"{srv.url}/snapshots/demo")[0] == 200
    # Two tokens during a rotation: both are accepted.
    tmp.write_text("first\nsecond\n")
    os.replace(tmp, token)
    wait_for(lambda: curl("--cacert", str(pki.ca), "-H", "Authorization: Bearer second",
                          f"{srv.url}/snapshots/demo")[0] == 200, timeout=20, interval=0.2, what="the second token")
    assert curl("--cacert", str(pki.ca), "-H", "Authorization: Bearer first", f"{srv.url}/snapshots/demo")[0] == 200

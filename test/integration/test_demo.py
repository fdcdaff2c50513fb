"""`topogate demo`: certificates, token, runbook inventory, demo.env, and a restart that
reuses the files."""

import json
import os
import signal
import subprocess

from conftest import curl, wait_for


def start_demo(binary, d):
    env_file = d / "demo.env"
    if env_file.exists():
        env_file.unlink()
    proc = subprocess.Popen([binary, "demo", "--dir", str(d), "--port", "0"], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)
    wait_for(lambda: env_file.exists() or proc.poll() is not None, what="demo.env")
    assert proc.poll() is None
    env = dict(line.split("=", 1) for line in env_file.read_text().splitlines() if line)
    return proc, env


def test_demo_end_to_end(binary, tmp_path):
    d = tmp_path / "demo"
    proc, env = start_demo(binary, d)
    try:
        for key in ("TOPOGATE_URL", "TOPOGATE_CA", "TOPOGATE_TOKEN_FILE", "TOPOGATE_CLIENT_CERT", "TOPOGATE_CLIENT_KEY"):
            assert key in env
        for key in ("TOPOGATE_CA", "TOPOGATE_TOKEN_FILE", "TOPOGATE_CLIENT_CERT", "TOPOGATE_CLIENT_KEY"):
            assert os.path.isabs(env[key]) and os.path.exists(env[key])
        assert env["TOPOGATE_URL"].startswith("https://127.0.0.1:")
        assert oct(os.stat(env["TOPOGATE_TOKEN_FILE"]).st_mode & 0o777) == "0o600"
        assert oct(os.stat(env["TOPOGATE_CLIENT_KEY"]).st_mode & 0o777) == "0o600"
        token = open(env["TOPOGATE_TOKEN_FILE"]).read().strip()
        url = env["TOPOGATE_URL"]
        code, body, err, _ = curl("--cacert", env["TOPOGATE_CA"], "-H", f"Authorization: Bearer {token}",
                                  f"{url}/snapshots/demo")
        assert code == 200, err
        snap = json.loads(body)
        assert snap["revision"] == "inventory-42"
        assert snap["nodes"]["worker-b"]["topology.gpustack.ai/rack"] == "rack-02"
        code, body, err, _ = curl("--cacert", env["TOPOGATE_CA"], "--cert", env["TOPOGATE_CLIENT_CERT"], "--key",
                                  env["TOPOGATE_CLIENT_KEY"], f"{url}/snapshot")
        assert code == 200, err
        code, body, _, _ = curl("--cacert", env["TOPOGATE_CA"], "-H", "Content-Type: application/json",
                                "--data-binary", f"@{d / 'review-denied.json'}", f"{url}/validate/topologysources")
        assert code == 200 and json.loads(body)["response"]["allowed"] is False
        assert curl("--cacert", env["TOPOGATE_CA"], f"{url}/readyz")[0] == 200
    finally:
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0
    assert "curl" in out and "demo.env" in out

    ca_before = (d / "ca.crt").read_bytes()
    token_before = (d / "token").read_bytes()
    proc, env = start_demo(binary, d)
    try:
        assert (d / "ca.crt").read_bytes() == ca_before
        assert (d / "token").read_bytes() == token_before
        assert curl("--cacert", env["TOPOGATE_CA"], "-H", f"Authorization: Bearer {token_before.decode().strip()}",
                    f"{env['TOPOGATE_URL']}/snapshots/demo")[0] == 200
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)

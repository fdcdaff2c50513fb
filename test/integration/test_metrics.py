"""/metrics: valid Prometheus text (promtool), scraped by a real Prometheus server over
HTTPS, and the counters the SPEC names move with traffic."""

import json
import socket
import ssl
import struct
import subprocess
import time
import urllib.request

import pytest

from conftest import curl, have, start_prometheus, wait_for


def metrics_text(server, pki):
    code, body, err, _ = curl("--cacert", str(pki.ca), f"{server.url}/metrics")
    assert code == 200, err
    return body


def sample(text, name, **labels):
    """The value of one series, or None."""
    for line in text.splitlines():
        if line.startswith("#") or not line.startswith(name):
            continue
        series, _, value = line.rpartition(" ")
        if series.split("{")[0] != name:
            continue
        if all(f'{k}="{v}"' in series for k, v in labels.items()):
            return float(value)
    return None


def test_content_type(server, pki):
    p = subprocess.run(["curl", "-sS", "-D", "-", "-o", "/dev/null", "--cacert", str(pki.ca), f"{server.url}/metrics"],
                       capture_output=True, text=True)
    assert "content-type: text/plain; version=0.0.4; charset=utf-8" in p.stdout.lower()


@pytest.mark.skipif(not have("promtool"), reason="promtool (Debian package prometheus) is not installed")
def test_promtool_check_metrics(server, pki):
    # Traffic first, so that every family has samples.
    curl("--cacert", str(pki.ca), "-H", f"Authorization: Bearer {pki.token}", f"{server.url}/snapshots/demo")
    curl("--cacert", str(pki.ca), f"{server.url}/snapshots/demo")
    text = metrics_text(server, pki)
    p = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True)
    assert p.returncode == 0, p.stdout + p.stderr


def test_counters_follow_traffic(server, pki):
    curl("--cacert", str(pki.ca), "-H", f"Authorization: Bearer {pki.token}", f"{server.url}/snapshots/demo")
    curl("--cacert", str(pki.ca), "-H", "Authorization: Bearer wrong", f"{server.url}/snapshots/demo")
    curl("--cacert", str(pki.ca), "--tlsv1.1", "--tls-max", "1.1", f"{server.url}/livez")
    curl("--cacert", str(pki.ca), "-H", "Content-Type: application/json", "--data-binary", "{}",
         f"{server.url}/validate/topologysources")
    text = metrics_text(server, pki)
    assert sample(text, "topogate_http_requests_total", route="/snapshots/{name}", code="200") >= 1
    assert sample(text, "topogate_http_requests_total", route="/snapshots/{name}", code="403") >= 1
    assert sample(text, "topogate_auth_failures_total", inventory="demo", reason="wrong_token") >= 1
    assert sample(text, "topogate_tls_handshake_failures_total", reason="protocol_version") >= 1
    assert sample(text, "topogate_admission_decisions_total", kind="other", verdict="errored") >= 1
    assert sample(text, "topogate_http_request_duration_seconds_count", route="/snapshots/{name}") >= 2
    assert sample(text, "topogate_inventory_snapshot_bytes", inventory="demo") > 0
    assert sample(text, "topogate_inventory_revision_info", inventory="demo", revision="inventory-42") == 1
    assert sample(text, "topogate_reconcile_attempts_total", inventory="demo", result="accepted") >= 1
    assert sample(text, "topogate_certificate_expiry_timestamp_seconds") > 1.7e9
    assert sample(text, "topogate_build_info") == 1
    assert sample(text, "topogate_http_requests_in_flight") is not None
    # No secret in a label or a value.
    assert pki.token not in text


def test_in_flight_returns_to_its_baseline_after_abandoned_requests(server, pki):
    """Requests abandoned mid-way (after the header, while 100 Continue is written or the
    body is awaited, reset by the client) are uncounted from topogate_http_requests_in_flight."""

    def in_flight():
        code, text, _, _ = curl("--cacert", str(pki.ca), f"{server.url}/metrics")
        assert code == 200
        return sample(text, "topogate_http_requests_in_flight")

    baseline = in_flight()  # the scrape counts itself
    ctx = ssl.create_default_context(cafile=str(pki.ca))
    for i in range(60):
        raw = socket.create_connection(("127.0.0.1", server.port), timeout=10)
        tls = ctx.wrap_socket(raw, server_hostname="localhost")
        tls.sendall(b"POST /validate/topologysources HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                    b"Content-Length: 4096\r\nExpect: 100-continue\r\n\r\n")
        if i % 2:
            time.sleep(0.01)  # half of them after the interim response went out
        # An abortive close: RST, no close_notify.
        tls.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        tls.close()
    wait_for(lambda: in_flight() == baseline, what="in-flight back to its baseline")


@pytest.mark.skipif(not have("prometheus"), reason="prometheus (Debian package) is not installed")
def test_real_prometheus_scrapes_over_https(server, pki, tmp_path):
    cfg = tmp_path / "prometheus.yml"
    cfg.write_text(f"""global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: topogate
    scheme: https
    tls_config:
      ca_file: {pki.ca}
      server_name: localhost
    static_configs:
      - targets: ['127.0.0.1:{server.port}']
""")
    proc, port, log = start_prometheus(cfg, tmp_path / "data", tmp_path / "prometheus.log")
    try:
        def up():
            try:
                url = f"http://127.0.0.1:{port}/api/v1/query?query=up%7Bjob%3D%22topogate%22%7D"
                with urllib.request.urlopen(url, timeout=2) as r:
                    data = json.load(r)
            except OSError:
                return None
            result = data.get("data", {}).get("result", [])
            return result and result[0]["value"][1] == "1"

        wait_for(up, timeout=60, interval=0.5, what="Prometheus to report up==1")

        def scraped_series():
            url = f"http://127.0.0.1:{port}/api/v1/query?query=topogate_build_info"
            with urllib.request.urlopen(url, timeout=2) as r:
                return json.load(r)["data"]["result"]

        assert wait_for(scraped_series, timeout=30, interval=0.5, what="topogate_build_info in Prometheus")
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()

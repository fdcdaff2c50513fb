"""admission.ownershipCheck with an API server that never answers (hanging_api.py): the view's
list hangs on its own thread, and every admission answer comes at once, exactly as without the
check (no ownership warning: the view has no snapshot). Also off by default: no API call."""

import json
import time

from conftest import SCHEDULING_MARGIN_S, api_client_config, wait_for
from test_audit import review

VIEW_TIMEOUT_S = 2.0
# An answer that waited on the hung list would take at least its timeout.
AT_ONCE_S = 0.5
API_TOKEN = "ownership-api-token-0123456789abcdef"


def config(pki, d, api_url, check="{enabled: true, interval: 5s, timeout: 2s}"):
    return api_client_config(pki, d, api_url, API_TOKEN, f"admission: {{ownershipCheck: {check}}}")


def test_off_by_default_no_api_call(make_server, pki, hanging_api):
    s = make_server(lambda d: config(pki, d, hanging_api.url, check="{enabled: false}"))
    status, _, _ = review(s.port, pki)
    assert status == 200
    time.sleep(1.0)
    assert hanging_api.connections == 0


def test_hanging_api_never_delays_an_admission_answer(make_server, pki, hanging_api):
    s = make_server(lambda d: config(pki, d, hanging_api.url))
    wait_for(lambda: any("/apis/worker.gpustack.ai/v1/topologysources" in r for r in hanging_api.requests),
             timeout=5, what="the view's first list")
    started = time.monotonic()
    seconds = []
    # Across the hung list's timeout and into the next list.
    while time.monotonic() - started < VIEW_TIMEOUT_S * 2 + 1:
        status, body, took = review(s.port, pki)
        assert status == 200, body[:300]
        response = json.loads(body)["response"]
        assert response["allowed"] is True
        assert not [w for w in response.get("warnings", []) if "OwnershipConflict" in w]
        seconds.append(took)
        time.sleep(0.05)
    seconds.sort()
    median, worst = seconds[len(seconds) // 2], seconds[-1]
    print(f"\nadmission with the API hanging: {len(seconds)} reviews, median {median * 1000:.1f} ms, "
          f"max {worst * 1000:.1f} ms (new connection and TLS handshake included)")
    assert worst < AT_ONCE_S + SCHEDULING_MARGIN_S, seconds[-5:]
    # The hung list failed at its deadline, was logged once, and the token never was.
    wait_for(lambda: [e for e in s.logs() if e.get("msg", "").startswith("ownership view: list failed")],
             timeout=VIEW_TIMEOUT_S + SCHEDULING_MARGIN_S + 1, what="the failed list's log line")
    failed = [e for e in s.logs() if e.get("msg", "").startswith("ownership view: list failed")]
    assert "admission.ownershipCheck.timeout" in failed[0]["error"]
    assert API_TOKEN not in s.log_path.read_text()


def test_sigterm_during_a_hanging_list_exits_promptly(make_server, pki, hanging_api):
    import signal
    s = make_server(lambda d: config(pki, d, hanging_api.url, check="{enabled: true, timeout: 5m}"))
    wait_for(lambda: hanging_api.requests, timeout=5, what="the view's first list")
    t0 = time.monotonic()
    s.signal(signal.SIGTERM)
    s.proc.wait(timeout=30)
    assert s.proc.returncode == 0
    assert time.monotonic() - t0 < 1.0 + SCHEDULING_MARGIN_S

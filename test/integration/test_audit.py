"""`topogate audit` offline (fixtures/audit/: files as `kubectl get -o json` prints them, valid and
invalid objects of both kinds, a mixed List, the API's typed list) and the server's periodic
audit against a Kubernetes API that never answers or is not there (hanging_api.py).

The contract asserted for the periodic audit:
- off by default: no topogate_audit_* series, no API call;
- enabled against a hanging API: each run fails at `audit.timeout` (counted in
  topogate_audit_runs_total{result="failure"}, logged without the token) and the next one
  follows an interval later, while admission reviews, /healthz and /metrics answer within
  AT_ONCE_S the whole time;
- SIGTERM during a hanging run: the process exits within SHUTDOWN_S (the call is aborted, not
  waited out);
- a dead API (connection refused) fails each run at once;
- enabled with no API to reach, or with a bad key: exit 2 with a message naming it.
The audit against the real kube-apiserver (violations found, fixed, cleared) is test/e2e/audit.sh."""

import http.client
import json
import os
import re
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from conftest import FIXTURES, SCHEDULING_MARGIN_S, api_client_config, wait_for
from hostile_support import client_context

FIX = FIXTURES / "audit"
REVIEW = (FIXTURES / "admission" / "allowed.json").read_bytes()
AUDIT_TIMEOUT_S = 2.0
# A request answered before the hung run's timeout did not wait on it.
AT_ONCE_S = AUDIT_TIMEOUT_S
MARGIN_S = SCHEDULING_MARGIN_S
# A shutdown that aborts the run rather than waiting out its 5 m timeout.
SHUTDOWN_S = 1.0 + SCHEDULING_MARGIN_S
API_TOKEN = "audit-api-token-0123456789abcdef"

# Every violation in the fixtures: (kind, namespace/name or name, rule, path).
VIOLATIONS = {
    ("TopologySource", "bad-levels", "T3", "spec.levels[1]"),
    ("TopologySource", "bad-levels", "T4", "spec.levels[2]"),
    ("TopologySource", "bad-webhook", "T9", "spec.webhook.url"),
    ("TopologySource", "bad-webhook", "T11", "spec.webhook.timeout"),
    ("TopologySource", "bad-webhook", "T13", "spec.webhook.bearerTokenSecretRef.namespace"),
    ("ModelDeployment", "team-a/qwen-bare", "M1", "spec.roles[0].topology.requiredLevel"),
    ("ModelDeployment", "team-b/qwen-host", "M2", "spec.roles[0].topology.requiredLevel"),
}
LINE = re.compile(r"^(TopologySource|ModelDeployment) (\S+): (\S+) (\S+): (.+)$")


def audit(binary, *args, stdin=None):
    env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST")}
    return subprocess.run([binary, "audit", *args], capture_output=True, text=True, env=env, input=stdin,
                          timeout=60)


def lines(stdout):
    """The violation lines as (kind, id, rule, path), and the summary line."""
    out, summary = set(), None
    for line in stdout.splitlines():
        m = LINE.match(line)
        if m:
            out.add(m.group(1, 2, 3, 4))
        elif line.startswith("audit: "):
            summary = line
        else:
            raise AssertionError(f"unexpected output line {line!r}")
    return out, summary


# ---------------------------------------------------------------- offline

def test_valid_objects_of_both_kinds_exit_0(binary):
    r = audit(binary, "-f", str(FIX / "valid-topologysource.yaml"), "-f", str(FIX / "valid-modeldeployment.json"))
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout == "audit: 2 objects checked (1 TopologySource, 1 ModelDeployment), 0 violating\n"


def test_every_violation_one_line_with_its_rule_and_a_summary(binary):
    r = audit(binary, "--from", str(FIX))
    assert r.returncode == 1, r.stdout + r.stderr
    found, summary = lines(r.stdout)
    assert found == VIOLATIONS
    assert summary == ("audit: 8 objects checked (4 TopologySources, 4 ModelDeployments), 4 violating; "
                       "7 violations by rule: M1=1 M2=1 T3=1 T4=1 T9=1 T11=1 T13=1")
    # The mixed List's ConfigMap is not checked, and said so.
    assert "note: 1 object of other kinds ignored" in r.stderr
    # The message is the field error as admission reports it.
    assert 'TopologySource bad-levels: T4 spec.levels[2]: Duplicate value: "topology.kubernetes.io/zone"' in r.stdout


def test_the_apis_typed_list_items_are_checked(binary):
    # GET /apis/worker.gpustack.ai/v1/topologysources: items without kind and apiVersion.
    r = audit(binary, "-f", str(FIX / "topologysources.json"))
    assert r.returncode == 1, r.stderr
    found, summary = lines(r.stdout)
    assert {v[2] for v in found} == {"T9", "T11", "T13"}
    assert "1 object checked (1 TopologySource, 0 ModelDeployments), 1 violating" in summary
    assert "ignored" not in r.stderr


def test_json_one_object_per_violation(binary):
    r = audit(binary, "--from", str(FIX), "--output", "json")
    assert r.returncode == 1, r.stderr
    doc = json.loads(r.stdout)
    got = set()
    for v in doc["violations"]:
        assert set(v) == {"kind", "namespace", "name", "rule", "path", "type", "message"}
        ident = f"{v['namespace']}/{v['name']}" if v["namespace"] else v["name"]
        got.add((v["kind"], ident, v["rule"], v["path"]))
        assert v["message"].startswith(v["type"] + ":")
    assert got == VIOLATIONS
    assert doc["summary"] == {"checked": 8, "topologySources": 4, "modelDeployments": 4, "violating": 4,
                              "violations": 7, "ignored": 1, "outOfScope": 0, "conflicts": 0,
                              "byRule": {"M1": 1, "M2": 1, "T3": 1, "T4": 1, "T9": 1, "T11": 1, "T13": 1}}
    clean = audit(binary, "-f", str(FIX / "valid-topologysource.yaml"), "--output", "json")
    assert clean.returncode == 0
    assert json.loads(clean.stdout)["violations"] == []


def test_yaml_list_and_stdin(binary, tmp_path):
    # `kubectl get ... -o yaml` of the same List, and the same through stdin.
    doc = json.loads((FIX / "list.json").read_text())
    (tmp_path / "list.yaml").write_text(yaml.safe_dump(doc))
    by_file = audit(binary, "-f", str(tmp_path / "list.yaml"))
    by_stdin = audit(binary, "-f", "-", stdin=(FIX / "list.json").read_text())
    for r in (by_file, by_stdin):
        assert r.returncode == 1, r.stderr
        found, _ = lines(r.stdout)
        assert found == {v for v in VIOLATIONS if v[1] == "bad-levels"}


def test_namespace_limits_modeldeployments_both_ways(binary):
    r = audit(binary, "--from", str(FIX), "-n", "team-a")
    assert r.returncode == 1
    found, summary = lines(r.stdout)
    assert {v for v in found if v[0] == "ModelDeployment"} == {
        ("ModelDeployment", "team-a/qwen-bare", "M1", "spec.roles[0].topology.requiredLevel")}
    # TopologySources are cluster-scoped: checked whatever -n says.
    assert {v[1] for v in found if v[0] == "TopologySource"} == {"bad-levels", "bad-webhook"}
    assert "(4 TopologySources, 2 ModelDeployments)" in summary
    assert "note: 2 ModelDeployments outside namespace team-a left out" in r.stderr
    # A namespace with only a valid deployment: no ModelDeployment violation.
    r = audit(binary, "-f", str(FIX / "modeldeployments.json"), "--namespace=default")
    assert r.returncode == 0, r.stdout
    # -A is the default.
    assert audit(binary, "--from", str(FIX), "-A").stdout == audit(binary, "--from", str(FIX)).stdout


def test_worker_namespace_decides_t13_both_ways(binary):
    r = audit(binary, "-f", str(FIX / "topologysources.json"))
    assert "T13" in {v[2] for v in lines(r.stdout)[0]}
    r = audit(binary, "-f", str(FIX / "topologysources.json"), "--worker-namespace", "default")
    assert r.returncode == 1
    assert {v[2] for v in lines(r.stdout)[0]} == {"T9", "T11"}


@pytest.mark.parametrize("args, message", [
    (["--bogus"], "unknown option --bogus"),
    (["-n", "a", "-A", "--from", "."], "-n and -A are exclusive"),
    (["--output", "xml", "--from", "."], "--output must be text or json"),
    (["-n", "Not_A_Namespace", "--from", "."], "is not a namespace name"),
    (["-f"], "-f needs a value"),
    (["stray", "--from", "."], "unexpected argument stray"),
])
def test_usage_errors_exit_2(binary, args, message):
    r = audit(binary, *args)
    assert r.returncode == 2, r.stdout
    assert message in r.stderr
    assert r.stdout == ""


def test_input_errors_exit_2(binary, tmp_path):
    r = audit(binary, "-f", str(tmp_path / "missing.json"))
    assert r.returncode == 2 and "missing.json" in r.stderr
    (tmp_path / "broken.json").write_text('{"kind": "List", "items": [')
    r = audit(binary, "-f", str(tmp_path / "broken.json"))
    assert r.returncode == 2 and "broken.json" in r.stderr
    empty = tmp_path / "empty"
    empty.mkdir()
    r = audit(binary, "--from", str(empty))
    assert r.returncode == 2 and "no .json or .yaml files" in r.stderr


def test_help_exits_0(binary):
    r = audit(binary, "--help")
    assert r.returncode == 0
    assert "KIND NAMESPACE/NAME: RULE path: message" in r.stdout


# ---------------------------------------------------------------- the periodic audit in the server

def get(port, pki, path, method="GET", body=None, headers=None, timeout=20):
    """(status, body, seconds) of one request on a new connection, handshake included."""
    t0 = time.monotonic()
    conn = http.client.HTTPSConnection("127.0.0.1", port, context=client_context(pki), timeout=timeout)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        r = conn.getresponse()
        data = r.read()
        return r.status, data, time.monotonic() - t0
    finally:
        conn.close()


def review(port, pki):
    return get(port, pki, "/validate/topologysources?timeout=10s", "POST", REVIEW,
               {"Content-Type": "application/json"})


def samples(port, pki):
    """{series: value} of /metrics for the topogate_audit_* families."""
    status, body, _ = get(port, pki, "/metrics")
    assert status == 200
    out = {}
    for line in body.decode().splitlines():
        if line.startswith("topogate_audit_"):
            series, value = line.rsplit(" ", 1)
            out[series] = float(value)
    return out


FAILED = 'topogate_audit_runs_total{result="failure"}'
SUCCEEDED = 'topogate_audit_runs_total{result="success"}'


def audit_config(pki, d: Path, api_url, audit="{enabled: true, interval: 1s, timeout: 2s}"):
    return api_client_config(pki, d, api_url, API_TOKEN, f"audit: {audit}")


def test_off_by_default_no_series_no_api_call(make_server, pki, hanging_api):
    s = make_server(lambda d: audit_config(pki, d, hanging_api.url, audit="{enabled: false}"))
    time.sleep(1.5)
    assert samples(s.port, pki) == {}
    assert hanging_api.connections == 0


def test_hanging_api_fails_runs_and_never_delays_serving(make_server, pki, hanging_api):
    s = make_server(lambda d: audit_config(pki, d, hanging_api.url))
    started = time.monotonic()
    # The series exist from the start, at 0.
    first = samples(s.port, pki)
    assert first[FAILED] == 0 and first[SUCCEEDED] == 0
    assert first['topogate_audit_violations{kind="TopologySource",rule="T1"}'] == 0
    assert first["topogate_audit_last_success_timestamp_seconds"] == 0
    wait_for(lambda: any("/apis/worker.gpustack.ai/v1/topologysources" in r for r in hanging_api.requests),
             timeout=5, what="the audit's first list")
    # While the run hangs, and across the next one: admission, health and metrics at once.
    slow = []
    while time.monotonic() - started < AUDIT_TIMEOUT_S * 2 + 1:
        for what, fn in (("review", lambda: review(s.port, pki)), ("healthz", lambda: get(s.port, pki, "/healthz")),
                         ("metrics", lambda: get(s.port, pki, "/metrics"))):
            status, body, seconds = fn()
            assert status == 200, (what, body[:300])
            if seconds > AT_ONCE_S:
                slow.append((what, round(seconds, 2)))
        time.sleep(0.1)
    assert not slow, f"requests delayed while the audit hangs: {slow}"
    # Each run fails at its deadline, and the next one follows.
    wait_for(lambda: samples(s.port, pki)[FAILED] >= 2, timeout=2 * (AUDIT_TIMEOUT_S + 1) + MARGIN_S,
             what="two failed runs")
    m = samples(s.port, pki)
    assert m[SUCCEEDED] == 0
    assert m["topogate_audit_last_success_timestamp_seconds"] == 0
    failures = [e for e in s.logs() if e.get("msg") == "audit: run failed"]
    assert failures and "deadline" in failures[0]["error"] and "audit.timeout" in failures[0]["error"]
    log = s.log_path.read_text()
    assert API_TOKEN not in log
    # One connection per run: a hung call is abandoned with its connection.
    assert hanging_api.handshakes >= 2


def test_sigterm_during_a_hanging_run_exits_promptly(make_server, pki, hanging_api):
    s = make_server(lambda d: audit_config(pki, d, hanging_api.url, audit="{enabled: true, timeout: 5m}"))
    wait_for(lambda: hanging_api.requests, timeout=5, what="the audit's first list")
    t0 = time.monotonic()
    s.signal(signal.SIGTERM)
    s.proc.wait(timeout=30)
    took = time.monotonic() - t0
    assert s.proc.returncode == 0
    assert took < SHUTDOWN_S, f"exit took {took:.2f}s while an audit run hung"
    # Aborted by the shutdown: not a failure of the API.
    assert not [e for e in s.logs() if e.get("msg") == "audit: run failed"]


def test_dead_api_fails_each_run_at_once(make_server, pki):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed again: nothing listens there
    s = make_server(lambda d: audit_config(pki, d, f"https://127.0.0.1:{port}"))
    wait_for(lambda: samples(s.port, pki)[FAILED] >= 2, timeout=2 + MARGIN_S * 2, what="two failed runs")
    failures = [e for e in s.logs() if e.get("msg") == "audit: run failed"]
    assert "refused" in failures[0]["error"].lower(), failures[0]
    assert failures[0]["duration_s"] < AT_ONCE_S
    status, _, seconds = review(s.port, pki)
    assert status == 200 and seconds < AT_ONCE_S


def test_enabled_without_an_api_exits_2(binary, pki, tmp_path):
    (tmp_path / "topogate.yaml").write_text(f"""listen: {{address: 127.0.0.1, port: 0}}
tls: {{certFile: {pki.server_crt}, keyFile: {pki.server_key}}}
audit: {{enabled: true}}
""")
    env = {k: v for k, v in os.environ.items() if k != "KUBERNETES_SERVICE_HOST"}
    r = subprocess.run([binary, "serve", "--config", str(tmp_path / "topogate.yaml")], capture_output=True, text=True,
                       env=env, timeout=30)
    assert r.returncode == 2
    assert "audit.enabled: no Kubernetes API" in r.stderr


@pytest.mark.parametrize("audit, message", [
    ("{enabled: true, interval: 500ms}", "audit.interval: must be between 1s and 24h"),
    ("{enabled: true, timeout: 0s}", "audit.timeout: must be between 1s and 10m"),
    ("{enabled: true, namespaces: [Bad]}", "audit.namespaces[0]"),
    ("{enabeld: true}", 'audit: unknown key "enabeld"'),
])
def test_bad_audit_configuration_exits_2(binary, pki, tmp_path, audit, message):
    (tmp_path / "topogate.yaml").write_text(audit_config(pki, tmp_path, "https://127.0.0.1:1", audit=audit))
    r = subprocess.run([binary, "serve", "--config", str(tmp_path / "topogate.yaml")], capture_output=True, text=True,
                       timeout=30)
    assert r.returncode == 2
    assert message in r.stderr

"""The chart's alerts and dashboard against real data: the real topogate binary, scraped every
second by Debian's Prometheus with the rules (helm/topogate/files/alerts.yaml, rendered with
the chart's default values) loaded.

Traffic makes the series exist: pushes (valid, one breaking S4, one over maxProfileChanges
and the same accepted), admission reviews (allowed, denied, malformed), snapshot GETs with a
token, a wrong one and none, a TLS 1.1 handshake; the serving certificate is two days from
expiry; the periodic audit is on against an API server that refuses connections; one
inventory never gets a revision; the file-fed one serves a revision past 0.9 of the 1 MiB
snapshot limit. Then, through Prometheus' HTTP API:

- every dashboard panel's query returns series;
- every alert's expression, each side of and/or/unless with its threshold comparison
  removed, returns series (except what cannot exist in one process: SKIPPED);
- the alerts this setup makes true are active in /api/v1/alerts and the others are not;
- the push-fed inventory's revision, no longer refreshed, passes 0.8 of its maxAge
  (TopogateInventoryNearMaxAge) and then maxAge (TopogateInventoryStale), each active only
  then.
"""

import json
import os
import re
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
import yaml

import render_rules
from integration_support import FIXTURES, FREE_PORT, SNAPSHOT, TOPOLOGY_SOURCE, curl, start_prometheus, wait_for

HERE = Path(__file__).resolve().parent
DASHBOARD = HERE.parents[1] / "helm" / "topogate" / "files" / "dashboard.json"
WRITER_TOKEN = "live-writer-token-0123456789abcdef"
MAX_AGE_S = 12
NODES = ("worker-a", "worker-b", "worker-c", "worker-d")
# 133 bytes a Node as canonical JSON: 957,680 bytes, 0.913 of the 1 MiB limit (S10), past the
# alert's 0.9; the YAML file (972,070 bytes) is within the limit too.
LARGE_NODES = 7200

# Parts of alert expressions whose series cannot exist around one process, and why.
SKIPPED = {
    "kube_deployment_status_replicas_ready": "exported by kube-state-metrics about a Deployment; "
                                             "TopogateNoReadyReplica's up{} parts are evaluated",
}
# What this setup makes true (pending or firing) before the staleness is induced, and what
# it must not.
ACTIVE = {
    "TopogateInventoryRejectingRevisions",  # S4 push
    "TopogateProfileChangeRefused",         # push over maxProfileChanges 1
    "TopogateAdmissionErrors",              # 2 malformed reviews of 6
    "TopogateCertificateExpiringSoon",      # a 2-day serving certificate
    "TopogateInventoryNotReady",            # inventory "empty"
    "TopogateAuditFailing",                 # the audit's API refuses connections
    "TopogateInventoryNearSizeLimit",       # inventory "files": LARGE_NODES Nodes, over 0.9 MiB
    "TopogateNodesDrifted",                 # inventory "noded": 4 Nodes without their labels
}
INACTIVE = {
    "TopogateInventoryStale", "TopogateInventoryNearMaxAge", "TopogateProfileChangesAccepted",
    "TopogateStoreUnavailable", "TopogateStoreViewBehind", "TopogateAdmissionSlow", "TopogateNoReadyReplica", "TopogateAuditViolations",
    "TopogateOwnershipConflict", "TopogateLogLinesDropped",
}

pytestmark = pytest.mark.skipif(shutil.which("prometheus") is None,
                                reason="prometheus (Debian package) is not installed")


def snapshot(revision, racked=()):
    """Four Nodes in two zones; those in `racked` also carry a rack (another profile)."""
    lines = ["apiVersion: topology.gpustack.ai/v1alpha1", f"revision: {revision}", "nodes:"]
    for i, n in enumerate(NODES):
        lines += [f"  {n}:", "    topology.gpustack.ai/region: region-a",
                  f"    topology.gpustack.ai/zone: zone-{'ab'[i // 2]}"]
        if n in racked:
            lines.append(f"    topology.gpustack.ai/rack: rack-0{i + 1}")
    return "\n".join(lines) + "\n"


def large_snapshot():
    """LARGE_NODES Nodes in one rack: a valid snapshot past 0.9 of the size limit."""
    lines = ["apiVersion: topology.gpustack.ai/v1alpha1", "revision: file-large", "nodes:"]
    for i in range(LARGE_NODES):
        lines += [f"  worker-{i:05d}:", "    topology.gpustack.ai/region: region-a",
                  "    topology.gpustack.ai/zone: zone-a", "    topology.gpustack.ai/rack: rack-01"]
    return "\n".join(lines) + "\n"


def config(pki, d: Path, crt, key, health_port, api_port):
    (d / "topologysource.yaml").write_text(TOPOLOGY_SOURCE)
    (d / "snapshot.yaml").write_text(large_snapshot())
    # Inventory "noded" knows its Nodes (a kubectl list), which carry none of the labels the
    # consumer writes: after driftGracePeriod each counts as drifted.
    (d / "noded.yaml").write_text(snapshot("noded"))
    (d / "nodes.json").write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "v1", "kind": "Node",
         "metadata": {"name": n, "labels": {"kubernetes.io/hostname": n}}} for n in NODES]}))
    (d / "writer.token").write_text(WRITER_TOKEN + "\n")
    readers = f"{{bearerTokenFiles: [{pki.token_file}], clientCAFile: {pki.ca}}}"
    return f"""listen: {{address: 127.0.0.1, port: 0, healthPort: {health_port}}}
tls: {{certFile: {crt}, keyFile: {key}}}
logging: {{level: info, accessLog: false}}
store: {{type: file, directory: {d / "store"}, apiServer: 'https://127.0.0.1:{api_port}',
         tokenFile: {pki.token_file}, caFile: {pki.ca}}}
audit: {{enabled: true, interval: 1s, timeout: 1s}}
inventories:
  - name: files
    source: topologysource.yaml
    snapshot: snapshot.yaml
    readers: {readers}
  - name: pushed
    source: topologysource.yaml
    maxAge: {MAX_AGE_S}s
    maxProfileChanges: 1
    readers: {readers}
    writers: {{bearerTokenFiles: [writer.token]}}
  - name: empty
    source: topologysource.yaml
    readers: {readers}
    writers: {{bearerTokenFiles: [writer.token]}}
  - name: noded
    source: topologysource.yaml
    snapshot: noded.yaml
    nodes: nodes.json
    driftGracePeriod: 1s
    readers: {readers}
"""


class Prometheus:
    def __init__(self, d: Path, target: str, rules: str):
        (d / "rules.yaml").write_text(rules)
        (d / "prometheus.yml").write_text(f"""global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
rule_files: [rules.yaml]
scrape_configs:
  - job_name: topogate
    static_configs:
      - targets: ['{target}']
        labels: {{namespace: gpustack-system}}
""")
        self.proc, self.port, self.log = start_prometheus(d / "prometheus.yml", d / "data", d / "prometheus.log", cwd=d)

    def api(self, path, **params):
        url = f"http://127.0.0.1:{self.port}/api/v1/{path}"
        if params:
            url += "?" + urllib.parse.urlencode(params)
        with urllib.request.urlopen(url, timeout=5) as r:
            body = json.load(r)
        assert body["status"] == "success", body
        return body["data"]

    def query(self, expr):
        return self.api("query", query=expr)["result"]

    def alert_states(self):
        return {a["labels"]["alertname"]: a["state"] for a in self.api("alerts")["alerts"]}

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


def split_top(expr, words):
    """`expr` split at the top-level occurrences of the regex `words` (outside (), {}, [] and
    quotes)."""
    parts, depth, start, i, quote = [], 0, 0, 0, None
    pattern = re.compile(words)
    while i < len(expr):
        c = expr[i]
        if quote:
            if c == "\\":
                i += 1
            elif c == quote:
                quote = None
        elif c in "\"'":
            quote = c
        elif c in "({[":
            depth += 1
        elif c in ")}]":
            depth -= 1
        elif depth == 0:
            m = pattern.match(expr, i)
            if m:
                parts.append(expr[start:i])
                start = i = m.end()
                continue
        i += 1
    parts.append(expr[start:])
    return [p.strip() for p in parts]


def unwrap(e):
    """`e` without parentheses around all of it."""
    while e.startswith("(") and e.endswith(")"):
        depth = 0
        for i, c in enumerate(e):
            depth += (c == "(") - (c == ")")
            if depth == 0:
                break
        if i != len(e) - 1:
            break
        e = e[1:-1].strip()
    return e


def underlying(expr):
    """The series an alert expression compares: each side of `and`/`or`/`unless`, without its
    threshold comparison, and the argument of absent()."""
    out = []
    for part in split_top(expr, r"\b(?:or|and|unless)\b"):
        part = unwrap(part)
        if part.startswith("absent(") and part.endswith(")"):
            part = part[len("absent("):-1]
        left = split_top(part, r"(?:==|!=|>=|<=|>(?!=)|<(?!=))")[0]
        out.append(unwrap(left))
    return out


def test_underlying_splits_as_intended():
    assert underlying('max by (a) (x / (y > 0)) > 0.8 <= 1') == ["max by (a) (x / (y > 0))"]
    assert underlying('(sum(k{n="a"}) == 0)\nor\n(max(up{j="b"}) == 0)\nor\nabsent(up{j="b"})') == \
        ['sum(k{n="a"})', 'max(up{j="b"})', 'up{j="b"}']
    assert underlying('histogram_quantile(0.99, sum by (le) (rate(h{route=~"/v/.+"}[5m]))) > 10 * 0.5') == \
        ['histogram_quantile(0.99, sum by (le) (rate(h{route=~"/v/.+"}[5m])))']


def panel_queries():
    d = json.loads(DASHBOARD.read_text())
    out = []
    for p in d["panels"]:
        for q in [p, *p.get("panels", [])]:
            for t in q.get("targets", []):
                expr = t["expr"].replace("$__rate_interval", "1m").replace("$namespace", ".*")
                out.append((f"{q['title']} / {t['refId']}", expr))
    return out


def put(srv, pki, inventory, body, *headers):
    args = ["--cacert", str(pki.ca), "-X", "PUT", "-H", f"Authorization: Bearer {WRITER_TOKEN}",
            "-H", "Content-Type: application/yaml", "--data-binary", body]
    for h in headers:
        args += ["-H", h]
    code, _, err, _ = curl(*args, f"{srv.url}/snapshots/{inventory}")
    return code


def review(srv, pki, route, fixture):
    code, _, err, _ = curl("--cacert", str(pki.ca), "-H", "Content-Type: application/json", "--data-binary",
                           f"@{FIXTURES / 'admission' / fixture}", f"{srv.url}/validate/{route}")
    return code


def test_dashboard_and_alerts_on_live_data(make_server, pki, tmp_path, closed_port):
    t0 = time.monotonic()
    crt, key = pki.issue("live-server", "localhost", san="DNS:localhost,IP:127.0.0.1")  # 2 days
    srv = make_server(lambda d: config(pki, d, crt, key, FREE_PORT, closed_port))
    health_port = srv.free_port
    assert srv.health_port == health_port
    rules = render_rules.render()
    alert_exprs = {r["alert"]: r["expr"] for g in yaml.safe_load(rules)["groups"] for r in g["rules"]}
    assert set(alert_exprs) == ACTIVE | INACTIVE
    prom = Prometheus(tmp_path, f"127.0.0.1:{health_port}", rules)
    try:
        def scrapes():
            try:
                r = prom.query('count_over_time(topogate_build_info{job="topogate"}[1m])')
            except OSError:
                return None
            return r and float(r[0]["value"][1]) >= 2

        # Counters Prometheus first sees at 0 make every later event an increase.
        wait_for(scrapes, timeout=60, interval=0.25, what="two scrapes of topogate")

        assert put(srv, pki, "pushed", snapshot("zones")) == 201
        bad = snapshot("bad-level").replace("topology.gpustack.ai/zone", "topology.gpustack.ai/pod")
        assert put(srv, pki, "pushed", bad) == 422
        assert put(srv, pki, "pushed", snapshot("racks", NODES)) == 409  # 4 profile changes > 1
        assert put(srv, pki, "pushed", snapshot("racks", NODES), "Topogate-Accept-Impact: *") == 200
        assert review(srv, pki, "topologysources", "allowed.json") == 200
        assert review(srv, pki, "topologysources", "denied.json") == 200
        assert review(srv, pki, "modeldeployments", "modeldeployment_allowed.json") == 200
        assert review(srv, pki, "modeldeployments", "modeldeployment_denied.json") == 200
        assert review(srv, pki, "topologysources", "malformed_not_json.txt") == 400
        assert review(srv, pki, "topologysources", "malformed_no_request.json") == 400
        for token, expected in ((pki.token, 200), ("wrong", 403), (None, 401)):
            auth = ["-H", f"Authorization: Bearer {token}"] if token else []
            code, _, _, _ = curl("--cacert", str(pki.ca), *auth, f"{srv.url}/snapshots/files")
            assert code == expected
        curl("--cacert", str(pki.ca), "--tlsv1.1", "--tls-max", "1.1", f"{srv.url}/livez")
        # The last revision of "pushed": from here it ages.
        assert put(srv, pki, "pushed", snapshot("racks-2", NODES)) == 200
        pushed_at = time.monotonic()

        def scraped_after_traffic():
            r = prom.query('topogate_admission_denials_total{job="topogate"}')
            return len(r) >= 2 and prom.query('topogate_tls_handshake_failures_total{job="topogate"}')

        wait_for(scraped_after_traffic, timeout=15, interval=0.25, what="the traffic in Prometheus")
        # Rates need two samples after the traffic.
        time.sleep(2.5)

        # TOPOGATE_LIVE_REPORT=FILE: what each panel and alert returned, as JSON (for a reader;
        # the assertions below are the test).
        report = {"panels": {}, "alerts": {}}
        empty = []
        for name, expr in panel_queries():
            series = prom.query(expr)
            report["panels"][name] = len(series)
            if not series:
                empty.append(name)
        assert empty == [], f"dashboard queries without series: {empty}"

        skipped, missing = [], []
        for name, expr in alert_exprs.items():
            for part in underlying(expr):
                metric = next((m for m in SKIPPED if m in part), None)
                if metric:
                    skipped.append((name, metric, SKIPPED[metric]))
                else:
                    series = prom.query(part)
                    report["alerts"].setdefault(name, {"parts": {}})["parts"][part] = len(series)
                    if not series:
                        missing.append((name, part))
        assert missing == [], f"alert expressions without series: {missing}"
        assert [s[0] for s in skipped] == ["TopogateNoReadyReplica"], skipped
        print("skipped:", skipped)

        # What is true now is active (the alerts with `for` pending), and only that.
        states = wait_for(lambda: (s := prom.alert_states()) and ACTIVE <= set(s) and s, timeout=15,
                          interval=0.25, what=f"alerts {sorted(ACTIVE)} active")
        assert set(states) & (INACTIVE - {"TopogateInventoryNearMaxAge", "TopogateInventoryStale"}) == set(), states
        # The full expressions of the true alerts return the offending series themselves.
        for name in ACTIVE:
            assert prom.query(alert_exprs[name]), name
        labels = {a["labels"]["alertname"]: a["labels"] for a in prom.api("alerts")["alerts"]}
        assert labels["TopogateInventoryRejectingRevisions"]["inventory"] == "pushed"
        assert labels["TopogateInventoryRejectingRevisions"]["rule"] == "S4"
        assert labels["TopogateProfileChangeRefused"]["inventory"] == "pushed"
        assert labels["TopogateAdmissionErrors"]["kind"] == "other"
        assert labels["TopogateCertificateExpiringSoon"]["certificate"].startswith("server:")
        assert labels["TopogateInventoryNotReady"]["inventory"] == "empty"
        # Only the large revision is past the fraction; the pushed one (4 Nodes) is not.
        assert labels["TopogateInventoryNearSizeLimit"]["inventory"] == "files"
        sizes = {r["metric"]["inventory"]: float(r["value"][1])
                 for r in prom.query('topogate_inventory_snapshot_bytes{job="topogate"}')}
        assert 0.9 < sizes["files"] / 1048576 <= 1, sizes
        assert [r["metric"]["inventory"] for r in prom.query(alert_exprs["TopogateInventoryNearSizeLimit"])] == ["files"]
        # The client CA (ten years) is on the other side of the threshold.
        certs = prom.query(alert_exprs["TopogateCertificateExpiringSoon"])
        assert [c["metric"]["certificate"] for c in certs] == [labels["TopogateCertificateExpiringSoon"]["certificate"]]
        assert len(prom.query("topogate_certificate_expiry_timestamp_seconds")) == 5  # server + 4 client CAs (one per inventory)
        # Within 0.8 of maxAge (topogate's clock started before pushed_at): no staleness alert.
        states = prom.alert_states()
        if time.monotonic() - pushed_at < 0.8 * MAX_AGE_S - 0.5:
            assert {"TopogateInventoryNearMaxAge", "TopogateInventoryStale"} & set(states) == set(), states

        # No new revision: past 0.8 of maxAge, then past maxAge.
        near = wait_for(lambda: "TopogateInventoryNearMaxAge" in (s := prom.alert_states()) and s, timeout=20,
                        interval=0.25, what="TopogateInventoryNearMaxAge")
        near_at = time.monotonic() - pushed_at
        assert near_at > 0.8 * MAX_AGE_S - 0.5, near_at
        assert "TopogateInventoryStale" not in near
        stale = wait_for(lambda: "TopogateInventoryStale" in (s := prom.alert_states()) and s, timeout=20,
                         interval=0.25, what="TopogateInventoryStale")
        assert time.monotonic() - pushed_at > MAX_AGE_S - 0.5
        assert stale["TopogateInventoryStale"] in ("pending", "firing")
        for name, state in {**states, **near, **stale}.items():
            report["alerts"].setdefault(name, {"parts": {}})["state"] = state
        if os.environ.get("TOPOGATE_LIVE_REPORT"):
            Path(os.environ["TOPOGATE_LIVE_REPORT"]).write_text(json.dumps(report, indent=1, sort_keys=True))
        stale_labels = {a["labels"]["alertname"]: a["labels"] for a in prom.api("alerts")["alerts"]}
        assert stale_labels["TopogateInventoryStale"]["inventory"] == "pushed"
        # Past maxAge the near alert makes way, and GET answers 503.
        wait_for(lambda: "TopogateInventoryNearMaxAge" not in prom.alert_states(), timeout=10, interval=0.25,
                 what="TopogateInventoryNearMaxAge to end past maxAge")
        code, _, _, _ = curl("--cacert", str(pki.ca), "-H", f"Authorization: Bearer {pki.token}",
                             f"{srv.url}/snapshots/pushed")
        assert code == 503
    finally:
        prom.stop()
    assert time.monotonic() - t0 < 100

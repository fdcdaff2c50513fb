"""The metrics the chart's alerts read, from the real binary over HTTPS: refused revisions by
rule, admission denials by rule, staleness against maxAge, Nodes served, the store's
availability (a file store that answers; a Kubernetes store whose API server refuses
connections), admission decisions that exist at 0 before the first review, and the served
size against the 1 MiB limit with the push answer's warning on both sides of 0.9 of it."""

import json
import socket
from pathlib import Path

from integration_support import FIXTURES, SNAPSHOT, TOPOLOGY_SOURCE, curl, wait_for

WRITER_TOKEN = "alert-metrics-writer-0123456789abcdef"


def metrics(server, pki):
    code, body, err, _ = curl("--cacert", str(pki.ca), f"{server.url}/metrics")
    assert code == 200, err
    return body


def value(text, name, **labels):
    """The value of the one series of `name` with exactly `labels`, or None."""
    want = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        series, _, v = line.rpartition(" ")
        base, _, rest = series.partition("{")
        if base != name:
            continue
        got = ",".join(sorted(p for p in rest.rstrip("}").split(",") if p))
        if got == want:
            return float(v)
    return None


def config(pki, d: Path, store: str):
    (d / "topologysource.yaml").write_text(TOPOLOGY_SOURCE)
    (d / "snapshot.yaml").write_text(SNAPSHOT.format(revision="file-1"))
    (d / "writer.token").write_text(WRITER_TOKEN + "\n")
    return f"""listen: {{address: 127.0.0.1, port: 0}}
tls: {{certFile: {pki.server_crt}, keyFile: {pki.server_key}}}
logging: {{level: info, accessLog: false}}
store: {store}
inventories:
  - name: files
    source: topologysource.yaml
    snapshot: snapshot.yaml
    maxAge: 45s
    readers: {{bearerTokenFiles: [{pki.token_file}]}}
  - name: pushed
    source: topologysource.yaml
    readers: {{bearerTokenFiles: [{pki.token_file}]}}
    writers: {{bearerTokenFiles: [writer.token]}}
"""


def push(server, pki, body, *extra):
    code, out, err, _ = curl("--cacert", str(pki.ca), "-X", "PUT", "-H", f"Authorization: Bearer {WRITER_TOKEN}",
                             "-H", "Content-Type: application/yaml", *extra, "--data-binary", body,
                             f"{server.url}/snapshots/pushed")
    return code, out


LIMIT = 1048576
WARN_ABOVE = LIMIT * 9 // 10  # 943718


def canonical(snapshot):
    """topogate's canonical JSON of a snapshot of ASCII names and labels: sorted keys, no space."""
    return json.dumps(snapshot, sort_keys=True, separators=(",", ":"))


def snapshot_of_size(size, revision):
    """A valid snapshot (TOPOLOGY_SOURCE's levels) whose canonical JSON is `size` bytes: Nodes in
    one rack, then a Node without labels whose name (DNS labels of 63) takes up the rest."""
    labels = {"topology.gpustack.ai/region": "region-a", "topology.gpustack.ai/zone": "zone-a",
              "topology.gpustack.ai/rack": "rack-01"}
    snap = {"apiVersion": "topology.gpustack.ai/v1alpha1", "revision": revision, "nodes": {}}
    per = len(canonical({"w": {"worker-000000": labels, "worker-000001": labels}})) - \
        len(canonical({"w": {"worker-000000": labels}}))
    count = (size - len(canonical(snap)) - 100) // per  # leaves 100 to 100 + per bytes: a name of <= 253
    snap["nodes"] = {f"worker-{i:06d}": labels for i in range(count)}
    rest = size - len(canonical(snap)) - len(',"":{}')
    name = "".join("." if i % 64 == 63 else "z" for i in range(rest))
    snap["nodes"][name] = {}
    text = canonical(snap)
    assert len(text) == size
    return text


def test_file_store_rejections_staleness_nodes_and_denials(make_server, pki):
    srv = make_server(lambda d: config(pki, d, f"{{type: file, directory: {d / 'store'}}}"))
    text = wait_for(lambda: (t := metrics(srv, pki)) and value(t, "topogate_store_available", inventory="pushed") is not None
                    and t, what="the store's first answer")
    assert value(text, "topogate_store_available", inventory="pushed") == 1
    # File-fed: no store call, no series.
    assert value(text, "topogate_store_available", inventory="files") is None
    assert value(text, "topogate_inventory_max_age_seconds", inventory="files") == 45
    assert value(text, "topogate_inventory_max_age_seconds", inventory="pushed") == 0
    staleness = value(text, "topogate_inventory_staleness_seconds", inventory="files")
    assert staleness is not None and 0 <= staleness < 30
    assert value(text, "topogate_inventory_staleness_seconds", inventory="pushed") is None  # nothing served
    assert value(text, "topogate_inventory_nodes", inventory="files") == 2
    for rule in (f"S{i}" for i in range(1, 11)):
        assert value(text, "topogate_inventory_rejections_total", inventory="pushed", rule=rule) == 0, rule
    for kind in ("TopologySource", "ModelDeployment"):
        assert value(text, "topogate_admission_decisions_total", kind=kind, verdict="errored") == 0

    # Two pushes that break S4 (an undeclared level) first, one that breaks S2 (blank revision).
    bad_level = SNAPSHOT.format(revision="bad-1").replace("topology.gpustack.ai/rack", "topology.gpustack.ai/pod")
    assert push(srv, pki, bad_level)[0] == 422
    assert push(srv, pki, bad_level.replace("bad-1", "bad-2"))[0] == 422
    assert push(srv, pki, SNAPSHOT.format(revision='" "'))[0] == 422
    assert push(srv, pki, SNAPSHOT.format(revision="good-1"))[0] == 201
    text = metrics(srv, pki)
    assert value(text, "topogate_inventory_rejections_total", inventory="pushed", rule="S4") == 2
    assert value(text, "topogate_inventory_rejections_total", inventory="pushed", rule="S2") == 1
    assert value(text, "topogate_inventory_rejections_total", inventory="pushed", rule="S7") == 0
    assert value(text, "topogate_reconcile_attempts_total", inventory="pushed", result="rejected") == 3
    assert value(text, "topogate_inventory_nodes", inventory="pushed") == 2
    assert value(text, "topogate_store_available", inventory="pushed") == 1

    # A denied review counts once per rule it breaks; an allowed one counts no denial.
    for fixture in ("denied.json", "allowed.json"):
        code, body, err, _ = curl("--cacert", str(pki.ca), "-H", "Content-Type: application/json", "--data-binary",
                                  f"@{FIXTURES / 'admission' / fixture}", f"{srv.url}/validate/topologysources")
        assert code == 200, err
    text = metrics(srv, pki)
    denials = {line.split(" ")[0]: float(line.split(" ")[1]) for line in text.splitlines()
               if line.startswith("topogate_admission_denials_total{")}
    assert denials, text
    assert all('kind="TopologySource"' in s and 'rule="T' in s and v == 1 for s, v in denials.items()), denials
    assert value(text, "topogate_admission_decisions_total", kind="TopologySource", verdict="denied") == 1
    assert value(text, "topogate_admission_decisions_total", kind="TopologySource", verdict="allowed") == 1


def test_store_that_refuses_connections_is_unavailable(make_server, pki):
    # A port nothing listens on: every store call fails at once.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    store = (f"{{type: kubernetes, namespace: gpustack-system, apiServer: 'https://127.0.0.1:{port}', "
             f"tokenFile: {pki.token_file}, caFile: {pki.ca}, timeout: 1s}}")
    srv = make_server(lambda d: config(pki, d, store))
    text = wait_for(lambda: (t := metrics(srv, pki)) and value(t, "topogate_store_available", inventory="pushed") == 0
                    and t, what="the store reported unavailable")
    assert value(text, "topogate_inventory_ready", inventory="pushed") == 0
    # The file-fed inventory is served as usual.
    assert value(text, "topogate_inventory_ready", inventory="files") == 1
    code, _ = push(srv, pki, SNAPSHOT.format(revision="p-1"))
    assert code == 503
    assert value(metrics(srv, pki), "topogate_store_available", inventory="pushed") == 0


def test_size_against_the_limit_and_the_push_warning_on_both_sides(make_server, pki, tmp_path):
    srv = make_server(lambda d: config(pki, d, f"{{type: file, directory: {d / 'store'}}}"))
    text = wait_for(lambda: (t := metrics(srv, pki)) and value(t, "topogate_store_available", inventory="pushed") is not None
                    and t, what="the store's first answer")
    assert value(text, "topogate_inventory_snapshot_max_bytes", inventory="pushed") == LIMIT
    assert value(text, "topogate_inventory_snapshot_bytes", inventory="pushed") == 0
    for size, warned in ((WARN_ABOVE, False), (WARN_ABOVE + 1, True)):
        headers, body = tmp_path / f"headers-{size}", tmp_path / f"body-{size}.json"
        body.write_text(snapshot_of_size(size, f"size-{size}"))
        code, out = push(srv, pki, f"@{body}", "-H", "Content-Type: application/json", "-D", str(headers))
        assert code in (200, 201), out
        answer = json.loads(out)
        assert answer["size"] == size
        warning = [h.split(":", 1)[1].strip() for h in headers.read_text().splitlines()
                   if h.lower().startswith("warning:")]
        if warned:
            assert len(answer["warnings"]) == 1 and f"is {size} bytes, 90.0% of the 1048576-byte" in answer["warnings"][0]
            assert warning == [f'299 - "{answer["warnings"][0]}"'], warning
        else:
            assert answer["warnings"] == [] and warning == [], (answer, warning)
        text = metrics(srv, pki)
        assert value(text, "topogate_inventory_snapshot_bytes", inventory="pushed") == size
        ratio = size / value(text, "topogate_inventory_snapshot_max_bytes", inventory="pushed")
        assert (ratio > 0.9) == warned, ratio

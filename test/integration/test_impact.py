"""Profile-change impact over HTTPS, against the real binary: the push response carries the
impact of the revision against the one served before; an inventory with maxProfileChanges
refuses a push past the limit with 409 and the impact, and publishes the same body once
Topogate-Accept-Impact names the served ETag; the history and /metrics record both. A file
source past the limit is reported (status, history, metrics) and not served."""

import json
import os
from pathlib import Path

from conftest import TOPOLOGY_SOURCE, curl, wait_for
from test_metrics import metrics_text, sample

WRITER_TOKEN = "impact-writer-token-0123456789abcdef"
NODES = ("worker-a", "worker-b", "worker-c", "worker-d")


def snapshot(revision, racked=()):
    """The runbook's four Nodes in two zones; the Nodes in `racked` also carry a rack."""
    lines = ["apiVersion: topology.gpustack.ai/v1alpha1", f"revision: {revision}", "nodes:"]
    for i, n in enumerate(NODES):
        lines.append(f"  {n}:")
        lines.append("    topology.gpustack.ai/region: region-a")
        lines.append(f"    topology.gpustack.ai/zone: zone-{'ab'[i // 2]}")
        if n in racked:
            lines.append(f"    topology.gpustack.ai/rack: rack-0{i + 1}")
    return "\n".join(lines) + "\n"


def push_config(pki, d: Path, limit):
    (d / "topologysource.yaml").write_text(TOPOLOGY_SOURCE)
    (d / "writer").write_text(WRITER_TOKEN + "\n")
    return f"""listen: {{address: 127.0.0.1, port: 0}}
tls: {{certFile: {pki.server_crt}, keyFile: {pki.server_key}}}
logging: {{level: info, accessLog: false}}
store: {{type: file, directory: {d / "store"}}}
inventories:
  - name: dc
    source: topologysource.yaml
    allowEmptyStart: true
    maxProfileChanges: {limit}
    readers: {{bearerTokenFiles: [{pki.token_file}]}}
    writers: {{bearerTokenFiles: [{d / "writer"}]}}
"""


def put(srv, pki, body, *headers, url_suffix=""):
    args = ["--cacert", str(pki.ca), "-X", "PUT", "-H", f"Authorization: Bearer {WRITER_TOKEN}",
            "-H", "Content-Type: application/yaml", "--data-binary", body]
    for h in headers:
        args += ["-H", h]
    code, text, err, _ = curl(*args, f"{srv.url}/snapshots/dc{url_suffix}")
    return code, (json.loads(text) if text else None), err


def get(srv, pki, path):
    code, text, err, _ = curl("--cacert", str(pki.ca), "-H", f"Authorization: Bearer {pki.token}", f"{srv.url}{path}")
    assert code == 200, (code, text, err)
    return json.loads(text)


def served(srv, pki):
    return get(srv, pki, "/snapshots/dc")["revision"]


def test_push_impact_policy_history_and_metrics(make_server, pki):
    srv = make_server(lambda d: push_config(pki, d, 2))

    # The first revision: every Node is new, nothing to drain, never refused.
    code, body, err = put(srv, pki, snapshot("zone-only"))
    assert code == 201, (body, err)
    assert body["impact"]["addedNodes"]["count"] == 4
    assert body["impact"]["profileChanges"] == 0
    baseline_etag = body["etag"]

    # The runbook's live change zone -> zone + rack: all four Nodes change profile, one
    # profile appears and one disappears. Over maxProfileChanges 2: 409 with the impact.
    code, body, err = put(srv, pki, snapshot("zone-rack", NODES))
    assert code == 409, (body, err)
    assert body["kind"] == "Status" and body["reason"] == "Conflict" and body["code"] == 409
    impact = body["impact"]
    assert impact["profileChanges"] == 4
    assert impact["changedNodes"]["count"] == 4
    assert [c["node"] for c in impact["changedNodes"]["items"]] == list(NODES)
    assert all(c["from"] != c["to"] and c["from"].startswith("fnv64-") for c in impact["changedNodes"]["items"])
    assert len(impact["appearedProfiles"]) == 1 and len(impact["disappearedProfiles"]) == 1
    assert impact["appearedProfiles"][0]["levels"] == ["topology.gpustack.ai/region", "topology.gpustack.ai/zone",
                                                       "topology.gpustack.ai/rack", "kubernetes.io/hostname"]
    assert any("HoldAndDrain" in c for c in impact["consequences"])
    assert body["acceptImpact"] == {"header": "Topogate-Accept-Impact", "value": baseline_etag,
                                    "maxProfileChanges": 2}
    assert served(srv, pki) == "zone-only"

    # Accepting another revision's impact does not count.
    code, body, _ = put(srv, pki, snapshot("zone-rack", NODES), 'Topogate-Accept-Impact: "' + "0" * 64 + '"')
    assert code == 409
    assert served(srv, pki) == "zone-only"

    # The same body, accepting the impact reviewed against the served ETag: published.
    code, body, err = put(srv, pki, snapshot("zone-rack", NODES), f"Topogate-Accept-Impact: {baseline_etag}")
    assert code == 200, (body, err)
    assert body["revision"] == "zone-rack"
    assert body["impact"]["profileChanges"] == 4
    assert served(srv, pki) == "zone-rack"

    # Within the limit (two Nodes lose their rack, one profile comes back), no header needed.
    code, body, err = put(srv, pki, snapshot("two-back", NODES[:2]))
    assert code == 200, (body, err)
    assert body["impact"]["profileChanges"] == 2
    assert body["impact"]["changedNodes"]["count"] == 2

    history = get(srv, pki, "/snapshots/dc/history")["items"]  # newest first
    assert [h["result"] for h in history[:4]] == ["accepted", "accepted", "rejected", "rejected"]
    assert history[1]["impact"]["profileChanges"] == 4
    assert history[2].get("impactRefused") is True and history[2]["revision"] == "zone-rack"
    assert history[2]["impact"]["profileChanges"] == 4
    assert history[0].get("impactRefused") is None

    status = get(srv, pki, "/snapshots/dc/status")
    assert status["maxProfileChanges"] == 2
    assert "impactRefusal" not in status  # the last revision was published

    text = metrics_text(srv, pki)
    assert sample(text, "topogate_inventory_impact_refusals_total", inventory="dc", trigger="push") == 2
    assert sample(text, "topogate_inventory_profile_changes_total", inventory="dc", trigger="push") == 6
    # zone-rack: the rack profile appears, region>zone disappears; two-back brings it back.
    assert sample(text, "topogate_inventory_profile_set_changes_total", inventory="dc", trigger="push",
                  change="appeared") == 2
    assert sample(text, "topogate_inventory_profile_set_changes_total", inventory="dc", trigger="push",
                  change="disappeared") == 1
    assert sample(text, "topogate_inventory_profiles", inventory="dc") == 2


def test_push_within_limit_at_the_boundary(make_server, pki):
    srv = make_server(lambda d: push_config(pki, d, 4))
    assert put(srv, pki, snapshot("zone-only"))[0] == 201
    # Exactly 4 Nodes change and 2 profiles move: at the limit, published.
    code, body, err = put(srv, pki, snapshot("zone-rack", NODES))
    assert code == 200, (body, err)
    assert body["impact"]["profileChanges"] == 4


def test_file_source_past_the_limit_is_reported_not_served(make_server, pki):
    def config(d: Path):
        (d / "topologysource.yaml").write_text(TOPOLOGY_SOURCE)
        (d / "snapshot.yaml").write_text(snapshot("zone-only"))
        return f"""listen: {{address: 127.0.0.1, port: 0}}
tls: {{certFile: {pki.server_crt}, keyFile: {pki.server_key}}}
logging: {{level: info, accessLog: false}}
inventories:
  - name: dc
    source: topologysource.yaml
    snapshot: snapshot.yaml
    maxProfileChanges: 1
    readers: {{bearerTokenFiles: [{pki.token_file}]}}
"""

    srv = make_server(config)
    assert served(srv, pki) == "zone-only"
    path = srv.dir / "snapshot.yaml"
    tmp = srv.dir / "snapshot.yaml.tmp"
    tmp.write_text(snapshot("zone-rack", NODES))
    os.replace(tmp, path)

    status = wait_for(lambda: (lambda s: s if "impactRefusal" in s else None)(get(srv, pki, "/snapshots/dc/status")),
                      what="the refusal in the status")
    assert "zone-rack" in status["impactRefusal"]
    assert served(srv, pki) == "zone-only"
    last = status["lastAttempt"]
    assert last["result"] == "rejected" and last["impactRefused"] is True
    assert last["impact"]["profileChanges"] == 4
    text = metrics_text(srv, pki)
    assert sample(text, "topogate_inventory_impact_refusals_total", inventory="dc", trigger="file") == 1
    assert any("maxProfileChanges" in e.get("msg", "") for e in srv.logs())
    # The inventory stays ready: it still serves the revision the consumer has.
    code, text, _, _ = curl("--cacert", str(pki.ca), f"{srv.url}/readyz?verbose")
    assert code == 200
    assert "[+]inventory/dc ok" in text
    assert "[-]impact/dc failed (not gating): revision zone-rack" in text

    # A revision within the limit replaces it.
    tmp.write_text(snapshot("one-rack", NODES[:1]))
    os.replace(tmp, path)
    wait_for(lambda: served(srv, pki) == "one-rack", what="the revision within the limit")
    assert "impactRefusal" not in get(srv, pki, "/snapshots/dc/status")
    assert "impact/dc" not in curl("--cacert", str(pki.ca), f"{srv.url}/readyz?verbose")[1]

"""Node-label hierarchies (nodeLabels TopologySources).

`topogate validate nodelabels` on the runbook's cloud-zones source and Node lists shaped like
`kubectl get nodes -o json`; then `topogate serve` with a nodeLabels inventory whose Node list
file changes: /readyz, status, history, /metrics and GET /snapshots/{name} follow it."""

import json

import pytest

from conftest import curl, k8s_status, run, wait_for

REGION = "topology.kubernetes.io/region"
ZONE = "topology.kubernetes.io/zone"
RACK = "topology.gpustack.ai/rack"
WORKER = "node-role.kubernetes.io/worker"

# The runbook's "Observe existing Node labels" example.
CLOUD_ZONES = """apiVersion: worker.gpustack.ai/v1
kind: TopologySource
metadata:
  name: cloud-zones
spec:
  nodeSelector:
    matchLabels:
      node-role.kubernetes.io/worker: ""
  levels:
    - topology.kubernetes.io/region
    - topology.kubernetes.io/zone
  nodeLabels: {}
"""

ZONE_RACKS = """apiVersion: worker.gpustack.ai/v1
kind: TopologySource
metadata:
  name: zone-racks
spec:
  levels:
    - topology.kubernetes.io/region
    - topology.kubernetes.io/zone
    - topology.gpustack.ai/rack
  nodeLabels: {}
"""

CONFIG_MAP_SOURCE = """apiVersion: worker.gpustack.ai/v1
kind: TopologySource
metadata:
  name: data-center
spec:
  levels: [topology.gpustack.ai/zone]
  configMap:
    configMapRef: {namespace: gpustack-system, name: inventory}
    key: snapshot.yaml
    maxStaleness: 10m
"""


def node(name, labels):
    """One Node as kubectl prints it (status and the rest are ignored by topogate)."""
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **labels},
                     "resourceVersion": "1", "uid": f"uid-{name}"},
        "spec": {"podCIDR": "10.244.0.0/24"},
        "status": {"capacity": {"cpu": "8", "nvidia.com/gpu": "4"}, "conditions": [{"type": "Ready", "status": "True"}]},
    }


def node_list(*nodes):
    return json.dumps({"apiVersion": "v1", "kind": "List", "items": list(nodes), "metadata": {"resourceVersion": ""}})


def worker(name, **labels):
    return node(name, {WORKER: "", **labels})


GOOD_ZONES = node_list(
    worker("worker-a", **{REGION: "us-east-1", ZONE: "us-east-1a"}),
    worker("worker-b", **{REGION: "us-east-1", ZONE: "us-east-1b"}),
    worker("worker-c", **{REGION: "us-east-1", ZONE: "us-east-1a"}),
    node("control-1", {ZONE: "us-east-1c"}),  # not selected: no region, never looked at
)


def validate(binary, tmp_path, source, nodes, *extra):
    (tmp_path / "source.yaml").write_text(source)
    (tmp_path / "nodes.json").write_text(nodes)
    return run([binary, "validate", "nodelabels", "--source", str(tmp_path / "source.yaml"),
                "--nodes", str(tmp_path / "nodes.json"), *extra], check=False)


def test_cloud_zones_valid_with_summary(binary, tmp_path):
    p = validate(binary, tmp_path, CLOUD_ZONES, GOOD_ZONES)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "Nodes: 3 selected of 4" in p.stdout
    assert ZONE in p.stdout and "us-east-1a" in p.stdout
    assert "valid nodelabels" in p.stdout
    assert "us-east-1c" not in p.stdout  # only on the unselected Node

    j = validate(binary, tmp_path, CLOUD_ZONES, GOOD_ZONES, "--output", "json")
    assert j.returncode == 0, j.stdout + j.stderr
    doc = json.loads(j.stdout)
    assert doc["valid"] is True and doc["errors"] == [] and doc["warnings"] == []
    assert doc["selectedNodes"] == 3 and doc["totalNodes"] == 4
    zones = {d["value"]: d["nodes"] for d in doc["levels"][1]["domains"]}
    assert zones == {"us-east-1a": 2, "us-east-1b": 1}
    assert doc["levels"][1]["nesting"] == "nested"
    assert [p["nodes"] for p in doc["profiles"]] == [3]
    assert doc["profiles"][0]["levels"] == [REGION, ZONE, "kubernetes.io/hostname"]
    assert {n["name"] for n in doc["nodes"]} == {"worker-a", "worker-b", "worker-c"}


def test_zone_without_region(binary, tmp_path):
    nodes = node_list(worker("worker-a", **{ZONE: "us-east-1a"}),
                      worker("worker-b", **{REGION: "us-east-1", ZONE: "us-east-1b"}))
    p = validate(binary, tmp_path, CLOUD_ZONES, nodes)
    assert p.returncode == 1, p.stdout + p.stderr
    assert f"[S8] nodes[worker-a][{REGION}]: Required value" in p.stdout
    assert "invalid nodelabels (1 error)" in p.stderr
    j = json.loads(validate(binary, tmp_path, CLOUD_ZONES, nodes, "--output=json").stdout)
    assert [(e["rule"], e["field"], e["type"]) for e in j["errors"]] == [
        ("S8", f"nodes[worker-a][{REGION}]", "Required value")]


def test_rack_under_two_zones_names_parents_and_nodes(binary, tmp_path):
    nodes = node_list(
        node("n1", {REGION: "eu", ZONE: "a", RACK: "r1"}),
        node("n2", {REGION: "eu", ZONE: "a", RACK: "r2"}),
        node("n3", {REGION: "eu", ZONE: "b", RACK: "r1"}),
        node("n4", {REGION: "eu", ZONE: "b", RACK: "r3"}),
    )
    p = validate(binary, tmp_path, ZONE_RACKS, nodes)
    assert p.returncode == 1, p.stdout + p.stderr
    assert f'[S9] nodes[n3][{RACK}]: Invalid value: "r1"' in p.stdout
    assert "Values under more than one parent" in p.stdout
    doc = json.loads(validate(binary, tmp_path, ZONE_RACKS, nodes, "--output", "json").stdout)
    assert doc["valid"] is False
    assert doc["conflicts"] == [{
        "level": RACK, "value": "r1",
        "placements": [{"parents": f"{{{REGION}=eu, {ZONE}=a}}", "nodes": ["n1"]},
                       {"parents": f"{{{REGION}=eu, {ZONE}=b}}", "nodes": ["n3"]}]}]
    assert doc["levels"][2]["nesting"] == "conflicting"


def test_independent_dimensions(binary, tmp_path):
    source = CLOUD_ZONES.replace("topology.kubernetes.io/region", "topology.kubernetes.io/zone", 1) \
        .replace("    - topology.kubernetes.io/zone\n  nodeLabels", "    - example.com/partition\n  nodeLabels")
    nodes = node_list(*[worker(f"w{z}{p}", **{ZONE: z, "example.com/partition": p})
                        for z in ("a", "b") for p in ("p1", "p2")])
    doc = json.loads(validate(binary, tmp_path, source, nodes, "--output", "json").stdout)
    assert doc["valid"] is False
    assert doc["levels"][1]["nesting"] == "independent"
    assert ("S9", "spec.levels[1]") in {(e["rule"], e["field"]) for e in doc["errors"]}


def test_usage_and_io_errors(binary, tmp_path):
    # A writing source: its Nodes carry what topogate publishes; the snapshot is what to check.
    assert validate(binary, tmp_path, CONFIG_MAP_SOURCE, GOOD_ZONES).returncode == 2
    (tmp_path / "source.yaml").write_text(CLOUD_ZONES)
    for args in (["--source", str(tmp_path / "source.yaml")],
                 ["--nodes", str(tmp_path / "nodes.json")],
                 ["--source", str(tmp_path / "source.yaml"), "--nodes", str(tmp_path / "missing.json")],
                 ["--source", str(tmp_path / "source.yaml"), "--nodes", str(tmp_path / "nodes.json"), "extra"]):
        p = run([binary, "validate", "nodelabels", *args], check=False)
        assert p.returncode == 2, (args, p.stdout, p.stderr)
    # An invalid source or Node list is an invalid input (1), as for snapshots.
    assert validate(binary, tmp_path, CLOUD_ZONES.replace("levels:", "levels: []\n  x:"), GOOD_ZONES).returncode == 1
    assert validate(binary, tmp_path, CLOUD_ZONES, '{"kind": "Pod"}').returncode == 1


# --- the reconcile loop -----------------------------------------------------------------


def serve_config(pki, d, nodes_text):
    (d / "source.yaml").write_text(ZONE_RACKS)
    (d / "nodes.json").write_text(nodes_text)
    return f"""listen: {{address: 127.0.0.1, port: 0}}
tls: {{certFile: {pki.server_crt}, keyFile: {pki.server_key}}}
inventories:
  - name: racks
    source: source.yaml
    nodes: nodes.json
    readers: {{bearerTokenFiles: [{pki.token_file}]}}
"""


GOOD_RACKS = node_list(
    node("n1", {REGION: "eu", ZONE: "a", RACK: "r1"}),
    node("n2", {REGION: "eu", ZONE: "a", RACK: "r2"}),
    node("n3", {REGION: "eu", ZONE: "b", RACK: "r3"}),
)
BAD_RACKS = node_list(
    node("n1", {REGION: "eu", ZONE: "a", RACK: "r1"}),
    node("n2", {REGION: "eu", ZONE: "a", RACK: "r2"}),
    node("n3", {REGION: "eu", ZONE: "b", RACK: "r1"}),
    node("n4", {ZONE: "b"}),
)


def metric(text, name, inventory):
    for line in text.splitlines():
        if line.startswith(f'{name}{{inventory="{inventory}"}} '):
            return float(line.split()[-1])
    return None


def test_reconcile_loop_follows_the_node_list(make_server, pki):
    srv = make_server(lambda d: serve_config(pki, d, GOOD_RACKS))
    auth = ["--cacert", str(pki.ca), "-H", f"Authorization: Bearer {pki.token}"]

    code, body, _, _ = curl("--cacert", str(pki.ca), f"{srv.url}/readyz?verbose")
    assert code == 200, body
    assert "[+]inventory/racks ok" in body and "[+]nodelabels/racks ok" in body

    code, body, _, _ = curl(*auth, f"{srv.url}/snapshots/racks/status")
    status = json.loads(body)
    assert code == 200 and status["provider"] == "nodeLabels" and status["valid"] is True
    assert status["report"]["selectedNodes"] == 3 and status["checks"] == 1

    # No snapshot is served for a nodeLabels source, and none will come: 404, not 503.
    code, body, _, _ = curl(*auth, f"{srv.url}/snapshots/racks")
    assert code == 404
    status = k8s_status(body, 404, "NotFound")
    assert "nodeLabels" in status["message"] and status["details"]["name"] == "racks", body
    code, _, _, _ = curl(*auth, f"{srv.url}/snapshot")
    assert code == 404

    code, body, _, _ = curl("--cacert", str(pki.ca), f"{srv.url}/metrics")
    assert metric(body, "topogate_nodelabel_hierarchy_errors", "racks") == 0
    assert metric(body, "topogate_inventory_ready", "racks") == 1

    # A Node moves rack r1 under zone b and another carries a zone without a region.
    tmp = srv.dir / "nodes.json.tmp"
    tmp.write_text(BAD_RACKS)
    tmp.rename(srv.dir / "nodes.json")

    def invalid():
        c, b, _, _ = curl(*auth, f"{srv.url}/snapshots/racks/status")
        return c == 200 and json.loads(b).get("valid") is False and json.loads(b)
    status = wait_for(invalid, what="the status to report the invalid hierarchy")
    assert status["checks"] == 2
    assert {(e["rule"], e["field"]) for e in status["report"]["errors"]} == {
        ("S9", f"nodes[n3][{RACK}]"), ("S8", f"nodes[n4][{REGION}]")}

    code, body, _, _ = curl("--cacert", str(pki.ca), f"{srv.url}/metrics")
    assert metric(body, "topogate_nodelabel_hierarchy_errors", "racks") == 2
    assert metric(body, "topogate_inventory_ready", "racks") == 1  # findings do not gate readiness

    code, body, _, _ = curl("--cacert", str(pki.ca), f"{srv.url}/readyz?verbose")
    assert code == 200, body
    assert "[-]nodelabels/racks failed (not gating): 2 errors (S8, S9)" in body

    code, body, _, _ = curl(*auth, f"{srv.url}/snapshots/racks/history")
    items = json.loads(body)["items"]
    assert [i["result"] for i in items] == ["rejected", "accepted"]
    assert items[0]["rules"] == ["S8", "S9"]

    assert any(e.get("level") == "warn" and "[S9]" in e.get("msg", "") for e in srv.logs())


@pytest.mark.parametrize("extra, why", [
    ("    snapshot: snapshot.yaml\n", "takes no snapshot"),
    ("", "nodesFromAPI is required"),
])
def test_config_rules_for_nodelabels_inventories(binary, pki, tmp_path, extra, why):
    (tmp_path / "source.yaml").write_text(ZONE_RACKS)
    (tmp_path / "snapshot.yaml").write_text("")
    nodes = "" if "nodesFromAPI" in why else "    nodes: nodes.json\n"
    (tmp_path / "topogate.yaml").write_text(f"""listen: {{address: 127.0.0.1, port: 0}}
tls: {{certFile: {pki.server_crt}, keyFile: {pki.server_key}}}
inventories:
  - name: racks
    source: source.yaml
{nodes}{extra}    readers: {{bearerTokenFiles: [{pki.token_file}]}}
""")
    p = run([binary, "serve", "--config", str(tmp_path / "topogate.yaml"), "--port", "0"], check=False, timeout=30)
    assert p.returncode != 0
    assert why in p.stderr

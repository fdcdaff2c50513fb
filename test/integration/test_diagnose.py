"""`topogate diagnose chain` and `topogate diagnose pending` on the runbook's scenarios, from
files exactly as `kubectl get ... -o json` (or -o yaml) prints them
(test/fixtures/diagnose/): exit statuses, the per-domain table and the JSON report."""

import json
import os
import shutil
from pathlib import Path

import pytest
import yaml

from conftest import run

FIX = Path(os.environ.get("TOPOGATE_SOURCE_DIR", Path(__file__).resolve().parents[2])) / "test" / "fixtures" / "diagnose"
ZONE = "topology.kubernetes.io/zone"
ZONE_PROFILE = "fnv64-570aeab478df5111"


def diagnose(binary, *args):
    return run([binary, "diagnose", *args], check=False, env={k: v for k, v in os.environ.items()
                                                              if k not in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST")})


def diagnose_json(binary, *args, rc):
    r = diagnose(binary, *args, "--output", "json")
    assert r.returncode == rc, r.stderr
    return json.loads(r.stdout)


def test_chain_complete_on_the_runbook_cluster(binary):
    r = diagnose(binary, "chain", "--from", str(FIX / "two-zones"))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "4 managed Nodes" in r.stdout
    report = diagnose_json(binary, "chain", "--from", str(FIX / "two-zones"), rc=0)
    assert report["clean"] is True and report["findings"] == []
    assert (report["managedNodes"], report["resourceFlavors"], report["topologies"], report["clusterQueues"]) == (4, 1, 1, 1)


def test_chain_findings_name_object_and_runbook_step(binary):
    report = diagnose_json(binary, "chain", "--from", str(FIX / "broken-chain"), rc=1)
    got = sorted((f["check"], f["object"]) for f in report["findings"])
    assert got == sorted([
        ("node-profile", "Node/worker-a2"),
        ("node-profile-derivation", "Node/worker-b1"),
        ("flavor-topology-profile", f"ResourceFlavor/gpustack-{ZONE_PROFILE}"),
        ("flavor-topology", "ResourceFlavor/gpustack-fnv64-8660349c2a183dfd"),
        ("topology-hostname", f"Topology/gpustack-{ZONE_PROFILE}"),
        ("queue-flavor", "ClusterQueue/gpustack"),
        ("queue-topology-ready", "ClusterQueue/gpustack"),
        ("requested-level", "ModelDeployment/default/llm"),
    ])
    steps = {f["check"]: f["step"] for f in report["findings"]}
    assert steps["requested-level"] == "Request a level from ModelDeployment"
    assert steps["queue-topology-ready"] == "Verify the scheduling chain"
    text = diagnose(binary, "chain", "--from", str(FIX / "broken-chain"))
    assert text.returncode == 1
    assert "8 findings" in text.stdout


def test_pending_three_pods_four_fit_no_zone_holds_three(binary):
    r = diagnose(binary, "pending", "default/zone-trio", "--from", str(FIX / "two-zones"))
    assert r.returncode == 1, r.stderr
    out = r.stdout
    titles = [line for line in out.splitlines() if line[:2] in ("1.", "2.", "3.", "4.", "5.", "6.", "7.")]
    assert [t[:2] for t in titles] == ["1.", "2.", "3.", "4.", "5.", "6.", "7."]
    assert titles[5].endswith(": problem")
    assert "HOLDS 3" in out
    assert "cluster-wide 4 fit; largest topology.kubernetes.io/zone domain holds 2" in out
    report = diagnose_json(binary, "pending", "zone-trio", "-n", "default", "--from", str(FIX / "two-zones"), rc=1)
    [ps] = report["podSets"]
    assert (ps["level"], ps["required"], ps["count"], ps["clusterFits"], ps["largestDomainFits"], ps["fitsOneDomain"]) == (
        ZONE, True, 3, 4, 2, False)
    [flavor] = ps["flavors"]
    assert [(d["values"], d["fits"], d["holds"]) for d in flavor["domains"]] == [
        (["region-1", "zone-a"], 2, False), (["region-1", "zone-b"], 2, False)]
    a1 = flavor["domains"][0]["nodes"][0]
    assert a1["name"] == "worker-a1"
    assert a1["allocatable"]["cpu"] == 2000 and a1["used"]["cpu"] == 100 and a1["free"]["cpu"] == 1900
    assert [s["verdict"] for s in report["steps"]] == ["skipped", "problem", "ok", "ok", "ok", "problem", "problem"]
    # 7: Kueue's own decision, with its message.
    k = report["kueue"]
    assert (k["modelled"], k["admissible"], k["step"], k["podSet"]) == (True, False, "topology", "main")
    assert k["message"].endswith("allows to fit only 2 out of 3 pod(s)")


def test_pending_two_pods_fit_one_zone(binary):
    report = diagnose_json(binary, "pending", "default/zone-pair", "--from", str(FIX / "two-zones"),
                           "-f", str(FIX / "zone-pair.json"), rc=1)
    [ps] = report["podSets"]
    assert ps["fitsOneDomain"] is True and ps["largestDomainFits"] == 2
    assert report["steps"][5]["verdict"] == "ok"


def test_pending_capacity_split_between_profiles(binary):
    report = diagnose_json(binary, "pending", "default/zone-trio", "--from", str(FIX / "split-profiles"), rc=1)
    [ps] = report["podSets"]
    assert ps["clusterFits"] == 4 and ps["largestDomainFits"] == 2
    zone_flavor, host_flavor = ps["flavors"]
    assert zone_flavor["levelInTopology"] is True and len(zone_flavor["domains"]) == 1
    assert host_flavor["levelInTopology"] is False and host_flavor["domains"] == []
    assert sorted(e["node"] for e in host_flavor["excluded"]) == ["worker-c1", "worker-c2"]


def test_pending_multi_role_reserved_group_and_role_short_of_a_domain(binary):
    report = diagnose_json(binary, "pending", "default/llm-decode-0", "--from", str(FIX / "multi-role"), rc=1)
    assert report["modelDeployment"] == "default/llm"
    groups = {g["role"]: g for g in report["groups"]}
    assert groups["prefill"]["quotaReserved"] is True and groups["prefill"]["admitted"] is False
    assert groups["decode"]["quotaReserved"] is False and groups["decode"]["fitsOneDomain"] is False
    assert "short of a domain: decode" in report["conclusion"]
    # The reserved group itself is not pending: exit 0.
    r = diagnose(binary, "pending", "default/llm-prefill-0", "--from", str(FIX / "multi-role"))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "holds a reservation" in r.stdout


def test_yaml_files_and_explicit_files_read_the_same(binary, tmp_path):
    files = []
    for src in sorted((FIX / "two-zones").iterdir()):
        dst = tmp_path / (src.stem + ".yaml")
        dst.write_text(yaml.safe_dump(json.loads(src.read_text())))
        files += ["-f", str(dst)]
    from_json = diagnose_json(binary, "pending", "default/zone-trio", "--from", str(FIX / "two-zones"), rc=1)
    from_yaml = diagnose_json(binary, "pending", "default/zone-trio", *files, rc=1)
    assert from_json == from_yaml


@pytest.mark.parametrize("args", [
    [],
    ["chain"],                                              # no input and no cluster
    ["nonsense", "--from", "."],
    ["pending", "--from", str(FIX / "two-zones")],          # no WORKLOAD
    ["chain", "--from", str(FIX / "two-zones"), "--output", "yaml"],
    ["chain", "--from", str(FIX / "two-zones"), "--bogus"],
    ["chain", "--from", str(FIX / "two-zones"), "--kubeconfig", "/nonexistent"],
    ["chain", "--server", "https://127.0.0.1:1"],          # without token and CA files
    ["chain", "--from", "/nonexistent-dir"],
    ["pending", "default/absent", "--from", str(FIX / "two-zones")],
    ["pending", "a/x", "-n", "b", "--from", str(FIX / "two-zones")],
])
def test_usage_and_input_errors_exit_2(binary, args):
    r = diagnose(binary, *args)
    assert r.returncode == 2, (args, r.stdout, r.stderr)
    assert r.stdout == ""


def test_undecodable_file_exits_2_and_bad_quantity_warns(binary, tmp_path):
    d = tmp_path / "in"
    shutil.copytree(FIX / "two-zones", d)
    (d / "broken.json").write_text('{"kind": "List", "items": [')
    r = diagnose(binary, "chain", "--from", str(d))
    assert r.returncode == 2 and "broken.json" in r.stderr
    (d / "broken.json").unlink()
    nodes = json.loads((d / "nodes.json").read_text())
    nodes["items"][0]["status"]["allocatable"]["cpu"] = "2 cores"
    (d / "nodes.json").write_text(json.dumps(nodes))
    r = diagnose(binary, "pending", "default/zone-trio", "--from", str(d), "--output", "json")
    assert r.returncode == 1
    assert "items[0].status.allocatable[cpu]" in r.stderr
    [ps] = json.loads(r.stdout)["podSets"]
    assert ps["clusterFits"] == 3  # worker-a1 counts no CPU: nothing fits there


def test_unreachable_api_exits_2(binary, tmp_path):
    token = tmp_path / "token"
    token.write_text("not-a-real-token")
    key, ca = tmp_path / "ca.key", tmp_path / "ca.crt"
    run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", str(key),
         "-out", str(ca), "-days", "1", "-subj", "/CN=diagnose test CA"])
    r = diagnose(binary, "chain", "--server", "https://127.0.0.1:1", "--token-file", str(token), "--ca-file", str(ca))
    assert r.returncode == 2
    assert "127.0.0.1" in r.stderr
    assert "not-a-real-token" not in r.stderr + r.stdout

"""`topogate diagnose change` from the command line on the change-zone-rack fixture (the
runbook's zone -> zone + rack change): exit statuses (0 nothing stranded, 1 stranded, 2 input
errors), the table's summary and the JSON report."""

import json
import os
from pathlib import Path

import pytest

from conftest import run

FIX = Path(os.environ.get("TOPOGATE_SOURCE_DIR", Path(__file__).resolve().parents[2])) / "test" / "fixtures" / "diagnose"
CLUSTER = str(FIX / "change-zone-rack")
SOURCE = str(FIX / "change-zone-rack-source.json")
RACKS = str(FIX / "change-zone-rack-revision.yaml")
SAME = str(FIX / "change-zone-rack-same.yaml")


def change(binary, *args):
    return run([binary, "diagnose", "change", *args], check=False,
               env={k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST")})


def test_zone_split_strands_one_pair(binary):
    r = change(binary, "--from", CLUSTER, "--revision", RACKS, "--source", SOURCE)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "summary: evicted 2, admitted again 1, stranded 1" in r.stdout
    assert "PodSet main: admitted again (domain topology.kubernetes.io/zone=zone-a: worker-a1=1, worker-a2=1)" in r.stdout
    assert "stays Pending (largest new topology.kubernetes.io/zone domain holds 1 of 2 Pods)" in r.stdout
    j = json.loads(change(binary, "--from", CLUSTER, "--revision", RACKS, "--source", SOURCE,
                          "--output", "json").stdout)
    assert j["summary"] == {"evicted": 2, "admittedAgain": 1, "stranded": 1}
    assert [(w["workload"], w["evicted"], w["admittedAgain"]) for w in j["workloads"]] == [
        ("default/pair-1", True, True), ("default/pair-2", True, False)]
    assert j["clusterQueues"][0]["drained"] is True
    assert j["changedNodes"] == 3


def test_unchanged_profiles_exit_0(binary):
    r = change(binary, "--from", CLUSTER, "--revision", SAME)  # the only TopologySource read
    assert r.returncode == 0, r.stdout + r.stderr
    assert "summary: evicted 0, admitted again 0, stranded 0" in r.stdout
    assert "(flavor set unchanged)" in r.stdout


def test_invalid_revision_exits_2(binary, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(Path(SAME).read_text() + "  worker-z9:\n    topology.kubernetes.io/zone: zone-z\n")
    r = change(binary, "--from", CLUSTER, "--revision", str(bad), "--output", "json")
    assert r.returncode == 2, r.stdout + r.stderr
    j = json.loads(r.stdout)
    assert j["valid"] is False and j["errors"] and j["workloads"] == []


@pytest.mark.parametrize("args", [
    ["--from", CLUSTER],                                    # no --revision
    ["--from", CLUSTER, "--revision", "/nonexistent.yaml"],  # unreadable
    ["--from", CLUSTER, "--revision", SOURCE],              # not a snapshot
    ["--from", CLUSTER, "--revision", RACKS, "--source", RACKS],  # not a TopologySource
])
def test_usage_and_input_errors_exit_2(binary, args):
    r = change(binary, *args)
    assert r.returncode == 2, r.stdout + r.stderr


def test_revision_is_for_change_only(binary):
    r = run([binary, "diagnose", "chain", "--from", CLUSTER, "--revision", RACKS], check=False)
    assert r.returncode == 2
    assert "--revision and --source are for change" in r.stderr

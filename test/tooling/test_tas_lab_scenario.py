"""The TAS lab's scenario check (test/e2e/lab/scenario.py) for `resourceGroups`: the
scenarios of test/e2e/tas/kueue-decision read, and Kueue's rules on groups (a resource in
one group only, a flavor in one group only) held before anything is applied."""
import copy
import glob
import json
import os
import sys

ROOT = os.environ.get("TOPOGATE_SOURCE_DIR") or os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "test", "e2e"))

from lab import scenario  # noqa: E402

GROUPS = os.path.join(ROOT, "test", "e2e", "tas", "kueue-decision", "resource-groups.json")


def groups_scenario():
    with open(GROUPS) as f:
        return json.load(f)


def test_every_kueue_decision_scenario_reads():
    paths = sorted(glob.glob(os.path.join(ROOT, "test", "e2e", "tas", "kueue-decision", "*.json")))
    assert GROUPS in paths
    for p in paths:
        scenario.load(p)  # raises scenario.Invalid


def test_resource_groups_scenario_is_valid():
    assert scenario.check(groups_scenario()) == []


def test_a_resource_in_two_groups_is_refused():
    s = groups_scenario()
    s["resourceGroups"][1]["coveredResources"].append("cpu")
    assert "resourceGroups[1].coveredResources: cpu is in an earlier group" in scenario.check(s)


def test_a_flavor_in_two_groups_is_refused():
    s = groups_scenario()
    s["resourceGroups"][1]["flavors"].append({"profileOf": "n-a1"})
    assert "resourceGroups[1].flavors[2]: a flavor is in one group only" in scenario.check(s)
    s = groups_scenario()
    s["resourceGroups"][0]["flavors"].append(copy.deepcopy(s["resourceGroups"][1]["flavors"][0]))
    assert "resourceGroups[1].flavors[0]: a flavor is in one group only" in scenario.check(s)


def test_flavor_entries_are_checked():
    s = groups_scenario()
    s["resourceGroups"][1]["flavors"][1]["topologyOf"] = "no-such-node"
    assert "resourceGroups[1].flavors[1].topologyOf: a Node of nodes" in scenario.check(s)
    s = groups_scenario()
    s["resourceGroups"][1]["flavors"][0]["name"] = "gpustack-x"
    assert any(e.startswith("resourceGroups[1].flavors[0]: {name") for e in scenario.check(s))
    s = groups_scenario()
    s["coveredResourcesOnly"] = ["cpu"]
    assert "resourceGroups: not with coveredResourcesOnly or change" in scenario.check(s)


def test_a_flavors_own_topology_is_checked():
    s = groups_scenario()
    flavor = s["resourceGroups"][1]["flavors"][0]
    flavor["topology"] = ["topology.kubernetes.io/zone"]
    assert scenario.check(s) == []
    flavor["topology"] = []
    assert "resourceGroups[1].flavors[0].topology: 1 to 16 label keys, not with topologyOf" in scenario.check(s)
    flavor["topology"] = ["not a key"]
    assert "resourceGroups[1].flavors[0].topology: 1 to 16 label keys, not with topologyOf" in scenario.check(s)
    s = groups_scenario()
    s["resourceGroups"][1]["flavors"][1]["topology"] = ["topology.kubernetes.io/zone"]  # beside topologyOf
    assert "resourceGroups[1].flavors[1].topology: 1 to 16 label keys, not with topologyOf" in scenario.check(s)

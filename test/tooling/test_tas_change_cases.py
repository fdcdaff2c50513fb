"""The differential's change cases without a lab: test/e2e/tas/generate.py's change cases
(seeded, valid scenarios, each a change of the kinds it names) and
test/e2e/tas/change_report.py's verdict on results written here (agreement counted per
Workload, a failed case, an unclassified disagreement, the preemption class, the floor)."""
import argparse
import json
import os
import sys

import pytest

ROOT = os.environ.get("TOPOGATE_SOURCE_DIR") or os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "test", "e2e", "tas"))
sys.path.insert(0, os.path.join(ROOT, "test", "e2e"))

import change_report  # noqa: E402
import generate  # noqa: E402
from lab import scenario  # noqa: E402


def test_change_cases_are_seeded_and_apart_from_the_pending_cases():
    assert generate.change_case(2026, 5) == generate.change_case(2026, 5)
    assert generate.change_case(2026, 5) != generate.change_case(2026, 6)
    assert generate.change_case(2026, 5) != generate.change_case(7, 5)
    # The pending cases do not draw from the change streams: the same case either way.
    before = json.dumps(generate.case(2026, 3), sort_keys=True)
    generate.change_case(2026, 3)
    assert json.dumps(generate.case(2026, 3), sort_keys=True) == before


def test_change_cases_are_valid_changes_of_the_kinds_they_name():
    kinds_seen = set()
    for i in range(120):
        c = generate.change_case(2026, i)
        assert scenario.check(c) == [], (i, scenario.check(c))
        t = scenario.changed(c)
        before = {n["name"]: n["labels"] for n in c["nodes"]}
        after = {n["name"]: n["labels"] for n in t["nodes"]}
        old, new = c["topologySource"]["levels"], c["change"]["topologySource"]["levels"]
        kinds = c["change"]["kinds"]
        kinds_seen.update(kinds)
        assert set(kinds) <= set(generate.CHANGE_KINDS)
        if "level-added" in kinds and "level-removed" not in kinds:
            assert set(old) < set(new)
        if "level-removed" in kinds and "level-added" not in kinds:
            assert set(new) < set(old)
        if "nodes-dropped" in kinds:
            assert any(not labels for labels in after.values())
        if kinds in (["capacity-shifted"], ["nodes-moved"]):
            assert old == new and before != after
        for w in c["workloads"]:
            assert set(kinds) <= set(w["traits"])
            assert ("combined" in w["traits"]) == (len(kinds) > 1)
    assert kinds_seen == set(generate.CHANGE_KINDS)


def write_case(d, i, rc, predicted, observed, notes=()):
    case = {"name": f"change-1-{i}", "workloads": [{"name": n, "traits": ["level-added"]} for n in ("a", "b")]}
    with open(os.path.join(d, "cases", f"change-1-{i}.json"), "w") as f:
        json.dump(case, f)
    base = os.path.join(d, "results", f"change-{i}")
    with open(base + ".rc", "w") as f:
        f.write(f"{rc}\n")
    open(base + ".err", "w").close()
    with open(base + ".jsonl", "w") as f:
        f.write(json.dumps({"phase": "prediction", "notes": list(notes)}) + "\n")
        f.write(json.dumps({"phase": "agreement", "predicted": predicted, "observed": observed}) + "\n")


def sets(again=(), stranded=()):
    ws = [f"default/{n}" for n in (*again, *stranded)]
    return {"evicted": ws, "admittedAgain": [f"default/{n}" for n in again],
            "stranded": [f"default/{n}" for n in stranded]}


@pytest.fixture
def results(tmp_path):
    os.makedirs(tmp_path / "cases")
    os.makedirs(tmp_path / "results")
    return str(tmp_path)


def verdict(d, changes, floor=0.95):
    return change_report.report(argparse.Namespace(results=os.path.join(d, "results"),
                                                   cases_dir=os.path.join(d, "cases"), seed="1",
                                                   changes=changes, min_agreed=floor))


def test_agreeing_cases_hold(results, capsys):
    write_case(results, 0, 0, sets(again=["a"], stranded=["b"]), sets(again=["a"], stranded=["b"]))
    write_case(results, 1, 0, sets(), sets())  # nothing drained: both not evicted
    assert verdict(results, 2)
    out = capsys.readouterr().out
    assert "| agreed | 4 (floor 95%: 4) |" in out
    assert "| level-added | 4 | 2 / 2 | 1 / 1 | 1 / 1 | 4 | - |" in out


def test_a_failed_case_or_a_missing_one_fails(results, capsys):
    write_case(results, 0, 3, sets(again=["a"]), sets(again=["a"]))
    assert not verdict(results, 1)
    assert "FAIL change case 0: tas-lab.sh change exit 3" in capsys.readouterr().out
    write_case(results, 0, 0, sets(again=["a"]), sets(again=["a"]))
    os.remove(os.path.join(results, "results", "change-0.rc"))
    assert not verdict(results, 1)


def test_an_unclassified_disagreement_fails_whatever_the_floor(results, capsys):
    write_case(results, 0, 0, sets(again=["a", "b"]), sets(again=["a"], stranded=["b"]))
    assert not verdict(results, 1, floor=0.0)
    out = capsys.readouterr().out
    assert "predicted admitted again, observed stranded -> UNCLASSIFIED" in out
    assert "| disagreement: unclassified | 1 |" in out


def test_a_readmission_by_preemption_is_its_class_only_with_the_note(results, capsys):
    note = "default/b: Kueue would preempt default/a for it; counted as staying Pending"
    write_case(results, 0, 0, sets(again=["a"], stranded=["b"]), sets(again=["a", "b"]), notes=[note])
    assert verdict(results, 1, floor=0.5)
    assert f"| disagreement: {change_report.PREEMPTION} | 1 |" in capsys.readouterr().out
    # Below the floor with the same disagreement: fails.
    assert not verdict(results, 1, floor=0.9)
    # Without the note (or the other way round), no class.
    write_case(results, 0, 0, sets(again=["a"], stranded=["b"]), sets(again=["a", "b"]))
    assert not verdict(results, 1, floor=0.0)
    write_case(results, 0, 0, sets(again=["a", "b"]), sets(again=["a"], stranded=["b"]), notes=[note])
    assert not verdict(results, 1, floor=0.0)


def after_line(name, decision, message, podsets):
    return {"phase": "after-change", "workload": f"default/{name}", "kueue": {"decision": decision, "message": message},
            "diagnose": {"podSets": [{"name": p} for p in podsets]}}


def test_head_of_line_needs_a_stale_message_and_a_pending_multi_podset_workload_ahead():
    inactive = "ClusterQueue gpustack is inactive"

    def lines(b_podsets=("main", "aux"), a_message=inactive, order=("b", "a")):
        return [{"phase": "prediction", "workloads": {f"default/{n}": {} for n in order}},
                after_line("a", "pending", a_message, ["main"]),
                after_line("b", "pending", "couldn't assign flavors to pod set aux: ...", list(b_podsets))]
    c = change_report
    assert c.classify("default/a", c.AGAIN, c.STRANDED, lines()) == c.HEAD_OF_LINE
    # Kueue tried it again (its own message): not this class.
    assert c.classify("default/a", c.AGAIN, c.STRANDED, lines(a_message="couldn't assign flavors")) is None
    # The Workload ahead has one PodSet, or it comes after in Kueue's order.
    assert c.classify("default/a", c.AGAIN, c.STRANDED, lines(b_podsets=["main"])) is None
    assert c.classify("default/a", c.AGAIN, c.STRANDED, lines(order=("a", "b"))) is None
    # Only for predicted admitted again, observed stranded.
    assert c.classify("default/a", c.STRANDED, c.AGAIN, lines()) is None

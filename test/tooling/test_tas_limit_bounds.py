"""generate.py's `limitrange-bounds` trait without a lab: drawn from a stream of its own (a
case without it is the case the generator wrote before the trait), a LimitRange max or min
taken from the case's own PodSets, so that PodSets fall on both sides of each bound."""
import json
import os
import sys

import pytest

ROOT = os.environ.get("TOPOGATE_SOURCE_DIR") or os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "test", "e2e", "tas"))
sys.path.insert(0, os.path.join(ROOT, "test", "e2e"))

import generate  # noqa: E402
from lab import scenario  # noqa: E402

TRAIT = "limitrange-bounds"


def without_trait(c):
    """C as it would be without add_limit_bounds."""
    c = json.loads(json.dumps(c))
    lrs = [lr for lr in c.get("limitRanges") or [] if lr["name"] != "bounds"]
    if lrs:
        c["limitRanges"] = lrs
    else:
        c.pop("limitRanges", None)
    for w in c["workloads"]:
        w["traits"] = [t for t in w["traits"] if t != TRAIT]
    return c


def test_the_trait_changes_only_the_cases_it_is_drawn_in(monkeypatch):
    drawn = [generate.case(2026, i) for i in range(80)]
    monkeypatch.setattr(generate, "add_limit_bounds", lambda c, rnd: None)
    plain = [generate.case(2026, i) for i in range(80)]
    hit = 0
    for c, p in zip(drawn, plain):
        has = any(TRAIT in w["traits"] for w in c["workloads"])
        hit += has
        assert without_trait(c) == p
        assert (c == p) == (not has)
    assert 0 < hit < 80


def values(p, res):
    """P's own RES (CPU in millicores, memory in Gi): requests, else limits; None when neither
    (a request the LimitRange's defaults give)."""
    q = (p.get("requests") or {}).get(res) or (p.get("limits") or {}).get(res)
    if q is None:
        return None
    return generate.milli(q) if res == "cpu" else int(q[:-2])


@pytest.mark.parametrize("seed", [2026, 7])
def test_bounds_are_the_podsets_own_values_with_podsets_on_both_sides(seed):
    above = at_or_below = below = at_or_above = 0
    for i in range(200):
        c = generate.case(seed, i)
        assert scenario.check(c) == [], (i, scenario.check(c))
        lr = [x for x in c.get("limitRanges") or [] if x["name"] == "bounds"]
        if not lr:
            continue
        (item,) = lr[0]["limits"]
        assert item["type"] in ("Container", "Pod") and ("max" in item or "min" in item)
        firsts = [w["podSets"][0] for w in c["workloads"]]
        if "max" in item:
            bound = generate.milli(item["max"]["cpu"])
            own = [v for v in (values(p, "cpu") for p in firsts) if v is not None]
            assert bound in own
            above += sum(v > bound for v in own)
            at_or_below += sum(v <= bound for v in own)
        if "min" in item:
            bound = int(item["min"]["memory"][:-2])
            assert bound in [values(p, "memory") for p in firsts]
            below += sum(values(p, "memory") < bound for p in firsts)
            at_or_above += sum(values(p, "memory") >= bound for p in firsts)
    assert above and at_or_below and below and at_or_above

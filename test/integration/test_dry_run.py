"""PUT /snapshots/{name}?dryRun=All over HTTPS, against the real binary: the push's answer
(200 with the impact, 409 past maxProfileChanges, 422 invalid, 412 If-Match) without the
push: the served revision, the history, the store's files and the push metrics are exactly as
before. A dryRun value other than All is a 400."""

import hashlib
import os
from pathlib import Path

from test_impact import NODES, get, push_config, put, served, snapshot
from test_metrics import metrics_text, sample


def store_files(d: Path):
    """Every file under the store directory with its content's digest and mtime."""
    out = {}
    for root, _, files in os.walk(d):
        for f in files:
            p = Path(root) / f
            out[str(p.relative_to(d))] = (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns)
    return out


def counters(srv, pki):
    text = metrics_text(srv, pki)
    return tuple(sample(text, name, inventory="dc", trigger="push") for name in (
        "topogate_inventory_impact_refusals_total", "topogate_inventory_profile_changes_total"))


def test_dry_run_answers_without_storing(make_server, pki):
    srv = make_server(lambda d: push_config(pki, d, 2))
    store = Path(srv.dir) / "store"
    code, body, err = put(srv, pki, snapshot("zone-only"))
    assert code == 201, (body, err)
    baseline_etag = body["etag"]
    history = get(srv, pki, "/snapshots/dc/history")["items"]
    files = store_files(store)
    assert files  # the first push is in the store
    metrics = counters(srv, pki)

    def nothing_changed():
        assert served(srv, pki) == "zone-only"
        assert get(srv, pki, "/snapshots/dc/history")["items"] == history
        assert store_files(store) == files
        assert counters(srv, pki) == metrics

    # Past maxProfileChanges: the 409 a push gets, with the impact and the way to accept it.
    code, body, err = put(srv, pki, snapshot("zone-rack", NODES), url_suffix="?dryRun=All")
    assert code == 409, (body, err)
    assert body["reason"] == "Conflict" and body["impact"]["profileChanges"] == 4
    assert body["acceptImpact"]["value"] == baseline_etag
    nothing_changed()

    # Accepted: 200 with what the push would publish and its impact, still nothing stored.
    code, body, err = put(srv, pki, snapshot("zone-rack", NODES), f"Topogate-Accept-Impact: {baseline_etag}",
                          url_suffix="?dryRun=All")
    assert code == 200, (body, err)
    assert body["dryRun"] == "All" and body["revision"] == "zone-rack"
    assert body["etag"] != baseline_etag
    assert body["impact"]["profileChanges"] == 4 and body["impact"]["flavorChanges"] == 2
    nothing_changed()

    # Within the limit, no header needed; If-Match against the served ETag.
    code, body, err = put(srv, pki, snapshot("zone-only-2"), f"If-Match: {baseline_etag}",
                          url_suffix="?dryRun=All")
    assert code == 200, (body, err)
    assert body["impact"]["profileChanges"] == 0
    code, body, err = put(srv, pki, snapshot("zone-only-2"), 'If-Match: "' + "0" * 64 + '"', url_suffix="?dryRun=All")
    assert code == 412, (body, err)
    nothing_changed()

    # Invalid: the 422 a push gets.
    code, body, err = put(srv, pki, "apiVersion: topology.gpustack.ai/v1alpha1\nrevision: x\nnodes: 3\n",
                          url_suffix="?dryRun=All")
    assert code == 422, (body, err)
    nothing_changed()

    # Only All is a dry run; anything else is refused, not taken as a push.
    code, body, err = put(srv, pki, snapshot("zone-rack", NODES), f"Topogate-Accept-Impact: {baseline_etag}",
                          url_suffix="?dryRun=true")
    assert code == 400, (body, err)
    nothing_changed()

    # The same push without dryRun is published: the dry run's answer was the push's.
    code, body, err = put(srv, pki, snapshot("zone-rack", NODES), f"Topogate-Accept-Impact: {baseline_etag}")
    assert code == 200, (body, err)
    assert served(srv, pki) == "zone-rack"

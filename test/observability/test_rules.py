"""The chart's alerting rules (helm/topogate/files/alerts.yaml) and dashboard
(helm/topogate/files/dashboard.json), checked without a cluster:

- promtool check rules on the rules rendered with the default values and with others;
- promtool test rules on alerts_test.yaml: every alert fires on its inputs and stays silent on
  the other side of its threshold (both kinds of case are required for every alert), with its
  labels and its annotations as Prometheus renders them;
- every alert has a summary, a description naming what it is about, and a runbook_url into the
  section of docs/alerts.md about it;
- the dashboard is a Grafana JSON model whose panels all query the datasource variable.
"""

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

import render_rules

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
ALERTS_DOC = REPO / "docs" / "alerts.md"
DASHBOARD = REPO / "helm" / "topogate" / "files" / "dashboard.json"
BASE_URL = render_rules.chart_values()["prometheusRule"]["runbookBaseUrl"]

pytestmark = pytest.mark.skipif(shutil.which("promtool") is None,
                                reason="promtool (Debian package prometheus) is not installed")

# What each alert's description must name, as a label of the alert.
NAMES = {
    "TopogateInventoryStale": "inventory",
    "TopogateInventoryNearMaxAge": "inventory",
    "TopogateInventoryRejectingRevisions": "rule",
    "TopogateInventoryNearSizeLimit": "inventory",
    "TopogateProfileChangeRefused": "inventory",
    "TopogateProfileChangesAccepted": "inventory",
    "TopogateInventoryNotReady": "inventory",
    "TopogateStoreUnavailable": "inventory",
    "TopogateStoreViewBehind": "inventory",
    "TopogateNodesDrifted": "inventory",
    "TopogateAdmissionErrors": "kind",
    "TopogateAdmissionSlow": "route",
    "TopogateCertificateExpiringSoon": "certificate",
    "TopogateNoReadyReplica": None,  # the release's namespace and Deployment, written in
    "TopogateAuditViolations": "rule",
    "TopogateAuditFailing": None,
    "TopogateOwnershipConflict": None,
    "TopogateLogLinesDropped": "instance",
}


def promtool(*args, cwd=None):
    p = subprocess.run(["promtool", *args], capture_output=True, text=True, cwd=cwd, timeout=120)
    return p.returncode, p.stdout + p.stderr


def alerts(text):
    return [r for g in yaml.safe_load(text)["groups"] for r in g["rules"] if "alert" in r]


@pytest.fixture(scope="module")
def rules_text():
    return render_rules.render()


VALUE_FORMS = re.compile(r"\{\{ \$value(?: \| (humanize|humanizePercentage|humanizeDuration))? \}\}")
LABEL_FORM = re.compile(r"\{\{ \$labels\.([a-z_]+) \}\}")


def fill(template, labels, value, where):
    """An annotation with $labels and $value as the case expects them. Only the forms the
    rules use are known; anything else in braces is an error of the test or of the rules."""
    def label(m):
        if m.group(1) not in labels:
            raise AssertionError(f"{where}: the annotation uses $labels.{m.group(1)}, which the alert does not have")
        return labels[m.group(1)]

    out = LABEL_FORM.sub(label, template)
    if VALUE_FORMS.search(out):
        if value is None:
            raise AssertionError(f"{where}: the annotation prints $value; give the case a value")
        out = VALUE_FORMS.sub(lambda _: value, out)
    if "{{" in out:
        raise AssertionError(f"{where}: unknown template in {template!r}")
    return out


def promtool_tests(spec, rules):
    """alerts_test.yaml as promtool reads it: each expected alert gets exp_annotations."""
    by_name = {r["alert"]: r for r in rules}
    for t in spec["tests"]:
        for case in t.get("alert_rule_test", []):
            rule = by_name[case["alertname"]]
            for exp in case.get("exp_alerts") or []:
                labels = {k: str(v) for k, v in exp["exp_labels"].items()}
                labels.setdefault("alertname", case["alertname"])
                value = exp.pop("value", None)
                where = f"{case['alertname']} at {case['eval_time']}"
                exp["exp_annotations"] = {k: fill(v, labels, value, where) for k, v in rule["annotations"].items()}
    return spec


def test_promtool_check_rules(rules_text, tmp_path):
    (tmp_path / "rules.yaml").write_text(rules_text)
    code, out = promtool("check", "rules", str(tmp_path / "rules.yaml"))
    assert code == 0, out
    assert f"SUCCESS: {len(alerts(rules_text))} rules found" in out, out


def test_promtool_test_rules(rules_text, tmp_path):
    (tmp_path / "rules.yaml").write_text(rules_text)
    spec = yaml.safe_load((HERE / "alerts_test.yaml").read_text())
    (tmp_path / "alerts_test.yaml").write_text(yaml.safe_dump(promtool_tests(spec, alerts(rules_text)), sort_keys=False))
    code, out = promtool("test", "rules", "alerts_test.yaml", cwd=tmp_path)
    assert code == 0, out
    assert "SUCCESS" in out, out


def test_every_alert_has_a_firing_and_a_silent_case(rules_text):
    spec = yaml.safe_load((HERE / "alerts_test.yaml").read_text())
    fires, silent = set(), set()
    for t in spec["tests"]:
        for case in t.get("alert_rule_test", []):
            (fires if case.get("exp_alerts") else silent).add(case["alertname"])
    names = {a["alert"] for a in alerts(rules_text)}
    assert names - fires == set(), "alerts no test makes fire"
    assert names - silent == set(), "alerts without a case where they must not fire"
    assert (fires | silent) - names == set(), "tests of alerts that do not exist"


def test_annotations_and_runbooks(rules_text):
    doc = ALERTS_DOC.read_text()
    headings = set(re.findall(r"^## (\S+)$", doc, re.M))
    rules = alerts(rules_text)
    assert {r["alert"] for r in rules} == set(NAMES), "NAMES lists every alert"
    for r in rules:
        a, name = r["annotations"], r["alert"]
        assert set(a) == {"summary", "description", "runbook_url"}, name
        assert a["runbook_url"] == f"{BASE_URL}#{name.lower()}", name
        assert name in headings, f"docs/alerts.md has no section '## {name}'"
        assert r["labels"]["severity"] in ("warning", "critical"), name
        if NAMES[name]:
            assert "{{ $labels." + NAMES[name] + " }}" in a["description"], name
        # The next step: every description says what to check or do.
        assert re.search(r"\b(check|read|review|run|look at|publish|fix|push|add|replace|set)\b", a["description"],
                         re.I), name
    # Every section of the document is about an alert that exists.
    assert headings == set(NAMES)


def test_thresholds_come_from_values():
    text = render_rules.render({
        "webhook.timeoutSeconds": 20,
        "prometheusRule.thresholds.staleFraction": 0.5,
        "prometheusRule.thresholds.revisionSizeFraction": 0.75,
        "prometheusRule.thresholds.admissionLatencyFraction": 0.75,
        "prometheusRule.thresholds.certificateExpiryDays": 30,
        "prometheusRule.thresholds.profileChangesPerHour": 3,
        "prometheusRule.thresholds.admissionErrorRatio": 0.2,
        "prometheusRule.thresholds.auditMaxAgeMinutes": 90,
        "prometheusRule.runbookBaseUrl": "https://docs.example/alerts",
        "prometheusRule.job": "scraped-as",
    }, namespace="ops", fullname="tg")
    by = {r["alert"]: r for r in alerts(text)}
    assert by["TopogateAdmissionSlow"]["expr"].rstrip().endswith("> 20 * 0.75")
    assert "more than 0.75 of the webhook's timeoutSeconds (20s)" in by["TopogateAdmissionSlow"]["annotations"]["description"]
    assert ") > 0.5 <= 1" in by["TopogateInventoryNearMaxAge"]["expr"]
    assert by["TopogateInventoryNearSizeLimit"]["expr"].rstrip().endswith(") > 0.75")
    assert "(rule S10; alert above 0.75)" in by["TopogateInventoryNearSizeLimit"]["annotations"]["description"]
    assert "< 30 * 86400" in by["TopogateCertificateExpiringSoon"]["expr"]
    assert by["TopogateProfileChangesAccepted"]["expr"].rstrip().endswith("> 3")
    assert by["TopogateAdmissionErrors"]["expr"].rstrip().endswith("> 0.2")
    assert "> 90 * 60" in by["TopogateAuditFailing"]["expr"]
    assert 'up{namespace="ops", job="scraped-as"}' in by["TopogateNoReadyReplica"]["expr"]
    assert 'deployment="tg"' in by["TopogateNoReadyReplica"]["expr"]
    assert by["TopogateInventoryStale"]["annotations"]["runbook_url"] == "https://docs.example/alerts#topogateinventorystale"
    # Still valid rules.
    assert "${" not in text


def test_a_placeholder_without_a_value_is_an_error():
    text = (render_rules.CHART / "files" / "alerts.yaml").read_text()
    with pytest.raises(ValueError, match="noSuchValue"):
        render_rules.render(source=text + "# ${noSuchValue}\n")


def panels(dashboard):
    for p in dashboard["panels"]:
        yield p
        yield from p.get("panels", [])


def test_dashboard_is_a_grafana_model_on_the_datasource_variable():
    d = json.loads(DASHBOARD.read_text())
    assert d["uid"] and d["title"]
    variables = {v["name"]: v for v in d["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    ids = [p["id"] for p in panels(d)]
    assert len(ids) == len(set(ids)), "panel ids are unique"
    queried = [p for p in panels(d) if p["type"] != "row"]
    assert queried
    for p in queried:
        assert p["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, p["title"]
        assert p["targets"], p["title"]
        for t in p["targets"]:
            assert t["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, p["title"]
            assert t["expr"].strip(), p["title"]
    titles = " ".join(p["title"] for p in panels(d) if p["type"] == "row")
    for section in ("Inventories", "Admission", "TLS", "HTTP"):
        assert section in titles

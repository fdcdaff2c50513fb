#!/usr/bin/env python3
"""Renders helm/topogate/files/alerts.yaml into a Prometheus rules file, filling its
${name} placeholders exactly as templates/prometheusrule.yaml does: from
prometheusRule.thresholds, prometheusRule.runbookBaseUrl, webhook.timeoutSeconds, the
release namespace, the Deployment name (the chart's full name) and the scrape job
(prometheusRule.job, else the full name). The values are the chart's values.yaml with
overrides, so the promtool tests need no helm; test/e2e/chart-test.sh checks that helm
renders the same rules.

Usage: render_rules.py [--set a.b=VALUE ...] [--namespace NS] [--fullname NAME] [-o FILE]
"""

import argparse
import copy
import re
import sys
from pathlib import Path

import yaml

CHART = Path(__file__).resolve().parents[2] / "helm" / "topogate"
PLACEHOLDER = re.compile(r"\$\{([A-Za-z][A-Za-z0-9]*)\}")


def chart_values(overrides=None):
    """values.yaml with `overrides` ({"a.b": value}) applied."""
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    values = copy.deepcopy(values)
    for path, value in (overrides or {}).items():
        node = values
        keys = path.split(".")
        for k in keys[:-1]:
            node = node.setdefault(k, {})
        node[keys[-1]] = value
    return values


def as_text(v):
    """A value as Helm's toString writes it: numbers without a fractional part lose it."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)


def parameters(values, namespace="gpustack-system", fullname="topogate"):
    rule = values["prometheusRule"]
    params = {
        "runbookBaseUrl": rule["runbookBaseUrl"],
        "webhookTimeoutSeconds": values["webhook"]["timeoutSeconds"],
        "namespace": namespace,
        "deployment": fullname,
        "job": rule.get("job") or fullname,
    }
    params.update(rule["thresholds"])
    return params


def render(overrides=None, namespace="gpustack-system", fullname="topogate", source=None):
    """The rules file text for the chart's values with `overrides` (`source`: the text of
    files/alerts.yaml, read from the chart when None)."""
    params = parameters(chart_values(overrides), namespace, fullname)
    text = source if source is not None else (CHART / "files" / "alerts.yaml").read_text()
    for name, value in params.items():
        text = text.replace("${" + name + "}", as_text(value))
    left = sorted(set(PLACEHOLDER.findall(text)))
    if left:
        raise ValueError(f"alerts.yaml: no value for {', '.join(left)}")
    return text


def parse_value(s):
    return yaml.safe_load(s)


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--set", action="append", default=[], metavar="PATH=VALUE")
    ap.add_argument("--namespace", default="gpustack-system")
    ap.add_argument("--fullname", default="topogate")
    ap.add_argument("-o", "--output")
    a = ap.parse_args(argv)
    overrides = {}
    for s in a.set:
        path, sep, value = s.partition("=")
        if not sep:
            ap.error(f"--set {s}: expected PATH=VALUE")
        overrides[path] = parse_value(value)
    try:
        text = render(overrides, a.namespace, a.fullname)
    except ValueError as e:
        print(e, file=sys.stderr)
        return 1
    if a.output:
        Path(a.output).write_text(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

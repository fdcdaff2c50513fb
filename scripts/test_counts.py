#!/usr/bin/env python3
"""Counts one CTest run from the runners' own reports, for scripts/test.sh.

  test_counts.py --stage NAME --junit CTEST.xml [--pytest-dir DIR] [--allow FILE]
                 [--skips OUT] [--failures OUT]

Reads CTest's JUnit output (ctest --output-junit). A CTest test that runs a pytest file
is replaced by the cases of that file's own JUnit report (DIR/<ctest name>.xml, written by
pytest --junitxml), so a pytest case that skipped is a skip, not part of a pass. Prints
one line, "PASSED FAILED SKIPPED", and appends one line per skip to OUT: the stage, the
test, whether the allow-list (FILE) expects it, and the reason the runner gave. With
--failures, appends each failed test's name and the last lines of its output to that file,
so that the end of a long run says what failed and why without its whole log.

Exit status: 0; 3 when CI=true and a skip is not on the allow-list; 4 when the run holds
no test at all (CTest's "No tests were found!!!" exits 0).

The allow-list holds skips expected even in CI, one a line:
  TEST-PATTERN | STAGES | REASON
TEST-PATTERN is an fnmatch pattern of the test's name (a pytest case is
"<ctest name>::<case>"), STAGES a comma-separated list of stage names or "*".
"""
import argparse
import fnmatch
import os
import re
import sys
import xml.etree.ElementTree as ET


def load_allow(path):
    rules = []
    if not path:
        return rules
    for line in open(path, encoding="utf-8"):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        parts = [p.strip() for p in line.split("|", 2)]
        if len(parts) != 3 or not all(parts):
            sys.exit(f"{path}: not 'TEST-PATTERN | STAGES | REASON': {line}")
        rules.append((parts[0], [s.strip() for s in parts[1].split(",")], parts[2]))
    return rules


def expected(rules, stage, name):
    for pattern, stages, reason in rules:
        if fnmatch.fnmatchcase(name, pattern) and ("*" in stages or stage in stages):
            return reason
    return None


def text_of(case):
    out = case.find("system-out")
    return out.text or "" if out is not None else ""


def skip_reason(case):
    """What the runner said about the skip: GoogleTest's message after "Skipped", pytest's
    reason, or the last line a test that exited with its skip code printed."""
    sk = case.find("skipped")
    message = sk.get("message", "") if sk is not None else ""
    # CTest's own messages (SKIP_REGULAR_EXPRESSION_MATCHED, SKIP_RETURN_CODE=77) say how
    # the skip was seen, not why: the test's output says that.
    if message and not message.startswith("SKIP_"):
        return message
    out = text_of(case)
    m = re.search(r": Skipped\n(.+)", out)
    if m:
        return m.group(1).strip()
    lines = [l for l in out.splitlines() if l.strip()]
    return lines[-1].strip() if lines else "no reason given"


FAILURE_LINES = 25


def failure_text(case):
    """The end of what a failed test printed (pytest: its failure message and output)."""
    parts = []
    for tag in ("failure", "error"):
        el = case.find(tag)
        if el is not None:
            parts.append(el.get("message", ""))
            parts.append(el.text or "")
    parts.append(text_of(case))
    lines = [l.rstrip() for l in "\n".join(parts).splitlines() if l.strip()]
    if len(lines) > FAILURE_LINES:
        lines = [f"[{len(lines) - FAILURE_LINES} lines before]"] + lines[-FAILURE_LINES:]
    return "\n".join("    " + l for l in lines) if lines else "    (no output)"


def outcome(case):
    """passed, failed or skipped for a CTest or pytest JUnit testcase."""
    status = case.get("status")
    if case.find("failure") is not None or case.find("error") is not None or status == "fail":
        return "failed"
    if case.find("skipped") is not None or status in ("notrun", "disabled"):
        return "skipped"
    return "passed"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--stage", required=True)
    ap.add_argument("--junit", required=True)
    ap.add_argument("--pytest-dir")
    ap.add_argument("--allow")
    ap.add_argument("--skips")
    ap.add_argument("--failures")
    a = ap.parse_args()
    rules = load_allow(a.allow)
    try:
        cases = ET.parse(a.junit).getroot().iter("testcase")
        cases = list(cases)
    except (OSError, ET.ParseError) as e:
        print(f"test_counts.py: no CTest report: {e}", file=sys.stderr)
        print("0 0 0")
        return 4
    counts = {"passed": 0, "failed": 0, "skipped": 0}
    skips = []
    failures = []
    for case in cases:
        name = case.get("name")
        report = os.path.join(a.pytest_dir, name + ".xml") if a.pytest_dir else None
        ctest_result = outcome(case)
        if report and os.path.exists(report):
            sub = list(ET.parse(report).getroot().iter("testcase"))
            sub_failed = 0
            for c in sub:
                r = outcome(c)
                counts[r] += 1
                sub_failed += r == "failed"
                if r == "failed":
                    failures.append((f"{name}::{c.get('name')}", failure_text(c)))
                if r == "skipped":
                    skips.append((f"{name}::{c.get('name')}", skip_reason(c)))
            # The file failed outside its cases (a sanitizer report at teardown, a timeout,
            # no case collected): one failure of its own.
            if ctest_result == "failed" and sub_failed == 0:
                counts["failed"] += 1
                failures.append((name, failure_text(case)))
            continue
        counts[ctest_result] += 1
        if ctest_result == "failed":
            failures.append((name, failure_text(case)))
        if ctest_result == "skipped":
            skips.append((name, skip_reason(case)))
    ci = os.environ.get("CI") == "true"
    unexpected = 0
    lines = []
    for name, reason in skips:
        why = expected(rules, a.stage, name)
        if why:
            lines.append(f"{a.stage:<16} {name}: expected: {why}")
        else:
            unexpected += 1
            tag = "UNEXPECTED in CI" if ci else "skipped (must run in CI)"
            lines.append(f"{a.stage:<16} {name}: {tag}: {reason}")
    if a.skips and lines:
        with open(a.skips, "a", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")
    if a.failures and failures:
        with open(a.failures, "a", encoding="utf-8") as f:
            for name, text in failures:
                f.write(f"--- {a.stage}: {name}\n{text}\n")
    print(counts["passed"], counts["failed"], counts["skipped"])
    if not cases:
        return 4
    return 3 if ci and unexpected else 0


if __name__ == "__main__":
    sys.exit(main())

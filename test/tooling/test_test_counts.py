"""scripts/test_counts.py, the counter behind every row of the test command's summary:
CTest and pytest JUnit reports in, "PASSED FAILED SKIPPED" out, skips judged against the
allow-list, failures written with the end of their output."""
import os
import subprocess
import sys
import textwrap

import pytest

SCRIPT = os.path.join(os.environ.get("TOPOGATE_SOURCE_DIR", "../.."), "scripts", "test_counts.py")


def ctest_report(path, cases):
    """cases: (name, status, output) with CTest's statuses: run, fail, notrun."""
    body = "".join(
        f'<testcase name="{n}" classname="{n}" time="0.1" status="{s}">'
        + ('<failure message="Failed"/>' if s == "fail" else "")
        + ('<skipped message="SKIP_REGULAR_EXPRESSION_MATCHED"/>' if s == "notrun" else "")
        + f"<system-out>{o}</system-out></testcase>"
        for n, s, o in cases)
    path.write_text(f'<?xml version="1.0"?><testsuite tests="{len(cases)}">{body}</testsuite>')


def pytest_report(path, cases):
    """cases: (name, outcome, text) with outcome passed, failed or skipped."""
    def one(n, r, t):
        inner = {"failed": f'<failure message="{t}">{t}</failure>',
                 "skipped": f'<skipped message="{t}"/>'}.get(r, "")
        return f'<testcase classname="m" name="{n}" time="0.1">{inner}</testcase>'
    path.write_text('<?xml version="1.0"?><testsuites><testsuite>'
                    + "".join(one(*c) for c in cases) + "</testsuite></testsuites>")


def run(tmp_path, *extra, ci=False):
    env = dict(os.environ)
    env.pop("CI", None)
    if ci:
        env["CI"] = "true"
    skips, failures = tmp_path / "skips.txt", tmp_path / "failures.txt"
    p = subprocess.run([sys.executable, SCRIPT, "--stage", "dev", "--junit", str(tmp_path / "ctest.xml"),
                        "--pytest-dir", str(tmp_path / "py"), "--skips", str(skips),
                        "--failures", str(failures), *extra],
                       capture_output=True, text=True, env=env, timeout=60)
    read = lambda f: f.read_text() if f.exists() else ""
    return p.returncode, p.stdout.strip(), read(skips), read(failures)


@pytest.fixture
def reports(tmp_path):
    (tmp_path / "py").mkdir()
    return tmp_path


def test_counts_each_outcome_and_replaces_a_pytest_file_by_its_cases(reports):
    ctest_report(reports / "ctest.xml", [
        ("Core.A", "run", "ok"), ("Core.B", "fail", "expected 1, got 2"),
        ("Core.C", "notrun", "[  SKIPPED ] no clang-format"), ("integration.test_x", "fail", "")])
    pytest_report(reports / "py" / "integration.test_x.xml", [
        ("test_one", "passed", ""), ("test_two", "failed", "assert 3 == 4"),
        ("test_three", "skipped", "needs promtool")])
    rc, out, skips, failures = run(reports)
    assert (rc, out) == (0, "2 2 2")
    assert "integration.test_x::test_three: skipped (must run in CI): needs promtool" in skips
    assert "Core.C" in skips
    assert "--- dev: Core.B\n" in failures and "expected 1, got 2" in failures
    assert "--- dev: integration.test_x::test_two\n" in failures and "assert 3 == 4" in failures
    assert "test_one" not in failures


def test_a_pytest_file_that_failed_outside_its_cases_is_one_failure(reports):
    ctest_report(reports / "ctest.xml", [("integration.test_y", "fail", "ERROR: AddressSanitizer")])
    pytest_report(reports / "py" / "integration.test_y.xml", [("test_one", "passed", "")])
    rc, out, _, failures = run(reports)
    assert (rc, out) == (0, "1 1 0")
    assert "--- dev: integration.test_y\n" in failures and "AddressSanitizer" in failures


def test_no_test_at_all_exits_4(reports):
    ctest_report(reports / "ctest.xml", [])
    rc, out, _, failures = run(reports)
    assert (rc, out, failures) == (4, "0 0 0", "")


def test_a_missing_report_exits_4(reports):
    rc, out, _, _ = run(reports)
    assert (rc, out) == (4, "0 0 0")


@pytest.mark.parametrize("listed,ci,rc", [(False, False, 0), (False, True, 3), (True, True, 0)])
def test_a_skip_fails_ci_unless_the_allow_list_expects_it(reports, listed, ci, rc):
    ctest_report(reports / "ctest.xml", [("Core.A", "run", ""), ("Core.C", "notrun", "no device")])
    allow = reports / "allow.txt"
    allow.write_text("# comment\n" + ("Core.C | dev | no device here\n" if listed else ""))
    got_rc, out, skips, _ = run(reports, "--allow", str(allow), ci=ci)
    assert (got_rc, out) == (rc, "1 0 1")
    if listed:
        assert "Core.C: expected: no device here" in skips
    else:
        assert ("UNEXPECTED in CI" if ci else "must run in CI") in skips


def test_an_allow_rule_for_another_stage_does_not_match(reports):
    ctest_report(reports / "ctest.xml", [("Core.C", "notrun", "no device")])
    allow = reports / "allow.txt"
    allow.write_text("Core.* | tsan | only tsan\n")
    rc, out, skips, _ = run(reports, "--allow", str(allow), ci=True)
    assert (rc, out) == (3, "0 0 1") and "UNEXPECTED in CI" in skips


def test_a_malformed_allow_line_is_refused(reports):
    ctest_report(reports / "ctest.xml", [("Core.A", "run", "")])
    allow = reports / "allow.txt"
    allow.write_text("Core.A | dev\n")
    rc, _, _, _ = run(reports, "--allow", str(allow))
    assert rc not in (0, 3, 4)


def test_a_long_failure_keeps_its_last_lines(reports):
    output = "\n".join(f"line {i}" for i in range(100))
    ctest_report(reports / "ctest.xml", [("Core.B", "fail", output)])
    _, _, _, failures = run(reports)
    assert "line 99" in failures and "line 10\n" not in failures
    assert "lines before]" in failures

"""Conformance mode (``pytest e2e --controller-cmd ... --expect fixed|reproduce``): declarations,
verdicts, the report's format, and our own controller as the external build under test, once
fixed and once with legacy switches standing in for a buggy build."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from e2e.catalog import CATALOG, NOT_CONTROLLER_AGNOSTIC, conformance, failure_ids
from lab.conformance import CaseResult, render_junit, render_markdown, scenario_of, verdict_for

ROOT = Path(__file__).resolve().parents[1]
OURS = (
    f"{sys.executable} -m controller --kubeconfig {{kubeconfig}} --cloud-config {{cloud_config}} "
    "--metrics-addr {metrics_addr}"
)


def _declared() -> dict[str, list[tuple[str, str, str]]]:
    """scenario id -> [(case, failure, expect)] read from the e2e modules' decorators."""
    found: dict[str, list[tuple[str, str, str]]] = {}
    for scenario in CATALOG:
        tree = ast.parse((ROOT / scenario.module).read_text(encoding="utf-8"))
        for node in tree.body:
            if not isinstance(node, ast.FunctionDef):
                continue
            for dec in node.decorator_list:
                if isinstance(dec, ast.Call) and getattr(dec.func, "id", "") == "conformance":
                    kw = {k.arg: ast.literal_eval(k.value) for k in dec.keywords}
                    found.setdefault(scenario.id, []).append(
                        (node.name, kw["failure"], kw["expect"])
                    )
    return found


def test_every_scenario_declares_its_agnostic_cases_or_says_why_none() -> None:
    declared = _declared()
    for scenario in CATALOG:
        cases = declared.get(scenario.id, [])
        assert bool(cases) != (scenario.id in NOT_CONTROLLER_AGNOSTIC), scenario.id
        # the mark on a helper is lost on pytest's side: the case it meant is never run
        assert all(case.startswith("test_") for case, _, _ in cases), (scenario.id, cases)
        if cases:
            # a declared scenario checks both directions of one documented failure
            assert {expect for _, _, expect in cases} == {"fixed", "reproduce"}, scenario.id
            assert {failure for _, failure, _ in cases} <= failure_ids()
    assert set(NOT_CONTROLLER_AGNOSTIC) <= {s.id for s in CATALOG}
    assert declared["lb-walkthrough"] == [
        ("test_reproduce_shared_elb_sg", "shared-elb-sg", "reproduce"),
        ("test_fixed_shared_elb_sg", "shared-elb-sg", "fixed"),
    ]


def test_a_declaration_names_a_documented_failure_and_an_expectation() -> None:
    mark = conformance(failure="k8s-84926", expect="fixed")
    assert mark.mark.kwargs == {"failure": "k8s-84926", "expect": "fixed"}
    with pytest.raises(ValueError, match=r"failure='k8s-1'.*not a documented failure"):
        conformance(failure="k8s-1", expect="fixed")
    with pytest.raises(ValueError, match=r"expect='broken'"):
        conformance(failure="k8s-84926", expect="broken")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        conformance(failure="k8s-84926")  # type: ignore[call-arg]


BAD_MARKERS = """
import pytest

@pytest.mark.conformance(expect="fixed")
def test_no_failure():
    pass
"""


def _pytest(args: list[str], *, timeout: float) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "COV_"))}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        cwd=ROOT,
        env=env,
    )


def test_incomplete_markers_and_flags_are_usage_errors(tmp_path: Path) -> None:
    """A raw marker without failure=, --expect without a build, a report without --expect:
    each a usage error naming what is missing, before any lab starts."""
    (tmp_path / "test_bad.py").write_text(BAD_MARKERS, encoding="utf-8")
    bad = _pytest(
        ["-p", "lab.pytest_plugin", "-c", os.devnull, "--rootdir", str(tmp_path), str(tmp_path)],
        timeout=60,
    )
    assert bad.returncode == 4, bad.stdout + bad.stderr
    assert "test_no_failure: @pytest.mark.conformance: failure=None" in bad.stderr
    no_build = _pytest(["e2e/test_k8s_84926.py", "--expect", "fixed"], timeout=60)
    assert no_build.returncode == 4
    assert "--expect fixed: judges another controller build" in no_build.stderr
    no_expect = _pytest(["e2e/test_k8s_84926.py", "--conformance-report", "x"], timeout=60)
    assert no_expect.returncode == 4
    assert "--conformance-report 'x': reports a conformance run" in no_expect.stderr


class _Info:
    """The part of pytest's ExceptionInfo the verdict reads."""

    def __init__(self, exc: BaseException) -> None:
        self.exc = exc

    def errisinstance(self, kinds: object) -> bool:
        return isinstance(self.exc, kinds)  # type: ignore[arg-type]


def test_verdicts() -> None:
    missed, broken = _Info(AssertionError("x")), _Info(RuntimeError("x"))
    timed_out = _Info(TimeoutError("timed out waiting for the ELB"))
    table = {
        ("fixed", "passed", None): "fixed",
        ("fixed", "failed", missed): "not fixed",
        ("fixed", "failed", timed_out): "not fixed",
        ("fixed", "failed", broken): "error",
        ("reproduce", "passed", None): "shown",
        ("reproduce", "failed", missed): "not shown",
        ("reproduce", "failed", timed_out): "not shown",
        ("reproduce", "failed", broken): "error",
        ("reproduce", "skipped", None): "skipped",
    }
    for (expect, outcome, info), verdict in table.items():
        assert verdict_for(expect, outcome, info) == verdict, (expect, outcome, info)  # type: ignore[arg-type]
    assert scenario_of("e2e/test_k8s_84926.py::test_fixed[a-b]") == "k8s-84926"
    assert scenario_of("e2e/test_lb_walkthrough.py::test_x") == "lb-walkthrough"


RESULTS = [
    CaseResult("e2e/test_k8s_84926.py::test_fixed[a]", "k8s-84926", "k8s-84926", "fixed",
               "fixed", "AWS: CreateLoadBalancer x1", 1.5),
    CaseResult("e2e/test_k8s_84256.py::test_fixed[b]", "k8s-84256", "k8s-84256", "fixed",
               "not fixed", "AssertionError: the annotated group | is never deleted", 2.0),
    CaseResult("e2e/test_x.py::test_fixed", "x", "x", "fixed", "error", "RuntimeError: boom", 0.1),
]  # fmt: skip


def test_markdown_report() -> None:
    text = render_markdown(RESULTS, build="upstream: acm", expect="fixed")
    lines = text.splitlines()
    assert lines[0] == "# Conformance: upstream: acm, --expect fixed"
    assert lines[2] == "error: 1, fixed: 1, not fixed: 1"
    assert lines[4] == "| scenario | failure | expectation | verdict | case | evidence |"
    assert lines[6] == (
        "| k8s-84926 | `k8s-84926` | fixed | **fixed** | `test_fixed[a]` "
        "| AWS: CreateLoadBalancer x1 |"
    )
    # a pipe in the evidence does not break the table
    assert lines[7].endswith("| AssertionError: the annotated group \\| is never deleted |")
    assert len(lines) == 9


def test_junit_report() -> None:
    suite = ET.fromstring(render_junit(RESULTS, build="upstream: acm", expect="fixed"))
    assert suite.tag == "testsuite"
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("3", "1", "1")
    cases = suite.findall("testcase")
    assert [(c.get("classname"), c.get("name")) for c in cases] == [
        ("k8s-84926", "test_fixed[a]"), ("k8s-84256", "test_fixed[b]"), ("x", "test_fixed")
    ]  # fmt: skip
    props = {p.get("name"): p.get("value") for p in cases[1].iter("property")}
    assert props == {
        "scenario": "k8s-84256",
        "failure": "k8s-84256",
        "expect": "fixed",
        "verdict": "not fixed",
        "evidence": "AssertionError: the annotated group | is never deleted",
    }
    failure = cases[1].find("failure")
    assert failure is not None
    assert failure.get("message", "").startswith("not fixed: AssertionError")
    assert cases[0].find("failure") is None
    assert cases[2].find("error") is not None


def _verdicts(report: Path) -> dict[str, str]:
    suite = ET.parse(report / "conformance.xml").getroot()
    return {
        f"{c.get('classname')}::{c.get('name')}": {
            p.get("name"): p.get("value") for p in c.iter("property")
        }["verdict"]
        or ""
        for c in suite.iter("testcase")
    }


@pytest.mark.slow
@pytest.mark.timeout(600)  # two pytest runs of their own (about a minute idle, more under load)
def test_our_controller_as_an_external_build_in_both_expectations(tmp_path: Path) -> None:
    """Two scenarios, our controller run as the external command: with its fixed defaults
    every declared fixed case passes (``--expect fixed``); with ``--legacy-behavior
    k8s-84926`` standing in for a buggy build, ``--expect reproduce`` shows k8s-84926 and, the
    legacy-node-role switch left off, reports that failure as not shown (not an error)."""
    modules = ["e2e/test_k8s_84926.py", "e2e/test_legacy_node_role.py"]
    fixed = _pytest(
        [*modules, "--controller-cmd", OURS, "--expect", "fixed", "-q",
         "--conformance-report", str(tmp_path / "fixed")],
        timeout=300,
    )  # fmt: skip
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert _verdicts(tmp_path / "fixed") == {
        "k8s-84926::test_fixed[nodes-last-throughout]": "fixed",
        "k8s-84926::test_fixed[write-up-sequence]": "fixed",
        "legacy-node-role::test_fixed_gate_off_registers_the_master": "fixed",
    }
    assert "3 passed, 4 deselected" in fixed.stdout, fixed.stdout
    markdown = (tmp_path / "fixed" / "conformance.md").read_text(encoding="utf-8")
    assert "fixed: 3" in markdown
    assert "ran without our controller's --sg-delete-retry 0.2s,2s" in markdown

    buggy = f"{OURS} --legacy-behavior k8s-84926 --sg-delete-retry 0.2s,2s"
    shown = _pytest(
        [*modules, "--controller-cmd", buggy, "--expect", "reproduce", "-q", "-rx",
         "--conformance-report", str(tmp_path / "reproduce")],
        timeout=300,
    )  # fmt: skip
    assert shown.returncode == 0, shown.stdout + shown.stderr
    assert _verdicts(tmp_path / "reproduce") == {
        "k8s-84926::test_reproduce_wrong_on_create_and_delete": "shown",
        "legacy-node-role::test_reproduce_legacy_master_label": "not shown",
    }
    assert "1 passed, 5 deselected, 1 xfailed" in shown.stdout, shown.stdout
    markdown = (tmp_path / "reproduce" / "conformance.md").read_text(encoding="utf-8")
    row = next(line for line in markdown.splitlines() if "test_reproduce_legacy" in line)
    assert "**not shown** |" in row
    assert "AssertionError" in row, "the evidence is the assertion that did not hold"
    row = next(line for line in markdown.splitlines() if "wrong_on_create" in line)
    assert "RevokeSecurityGroupIngress" in row, "the key AWS facts are the evidence"


def test_lab_report_checks_its_flags_and_builds_the_pytest_run(tmp_path: Path) -> None:
    """``invoke lab.report``: a bad expectation, no build, an unknown or non-agnostic scenario
    are one-line errors before anything runs; the pytest run it starts is conformance mode
    over the declared scenarios' modules."""
    from lab.conformance import pytest_argv

    invoke = str(Path(sys.executable).parent / "invoke")
    for args, words in (
        (["--expect", "bad"], "--expect 'bad': choose fixed or reproduce"),
        (["--expect", "fixed"], "give --controller-cmd TEMPLATE or --controller upstream=PATH"),
        (["--expect", "fixed", "--controller-cmd", "sh", "--scenarios", "k8s-84926,nope"],
         "--scenarios 'k8s-84926,nope': no scenario 'nope'"),
        (["--expect", "fixed", "--controller-cmd", "sh", "--scenarios", "debug-attach"],
         "--scenarios debug-attach: no controller-agnostic case"),
    ):  # fmt: skip
        done = subprocess.run(
            [invoke, "-r", str(ROOT), "lab.report", *args],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            cwd=tmp_path,
        )
        assert done.returncode == 1, done.stdout + done.stderr
        assert words in done.stderr, done.stderr
    assert list(tmp_path.iterdir()) == [], "nothing written"
    argv = pytest_argv(
        expect="reproduce", modules=["e2e/test_k8s_84926.py"], report_dir=tmp_path,
        controller="upstream=/opt/acm", workers=2,
    )  # fmt: skip
    assert argv[1:] == [
        "-m", "pytest", "e2e/test_k8s_84926.py", "--expect", "reproduce",
        "--conformance-report", str(tmp_path), "-p", "no:cacheprovider", "-rxs",
        "--controller", "upstream=/opt/acm", "-n", "2",
    ]  # fmt: skip


BEYOND_UPSTREAM = """
import pytest

@pytest.mark.conformance(failure="shared-elb-sg", expect="fixed")
def test_fixed_shared_group_kept():
    assert False, "the shared ELB group's rule was revoked"

@pytest.mark.conformance(failure="k8s-84926", expect="fixed")
def test_fixed_elb_group_by_kind():
    pass
"""


def test_report_only_keeps_a_fix_beyond_upstream_from_failing_the_gate(tmp_path: Path) -> None:
    """Upstream cloud-provider-aws v1.33.0 has no shared-ELB-group check: with ``--report-only
    shared-elb-sg`` its ``not fixed`` is reported (xfailed, in the report) and the gate stays
    green; without it the run fails. Ids no case declares, or the flag without ``--expect
    fixed``, are usage errors naming the value."""
    (tmp_path / "test_gate.py").write_text(BEYOND_UPSTREAM, encoding="utf-8")
    base = ["-p", "lab.pytest_plugin", "-c", os.devnull, "--rootdir", str(tmp_path),
            str(tmp_path), "--controller-cmd", OURS, "-q", "-rx"]  # fmt: skip
    gated = _pytest([*base, "--expect", "fixed"], timeout=120)
    assert gated.returncode == 1, gated.stdout + gated.stderr
    report = tmp_path / "report"
    said = _pytest(
        [*base, "--expect", "fixed", "--report-only", "shared-elb-sg",
         "--conformance-report", str(report)],
        timeout=120,
    )  # fmt: skip
    assert said.returncode == 0, said.stdout + said.stderr
    assert "1 passed, 1 xfailed" in said.stdout, said.stdout
    assert "not fixed (report only)" in said.stdout
    assert set(_verdicts(report).values()) == {"not fixed", "fixed"}
    unknown = _pytest([*base, "--expect", "fixed", "--report-only", "k8s-1"], timeout=120)
    assert unknown.returncode == 4, unknown.stdout + unknown.stderr
    assert "--report-only k8s-1: no collected case declares that failure" in unknown.stderr
    reproduce = _pytest(
        [*base, "--expect", "reproduce", "--report-only", "shared-elb-sg"], timeout=120
    )
    assert reproduce.returncode == 4
    assert "give --expect fixed too" in reproduce.stderr

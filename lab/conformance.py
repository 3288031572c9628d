"""Conformance mode: the catalog's controller-agnostic cases as a verdict on any controller build.

A catalog case that asserts a documented failure, or its fix, from evidence any build leaves
(AWS calls and state, Kubernetes objects and events, traffic through the data plane) declares
so with ``@pytest.mark.conformance(failure=ID, expect="fixed"|"reproduce")``: which documented
failure it checks and whether passing means the build is fixed or shows the failure. A marker
without both keywords, or with another expectation, is a collection error naming the case.

``pytest e2e --controller-cmd ... --expect fixed|reproduce`` (or ``--controller upstream=PATH``)
runs only the declared cases of that expectation. Our controller's own switches the case asks
for (``--legacy-behavior``, timing flags) are dropped: the build under test stands in for them
(the evidence says which were dropped). The verdict of one case:

========== =================================== ====================================
expect     the case passes                     an assertion fails or a wait times out
========== =================================== ====================================
fixed      ``fixed``                           ``not fixed`` (the run fails)
reproduce  ``shown`` (the build has the bug)   ``not shown`` (reported as xfailed;
                                               the run does not fail for it)
========== =================================== ====================================

``--report-only FAILURE`` (with ``--expect fixed``): that failure's ``not fixed`` is reported as
xfailed and does not fail the run, for a fix beyond what the build's upstream has (upstream
cloud-provider-aws v1.33.0 has no shared-ELB-group check: ``shared-elb-sg``).

Any other exception (the build never got ready, an API error...) is ``error`` and a skip is
``skipped``; both fail or skip the run as pytest always does. ``--conformance-report DIR``
writes ``DIR/conformance.md`` and ``DIR/conformance.xml`` (JUnit) with, per case, the
scenario, failure id, expectation, verdict and evidence: the assertion's message and the key
facts the lab saw (AWS actions that changed something, with error codes; Kubernetes Warning
events).
"""

from __future__ import annotations

import dataclasses
import json
import re
import sys
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Generator, Iterable, Sequence
from pathlib import Path
from typing import Any

import pytest

MARKER = "conformance"
MARKER_HELP = (
    "conformance(failure=ID, expect='fixed'|'reproduce'): a controller-agnostic catalog case; "
    "ID: the documented failure it checks; expect: what passing shows (the fix, or the failure)"
)
EXPECTATIONS = ("fixed", "reproduce")
#: what a case's outcome says about the build, per expectation
PASSED_VERDICT = {"fixed": "fixed", "reproduce": "shown"}
MISSED_VERDICT = {"fixed": "not fixed", "reproduce": "not shown"}
#: a documented failure's id: lower-case words and digits joined by dashes (``k8s-84926``)
FAILURE_ID = re.compile(r"[a-z0-9]+(-[a-z0-9]+)*")
#: exceptions that mean "the outcome the case checks did not happen" (not an error)
MISSED = (AssertionError, TimeoutError)
PROPERTY = "conformance"
EVIDENCE_LIMIT = 600


class DeclarationError(ValueError):
    """A conformance marker that does not say which failure and which expectation."""


@dataclasses.dataclass(frozen=True)
class Declaration:
    failure: str
    expect: str

    @classmethod
    def of(cls, item: pytest.Item) -> Declaration | None:
        """The item's declaration (None: not a conformance case); DeclarationError names the
        case, the keyword and the value when the marker is incomplete."""
        mark = item.get_closest_marker(MARKER)
        if mark is None:
            return None
        where = f"{item.nodeid}: @pytest.mark.{MARKER}"
        if mark.args:
            raise DeclarationError(
                f"{where}{mark.args!r}: give keywords failure=ID, expect='fixed'|'reproduce'"
            )
        unknown = sorted(set(mark.kwargs) - {"failure", "expect"})
        if unknown:
            raise DeclarationError(f"{where}: unknown keyword {unknown[0]}= (failure, expect)")
        failure, expect = mark.kwargs.get("failure"), mark.kwargs.get("expect")
        if not isinstance(failure, str) or not FAILURE_ID.fullmatch(failure):
            raise DeclarationError(
                f"{where}: failure={failure!r}: name the documented failure the case checks "
                "(its catalog id, e.g. failure='k8s-84926')"
            )
        if expect not in EXPECTATIONS:
            raise DeclarationError(
                f"{where}: expect={expect!r}: say what passing shows, "
                f"{' or '.join(repr(e) for e in EXPECTATIONS)}"
            )
        return cls(failure, str(expect))


def scenario_of(nodeid: str) -> str:
    """``e2e/test_k8s_84926.py::test_fixed[x]`` -> ``k8s-84926`` (the catalog's module rule)."""
    module = nodeid.split("::", 1)[0].rsplit("/", 1)[-1]
    stem = module.removesuffix(".py").removeprefix("test_")
    return stem.replace("_", "-")


@dataclasses.dataclass(frozen=True)
class CaseResult:
    """One declared case's verdict for the build under test."""

    nodeid: str
    scenario: str
    failure: str
    expect: str
    verdict: str
    evidence: str
    duration: float = 0.0

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> CaseResult:
        return cls(**json.loads(text))

    @property
    def case(self) -> str:
        return self.nodeid.split("::", 1)[-1]


def verdict_for(
    expect: str, outcome: str, excinfo: pytest.ExceptionInfo[BaseException] | None
) -> str:
    """The verdict of a finished phase: ``outcome`` is pytest's (passed, failed, skipped)."""
    if outcome == "passed":
        return PASSED_VERDICT[expect]
    if outcome == "skipped":
        return "skipped"
    if excinfo is not None and excinfo.errisinstance(MISSED):
        return MISSED_VERDICT[expect]
    return "error"


def _flags(reason: str) -> str:
    """``this case runs our controller with FLAGS; ...`` -> ``FLAGS``."""
    found = re.search(r"runs our controller with (.*?);", reason)
    return found.group(1) if found else reason


def _clip(text: str, limit: int = EVIDENCE_LIMIT) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def lab_facts(lab: Any) -> list[str]:
    """Key facts any build leaves in the lab: the AWS actions that changed something since the
    controller (last) started (with their error codes; the test's own setup calls before it
    are left out) and the Kubernetes Warning events' reasons. Best effort: a lab that
    cannot be read any more gives no facts, never a different verdict."""
    facts: list[str] = []
    since = int(getattr(lab, "controller_since_seq", 0))
    try:
        trail = [e for e in lab.aws.trail.events() if e.seq > since]
    except Exception:  # the lab is gone or broken: no facts from it (the verdict stands)
        trail = []
    actions: Counter[str] = Counter()
    errors: Counter[str] = Counter()
    for event in trail:
        if event.action.startswith(("Describe", "Get", "List")):
            continue
        actions[event.action] += 1
        if event.error_code:
            errors[f"{event.action} {event.error_code}"] += 1
    if actions:
        facts.append("AWS: " + ", ".join(f"{a} x{n}" for a, n in sorted(actions.items())))
    if errors:
        facts.append("AWS errors: " + ", ".join(f"{e} x{n}" for e, n in sorted(errors.items())))
    try:
        from kubernetes import client

        events = client.CoreV1Api(lab.api_client()).list_event_for_all_namespaces().items
    except Exception:  # the lab is gone or broken: no facts from it (the verdict stands)
        return facts
    warnings = Counter(
        f"{e.involved_object.kind}/{e.involved_object.name} {e.reason}"
        for e in events
        if e.type == "Warning"
    )
    if warnings:
        facts.append(
            "Warning events: " + ", ".join(f"{w} x{n}" for w, n in sorted(warnings.items()))
        )
    return facts


class ConformancePlugin:
    """Selects the declared cases of one expectation, computes each verdict, writes the report.

    Registered by ``lab.pytest_plugin`` when ``--expect`` is given; ``build`` names the
    controller under test for the report."""

    def __init__(
        self,
        *,
        expect: str,
        build: str,
        report_dir: Path | None,
        report_only: frozenset[str] = frozenset(),
    ) -> None:
        self.expect = expect
        self.build = build
        self.report_dir = report_dir
        #: failures whose "not fixed" is reported without failing the run (``--report-only``)
        self.report_only = report_only
        self.results: dict[str, CaseResult] = {}
        self.current: pytest.Item | None = None

    # --- selection ---------------------------------------------------------------------

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(
        self, config: pytest.Config, items: list[pytest.Item]
    ) -> None:
        keep: list[pytest.Item] = []
        drop: list[pytest.Item] = []
        declared: set[str] = set()
        for item in items:
            declaration = Declaration.of(item)
            if declaration is not None:
                declared.add(declaration.failure)
            if declaration is not None and declaration.expect == self.expect:
                keep.append(item)
            else:
                drop.append(item)
        unknown = sorted(self.report_only - declared)
        if unknown and items:
            raise pytest.UsageError(
                f"--report-only {unknown[0]}: no collected case declares that failure; declared: "
                + ", ".join(sorted(declared))
            )
        if drop:
            config.hook.pytest_deselected(items=drop)
            items[:] = keep

    # --- our controller's flags -----------------------------------------------------------

    def stands_in(self, reason: str) -> bool:
        """A declared case asked for our controller's flags: run the build without them (it
        stands in for them) and note it in the evidence. False outside a declared case."""
        item = self.current
        if item is None or Declaration.of(item) is None:
            return False
        item.user_properties.append(("conformance-dropped", reason))
        return True

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item) -> Generator[None, object, object]:
        self.current = item
        try:
            return (yield)
        finally:
            self.current = None

    # --- verdicts ------------------------------------------------------------------------

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        report = yield
        declaration = Declaration.of(item)
        if declaration is None:
            return report
        if call.when != "call" and report.outcome == "passed":
            return report
        verdict = verdict_for(declaration.expect, report.outcome, call.excinfo)
        if call.when == "teardown" and verdict != "error":
            return report  # a teardown that skips or asserts says nothing about the build
        evidence = [
            f"ran without our controller's {_flags(str(reason))}"
            for key, reason in item.user_properties
            if key == "conformance-dropped"
        ]
        if call.excinfo is not None and report.outcome != "passed":
            first = f"{call.excinfo.typename}: {call.excinfo.value}"
            if report.outcome == "skipped" and isinstance(report.longrepr, tuple):
                first = str(report.longrepr[2])
            evidence.insert(0, _clip(first))
        funcargs = getattr(item, "funcargs", {})
        if call.when == "call" and "lab" in funcargs:
            evidence += [_clip(f) for f in lab_facts(funcargs["lab"])]
        result = CaseResult(
            nodeid=item.nodeid,
            scenario=scenario_of(item.nodeid),
            failure=declaration.failure,
            expect=declaration.expect,
            verdict=verdict,
            evidence="; ".join(evidence),
            duration=round(report.duration, 2),
        )
        report.user_properties.append((PROPERTY, result.to_json()))
        if verdict == "not shown":
            # the build does not show this failure: an answer, not an error
            report.outcome = "skipped"
            report.wasxfail = f"not shown: {evidence[0] if evidence else 'the case failed'}"
        elif verdict == "not fixed" and declaration.failure in self.report_only:
            # a fix beyond what this build claims to have: said, not gated
            report.outcome = "skipped"
            report.wasxfail = (
                f"not fixed (report only): {evidence[0] if evidence else 'the case failed'}"
            )
        return report

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        for key, value in report.user_properties:
            if key == PROPERTY and isinstance(value, str):
                result = CaseResult.from_json(value)
                earlier = self.results.get(result.nodeid)
                if earlier is None or result.verdict == "error":
                    self.results[result.nodeid] = result

    # --- report --------------------------------------------------------------------------

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if self.report_dir is None or hasattr(session.config, "workerinput"):
            return  # xdist workers send their reports to the controller, which writes
        write_report(self.report_dir, self.ordered(), build=self.build, expect=self.expect)

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if hasattr(terminalreporter.config, "workerinput"):
            return
        terminalreporter.section(f"conformance: {self.build}, --expect {self.expect}")
        if not self.results:
            terminalreporter.write_line("no declared case of this expectation ran")
        for result in self.ordered():
            terminalreporter.write_line(
                f"{result.verdict:<10} {result.failure:<26} {result.nodeid}"
            )
        if self.report_dir is not None:
            terminalreporter.write_line(f"report: {self.report_dir / 'conformance.md'}")

    def ordered(self) -> list[CaseResult]:
        return sorted(self.results.values(), key=lambda r: (r.scenario, r.nodeid))


def render_markdown(results: Sequence[CaseResult], *, build: str, expect: str) -> str:
    """The report for people: what the build shows, per documented failure, then each case."""
    counts = Counter(r.verdict for r in results)
    lines = [
        f"# Conformance: {build}, --expect {expect}",
        "",
        ", ".join(f"{v}: {n}" for v, n in sorted(counts.items())) or "no case ran",
        "",
        "| scenario | failure | expectation | verdict | case | evidence |",
        "|---|---|---|---|---|---|",
    ]
    for r in results:
        cells = (r.scenario, f"`{r.failure}`", r.expect, f"**{r.verdict}**", f"`{r.case}`",
                 r.evidence or "-")  # fmt: skip
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines) + "\n"


def render_junit(results: Sequence[CaseResult], *, build: str, expect: str) -> str:
    """The report for CI: one testcase per declared case. ``not fixed`` and ``error`` are
    failures, ``not shown`` and ``skipped`` are skipped (with the verdict as the message);
    every case carries its scenario, failure, expectation and verdict as properties."""
    suite = ET.Element(
        "testsuite",
        name=f"conformance {build} --expect {expect}",
        tests=str(len(results)),
        failures=str(sum(r.verdict == "not fixed" for r in results)),
        errors=str(sum(r.verdict == "error" for r in results)),
        skipped=str(sum(r.verdict in ("not shown", "skipped") for r in results)),
        time=f"{sum(r.duration for r in results):.2f}",
    )
    for r in results:
        case = ET.SubElement(
            suite, "testcase", classname=r.scenario, name=r.case, time=f"{r.duration:.2f}"
        )
        props = ET.SubElement(case, "properties")
        for name in ("scenario", "failure", "expect", "verdict", "evidence"):
            ET.SubElement(props, "property", name=name, value=getattr(r, name))
        if r.verdict == "not fixed":
            ET.SubElement(case, "failure", message=f"not fixed: {r.evidence}")
        elif r.verdict == "error":
            ET.SubElement(case, "error", message=r.evidence or "error")
        elif r.verdict in ("not shown", "skipped"):
            ET.SubElement(case, "skipped", message=f"{r.verdict}: {r.evidence}")
        else:
            ET.SubElement(case, "system-out").text = f"{r.verdict}: {r.evidence}"
    ET.indent(suite)
    return ET.tostring(suite, encoding="unicode", xml_declaration=True) + "\n"


def write_report(
    directory: Path, results: Iterable[CaseResult], *, build: str, expect: str
) -> tuple[Path, Path]:
    """``DIR/conformance.md`` and ``DIR/conformance.xml``; returns both paths."""
    ordered = list(results)
    directory.mkdir(parents=True, exist_ok=True)
    markdown = directory / "conformance.md"
    junit = directory / "conformance.xml"
    markdown.write_text(render_markdown(ordered, build=build, expect=expect), encoding="utf-8")
    junit.write_text(render_junit(ordered, build=build, expect=expect), encoding="utf-8")
    return markdown, junit


def pytest_argv(
    *,
    expect: str,
    modules: Sequence[str],
    report_dir: Path,
    controller_cmd: str = "",
    controller: str = "",
    ready_log: str = "",
    ready_url: str = "",
    workers: int = 0,
) -> list[str]:
    """The pytest command line ``invoke lab.report`` runs: ``modules`` (e2e test files) in
    conformance mode for the given build, the report written to ``report_dir``."""
    if expect not in EXPECTATIONS:
        raise ValueError(f"--expect {expect!r}: choose {' or '.join(EXPECTATIONS)}")
    argv = [sys.executable, "-m", "pytest", *modules, "--expect", expect]
    argv += ["--conformance-report", str(report_dir), "-p", "no:cacheprovider", "-rxs"]
    for flag, value in (
        ("--controller-cmd", controller_cmd),
        ("--controller", controller),
        ("--controller-ready-log", ready_log),
        ("--controller-ready-url", ready_url),
    ):
        if value:
            argv += [flag, value]
    if workers:
        argv += ["-n", str(workers)]
    return argv

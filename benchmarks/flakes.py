"""A flake census: run a set of tests (or the whole suite) K times and count failures per test.

Each run is a fresh ``pytest`` process (``-p no:cacheprovider``, JUnit XML to a scratch file),
optionally beside a CPU hog: a busy loop pinned to one core for the whole run (``--hog``; with
``--hog-cores N`` more of them), so a test that only passes on a quiet machine shows up. The
census prints, per run, its wall time and outcome counts, then every test that failed or errored
in any run, with how often and the first lines of each distinct failure. A flake is a bug with a
root cause: the table is where fixing one starts, never a reason to retry.

    .venv/bin/python -m benchmarks.flakes --runs 5 [--hog] [--json out.json] -- [pytest args]

Without pytest arguments it runs the whole suite as the README's test command does (``-n 2``).
The hog is bounded: it runs only while a census run does and is killed after it (and on exit).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HOG = "import os\nos.sched_setaffinity(0, {%d})\nwhile True:\n    pass\n"


@dataclass
class Failure:
    run: int
    kind: str  # failure | error
    head: str  # the first lines of the message


@dataclass
class Run:
    number: int
    wall: float
    summary: str
    returncode: int
    counts: dict[str, int] = field(default_factory=dict)


def _cases(junit: Path) -> list[tuple[str, str, str]]:
    """(test id, outcome, message head) for every testcase of one JUnit file."""
    out = []
    for case in ET.parse(junit).getroot().iter("testcase"):
        test = f"{case.get('classname', '?')}::{case.get('name', '?')}"
        outcome, head = "passed", ""
        for tag in ("failure", "error", "skipped"):
            found = case.find(tag)
            if found is not None:
                outcome = {"failure": "failed", "error": "error", "skipped": "skipped"}[tag]
                text = (found.get("message") or "") + "\n" + (found.text or "")
                lines = [ln.rstrip() for ln in text.strip().splitlines() if ln.strip()]
                head = "\n".join(lines[:4])
                break
        out.append((test, outcome, head))
    return out


def _start_hogs(cores: int) -> list[subprocess.Popen[bytes]]:
    available = sorted(os.sched_getaffinity(0))
    picked = available[-cores:] if cores <= len(available) else available
    return [subprocess.Popen([sys.executable, "-c", HOG % core]) for core in picked]


def _stop(hogs: list[subprocess.Popen[bytes]]) -> None:
    for hog in hogs:
        hog.kill()
    for hog in hogs:
        hog.wait()


def census(
    runs: int, pytest_args: list[str], *, hog_cores: int, stop_on_failure: bool
) -> tuple[list[Run], dict[str, list[Failure]], int]:
    results: list[Run] = []
    failures: dict[str, list[Failure]] = defaultdict(list)
    tests_seen = 0
    with tempfile.TemporaryDirectory(prefix="ccm-lab-flakes-") as tmp:
        for number in range(1, runs + 1):
            junit = Path(tmp) / f"run-{number}.xml"
            cmd = [
                sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q",
                f"--junitxml={junit}", *pytest_args,
            ]  # fmt: skip
            hogs = _start_hogs(hog_cores) if hog_cores else []
            started = time.monotonic()
            try:
                done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False)
            finally:
                _stop(hogs)
            wall = time.monotonic() - started
            summary = (done.stdout.strip().splitlines() or ["(no output)"])[-1]
            run = Run(number, wall, summary, done.returncode)
            if junit.exists():
                cases = _cases(junit)
                tests_seen = max(tests_seen, len(cases))
                for test, outcome, head in cases:
                    run.counts[outcome] = run.counts.get(outcome, 0) + 1
                    if outcome in ("failed", "error"):
                        failures[test].append(Failure(number, outcome, head))
            elif done.returncode != 0:
                failures["(the run itself)"].append(
                    Failure(number, "error", (done.stdout + done.stderr).strip()[-800:])
                )
            results.append(run)
            print(
                f"run {number}/{runs}: {wall:7.1f} s  exit {done.returncode}  {summary}",
                flush=True,
            )
            if stop_on_failure and done.returncode != 0:
                break
    return results, dict(failures), tests_seen


def report(results: list[Run], failures: dict[str, list[Failure]], tests: int) -> str:
    lines = [
        "",
        f"runs: {len(results)}   tests per run: {tests}   "
        f"runs that failed: {sum(1 for r in results if r.returncode != 0)}",
        "",
        "| run | wall (s) | passed | failed | error | skipped |",
        "|---|---|---|---|---|---|",
    ]
    for r in results:
        c = r.counts
        lines.append(
            f"| {r.number} | {r.wall:.1f} | {c.get('passed', 0)} | {c.get('failed', 0)} | "
            f"{c.get('error', 0)} | {c.get('skipped', 0)} |"
        )
    lines.append("")
    if not failures:
        lines.append(f"no test failed in {len(results)} run(s)")
        return "\n".join(lines)
    lines += ["| test | failed in | runs |", "|---|---|---|"]
    for test, found in sorted(failures.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        runs = ", ".join(str(f.run) for f in found)
        lines.append(f"| `{test}` | {len(found)}/{len(results)} | {runs} |")
    lines.append("")
    for test, found in sorted(failures.items()):
        lines.append(f"{test}:")
        for head in dict.fromkeys(f.head for f in found):
            lines += ["    " + ln for ln in head.splitlines()] + [""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=5, help="how many runs (default 5)")
    parser.add_argument(
        "--hog", action="store_true", help="a CPU hog busy on one core for every run"
    )
    parser.add_argument("--hog-cores", type=int, default=None, help="hogs on N cores")
    parser.add_argument("--json", type=Path, default=None, help="also write the census here")
    parser.add_argument(
        "--stop-on-failure", action="store_true", help="stop after the first failed run"
    )
    parser.add_argument("pytest_args", nargs="*", help="after --: what pytest runs")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error(f"--runs must be at least 1, got {args.runs}")
    hog_cores = args.hog_cores if args.hog_cores is not None else (1 if args.hog else 0)
    if hog_cores < 0:
        parser.error(f"--hog-cores must be 0 or more, got {hog_cores}")
    pytest_args = args.pytest_args or ["-n", "2"]
    hog_note = f", a CPU hog on {hog_cores} core(s)" if hog_cores else ""
    print(f"census: {args.runs} run(s) of pytest {' '.join(pytest_args)}{hog_note}", flush=True)
    results, failures, tests = census(
        args.runs, pytest_args, hog_cores=hog_cores, stop_on_failure=args.stop_on_failure
    )
    print(report(results, failures, tests))
    if args.json is not None:
        args.json.write_text(
            json.dumps(
                {
                    "pytest_args": pytest_args,
                    "hog_cores": hog_cores,
                    "runs": [r.__dict__ for r in results],
                    "failures": {t: [f.__dict__ for f in fs] for t, fs in failures.items()},
                },
                indent=2,
            )
        )
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

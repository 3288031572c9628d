"""Wall time of the e2e catalog: serial, with ``-n 2`` (pytest-xdist), and per scenario.

Each run is a fresh ``pytest e2e`` process (one lab per process or xdist worker); per-scenario
times and every case's verdict come from its JUnit XML. Target (issue 6, again issue 24): the
whole catalog under 2 minutes serial on 2 cores, every verdict unchanged. The ratio is serial /
parallel wall time, measured in this run.

``--compare REF`` also runs the catalog serially at another commit (a temporary git worktree of
``REF``, the same virtualenv, ``PYTHONPATH`` at the worktree so pytest and every process it
starts import the worktree's code) in the same
run, so "before" and "after" share the machine and its load, and says whether any case's
verdict differs. ``--faster-clock N`` runs it once more at N lab seconds per real second.

    .venv/bin/python -m benchmarks.e2e [--serial-only] [--faster-clock 30] [--compare REF]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from benchmarks.gitref import worktree

ROOT = Path(__file__).resolve().parents[1]


@dataclass
class CatalogRun:
    wall: float
    per_scenario: dict[str, float]
    verdicts: dict[str, str]  # case -> passed / failed / error / skipped
    summary: str


def run(extra: list[str], *, cwd: Path = ROOT) -> CatalogRun:
    with tempfile.TemporaryDirectory() as tmp:
        junit = Path(tmp) / "junit.xml"
        cmd = [
            sys.executable,
            "-m",
            "pytest",
            "e2e",
            "-q",
            "-p",
            "no:cacheprovider",
            f"--junitxml={junit}",
            *extra,
        ]
        # the worktree's code for pytest and every process it starts (controllers, servers)
        env = {**os.environ, "PYTHONPATH": str(cwd)} if cwd != ROOT else None
        t0 = time.monotonic()
        done = subprocess.run(cmd, capture_output=True, text=True, check=False, cwd=cwd, env=env)
        wall = time.monotonic() - t0
        summary = (done.stdout.strip().splitlines() or ["?"])[-1]
        per: dict[str, float] = defaultdict(float)
        verdicts: dict[str, str] = {}
        if junit.exists():
            for case in ET.parse(junit).getroot().iter("testcase"):
                module = case.get("classname", "?").split(".")[-1]
                per[module] += float(case.get("time", 0))
                outcome = "passed"
                for tag in ("failure", "error", "skipped"):
                    if case.find(tag) is not None:
                        outcome = {"failure": "failed"}.get(tag, tag)
                verdicts[f"{module}::{case.get('name')}"] = outcome
        return CatalogRun(wall, dict(per), verdicts, summary)


def differences(before: dict[str, str], after: dict[str, str]) -> list[str]:
    """Cases whose verdict differs (a case only one side has is listed too)."""
    return [
        f"{case}: {before.get(case, 'absent')} -> {after.get(case, 'absent')}"
        for case in sorted(set(before) | set(after))
        if before.get(case) != after.get(case)
    ]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--serial-only", action="store_true")
    parser.add_argument(
        "--faster-clock",
        type=float,
        default=None,
        metavar="N",
        help="also run serially with the catalog's clock at N lab seconds per real second "
        "(pytest --catalog-speed): what is left at N is not lab time",
    )
    parser.add_argument(
        "--compare",
        metavar="REF",
        default=None,
        help="also run the catalog serially at git REF (before) in the same run",
    )
    args = parser.parse_args()
    before: CatalogRun | None = None
    if args.compare is not None:
        with worktree(args.compare) as tree:
            before = run([], cwd=tree)
        print(f"serial at {args.compare:<12} {before.wall:7.1f} s   ({before.summary})")
    serial = run([])
    print(f"serial     {serial.wall:7.1f} s   ({serial.summary})   target < 120 s")
    if before is not None:
        print(f"ratio now / {args.compare}: {serial.wall / before.wall:.2f}x")
        changed = differences(before.verdicts, serial.verdicts)
        print(
            "verdicts: "
            + ("every case's verdict unchanged" if not changed else f"{len(changed)} differ")
        )
        for line in changed:
            print(f"  {line}")
    if args.faster_clock is not None:
        fast = run([f"--catalog-speed={args.faster_clock:g}"])
        print(f"serial at {args.faster_clock:g}x clock {fast.wall:7.1f} s   ({fast.summary})")
        print(f"ratio faster clock / catalog clock: {fast.wall / serial.wall:.2f}x")
        for line in differences(serial.verdicts, fast.verdicts):
            print(f"  verdict differs at {args.faster_clock:g}x: {line}")
    if not args.serial_only:
        parallel = run(["-n", "2"])
        print(f"-n 2       {parallel.wall:7.1f} s   ({parallel.summary})")
        print(f"ratio serial / -n 2: {serial.wall / parallel.wall:.2f}x")
    print("\nper scenario (serial, test time incl. per-test reset):")
    for module, seconds in sorted(serial.per_scenario.items(), key=lambda kv: -kv[1]):
        before_s = f"   (was {before.per_scenario.get(module, 0):5.1f} s)" if before else ""
        print(f"  {module:<36} {seconds:6.1f} s{before_s}")


if __name__ == "__main__":
    main()

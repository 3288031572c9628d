"""Wall time of the gate's test commands: the whole suite and the fast tier, each with ``-n 2``.

Each run is a fresh ``pytest -p no:cacheprovider -q -n 2`` process from a cold start (our own
modules' ``__pycache__`` removed first, as in a fresh clone: the gate's case), timed from the
outside, with the machine's load average before and after. ``--compare REF`` runs the same
commands at another commit too (``benchmarks.worktree``: a git worktree, this virtualenv), in the
same run, and prints the ratio now / REF per command; at a commit from before the tiers,
``-m "not slow"`` leaves out only the cases marked by hand. Issue 28's targets: the gate (this
suite, ``invoke check``, install, the kind rehearsal) within 10 minutes on 2 cores; the fast
tier within 3 minutes.

    .venv/bin/python -m benchmarks.suite [--only full|fast] [--compare REF] [-- pytest args]

Pytest arguments after ``--`` replace the default selection (the whole suite), e.g. to try
the script on one directory.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from benchmarks.worktree import ROOT, environ, worktree

COMMANDS = {
    "full": ["-p", "no:cacheprovider", "-q", "-n", "2"],
    "fast": ["-p", "no:cacheprovider", "-q", "-n", "2", "-m", "not slow"],
}


@dataclass
class Timed:
    wall: float
    summary: str
    load: tuple[float, float]  # 1-minute load average before and after


def cold(tree: Path) -> None:
    """Remove our own modules' bytecode caches (not the virtualenv's)."""
    for top in ("lab", "controller", "tests", "e2e", "benchmarks"):
        for cache in (tree / top).rglob("__pycache__"):
            shutil.rmtree(cache, ignore_errors=True)


def run(tree: Path, args: list[str]) -> Timed:
    cold(tree)
    before = os.getloadavg()[0]
    t0 = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "pytest", *args],
        cwd=tree,
        env=environ(tree),
        capture_output=True,
        text=True,
        check=False,
    )
    wall = time.monotonic() - t0
    summary = (done.stdout.strip().splitlines() or ["?"])[-1]
    return Timed(wall, summary, (before, os.getloadavg()[0]))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--only", choices=tuple(COMMANDS), default=None)
    parser.add_argument("--compare", metavar="REF", default=None)
    parser.add_argument("pytest_args", nargs="*", help="after --: what pytest runs")
    args = parser.parse_args()
    names = [args.only] if args.only else list(COMMANDS)
    for name in names:
        command = COMMANDS[name] + args.pytest_args
        now = run(ROOT, command)
        print(f"{name:<5} HEAD  {now.wall:7.1f} s  load {now.load[0]:.1f}->{now.load[1]:.1f}  "
              f"({now.summary})")  # fmt: skip
        if args.compare is None:
            continue
        with worktree(args.compare) as tree:
            then = run(tree, command)
        print(f"{name:<5} {args.compare:<5} {then.wall:7.1f} s  load {then.load[0]:.1f}->"
              f"{then.load[1]:.1f}  ({then.summary})")  # fmt: skip
        print(f"{name:<5} ratio HEAD / {args.compare}: {now.wall / then.wall:.2f}x")


if __name__ == "__main__":
    main()

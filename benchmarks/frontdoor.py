"""How long the front door's commands take, as a user types them.

Each command is a fresh ``invoke`` process in a scratch directory, timed wall-clock, the median
of ``--rounds`` runs. The baseline, measured in the same run, is ``invoke --list`` (the
interpreter, invoke and ``tasks.py`` alone): what a command costs beyond it is its own imports
and work. Measured: a refused ``lab.up`` (``--nodes 0``: the flag check and its one-line
error), ``lab.status`` of a lab that is not up, and, unless ``--no-lab``, ``lab.status`` of a
running sim lab with one LoadBalancer Service (brought up first and taken down after).

    .venv/bin/python -m benchmarks.frontdoor [--rounds 5] [--no-lab]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
INVOKE = str(Path(sys.executable).parent / "invoke")


def invoke(cwd: Path, *args: str, check: bool = False) -> float:
    started = time.perf_counter()
    done = subprocess.run(
        [INVOKE, "-r", str(ROOT), *args], cwd=cwd, capture_output=True, text=True, check=False
    )
    elapsed = time.perf_counter() - started
    if check and done.returncode != 0:
        raise SystemExit(f"invoke {' '.join(args)} failed:\n{done.stdout}{done.stderr}")
    return elapsed


def median_of(rounds: int, cwd: Path, *args: str) -> float:
    return statistics.median(invoke(cwd, *args) for _ in range(rounds))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--no-lab", action="store_true", help="skip the running lab's status")
    args = parser.parse_args()
    rows: list[tuple[str, float]] = []
    with tempfile.TemporaryDirectory() as tmp:
        cwd = Path(tmp)
        base = median_of(args.rounds, cwd, "--list")
        rows.append(("invoke --list (baseline)", base))
        rows.append(
            (
                "lab.up --nodes 0 (refused)",
                median_of(args.rounds, cwd, "lab.up", "--name", "b", "--nodes", "0"),
            )
        )
        rows.append(
            ("lab.status, no lab up", median_of(args.rounds, cwd, "lab.status", "--name", "b"))
        )
        if not args.no_lab:
            invoke(cwd, "lab.up", "--name", "b", "--backend", "sim", check=True)
            try:
                kubectl = ("lab.kubectl", "--name", "b", "--")
                invoke(cwd, *kubectl, "create", "deployment", "web", "--image=nginx", check=True)
                invoke(
                    cwd, *kubectl, "expose", "deployment", "web", "--port", "80",
                    "--type", "LoadBalancer", check=True,
                )  # fmt: skip
                time.sleep(3)
                rows.append(
                    (
                        "lab.status, sim lab with a Service",
                        median_of(args.rounds, cwd, "lab.status", "--name", "b"),
                    )
                )
            finally:
                invoke(cwd, "lab.down", "--name", "b")
    print(f"median of {args.rounds} runs each, fresh processes")
    for name, seconds in rows:
        print(f"  {name:<40} {seconds:6.2f} s   {seconds / base:5.2f}x baseline")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

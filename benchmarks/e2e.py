"""Wall time of the e2e catalog: serial, with ``-n 2`` (pytest-xdist), and per scenario.

Each run is a fresh ``pytest e2e`` process (one lab per process or xdist worker); per-scenario
times come from its JUnit XML. Target (issue 6): whole catalog under 2 minutes serial on 2
cores. The ratio is serial / parallel wall time, measured in this run.

    .venv/bin/python -m benchmarks.e2e [--serial-only] [--faster-clock 30]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path


def run(extra: list[str]) -> tuple[float, dict[str, float], str]:
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
        t0 = time.monotonic()
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        wall = time.monotonic() - t0
        summary = (done.stdout.strip().splitlines() or ["?"])[-1]
        per: dict[str, float] = defaultdict(float)
        if junit.exists():
            for case in ET.parse(junit).getroot().iter("testcase"):
                module = case.get("classname", "?").split(".")[-1]
                per[module] += float(case.get("time", 0))
        return wall, dict(per), summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--serial-only", action="store_true")
    parser.add_argument(
        "--faster-clock",
        type=float,
        default=None,
        metavar="N",
        help="also run serially with the catalog's clock at N lab seconds per real second "
        "(pytest --catalog-speed): what is left at N is not lab time",
    )
    args = parser.parse_args()
    serial, per, summary = run([])
    print(f"serial     {serial:7.1f} s   ({summary})   target < 120 s")
    if args.faster_clock is not None:
        fast, _, fsummary = run([f"--catalog-speed={args.faster_clock:g}"])
        print(f"serial at {args.faster_clock:g}x clock {fast:7.1f} s   ({fsummary})")
        print(f"ratio faster clock / catalog clock: {fast / serial:.2f}x")
    if not args.serial_only:
        parallel, _, psummary = run(["-n", "2"])
        print(f"-n 2       {parallel:7.1f} s   ({psummary})")
        print(f"ratio serial / -n 2: {serial / parallel:.2f}x")
    print("\nper scenario (serial, test time incl. per-test reset):")
    for module, seconds in sorted(per.items(), key=lambda kv: -kv[1]):
        print(f"  {module:<36} {seconds:6.1f} s")


if __name__ == "__main__":
    main()

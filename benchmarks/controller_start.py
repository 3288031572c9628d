"""How long a start of our controller takes in a test lab: forked from the fork server against
``python -m controller`` exec'd afresh (the baseline), alternated in one lab.

Each start is ``Lab.start_controller()`` until the controller's ``/readyz`` answers 200
(informers synced, controllers running), the previous controller stopped first (not counted).
The first forked start, which also starts the fork server and its imports, is reported apart.
The e2e catalog starts the controller about fifty times per run.

    .venv/bin/python -m benchmarks.controller_start [--repeat N]
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import time

from lab.compose import Lab
from lab.spec import LabSpec


def one_start(lab: Lab, launch: str) -> float:
    lab.stop_controller()
    lab.config = dataclasses.replace(lab.config, controller_launch=launch)
    t0 = time.monotonic()
    lab.start_controller()
    return time.monotonic() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=10)
    args = parser.parse_args()
    lab = Lab(LabSpec(name="bench-controller-start", nodes=2)).start()
    try:
        first_fork = one_start(lab, "fork")
        times: dict[str, list[float]] = {"fork": [], "exec": []}
        for _ in range(args.repeat):
            for launch in ("exec", "fork"):
                times[launch].append(one_start(lab, launch))
    finally:
        lab.stop()
    print(f"first forked start (server + imports): {first_fork:.2f} s")
    for launch, values in times.items():
        q = statistics.quantiles(values, n=10)
        print(
            f"{launch:5} median {statistics.median(values):.3f} s  p90 {q[-1]:.3f} s  "
            f"min {min(values):.3f} s  (n={len(values)})"
        )
    ratio = statistics.median(times["fork"]) / statistics.median(times["exec"])
    print(f"ratio fork / exec (median): {ratio:.2f}x")


if __name__ == "__main__":
    main()

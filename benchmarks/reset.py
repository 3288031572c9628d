"""How long a lab reset takes: restoring the AWS checkpoint taken right after seeding (what the
lab does) against wiping moto and seeding the world again with ~30 EC2 calls (the baseline,
what a reset did before), alternated in one lab.

A reset (``Lab.reset``) is what every catalog and lab test pays before it runs: the controller
killed, AWS back to the freshly seeded world (VPC, subnets, groups, instances), the metadata
service and the simulator's objects reset, the data plane restarted. The e2e catalog resets ~40
times per run. The baseline's figure includes taking a new checkpoint after its seeding; that
cost is printed on its own too.

    .venv/bin/python -m benchmarks.reset [--repeat N]
"""

from __future__ import annotations

import argparse
import statistics
import time

from lab.aws.server import AwsServer
from lab.compose import Lab
from lab.spec import LabSpec


def one_reset(lab: Lab, *, reseed: bool) -> float:
    if reseed:
        lab._seeded = None  # the plan's checkpoint forgotten: wipe and seed again
    t0 = time.monotonic()
    lab.reset()
    return time.monotonic() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=10)
    args = parser.parse_args()
    lab = Lab(LabSpec(name="bench-reset", nodes=3)).start()
    try:
        lab.reset()  # warm
        times: dict[str, list[float]] = {"restore": [], "reseed": [], "checkpoint": []}
        aws = lab.aws
        assert isinstance(aws, AwsServer)
        for _ in range(args.repeat):
            times["reseed"].append(one_reset(lab, reseed=True))
            times["restore"].append(one_reset(lab, reseed=False))
            t0 = time.monotonic()
            aws.control.checkpoint()
            times["checkpoint"].append(time.monotonic() - t0)
    finally:
        lab.stop()
    for name, values in times.items():
        print(
            f"{name:<10} median {statistics.median(values) * 1000:7.0f} ms   "
            f"min {min(values) * 1000:6.0f} ms   max {max(values) * 1000:6.0f} ms   "
            f"(n={len(values)})"
        )
    ratio = statistics.median(times["restore"]) / statistics.median(times["reseed"])
    print(f"ratio restore / reseed (median reset): {ratio:.2f}x")


if __name__ == "__main__":
    main()

"""How long a lab reset takes: with moto's default AMI catalogue shared between EC2 backends
(``lab.aws.app``, what the lab does) against moto's own loader building it afresh on every
reset (the baseline), alternated in one lab.

A reset (``Lab.reset``) is what every catalog and lab test pays before it runs: the controller
killed, AWS wiped and re-seeded (VPC, subnets, groups, instances), the metadata service and the
simulator's objects reset, the data plane restarted. The e2e catalog resets ~40 times per run.

    .venv/bin/python -m benchmarks.reset [--repeat N]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Iterator
from contextlib import contextmanager

from lab.compose import Lab, LabConfig


@contextmanager
def stock_ami_loader() -> Iterator[None]:
    from moto.ec2.models.amis import AmiBackend

    shared = AmiBackend._load_amis
    AmiBackend._load_amis = shared.__wrapped__  # type: ignore[attr-defined,method-assign]
    try:
        yield
    finally:
        AmiBackend._load_amis = shared  # type: ignore[method-assign]


def one_reset(lab: Lab, *, stock: bool) -> float:
    t0 = time.monotonic()
    if stock:
        with stock_ami_loader():
            lab.reset()
    else:
        lab.reset()
    return time.monotonic() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=10)
    args = parser.parse_args()
    lab = Lab(LabConfig(name="bench-reset", nodes=3)).start()
    try:
        lab.reset()  # warm: the first reset of a process builds the shared catalogue
        times: dict[str, list[float]] = {"shared": [], "stock": []}
        for _ in range(args.repeat):
            times["stock"].append(one_reset(lab, stock=True))
            times["shared"].append(one_reset(lab, stock=False))
    finally:
        lab.stop()
    for name, values in times.items():
        print(
            f"{name:<7} reset median {statistics.median(values) * 1000:7.0f} ms   "
            f"min {min(values) * 1000:6.0f} ms   max {max(values) * 1000:6.0f} ms   "
            f"(n={len(values)})"
        )
    ratio = statistics.median(times["shared"]) / statistics.median(times["stock"])
    print(f"ratio shared / stock (median): {ratio:.2f}x")


if __name__ == "__main__":
    main()

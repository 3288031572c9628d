"""Benchmark of the lab's instance metadata service (``lab.imds``).

Measures, in one run, against the lab's ``AwsServer`` with one seeded instance:

1. start-to-ready: ``ImdsServer`` in-process and ``ImdsProcess`` (child process, ready line);
2. per-request latency, rounds interleaved so machine load hits all alike:
   * ``healthz``: ``GET /_lab/healthz`` (HTTP + WSGI only, no EC2 read: the floor),
   * ``describe``: one boto3 ``DescribeInstances`` straight to the endpoint (the EC2 read
     the IMDS does per uncached request: the baseline),
   * ``md-uncached``: ``GET meta-data/local-ipv4`` with a token, ``cache_ttl=0``,
   * ``md-cached``: the same with the default ``cache_ttl=0.2``,
   * ``botocore-region``: botocore's ``InstanceMetadataRegionFetcher.retrieve_region()``
     (token PUT + GET), uncached;
   with ratios against ``describe``;
3. throughput: 4 client threads on ``md-cached`` and ``md-uncached`` for a fixed count.

Usage: ``.venv/bin/python benchmarks/imds.py [--quick]``. Prints a table; asserts nothing.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from botocore.utils import InstanceMetadataRegionFetcher

from lab.aws import AwsServer
from lab.aws.seeding import seed_topology
from lab.aws.topology import NodeSpec, TopologySpec
from lab.imds import ImdsProcess, ImdsServer


def _get(url: str, headers: dict[str, str] | None = None, method: str = "GET") -> str:
    request = urllib.request.Request(url, headers=headers or {}, method=method)
    with urllib.request.urlopen(request, timeout=10) as reply:
        return reply.read().decode()


def _timed(fn: Callable[[], object], count: int) -> list[float]:
    samples = []
    for _ in range(count):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1000)
    return samples


def _throughput(fn: Callable[[], object], total: int, threads: int = 4) -> float:
    per = total // threads

    def work() -> None:
        for _ in range(per):
            fn()

    workers = [threading.Thread(target=work) for _ in range(threads)]
    start = time.perf_counter()
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return per * threads / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer rounds")
    args = parser.parse_args()
    rounds, per_round, total = (3, 10, 200) if args.quick else (6, 20, 800)

    with AwsServer(region="us-east-1") as aws:
        ec2 = aws.client("ec2")
        spec = TopologySpec(
            cluster_id="bench",
            region="us-east-1",
            zones=("us-east-1a",),
            nodes=(NodeSpec("n1", "10.0.0.10", "us-east-1a"),),
        )
        iid = seed_topology(ec2, spec).instances["n1"].instance_id

        start = time.perf_counter()
        uncached = ImdsServer(aws.url, instance_id=iid, cache_ttl=0).start()
        ready_thread = (time.perf_counter() - start) * 1000
        cached = ImdsServer(aws.url, instance_id=iid, cache_ttl=0.2).start()
        start = time.perf_counter()
        with ImdsProcess(aws.url, instance_id=iid):
            ready_proc = (time.perf_counter() - start) * 1000
        try:
            ttl = {"X-aws-ec2-metadata-token-ttl-seconds": "21600"}
            tok_u = _get(f"{uncached.url}/latest/api/token", ttl, "PUT")
            tok_c = _get(f"{cached.url}/latest/api/token", ttl, "PUT")
            md_u = f"{uncached.url}/latest/meta-data/local-ipv4"
            md_c = f"{cached.url}/latest/meta-data/local-ipv4"
            fetcher = InstanceMetadataRegionFetcher(base_url=uncached.url, timeout=5)
            cases: dict[str, Callable[[], object]] = {
                "healthz": lambda: _get(f"{uncached.url}/_lab/healthz"),
                "describe": lambda: ec2.describe_instances(InstanceIds=[iid]),
                "md-uncached": lambda: _get(md_u, {"X-aws-ec2-metadata-token": tok_u}),
                "md-cached": lambda: _get(md_c, {"X-aws-ec2-metadata-token": tok_c}),
                "botocore-region": fetcher.retrieve_region,
            }
            for fn in cases.values():  # warm-up
                fn()
            samples: dict[str, list[float]] = {name: [] for name in cases}
            for _ in range(rounds):
                for name, fn in cases.items():
                    samples[name].extend(_timed(fn, per_round))
            tput_c = _throughput(cases["md-cached"], total)
            tput_u = _throughput(cases["md-uncached"], total)
        finally:
            uncached.stop()
            cached.stop()

    base = statistics.median(samples["describe"])
    print(f"start-to-ready: ImdsServer {ready_thread:.1f} ms, ImdsProcess {ready_proc:.0f} ms")
    print(f"{'case':<18}{'median ms':>10}{'p95 ms':>10}{'x describe':>12}")
    for name, values in samples.items():
        med = statistics.median(values)
        p95 = statistics.quantiles(values, n=20)[18]
        print(f"{name:<18}{med:>10.2f}{p95:>10.2f}{med / base:>12.2f}")
    print(
        f"throughput (4 threads, {total} requests): md-cached {tput_c:.0f}/s, "
        f"md-uncached {tput_u:.0f}/s, ratio {tput_c / tput_u:.2f}"
    )


if __name__ == "__main__":
    main()

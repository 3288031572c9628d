"""Benchmark of the controller's batched instance lookups (``controller.aws.batch``).

Against the lab's ``AwsServer`` (in-process, wiped, N cluster instances), through the
controller's own ``InstancesV2`` built by ``new_cloud``:

1. **overlapping**: N threads each ask ``instance_exists`` for one node at once (what the node
   worker, the address refresh and the lifecycle pass do when they overlap): wall time and the
   ``DescribeInstances`` calls in the lab's trail, batched (the controller) against one call per
   lookup (the baseline: what the controller sent before batching, the same boto3 client
   asking ``DescribeInstances InstanceIds=[id]`` from N threads);
2. **one after another** (the lifecycle monitor's pass): N lookups in a row, batched against the
   baseline; each batched lookup waits out the 100 ms idle window alone.

Ratios are batched / baseline, same run. Asserts nothing.

    .venv/bin/python -m benchmarks.describe_batch [--nodes N]
"""

from __future__ import annotations

import argparse
import os
import threading
import time
from collections.abc import Callable

from controller.aws import load_cloud_config, new_cloud
from controller.cloud import Node
from lab.aws import AwsServer

REGION = "us-east-1"
AMI = "ami-12c6146b"


def _threads(calls: list[Callable[[], object]]) -> float:
    start = threading.Barrier(len(calls) + 1)

    def run(call: Callable[[], object]) -> None:
        start.wait()
        call()

    threads = [threading.Thread(target=run, args=(c,)) for c in calls]
    for t in threads:
        t.start()
    t0 = time.perf_counter()
    start.wait()
    for t in threads:
        t.join()
    return time.perf_counter() - t0


def _serial(calls: list[Callable[[], object]]) -> float:
    t0 = time.perf_counter()
    for call in calls:
        call()
    return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=50)
    args = parser.parse_args()
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "bench")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "bench")
    with AwsServer(region=REGION) as aws:
        ec2 = aws.client("ec2")
        vpc = ec2.create_vpc(CidrBlock="10.30.0.0/16")["Vpc"]["VpcId"]
        subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="10.30.0.0/20")["Subnet"]["SubnetId"]
        tag = {"Key": "kubernetes.io/cluster/bench", "Value": "owned"}
        reservation = ec2.run_instances(
            ImageId=AMI,
            MinCount=args.nodes,
            MaxCount=args.nodes,
            SubnetId=subnet,
            TagSpecifications=[{"ResourceType": "instance", "Tags": [tag]}],
        )
        ids = [i["InstanceId"] for i in reservation["Instances"]]
        config, _ = load_cloud_config(
            f"[Global]\nRegion = {REGION}\nVPC = {vpc}\nSubnetID = {subnet}\n"
            f"KubernetesClusterID = bench\n"
            f'[ServiceOverride "0"]\nService = ec2\nRegion = {REGION}\nURL = {aws.url}\n'
            f"SigningRegion = {REGION}\n"
        )
        cloud = new_cloud(config)
        inst = cloud.instances_v2()
        nodes = [Node(name=f"n{k}", provider_id=f"aws:///{REGION}a/{i}") for k, i in enumerate(ids)]
        client = cloud.context.clients.ec2
        batched = [lambda n=n: inst.instance_exists(n) for n in nodes]
        single = [lambda i=i: client.describe_instances(InstanceIds=[i]) for i in ids]
        inst.instance_exists(nodes[0])  # warm the client and moto

        print(f"{args.nodes} instances; DescribeInstances calls from the lab's trail")
        for label, run in (("overlapping", _threads), ("one after another", _serial)):
            rows = []
            for name, calls in (("batched", batched), ("baseline", single)):
                aws.control.clear_trail()
                seconds = run(calls)
                rows.append((name, seconds, aws.trail.count("DescribeInstances")))
            (_, bs, bc), (_, us, uc) = rows
            print(
                f"  {label:18} batched {bs * 1000:8.1f} ms {bc:4d} calls | baseline "
                f"{us * 1000:8.1f} ms {uc:4d} calls | time {bs / us:5.2f}x, calls {bc / uc:5.3f}x"
            )


if __name__ == "__main__":
    main()

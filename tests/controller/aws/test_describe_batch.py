"""DescribeInstances batching (upstream ``describe_instance_batch.go``) against the lab's EC2:
concurrent InstancesV2 lookups by id become one call, and a missing id among them fails only
its own caller's lookup."""

from __future__ import annotations

import threading
from collections.abc import Callable

from controller.aws.instances import AWSInstances
from controller.cloud import Node
from lab.aws import AwsServer
from tests.controller.aws.conftest import MakeCloud
from tests.controller.aws.topology import Topology

MISSING = "i-0123456789abcdef0"


def concurrently(calls: dict[str, Callable[[], object]]) -> dict[str, object]:
    out: dict[str, object] = {}
    start = threading.Barrier(len(calls))

    def run(name: str, call: Callable[[], object]) -> None:
        start.wait()
        try:
            out[name] = call()
        except Exception as exc:
            out[name] = exc

    threads = [threading.Thread(target=run, args=item) for item in calls.items()]
    for t in threads:
        t.start()
    for t in threads:
        t.join(15)
    return out


def nodes(topo: Topology) -> list[Node]:
    return [Node(name=n, provider_id=topo.provider_id(n)) for n in sorted(topo.instances)]


def test_concurrent_lookups_are_one_describe_instances(
    aws: AwsServer, topo: Topology, make_cloud: MakeCloud
) -> None:
    inst: AWSInstances = make_cloud().instances_v2()
    aws.control.clear_trail()
    n0, n1 = nodes(topo)
    out = concurrently(
        {
            "exists-0": lambda: inst.instance_exists(n0),
            "exists-1": lambda: inst.instance_exists(n1),
            "shutdown-0": lambda: inst.instance_shutdown(n0),
            "shutdown-1": lambda: inst.instance_shutdown(n1),
        }
    )
    assert out == {"exists-0": True, "exists-1": True, "shutdown-0": False, "shutdown-1": False}
    calls = aws.trail.calls("DescribeInstances")
    assert len(calls) == 1, [c.params for c in calls]
    # both ids in the one call, each named once although each was asked for twice
    assert sorted(calls[0].params["InstanceIds"]) == sorted(topo.instances.values())  # type: ignore[arg-type]


def test_a_missing_id_fails_only_its_own_lookup(
    aws: AwsServer, topo: Topology, make_cloud: MakeCloud
) -> None:
    inst: AWSInstances = make_cloud().instances_v2()
    aws.control.clear_trail()
    n0, n1 = nodes(topo)
    gone = Node(name="gone", provider_id=f"aws:///us-east-1a/{MISSING}")
    out = concurrently(
        {
            "n0": lambda: inst.instance_exists(n0),
            "n1": lambda: inst.instance_exists(n1),
            "gone": lambda: inst.instance_exists(gone),
            "meta": lambda: inst.instance_metadata(n0).provider_id,
        }
    )
    assert out == {"n0": True, "n1": True, "gone": False, "meta": n0.provider_id}
    calls = aws.trail.calls("DescribeInstances")
    # the batch (EC2 fails it whole for the one missing id), then each id on its own
    assert len(calls[0].params["InstanceIds"]) == 3  # type: ignore[arg-type]
    assert calls[0].error_code == "InvalidInstanceID.NotFound"
    singles = {str(c.params["InstanceIds"]): c.error_code for c in calls[1:]}
    assert len(calls) == 4, [c.params for c in calls]
    assert sorted(v for v in singles.values() if v) == ["InvalidInstanceID.NotFound"]


def test_one_lookup_alone_is_one_call(
    aws: AwsServer, topo: Topology, make_cloud: MakeCloud
) -> None:
    inst: AWSInstances = make_cloud().instances_v2()
    aws.control.clear_trail()
    gone = Node(name="gone", provider_id=f"aws:///us-east-1a/{MISSING}")
    assert inst.instance_exists(gone) is False
    # upstream repeats a failed batch of one id as an identical single call; ours does not
    assert aws.trail.count("DescribeInstances") == 1

"""Upstream's remaining ``aws_loadbalancer_test.go`` tables (``lb_tables``) against ours.

Classic listeners: :func:`controller.aws.loadbalancer.sync_listeners` and its comparisons; the
target-node-labels filter: :func:`controller.aws.instances.node_targeted` with the labels as
the Classic and the NLB validation read them; NLB targets: :mod:`controller.aws.targets`;
``findInstancesForELB``: :meth:`controller.aws.instances.InstanceCache.for_nodes` on the lab's
EC2. All cases pass; none is a deviation.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from controller.aws import targets
from controller.aws.annotations import A_TYPE, parse_service
from controller.aws.instances import InstanceCache, node_targeted
from controller.aws.loadbalancer import arns_equal, listeners_equal, protocols_equal, sync_listeners
from controller.aws.nlbspec import parse_nlb_service
from controller.cloud import Node, Service, ServicePort
from lab.aws import AwsServer
from tests.controller.aws.conftest import MakeCloud
from tests.controller.aws.topology import AMI, CLUSTER_TAG, Topology
from tests.controller.upstream.lb_tables import (
    ARNS_EQUAL,
    CHUNK_TARGETS,
    DIFF_TARGETS,
    EXPECTED_TARGETS,
    FILTER_TARGET_NODES,
    FIND_INSTANCES_FOR_ELB,
    LISTENERS_EQUAL,
    PROTOCOLS_EQUAL,
    SYNC_LISTENERS,
    Listener,
)


def _listener(row: Listener) -> dict[str, Any]:
    protocol, lb_port, instance_protocol, instance_port, cert = row
    out: dict[str, Any] = {
        "Protocol": protocol,
        "LoadBalancerPort": lb_port,
        "InstanceProtocol": instance_protocol,
        "InstancePort": instance_port,
    }
    if cert is not None:
        out["SSLCertificateId"] = cert
    return out


@pytest.mark.parametrize(("left", "right", "equal"), PROTOCOLS_EQUAL)
def test_elb_protocols_are_equal(left: str | None, right: str | None, equal: bool) -> None:
    """TestElbProtocolsAreEqual."""
    assert protocols_equal(left, right) is equal


@pytest.mark.parametrize(("left", "right", "equal"), ARNS_EQUAL)
def test_aws_arn_equals(left: str | None, right: str | None, equal: bool) -> None:
    """TestAWSARNEquals."""
    assert arns_equal(left, right) is equal


@pytest.mark.parametrize(("expected", "actual", "equal"), [r[1:] for r in LISTENERS_EQUAL],
                         ids=[r[0] for r in LISTENERS_EQUAL])  # fmt: skip
def test_elb_listeners_are_equal(expected: Listener, actual: Listener, equal: bool) -> None:
    """TestElbListenersAreEqual (both argument orders: the comparison is symmetric)."""
    assert listeners_equal(_listener(actual), _listener(expected)) is equal
    assert listeners_equal(_listener(expected), _listener(actual)) is equal


@pytest.mark.parametrize(("wanted", "described", "create", "delete"),
                         [r[1:] for r in SYNC_LISTENERS],
                         ids=[r[0] for r in SYNC_LISTENERS])  # fmt: skip
def test_sync_elb_listeners(
    wanted: list[Listener],
    described: list[Listener | None],
    create: list[Listener],
    delete: list[int],
) -> None:
    """TestSyncElbListeners: the listeners to create (in the wanted order, the certificate
    as given) and the ports to delete (in the described order)."""
    got_create, got_delete = sync_listeners(
        [_listener(x) for x in wanted], [None if d is None else _listener(d) for d in described]
    )
    assert got_create == [_listener(x) for x in create]
    assert got_delete == delete


@pytest.mark.parametrize("kind", ["classic", "nlb"])
@pytest.mark.parametrize(("labels", "annotations", "targeted"),
                         [r[1:] for r in FILTER_TARGET_NODES],
                         ids=[r[0] for r in FILTER_TARGET_NODES])  # fmt: skip
def test_filter_target_nodes(
    kind: str, labels: dict[str, str], annotations: dict[str, str], targeted: bool
) -> None:
    """TestFilterTargetNodes: the annotation as each load-balancer kind's validation reads it,
    then the filter ``InstanceCache.for_nodes`` applies to every node."""
    service = Service(
        namespace="default",
        name="svc",
        uid="UID",
        annotations={**annotations, **({A_TYPE: "nlb"} if kind == "nlb" else {})},
        ports=(ServicePort(port=80, node_port=30080),),
    )
    spec = parse_nlb_service(service) if kind == "nlb" else parse_service(service)
    node = Node(name="node", labels=labels)
    assert node_targeted(node, spec.target_node_labels) is targeted


def test_find_instances_for_elb(aws: AwsServer, topo: Topology, make_cloud: MakeCloud) -> None:
    """TestCloud_findInstancesForELB, step by step on one instance cache: the instances found
    for the nodes, and the ``DescribeInstances`` calls each step makes (a refresh when an id
    is missing or the cache is older than its maximum age, none otherwise)."""
    now = [1000.0]
    ctx = dataclasses.replace(make_cloud().context, clock=lambda: now[0])
    cache = InstanceCache(ctx)
    ec2 = aws.client("ec2")
    ids = {"self": topo.instances["node-0"]}
    for step, asked, expire, want, calls in FIND_INSTANCES_FOR_ELB:
        if "new" in asked and "new" not in ids:
            ids["new"] = ec2.run_instances(
                ImageId=AMI,
                MinCount=1,
                MaxCount=1,
                InstanceType="t3.medium",
                SubnetId=topo.public_subnets[1],
                TagSpecifications=[{"ResourceType": "instance", "Tags": [CLUSTER_TAG]}],
            )["Instances"][0]["InstanceId"]
        if expire:
            now[0] += 600.0 + 1.0  # upstream defaultEC2InstanceCacheMaxAge + 1s
        aws.control.clear_trail()
        nodes = [Node(name=f"n-{a}", provider_id=f"aws:///us-east-1a/{ids[a]}") for a in asked]
        found = [i["InstanceId"] for i in cache.for_nodes(nodes)]
        assert found == [ids[w] for w in want], step
        assert len(aws.control.trail(action="DescribeInstances")) == calls, step


@pytest.mark.parametrize(("items", "size", "chunks"), [r[1:] for r in CHUNK_TARGETS],
                         ids=[r[0] for r in CHUNK_TARGETS])  # fmt: skip
def test_chunk_target_descriptions(
    items: list[tuple[str, int]], size: int, chunks: list[list[tuple[str, int]]]
) -> None:
    """TestCloud_chunkTargetDescriptions."""
    assert targets.chunk_targets(items, size) == chunks


@pytest.mark.parametrize(("expected", "actual", "register", "deregister"),
                         [r[1:] for r in DIFF_TARGETS],
                         ids=[r[0] for r in DIFF_TARGETS])  # fmt: skip
def test_diff_target_group_targets(
    expected: list[str], actual: list[str], register: list[str], deregister: list[str]
) -> None:
    """TestCloud_diffTargetGroupTargets (all on port 8080; the order is upstream's)."""
    got = targets.diff_targets(
        targets.expected_targets(expected, 8080),
        targets.actual_targets([{"Id": i, "Port": 8080} for i in actual]),
    )
    assert got == ([(i, 8080) for i in register], [(i, 8080) for i in deregister])


@pytest.mark.parametrize(("ids", "port", "want"), [r[1:] for r in EXPECTED_TARGETS],
                         ids=[r[0] for r in EXPECTED_TARGETS])  # fmt: skip
def test_compute_target_group_expected_targets(
    ids: list[str], port: int, want: list[tuple[str, int]]
) -> None:
    """TestCloud_computeTargetGroupExpectedTargets."""
    assert targets.expected_targets(ids, port) == want

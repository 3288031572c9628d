"""Upstream's instance-topology tables (``topology_tables``) against ours and the lab's EC2."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError

from controller.aws.topology import NETWORK_NODE_LABEL_PREFIX, TopologyManager
from controller.cloud import CloudError, Node
from lab.aws import AwsServer
from tests.controller.aws.conftest import MakeCloud
from tests.controller.aws.topology import AMI, CLUSTER_TAG, Topology
from tests.controller.upstream.topology_tables import (
    GET_NODE_TOPOLOGY,
    INSTANCE_METADATA,
    REQUIRES_RESPONSE,
)


def _topology_calls(aws: AwsServer) -> int:
    return len(aws.control.trail(action="DescribeInstanceTopology"))


@pytest.mark.parametrize(("pattern", "instance_type", "expected"), REQUIRES_RESPONSE)
def test_does_instance_type_require_response(
    pattern: str, instance_type: str, expected: bool
) -> None:
    """TestDoesInstanceTypeRequireResponse."""
    manager = TopologyManager(None, pattern=pattern, clock=lambda: 0.0)  # type: ignore[arg-type]
    assert manager.requires_response(instance_type) is expected


@pytest.mark.parametrize(
    ("case", "instance_type", "answer", "times", "calls", "fails"),
    GET_NODE_TOPOLOGY,
    ids=[row[0] for row in GET_NODE_TOPOLOGY],
)
def test_get_node_topology(
    aws: AwsServer, case: str, instance_type: str, answer: str, times: int, calls: int, fails: bool
) -> None:
    """TestGetNodeTopology: the lab's EC2 answers (an injected error, or an empty list for an
    instance it does not know); the store of unsupported keys decides the number of calls."""
    if answer != "empty":
        aws.control.add_fault(action="DescribeInstanceTopology", code=answer, status=400)
    manager = TopologyManager(aws.client("ec2"), clock=lambda: 0.0)
    for _ in range(times):
        if fails:
            with pytest.raises(ClientError):
                manager.network_nodes(instance_type, "some-region", "some-id")
        else:
            assert manager.network_nodes(instance_type, "some-region", "some-id") is None
    assert _topology_calls(aws) == calls


def test_unsupported_keys_expire_after_a_day(aws: AwsServer) -> None:
    """Upstream's TTL store keeps a "no" for 24 hours, then asks again."""
    now = [0.0]
    manager = TopologyManager(aws.client("ec2"), clock=lambda: now[0])
    assert manager.network_nodes("some-type", "some-region", "some-id") is None
    now[0] = 24 * 3600 - 1
    assert manager.network_nodes("some-type", "some-region", "some-id") is None
    assert _topology_calls(aws) == 1
    now[0] = 24 * 3600
    assert manager.network_nodes("some-type", "some-region", "some-id") is None
    assert _topology_calls(aws) == 2


def _described(aws: AwsServer, instance_id: str) -> dict[str, Any]:
    reservations = aws.client("ec2").describe_instances(InstanceIds=[instance_id])
    return dict(reservations["Reservations"][0]["Instances"][0])


def _zone_id(aws: AwsServer, zone: str) -> str:
    zones = aws.client("ec2").describe_availability_zones(ZoneNames=[zone])
    return zones["AvailabilityZones"][0]["ZoneId"]


def _launch(aws: AwsServer, topo: Topology, instance_type: str) -> tuple[str, str]:
    ec2 = aws.client("ec2")
    inst = ec2.run_instances(
        ImageId=AMI,
        InstanceType=instance_type,  # type: ignore[arg-type]
        MinCount=1,
        MaxCount=1,
        # a public address, as upstream's instance has (its ExternalIP and ExternalDNS)
        NetworkInterfaces=[
            {"DeviceIndex": 0, "SubnetId": topo.public_subnets[0], "AssociatePublicIpAddress": True}
        ],
        TagSpecifications=[{"ResourceType": "instance", "Tags": [CLUSTER_TAG]}],
    )["Instances"][0]
    return inst["InstanceId"], inst["Placement"]["AvailabilityZone"]


@pytest.mark.parametrize(
    ("case", "instance_type", "labelled", "error", "calls", "keys"),
    INSTANCE_METADATA,
    ids=[row[0] for row in INSTANCE_METADATA],
)
def test_instance_metadata_topology(
    aws: AwsServer,
    topo: Topology,
    make_cloud: MakeCloud,
    case: str,
    instance_type: str,
    labelled: bool,
    error: str,
    calls: int,
    keys: list[str] | None,
) -> None:
    """TestInstanceMetadata's topology cases, end to end through InstancesV2."""
    instance_id, zone = _launch(aws, topo, instance_type)
    existing = {}
    if labelled:
        existing = {"topology.k8s.aws/zone-id": "use1-az1"}
        existing |= {f"{NETWORK_NODE_LABEL_PREFIX}{i}": f"nn-{i}" for i in (1, 2, 3)}
    # upstream's node: a providerID whose zone is not the instance's, with an extra segment
    provider_id = f"aws:///us-west-2c/1abc-2def/{instance_id}"
    node = Node(name="n1", provider_id=provider_id, labels=existing)
    cloud = make_cloud()
    aws.control.clear_trail()
    if error:
        aws.control.add_fault(action="DescribeInstanceTopology", code=error, status=400)
    instances = cloud.instances_v2()
    if keys is None:
        with pytest.raises(CloudError, match=error):
            instances.instance_metadata(node)
        described = len(aws.control.trail(action="DescribeInstances"))
    else:
        meta = instances.instance_metadata(node)
        described = len(aws.control.trail(action="DescribeInstances"))
        assert _topology_calls(aws) == calls
        assert sorted(meta.additional_labels) == sorted(keys)
        # every field upstream compares: the providerID as given, the rest from EC2
        inst = _described(aws, instance_id)
        assert meta.provider_id == provider_id
        assert meta.instance_type == instance_type
        assert [(a.type, a.address) for a in meta.node_addresses] == [
            ("InternalIP", inst["PrivateIpAddress"]),
            ("ExternalIP", inst["PublicIpAddress"]),
            ("InternalDNS", inst["PrivateDnsName"]),
            ("Hostname", inst["PrivateDnsName"]),
            ("ExternalDNS", inst["PublicDnsName"]),
        ]
        assert (meta.zone, meta.region) == (zone, "us-east-1")
        expected: dict[str, str] = {}
        if "topology.k8s.aws/zone-id" in keys:
            expected["topology.k8s.aws/zone-id"] = _zone_id(aws, zone)
        if not error and calls:
            # the layers are the lab's answer for the instance, top layer first
            listed = aws.client("ec2").describe_instance_topology(InstanceIds=[instance_id])
            nodes = listed["Instances"][0]["NetworkNodes"]
            expected |= {f"{NETWORK_NODE_LABEL_PREFIX}{i}": n for i, n in enumerate(nodes, 1)}
        assert meta.additional_labels == expected
    assert _topology_calls(aws) >= calls
    # "Should limit ec2:DescribeInstances calls to a single request per instance"
    assert described == 1


class _NotAws:
    """An EC2 client whose endpoint lacks the call and answers a web server's 500 page (stock
    moto, as a LocalStack stand-in, does): botocore raises ``ResponseParserError``, not
    ``ClientError``."""

    def describe_instance_topology(self, **_: object) -> object:
        from botocore.parsers import ResponseParserError

        raise ResponseParserError("Unable to parse response, invalid XML received")


@pytest.mark.parametrize(("instance_type", "raises"), [("m5.large", False), ("p5.48xlarge", True)])
def test_an_unparseable_answer_is_an_error_like_any_other(instance_type: str, raises: bool) -> None:
    """Upstream treats every error of the call alike: a type expected to have a topology fails
    the node's initialization; any other is labelled without the layers."""
    from botocore.parsers import ResponseParserError

    from controller.aws.topology import topology_labels

    manager = TopologyManager(_NotAws(), clock=lambda: 0.0)  # type: ignore[arg-type]
    kwargs = {"instance_type": instance_type, "region": "r", "instance_id": "i-1", "existing": {}}
    if raises:
        with pytest.raises(ResponseParserError):
            topology_labels(manager, **kwargs)  # type: ignore[arg-type]
    else:
        assert topology_labels(manager, **kwargs) == {}  # type: ignore[arg-type]

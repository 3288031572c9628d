"""InstancesV2 against the lab's AWS endpoint: lookups, existence, shutdown, metadata."""

from __future__ import annotations

import pytest
from botocore.exceptions import ClientError

from controller.aws.clients import AWSAPIError
from controller.aws.providerid import (
    InvalidProviderID,
    build_provider_id,
    instance_id_from_name,
    parse_provider_id,
)
from controller.cloud import InstanceNotFound, Node, NodeAddress, RetryAfter
from lab.aws import AwsServer
from tests.controller.aws.conftest import REGION, MakeCloud
from tests.controller.aws.topology import Topology


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("aws:///us-east-1a/i-0abc", "i-0abc"),
        ("aws:////i-0abc", "i-0abc"),
        ("i-0abc", "i-0abc"),
        ("aws:///us-east-1a/fargate-ip-1", "fargate-ip-1"),
        # upstream reads the URL path's last segment, whatever the host or the scheme of a
        # value without aws:// (read as aws:///<value>): these are accepted there too
        ("aws://us-east-1a/i-1", "i-1"),
        ("gce://p/z/i-1", "i-1"),
    ],
)
def test_parse_provider_id(raw: str, expected: str) -> None:
    assert parse_provider_id(raw) == expected


@pytest.mark.parametrize(
    "raw",
    [
        "",
        "aws:///us-east-1a/vol-1",
        "kind://docker/ccm-lab/ccm-lab-worker",
        "gce://p/z/vm-1",
        "aws:///a/i-1/x",
        "aws:///us-east-1a/",
    ],
)
def test_parse_provider_id_rejects(raw: str) -> None:
    with pytest.raises(InvalidProviderID):
        parse_provider_id(raw)


def test_provider_id_and_resource_names() -> None:
    assert build_provider_id("us-east-1a", "i-1") == "aws:///us-east-1a/i-1"
    assert instance_id_from_name("i-0abc.us-east-1.compute.internal") == "i-0abc"
    assert instance_id_from_name("i-0abc") == "i-0abc"
    assert instance_id_from_name("ip-10-0-0-1.ec2.internal") is None


def test_exists_and_shutdown_follow_instance_state(
    aws: AwsServer, topo: Topology, make_cloud: MakeCloud
) -> None:
    inst = make_cloud().instances_v2()
    ec2 = aws.client("ec2")
    node0 = Node(name="node-0", provider_id=topo.provider_id("node-0"))
    node1 = Node(name="node-1", provider_id=topo.provider_id("node-1"))
    assert inst.instance_exists(node0) is True
    assert inst.instance_shutdown(node0) is False
    ec2.stop_instances(InstanceIds=[topo.instances["node-0"]])
    ec2.terminate_instances(InstanceIds=[topo.instances["node-1"]])
    assert inst.instance_exists(node0) is True  # stopped still exists
    assert inst.instance_shutdown(node0) is True
    assert inst.instance_exists(node1) is False  # terminated
    assert inst.instance_shutdown(node1) is False
    gone = Node(name="x", provider_id="aws:///us-east-1a/i-0123456789abcdef0")
    assert inst.instance_exists(gone) is False  # InvalidInstanceID.NotFound


def test_lookup_error_is_not_absence(aws: AwsServer, topo: Topology, make_cloud: MakeCloud) -> None:
    inst = make_cloud().instances_v2()
    with pytest.raises(InstanceNotFound):
        inst.instance_exists(Node(name="node00.k8s.internal"))
    aws.control.add_fault(action="DescribeInstances", code="UnauthorizedOperation", status=403)
    with pytest.raises(AWSAPIError) as err:
        inst.instance_exists(Node(name="n", provider_id=topo.provider_id("node-0")))
    assert err.value.code == "UnauthorizedOperation"
    assert isinstance(err.value.__cause__, ClientError)  # translated, not leaked


def test_metadata(aws: AwsServer, topo: Topology, make_cloud: MakeCloud) -> None:
    inst = make_cloud().instances_v2()
    iid = topo.instances["node-0"]
    md = inst.instance_metadata(Node(name="node-0", provider_id=topo.provider_id("node-0")))
    described = aws.client("ec2").describe_instances(InstanceIds=[iid])["Reservations"][0][
        "Instances"
    ][0]
    zone = described["Placement"]["AvailabilityZone"]
    assert md.provider_id == f"aws:///{zone}/{iid}"
    assert md.instance_type == "t3.medium"
    assert (md.zone, md.region) == (zone, REGION)
    assert md.node_addresses[0] == NodeAddress("InternalIP", described["PrivateIpAddress"])
    assert NodeAddress("InternalDNS", described["PrivateDnsName"]) in md.node_addresses
    assert NodeAddress("Hostname", described["PrivateDnsName"]) in md.node_addresses
    zone_ids = {
        z["ZoneName"]: z["ZoneId"]
        for z in aws.client("ec2").describe_availability_zones()["AvailabilityZones"]
    }
    assert md.additional_labels == {"topology.k8s.aws/zone-id": zone_ids[zone]}


def test_fixed_lookup_order_providerid_then_rbn_then_private_dns(
    aws: AwsServer, topo: Topology, make_cloud: MakeCloud
) -> None:
    inst = make_cloud().instances_v2()
    iid = topo.instances["node-0"]
    dns = topo.private_dns[iid]
    custom = Node(name="node00.k8s.internal", provider_id=topo.provider_id("node-0"))
    assert inst.instance_metadata(custom).provider_id.endswith(iid)
    assert inst.instance_metadata(Node(name=f"{iid}.ec2.internal")).provider_id.endswith(iid)
    assert inst.instance_metadata(Node(name=dns)).provider_id.endswith(iid)
    with pytest.raises(InstanceNotFound, match=r"node00\.k8s\.internal"):
        inst.instance_metadata(Node(name="node00.k8s.internal"))
    with pytest.raises(InstanceNotFound):
        inst.instance_metadata(Node(name=dns.split(".")[0]))  # short hostname: no exact match


def test_legacy_node_name_private_dns_only(
    aws: AwsServer, topo: Topology, make_cloud: MakeCloud
) -> None:
    inst = make_cloud("node-name-private-dns").instances_v2()
    iid = topo.instances["node-0"]
    with pytest.raises(InstanceNotFound):
        inst.instance_metadata(
            Node(name="node00.k8s.internal", provider_id=topo.provider_id("node-0"))
        )
    with pytest.raises(InstanceNotFound):
        inst.instance_metadata(Node(name=iid))
    assert inst.instance_metadata(Node(name=topo.private_dns[iid])).provider_id.endswith(iid)
    calls = aws.trail.calls("DescribeInstances")
    assert all("Filters" in c.params for c in calls)  # never by instance id


def test_throttling_becomes_retry_after(
    aws: AwsServer, topo: Topology, make_cloud: MakeCloud
) -> None:
    inst = make_cloud().instances_v2()
    aws.control.add_fault(action="DescribeInstances", code="RequestLimitExceeded", status=503)
    with pytest.raises(RetryAfter) as err:
        inst.instance_exists(Node(name="n", provider_id=topo.provider_id("node-0")))
    assert err.value.delay > 0

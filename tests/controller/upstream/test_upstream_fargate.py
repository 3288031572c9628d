"""Upstream's Fargate tables (``fargate_tables``) through InstancesV2 and the lab's EC2."""

from __future__ import annotations

import pytest

from controller.aws.instances import fargate_eni_address
from controller.cloud import InstanceNotFound, Node
from lab.aws import AwsServer
from tests.controller.aws.conftest import MakeCloud
from tests.controller.aws.topology import AMI, Topology
from tests.controller.upstream.fargate_tables import FARGATE

ENI_IP = "10.20.0.88"
ENI_IPV6 = "2600:1f18:aaaa:bb00::58"


def _fargate_eni(aws: AwsServer, topo: Topology, *, dns_hostnames: bool) -> dict[str, str]:
    """An ENI attached to an instance that is not a node, as Fargate's are."""
    ec2 = aws.client("ec2")
    subnet = topo.public_subnets[0]
    ec2.modify_vpc_attribute(VpcId=topo.vpc, EnableDnsHostnames={"Value": dns_hostnames})
    ec2.associate_subnet_cidr_block(SubnetId=subnet, Ipv6CidrBlock="2600:1f18:aaaa:bb00::/64")
    host = ec2.run_instances(ImageId=AMI, MinCount=1, MaxCount=1, SubnetId=subnet)
    eni = ec2.create_network_interface(
        SubnetId=subnet, PrivateIpAddress=ENI_IP, Ipv6Addresses=[{"Ipv6Address": ENI_IPV6}]
    )["NetworkInterface"]
    ec2.attach_network_interface(
        NetworkInterfaceId=eni["NetworkInterfaceId"],
        InstanceId=host["Instances"][0]["InstanceId"],
        DeviceIndex=1,
    )
    return {
        "ipv4": ENI_IP,
        "ipv6": ENI_IPV6,
        "dns": eni.get("PrivateDnsName", ""),
        "zone": eni["AvailabilityZone"],
    }


@pytest.mark.parametrize(
    ("case", "name", "families", "asked", "expected"), FARGATE, ids=[r[0] for r in FARGATE]
)
def test_fargate_nodes(
    aws: AwsServer,
    topo: Topology,
    make_cloud: MakeCloud,
    case: str,
    name: str,
    families: tuple[str, ...],
    asked: str,
    expected: object,
) -> None:
    eni = _fargate_eni(aws, topo, dns_hostnames="nodns" not in families)
    assert bool(eni["dns"]) is ("nodns" not in families)
    families = tuple(f for f in families if f != "nodns")
    segment = {"ip": ENI_IP, "dns": f"ip-{ENI_IP.replace('.', '-')}.us-east-1.compute.internal"}
    instance_id = "fargate-" + segment.get(name, name)
    node = Node(name=instance_id, provider_id=f"aws:///us-east-1a/1abc-2def/{instance_id}")
    extra = f"NodeIPFamilies = {','.join(families)}"
    instances = make_cloud(extra=extra).instances_v2()
    aws.control.clear_trail()
    if asked == "addresses":
        addresses = instances.instance_metadata(node).node_addresses
        assert [(a.type, a.address) for a in addresses] == [
            (kind, eni[value])
            for kind, value in expected  # type: ignore[attr-defined]
        ]
    elif asked == "exists":
        assert instances.instance_exists(node) is expected
    elif asked == "shutdown":
        assert instances.instance_shutdown(node) is expected
    elif asked == "type":
        # upstream's own providerID; the variant answers without asking AWS anything
        pid = f"aws:///us-west-2c/1abc-2def/{instance_id}"
        assert instances.instance_type_by_provider_id(pid) == expected  # type: ignore[attr-defined]
        assert aws.trail.calls() == []
        return
    else:
        meta = instances.instance_metadata(node)
        assert meta.zone == eni["zone"]
        assert meta.provider_id == node.provider_id
    # one ENI lookup, never DescribeInstances (nor a topology call: the type is empty)
    assert [e.action for e in aws.trail.calls()] in (
        ["DescribeNetworkInterfaces"],
        ["DescribeNetworkInterfaces", "DescribeAvailabilityZones"],
    )


def test_fargate_metadata_of_a_missing_eni_is_not_found(
    aws: AwsServer, topo: Topology, make_cloud: MakeCloud
) -> None:
    node = Node(name="fargate-10.20.0.99", provider_id="aws:///us-east-1a/p/fargate-10.20.0.99")
    with pytest.raises(InstanceNotFound, match="no attached network interface"):
        make_cloud().instances_v2().instance_metadata(node)


@pytest.mark.parametrize(
    ("instance_id", "address"),
    [
        ("fargate-192.168.164.88", "192.168.164.88"),
        ("fargate-ip-192-168-164-88.us-west-2.compute.internal", "192.168.164.88"),
        ("fargate-ip-192-168-164-88.internal", "192.168.164.88"),
    ],
)
def test_fargate_eni_address(instance_id: str, address: str) -> None:
    """Upstream ``nodeNameToIPAddress`` after the ``fargate-`` prefix."""
    assert fargate_eni_address(instance_id) == address

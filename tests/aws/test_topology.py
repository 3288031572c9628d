"""Topology seeding against the lab's AWS endpoint: every created thing asserted with boto3."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from lab.aws import AwsServer
from lab.aws.seeding import describe_topology, seed_topology
from lab.aws.topology import (
    ELB_ROLE_TAG,
    INTERNAL_ELB_ROLE_TAG,
    GroupSpec,
    NodeSpec,
    Topology,
    TopologyConflict,
    TopologyError,
    TopologySpec,
    delete_topology,
    ec2_client,
    validate,
)

CLUSTER = "lab1"
CLUSTER_TAG = f"kubernetes.io/cluster/{CLUSTER}"

SPEC = TopologySpec(
    cluster_id=CLUSTER,
    region="us-east-1",
    zones=("us-east-1a", "us-east-1b"),
    nodes=(
        NodeSpec("control-plane", "10.0.0.10", "us-east-1a", instance_type="m5.large"),
        NodeSpec("worker-1", "10.0.0.11", "us-east-1a", instance_type="t3.medium"),
        NodeSpec("worker-2", "10.0.16.12", "us-east-1b", extra_groups=("lb-extra",)),
    ),
    extra_groups=(GroupSpec("lb-extra"),),
)


def _tags(raw: Mapping[str, Any]) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in raw.get("Tags", [])}


def _is_public_by_upstream_rule(ec2: Any, vpc_id: str, subnet_id: str) -> bool:
    """cloud-provider-aws's rule: the subnet's route table (explicit association, else the
    VPC's main table) has a route whose GatewayId starts with ``igw``."""
    tables = ec2.describe_route_tables(Filters=[{"Name": "vpc-id", "Values": [vpc_id]}])
    table = next(
        (
            t
            for t in tables["RouteTables"]
            if any(a.get("SubnetId") == subnet_id for a in t.get("Associations", []))
        ),
        None,
    ) or next(
        t for t in tables["RouteTables"] if any(a.get("Main") for a in t.get("Associations", []))
    )
    return any(r.get("GatewayId", "").startswith("igw") for r in table.get("Routes", []))


@pytest.fixture(scope="class")
def seeded_once(aws_endpoint: AwsServer) -> Iterator[tuple[Any, Topology]]:
    """One seed shared by the read-only checks (seeding is ~25 calls)."""
    aws_endpoint.reset()
    ec2 = aws_endpoint.client("ec2")
    yield ec2, seed_topology(ec2, SPEC)
    assert not aws_endpoint.take_internal_errors()


@pytest.fixture
def seeded(aws: AwsServer) -> tuple[Any, Topology]:
    ec2 = aws.client("ec2")
    return ec2, seed_topology(ec2, SPEC)


class TestSeededTopology:
    """Read-only assertions on one seeded topology."""

    def test_vpc_and_subnets(self, seeded_once: tuple[Any, Topology]) -> None:
        ec2, topo = seeded_once
        vpc = ec2.describe_vpcs(VpcIds=[topo.vpc_id])["Vpcs"][0]
        assert vpc["CidrBlock"] == "10.0.0.0/16"
        assert _tags(vpc)[CLUSTER_TAG] == "owned"
        assert set(topo.subnets) == {"us-east-1a", "us-east-1b"}
        for zone, cidr in (("us-east-1a", "10.0.0.0/20"), ("us-east-1b", "10.0.16.0/20")):
            info = topo.subnets[zone]
            subnet = ec2.describe_subnets(SubnetIds=[info.subnet_id])["Subnets"][0]
            assert subnet["VpcId"] == topo.vpc_id
            assert subnet["AvailabilityZone"] == zone
            assert subnet["CidrBlock"] == info.cidr == cidr
            tags = _tags(subnet)
            assert tags[ELB_ROLE_TAG] == "1"
            assert tags[CLUSTER_TAG] == "owned"
            assert INTERNAL_ELB_ROLE_TAG not in tags

    def test_subnets_are_public_by_upstreams_rule(self, seeded_once: tuple[Any, Topology]) -> None:
        ec2, topo = seeded_once
        assert topo.internet_gateway_id is not None
        igw = ec2.describe_internet_gateways(InternetGatewayIds=[topo.internet_gateway_id])
        attachments = igw["InternetGateways"][0]["Attachments"]
        assert [a["VpcId"] for a in attachments] == [topo.vpc_id]
        for info in topo.subnets.values():
            assert info.public
            assert _is_public_by_upstream_rule(ec2, topo.vpc_id, info.subnet_id)
            table = ec2.describe_route_tables(RouteTableIds=[info.route_table_id])["RouteTables"][0]
            default = [r for r in table["Routes"] if r.get("DestinationCidrBlock") == "0.0.0.0/0"]
            assert [r["GatewayId"] for r in default] == [topo.internet_gateway_id]

    def test_node_security_group_and_self_rule(self, seeded_once: tuple[Any, Topology]) -> None:
        ec2, topo = seeded_once
        group_id = topo.node_security_group.group_id
        group = ec2.describe_security_groups(GroupIds=[group_id])["SecurityGroups"][0]
        assert group["GroupName"] == topo.node_security_group.name == f"nodes.{CLUSTER}"
        assert group["VpcId"] == topo.vpc_id
        assert _tags(group)[CLUSTER_TAG] == "owned"
        self_rules = [
            p
            for p in group["IpPermissions"]
            if p["IpProtocol"] == "-1"
            and [pair["GroupId"] for pair in p.get("UserIdGroupPairs", [])] == [group_id]
        ]
        assert len(self_rules) == 1
        extra = ec2.describe_security_groups(GroupIds=[topo.extra_groups["lb-extra"].group_id])
        assert CLUSTER_TAG not in _tags(
            extra["SecurityGroups"][0]
        )  # extra groups untagged by default

    def test_instances(self, seeded_once: tuple[Any, Topology]) -> None:
        ec2, topo = seeded_once
        assert set(topo.instances) == {"control-plane", "worker-1", "worker-2"}
        for node in SPEC.nodes:
            info = topo.instances[node.name]
            raw = ec2.describe_instances(InstanceIds=[info.instance_id])["Reservations"][0][
                "Instances"
            ][0]
            assert raw["State"]["Name"] == "running"
            assert raw["PrivateIpAddress"] == info.private_ip == node.private_ip
            assert raw["PrivateDnsName"] == info.private_dns_name
            assert info.private_dns_name == f"ip-{node.private_ip.replace('.', '-')}.ec2.internal"
            assert raw["Placement"]["AvailabilityZone"] == info.zone == node.zone
            assert raw["SubnetId"] == topo.subnets[node.zone].subnet_id
            assert raw["InstanceType"] == node.instance_type
            tags = _tags(raw)
            assert tags["Name"] == node.name
            assert tags[CLUSTER_TAG] == "owned"
            groups = [g["GroupId"] for g in raw["SecurityGroups"]]
            expected = [topo.node_security_group.group_id] + [
                topo.extra_groups[g].group_id for g in node.extra_groups
            ]
            assert groups == list(info.security_group_ids) == expected
            assert info.provider_id == f"aws:///{node.zone}/{info.instance_id}"


def test_reseed_converges_without_creating(seeded: tuple[Any, Topology]) -> None:
    ec2, first = seeded
    counts = (
        len(ec2.describe_vpcs()["Vpcs"]),
        len(ec2.describe_subnets()["Subnets"]),
        len(ec2.describe_security_groups()["SecurityGroups"]),
        sum(len(r["Instances"]) for r in ec2.describe_instances()["Reservations"]),
        len(ec2.describe_route_tables()["RouteTables"]),
    )
    again = seed_topology(ec2, SPEC)
    assert again == first
    assert Topology.from_dict(json.loads(json.dumps(first.to_dict()))) == first
    assert describe_topology(ec2, SPEC) == first
    assert counts == (
        len(ec2.describe_vpcs()["Vpcs"]),
        len(ec2.describe_subnets()["Subnets"]),
        len(ec2.describe_security_groups()["SecurityGroups"]),
        sum(len(r["Instances"]) for r in ec2.describe_instances()["Reservations"]),
        len(ec2.describe_route_tables()["RouteTables"]),
    )


def test_reseed_restores_a_revoked_self_rule(seeded: tuple[Any, Topology]) -> None:
    ec2, topo = seeded
    gid = topo.node_security_group.group_id
    ec2.revoke_security_group_ingress(
        GroupId=gid, IpPermissions=[{"IpProtocol": "-1", "UserIdGroupPairs": [{"GroupId": gid}]}]
    )
    with pytest.raises(TopologyConflict, match="self-referencing ingress rule"):
        describe_topology(ec2, SPEC)
    seed_topology(ec2, SPEC)
    describe_topology(ec2, SPEC)  # no longer raises


def test_reseed_with_different_ip_is_a_clear_conflict(seeded: tuple[Any, Topology]) -> None:
    ec2, topo = seeded
    moved = dataclasses.replace(
        SPEC, nodes=(dataclasses.replace(SPEC.nodes[0], private_ip="10.0.0.99"), *SPEC.nodes[1:])
    )
    with pytest.raises(TopologyConflict) as caught:
        seed_topology(ec2, moved)
    message = str(caught.value)
    assert "control-plane" in message
    assert "10.0.0.10" in message
    assert "10.0.0.99" in message
    assert topo.instances["control-plane"].instance_id in message


def test_describe_before_seed_says_what_is_missing(aws: AwsServer) -> None:
    with pytest.raises(TopologyConflict, match="the VPC does not exist"):
        describe_topology(aws.client("ec2"), SPEC)


def test_private_shared_topology_with_tagged_extra_group(aws: AwsServer) -> None:
    spec = TopologySpec(
        cluster_id="lab2",
        region="us-east-1",
        zones=("us-east-1c",),
        nodes=(NodeSpec("n1", "10.1.0.20", "us-east-1c", extra_groups=("tagged",)),),
        vpc_cidr="10.1.0.0/16",
        ownership="shared",
        public=False,
        node_group_name="k8s-nodes",
        extra_groups=(GroupSpec("tagged", cluster_tagged=True),),
        http_tokens="required",
        hop_limit=2,
    )
    ec2 = ec2_client(aws.url, "us-east-1")  # a plain URL is enough
    topo = seed_topology(ec2, spec)
    assert topo.internet_gateway_id is None
    subnet = topo.subnets["us-east-1c"]
    raw = ec2.describe_subnets(SubnetIds=[subnet.subnet_id])["Subnets"][0]
    tags = _tags(raw)
    assert tags[INTERNAL_ELB_ROLE_TAG] == "1"
    assert ELB_ROLE_TAG not in tags
    assert tags["kubernetes.io/cluster/lab2"] == "shared"
    assert not subnet.public
    assert not _is_public_by_upstream_rule(ec2, topo.vpc_id, subnet.subnet_id)
    assert topo.node_security_group.name == "k8s-nodes"
    tagged = ec2.describe_security_groups(GroupIds=[topo.extra_groups["tagged"].group_id])
    assert _tags(tagged["SecurityGroups"][0])["kubernetes.io/cluster/lab2"] == "shared"
    inst = ec2.describe_instances(InstanceIds=[topo.instances["n1"].instance_id])
    options = inst["Reservations"][0]["Instances"][0]["MetadataOptions"]
    assert options["HttpTokens"] == "required"
    assert options["HttpPutResponseHopLimit"] == 2


def test_two_clusters_side_by_side(aws: AwsServer) -> None:
    ec2 = aws.client("ec2")
    one = seed_topology(ec2, SPEC)
    other_spec = dataclasses.replace(SPEC, cluster_id="lab3", extra_groups=(), nodes=())
    other = seed_topology(ec2, other_spec)
    assert other.vpc_id != one.vpc_id
    assert other.node_security_group.name == "nodes.lab3"
    assert dict(other.instances) == {}


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        ({"cluster_id": "bad id"}, "cluster_id='bad id'"),
        ({"zones": ()}, "zones=()"),
        ({"zones": ("us-east-1a", "us-east-1a")}, "duplicate zone"),
        ({"zones": ("eu-west-1a",)}, "'eu-west-1a' is not a zone of region 'us-east-1'"),
        ({"vpc_cidr": "10.0.0.0/8"}, "vpc_cidr='10.0.0.0/8'"),
        ({"vpc_cidr": "nonsense"}, "vpc_cidr='nonsense'"),
        ({"subnet_prefix": 30}, "subnet_prefix=30"),
        ({"hop_limit": 0}, "hop_limit=0"),
        ({"nodes": (NodeSpec("a", "10.0.0.10", "us-east-1z"),)}, "nodes[0].zone='us-east-1z'"),
        ({"nodes": (NodeSpec("a", "10.0.99.10", "us-east-1a"),)}, "private_ip='10.0.99.10'"),
        ({"nodes": (NodeSpec("a", "10.0.0.2", "us-east-1a"),)}, "reserves the first four"),
        ({"nodes": (NodeSpec("a", "not-ip", "us-east-1a"),)}, "private_ip='not-ip'"),
        (
            {"nodes": (NodeSpec("a", "10.0.0.10", "us-east-1a"),) * 2},
            "nodes[1].name='a': empty or duplicate",
        ),
        (
            {
                "nodes": (
                    NodeSpec("a", "10.0.0.10", "us-east-1a"),
                    NodeSpec("b", "10.0.0.10", "us-east-1a"),
                )
            },
            "nodes[1].private_ip='10.0.0.10': used by another node",
        ),
        (
            {"nodes": (NodeSpec("a", "10.0.0.10", "us-east-1a", extra_groups=("nope",)),)},
            "'nope' is not declared",
        ),
    ],
)
def test_invalid_specs_name_field_and_value(change: dict[str, Any], needle: str) -> None:
    base = dataclasses.replace(SPEC, extra_groups=(), nodes=())
    with pytest.raises(TopologyError) as caught:
        validate(dataclasses.replace(base, **change))
    assert needle in str(caught.value)


def test_delete_topology_removes_everything_it_seeded(aws: AwsServer) -> None:
    ec2 = aws.client("ec2")
    before = (
        {v["VpcId"] for v in ec2.describe_vpcs()["Vpcs"]},
        {g["GroupId"] for g in ec2.describe_security_groups()["SecurityGroups"]},
    )
    other = seed_topology(ec2, dataclasses.replace(SPEC, cluster_id="keep", nodes=()))
    topo = seed_topology(ec2, SPEC)
    # vpc, 2 subnets, igw, route table, node group, extra group, 3 instances
    assert delete_topology(ec2, CLUSTER) == 10
    with pytest.raises(TopologyConflict, match="the VPC does not exist"):
        describe_topology(ec2, SPEC)
    states = {
        i["InstanceId"]: i["State"]["Name"]
        for r in ec2.describe_instances(
            InstanceIds=[i.instance_id for i in topo.instances.values()]
        )["Reservations"]
        for i in r["Instances"]
    }
    assert set(states.values()) == {"terminated"}
    vpcs = {v["VpcId"] for v in ec2.describe_vpcs()["Vpcs"]}
    assert vpcs == before[0] | {other.vpc_id}
    groups = {g["GroupId"]: g["VpcId"] for g in ec2.describe_security_groups()["SecurityGroups"]}
    assert topo.node_security_group.group_id not in groups
    assert describe_topology(ec2, dataclasses.replace(SPEC, cluster_id="keep", nodes=())) == other
    assert delete_topology(ec2, CLUSTER) == 0  # nothing left: idempotent

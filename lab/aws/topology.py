"""Topology seeding: the EC2 world a cluster's nodes live in, created with boto3.

Role: from a frozen ``TopologySpec`` (cluster id, region, zones, nodes) build, against any EC2
endpoint (the lab's moto, LocalStack, or an explicitly chosen real account):

* a VPC tagged with the cluster tag;
* one subnet per zone, tagged ``kubernetes.io/cluster/<id>=owned|shared`` and
  ``kubernetes.io/role/elb=1`` (public) or ``kubernetes.io/role/internal-elb=1`` (private);
* for public subnets an internet gateway and a route table with ``0.0.0.0/0 -> igw-...``
  explicitly associated with each subnet, so they are public by upstream's rule
  (``reference/upstream-ccm.md`` §3.2: the subnet's route table has a ``GatewayId`` starting
  with ``igw``); private subnets get their own route table without that route;
* the node security group (``nodes.<cluster>`` by default), cluster-tagged, carrying the
  self-referencing "all traffic from itself" ingress rule (``IpProtocol -1`` from its own id),
  which scenario ``k8s-84926`` (failure catalog §1) depends on; optional extra groups;
* one instance per node with its private IP, Name tag, cluster tag, zone, type and groups.

Re-seeding converges instead of failing: every resource carries ``ccm-lab/topology=<id>`` and a
``ccm-lab/part`` tag, is looked up by those tags first and created only when missing; an
existing resource that contradicts the spec (a node with another private IP, a subnet with
another CIDR) raises ``TopologyConflict`` naming both values. ``describe_topology`` reads the
same description back without creating anything; ``delete_topology`` removes what the tags
mark (for endpoints that cannot be reset: LocalStack, an opted-in account).

This module holds the vocabulary (the spec and its validation, the description, the tags) and
``delete_topology``; the seeder behind ``seed_topology`` and ``describe_topology`` is
:mod:`lab.aws.seeding`'s.

Neighbours: ``lab.aws.seeding`` (builds and reads back what is described here),
``lab.aws.server`` (the endpoint these calls usually go to), ``lab.imds`` (serves each node's
metadata from the instances created here), ``lab.compose`` / the pytest plugin (call
``seed_topology``). boto3 stays inside ``lab.aws`` as the import contract requires.
"""

from __future__ import annotations

import ipaddress
import logging
import re
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal, NewType

import boto3
from botocore.config import Config

if TYPE_CHECKING:
    from mypy_boto3_ec2 import EC2Client
    from mypy_boto3_ec2.type_defs import FilterTypeDef

log = logging.getLogger(__name__)

InstanceID = NewType("InstanceID", str)
SubnetID = NewType("SubnetID", str)
SecurityGroupID = NewType("SecurityGroupID", str)

TOPOLOGY_TAG = "ccm-lab/topology"
PART_TAG = "ccm-lab/part"
ELB_ROLE_TAG = "kubernetes.io/role/elb"
INTERNAL_ELB_ROLE_TAG = "kubernetes.io/role/internal-elb"
#: the states of an instance that still counts (not shutting down or gone)
LIVE_STATES = ["pending", "running", "stopping", "stopped"]
_CLUSTER_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}\Z")
#: Images tried in order when the spec names none (moto ships the first two).
DEFAULT_IMAGE_NAMES = ("amazon-eks-node-linux*", "amzn2-ami-hvm-*-x86_64-gp2", "amzn-ami-hvm-*")


class TopologyError(ValueError):
    """The spec is invalid; the message names the field and the value."""


class TopologyConflict(RuntimeError):
    """Something already in EC2 contradicts the spec (re-seed with different values)."""


def cluster_tag_key(cluster_id: str) -> str:
    return f"kubernetes.io/cluster/{cluster_id}"


# -- input -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class GroupSpec:
    """An extra security group nodes may carry besides the node group."""

    name: str
    cluster_tagged: bool = False
    description: str = "ccm-lab extra group"


@dataclass(frozen=True)
class NodeSpec:
    name: str
    private_ip: str
    zone: str
    instance_type: str = "m5.large"
    extra_groups: tuple[str, ...] = ()  # names from TopologySpec.extra_groups
    tags: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class TopologySpec:
    cluster_id: str
    region: str
    zones: tuple[str, ...]
    nodes: tuple[NodeSpec, ...] = ()
    vpc_cidr: str = "10.0.0.0/16"
    subnet_prefix: int = 20  # zone i gets the i-th /prefix block of the VPC CIDR
    ownership: Literal["owned", "shared"] = "owned"
    public: bool = True
    node_group_name: str | None = None  # default "nodes.<cluster_id>"
    extra_groups: tuple[GroupSpec, ...] = ()
    image_id: str | None = None
    http_tokens: Literal["optional", "required"] = "optional"
    hop_limit: int = 1

    @property
    def cluster_tag(self) -> str:
        return cluster_tag_key(self.cluster_id)

    @property
    def group_name(self) -> str:
        return self.node_group_name or f"nodes.{self.cluster_id}"

    def subnet_cidrs(self) -> dict[str, str]:
        blocks = ipaddress.ip_network(self.vpc_cidr).subnets(new_prefix=self.subnet_prefix)
        return {zone: str(block) for zone, block in zip(self.zones, blocks, strict=False)}


def validate(spec: TopologySpec) -> None:
    """Raise ``TopologyError`` for the first invalid field (named with its value)."""
    if not _CLUSTER_ID.match(spec.cluster_id):
        raise TopologyError(f"cluster_id={spec.cluster_id!r}: expected [A-Za-z0-9._-], 1-63 chars")
    if not spec.zones:
        raise TopologyError("zones=(): at least one availability zone is required")
    if len(set(spec.zones)) != len(spec.zones):
        raise TopologyError(f"zones={spec.zones!r}: duplicate zone")
    for zone in spec.zones:
        if not zone.startswith(spec.region) or len(zone) <= len(spec.region):
            raise TopologyError(f"zones: {zone!r} is not a zone of region {spec.region!r}")
    try:
        vpc = ipaddress.ip_network(spec.vpc_cidr)
    except ValueError as exc:
        raise TopologyError(f"vpc_cidr={spec.vpc_cidr!r}: {exc}") from None
    if not 16 <= vpc.prefixlen <= 28 or vpc.version != 4:
        raise TopologyError(f"vpc_cidr={spec.vpc_cidr!r}: AWS allows IPv4 /16 to /28")
    if not vpc.prefixlen <= spec.subnet_prefix <= 28:
        raise TopologyError(f"subnet_prefix={spec.subnet_prefix}: must be in {vpc.prefixlen}..28")
    if 2 ** (spec.subnet_prefix - vpc.prefixlen) < len(spec.zones):
        raise TopologyError(
            f"subnet_prefix={spec.subnet_prefix}: {spec.vpc_cidr} has too few /"
            f"{spec.subnet_prefix} blocks for {len(spec.zones)} zones"
        )
    if not 1 <= spec.hop_limit <= 64:
        raise TopologyError(f"hop_limit={spec.hop_limit}: must be in 1..64")
    extra_names = {g.name for g in spec.extra_groups}
    if spec.group_name in extra_names:
        raise TopologyError(f"extra_groups: {spec.group_name!r} is the node group's name")
    cidrs = spec.subnet_cidrs()
    names: set[str] = set()
    ips: set[str] = set()
    for index, node in enumerate(spec.nodes):
        where = f"nodes[{index}]"
        if not node.name or node.name in names:
            raise TopologyError(f"{where}.name={node.name!r}: empty or duplicate")
        names.add(node.name)
        if node.zone not in cidrs:
            raise TopologyError(f"{where}.zone={node.zone!r}: not one of zones {spec.zones!r}")
        _validate_ip(where, node.private_ip, ipaddress.ip_network(cidrs[node.zone]), ips)
        for group in node.extra_groups:
            if group not in extra_names:
                raise TopologyError(
                    f"{where}.extra_groups: {group!r} is not declared in extra_groups"
                )
        if not node.instance_type:
            raise TopologyError(f"{where}.instance_type={node.instance_type!r}: empty")


def _validate_ip(where: str, raw: str, subnet: Any, seen: set[str]) -> None:
    try:
        address = ipaddress.ip_address(raw)
    except ValueError:
        raise TopologyError(f"{where}.private_ip={raw!r}: not an IP address") from None
    if address not in subnet:
        raise TopologyError(f"{where}.private_ip={raw!r}: outside its zone's subnet {subnet}")
    offset = int(address) - int(subnet.network_address)
    if offset < 4 or address == subnet.broadcast_address:
        raise TopologyError(
            f"{where}.private_ip={raw!r}: AWS reserves the first four and the last address "
            f"of {subnet}"
        )
    if raw in seen:
        raise TopologyError(f"{where}.private_ip={raw!r}: used by another node")
    seen.add(raw)


# -- output ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SubnetInfo:
    subnet_id: SubnetID
    zone: str
    cidr: str
    route_table_id: str
    public: bool


@dataclass(frozen=True)
class GroupInfo:
    group_id: SecurityGroupID
    name: str


@dataclass(frozen=True)
class InstanceInfo:
    name: str
    instance_id: InstanceID
    private_ip: str
    private_dns_name: str
    zone: str
    subnet_id: SubnetID
    instance_type: str
    security_group_ids: tuple[SecurityGroupID, ...]

    @property
    def provider_id(self) -> str:
        """``aws:///<zone>/<instance-id>``, the form the cloud provider builds."""
        return f"aws:///{self.zone}/{self.instance_id}"


@dataclass(frozen=True)
class Topology:
    cluster_id: str
    region: str
    vpc_id: str
    vpc_cidr: str
    internet_gateway_id: str | None
    subnets: Mapping[str, SubnetInfo]  # by zone
    node_security_group: GroupInfo
    extra_groups: Mapping[str, GroupInfo]  # by name
    instances: Mapping[str, InstanceInfo]  # by node name
    image_id: str

    @property
    def route_table_ids(self) -> tuple[str, ...]:
        return tuple(sorted({s.route_table_id for s in self.subnets.values()}))

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able form (for ``.lab/<name>/topology.json``); see ``from_dict``."""
        return {
            "cluster_id": self.cluster_id,
            "region": self.region,
            "vpc_id": self.vpc_id,
            "vpc_cidr": self.vpc_cidr,
            "internet_gateway_id": self.internet_gateway_id,
            "subnets": {z: asdict(s) for z, s in self.subnets.items()},
            "node_security_group": asdict(self.node_security_group),
            "extra_groups": {n: asdict(g) for n, g in self.extra_groups.items()},
            "instances": {
                n: {**asdict(i), "security_group_ids": list(i.security_group_ids)}
                for n, i in self.instances.items()
            },
            "image_id": self.image_id,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Topology:
        return cls(
            cluster_id=data["cluster_id"],
            region=data["region"],
            vpc_id=data["vpc_id"],
            vpc_cidr=data["vpc_cidr"],
            internet_gateway_id=data.get("internet_gateway_id"),
            subnets=MappingProxyType({z: SubnetInfo(**s) for z, s in data["subnets"].items()}),
            node_security_group=GroupInfo(**data["node_security_group"]),
            extra_groups=MappingProxyType(
                {n: GroupInfo(**g) for n, g in data["extra_groups"].items()}
            ),
            instances=MappingProxyType(
                {
                    n: InstanceInfo(**{**i, "security_group_ids": tuple(i["security_group_ids"])})
                    for n, i in data["instances"].items()
                }
            ),
            image_id=data["image_id"],
        )


# -- seeding -----------------------------------------------------------------------------------


def ec2_client(endpoint_url: str | None, region: str) -> EC2Client:
    """An EC2 client for ``endpoint_url`` (None: the SDK's own resolution, e.g. real AWS)."""
    kwargs: dict[str, Any] = {}
    if endpoint_url is not None:
        kwargs.update(aws_access_key_id="testing", aws_secret_access_key="testing")
    return boto3.client(
        "ec2",
        endpoint_url=endpoint_url,
        region_name=region,
        config=Config(retries={"max_attempts": 3, "mode": "standard"}),
        **kwargs,
    )


def delete_topology(ec2: EC2Client, cluster_id: str, *, wait_timeout: float = 120.0) -> int:
    """Delete everything tagged ``ccm-lab/topology=<cluster_id>``, dependents first; returns
    how many resources went. For endpoints without a reset (LocalStack, an opted-in account)."""
    mine: list[FilterTypeDef] = [{"Name": f"tag:{TOPOLOGY_TAG}", "Values": [cluster_id]}]
    deleted = 0
    ids = [
        i["InstanceId"]
        for r in ec2.describe_instances(
            Filters=[*mine, {"Name": "instance-state-name", "Values": [*LIVE_STATES]}]
        )["Reservations"]
        for i in r.get("Instances", [])
    ]
    if ids:
        ec2.terminate_instances(InstanceIds=ids)
        deadline, delay = time.monotonic() + wait_timeout, 0.05
        while any(
            i.get("State", {}).get("Name") != "terminated"
            for r in ec2.describe_instances(InstanceIds=ids)["Reservations"]
            for i in r.get("Instances", [])
        ):
            if time.monotonic() > deadline:
                raise TopologyConflict(f"instances {ids} not terminated after {wait_timeout}s")
            time.sleep(delay)  # poll interval, bounded by the deadline
            delay = min(delay * 2, 2.0)
        deleted += len(ids)
    groups = ec2.describe_security_groups(Filters=mine)["SecurityGroups"]
    for group in groups:  # rules referencing our groups would block their deletion
        refs = [p for p in group.get("IpPermissions", []) if p.get("UserIdGroupPairs")]
        if refs:
            ec2.revoke_security_group_ingress(GroupId=group["GroupId"], IpPermissions=refs)
    for group in groups:
        ec2.delete_security_group(GroupId=group["GroupId"])
    deleted += len(groups)
    for table in ec2.describe_route_tables(Filters=mine)["RouteTables"]:
        for assoc in table.get("Associations", []):
            if not assoc.get("Main") and "RouteTableAssociationId" in assoc:
                ec2.disassociate_route_table(AssociationId=assoc["RouteTableAssociationId"])
        ec2.delete_route_table(RouteTableId=table["RouteTableId"])
        deleted += 1
    for igw in ec2.describe_internet_gateways(Filters=mine)["InternetGateways"]:
        for attachment in igw.get("Attachments", []):
            ec2.detach_internet_gateway(
                InternetGatewayId=igw["InternetGatewayId"], VpcId=attachment["VpcId"]
            )
        ec2.delete_internet_gateway(InternetGatewayId=igw["InternetGatewayId"])
        deleted += 1
    for subnet in ec2.describe_subnets(Filters=mine)["Subnets"]:
        ec2.delete_subnet(SubnetId=subnet["SubnetId"])
        deleted += 1
    for vpc in ec2.describe_vpcs(Filters=mine)["Vpcs"]:
        ec2.delete_vpc(VpcId=vpc["VpcId"])
        deleted += 1
    log.info("topology %s: deleted %d resources", cluster_id, deleted)
    return deleted

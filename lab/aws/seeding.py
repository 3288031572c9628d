"""Topology seeding: build (or read back) the EC2 world a :class:`~lab.aws.topology.TopologySpec`
describes, converging instead of failing.

Role: :func:`seed_topology` creates what is missing and :func:`describe_topology` only reads;
both run :class:`_Seeder`, which takes the world part by part (VPC, internet gateway, route
table, subnets, groups and the self rule, image, instances, then waits for them to run),
looks each part up by its ``ccm-lab/topology`` and ``ccm-lab/part`` tags first and creates it
only when missing; an existing part that contradicts the spec raises
:class:`~lab.aws.topology.TopologyConflict` naming both values.

Neighbours: :mod:`lab.aws.topology` (the spec, its validation, the description this returns,
the tags, and ``delete_topology``), :mod:`lab.aws.runworld` (a real-account run seeds through
its guarded client), :mod:`lab.compose` and the tests (seed the lab's endpoint).

Design: split from :mod:`lab.aws.topology` so the vocabulary (spec and description, which
many modules read) stays apart from the one procedure that talks to EC2 to build it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, cast

from lab.aws.topology import (
    DEFAULT_IMAGE_NAMES,
    ELB_ROLE_TAG,
    INTERNAL_ELB_ROLE_TAG,
    LIVE_STATES,
    PART_TAG,
    TOPOLOGY_TAG,
    GroupInfo,
    InstanceID,
    InstanceInfo,
    NodeSpec,
    SecurityGroupID,
    SubnetID,
    SubnetInfo,
    Topology,
    TopologyConflict,
    TopologyError,
    TopologySpec,
    validate,
)

if TYPE_CHECKING:
    from mypy_boto3_ec2 import EC2Client
    from mypy_boto3_ec2.literals import InstanceTypeType
    from mypy_boto3_ec2.type_defs import FilterTypeDef, InstanceTypeDef, TagTypeDef

log = logging.getLogger(__name__)


def seed_topology(ec2: EC2Client, spec: TopologySpec, *, wait_timeout: float = 60.0) -> Topology:
    """Create (or converge to) ``spec`` and return its description."""
    validate(spec)
    return _Seeder(ec2, spec, create=True, wait_timeout=wait_timeout).run()


def describe_topology(ec2: EC2Client, spec: TopologySpec) -> Topology:
    """Read ``spec``'s topology back; ``TopologyConflict`` if any part is missing."""
    validate(spec)
    return _Seeder(ec2, spec, create=False, wait_timeout=0).run()


class _Seeder:
    def __init__(
        self, ec2: EC2Client, spec: TopologySpec, *, create: bool, wait_timeout: float
    ) -> None:
        self.ec2 = ec2
        self.spec = spec
        self.create = create
        self.wait_timeout = wait_timeout

    def run(self) -> Topology:
        spec = self.spec
        vpc_id = self._vpc()
        igw = self._internet_gateway(vpc_id) if spec.public else None
        route_table = self._route_table(vpc_id, igw)
        subnets = {
            zone: self._subnet(vpc_id, zone, cidr, route_table)
            for zone, cidr in spec.subnet_cidrs().items()
        }
        node_group = self._group(vpc_id, spec.group_name, "node", cluster_tagged=True)
        self._self_rule(node_group.group_id)
        extras = {
            g.name: self._group(vpc_id, g.name, f"extra/{g.name}", cluster_tagged=g.cluster_tagged)
            for g in spec.extra_groups
        }
        image = self._image() if spec.nodes else (spec.image_id or "")
        instances = {
            node.name: self._instance(node, subnets[node.zone], node_group, extras, image)
            for node in spec.nodes
        }
        instances = self._wait_running(instances)
        return Topology(
            cluster_id=spec.cluster_id,
            region=spec.region,
            vpc_id=vpc_id,
            vpc_cidr=spec.vpc_cidr,
            internet_gateway_id=igw,
            subnets=MappingProxyType(subnets),
            node_security_group=node_group,
            extra_groups=MappingProxyType(extras),
            instances=MappingProxyType(instances),
            image_id=image,
        )

    # -- helpers ---------------------------------------------------------------------------

    def _tags(self, part: str, name: str, *, cluster: bool = True) -> list[TagTypeDef]:
        tags: list[TagTypeDef] = [
            {"Key": "Name", "Value": name},
            {"Key": TOPOLOGY_TAG, "Value": self.spec.cluster_id},
            {"Key": PART_TAG, "Value": part},
        ]
        if cluster:
            tags.append({"Key": self.spec.cluster_tag, "Value": self.spec.ownership})
        return tags

    def _filters(self, part: str) -> list[FilterTypeDef]:
        return [
            {"Name": f"tag:{TOPOLOGY_TAG}", "Values": [self.spec.cluster_id]},
            {"Name": f"tag:{PART_TAG}", "Values": [part]},
        ]

    def _missing(self, what: str) -> TopologyConflict:
        return TopologyConflict(f"topology {self.spec.cluster_id!r}: {what} does not exist")

    # -- parts -----------------------------------------------------------------------------

    def _vpc(self) -> str:
        found = self.ec2.describe_vpcs(Filters=self._filters("vpc"))["Vpcs"]
        if found:
            vpc = found[0]
            if vpc.get("CidrBlock") != self.spec.vpc_cidr:
                raise TopologyConflict(
                    f"vpc {vpc.get('VpcId')} has CIDR {vpc.get('CidrBlock')}, "
                    f"spec vpc_cidr={self.spec.vpc_cidr}"
                )
            return vpc["VpcId"]
        if not self.create:
            raise self._missing("the VPC")
        vpc_id = self.ec2.create_vpc(
            CidrBlock=self.spec.vpc_cidr,
            TagSpecifications=[
                {"ResourceType": "vpc", "Tags": self._tags("vpc", self.spec.cluster_id)}
            ],
        )["Vpc"]["VpcId"]
        self.ec2.modify_vpc_attribute(VpcId=vpc_id, EnableDnsSupport={"Value": True})
        self.ec2.modify_vpc_attribute(VpcId=vpc_id, EnableDnsHostnames={"Value": True})
        log.info("topology %s: vpc %s", self.spec.cluster_id, vpc_id)
        return vpc_id

    def _internet_gateway(self, vpc_id: str) -> str:
        found = self.ec2.describe_internet_gateways(Filters=self._filters("igw"))
        gateways = found["InternetGateways"]
        if gateways:
            igw = gateways[0]
            igw_id = igw["InternetGatewayId"]
            if not any(a.get("VpcId") == vpc_id for a in igw.get("Attachments", [])):
                if not self.create:
                    raise self._missing(f"the attachment of {igw_id} to {vpc_id}")
                self.ec2.attach_internet_gateway(InternetGatewayId=igw_id, VpcId=vpc_id)
            return igw_id
        if not self.create:
            raise self._missing("the internet gateway")
        igw_id = self.ec2.create_internet_gateway(
            TagSpecifications=[
                {
                    "ResourceType": "internet-gateway",
                    "Tags": self._tags("igw", self.spec.cluster_id),
                }
            ]
        )["InternetGateway"]["InternetGatewayId"]
        self.ec2.attach_internet_gateway(InternetGatewayId=igw_id, VpcId=vpc_id)
        return igw_id

    def _route_table(self, vpc_id: str, igw: str | None) -> str:
        part = "rtb/public" if igw else "rtb/private"
        tables = self.ec2.describe_route_tables(Filters=self._filters(part))["RouteTables"]
        if tables:
            table = tables[0]
            rtb_id = table["RouteTableId"]
        elif not self.create:
            raise self._missing(f"the {part} route table")
        else:
            rtb_id = self.ec2.create_route_table(
                VpcId=vpc_id,
                TagSpecifications=[
                    {
                        "ResourceType": "route-table",
                        "Tags": self._tags(part, f"{self.spec.cluster_id}-{part[4:]}"),
                    }
                ],
            )["RouteTable"]["RouteTableId"]
            table = {"Routes": []}
        if igw is not None:
            has_default = any(
                r.get("DestinationCidrBlock") == "0.0.0.0/0" and r.get("GatewayId") == igw
                for r in table.get("Routes", [])
            )
            if not has_default:
                if not self.create:
                    raise self._missing(f"the route 0.0.0.0/0 -> {igw} in {rtb_id}")
                self.ec2.create_route(
                    RouteTableId=rtb_id, DestinationCidrBlock="0.0.0.0/0", GatewayId=igw
                )
        return rtb_id

    def _subnet(self, vpc_id: str, zone: str, cidr: str, route_table: str) -> SubnetInfo:
        part = f"subnet/{zone}"
        found = self.ec2.describe_subnets(Filters=self._filters(part))["Subnets"]
        if found:
            subnet = found[0]
            if subnet.get("CidrBlock") != cidr:
                raise TopologyConflict(
                    f"subnet {subnet.get('SubnetId')} in {zone} has CIDR "
                    f"{subnet.get('CidrBlock')}, spec wants {cidr}"
                )
            subnet_id = subnet["SubnetId"]
        elif not self.create:
            raise self._missing(f"the subnet in {zone}")
        else:
            role = ELB_ROLE_TAG if self.spec.public else INTERNAL_ELB_ROLE_TAG
            tags: list[TagTypeDef] = [
                *self._tags(part, f"{self.spec.cluster_id}-{zone}"),
                {"Key": role, "Value": "1"},
            ]
            subnet_id = self.ec2.create_subnet(
                VpcId=vpc_id,
                CidrBlock=cidr,
                AvailabilityZone=zone,
                TagSpecifications=[{"ResourceType": "subnet", "Tags": tags}],
            )["Subnet"]["SubnetId"]
        associated = self.ec2.describe_route_tables(
            Filters=[{"Name": "association.subnet-id", "Values": [subnet_id]}]
        )["RouteTables"]
        current = associated[0]["RouteTableId"] if associated else None
        if current != route_table:
            if not self.create:
                raise self._missing(f"the association of {subnet_id} with {route_table}")
            if current is not None:
                raise TopologyConflict(
                    f"subnet {subnet_id} is associated with {current}, not {route_table}"
                )
            self.ec2.associate_route_table(RouteTableId=route_table, SubnetId=subnet_id)
        return SubnetInfo(SubnetID(subnet_id), zone, cidr, route_table, self.spec.public)

    def _group(self, vpc_id: str, name: str, part: str, *, cluster_tagged: bool) -> GroupInfo:
        found = self.ec2.describe_security_groups(
            Filters=[
                {"Name": "vpc-id", "Values": [vpc_id]},
                {"Name": "group-name", "Values": [name]},
            ]
        )["SecurityGroups"]
        if found:
            return GroupInfo(SecurityGroupID(found[0]["GroupId"]), name)
        if not self.create:
            raise self._missing(f"security group {name!r}")
        group_id = self.ec2.create_security_group(
            GroupName=name,
            Description=f"ccm-lab {part} group of {self.spec.cluster_id}",
            VpcId=vpc_id,
            TagSpecifications=[
                {
                    "ResourceType": "security-group",
                    "Tags": self._tags(f"sg/{part}", name, cluster=cluster_tagged),
                }
            ],
        )["GroupId"]
        return GroupInfo(SecurityGroupID(group_id), name)

    def _self_rule(self, group_id: str) -> None:
        """Ingress "all traffic from itself" on the node group (kops creates the same)."""
        group = self.ec2.describe_security_groups(GroupIds=[group_id])["SecurityGroups"][0]
        for perm in group.get("IpPermissions", []):
            if perm.get("IpProtocol") == "-1" and any(
                p.get("GroupId") == group_id for p in perm.get("UserIdGroupPairs", [])
            ):
                return
        if not self.create:
            raise self._missing(f"the self-referencing ingress rule on {group_id}")
        self.ec2.authorize_security_group_ingress(
            GroupId=group_id,
            IpPermissions=[{"IpProtocol": "-1", "UserIdGroupPairs": [{"GroupId": group_id}]}],
        )

    def _image(self) -> str:
        if self.spec.image_id:
            return self.spec.image_id
        for pattern in DEFAULT_IMAGE_NAMES:
            images = self.ec2.describe_images(Filters=[{"Name": "name", "Values": [pattern]}])
            ids = sorted(i["ImageId"] for i in images.get("Images", []) if "ImageId" in i)
            if ids:
                return ids[0]
        raise TopologyError(
            f"image_id=None: no image matches {DEFAULT_IMAGE_NAMES}; name one in the spec"
        )

    def _instance(
        self,
        node: NodeSpec,
        subnet: SubnetInfo,
        node_group: GroupInfo,
        extras: Mapping[str, GroupInfo],
        image: str,
    ) -> InstanceInfo:
        groups = [node_group.group_id, *(extras[g].group_id for g in node.extra_groups)]
        part = f"node/{node.name}"
        found = [
            inst
            for res in self.ec2.describe_instances(
                Filters=[
                    *self._filters(part),
                    {"Name": "instance-state-name", "Values": LIVE_STATES},
                ]
            )["Reservations"]
            for inst in res.get("Instances", [])
        ]
        if found:
            existing = found[0]
            if existing.get("PrivateIpAddress") != node.private_ip:
                raise TopologyConflict(
                    f"node {node.name!r} is {existing.get('InstanceId')} with private IP "
                    f"{existing.get('PrivateIpAddress')}, spec wants {node.private_ip}"
                )
            return _instance_info(node.name, existing)
        if not self.create:
            raise self._missing(f"the instance of node {node.name!r}")
        extra_tags: list[TagTypeDef] = [{"Key": k, "Value": v} for k, v in node.tags.items()]
        tags = [*self._tags(part, node.name), *extra_tags]
        reply = self.ec2.run_instances(
            ImageId=image,
            InstanceType=cast("InstanceTypeType", node.instance_type),
            MinCount=1,
            MaxCount=1,
            SubnetId=subnet.subnet_id,
            PrivateIpAddress=node.private_ip,
            SecurityGroupIds=groups,
            Placement={"AvailabilityZone": node.zone},
            MetadataOptions={
                "HttpTokens": self.spec.http_tokens,
                "HttpPutResponseHopLimit": self.spec.hop_limit,
                "HttpEndpoint": "enabled",
            },
            TagSpecifications=[{"ResourceType": "instance", "Tags": tags}],
        )
        instance = reply["Instances"][0]
        log.info(
            "topology %s: node %s is %s", self.spec.cluster_id, node.name, instance["InstanceId"]
        )
        return _instance_info(node.name, instance)

    def _wait_running(self, instances: dict[str, InstanceInfo]) -> dict[str, InstanceInfo]:
        """Poll until every instance is running (moto: immediately) and refresh DNS names."""
        if not instances or not self.create:
            return instances
        ids = [i.instance_id for i in instances.values()]
        deadline = time.monotonic() + self.wait_timeout
        delay = 0.05
        while True:
            described = {
                inst["InstanceId"]: inst
                for res in self.ec2.describe_instances(InstanceIds=ids)["Reservations"]
                for inst in res.get("Instances", [])
            }
            states = {iid: d.get("State", {}).get("Name") for iid, d in described.items()}
            if all(s == "running" for s in states.values()):
                return {
                    n: _instance_info(n, described[i.instance_id]) for n, i in instances.items()
                }
            if time.monotonic() > deadline:
                raise TopologyConflict(
                    f"instances not running after {self.wait_timeout}s: {states}"
                )
            time.sleep(delay)  # poll interval, bounded by the deadline above
            delay = min(delay * 2, 2.0)


def _instance_info(name: str, raw: InstanceTypeDef) -> InstanceInfo:
    return InstanceInfo(
        name=name,
        instance_id=InstanceID(raw["InstanceId"]),
        private_ip=raw.get("PrivateIpAddress", ""),
        private_dns_name=raw.get("PrivateDnsName", ""),
        zone=raw.get("Placement", {}).get("AvailabilityZone", ""),
        subnet_id=SubnetID(raw.get("SubnetId", "")),
        instance_type=raw.get("InstanceType", ""),
        security_group_ids=tuple(
            SecurityGroupID(g["GroupId"]) for g in raw.get("SecurityGroups", []) if "GroupId" in g
        ),
    )

"""A minimal cluster topology seeded with boto3 for the controller's AWS tests.

One VPC with an internet gateway, two public subnets (role-tagged, cluster-tagged) and one
private subnet, a cluster-tagged ``nodes`` group whose self rule carries node-to-node traffic
(as kops creates it), and one cluster-tagged instance per node in that group.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mypy_boto3_ec2 import EC2Client

CLUSTER = "lab"
AMI = "ami-12c6146b"  # one of moto's built-in images
CLUSTER_TAG: dict[str, str] = {"Key": f"kubernetes.io/cluster/{CLUSTER}", "Value": "owned"}


@dataclass
class Topology:
    vpc: str
    public_subnets: list[str]
    private_subnet: str
    nodes_group: str
    instances: dict[str, str] = field(default_factory=dict)  # node name -> instance id
    zones: dict[str, str] = field(default_factory=dict)  # instance id -> zone
    private_dns: dict[str, str] = field(default_factory=dict)  # instance id -> dns name

    def provider_id(self, node: str) -> str:
        iid = self.instances[node]
        return f"aws:///{self.zones[iid]}/{iid}"


def _tags(*extra: dict[str, str]) -> list[Any]:
    return [CLUSTER_TAG, *extra]


def seed(ec2: EC2Client, *, nodes: int = 2, region: str = "us-east-1") -> Topology:
    vpc = ec2.create_vpc(CidrBlock="10.20.0.0/16")["Vpc"]["VpcId"]
    igw = ec2.create_internet_gateway()["InternetGateway"]["InternetGatewayId"]
    ec2.attach_internet_gateway(InternetGatewayId=igw, VpcId=vpc)
    public_rt = ec2.create_route_table(VpcId=vpc)["RouteTable"]["RouteTableId"]
    ec2.create_route(RouteTableId=public_rt, DestinationCidrBlock="0.0.0.0/0", GatewayId=igw)
    public: list[str] = []
    for i, zone in enumerate((f"{region}a", f"{region}b")):
        sid = ec2.create_subnet(
            VpcId=vpc,
            CidrBlock=f"10.20.{i}.0/24",
            AvailabilityZone=zone,
            TagSpecifications=[
                {
                    "ResourceType": "subnet",
                    "Tags": _tags({"Key": "kubernetes.io/role/elb", "Value": "1"}),
                }
            ],
        )["Subnet"]["SubnetId"]
        ec2.associate_route_table(RouteTableId=public_rt, SubnetId=sid)
        public.append(sid)
    private = ec2.create_subnet(
        VpcId=vpc,
        CidrBlock="10.20.10.0/24",
        AvailabilityZone=f"{region}a",
        TagSpecifications=[{"ResourceType": "subnet", "Tags": _tags()}],
    )["Subnet"]["SubnetId"]
    nodes_group = ec2.create_security_group(
        GroupName="nodes",
        Description="cluster nodes",
        VpcId=vpc,
        TagSpecifications=[{"ResourceType": "security-group", "Tags": _tags()}],
    )["GroupId"]
    ec2.authorize_security_group_ingress(
        GroupId=nodes_group,
        IpPermissions=[{"IpProtocol": "-1", "UserIdGroupPairs": [{"GroupId": nodes_group}]}],
    )
    topo = Topology(vpc=vpc, public_subnets=public, private_subnet=private, nodes_group=nodes_group)
    for n in range(nodes):
        inst = ec2.run_instances(
            ImageId=AMI,
            MinCount=1,
            MaxCount=1,
            InstanceType="t3.medium",
            SecurityGroupIds=[nodes_group],
            SubnetId=public[n % 2],
            TagSpecifications=[{"ResourceType": "instance", "Tags": _tags()}],
        )["Instances"][0]
        name = f"node-{n}"
        topo.instances[name] = inst["InstanceId"]
        topo.zones[inst["InstanceId"]] = inst["Placement"]["AvailabilityZone"]
        topo.private_dns[inst["InstanceId"]] = inst["PrivateDnsName"]
    return topo


def ingress(ec2: EC2Client, group_id: str) -> set[tuple[str, str]]:
    """A group's ingress as (protocol, source) pairs, group sources only plus CIDRs."""
    perms = ec2.describe_security_groups(GroupIds=[group_id])["SecurityGroups"][0]["IpPermissions"]
    out: set[tuple[str, str]] = set()
    for p in perms:
        for pair in p.get("UserIdGroupPairs", []):
            out.add((p["IpProtocol"], pair["GroupId"]))
        for r in p.get("IpRanges", []):
            out.add((f"{p['IpProtocol']}:{p.get('FromPort')}-{p.get('ToPort')}", r["CidrIp"]))
    return out

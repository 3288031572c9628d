"""Small AWS object builders for the endpoint tests (boto3 against the endpoint)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mypy_boto3_ec2 import EC2Client
    from mypy_boto3_ec2.type_defs import IpPermissionTypeDef
    from mypy_boto3_elb import ElasticLoadBalancingClient

AMI = "ami-12c6146b"  # one of moto's built-in images


def default_vpc(ec2: EC2Client) -> str:
    return ec2.describe_vpcs(Filters=[{"Name": "is-default", "Values": ["true"]}])["Vpcs"][0][
        "VpcId"
    ]


def first_subnet(ec2: EC2Client) -> str:
    return ec2.describe_subnets()["Subnets"][0]["SubnetId"]


def group(ec2: EC2Client, name: str) -> str:
    return ec2.create_security_group(GroupName=name, Description=name, VpcId=default_vpc(ec2))[
        "GroupId"
    ]


def allow_all_from(ec2: EC2Client, target: str, source: str, *, egress: bool = False) -> None:
    """Give ``target`` an "all traffic from/to ``source``" rule (a UserIdGroupPair)."""
    perms: list[IpPermissionTypeDef] = [
        {"IpProtocol": "-1", "UserIdGroupPairs": [{"GroupId": source}]}
    ]
    if egress:
        ec2.authorize_security_group_egress(GroupId=target, IpPermissions=perms)
    else:
        ec2.authorize_security_group_ingress(GroupId=target, IpPermissions=perms)


def instance(ec2: EC2Client, *groups: str) -> str:
    return ec2.run_instances(
        ImageId=AMI,
        MinCount=1,
        MaxCount=1,
        SecurityGroupIds=list(groups),
        SubnetId=first_subnet(ec2),
    )["Instances"][0]["InstanceId"]


def classic_elb(
    elb: ElasticLoadBalancingClient, ec2: EC2Client, name: str, groups: list[str]
) -> str:
    return elb.create_load_balancer(
        LoadBalancerName=name,
        Listeners=[
            {
                "Protocol": "TCP",
                "LoadBalancerPort": 80,
                "InstanceProtocol": "TCP",
                "InstancePort": 30080,
            }
        ],
        Subnets=[first_subnet(ec2)],
        SecurityGroups=groups,
    )["DNSName"]


def instance_state(ec2: EC2Client, instance_id: str) -> str:
    reservations = ec2.describe_instances(InstanceIds=[instance_id])["Reservations"]
    return reservations[0]["Instances"][0]["State"]["Name"]

"""The endpoint's checkpoint and restore (``POST /_lab/checkpoint``, ``/_lab/restore``).

A lab takes a checkpoint right after seeding its world and restores it on every reset instead
of wiping moto and seeding again. These tests hold a restore to what the slow way gives: every
change since the checkpoint undone (resources, tags, attributes, images, instance states), the
same ids for what is created next, and nothing shared between the checkpoint and the live
state, so a second restore after more changes is as clean as the first.
"""

from __future__ import annotations

from typing import Any

import pytest

from lab.aws import AwsServer
from lab.aws.exceptions import AwsControlError
from lab.aws.seeding import seed_topology
from lab.aws.topology import NodeSpec, TopologySpec

SPEC = TopologySpec(
    cluster_id="ckpt",
    region="us-east-1",
    zones=("us-east-1a", "us-east-1b"),
    nodes=(
        NodeSpec(name="a", private_ip="10.0.0.10", zone="us-east-1a"),
        NodeSpec(name="b", private_ip="10.0.16.10", zone="us-east-1b"),
    ),
)


def _world(aws: AwsServer) -> dict[str, Any]:
    """What a client sees of the account: the parts seeding makes and tests change."""
    ec2 = aws.client("ec2")
    elb = aws.client("elb")
    own_images = ec2.describe_images(Owners=["self"])["Images"]
    amazon = ec2.describe_images(
        Owners=["amazon"], Filters=[{"Name": "name", "Values": ["amzn2-ami-hvm-*"]}]
    )["Images"]
    return {
        "instances": ec2.describe_instances()["Reservations"],
        "groups": sorted(ec2.describe_security_groups()["SecurityGroups"], key=str),
        "subnets": sorted(ec2.describe_subnets()["Subnets"], key=str),
        "vpcs": sorted(ec2.describe_vpcs()["Vpcs"], key=str),
        "route_tables": sorted(ec2.describe_route_tables()["RouteTables"], key=str),
        "tags": sorted(ec2.describe_tags()["Tags"], key=str),
        "volumes": sorted(ec2.describe_volumes()["Volumes"], key=str),
        "own_images": own_images,
        "amazon_images": sorted(amazon, key=lambda i: str(i["ImageId"])),
        "launch_permissions": ec2.describe_image_attribute(
            ImageId=min(i["ImageId"] for i in amazon), Attribute="launchPermission"
        )["LaunchPermissions"],
        "elbs": elb.describe_load_balancers()["LoadBalancerDescriptions"],
    }


@pytest.fixture
def seeded(aws: AwsServer) -> Any:
    aws.control.seed(11)
    topology = seed_topology(aws.client("ec2"), SPEC)
    aws.control.checkpoint()
    return topology


def _change_everything(aws: AwsServer, topology: Any) -> None:
    ec2 = aws.client("ec2")
    instance = topology.instances["a"].instance_id
    group = topology.node_security_group.group_id
    ec2.authorize_security_group_ingress(
        GroupId=group,
        IpPermissions=[{"IpProtocol": "tcp", "FromPort": 80, "ToPort": 80,
                        "IpRanges": [{"CidrIp": "0.0.0.0/0"}]}],
    )  # fmt: skip
    ec2.create_tags(Resources=[instance], Tags=[{"Key": "changed", "Value": "yes"}])
    ec2.delete_tags(Resources=[topology.vpc_id], Tags=[{"Key": "Name"}])
    ec2.stop_instances(InstanceIds=[topology.instances["b"].instance_id])
    ec2.create_security_group(GroupName="extra", Description="x", VpcId=topology.vpc_id)
    image = ec2.create_image(InstanceId=instance, Name="mine")["ImageId"]
    ec2.modify_image_attribute(
        ImageId=image, LaunchPermission={"Add": [{"UserId": "111122223333"}]}
    )
    amazon = _world(aws)["amazon_images"][0]["ImageId"]
    ec2.modify_image_attribute(
        ImageId=amazon, LaunchPermission={"Add": [{"UserId": "444455556666"}]}
    )
    ec2.create_volume(AvailabilityZone="us-east-1a", Size=8)
    aws.client("elb").create_load_balancer(
        LoadBalancerName="lb",
        Listeners=[{"Protocol": "TCP", "LoadBalancerPort": 80, "InstancePort": 30080}],
        Subnets=[topology.subnets["us-east-1a"].subnet_id],
    )


def test_restore_undoes_every_change_since_the_checkpoint(aws: AwsServer, seeded: Any) -> None:
    before = _world(aws)
    _change_everything(aws, seeded)
    changed = _world(aws)
    for part in ("instances", "groups", "tags", "own_images", "volumes", "elbs"):
        assert changed[part] != before[part], f"the test did not change {part}"
    assert changed["launch_permissions"] != before["launch_permissions"]

    aws.control.restore()
    assert _world(aws) == before

    # the checkpoint is not the live state: changed again and restored again, still clean
    _change_everything(aws, seeded)
    aws.control.restore()
    assert _world(aws) == before


def test_ids_after_a_restore_repeat_as_after_the_checkpoint(aws: AwsServer, seeded: Any) -> None:
    ec2 = aws.client("ec2")

    def create() -> list[str]:
        group = ec2.create_security_group(GroupName="g", Description="g", VpcId=seeded.vpc_id)[
            "GroupId"
        ]
        volume = ec2.create_volume(AvailabilityZone="us-east-1a", Size=1)["VolumeId"]
        return [group, volume]

    first = create()
    aws.control.restore()
    assert create() == first


def test_restore_is_a_reset_of_the_trail_faults_and_switches(aws: AwsServer, seeded: Any) -> None:
    ec2 = aws.client("ec2")
    aws.control.add_fault(action="DescribeVpcs", code="Throttling")
    aws.control.set_fidelity(elb_sg_order="reversed")
    ec2.describe_subnets()
    assert aws.control.trail()

    aws.control.restore()
    assert aws.control.faults() == []
    assert aws.control.fidelity().elb_sg_order != "reversed"
    assert aws.control.trail() == []
    ec2.describe_vpcs()  # the fault is gone


def test_restore_without_a_checkpoint_is_refused_and_changes_nothing() -> None:
    with AwsServer(region="us-east-1") as fresh:
        group = fresh.client("ec2").create_security_group(GroupName="keep", Description="k")
        with pytest.raises(AwsControlError) as refused:
            fresh.control.restore()
        assert refused.value.status == 409
        assert "no checkpoint" in str(refused.value)
        ids = [
            g["GroupId"] for g in fresh.client("ec2").describe_security_groups()["SecurityGroups"]
        ]
        assert group["GroupId"] in ids

"""NLB target health (``lab.aws.health.network``) through boto3: ``DescribeTargetHealth`` against
the endpoint answers AWS's target states and reason codes from health checks counted on a
:class:`~lab.clock.ManualClock`, through the same prober as Classic ELBs (security groups from
the NLB node's address, then what the node answers).

World: a node group, one instance in the first subnet, a network load balancer in that subnet
(no security groups, as upstream builds NLBs), a TCP target group on 30080 with interval 10,
healthy threshold 2, unhealthy threshold 3, and a TCP listener on 80 forwarding to it."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest
from botocore.exceptions import ClientError

from lab.aws import AwsServer
from lab.aws.health.network import TargetHealth
from lab.aws.health.probe import ProbeResult, ProbeTarget
from lab.aws.health.view import ClassicInstance
from lab.clock import ManualClock
from tests.aws import builders as b

if TYPE_CHECKING:
    from mypy_boto3_ec2 import EC2Client
    from mypy_boto3_elbv2 import ElasticLoadBalancingv2Client


@pytest.fixture
def clock(aws: AwsServer) -> Iterator[ManualClock]:
    """The endpoint's health checks (Classic and NLB share the clock) on a manual clock."""
    manual = ManualClock()
    health = aws.lab.elb_health
    real, prober = health.clock, health.prober
    health.clock = manual
    try:
        yield manual
    finally:
        health.clock, health.prober = real, prober


REGISTERING = ("initial", "Elb.RegistrationInProgress", "Target registration is in progress")
CHECKING = ("initial", "Elb.InitialHealthChecking", "Initial health checks in progress")
HEALTHY = ("healthy", None, None)
UNHEALTHY = ("unhealthy", "Target.FailedHealthChecks", "Health checks failed")
DRAINING = ("draining", "Target.DeregistrationInProgress", "Target deregistration is in progress")
NOT_REGISTERED = ("unused", "Target.NotRegistered", "Target is not registered to the target group")


class World:
    def __init__(self, aws: AwsServer, *, open_node_ports: bool = True) -> None:
        self.aws = aws
        self.ec2: EC2Client = aws.client("ec2")
        self.elbv2: ElasticLoadBalancingv2Client = aws.client("elbv2")
        self.node_sg = b.group(self.ec2, "node")
        subnet = self.ec2.describe_subnets()["Subnets"][0]
        self.subnet_id, self.cidr = subnet["SubnetId"], subnet["CidrBlock"]
        if open_node_ports:
            self.open()
        self.instance = b.instance(self.ec2, self.node_sg)
        self.lb_arn = self.elbv2.create_load_balancer(
            Name="nlb", Type="network", Subnets=[self.subnet_id], Scheme="internet-facing"
        )["LoadBalancers"][0]["LoadBalancerArn"]
        self.tg = self.elbv2.create_target_group(
            Name="tg",
            Protocol="TCP",
            Port=30080,
            VpcId=b.default_vpc(self.ec2),
            TargetType="instance",
            HealthCheckProtocol="TCP",
            HealthCheckPort="traffic-port",
            HealthCheckIntervalSeconds=10,
            HealthCheckTimeoutSeconds=10,
            HealthyThresholdCount=2,
            UnhealthyThresholdCount=3,
        )["TargetGroups"][0]["TargetGroupArn"]
        self.elbv2.create_listener(
            LoadBalancerArn=self.lb_arn,
            Protocol="TCP",
            Port=80,
            DefaultActions=[{"Type": "forward", "TargetGroupArn": self.tg}],
        )

    @property
    def perms(self) -> list[Any]:
        return [
            {
                "IpProtocol": "tcp",
                "FromPort": 30080,
                "ToPort": 30080,
                "IpRanges": [{"CidrIp": self.cidr, "Description": "health checks"}],
            }
        ]

    def open(self) -> None:
        self.ec2.authorize_security_group_ingress(GroupId=self.node_sg, IpPermissions=self.perms)

    def close(self) -> None:
        self.ec2.revoke_security_group_ingress(GroupId=self.node_sg, IpPermissions=self.perms)

    def register(self, *ids: str) -> None:
        self.elbv2.register_targets(
            TargetGroupArn=self.tg,
            Targets=[{"Id": i, "Port": 30080} for i in ids or [self.instance]],
        )

    def deregister(self) -> None:
        self.elbv2.deregister_targets(
            TargetGroupArn=self.tg, Targets=[{"Id": self.instance, "Port": 30080}]
        )

    def health(self, *ids: str) -> list[tuple[str, str | None, str | None]]:
        kwargs: dict[str, Any] = {"TargetGroupArn": self.tg}
        if ids:
            kwargs["Targets"] = [{"Id": i} for i in ids]
        found = self.elbv2.describe_target_health(**kwargs)["TargetHealthDescriptions"]
        return [
            (
                d["TargetHealth"]["State"],
                d["TargetHealth"].get("Reason"),
                d["TargetHealth"].get("Description"),
            )
            for d in found
        ]

    def one(self) -> tuple[str, str | None, str | None]:
        (only,) = self.health(self.instance)
        return only

    def detail(self) -> TargetHealth:
        found = self.aws.lab.nlb_health.target_health(self.tg, self.instance)
        assert found is not None
        return found


def test_a_new_target_goes_initial_then_healthy_after_the_threshold(
    aws: AwsServer, clock: ManualClock
) -> None:
    w = World(aws)
    w.register()
    assert w.one() == REGISTERING  # the first check is due one interval after registration
    clock.advance(10)
    assert w.one() == CHECKING  # one pass of two
    clock.advance(10)
    assert w.one() == HEALTHY
    assert w.health() == [HEALTHY]  # every registered target
    [full] = w.elbv2.describe_target_health(TargetGroupArn=w.tg)["TargetHealthDescriptions"]
    assert full["Target"] == {"Id": w.instance, "Port": 30080}
    assert full["HealthCheckPort"] == "30080"  # traffic-port resolved to the target's port
    assert [(t.after.state, t.after.reason) for t in aws.lab.nlb_health.history] == [
        ("initial", "Elb.RegistrationInProgress"),
        ("initial", "Elb.InitialHealthChecking"),
        ("healthy", ""),
    ]


def test_checks_the_node_group_drops_make_the_target_unhealthy(
    aws: AwsServer, clock: ManualClock
) -> None:
    w = World(aws, open_node_ports=False)
    w.register()
    clock.advance(20)
    assert w.one() == CHECKING  # two failures of three
    clock.advance(10)
    assert w.one() == UNHEALTHY
    detail = w.detail()
    assert "security groups drop the health check from load balancer nlb" in detail.detail
    assert f"no inbound rule of {w.node_sg} allows tcp/30080" in detail.detail, detail
    # the rule arrives: healthy only after two passes in a row
    w.open()
    clock.advance(10)
    assert w.one() == UNHEALTHY
    clock.advance(10)
    assert w.one() == HEALTHY
    # and gone again: unhealthy after three failures
    w.close()
    clock.advance(20)
    assert w.one() == HEALTHY
    clock.advance(10)
    assert w.one() == UNHEALTHY


def test_the_check_source_is_the_nlb_node_address_in_the_subnet(
    aws: AwsServer, clock: ManualClock
) -> None:
    """Checks leave from the NLB node's private address in the target's subnet (the fifth
    address of the subnet): a rule for another CIDR does not admit them, one for that address
    does."""
    w = World(aws, open_node_ports=False)

    def allow(cidr: str) -> None:
        w.ec2.authorize_security_group_ingress(
            GroupId=w.node_sg,
            IpPermissions=[
                {
                    "IpProtocol": "tcp",
                    "FromPort": 30080,
                    "ToPort": 30080,
                    "IpRanges": [{"CidrIp": cidr}],
                }
            ],
        )

    allow("203.0.113.0/24")
    w.register()
    clock.advance(30)
    assert w.one() == UNHEALTHY
    node = str(ipaddress.ip_network(w.cidr).network_address + 4)
    assert f"allows tcp/30080 from {node} " in w.detail().detail, w.detail()
    allow(f"{node}/32")
    clock.advance(20)
    assert w.one() == HEALTHY


def test_node_answer_decides_once_the_groups_let_the_check_in(
    aws: AwsServer, clock: ManualClock
) -> None:
    """The NLB asks the same prober as the Classic model: what the node answers counts."""
    asked: list[tuple[str, str]] = []

    def refuses(inst: ClassicInstance, target: ProbeTarget) -> ProbeResult:
        asked.append((inst.instance_id, str(target.target)))
        return ProbeResult(False, "connection refused")

    aws.lab.elb_health.set_node_answers(refuses)
    w = World(aws)
    w.register()
    clock.advance(30)
    assert w.one() == UNHEALTHY
    assert asked
    assert set(asked) == {(w.instance, "TCP:30080")}


def test_http_checks_use_the_path_and_port(aws: AwsServer, clock: ManualClock) -> None:
    asked: list[str] = []

    def answers(inst: ClassicInstance, target: ProbeTarget) -> ProbeResult:
        asked.append(str(target.target))
        return ProbeResult(True, "HTTP 200")

    aws.lab.elb_health.set_node_answers(answers)
    w = World(aws)
    w.ec2.authorize_security_group_ingress(
        GroupId=w.node_sg,
        IpPermissions=[
            {
                "IpProtocol": "tcp",
                "FromPort": 32000,
                "ToPort": 32000,
                "IpRanges": [{"CidrIp": w.cidr}],
            }
        ],
    )
    w.elbv2.modify_target_group(
        TargetGroupArn=w.tg,
        HealthCheckProtocol="HTTP",
        HealthCheckPort="32000",
        HealthCheckPath="/healthz",
    )
    w.register()
    clock.advance(20)
    assert w.one() == HEALTHY
    assert set(asked) == {"HTTP:32000/healthz"}
    [full] = w.elbv2.describe_target_health(TargetGroupArn=w.tg)["TargetHealthDescriptions"]
    assert full["HealthCheckPort"] == "32000"


def test_deregistration_drains_for_the_delay_then_is_not_registered(
    aws: AwsServer, clock: ManualClock
) -> None:
    w = World(aws)
    w.elbv2.modify_target_group_attributes(
        TargetGroupArn=w.tg,
        Attributes=[{"Key": "deregistration_delay.timeout_seconds", "Value": "60"}],
    )
    w.register()
    clock.advance(20)
    assert w.one() == HEALTHY
    w.deregister()
    assert w.health() == [DRAINING]  # listed while it drains
    assert aws.lab.nlb_health.target_health(w.tg, w.instance) is not None
    clock.advance(59)
    assert w.one() == DRAINING
    clock.advance(1)
    assert w.health() == []
    assert w.one() == NOT_REGISTERED


def test_default_deregistration_delay_is_300(aws: AwsServer, clock: ManualClock) -> None:
    w = World(aws)
    w.register()
    w.deregister()
    clock.advance(299)
    assert w.one() == DRAINING
    clock.advance(1)
    assert w.one() == NOT_REGISTERED


def test_stopped_instance_is_unused_invalid_state_and_starts_over(
    aws: AwsServer, clock: ManualClock
) -> None:
    w = World(aws)
    w.register()
    clock.advance(20)
    assert w.one() == HEALTHY
    w.ec2.stop_instances(InstanceIds=[w.instance])
    assert w.one() == ("unused", "Target.InvalidState", "Target is in the stopped state")
    clock.advance(100)
    assert w.one()[1] == "Target.InvalidState"
    w.ec2.start_instances(InstanceIds=[w.instance])
    assert w.one() == REGISTERING
    clock.advance(20)
    assert w.one() == HEALTHY


def test_group_without_load_balancer_and_zone_not_enabled_are_not_in_use(
    aws: AwsServer, clock: ManualClock
) -> None:
    w = World(aws)
    spare = w.elbv2.create_target_group(
        Name="spare", Protocol="TCP", Port=30081, VpcId=b.default_vpc(w.ec2), TargetType="instance"
    )["TargetGroups"][0]["TargetGroupArn"]
    w.elbv2.register_targets(TargetGroupArn=spare, Targets=[{"Id": w.instance}])
    clock.advance(100)
    [spare_health] = w.elbv2.describe_target_health(TargetGroupArn=spare)[
        "TargetHealthDescriptions"
    ]
    assert spare_health["TargetHealth"] == {
        "State": "unused",
        "Reason": "Target.NotInUse",
        "Description": "Given target group is not configured to receive traffic from ELB",
    }
    # an instance in a zone where the NLB has no subnet
    other = next(
        s["SubnetId"]
        for s in w.ec2.describe_subnets()["Subnets"]
        if s["AvailabilityZone"]
        != w.ec2.describe_subnets(SubnetIds=[w.subnet_id])["Subnets"][0]["AvailabilityZone"]
    )
    elsewhere = w.ec2.run_instances(
        ImageId=b.AMI, MinCount=1, MaxCount=1, SecurityGroupIds=[w.node_sg], SubnetId=other
    )["Instances"][0]["InstanceId"]
    w.register(w.instance, elsewhere)
    clock.advance(20)
    assert dict(zip([w.instance, elsewhere], w.health(w.instance, elsewhere), strict=True)) == {
        w.instance: HEALTHY,
        elsewhere: (
            "unused",
            "Target.NotInUse",
            "Target is in an Availability Zone that is not enabled for the load balancer",
        ),
    }


def test_errors_as_aws(aws: AwsServer, clock: ManualClock) -> None:
    w = World(aws)
    w.register()
    with pytest.raises(ClientError) as err:
        w.elbv2.describe_target_health(TargetGroupArn=w.tg, Targets=[{"Id": "i-0123456789abcdef0"}])
    assert err.value.response["Error"]["Code"] == "InvalidTarget"
    assert "i-0123456789abcdef0" in err.value.response["Error"]["Message"]
    missing = w.tg.replace(w.tg.rsplit("/", 1)[-1], "0123456789abcdef")
    with pytest.raises(ClientError) as err:
        w.elbv2.describe_target_health(TargetGroupArn=missing)
    assert err.value.response["Error"]["Code"] == "TargetGroupNotFound"
    # an existing instance that is not registered, and a registered one at another port
    other = b.instance(w.ec2, w.node_sg)
    assert w.health(other) == [NOT_REGISTERED]
    asked = w.elbv2.describe_target_health(
        TargetGroupArn=w.tg, Targets=[{"Id": w.instance, "Port": 30999}]
    )["TargetHealthDescriptions"]
    assert [(d["Target"]["Port"], d["TargetHealth"]["State"]) for d in asked] == [(30999, "unused")]


def test_stock_moto_answer_differs_and_the_switch_restores_it(
    aws: AwsServer, clock: ManualClock
) -> None:
    """With the switch off, moto says healthy for a target whose checks the node group drops;
    the model says initial, then unhealthy."""
    w = World(aws, open_node_ports=False)
    w.register()
    clock.advance(30)
    assert w.one() == UNHEALTHY
    aws.control.set_fidelity(nlb_health_checks=False)
    assert w.one() == HEALTHY, "stock moto: every registered running target is healthy"
    aws.control.set_fidelity(nlb_health_checks=True)
    assert w.one() == UNHEALTHY
    events = aws.trail.calls("DescribeTargetHealth")
    assert events[-1].answered_by == "fidelity:nlb_health_checks"
    with pytest.raises(Exception, match="must be true or false"):
        aws.control.set_fidelity(nlb_health_checks="yes")

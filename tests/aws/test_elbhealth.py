"""Classic ELB health checks, reason codes and connection draining, through boto3.

``DescribeInstanceHealth`` against the endpoint answers what AWS would: a newly registered
instance is ``OutOfService`` ("Instance registration is still in progress.") until
``HealthyThreshold`` consecutive checks pass, and the checks pass only when the load
balancer's security groups reach the instance on the target port and the node answers.
Thresholds count on the lab clock; these tests drive a :class:`~lab.clock.ManualClock`.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest
from botocore.exceptions import ClientError

from lab.aws import AwsServer
from lab.aws.gates import AwsGates
from lab.aws.health.classic import (
    FAILED_UNHEALTHY,
    NOT_REGISTERED,
    REGISTERING,
    HealthTransition,
)
from lab.aws.health.probe import HealthTarget, ProbeResult, ProbeTarget
from lab.aws.health.view import ClassicInstance
from lab.clock import ManualClock, ScaledClock
from lab.traffic.report import Gate, Gates
from tests.aws import builders as b
from tests.aws.conftest import FakeClock

if TYPE_CHECKING:
    from mypy_boto3_ec2 import EC2Client
    from mypy_boto3_elb import ElasticLoadBalancingClient

NOT_YET = (
    "Instance has not passed the configured HealthyThreshold number of health checks consecutively."
)
DRAINING = "Instance deregistration currently in progress."


@pytest.fixture
def clock(aws: AwsServer) -> Iterator[ManualClock]:
    """The endpoint's health checks on a manual lab clock for one test."""
    manual = ManualClock()
    health = aws.lab.elb_health
    real, prober = health.clock, health.prober
    health.clock = manual
    try:
        yield manual
    finally:
        health.clock, health.prober = real, prober


class World:
    """A node group, a load-balancer group, a Classic ELB (TCP 80 -> 30080) and one node."""

    def __init__(self, aws: AwsServer, *, open_node_ports: bool = True) -> None:
        self.aws = aws
        self.ec2: EC2Client = aws.client("ec2")
        self.elb: ElasticLoadBalancingClient = aws.client("elb")
        self.node_sg = b.group(self.ec2, "node")
        self.lb_sg = b.group(self.ec2, "k8s-elb")
        b.allow_all_from(self.ec2, self.node_sg, self.node_sg)
        if open_node_ports:
            self.open()
        self.instance = b.instance(self.ec2, self.node_sg)
        b.classic_elb(self.elb, self.ec2, "lb", [self.lb_sg])
        self.check("TCP:30080", interval=10, healthy=2, unhealthy=3)

    @property
    def perms(self) -> list[Any]:
        return [
            {
                "IpProtocol": "tcp",
                "FromPort": 30000,
                "ToPort": 32767,
                "UserIdGroupPairs": [{"GroupId": self.lb_sg}],
            }
        ]

    def open(self) -> None:
        self.ec2.authorize_security_group_ingress(GroupId=self.node_sg, IpPermissions=self.perms)

    def close(self) -> None:
        self.ec2.revoke_security_group_ingress(GroupId=self.node_sg, IpPermissions=self.perms)

    def check(self, target: str, *, interval: int, healthy: int, unhealthy: int) -> None:
        self.elb.configure_health_check(
            LoadBalancerName="lb",
            HealthCheck={
                "Target": target,
                "Interval": interval,
                "Timeout": 5,
                "UnhealthyThreshold": unhealthy,
                "HealthyThreshold": healthy,
            },
        )

    def register(self, *ids: str) -> None:
        self.elb.register_instances_with_load_balancer(
            LoadBalancerName="lb", Instances=[{"InstanceId": i} for i in ids or [self.instance]]
        )

    def deregister(self) -> None:
        self.elb.deregister_instances_from_load_balancer(
            LoadBalancerName="lb", Instances=[{"InstanceId": self.instance}]
        )

    def health(self, *ids: str) -> list[tuple[str, str, str]]:
        kwargs: dict[str, Any] = {"LoadBalancerName": "lb"}
        if ids:
            kwargs["Instances"] = [{"InstanceId": i} for i in ids]
        states = self.elb.describe_instance_health(**kwargs)["InstanceStates"]
        return [(s["State"], s["ReasonCode"], s["Description"]) for s in states]

    def one(self) -> tuple[str, str, str]:
        (only,) = self.health(self.instance)
        return only


IN = ("InService", "N/A", "N/A")


def test_new_instance_is_registering_until_the_healthy_threshold(
    aws: AwsServer, clock: ManualClock
) -> None:
    w = World(aws)
    w.register()
    assert w.one() == ("OutOfService", "ELB", REGISTERING)  # first check at t=0 passed
    clock.advance(9)
    assert w.one() == ("OutOfService", "ELB", REGISTERING)  # second check due at t=10
    clock.advance(1)
    assert w.one() == IN
    assert w.health() == [IN]  # all registered instances


def test_blocked_health_check_fails_with_the_instance_reason_code(
    aws: AwsServer, clock: ManualClock
) -> None:
    """The nodes' group does not admit the load balancer's group on the nodePort (seed 000)."""
    w = World(aws, open_node_ports=False)
    w.register()
    clock.advance(19)  # checks at 0, 10: two failures, threshold 3
    assert w.one() == ("OutOfService", "ELB", REGISTERING)
    clock.advance(1)
    assert w.one() == ("OutOfService", "Instance", FAILED_UNHEALTHY)
    ok, reason = aws.lab.elb_health.in_service("lb", w.instance)
    assert not ok
    assert "TCP:30080 timed out after 5s: the security groups drop the health check" in reason
    assert f"no inbound rule of {w.node_sg} allows tcp/30080 from {w.lb_sg}" in reason

    w.open()  # the fix: checks at 30 and 40 pass
    clock.advance(10)
    assert w.one() == ("OutOfService", "Instance", NOT_YET)
    clock.advance(10)
    assert w.one() == IN


def test_revoked_rule_takes_the_instance_out_after_the_unhealthy_threshold(
    aws: AwsServer, clock: ManualClock
) -> None:
    w = World(aws)
    w.register()
    clock.advance(10)
    assert w.one() == IN
    seen: list[HealthTransition] = []
    aws.lab.elb_health.observers.append(seen.append)
    try:
        w.close()  # at t=10, after the check of t=10
        clock.advance(29)  # checks at 20, 30: two failures
        assert w.one() == IN
        clock.advance(1)  # the third failure, at t=40
        assert w.one() == ("OutOfService", "Instance", FAILED_UNHEALTHY)
    finally:
        aws.lab.elb_health.observers.remove(seen.append)
    (went_out,) = seen
    assert went_out.at == 40.0
    assert went_out.before is not None
    assert went_out.before.state == "InService"
    assert went_out.after.state == "OutOfService"


def test_catch_up_stamps_the_transition_at_the_check_that_crossed(
    aws: AwsServer, clock: ManualClock
) -> None:
    """Nobody asked for 95 lab seconds: the checks in between are counted, and the
    transition carries the time of the check that crossed the threshold."""
    w = World(aws)
    w.register()
    clock.advance(95)
    assert w.one() == IN
    into_service = [t for t in aws.lab.elb_health.history if t.after.state == "InService"]
    assert [t.at for t in into_service] == [10.0]


def test_http_target_asks_the_node_and_reports_its_answer(
    aws: AwsServer, clock: ManualClock
) -> None:
    w = World(aws)
    w.check("HTTP:30080/healthz", interval=10, healthy=2, unhealthy=2)
    asked: list[HealthTarget] = []

    def node(instance: ClassicInstance, target: ProbeTarget) -> ProbeResult:
        asked.append(target.target)
        return ProbeResult(False, "HTTP 503 from the node: localEndpoints 0")

    aws.lab.elb_health.set_node_answers(node)
    w.register()
    clock.advance(10)
    assert w.one() == ("OutOfService", "Instance", FAILED_UNHEALTHY)
    assert asked[0] == HealthTarget("HTTP", 30080, "/healthz")
    ok, reason = aws.lab.elb_health.in_service("lb", w.instance)
    assert not ok
    assert reason.endswith("Last health check: HTTP 503 from the node: localEndpoints 0")


def test_instance_states_and_terminated_instances(aws: AwsServer, clock: ManualClock) -> None:
    w = World(aws)
    other = b.instance(w.ec2, w.node_sg)
    w.register(w.instance, other)
    clock.advance(10)
    assert w.health() == [IN, IN]
    w.ec2.stop_instances(InstanceIds=[w.instance])
    assert w.one() == ("OutOfService", "Instance", "Instance is in stopped state.")
    w.ec2.terminate_instances(InstanceIds=[other])
    assert w.health() == [("OutOfService", "Instance", "Instance is in stopped state.")]
    assert w.health(other) == []  # AWS leaves terminated instances out


def test_unregistered_and_unknown_instances(aws: AwsServer, clock: ManualClock) -> None:
    w = World(aws)
    assert w.health() == []
    assert w.one() == ("OutOfService", "ELB", NOT_REGISTERED)
    with pytest.raises(ClientError) as err:
        w.health("i-0000000000000dead")
    assert err.value.response["Error"]["Code"] == "InvalidInstance"
    with pytest.raises(ClientError) as err:
        w.elb.describe_instance_health(LoadBalancerName="nope")
    assert err.value.response["Error"]["Code"] == "LoadBalancerNotFound"


def test_connection_draining_keeps_the_instance_for_the_timeout(
    aws: AwsServer, clock: ManualClock
) -> None:
    w = World(aws)
    w.elb.modify_load_balancer_attributes(
        LoadBalancerName="lb",
        LoadBalancerAttributes={"ConnectionDraining": {"Enabled": True, "Timeout": 60}},
    )
    w.register()
    clock.advance(10)
    assert w.one() == IN
    w.deregister()
    assert w.one() == ("InService", "N/A", DRAINING)
    assert w.health() == []  # no longer among the registered instances
    ok, reason = aws.lab.elb_health.in_service("lb", w.instance)
    assert not ok  # no new requests while draining
    assert reason.startswith(DRAINING)
    assert aws.lab.elb_health.draining("lb") == {w.instance: 60.0}
    clock.advance(59)
    assert w.one() == ("InService", "N/A", DRAINING)
    clock.advance(1)
    assert w.one() == ("OutOfService", "ELB", NOT_REGISTERED)
    assert aws.lab.elb_health.draining("lb") == {}


def test_without_draining_or_traffic_deregistration_is_immediate(
    aws: AwsServer, clock: ManualClock
) -> None:
    w = World(aws)
    w.elb.modify_load_balancer_attributes(
        LoadBalancerName="lb",
        LoadBalancerAttributes={"ConnectionDraining": {"Enabled": False}},
    )
    w.register()
    clock.advance(10)
    w.deregister()
    assert w.one() == ("OutOfService", "ELB", NOT_REGISTERED)

    # draining on, but the instance never got traffic (still registering): nothing to drain
    w.elb.modify_load_balancer_attributes(
        LoadBalancerName="lb",
        LoadBalancerAttributes={"ConnectionDraining": {"Enabled": True, "Timeout": 300}},
    )
    w.register()
    w.deregister()
    assert w.one() == ("OutOfService", "ELB", NOT_REGISTERED)


def test_registering_again_starts_over(aws: AwsServer, clock: ManualClock) -> None:
    w = World(aws)
    w.register()
    clock.advance(10)
    w.deregister()
    w.register()
    assert w.one() == ("OutOfService", "ELB", REGISTERING)


def test_switch_off_gives_motos_answer(aws: AwsServer, clock: ManualClock) -> None:
    w = World(aws, open_node_ports=False)
    w.register()
    clock.advance(100)
    assert w.one() == ("OutOfService", "Instance", FAILED_UNHEALTHY)
    events = aws.trail.calls("DescribeInstanceHealth")
    assert events[-1].answered_by == "fidelity:elb_health_checks"
    aws.control.set_fidelity(elb_health_checks=False)
    assert w.one() == IN  # stock moto: every running registered instance
    assert aws.control.fidelity().elb_health_checks is False
    assert aws.trail.calls("DescribeInstanceHealth")[-1].answered_by == "moto"


def test_default_health_check_of_a_new_load_balancer(aws: AwsServer, clock: ManualClock) -> None:
    """AWS's default check (TCP:<instance port>, 30 s, healthy 10): 270 lab seconds."""
    ec2, elb = aws.client("ec2"), aws.client("elb")
    node = b.group(ec2, "node")
    ec2.authorize_security_group_ingress(
        GroupId=node,
        IpPermissions=[
            {
                "IpProtocol": "tcp",
                "FromPort": 30080,
                "ToPort": 30080,
                "IpRanges": [{"CidrIp": "0.0.0.0/0"}],
            }
        ],
    )
    inst = b.instance(ec2, node)
    b.classic_elb(elb, ec2, "lb", [b.group(ec2, "elb")])
    elb.register_instances_with_load_balancer(
        LoadBalancerName="lb", Instances=[{"InstanceId": inst}]
    )
    clock.advance(269)
    assert aws.lab.elb_health.state("lb")[0].state == "OutOfService"
    clock.advance(1)
    assert aws.lab.elb_health.state("lb")[0].state == "InService"


def test_scaled_clock_runs_thresholds_fast(aws: AwsServer) -> None:
    """At speed 1000, a 2 x 10 s healthy threshold takes 20 ms: wait on the condition."""
    real = aws.lab.elb_health.clock
    aws.lab.elb_health.clock = ScaledClock(1000)
    try:
        w = World(aws)
        w.register()
        from lab.compose import wait_for

        wait_for(lambda: w.one() == IN, timeout=10, what="InService on a fast clock")
    finally:
        aws.lab.elb_health.clock = real


def test_aws_gates_answer_the_traffic_probe(aws: AwsServer, clock: ManualClock) -> None:
    w = World(aws, open_node_ports=False)
    gates: Gates = AwsGates(aws.lab, gate=Gate)
    w.register()
    clock.advance(20)
    ok, reason = gates.in_service("lb", w.instance)
    assert not ok
    assert reason.startswith(f"OutOfService (Instance): {FAILED_UNHEALTHY}")
    gate = gates.ingress(
        dest_groups=[w.node_sg], protocol="tcp", port=30080, source_groups=[w.lb_sg]
    )
    assert gate == Gate(False, gate.reason)
    assert gate.reason.startswith(f"denied: no inbound rule of {w.node_sg}")
    w.open()
    assert gates.ingress(
        dest_groups=[w.node_sg], protocol="tcp", port=30080, source_groups=[w.lb_sg]
    ).allowed
    clock.advance(20)  # checks at 30 and 40 pass
    assert gates.in_service("lb", w.instance) == (True, "InService")


def test_a_check_aws_would_refuse_runs_no_checks(aws: AwsServer, clock: ManualClock) -> None:
    """moto stores ``HTTP:30080`` (no path); AWS refuses it. No check runs, and the reason
    says why; the endpoint does not fail."""
    w = World(aws)
    w.register()
    w.check("HTTP:30080", interval=10, healthy=2, unhealthy=2)
    clock.advance(100)
    assert w.one() == ("OutOfService", "ELB", REGISTERING)
    ok, reason = aws.lab.elb_health.in_service("lb", w.instance)
    assert not ok
    assert "no health check runs: HealthCheck.Target='HTTP:30080': HTTP needs a path" in reason


def test_instance_outside_the_load_balancers_zones(aws: AwsServer, clock: ManualClock) -> None:
    w = World(aws)  # the load balancer is in the first subnet's zone only
    zone = w.ec2.describe_subnets(SubnetIds=[b.first_subnet(w.ec2)])["Subnets"][0][
        "AvailabilityZone"
    ]
    elsewhere = next(
        s["SubnetId"] for s in w.ec2.describe_subnets()["Subnets"] if s["AvailabilityZone"] != zone
    )
    far = w.ec2.run_instances(
        ImageId=b.AMI, MinCount=1, MaxCount=1, SecurityGroupIds=[w.node_sg], SubnetId=elsewhere
    )["Instances"][0]["InstanceId"]
    w.register(w.instance, far)
    clock.advance(10)
    assert w.health(far) == [
        (
            "OutOfService",
            "ELB",
            "Instance is in the EC2 Availability Zone for which LoadBalancer is not configured "
            "to route traffic to.",
        )
    ]
    assert w.one() == IN


def test_pending_instance(aws: AwsServer, clock: ManualClock, fake_clock: FakeClock) -> None:
    aws.control.set_fidelity(instance_pending_s=30)
    w = World(aws)
    w.register()
    assert w.one() == ("OutOfService", "Instance", "Instance is in pending state.")
    fake_clock.advance(31)  # EC2: running now
    clock.advance(10)  # checks at 10 and 20 pass from here
    clock.advance(10)
    assert w.one() == IN


def test_transitions_are_logged(
    aws: AwsServer, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    w = World(aws)
    with caplog.at_level("INFO", logger="lab.aws.health.classic"):
        w.register()
        clock.advance(10)
        w.one()
    lines = [r.getMessage() for r in caplog.records if r.name == "lab.aws.health.classic"]
    assert lines == [
        f"elb lb instance {w.instance}: (new) -> OutOfService (ELB: {REGISTERING}) "
        "last check: TCP:30080 answered (instance running; no node model)",
        f"elb lb instance {w.instance}: OutOfService -> InService (N/A: N/A) "
        "last check: TCP:30080 answered (instance running; no node model)",
    ]


def test_ticker_logs_transitions_without_anyone_asking(aws: AwsServer) -> None:
    health = aws.lab.elb_health
    real = health.clock
    health.clock = ScaledClock(200)  # 2 x 10 s healthy threshold: 0.1 real seconds
    seen: list[HealthTransition] = []
    health.observers.append(seen.append)
    try:
        w = World(aws)
        w.register()
        health.start_ticker(0.02)
        health.start_ticker(0.02)  # idempotent
        from lab.compose import wait_for

        wait_for(
            lambda: any(t.after.state == "InService" for t in seen),
            timeout=10,
            what="the ticker to log InService",
        )
    finally:
        health.stop_ticker()
        health.observers.remove(seen.append)
        health.clock = real
    with pytest.raises(ValueError, match="period must be > 0"):
        health.start_ticker(0)


@pytest.mark.parametrize("stall", ["checks-switched-off", "a-check-aws-would-refuse"])
def test_the_ticker_owes_the_clock_only_checks_it_will_run(aws: AwsServer, stall: str) -> None:
    """Records the ticker leaves behind (health checks switched off, a health check moto kept
    that AWS would have refused) are no work due: lab time runs on. It held for good before."""
    health = aws.lab.elb_health
    real = health.clock
    clock = health.clock = ScaledClock(200)
    try:
        w = World(aws)
        w.register()
        health.start_ticker(0.02)
        w.one()  # the record exists
        if stall == "checks-switched-off":
            aws.control.set_fidelity(elb_health_checks=False)
        else:
            w.check("HTTP:30080", interval=10, healthy=2, unhealthy=3)  # no path: AWS refuses
        start = clock.now()
        deadline = time.monotonic() + 30  # 100 lab seconds take half a real second at 200x
        while clock.now() - start < 100:
            assert time.monotonic() < deadline, f"lab time holds: {clock.owed()}"
            clock.wait_change(0.05)
        assert [o.name for o in clock.owed() if o.due < clock.now() - 1] == []
    finally:
        health.stop_ticker()
        health.clock = real


def test_endpoint_clock_speed_is_a_knob() -> None:
    from lab.aws.__main__ import parse_args

    with pytest.raises(ValueError, match="clock speed must be a finite number > 0, got 0"):
        AwsServer(clock_speed=0)
    assert parse_args(["--clock-speed", "1"]).clock_speed == 1.0
    with AwsServer(clock_speed=1, warm_up=False) as real_time:
        assert real_time.lab.elb_health.clock.speed == 1.0


def test_a_shorter_interval_applies_from_the_next_check(aws: AwsServer, clock: ManualClock) -> None:
    w = World(aws)
    w.check("TCP:30080", interval=300, healthy=2, unhealthy=2)
    w.register()  # first check at 0, the next would be at 300
    clock.advance(5)
    w.check("TCP:30080", interval=10, healthy=2, unhealthy=2)  # next check at 15
    clock.advance(9)
    assert w.one() == ("OutOfService", "ELB", REGISTERING)
    clock.advance(1)
    assert w.one() == IN

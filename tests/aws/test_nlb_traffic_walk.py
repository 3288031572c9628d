"""The traffic probe's NLB hops (``lab.traffic``) against the endpoint, with a fake cluster side
that answers every request that reaches a node: which target the NLB picks (healthy targets,
zones left out of DNS, cross-zone load balancing, fail open) and from which address the node
group sees the request (the client's, unless the target group stops preserving it).

World: two instances in two zones, a network load balancer with a subnet in each, a TCP target
group on 30080 (checks every 10 lab seconds, 2 to turn healthy, 2 to turn unhealthy) and a
listener on 80; the node group admits the subnets' CIDRs (the health checks) and
``198.51.100.0/24`` (the clients) on 30080. Health checks run on a manual clock; which
instances answer them is the test's choice."""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

from lab.aws import AwsServer
from lab.aws.gates import AwsGates
from lab.aws.health.probe import ProbeResult, ProbeTarget
from lab.aws.health.view import ClassicInstance
from lab.clock import ManualClock
from lab.dataplane.kubeproxy import Drop, PodTarget
from lab.traffic.probe import TrafficProbe
from lab.traffic.report import Gate
from tests.aws import builders as b

if TYPE_CHECKING:
    from mypy_boto3_ec2 import EC2Client
    from mypy_boto3_elbv2 import ElasticLoadBalancingv2Client

CLIENTS = "198.51.100.0/24"


class FakeCluster:
    """A Service ``default/web`` whose status names the NLB, a Node per instance, and a pod on
    every node that answers whatever reaches it."""

    def __init__(self, hostname: str, instances: dict[str, str]) -> None:
        self.svc = {
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {"type": "LoadBalancer", "ports": [{"port": 80, "nodePort": 30080}]},
            "status": {"loadBalancer": {"ingress": [{"hostname": hostname}]}},
        }
        self.nodes = [
            {"metadata": {"name": f"node-{iid}"}, "spec": {"providerID": f"aws:///{zone}/{iid}"}}
            for iid, zone in instances.items()
        ]

    def service(self, namespace: str, name: str) -> Any:
        return self.svc if (namespace, name) == ("default", "web") else None

    def node(self, name: str) -> Any:
        return next((n for n in self.nodes if n["metadata"]["name"] == name), None)

    def node_objects(self) -> list[Any]:
        return list(self.nodes)

    def deliver(
        self,
        inst: ClassicInstance,
        node: str,
        node_port: int,
        *,
        namespace: str,
        rng: random.Random,
    ) -> PodTarget | Drop:
        return PodTarget(namespace, f"pod-on-{inst.instance_id}", "", node)


@pytest.fixture
def clock(aws: AwsServer) -> Iterator[ManualClock]:
    manual = ManualClock()
    health = aws.lab.elb_health
    real, prober = health.clock, health.prober
    health.clock = manual
    try:
        yield manual
    finally:
        health.clock, health.prober = real, prober


class World:
    def __init__(self, aws: AwsServer, *, register: tuple[int, ...] = (0, 1)) -> None:
        self.aws = aws
        self.ec2: EC2Client = aws.client("ec2")
        self.elbv2: ElasticLoadBalancingv2Client = aws.client("elbv2")
        self.failing: set[str] = set()
        aws.lab.elb_health.set_node_answers(self._answers)
        subnets = sorted(self.ec2.describe_subnets()["Subnets"], key=lambda s: s["SubnetId"])
        by_zone: dict[str, Any] = {}
        for s in subnets:
            by_zone.setdefault(s["AvailabilityZone"], s)
        two = sorted(by_zone.values(), key=lambda s: s["AvailabilityZone"])[:2]
        self.node_sg = b.group(self.ec2, "node")
        self.ec2.authorize_security_group_ingress(
            GroupId=self.node_sg,
            IpPermissions=[
                {
                    "IpProtocol": "tcp",
                    "FromPort": 30080,
                    "ToPort": 30080,
                    "IpRanges": [{"CidrIp": s["CidrBlock"]} for s in two],
                }
            ],
        )
        self.allow_clients()
        self.instances = [
            self.ec2.run_instances(
                ImageId=b.AMI,
                MinCount=1,
                MaxCount=1,
                SecurityGroupIds=[self.node_sg],
                SubnetId=s["SubnetId"],
            )["Instances"][0]["InstanceId"]
            for s in two
        ]
        self.zones = {
            iid: s["AvailabilityZone"] for iid, s in zip(self.instances, two, strict=True)
        }
        lb = self.elbv2.create_load_balancer(
            Name="nlb", Type="network", Subnets=[s["SubnetId"] for s in two]
        )["LoadBalancers"][0]
        self.lb_arn, self.dns = lb["LoadBalancerArn"], lb["DNSName"]
        self.tg = self.elbv2.create_target_group(
            Name="tg",
            Protocol="TCP",
            Port=30080,
            VpcId=b.default_vpc(self.ec2),
            TargetType="instance",
            HealthCheckIntervalSeconds=10,
            HealthyThresholdCount=2,
            UnhealthyThresholdCount=2,
        )["TargetGroups"][0]["TargetGroupArn"]
        self.elbv2.create_listener(
            LoadBalancerArn=self.lb_arn,
            Protocol="TCP",
            Port=80,
            DefaultActions=[{"Type": "forward", "TargetGroupArn": self.tg}],
        )
        self.elbv2.register_targets(
            TargetGroupArn=self.tg,
            Targets=[{"Id": self.instances[i], "Port": 30080} for i in register],
        )
        self.probe = TrafficProbe(
            aws=aws.lab,
            gates=AwsGates(aws.lab, gate=Gate),
            cluster=FakeCluster(self.dns, self.zones),
        )

    def _answers(self, inst: ClassicInstance, target: ProbeTarget) -> ProbeResult:
        if inst.instance_id in self.failing:
            return ProbeResult(False, "connection refused")
        return ProbeResult(True, "accepted")

    @property
    def client_rule(self) -> list[Any]:
        return [
            {
                "IpProtocol": "tcp",
                "FromPort": 30080,
                "ToPort": 30080,
                "IpRanges": [{"CidrIp": CLIENTS}],
            }
        ]

    def allow_clients(self) -> None:
        self.ec2.authorize_security_group_ingress(
            GroupId=self.node_sg, IpPermissions=self.client_rule
        )

    def forbid_clients(self) -> None:
        self.ec2.revoke_security_group_ingress(GroupId=self.node_sg, IpPermissions=self.client_rule)

    def send(self, n: int = 200, seed: int = 0) -> dict[str, Any]:
        return self.probe.send("web", requests=n, seed=seed).to_json()


def test_healthy_targets_in_both_zones_share_the_requests(
    aws: AwsServer, clock: ManualClock
) -> None:
    w = World(aws)
    clock.advance(30)
    doc = w.send()
    assert doc["load_balancer"] == "nlb"
    assert not doc["dropped"]
    assert sum(doc["answered"].values()) == 200
    assert set(doc["instances"]) == set(w.instances)
    assert all(count > 50 for count in doc["instances"].values()), doc


def test_initial_targets_get_no_traffic(aws: AwsServer, clock: ManualClock) -> None:
    w = World(aws)
    doc = w.send(n=20)
    assert not doc["answered"]
    [drop] = doc["dropped"]
    assert drop["hop"] == "nlb"
    assert drop["reason"].startswith("no healthy target (")
    assert "initial (Elb.RegistrationInProgress" in drop["reason"]


def test_a_zone_without_a_healthy_target_leaves_dns(aws: AwsServer, clock: ManualClock) -> None:
    """Cross-zone off: the failing target's zone is out of DNS, so its clients go to the
    other zone instead of being dropped."""
    w = World(aws)
    w.failing.add(w.instances[1])
    clock.advance(30)
    doc = w.send()
    assert not doc["dropped"], doc
    assert doc["instances"] == {w.instances[0]: 200}


def test_every_target_unhealthy_fails_open(aws: AwsServer, clock: ManualClock) -> None:
    w = World(aws)
    w.failing.update(w.instances)
    clock.advance(30)
    states = {
        d["TargetHealth"]["State"]
        for d in w.elbv2.describe_target_health(TargetGroupArn=w.tg)["TargetHealthDescriptions"]
    }
    assert states == {"unhealthy"}
    doc = w.send()
    assert sum(doc["answered"].values()) == 200, doc
    assert set(doc["instances"]) == set(w.instances)


def test_failing_open_without_cross_zone_drops_in_a_zone_with_no_target(
    aws: AwsServer, clock: ManualClock
) -> None:
    """One target, unhealthy, in the first of two zones: failing open puts both zones in DNS;
    the second zone's node has no target of its own unless cross-zone load balancing is on."""
    w = World(aws, register=(0,))
    w.failing.add(w.instances[0])
    clock.advance(30)
    doc = w.send()
    assert doc["instances"] == {w.instances[0]: sum(doc["answered"].values())}
    [drop] = doc["dropped"]
    assert drop["hop"] == "nlb"
    assert "has no target in its zone and cross-zone load balancing is off" in drop["reason"]
    assert 50 < drop["count"] < 150, doc
    w.elbv2.modify_load_balancer_attributes(
        LoadBalancerArn=w.lb_arn,
        Attributes=[{"Key": "load_balancing.cross_zone.enabled", "Value": "true"}],
    )
    doc = w.send()
    assert not doc["dropped"]
    assert doc["instances"] == {w.instances[0]: 200}


def test_the_node_group_sees_the_client_unless_client_ip_preservation_is_off(
    aws: AwsServer, clock: ManualClock
) -> None:
    w = World(aws)
    clock.advance(30)
    w.forbid_clients()
    doc = w.send(n=20)
    [drop] = doc["dropped"]
    assert drop["hop"] == "node-security-group"
    assert f"no inbound rule of {w.node_sg} allows tcp/30080 from 198.51.100.7" in drop["reason"]
    assert drop["reason"].endswith("the node sees the client's address (client IP preserved)")
    w.elbv2.modify_target_group_attributes(
        TargetGroupArn=w.tg, Attributes=[{"Key": "preserve_client_ip.enabled", "Value": "false"}]
    )
    doc = w.send(n=20)  # now from the NLB node's address, which the health-check rule admits
    assert not doc["dropped"], doc
    assert sum(doc["answered"].values()) == 20


def test_a_listener_on_another_port_drops_at_the_listener(
    aws: AwsServer, clock: ManualClock
) -> None:
    w = World(aws)
    [listener] = w.elbv2.describe_listeners(LoadBalancerArn=w.lb_arn)["Listeners"]
    w.elbv2.modify_listener(ListenerArn=listener["ListenerArn"], Port=8080)
    doc = w.send(n=5)
    assert doc["dropped"] == [
        {"hop": "nlb-listener", "reason": "nlb has no listener on port 80 (has 8080)", "count": 5}
    ]


def test_a_udp_listener_meets_the_node_groups_udp_rules(aws: AwsServer, clock: ManualClock) -> None:
    """UDP datagrams pass only UDP rules; the group's checks are TCP (AWS checks UDP groups
    with TCP, HTTP or HTTPS), which the subnet rule admits."""
    w = World(aws, register=())
    udp = w.elbv2.create_target_group(
        Name="udp", Protocol="UDP", Port=30080, VpcId=b.default_vpc(w.ec2), TargetType="instance"
    )["TargetGroups"][0]["TargetGroupArn"]
    [listener] = w.elbv2.describe_listeners(LoadBalancerArn=w.lb_arn)["Listeners"]
    w.elbv2.delete_listener(ListenerArn=listener["ListenerArn"])
    w.elbv2.create_listener(
        LoadBalancerArn=w.lb_arn,
        Protocol="UDP",
        Port=80,
        DefaultActions=[{"Type": "forward", "TargetGroupArn": udp}],
    )
    w.elbv2.register_targets(TargetGroupArn=udp, Targets=[{"Id": i} for i in w.instances])
    clock.advance(150)  # the group's defaults: every 30 s, healthy after 5
    doc = w.send(n=20)
    [drop] = doc["dropped"]
    assert drop["hop"] == "node-security-group", drop
    assert "allows udp/30080 from 198.51.100." in drop["reason"], drop
    w.ec2.authorize_security_group_ingress(
        GroupId=w.node_sg,
        IpPermissions=[
            {
                "IpProtocol": "udp",
                "FromPort": 30080,
                "ToPort": 30080,
                "IpRanges": [{"CidrIp": CLIENTS}],
            }
        ],
    )
    doc = w.send(n=20)
    assert not doc["dropped"], doc
    assert sum(doc["answered"].values()) == 20


def test_a_target_reaching_itself_with_client_ip_preserved_times_out(
    aws: AwsServer, clock: ManualClock
) -> None:
    """From a node: the requests the NLB sends back to that same node are lost (hairpinning
    with client IP preservation), the others arrive; without preservation all arrive."""
    w = World(aws)
    clock.advance(30)
    me = w.instances[0]
    w.ec2.authorize_security_group_ingress(
        GroupId=w.node_sg,
        IpPermissions=[{"IpProtocol": "-1", "UserIdGroupPairs": [{"GroupId": w.node_sg}]}],
    )
    doc = w.probe.send("web", requests=200, source=f"node-{me}", seed=1).to_json()
    [drop] = doc["dropped"]
    assert drop["hop"] == "nlb"
    assert drop["reason"].startswith(f"{me} reached itself through the NLB")
    assert drop["count"] == doc["instances"][me]
    assert sum(doc["answered"].values()) == doc["instances"][w.instances[1]] > 0
    w.elbv2.modify_target_group_attributes(
        TargetGroupArn=w.tg, Attributes=[{"Key": "preserve_client_ip.enabled", "Value": "false"}]
    )
    doc = w.probe.send("web", requests=200, source=f"node-{me}", seed=1).to_json()
    assert not doc["dropped"], doc

"""Reads shared by one sync wave (controller.aws.wave) against the lab's AWS endpoint: fewer
calls, and never an answer a mutation made stale."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from controller.aws.securitygroups import select_groups
from controller.aws.wave import MISS, WaveCache
from controller.cloud import Node, Service, ServicePort
from lab.aws import AwsServer
from tests.controller.aws.conftest import MakeCloud
from tests.controller.aws.topology import Topology

UIDS = (
    "a0000000-0000-4000-8000-000000000000",
    "b0000000-0000-4000-8000-000000000000",
    "c0000000-0000-4000-8000-000000000000",
)


def services(annotations: dict[str, str] | None = None) -> list[Service]:
    """Three Services in the shop namespace (``annotations`` on each: an NLB's type)."""
    return [
        Service(
            namespace="shop",
            name=f"web-{i}",
            uid=uid,
            ports=(ServicePort(port=80, node_port=30080 + i, name="http"),),
            annotations=dict(annotations or {}),
        )
        for i, uid in enumerate(UIDS)
    ]


def nodes(topo: Topology, *names: str) -> list[Node]:
    return [Node(name=n, provider_id=topo.provider_id(n)) for n in (names or topo.instances)]


def calls(aws: AwsServer, since: int) -> Counter[str]:
    return Counter(e.action for e in aws.trail.events() if e.seq > since)


def registered(aws: AwsServer, svc: Service) -> set[str]:
    name = ("a" + svc.uid.replace("-", ""))[:32]
    desc = aws.client("elb").describe_load_balancers(LoadBalancerNames=[name])
    return {i["InstanceId"] for i in desc["LoadBalancerDescriptions"][0]["Instances"]}


def in_wave(lb: Any, size: int, work: Sequence[Any]) -> None:
    lb.begin_wave(size)
    try:
        for step in work:
            step()
    finally:
        lb.end_wave(size)


def test_a_node_sync_wave_describes_elbs_and_groups_once(
    aws: AwsServer, topo: Topology, make_cloud: MakeCloud
) -> None:
    lb = make_cloud().load_balancer()
    for svc in services():
        lb.ensure_load_balancer("kubernetes", svc, nodes(topo, "node-0"))
    mark = aws.trail.last_seq
    in_wave(
        lb,
        3,
        [lambda s=s: lb.update_load_balancer("kubernetes", s, nodes(topo)) for s in services()],
    )
    seen = calls(aws, mark)
    assert seen["DescribeLoadBalancers"] == 1
    assert seen["DescribeSecurityGroups"] == 1
    assert seen["RegisterInstancesWithLoadBalancer"] == 3, "still one per load balancer"
    assert all(registered(aws, s) == set(topo.instances.values()) for s in services())


def test_a_restart_wave_reads_what_every_service_shares_once(
    aws: AwsServer, topo: Topology, make_cloud: MakeCloud
) -> None:
    for svc in services():
        make_cloud().load_balancer().ensure_load_balancer("kubernetes", svc, nodes(topo))
    lb = make_cloud().load_balancer()  # a restarted controller
    mark = aws.trail.last_seq
    in_wave(
        lb,
        3,
        [lambda s=s: lb.ensure_load_balancer("kubernetes", s, nodes(topo)) for s in services()],
    )
    seen = calls(aws, mark)
    assert seen["DescribeSubnets"] == 1
    assert seen["DescribeRouteTables"] == 1
    assert seen["DescribeSecurityGroups"] == 1
    assert seen["DescribeLoadBalancers"] == 1
    assert seen["DescribeLoadBalancerAttributes"] == 3
    assert not [a for a in seen if not a.startswith(("Describe", "Get", "List"))]


def test_a_change_made_in_the_wave_is_read_back(
    aws: AwsServer, topo: Topology, make_cloud: MakeCloud
) -> None:
    """The description kept for an ELB is dropped when the controller changes that ELB: a
    later sync in the same wave registers the instance again instead of trusting it."""
    lb = make_cloud().load_balancer()
    svc = services()[0]
    lb.ensure_load_balancer("kubernetes", svc, nodes(topo))
    in_wave(
        lb,
        2,
        [
            lambda: lb.update_load_balancer("kubernetes", svc, nodes(topo, "node-0")),
            lambda: lb.update_load_balancer("kubernetes", svc, nodes(topo)),
        ],
    )
    assert registered(aws, svc) == set(topo.instances.values())


def test_nothing_is_kept_outside_a_wave(
    aws: AwsServer, topo: Topology, make_cloud: MakeCloud
) -> None:
    lb = make_cloud().load_balancer()
    svc = services()[0]
    lb.ensure_load_balancer("kubernetes", svc, nodes(topo))
    mark = aws.trail.last_seq
    lb.update_load_balancer("kubernetes", svc, nodes(topo))
    lb.update_load_balancer("kubernetes", svc, nodes(topo))
    assert calls(aws, mark)["DescribeLoadBalancers"] == 2


def test_a_read_in_flight_during_a_mutation_is_not_kept() -> None:
    cache = WaveCache()
    cache.begin(2)

    def fetch() -> str:
        cache.invalidate("ec2")  # a mutation ran while the answer was on its way
        return "before the mutation"

    assert cache.read("ec2", "k", fetch) == "before the mutation"
    assert cache.get("ec2", "k") is MISS
    assert cache.read("ec2", "k", lambda: "after") == "after"
    assert cache.get("ec2", "k") == "after"
    cache.invalidate("elb", ["other"])
    assert cache.get("ec2", "k") == "after", "a named ELB's change leaves EC2 answers"
    cache.end(2)
    assert cache.get("ec2", "k") is MISS, "the wave's end drops everything"


def test_answers_expire_inside_a_long_wave_and_a_listing_is_asked_again() -> None:
    now = [0.0]
    cache = WaveCache(max_age=60.0, clock=lambda: now[0])
    cache.begin(2)
    cache.read("ec2", "k", lambda: 1)
    assert cache.first_listing("elb")
    assert not cache.first_listing("elb"), "once while it is fresh"
    now[0] = 61.0
    assert cache.get("ec2", "k") is MISS
    assert cache.first_listing("elb"), "an expired listing is fetched again, not every name"


def test_groups_are_selected_as_ec2_filters_them(aws: AwsServer, topo: Topology) -> None:
    ec2 = aws.client("ec2")
    lb_group = ec2.create_security_group(GroupName="lb", Description="lb", VpcId=topo.vpc)
    other = ec2.create_vpc(CidrBlock="10.30.0.0/16")["Vpc"]["VpcId"]
    twin = ec2.create_security_group(GroupName="lb", Description="lb", VpcId=other)["GroupId"]
    ec2.authorize_security_group_ingress(
        GroupId=twin,
        IpPermissions=[
            {"IpProtocol": "-1", "UserIdGroupPairs": [{"GroupId": lb_group["GroupId"]}]}
        ],
    )
    every = ec2.describe_security_groups()["SecurityGroups"]
    questions: list[dict[str, Any]] = [
        {"Filters": [{"Name": "group-name", "Values": ["lb"]}]},
        {
            "Filters": [
                {"Name": "group-name", "Values": ["lb"]},
                {"Name": "vpc-id", "Values": [topo.vpc]},
            ]
        },
        {"Filters": [{"Name": "ip-permission.group-id", "Values": [lb_group["GroupId"]]}]},
        {"Filters": [{"Name": "ip-permission.group-id", "Values": [topo.nodes_group]}]},
        {"Filters": [{"Name": "group-id", "Values": [twin, topo.nodes_group]}]},
        {"GroupIds": [topo.nodes_group]},
        {"GroupIds": [twin], "Filters": [{"Name": "vpc-id", "Values": [topo.vpc]}]},
    ]
    for q in questions:
        want = sorted(g["GroupId"] for g in ec2.describe_security_groups(**q)["SecurityGroups"])
        got = select_groups(every, q.get("GroupIds", []), q.get("Filters", []))
        assert got is not None, q
        assert sorted(g["GroupId"] for g in got) == want, q
    assert select_groups(every, [], [{"Name": "group-name", "Values": ["l*"]}]) is None
    assert select_groups(every, ["sg-00000000000000000"], []) is None
    assert select_groups(every, [], [{"Name": "tag:Name", "Values": ["x"]}]) is None

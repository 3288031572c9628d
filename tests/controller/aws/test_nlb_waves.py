"""A node sync over several NLB Services (a batched wave): each NLB whose target groups are
what the whole ensure would keep gets only its targets and node rules; any other falls back
to the whole ensure; a Service updated alone keeps upstream's sequence.

Judged from the lab's AWS state read back with boto3 and from its call trail
(``controller/aws/README.md``, "Sync waves"; ``controller/DEVIATIONS.md``, "Node sync of an
NLB in a wave").
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from typing import Any

from controller.aws.annotations import A_TYPE, PREFIX
from controller.cloud import Service, ServicePort
from lab.aws import AwsServer
from tests.controller.aws.conftest import MakeCloud
from tests.controller.aws.test_loadbalancer import nodes
from tests.controller.aws.test_wave import in_wave
from tests.controller.aws.test_wave import services as wave_services
from tests.controller.aws.topology import Topology


def services() -> list[Service]:
    return wave_services({A_TYPE: "nlb"})


def lb_name(svc: Service) -> str:
    return ("a" + svc.uid.replace("-", ""))[:32]


def calls(aws: AwsServer, since: int) -> Counter[str]:
    return Counter(e.action for e in aws.trail.events() if e.seq > since)


def target_groups(aws: AwsServer, svc: Service) -> list[dict[str, Any]]:
    """The groups the Service's NLB forwards to, read through its listeners
    (``DescribeTargetGroups(LoadBalancerArn=...)`` finds the same since the lab's ELBv2 links
    a group on ``ModifyListener``: ``test_nlb_node_port.py``)."""
    elbv2 = aws.client("elbv2")
    arn = elbv2.describe_load_balancers(Names=[lb_name(svc)])["LoadBalancers"][0]["LoadBalancerArn"]
    listeners = elbv2.describe_listeners(LoadBalancerArn=arn)["Listeners"]
    arns = [x["DefaultActions"][0]["TargetGroupArn"] for x in listeners]
    return [dict(g) for g in elbv2.describe_target_groups(TargetGroupArns=arns)["TargetGroups"]]


def targets(aws: AwsServer, svc: Service) -> set[tuple[int, str, int]]:
    """Every registered target of the Service's NLB as (group port, instance, port); targets
    draining after deregistration are not registered."""
    out: set[tuple[int, str, int]] = set()
    for tg in target_groups(aws, svc):
        health = aws.client("elbv2").describe_target_health(TargetGroupArn=tg["TargetGroupArn"])
        for d in health["TargetHealthDescriptions"]:
            if d["TargetHealth"].get("Reason") != "Target.DeregistrationInProgress":
                out.add((tg["Port"], d["Target"]["Id"], d["Target"]["Port"]))
    return out


def want(topo: Topology, svc: Service, *names: str) -> set[tuple[int, str, int]]:
    return {(p.node_port, topo.instances[n], p.node_port) for p in svc.ports for n in names}


def node_sync(lb: Any, topo: Topology, svcs: list[Service], *names: str) -> None:
    """What the service controller's node sync does: one wave, an update per Service."""
    in_wave(
        lb,
        len(svcs),
        [lambda s=s: lb.update_load_balancer("kubernetes", s, nodes(topo, *names)) for s in svcs],
    )


def node_rules(aws: AwsServer, topo: Topology) -> list[Any]:
    group = aws.client("ec2").describe_security_groups(GroupIds=[topo.nodes_group])
    return sorted(
        (p["IpProtocol"], p.get("FromPort"), r["CidrIp"], r.get("Description", ""))
        for p in group["SecurityGroups"][0]["IpPermissions"]
        for r in p.get("IpRanges", [])
    )


def test_a_node_sync_wave_registers_on_every_nlb_without_listeners_or_attributes(
    aws: AwsServer, topo: Topology, make_cloud: MakeCloud
) -> None:
    lb = make_cloud().load_balancer()
    for svc in services():
        lb.ensure_load_balancer("kubernetes", svc, nodes(topo, "node-0"))
    rules = node_rules(aws, topo)
    mark = aws.trail.last_seq
    node_sync(lb, topo, services(), "node-0", "node-1")  # node-1 joins
    seen = calls(aws, mark)
    assert seen["DescribeListeners"] == 0
    assert seen["DescribeLoadBalancerAttributes"] == 0
    assert (seen["DescribeLoadBalancers"], seen["DescribeTargetGroups"]) == (1, 1)
    assert (seen["DescribeSubnets"], seen["DescribeSecurityGroups"]) == (1, 1)
    assert seen["DescribeTargetHealth"] == 3
    assert seen["RegisterTargets"] == 3, "still one per load balancer"
    for svc in services():
        assert targets(aws, svc) == want(topo, svc, "node-0", "node-1")
    assert node_rules(aws, topo) == rules, "the same node group: the same rules"

    mark = aws.trail.last_seq
    node_sync(lb, topo, services(), "node-1")  # node-0 leaves
    seen = calls(aws, mark)
    assert (seen["DescribeListeners"], seen["DescribeLoadBalancerAttributes"]) == (0, 0)
    assert (seen["DeregisterTargets"], seen["RegisterTargets"]) == (3, 0)
    for svc in services():
        assert targets(aws, svc) == want(topo, svc, "node-1")

    mark = aws.trail.last_seq
    node_sync(lb, topo, services(), "node-1")  # nothing changed
    assert not [a for a in calls(aws, mark) if not a.startswith("Describe")]


def test_a_node_sync_wave_ensures_an_nlb_whose_target_group_differs(
    aws: AwsServer, topo: Topology, make_cloud: MakeCloud
) -> None:
    """A node port moved (the ensure replaces the group) and a listener and its group deleted
    out of band (the ensure makes them again): those NLBs get the whole ensure, web-1 not."""
    lb = make_cloud().load_balancer()
    svcs = services()
    two = (*svcs[2].ports, ServicePort(port=443, node_port=30092, name="https"))
    svcs[2] = replace(svcs[2], ports=two)
    for svc in svcs:
        lb.ensure_load_balancer("kubernetes", svc, nodes(topo, "node-0"))
    elbv2 = aws.client("elbv2")
    arn2 = elbv2.describe_load_balancers(Names=[lb_name(svcs[2])])["LoadBalancers"][0][
        "LoadBalancerArn"
    ]
    [https] = [
        x for x in elbv2.describe_listeners(LoadBalancerArn=arn2)["Listeners"] if x["Port"] == 443
    ]
    elbv2.delete_listener(ListenerArn=https["ListenerArn"])
    elbv2.delete_target_group(TargetGroupArn=https["DefaultActions"][0]["TargetGroupArn"])
    svcs[0] = replace(svcs[0], ports=(ServicePort(port=80, node_port=30090, name="http"),))
    mark = aws.trail.last_seq
    node_sync(lb, topo, svcs, "node-0", "node-1")
    seen = calls(aws, mark)
    assert seen["DescribeListeners"] == 2, "the NLBs of web-0 and web-2"
    assert seen["DescribeLoadBalancerAttributes"] == 2
    assert (seen["CreateTargetGroup"], seen["ModifyListener"]) == (2, 1)
    assert (seen["CreateListener"], seen["ModifyTargetGroup"]) == (1, 0)
    for svc in svcs:
        assert targets(aws, svc) == want(topo, svc, "node-0", "node-1")
    [moved] = target_groups(aws, svcs[0])
    assert moved["Port"] == 30090
    assert len(elbv2.describe_target_groups()["TargetGroups"]) == 4, "the old group is gone"
    listeners = elbv2.describe_listeners(LoadBalancerArn=arn2)["Listeners"]
    assert sorted((x["Port"], x["Protocol"]) for x in listeners) == [(80, "TCP"), (443, "TCP")]


def test_a_changed_health_check_is_ensured_by_the_node_sync(
    aws: AwsServer, topo: Topology, make_cloud: MakeCloud
) -> None:
    """A target group whose health check differs from the Service's falls back too."""
    lb = make_cloud().load_balancer()
    for svc in services():
        lb.ensure_load_balancer("kubernetes", svc, nodes(topo, "node-0"))
    [tg] = target_groups(aws, services()[1])
    aws.client("elbv2").modify_target_group(
        TargetGroupArn=tg["TargetGroupArn"], HealthyThresholdCount=5, UnhealthyThresholdCount=5
    )
    mark = aws.trail.last_seq
    node_sync(lb, topo, services(), "node-0", "node-1")
    seen = calls(aws, mark)
    assert (seen["DescribeListeners"], seen["ModifyTargetGroup"]) == (1, 1)
    [tg] = target_groups(aws, services()[1])
    assert (tg["HealthyThresholdCount"], tg["UnhealthyThresholdCount"]) == (3, 3)
    for svc in services():
        assert targets(aws, svc) == want(topo, svc, "node-0", "node-1")


def test_what_only_the_ensure_judges_falls_back_to_it(
    aws: AwsServer, topo: Topology, make_cloud: MakeCloud
) -> None:
    """Target-group attributes: the whole ensure for that NLB (it reads them per group)."""
    lb = make_cloud().load_balancer()
    svcs = services()
    attrs = {PREFIX + "target-group-attributes": "preserve_client_ip.enabled=true"}
    svcs[1] = replace(svcs[1], annotations={**svcs[1].annotations, **attrs})
    for svc in svcs:
        lb.ensure_load_balancer("kubernetes", svc, nodes(topo, "node-0"))
    mark = aws.trail.last_seq
    node_sync(lb, topo, svcs, "node-0", "node-1")
    seen = calls(aws, mark)
    assert (seen["DescribeListeners"], seen["DescribeTargetGroupAttributes"]) == (1, 1)
    for svc in svcs:
        assert targets(aws, svc) == want(topo, svc, "node-0", "node-1")


def test_managed_security_groups_fall_back_to_the_whole_ensure(
    aws: AwsServer, topo: Topology, make_cloud: MakeCloud
) -> None:
    """``NLBSecurityGroupMode = Managed``: the managed group's rules are the ensure's."""
    lb = make_cloud(extra="NLBSecurityGroupMode = Managed\n").load_balancer()
    for svc in services():
        lb.ensure_load_balancer("kubernetes", svc, nodes(topo, "node-0"))
    mark = aws.trail.last_seq
    node_sync(lb, topo, services(), "node-0", "node-1")
    assert calls(aws, mark)["DescribeListeners"] == 3
    for svc in services():
        assert targets(aws, svc) == want(topo, svc, "node-0", "node-1")


def test_a_service_updated_alone_keeps_upstreams_sequence(
    aws: AwsServer, topo: Topology, make_cloud: MakeCloud
) -> None:
    """No wave, or a wave of one: describe, then the whole ensure (README "Ensure again /
    update")."""
    lb = make_cloud().load_balancer()
    svc = services()[0]
    lb.ensure_load_balancer("kubernetes", svc, nodes(topo, "node-0"))
    mark = aws.trail.last_seq
    in_wave(lb, 1, [lambda: lb.update_load_balancer("kubernetes", svc, nodes(topo))])
    lb.update_load_balancer("kubernetes", svc, nodes(topo, "node-1"))
    seen = calls(aws, mark)
    assert (seen["DescribeListeners"], seen["DescribeLoadBalancerAttributes"]) == (2, 2)
    assert targets(aws, svc) == want(topo, svc, "node-1")

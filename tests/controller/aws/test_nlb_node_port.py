"""An NLB whose Service's node port changed: the ensure puts a new target group behind the
same listener (``ModifyListener``), and the NLB's next syncs find it by
``DescribeTargetGroups(LoadBalancerArn=...)`` as on AWS (the lab's ELBv2 links a group to the
load balancers whose listeners forward to it: gap 18 in ``lab/aws/fidelity.py``).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from controller.cloud import ServicePort
from lab.aws import AwsServer
from tests.controller.aws.conftest import MakeCloud
from tests.controller.aws.test_loadbalancer import mutating, nodes
from tests.controller.aws.test_nlb import service, the_lb
from tests.controller.aws.test_nlb_waves import lb_name, node_sync, services, targets, want
from tests.controller.aws.topology import Topology


def groups_of(aws: AwsServer, lb_arn: str) -> list[dict[str, Any]]:
    elbv2 = aws.client("elbv2")
    return [dict(g) for g in elbv2.describe_target_groups(LoadBalancerArn=lb_arn)["TargetGroups"]]


def test_a_node_port_change_moves_the_listener_and_the_next_syncs_find_the_group(
    aws: AwsServer, topo: Topology, make_cloud: MakeCloud
) -> None:
    lb = make_cloud().load_balancer()
    lb.ensure_load_balancer("kubernetes", service(), nodes(topo))
    arn = the_lb(aws)["LoadBalancerArn"]
    [old] = groups_of(aws, arn)
    moved = service(ports=(ServicePort(port=80, node_port=30090, name="http"),))
    since = aws.trail.last_seq
    lb.ensure_load_balancer("kubernetes", moved, nodes(topo))
    assert "ModifyListener" in mutating(aws, since), "the listener stays, its group changes"
    since = aws.trail.last_seq
    lb.ensure_load_balancer("kubernetes", moved, nodes(topo))  # the next sync
    lb.update_load_balancer("kubernetes", moved, nodes(topo, "node-0"))  # and a node sync
    assert mutating(aws, since) == ["DeregisterTargets"]
    [new] = groups_of(aws, arn)
    assert (new["Port"], new["LoadBalancerArns"]) == (30090, [arn])
    assert new["TargetGroupArn"] != old["TargetGroupArn"]


def test_after_a_wave_replaced_a_group_the_nlb_is_ensured_again(
    aws: AwsServer, topo: Topology, make_cloud: MakeCloud
) -> None:
    """The wave of ``test_nlb_waves`` that replaces web-0's group (its node port moved), then
    a second ensure of that NLB and a second wave: both find the new group."""
    lb = make_cloud().load_balancer()
    svcs = services()
    for svc in svcs:
        lb.ensure_load_balancer("kubernetes", svc, nodes(topo, "node-0"))
    svcs[0] = replace(svcs[0], ports=(ServicePort(port=80, node_port=30090, name="http"),))
    node_sync(lb, topo, svcs, "node-0", "node-1")
    since = aws.trail.last_seq
    lb.ensure_load_balancer("kubernetes", svcs[0], nodes(topo, "node-0", "node-1"))
    node_sync(lb, topo, svcs, "node-1")
    assert mutating(aws, since).count("DeregisterTargets") == 3, "node-0 off each NLB, once"
    for svc in svcs:
        assert targets(aws, svc) == want(topo, svc, "node-1")
    arn = aws.client("elbv2").describe_load_balancers(Names=[lb_name(svcs[0])])["LoadBalancers"][0][
        "LoadBalancerArn"
    ]
    [group] = groups_of(aws, arn)
    assert group["Port"] == 30090

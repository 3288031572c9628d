"""The traffic probe through a network load balancer on a sim lab: our controller builds the
NLB for a 3-replica Deployment (target group per port, instance targets on the nodePort, node
rules for the clients and the health checks), the endpoint's NLB health model checks the
targets on the lab clock, and ``lab.traffic`` follows each request from the listener to a
healthy target, through the node group (which sees the client's own address: instance targets
preserve it) to kube-proxy and a pod."""

from __future__ import annotations

import pytest

from controller.aws.annotations import A_HC_HEALTHY, A_HC_INTERVAL, A_TYPE
from lab.compose import Lab, wait_for
from lab.traffic.report import TrafficReport
from tests.traffic.test_probe import deploy_web, running_pods

pytestmark = pytest.mark.standin("pods run on the sim backend's data plane")

ALLOWED = "203.0.113.0/24"
#: an NLB with checks every 10 lab seconds (not below the 10 s timeout moto gives the group),
#: healthy after 2: the default 30 s x 3 would cost each test 9 real seconds at the lab's speed
NLB = {A_TYPE: "nlb", A_HC_INTERVAL: "10", A_HC_HEALTHY: "2"}


def _healthy_targets(lab: Lab) -> set[str]:
    elbv2 = lab.aws.client("elbv2")
    found: set[str] = set()
    for tg in elbv2.describe_target_groups()["TargetGroups"]:
        for d in elbv2.describe_target_health(TargetGroupArn=tg["TargetGroupArn"])[
            "TargetHealthDescriptions"
        ]:
            if d["TargetHealth"]["State"] == "healthy":
                found.add(d["Target"]["Id"])
    return found


def test_requests_through_the_nlb_reach_the_pods(lab: Lab) -> None:
    lab.start_controller()
    _, core = deploy_web(lab, annotations=NLB)
    workers = {n.instance_id for n in lab.workers}

    def settled() -> TrafficReport | None:
        running = running_pods(core)
        if len(running) != 3:
            return None
        report = lab.traffic.send("web", requests=300, seed=7)
        return report if set(report.answered) == set(running) else None

    report = wait_for(settled, timeout=90, what="traffic through the NLB reaching 3 pods")
    assert report.answered_total == 300, report.to_json()
    assert not report.dropped
    elbv2 = lab.aws.client("elbv2")
    [nlb] = elbv2.describe_load_balancers()["LoadBalancers"]
    assert (nlb["Type"], report.load_balancer) == ("network", nlb["LoadBalancerName"])
    # both workers get requests (their zones are the NLB's) and both report healthy
    assert set(report.instances) == workers
    assert _healthy_targets(lab) == workers


def test_a_client_outside_load_balancer_source_ranges_is_dropped_at_the_node_group(
    lab: Lab,
) -> None:
    """The NLB has no security group: the node group admits clients by their own address
    (``loadBalancerSourceRanges``), so a client outside the range dies there, while the NLB's
    health checks (from its private addresses in the VPC) keep the targets healthy."""
    lab.start_controller()
    _, core = deploy_web(lab, annotations=NLB, source_ranges=[ALLOWED])

    def allowed_reaches_pods() -> TrafficReport | None:
        if len(running_pods(core)) != 3:
            return None
        report = lab.traffic.send("web", requests=100, source=ALLOWED, seed=1)
        return report if report.answered_total == 100 else None

    wait_for(allowed_reaches_pods, timeout=90, what="traffic from the allowed range")
    assert _healthy_targets(lab) == {n.instance_id for n in lab.workers}

    outside = lab.traffic.send("web", requests=100, seed=2)  # 198.51.100.7
    assert outside.answered_total == 0, outside.to_json()
    ((hop, reason),) = outside.dropped
    assert hop == "node-security-group"
    assert lab.topology is not None
    node_sg = lab.topology.node_security_group.group_id
    assert f"no inbound rule of {node_sg}" in reason, reason
    assert "from 198.51.100.7" in reason, reason
    assert "the node sees the client's address (client IP preserved)" in reason

"""The traffic probe with the AWS gates: security-group verdicts and ELB health from the endpoint.

A sim lab, its controller provisioning a Classic ELB for a 3-replica Deployment, then the probe
built with :class:`lab.aws.gates.AwsGates` (what ``Lab.traffic`` uses too). The ELB's
health checks run on a manual lab clock here, so each step is exact:

1. just registered, every instance is "registration still in progress": no request gets past
   the load balancer;
2. after HealthyThreshold x Interval lab seconds the instances are InService and the pods
   answer every request;
3. the node group's rule that admits the load balancer's group is revoked (seed 000's outage):
   requests die at the node's security group at once, and after UnhealthyThreshold x Interval
   the instances are OutOfService with the security group that blocks the health check named
   as the root cause.

The pods run on the sim's data plane, whose endpoint controllers lag the kubelet by a batch
period; a test that sends as soon as the pods run races them. ``lab.settle()`` is the barrier
(``lab.settle``): the last test holds the EndpointSlice controller back to show the race
happening every time, and the barrier closing it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from lab.aws.gates import AwsGates
from lab.clock import ManualClock
from lab.compose import Lab, wait_for
from lab.traffic.probe import TrafficProbe
from lab.traffic.report import Gate
from tests.traffic.test_probe import deploy_web, running_pods

pytestmark = pytest.mark.standin("pods run on the sim backend's data plane")


@pytest.fixture
def health_clock(lab: Lab) -> Iterator[ManualClock]:
    health = lab.aws.lab.elb_health
    real = health.clock
    manual = ManualClock()
    health.clock = manual
    try:
        yield manual
    finally:
        health.clock = real


def _check(lab: Lab, name: str) -> dict[str, Any]:
    elb = lab.aws.client("elb")
    described = elb.describe_load_balancers(LoadBalancerNames=[name])
    check: dict[str, Any] = described["LoadBalancerDescriptions"][0]["HealthCheck"]
    return check


def _registered_elb(lab: Lab, probe: TrafficProbe) -> str:
    """The controller's ELB once both workers are registered with it (its evidence); the
    controller is stopped then, so nothing changes behind the test's back, and the lab
    settled: the endpoint controllers have published the running pods."""

    def registered() -> str | None:
        report = probe.send("web", requests=1)
        if report.load_balancer is None:
            return None
        lb = lab.aws.client("elb").describe_load_balancers(
            LoadBalancerNames=[report.load_balancer]
        )["LoadBalancerDescriptions"][0]
        workers = {n.instance_id for n in lab.workers}
        have = {i["InstanceId"] for i in lb["Instances"]}
        return report.load_balancer if have == workers else None

    name: str = wait_for(registered, timeout=60, what="the ELB with both workers registered")
    lab.stop_controller()
    lab.settle()
    return name


def _probe(lab: Lab) -> TrafficProbe:
    """A probe without the barrier: it models the lab as it is at each call."""
    return TrafficProbe(
        aws=lab.aws.lab, dataplane=lab.sim.plane, gates=AwsGates(lab.aws.lab, gate=Gate)
    )


def test_health_and_security_groups_decide_where_requests_go(
    lab: Lab, health_clock: ManualClock
) -> None:
    lab.start_controller()
    _, core = deploy_web(lab)
    probe = _probe(lab)
    name = _registered_elb(lab, probe)
    assert len(running_pods(core)) == 3
    check = _check(lab, name)
    interval = float(check["Interval"])

    # 1. registration in progress: the load balancer has no InService instance
    report = probe.send("web", requests=30, seed=1)
    assert report.answered_total == 0
    ((hop, reason),) = report.dropped
    assert hop == "elb"
    assert reason.startswith("no InService instance (")
    assert "OutOfService (ELB): Instance registration is still in progress." in reason

    # 2. HealthyThreshold passes later: InService, and the pods answer everything (the check
    # at registration may have failed: kube-proxy answers it, and the endpoints may have lagged)
    health_clock.advance(interval * int(check["HealthyThreshold"]))
    report = probe.send("web", requests=300, seed=2)
    assert report.answered_total == 300, report.to_json()
    assert set(report.answered) == set(running_pods(core))

    # 3. revoke the node group's rule for the load balancer's group
    ec2 = lab.aws.client("ec2")
    lb_groups = set(
        lab.aws.client("elb").describe_load_balancers(LoadBalancerNames=[name])[
            "LoadBalancerDescriptions"
        ][0]["SecurityGroups"]
    )
    assert lab.topology is not None
    node_sg = lab.topology.node_security_group.group_id
    rules = ec2.describe_security_groups(GroupIds=[node_sg])["SecurityGroups"][0]["IpPermissions"]
    from_lb = [
        {
            **perm,
            "UserIdGroupPairs": [p for p in perm["UserIdGroupPairs"] if p["GroupId"] in lb_groups],
        }
        for perm in rules
        if any(p["GroupId"] in lb_groups for p in perm.get("UserIdGroupPairs", []))
    ]
    assert from_lb, f"the controller opened {node_sg} to {lb_groups}"
    for perm in from_lb:
        perm.pop("IpRanges", None)
        perm.pop("Ipv6Ranges", None)
        perm.pop("PrefixListIds", None)
    ec2.revoke_security_group_ingress(GroupId=node_sg, IpPermissions=from_lb)

    report = probe.send("web", requests=50, seed=3)  # still InService: dropped at the node
    assert report.answered_total == 0
    ((hop, reason),) = report.dropped
    assert hop == "node-security-group"
    assert reason.startswith(f"denied: no inbound rule of {node_sg}")

    health_clock.advance(interval * int(check["UnhealthyThreshold"]))
    report = probe.send("web", requests=50, seed=4)
    ((hop, reason),) = report.dropped
    assert hop == "elb"
    assert (
        "OutOfService (Instance): Instance has failed at least the UnhealthyThreshold number of "
        "health checks consecutively." in reason
    )
    assert "the security groups drop the health check from load balancer" in reason
    assert f"no inbound rule of {node_sg}" in reason


def test_traffic_sent_before_the_endpoints_caught_up_misses_new_pods(
    lab: Lab, health_clock: ManualClock
) -> None:
    """The race the barrier closes, every time: the EndpointSlice controller held back while
    the Deployment scales up, so the new pods run but kube-proxy does not know them yet."""
    lab.start_controller()
    apps, core = deploy_web(lab)
    probe = _probe(lab)
    name = _registered_elb(lab, probe)
    check = _check(lab, name)
    health_clock.advance(float(check["Interval"]) * int(check["HealthyThreshold"]))
    first = set(running_pods(core))
    assert len(first) == 3
    assert set(probe.send("web", requests=300, seed=2).answered) == first

    slices = lab.sim.plane.endpoint_slices
    with slices.paused():
        apps.patch_namespaced_deployment_scale("web", "default", {"spec": {"replicas": 5}})
        lab.settle()  # everything but the held-back controller has caught up: 5 pods run
        running = set(running_pods(core))
        assert len(running) == 5
        early = probe.send("web", requests=300, seed=3)
        # sent too early: only the pods the slices already list answer
        assert set(early.answered) == first, early.to_json()
        assert slices.progress().doing.startswith("paused by the test (")
    lab.settle()  # the barrier: the slices now list every running pod
    late = probe.send("web", requests=300, seed=3)
    assert set(late.answered) == running, late.to_json()
    assert late.answered_total == 300

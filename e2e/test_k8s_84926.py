"""k8s-84926: an extra security group mistaken for the load balancer's own group.

Source: seed 000 (a kops cluster down for two hours); kubernetes#84926; fixed by kubernetes
PR #92224 (deterministic choice of the ELB's group) and PR #84265 (annotated groups never
deleted), and cloud-provider-aws PR #752 (revoke before delete).

Story. The nodes' own security group ``nodes.<cluster>`` is cluster-tagged and carries the
self-referencing "all traffic from itself" rule that node-to-node traffic relies on. A Service
names that same group in ``aws-load-balancer-extra-security-groups``. The controller creates a
Classic ELB with two groups, its own ``k8s-elb-<lbName>`` and ``nodes``, and must open the node
group to "all traffic from the ELB's own group". The legacy code takes "the ELB's own group"
to be whichever group comes **last** in the ELB description, and AWS promises no order:

* order puts ``nodes`` last on create: the node group is "opened" to itself (a no-op) and
  never to the ELB group. Traffic still flows, which the lab's security-group evaluation
  shows: the ELB's interfaces carry the node group (the extra group), and the self rule admits
  every member of the group, the ELB included; the missing rule bites only if the extra group
  is later taken off the ELB;
* order puts ``nodes`` last on delete: the controller revokes the node group's rules that
  reference the node group, its self rule: node-to-node traffic is cut (the outage, shown
  with ``lab.traffic.between`` from a worker to the control plane's kubelet port);
* right on create, wrong on delete (the write-up's sequence): additionally the rule letting
  the ELB group in is never revoked, so deleting ``k8s-elb-<lbName>`` fails with
  ``DependencyViolation`` on every retry, the controller gives up with "could not delete
  security groups" after the ELB is already gone, and the group leaks.

The lab makes AWS's order a switch (fidelity ``elb_sg_order``), so each variant is
deterministic, and shortens upstream's 5 s / 10 min retry window (``--sg-delete-retry``).

Fixed: the ELB's own group is chosen by kind (annotated ``security-groups`` first, then the
managed group, extra groups last, cluster-tagged preferred), whatever order AWS returns; only
rules referencing that group are added and revoked; the node group and its self rule survive:
the pod answers every request through the ELB, and the nodes reach each other after the delete.

Stand-ins on sim: the kubelet stand-in registers the nodes (``lab.cluster.kubelet``); nothing
else. The security-group logic is all AWS-side and identical on kind.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from e2e.catalog import Narrator, conformance
from e2e.support import (
    ANN,
    FINALIZER,
    Rule,
    all_traffic_from,
    answered_by,
    create_service,
    describe_elb,
    elb_name,
    events_for,
    get_service,
    group_exists,
    group_id_by_name,
    ingress_rules,
    quiet,
    reasons,
    wait_for,
    wait_gone,
    wait_hostname,
)
from e2e.workloads import create_pod, decided_traffic, wait_running
from lab.compose import Lab
from lab.traffic.report import PathVerdict, TrafficReport

pytestmark = pytest.mark.owncluster(
    "the Service's pod and node-to-node traffic run on the lab's nodes"
)

SG_RETRY = ("--sg-delete-retry", "0.2s,2s")
#: node-to-node traffic the self rule carries, e.g. the API server to a kubelet
KUBELET_PORT = 10250


@dataclass(frozen=True)
class Evidence:
    node_group: str
    elb_group: str
    rules_before: frozenset[Rule]
    rules_after_create: frozenset[Rule]
    rules_after_delete: frozenset[Rule]
    elb_after_delete: dict[str, Any] | None
    elb_group_exists_after: bool
    revokes_on_node_group: list[dict[str, Any]]
    delete_sg_codes: list[str | None]
    event_reasons: list[str]
    event_messages: list[str]
    finalizer_removed: bool
    #: 60 requests through the ELB once its health checks decided (the pod answers or not)
    traffic_after_create: TrafficReport | None
    #: node-to-node (worker to control plane, the kubelet port) before and after the delete
    nodes_before_delete: PathVerdict | None
    nodes_after_delete: PathVerdict | None


def run_scenario(
    lab: Lab,
    core: Any,
    ec2: Any,
    elb: Any,
    *,
    legacy: bool,
    order_on_create: str,
    order_on_delete: str,
    service: str = "web",
    sg_retry: tuple[str, str] = SG_RETRY,
    say: Narrator = quiet,
) -> Evidence:
    """The scenario's steps; ``say`` is told what is about to happen before each one."""
    aws = lab.aws
    assert lab.topology is not None
    node_group = lab.topology.node_security_group.group_id
    rules_before = ingress_rules(ec2, node_group)
    assert all_traffic_from(node_group) in rules_before, "topology must seed the self rule"

    say(
        "start the controller "
        + ("with --legacy-behavior=k8s-84926" if legacy else "as fixed upstream")
        + f" (security-group delete retried every {sg_retry[1].split(',')[0]} for "
        + f"{sg_retry[1].split(',')[1]})"
    )
    lab.start_controller(legacy=["k8s-84926"] if legacy else [], args=sg_retry)
    say.result("the controller is ready")
    say(
        f"AWS lists an ELB's groups in [bold]{order_on_create}[/] order; create a Service "
        "naming the node group in extra-security-groups"
    )
    aws.control.set_fidelity(elb_sg_order=order_on_create)
    svc = create_service(
        core,
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {
                "name": service,
                "namespace": "default",
                "annotations": {
                    ANN + "extra-security-groups": node_group,
                    ANN + "additional-resource-tags": "Team=payments",
                },
            },
            "spec": {
                "type": "LoadBalancer",
                "selector": {"app": service},
                "ports": [{"port": 80, "targetPort": 8080, "protocol": "TCP"}],
            },
        },
    )
    name = elb_name(svc)
    # Traffic is judged wherever the lab is in this process: modelled through the sim's data
    # plane, or really sent to the nodes on kind; an in-place replay on a running lab
    # (``lab.repro --in-place``) judges the rules only.
    judged = isinstance(lab, Lab)
    worker, cp = (lab.workers[0].name, lab.control_plane.name) if judged else ("", "")
    if judged:
        create_pod(core, f"{service}-0", namespace="default", app=service, node=worker)
        wait_running(lab, core, f"{service}-0", "default")
    wait_hostname(core, service)
    elb_group = group_id_by_name(ec2, f"k8s-elb-{name}")
    assert elb_group is not None, "the controller must create the ELB's own group"
    desc = describe_elb(elb, name)
    assert desc is not None
    assert set(desc["SecurityGroups"]) == {elb_group, node_group}
    rules_after_create = ingress_rules(ec2, node_group)
    let_in = all_traffic_from(elb_group) in rules_after_create
    say.result(
        f"ELB {name} carries {elb_group} (its own group) and {node_group} (the node group); "
        + ("the ELB's group is let into the node group" if let_in else
           "the ELB's group is NOT let into the node group")
    )  # fmt: skip
    say("send requests through the ELB once its health checks have decided")
    traffic_after_create = decided_traffic(lab, service) if judged else None
    nodes_before_delete = lab.traffic.between(worker, cp, KUBELET_PORT) if judged else None
    say.result(
        f"{answered_by(traffic_after_create)}; worker to control plane (kubelet port): "
        f"{'allowed' if nodes_before_delete and nodes_before_delete.allowed else 'denied'}"
        if traffic_after_create is not None
        else "not sent: a replay on a running lab (--in-place) judges the rules only"
    )

    say(f"AWS now lists the groups in [bold]{order_on_delete}[/] order; delete the Service")
    aws.control.set_fidelity(elb_sg_order=order_on_delete)
    mark = aws.trail.last_seq
    core.delete_namespaced_service(service, "default")
    # Either the Service goes (finalizer removed) or, legacy, it fails first and goes on retry.
    wait_for(lambda: describe_elb(elb, name) is None, timeout=20, what="the ELB to be deleted")
    wait_for(
        lambda: any(e.action == "DeleteSecurityGroup" for e in aws.trail.events() if e.seq > mark),
        timeout=10,
        what="a DeleteSecurityGroup attempt",
    )
    finalizer_removed = True
    try:
        wait_gone(core, service, timeout=20)
    except TimeoutError:
        svc_now = get_service(core, service)
        finalizer_removed = FINALIZER not in (svc_now.metadata.finalizers or [])
    calls = [e for e in aws.trail.events() if e.seq > mark]
    events = events_for(core, "Service", service)
    rules_after_delete = ingress_rules(ec2, node_group)
    nodes_after_delete = lab.traffic.between(worker, cp, KUBELET_PORT) if judged else None
    say.result(_delete_result(node_group, elb_group, calls, rules_after_delete, nodes_after_delete))
    return Evidence(
        node_group=node_group,
        elb_group=elb_group,
        rules_before=rules_before,
        rules_after_create=rules_after_create,
        rules_after_delete=rules_after_delete,
        elb_after_delete=describe_elb(elb, name),
        elb_group_exists_after=group_exists(ec2, elb_group),
        revokes_on_node_group=[
            e.params
            for e in calls
            if e.action == "RevokeSecurityGroupIngress" and e.params.get("GroupId") == node_group
        ],
        delete_sg_codes=[
            e.error_code
            for e in calls
            if e.action == "DeleteSecurityGroup" and e.params.get("GroupId") == elb_group
        ],
        event_reasons=reasons(events),
        event_messages=[e.message for e in events],
        finalizer_removed=finalizer_removed,
        traffic_after_create=traffic_after_create,
        nodes_before_delete=nodes_before_delete,
        nodes_after_delete=nodes_after_delete,
    )


def _delete_result(
    node_group: str, elb_group: str, calls: list[Any], rules: frozenset[Rule], nodes: Any
) -> str:
    """What deleting the Service did, in one line (the replay's last step's result)."""
    self_revoked = all_traffic_from(node_group) not in rules
    deletes = [e.error_code or "ok" for e in calls if e.action == "DeleteSecurityGroup"]
    tries = f"DeleteSecurityGroup {elb_group}: " + (
        f"{len(deletes)} tries, last {deletes[-1]}" if deletes else "not tried"
    )
    path = "" if nodes is None else "allowed" if nodes.allowed else "denied"
    self_rule = "REVOKED" if self_revoked else "kept"
    return f"the node group's self rule: {self_rule}; {tries}" + (
        f"; worker to control plane: {path}" if path else ""
    )


def assert_fixed(ev: Evidence) -> None:
    """The correct end state and none of the symptoms: the pod answers every request through
    the ELB, and node-to-node traffic flows after the delete as before."""
    if ev.traffic_after_create is not None:
        assert ev.traffic_after_create.answered_total == 60, ev.traffic_after_create.to_json()
    if ev.nodes_after_delete is not None:
        assert ev.nodes_after_delete.allowed, ev.nodes_after_delete.reason
    self_rule, elb_rule = all_traffic_from(ev.node_group), all_traffic_from(ev.elb_group)
    assert ev.rules_after_create == ev.rules_before | {elb_rule}, "ELB group let into nodes"
    assert ev.rules_after_delete == ev.rules_before, "node group rules exactly as before"
    assert self_rule in ev.rules_after_delete
    for params in ev.revokes_on_node_group:
        assert ev.node_group not in str(params.get("IpPermissions")), "self rule never revoked"
    assert ev.elb_after_delete is None
    assert not ev.elb_group_exists_after, "the ELB's own group is deleted"
    assert "DependencyViolation" not in ev.delete_sg_codes
    assert ev.delete_sg_codes[-1] is None, "the last DeleteSecurityGroup succeeded"
    assert "SyncLoadBalancerFailed" not in ev.event_reasons
    assert ev.finalizer_removed


def assert_wrong_on_delete(ev: Evidence) -> None:
    """The outage: the node group's self rule is revoked when the Service is deleted, and
    node-to-node traffic that flowed before is denied."""
    if ev.nodes_before_delete is not None and ev.nodes_after_delete is not None:
        assert ev.nodes_before_delete.allowed, ev.nodes_before_delete.reason
        assert not ev.nodes_after_delete.allowed, "node-to-node traffic cut"
        assert ev.node_group in ev.nodes_after_delete.reason
    assert all_traffic_from(ev.node_group) not in ev.rules_after_delete, "self rule revoked"
    assert any(ev.node_group in str(p.get("IpPermissions")) for p in ev.revokes_on_node_group)
    assert ev.elb_after_delete is None, "the ELB itself is deleted"


def assert_traffic_judged(ev: Evidence) -> None:
    """On a lab of this process every case judges traffic (only an in-place replay cannot)."""
    assert ev.traffic_after_create is not None
    assert ev.nodes_before_delete is not None
    assert ev.nodes_after_delete is not None


@conformance(failure="k8s-84926", expect="reproduce")
def test_reproduce_wrong_on_create_and_delete(lab: Lab, core_v1: Any, ec2: Any, elb: Any) -> None:
    """Creation order throughout: ``nodes`` is last both times."""
    ev = run_scenario(
        lab, core_v1, ec2, elb, legacy=True, order_on_create="creation", order_on_delete="creation"
    )
    # wrong on create: the node group is "opened" to itself only; the ELB group never gets in.
    assert ev.rules_after_create == ev.rules_before
    assert all_traffic_from(ev.elb_group) not in ev.rules_after_create
    # ...yet requests flow: the ELB carries the node group itself (it is the extra group), and
    # the node group's self rule admits every member, the ELB's interfaces included. The
    # missing rule only bites once the ELB stops carrying the node group.
    assert ev.traffic_after_create is not None
    assert ev.traffic_after_create.answered_total == 60, ev.traffic_after_create.to_json()
    # wrong on delete: the self rule goes.
    assert_wrong_on_delete(ev)
    assert_traffic_judged(ev)
    assert ev.rules_after_delete == ev.rules_before - {all_traffic_from(ev.node_group)}
    with pytest.raises(AssertionError):
        assert_fixed(ev)


def test_reproduce_right_on_create_wrong_on_delete(
    lab: Lab, core_v1: Any, ec2: Any, elb: Any
) -> None:
    """The write-up's sequence: reversed order on create, creation order on delete."""
    ev = run_scenario(
        lab, core_v1, ec2, elb, legacy=True, order_on_create="reversed", order_on_delete="creation"
    )
    elb_rule = all_traffic_from(ev.elb_group)
    assert ev.rules_after_create == ev.rules_before | {elb_rule}, "right on create"
    assert ev.traffic_after_create is not None
    assert ev.traffic_after_create.answered_total == 60, "and the pod answers through the ELB"
    assert_wrong_on_delete(ev)
    assert_traffic_judged(ev)
    # The rule letting the ELB group in is never revoked...
    assert ev.rules_after_delete == {elb_rule} | (
        ev.rules_before - {all_traffic_from(ev.node_group)}
    )
    # ...so every delete of the ELB group fails, and the controller gives up.
    assert len(ev.delete_sg_codes) >= 2
    assert set(ev.delete_sg_codes) == {"DependencyViolation"}
    assert ev.elb_group_exists_after, "the ELB's group leaks"
    assert "SyncLoadBalancerFailed" in ev.event_reasons
    assert any("could not delete security groups" in m for m in ev.event_messages)
    with pytest.raises(AssertionError):
        assert_fixed(ev)


@conformance(failure="k8s-84926", expect="fixed")
@pytest.mark.parametrize(
    ("order_on_create", "order_on_delete"),
    [("creation", "creation"), ("reversed", "creation")],
    ids=["nodes-last-throughout", "write-up-sequence"],
)
def test_fixed(
    lab: Lab, core_v1: Any, ec2: Any, elb: Any, order_on_create: str, order_on_delete: str
) -> None:
    ev = run_scenario(
        lab,
        core_v1,
        ec2,
        elb,
        legacy=False,
        order_on_create=order_on_create,
        order_on_delete=order_on_delete,
    )
    assert_fixed(ev)
    assert_traffic_judged(ev)
    with pytest.raises(AssertionError):
        assert_wrong_on_delete(ev)

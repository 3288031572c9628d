"""k8s-84256: security groups named in annotations are deleted with the Service.

Source: kubernetes#84256 and cloud-provider-aws#67; fixed by kubernetes PR #84265 (catalog §2,
``reference/upstream-ccm.md`` §2 and §3.7).

Story. A user brings their own security group to a Classic ELB: they name it in
``service.beta.kubernetes.io/aws-load-balancer-security-groups`` (it replaces the managed
``k8s-elb-*`` group) or in ``...-extra-security-groups`` (it is added next to it). The group
carries the cluster tag, as the user copied it from the cluster's other groups, and nothing else
uses it. When the Service is deleted, the legacy ``EnsureLoadBalancerDeleted`` treats every
cluster-tagged group of the ELB as its own and deletes it: the user's group, with the rules the
user wrote, is gone (data loss), and nothing reports it: the deletion "succeeds", the finalizer
is removed.

Fixed (PR #84265, ``buildSecurityGroupsToDelete``): a group is a deletion candidate only if it
is cluster-tagged, is not the configured ``ElbSecurityGroup`` and is named in neither
annotation. Untagged groups and ``ElbSecurityGroup`` were already spared before the fix (PR
#74311 and the original code), so the legacy switch changes only the annotated-group case; the
mixed test below shows both.

The legacy behaviour is the controller's ``--legacy-behavior=k8s-84256``. Evidence: whether
the user's group exists afterwards, its rules, the ``DeleteSecurityGroup`` calls in the trail
and their targets, the node group's rules, the Service's events and finalizer.

Stand-ins on sim: the kubelet stand-in registers the nodes (``lab.cluster.kubelet``); nothing
else. The security-group logic is all AWS-side and identical on kind.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from e2e.catalog import conformance
from e2e.support import (
    ANN,
    FINALIZER,
    Rule,
    all_traffic_from,
    cluster_tag,
    controller_calls,
    create_service,
    create_user_group,
    describe_elb,
    elb_name,
    events_for,
    finalizers,
    group_exists,
    group_id_by_name,
    ingress_rules,
    lb_service,
    reasons,
    wait_gone,
    wait_hostname,
)
from lab.compose import Lab

SG_RETRY = ("--sg-delete-retry", "0.2s,2s")
USER_RULE = Rule("tcp", 443, 443, "10.20.0.0/16")


@dataclass(frozen=True)
class Evidence:
    annotation: str
    user_group: str
    user_rules_before: frozenset[Rule]
    user_group_exists_after: bool
    user_rules_after: frozenset[Rule] | None
    managed_group: str | None
    managed_group_exists_after: bool
    elb_groups: list[str]
    elb_after_delete: dict[str, Any] | None
    node_rules_before: frozenset[Rule]
    node_rules_after_delete: frozenset[Rule]
    delete_sg: list[tuple[str, str | None]]
    """(target group, error code) of every DeleteSecurityGroup call during the deletion."""
    event_reasons: list[str]
    finalizer_removed: bool


def _user_group(lab: Lab, ec2: Any, name: str, *, tagged: bool) -> str:
    assert lab.topology is not None
    tags = {cluster_tag(lab.config.cluster_id): "shared", "team": "payments"} if tagged else {}
    return create_user_group(
        ec2, vpc_id=lab.topology.vpc_id, name=name, tags=tags, rules=[USER_RULE]
    )


def run_scenario(
    lab: Lab, core: Any, ec2: Any, elb: Any, *, legacy: bool, annotation: str
) -> Evidence:
    """Create a Service naming the user's tagged group in ``annotation``; delete it."""
    aws = lab.aws
    assert aws is not None
    assert lab.topology is not None
    node_group = lab.topology.node_security_group.group_id
    node_rules_before = ingress_rules(ec2, node_group)
    user_group = _user_group(lab, ec2, "payments-elb", tagged=True)
    user_rules_before = ingress_rules(ec2, user_group)
    assert user_rules_before == {USER_RULE}

    lab.start_controller(legacy=["k8s-84256"] if legacy else [], args=SG_RETRY)
    svc = create_service(core, lb_service("web", annotations={ANN + annotation: user_group}))
    name = elb_name(svc)
    wait_hostname(core, "web")
    desc = describe_elb(elb, name)
    assert desc is not None
    managed_group = group_id_by_name(ec2, f"k8s-elb-{name}")

    mark = aws.trail.last_seq
    core.delete_namespaced_service("web", "default")
    wait_gone(core, "web", timeout=30)
    calls = controller_calls(aws.trail, since_seq=mark)
    user_exists = group_exists(ec2, user_group)
    return Evidence(
        annotation=annotation,
        user_group=user_group,
        user_rules_before=user_rules_before,
        user_group_exists_after=user_exists,
        user_rules_after=ingress_rules(ec2, user_group) if user_exists else None,
        managed_group=managed_group,
        managed_group_exists_after=managed_group is not None and group_exists(ec2, managed_group),
        elb_groups=list(desc["SecurityGroups"]),
        elb_after_delete=describe_elb(elb, name),
        node_rules_before=node_rules_before,
        node_rules_after_delete=ingress_rules(ec2, node_group),
        delete_sg=[
            (str(e.params.get("GroupId")), e.error_code)
            for e in calls
            if e.action == "DeleteSecurityGroup"
        ],
        event_reasons=reasons(events_for(core, "Service", "web")),
        finalizer_removed=FINALIZER not in finalizers(core, "web"),
    )


def assert_user_group_deleted(ev: Evidence) -> None:
    """The documented symptoms: the user's group is deleted with the Service, silently."""
    assert (ev.user_group, None) in ev.delete_sg, "a successful DeleteSecurityGroup on it"
    assert not ev.user_group_exists_after, "the user's group (and its rules) is gone"
    assert ev.user_rules_after is None
    # ...and nothing reports it: the deletion otherwise completes.
    assert ev.elb_after_delete is None
    assert ev.finalizer_removed
    assert "DeletedLoadBalancer" in ev.event_reasons


def assert_fixed(ev: Evidence) -> None:
    """The user's group survives untouched; everything the controller owns is cleaned up."""
    assert ev.user_group_exists_after, "the annotated group is never deleted"
    assert ev.user_rules_after == ev.user_rules_before, "its rules are the user's, untouched"
    assert ev.user_group not in {gid for gid, _ in ev.delete_sg}, "no delete call targets it"
    assert ev.elb_after_delete is None, "the ELB is deleted"
    if ev.managed_group is not None:
        assert ev.delete_sg == [(ev.managed_group, None)], "only the managed group is deleted"
        assert not ev.managed_group_exists_after
    else:
        assert ev.delete_sg == [], "nothing of the controller's own to delete"
    assert ev.node_rules_after_delete == ev.node_rules_before, "node group back to its rules"
    assert "SyncLoadBalancerFailed" not in ev.event_reasons
    assert ev.finalizer_removed, "the Service's finalizer is removed"
    assert "DeletedLoadBalancer" in ev.event_reasons


def _check_groups(ev: Evidence) -> None:
    """How each annotation puts the user's group on the ELB (both variants, both modes)."""
    if ev.annotation == "security-groups":
        assert ev.managed_group is None, "security-groups replaces the managed group"
        assert ev.elb_groups == [ev.user_group]
    else:
        assert ev.managed_group is not None, "extra-security-groups adds to the managed group"
        assert ev.elb_groups == [ev.managed_group, ev.user_group]


ANNOTATIONS = pytest.mark.parametrize("annotation", ["security-groups", "extra-security-groups"])


@conformance(failure="k8s-84256", expect="reproduce")
@ANNOTATIONS
def test_reproduce(lab: Lab, core_v1: Any, ec2: Any, elb: Any, annotation: str) -> None:
    ev = run_scenario(lab, core_v1, ec2, elb, legacy=True, annotation=annotation)
    _check_groups(ev)
    assert_user_group_deleted(ev)
    with pytest.raises(AssertionError):
        assert_fixed(ev)


@conformance(failure="k8s-84256", expect="fixed")
@ANNOTATIONS
def test_fixed(lab: Lab, core_v1: Any, ec2: Any, elb: Any, annotation: str) -> None:
    ev = run_scenario(lab, core_v1, ec2, elb, legacy=False, annotation=annotation)
    _check_groups(ev)
    assert_fixed(ev)
    with pytest.raises(AssertionError):
        assert_user_group_deleted(ev)


@pytest.mark.parametrize("legacy", [True, False], ids=["legacy", "fixed"])
def test_elb_security_group_and_untagged_groups_never_deleted(
    lab: Lab, core_v1: Any, ec2: Any, elb: Any, trail: Any, legacy: bool
) -> None:
    """``ElbSecurityGroup`` (cluster-tagged) plus two extra groups, one tagged, one not.

    Both modes spare ``ElbSecurityGroup`` and the untagged group; only the legacy mode deletes
    the tagged annotated one (the bug's whole extent)."""
    assert lab.topology is not None
    node_group = lab.topology.node_security_group.group_id
    node_rules_before = ingress_rules(ec2, node_group)
    configured = create_user_group(
        ec2,
        vpc_id=lab.topology.vpc_id,
        name="cluster-elbs",
        tags={cluster_tag(lab.config.cluster_id): "owned"},
        rules=[Rule("tcp", 80, 80, "0.0.0.0/0")],
    )
    tagged = _user_group(lab, ec2, "payments-tagged", tagged=True)
    untagged = _user_group(lab, ec2, "payments-untagged", tagged=False)
    lab.write_cloud_config(extra_global=[("ElbSecurityGroup", configured)])
    lab.start_controller(legacy=["k8s-84256"] if legacy else [], args=SG_RETRY)
    svc = create_service(
        core_v1,
        lb_service("web", annotations={ANN + "extra-security-groups": f"{tagged},{untagged}"}),
    )
    name = elb_name(svc)
    wait_hostname(core_v1, "web")
    desc = describe_elb(elb, name)
    assert desc is not None
    assert desc["SecurityGroups"] == [configured, tagged, untagged]
    assert group_id_by_name(ec2, f"k8s-elb-{name}") is None, "no managed group"
    assert ingress_rules(ec2, node_group) == node_rules_before | {all_traffic_from(configured)}

    mark = trail.last_seq
    core_v1.delete_namespaced_service("web", "default")
    wait_gone(core_v1, "web", timeout=30)
    deleted = {
        str(e.params.get("GroupId"))
        for e in controller_calls(trail, since_seq=mark)
        if e.action == "DeleteSecurityGroup"
    }
    assert describe_elb(elb, name) is None
    assert configured not in deleted, "no delete call targets ElbSecurityGroup"
    assert group_exists(ec2, configured), "ElbSecurityGroup kept"
    assert untagged not in deleted, "no delete call targets the untagged group"
    assert group_exists(ec2, untagged), "untagged group kept"
    assert ingress_rules(ec2, node_group) == node_rules_before
    if legacy:
        assert deleted == {tagged}, "legacy: the tagged annotated group is deleted"
        assert not group_exists(ec2, tagged)
    else:
        assert deleted == set(), "fixed: no group of this ELB is the controller's to delete"
        assert group_exists(ec2, tagged)
        assert ingress_rules(ec2, tagged) == {USER_RULE}

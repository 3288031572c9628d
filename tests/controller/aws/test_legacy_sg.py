"""Legacy security-group behaviours and their fixes (failure catalog §1, §2, §7 shared-elb-sg).

Each reproduce case asserts the documented symptom from AWS state and the call trail; each
fixed case asserts the correct end state and that the symptom did not occur. The lab's
fidelity layer fixes the order ``DescribeLoadBalancers`` lists an ELB's groups in (AWS gives
no guarantee) and raises ``DependencyViolation`` while a group is still referenced.
"""

from __future__ import annotations

import time

import pytest

import controller.aws.annotations as A
from controller.aws.loadbalancer import ClassicLoadBalancers
from controller.aws.securitygroups import SecurityGroupDeleteTimeout
from controller.cloud import Service
from lab.aws import AwsServer
from tests.controller.aws.conftest import MakeCloud
from tests.controller.aws.test_loadbalancer import LB_NAME, group_id, nodes, service
from tests.controller.aws.topology import CLUSTER_TAG, Topology, ingress


def extra_nodes_service(topo: Topology) -> Service:
    return service({A.A_EXTRA_SECURITY_GROUPS: topo.nodes_group, A.A_ADDITIONAL_TAGS: "Team=web"})


def revoked(aws: AwsServer) -> list[tuple[str, list[str]]]:
    return [
        (str(e.params["GroupId"]), list(e.params.get("IpPermissions", [])))
        for e in aws.trail.calls("RevokeSecurityGroupIngress", ok=True)
    ]


# -- kubernetes#84926 -----------------------------------------------------------------------


def test_84926_legacy_wrong_on_create_never_opens_nodes_to_elb_group(
    aws: AwsServer, topo: Topology, make_cloud: MakeCloud
) -> None:
    aws.control.set_fidelity(elb_sg_order="creation")  # [k8s-elb, nodes]: nodes comes last
    lb = make_cloud("k8s-84926").load_balancer()
    lb.ensure_load_balancer("kubernetes", extra_nodes_service(topo), nodes(topo))
    elb_sg = group_id(aws, f"k8s-elb-{LB_NAME}")
    # the node group was "opened" to itself (a no-op) and never to the ELB's group
    assert ingress(aws.client("ec2"), topo.nodes_group) == {("-1", topo.nodes_group)}
    assert not any(
        e.params["GroupId"] == topo.nodes_group
        for e in aws.trail.calls("AuthorizeSecurityGroupIngress")
    )
    assert elb_sg is not None


def test_84926_legacy_wrong_on_delete_revokes_node_self_rule(
    aws: AwsServer, topo: Topology, make_cloud: MakeCloud
) -> None:
    aws.control.set_fidelity(elb_sg_order="creation")
    lb = make_cloud("k8s-84926").load_balancer()
    svc = extra_nodes_service(topo)
    lb.ensure_load_balancer("kubernetes", svc, nodes(topo))
    lb.ensure_load_balancer_deleted("kubernetes", svc)
    # the outage: node-to-node traffic rule is gone
    assert revoked(aws) == [(topo.nodes_group, [f"all from {topo.nodes_group}"])]
    assert ingress(aws.client("ec2"), topo.nodes_group) == set()


def test_84926_legacy_right_on_create_wrong_on_delete_leaks_group(
    aws: AwsServer, topo: Topology, make_cloud: MakeCloud
) -> None:
    aws.control.set_fidelity(elb_sg_order="reversed")  # [nodes, k8s-elb]: right on create
    lb = make_cloud("k8s-84926", sg_delete_timeout=0.3).load_balancer()
    svc = extra_nodes_service(topo)
    lb.ensure_load_balancer("kubernetes", svc, nodes(topo))
    elb_sg = group_id(aws, f"k8s-elb-{LB_NAME}")
    assert ingress(aws.client("ec2"), topo.nodes_group) == {
        ("-1", topo.nodes_group),
        ("-1", elb_sg),
    }
    aws.control.set_fidelity(elb_sg_order="creation")  # wrong on delete
    with pytest.raises(SecurityGroupDeleteTimeout, match="could not delete security groups"):
        lb.ensure_load_balancer_deleted("kubernetes", svc)
    assert revoked(aws) == [(topo.nodes_group, [f"all from {topo.nodes_group}"])]
    # the rule letting the ELB group in was never revoked, so its deletion kept failing
    assert ingress(aws.client("ec2"), topo.nodes_group) == {("-1", elb_sg)}
    deletes = aws.trail.calls("DeleteSecurityGroup")
    assert len(deletes) >= 2
    assert {e.error_code for e in deletes} == {"DependencyViolation"}
    assert {e.params["GroupId"] for e in deletes} == {elb_sg}
    # the ELB is already gone: a retry finds nothing and the group leaks
    assert lb.get_load_balancer("kubernetes", svc)[1] is False
    assert group_id(aws, f"k8s-elb-{LB_NAME}") == elb_sg


@pytest.mark.parametrize(
    ("create_order", "delete_order"),
    [
        ("creation", "creation"),
        ("reversed", "creation"),
        ("shuffle", "shuffle"),
    ],
)
def test_84926_fixed_is_right_whatever_order_aws_returns(
    aws: AwsServer,
    topo: Topology,
    make_cloud: MakeCloud,
    create_order: str,
    delete_order: str,
) -> None:
    aws.control.set_fidelity(elb_sg_order=create_order, elb_sg_order_seed=7)
    lb = make_cloud().load_balancer()
    svc = extra_nodes_service(topo)
    lb.ensure_load_balancer("kubernetes", svc, nodes(topo))
    elb_sg = group_id(aws, f"k8s-elb-{LB_NAME}")
    assert elb_sg is not None
    assert ingress(aws.client("ec2"), topo.nodes_group) == {
        ("-1", topo.nodes_group),
        ("-1", elb_sg),
    }
    aws.control.set_fidelity(elb_sg_order=delete_order)
    lb.ensure_load_balancer_deleted("kubernetes", svc)
    assert revoked(aws) == [(topo.nodes_group, [f"all from {elb_sg}"])]
    assert ingress(aws.client("ec2"), topo.nodes_group) == {("-1", topo.nodes_group)}
    deletes = aws.trail.calls("DeleteSecurityGroup")
    assert [(e.params["GroupId"], e.error_code) for e in deletes] == [(elb_sg, None)]
    assert group_id(aws, f"k8s-elb-{LB_NAME}") is None
    assert group_id(aws, "nodes") == topo.nodes_group


# -- kubernetes#84256 -----------------------------------------------------------------------


def _user_group(aws: AwsServer, topo: Topology) -> str:
    return aws.client("ec2").create_security_group(
        GroupName="user-sg",
        Description="the user-owned group (EC2 refuses an apostrophe here)",
        VpcId=topo.vpc,
        TagSpecifications=[
            {
                "ResourceType": "security-group",
                "Tags": [{"Key": CLUSTER_TAG["Key"], "Value": "owned"}],
            }
        ],
    )["GroupId"]


@pytest.mark.parametrize("annotation", [A.A_EXTRA_SECURITY_GROUPS, A.A_SECURITY_GROUPS])
def test_84256_legacy_deletes_annotated_group(
    aws: AwsServer, topo: Topology, make_cloud: MakeCloud, annotation: str
) -> None:
    user = _user_group(aws, topo)
    lb = make_cloud("k8s-84256").load_balancer()
    svc = service({annotation: user})
    lb.ensure_load_balancer("kubernetes", svc, nodes(topo))
    lb.ensure_load_balancer_deleted("kubernetes", svc)
    assert user in {e.params["GroupId"] for e in aws.trail.calls("DeleteSecurityGroup", ok=True)}
    assert group_id(aws, "user-sg") is None  # data loss


@pytest.mark.parametrize("annotation", [A.A_EXTRA_SECURITY_GROUPS, A.A_SECURITY_GROUPS])
def test_84256_fixed_never_deletes_annotated_group(
    aws: AwsServer, topo: Topology, make_cloud: MakeCloud, annotation: str
) -> None:
    user = _user_group(aws, topo)
    lb = make_cloud().load_balancer()
    svc = service({annotation: user})
    lb.ensure_load_balancer("kubernetes", svc, nodes(topo))
    lb.ensure_load_balancer_deleted("kubernetes", svc)
    assert user not in {e.params["GroupId"] for e in aws.trail.calls("DeleteSecurityGroup")}
    assert group_id(aws, "user-sg") == user
    # and the user's group's own rules were never edited
    for action in ("AuthorizeSecurityGroupIngress", "RevokeSecurityGroupIngress"):
        assert user not in {e.params["GroupId"] for e in aws.trail.calls(action)}


# -- shared-elb-sg (kops#4197) ----------------------------------------------------------------

OTHER_UID = "99999999-5b6a-7988-a7b6-c5d4e3f2a1b0"


def _shared_setup(
    aws: AwsServer, topo: Topology, make_cloud: MakeCloud, *legacy: str
) -> tuple[ClassicLoadBalancers, str, Service, Service]:
    shared = aws.client("ec2").create_security_group(
        GroupName="shared-elb", Description="shared", VpcId=topo.vpc
    )["GroupId"]
    lb = make_cloud(*legacy, extra=f"ElbSecurityGroup = {shared}").load_balancer()
    first, second = service(), service(uid=OTHER_UID, name="api")
    lb.ensure_load_balancer("kubernetes", first, nodes(topo))
    lb.ensure_load_balancer("kubernetes", second, nodes(topo))
    assert ("-1", shared) in ingress(aws.client("ec2"), topo.nodes_group)
    return lb, shared, first, second


def test_shared_elb_sg_legacy_delete_cuts_the_other_elb(
    aws: AwsServer, topo: Topology, make_cloud: MakeCloud
) -> None:
    lb, shared, first, _ = _shared_setup(aws, topo, make_cloud, "shared-elb-sg")
    lb.ensure_load_balancer_deleted("kubernetes", first)
    assert revoked(aws) == [(topo.nodes_group, [f"all from {shared}"])]
    assert ingress(aws.client("ec2"), topo.nodes_group) == {("-1", topo.nodes_group)}


def test_shared_elb_sg_fixed_keeps_rule_until_last_elb_goes(
    aws: AwsServer, topo: Topology, make_cloud: MakeCloud
) -> None:
    lb, shared, first, second = _shared_setup(aws, topo, make_cloud)
    lb.ensure_load_balancer_deleted("kubernetes", first)
    assert revoked(aws) == []
    assert ("-1", shared) in ingress(aws.client("ec2"), topo.nodes_group)
    lb.ensure_load_balancer_deleted("kubernetes", second)
    assert revoked(aws) == [(topo.nodes_group, [f"all from {shared}"])]
    assert ingress(aws.client("ec2"), topo.nodes_group) == {("-1", topo.nodes_group)}
    assert aws.trail.calls("DeleteSecurityGroup") == []


def test_fixed_delete_retries_while_elb_network_interfaces_detach(
    aws: AwsServer, topo: Topology, make_cloud: MakeCloud
) -> None:
    aws.control.set_fidelity(elb_sg_release_s=0.25)  # groups stay "in use" after the ELB goes
    lb = make_cloud(sg_delete_timeout=5.0).load_balancer()
    lb.ensure_load_balancer("kubernetes", service(), nodes(topo))
    lb.ensure_load_balancer_deleted("kubernetes", service())
    codes = [e.error_code for e in aws.trail.calls("DeleteSecurityGroup")]
    assert codes[-1] is None
    assert set(codes[:-1]) == {"DependencyViolation"}
    assert len(codes) >= 2
    assert group_id(aws, f"k8s-elb-{LB_NAME}") is None


def test_fixed_group_left_after_delete_timeout_is_found_and_deleted_later(
    aws: AwsServer, topo: Topology, make_cloud: MakeCloud
) -> None:
    """Upstream leak path (cloud-provider-aws #566): the group outlives the retry window."""
    aws.control.set_fidelity(elb_sg_release_s=1.0)
    lb = make_cloud(sg_delete_timeout=0.1).load_balancer()
    lb.ensure_load_balancer("kubernetes", service(), nodes(topo))
    with pytest.raises(SecurityGroupDeleteTimeout):
        lb.ensure_load_balancer_deleted("kubernetes", service())
    # the ELB is gone but its group is not: still reported, so the finalizer stays
    assert lb.get_load_balancer("kubernetes", service()) == (None, True)
    deadline = time.monotonic() + 10
    while True:
        try:
            lb.ensure_load_balancer_deleted("kubernetes", service())
            break
        except SecurityGroupDeleteTimeout:
            assert time.monotonic() < deadline, "leftover group never became deletable"
    assert group_id(aws, f"k8s-elb-{LB_NAME}") is None
    assert lb.get_load_balancer("kubernetes", service()) == (None, False)
    assert ingress(aws.client("ec2"), topo.nodes_group) == {("-1", topo.nodes_group)}

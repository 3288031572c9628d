"""Which load balancers a target group lists (gap 18 of ``lab/aws/fidelity.py``).

On AWS a target group is associated with a load balancer through the listeners and rules that
forward to it: ``DescribeTargetGroups`` lists the load balancer in the group's
``LoadBalancerArns`` and ``DescribeTargetGroups(LoadBalancerArn=...)`` returns the group.
moto 5.2.5 appends to the group's list on ``CreateListener``/``CreateRule`` and never updates
it. Each test runs with ``elbv2_fixes`` on (AWS's answer) and off (moto's).
"""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError

from lab.aws import AwsServer
from tests.aws import builders as b


def _load_balancer(aws: AwsServer, kind: str = "network", **extra: Any) -> str:
    ec2, elbv2 = aws.client("ec2"), aws.client("elbv2")
    subnets = [s["SubnetId"] for s in ec2.describe_subnets()["Subnets"]][:2]
    lb = elbv2.create_load_balancer(Name=f"lb-{kind[:3]}", Subnets=subnets, Type=kind, **extra)
    return str(lb["LoadBalancers"][0]["LoadBalancerArn"])


def _groups(aws: AwsServer, *names: str, protocol: str = "TCP") -> list[str]:
    elbv2, vpc = aws.client("elbv2"), b.default_vpc(aws.client("ec2"))
    return [
        str(
            elbv2.create_target_group(
                Name=name, Protocol=protocol, Port=30000 + i, VpcId=vpc, TargetType="instance"
            )["TargetGroups"][0]["TargetGroupArn"]
        )
        for i, name in enumerate(names)
    ]


def _forward(tg: str) -> Any:
    return [{"Type": "forward", "TargetGroupArn": tg}]


def _listener(aws: AwsServer, lb: str, tg: str, *, port: int = 80, protocol: str = "TCP") -> str:
    """A listener of ``lb`` on ``port`` forwarding to ``tg``; its ARN."""
    return str(
        aws.client("elbv2").create_listener(
            LoadBalancerArn=lb, Protocol=protocol, Port=port, DefaultActions=_forward(tg)
        )["Listeners"][0]["ListenerArn"]
    )


def _listed(aws: AwsServer, tg: str) -> list[str]:
    """The group's ``LoadBalancerArns`` as ``DescribeTargetGroups`` answers them."""
    elbv2 = aws.client("elbv2")
    [group] = elbv2.describe_target_groups(TargetGroupArns=[tg])["TargetGroups"]
    return list(group["LoadBalancerArns"])


def _of(aws: AwsServer, lb: str) -> list[str] | str:
    """``DescribeTargetGroups(LoadBalancerArn=lb)``: the groups' ARNs, or the error code."""
    try:
        found = aws.client("elbv2").describe_target_groups(LoadBalancerArn=lb)["TargetGroups"]
    except ClientError as exc:
        return str(exc.response["Error"]["Code"])
    return [str(g["TargetGroupArn"]) for g in found]


@pytest.mark.parametrize("fixed", [True, False])
def test_modify_listener_moves_the_link_to_the_new_group(aws: AwsServer, fixed: bool) -> None:
    aws.control.set_fidelity(elbv2_fixes=fixed)
    elbv2 = aws.client("elbv2")
    lb = _load_balancer(aws)
    old, new = _groups(aws, "old", "new")
    listener = _listener(aws, lb, old)
    assert (_listed(aws, old), _listed(aws, new), _of(aws, lb)) == ([lb], [], [old])
    elbv2.modify_listener(ListenerArn=listener, DefaultActions=_forward(new))
    if fixed:
        assert (_listed(aws, old), _listed(aws, new), _of(aws, lb)) == ([], [lb], [new])
        elbv2.delete_target_group(TargetGroupArn=old)  # no longer in use, on AWS as here
    else:  # moto: the old group keeps the link, the new one never gets it
        assert (_listed(aws, old), _listed(aws, new), _of(aws, lb)) == ([lb], [], [old])


@pytest.mark.parametrize("fixed", [True, False])
def test_modify_listener_to_a_weighted_forward_links_each_group(
    aws: AwsServer, fixed: bool
) -> None:
    aws.control.set_fidelity(elbv2_fixes=fixed)
    elbv2 = aws.client("elbv2")
    lb = _load_balancer(aws)
    old, one, two = _groups(aws, "old", "one", "two")
    listener = _listener(aws, lb, old)
    weighted: Any = [
        {
            "Type": "forward",
            "ForwardConfig": {"TargetGroups": [{"TargetGroupArn": one}, {"TargetGroupArn": two}]},
        }
    ]
    elbv2.modify_listener(ListenerArn=listener, DefaultActions=weighted)
    want = ([], [lb], [lb], sorted([one, two])) if fixed else ([lb], [], [], [old])
    assert (_listed(aws, old), _listed(aws, one), _listed(aws, two), sorted(_of(aws, lb))) == want


@pytest.mark.parametrize("fixed", [True, False])
def test_a_group_two_listeners_forward_to_lists_its_load_balancer_once(
    aws: AwsServer, fixed: bool
) -> None:
    aws.control.set_fidelity(elbv2_fixes=fixed)
    lb = _load_balancer(aws)
    [tg] = _groups(aws, "shared")
    for port in (80, 443):
        _listener(aws, lb, tg, port=port)
    assert _listed(aws, tg) == ([lb] if fixed else [lb, lb])
    assert _of(aws, lb) == [tg]


@pytest.mark.parametrize("fixed", [True, False])
def test_a_deleted_listener_unlinks_only_what_no_other_listener_forwards_to(
    aws: AwsServer, fixed: bool
) -> None:
    aws.control.set_fidelity(elbv2_fixes=fixed)
    elbv2 = aws.client("elbv2")
    lb = _load_balancer(aws)
    shared, alone = _groups(aws, "shared", "alone")
    arns = [
        _listener(aws, lb, tg, port=port)
        for port, tg in ((80, shared), (443, shared), (8080, alone))
    ]
    elbv2.delete_listener(ListenerArn=arns[0])
    elbv2.delete_listener(ListenerArn=arns[2])
    if fixed:
        assert (_listed(aws, shared), _listed(aws, alone), _of(aws, lb)) == ([lb], [], [shared])
    else:
        assert (_listed(aws, shared), _listed(aws, alone)) == ([lb, lb], [lb])
        assert sorted(_of(aws, lb)) == sorted([shared, alone])


@pytest.mark.parametrize("fixed", [True, False])
def test_a_deleted_load_balancer_is_no_longer_listed(aws: AwsServer, fixed: bool) -> None:
    """With security groups kept busy after the delete (``elb_sg_release_s``): the layer's
    bookkeeping of a deleted load balancer's groups runs on that call as well."""
    aws.control.set_fidelity(elbv2_fixes=fixed, elb_sg_release_s=60)
    elbv2 = aws.client("elbv2")
    sg = b.group(aws.client("ec2"), "nlb")
    lb = _load_balancer(aws, SecurityGroups=[sg])
    [tg] = _groups(aws, "tg")
    _listener(aws, lb, tg)
    elbv2.delete_load_balancer(LoadBalancerArn=lb)
    assert _listed(aws, tg) == ([] if fixed else [lb])


@pytest.mark.parametrize("fixed", [True, False])
def test_rules_link_the_groups_they_forward_to(aws: AwsServer, fixed: bool) -> None:
    """An Application Load Balancer's rules: ``ModifyRule`` moves the link, ``DeleteRule``
    removes it; the listener's default group stays linked throughout."""
    aws.control.set_fidelity(elbv2_fixes=fixed)
    elbv2 = aws.client("elbv2")
    lb = _load_balancer(aws, "application")
    default, first, second = _groups(aws, "default", "first", "second", protocol="HTTP")
    listener = _listener(aws, lb, default, protocol="HTTP")
    conditions: Any = [{"Field": "path-pattern", "Values": ["/api/*"]}]
    rule = elbv2.create_rule(
        ListenerArn=listener, Priority=10, Conditions=conditions, Actions=_forward(first)
    )["Rules"][0]["RuleArn"]
    assert (_listed(aws, first), _listed(aws, second)) == ([lb], [])
    elbv2.modify_rule(RuleArn=rule, Actions=_forward(second))
    assert (_listed(aws, first), _listed(aws, second)) == (([], [lb]) if fixed else ([lb], []))
    elbv2.delete_rule(RuleArn=rule)
    assert (_listed(aws, first), _listed(aws, second)) == (([], []) if fixed else ([lb], []))
    assert _listed(aws, default) == [lb]


@pytest.mark.parametrize("fixed", [True, False])
def test_the_group_a_listener_left_is_not_in_use(aws: AwsServer, fixed: bool) -> None:
    """The NLB health model reads the same link: a registered target of the group the
    listener no longer forwards to is ``unused`` / ``Target.NotInUse`` on AWS."""
    aws.control.set_fidelity(elbv2_fixes=fixed)
    elbv2 = aws.client("elbv2")
    lb = _load_balancer(aws)
    old, new = _groups(aws, "old", "new")
    listener = _listener(aws, lb, old)
    instance = b.instance(aws.client("ec2"))
    elbv2.register_targets(TargetGroupArn=old, Targets=[{"Id": instance, "Port": 30000}])
    elbv2.modify_listener(ListenerArn=listener, DefaultActions=_forward(new))
    [health] = elbv2.describe_target_health(TargetGroupArn=old)["TargetHealthDescriptions"]
    if fixed:
        assert health["TargetHealth"]["Reason"] == "Target.NotInUse"
    else:
        assert health["TargetHealth"].get("Reason") != "Target.NotInUse"

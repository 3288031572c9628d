"""NLBs in managed security-group mode (``NLBSecurityGroupMode = Managed``) against the lab's
AWS endpoint: the call sequence from the trail, the group, its rules and the NLB's groups via
boto3, and what deletion leaves.

Behaviour is current upstream's (kubernetes/cloud-provider-aws 63ec440c, PRs #1158 and #1379:
``aws.go`` ``ensureNLBSecurityGroup``, ``ensureNLBSecurityGroupRules``, ``EnsureLoadBalancer``,
``EnsureLoadBalancerDeleted``; ``aws_loadbalancer.go`` ``ensureLoadBalancerv2``); the
differences are in ``controller/DEVIATIONS.md`` and ``controller/aws/README.md``.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from controller.aws.annotations import A_SECURITY_GROUPS, A_SOURCE_RANGES, PREFIX
from controller.aws.nlbspec import MANAGED_SG_DESCRIPTION, managed_security_group_name
from controller.cloud import InvalidServiceConfig, Service, ServicePort
from lab.aws import AwsServer
from tests.controller.aws.conftest import MakeCloud
from tests.controller.aws.test_loadbalancer import LB_NAME, actions, mutating, nodes
from tests.controller.aws.test_nlb import CLIENT, ours, rules, service, target_groups, the_lb
from tests.controller.aws.topology import CLUSTER, Topology

MANAGED = "NLBSecurityGroupMode = Managed\n"


def group_named(aws: AwsServer, name: str) -> dict[str, Any] | None:
    found = aws.client("ec2").describe_security_groups(
        Filters=[{"Name": "group-name", "Values": [name]}]
    )["SecurityGroups"]
    return dict(found[0]) if found else None


def managed_group(aws: AwsServer, svc: Service) -> dict[str, Any] | None:
    return group_named(aws, managed_security_group_name("kubernetes", svc))


def group_ids(aws: AwsServer) -> set[str]:
    return {g["GroupId"] for g in aws.client("ec2").describe_security_groups()["SecurityGroups"]}


def user_group(aws: AwsServer, topo: Topology, name: str) -> str:
    """A group the user made (no cluster tag), with a rule of theirs."""
    ec2 = aws.client("ec2")
    gid = ec2.create_security_group(GroupName=name, Description="users group", VpcId=topo.vpc)[
        "GroupId"
    ]
    ec2.authorize_security_group_ingress(
        GroupId=gid,
        IpPermissions=[
            {
                "IpProtocol": "tcp",
                "FromPort": 443,
                "ToPort": 443,
                "IpRanges": [{"CidrIp": "1.2.3.0/24"}],
            }
        ],
    )
    return str(gid)


def test_new_nlb_gets_the_managed_group_with_listener_and_mtu_rules(
    aws: AwsServer, topo: Topology, make_cloud: MakeCloud
) -> None:
    lb = make_cloud(extra=MANAGED).load_balancer()
    svc = service({PREFIX + "additional-resource-tags": "team=shop"})
    lb.ensure_load_balancer("kubernetes", svc, nodes(topo))

    assert actions(aws) == [
        "DescribeInstances",
        "DescribeSubnets",
        "DescribeRouteTables",
        "DescribeAvailabilityZones",
        "DescribeLoadBalancers",  # not found
        "DescribeSecurityGroups",  # ensureSecurityGroup: group-name + vpc-id, not found
        "CreateSecurityGroup",  # tagged in the same call (TagSpecifications)
        "CreateLoadBalancer",  # SecurityGroups=[the managed group]
        "CreateTargetGroup",
        "RegisterTargets",
        "CreateListener",
        "DescribeLoadBalancerAttributes",
        "DescribeSecurityGroups",  # setSecurityGroupIngress reads the managed group
        "AuthorizeSecurityGroupIngress",  # listener port + ICMP 3/4 from 0.0.0.0/0
        "DescribeSubnets",
        "DescribeSecurityGroups",
        "AuthorizeSecurityGroupIngress",  # node rules: unchanged by the mode
    ]
    group = managed_group(aws, svc)
    assert group is not None
    gid = group["GroupId"]
    assert group["GroupName"].startswith("k8s-shop-web-")
    assert group["Description"] == MANAGED_SG_DESCRIPTION
    assert group["VpcId"] == topo.vpc
    assert {t["Key"]: t["Value"] for t in group["Tags"]} == {
        f"kubernetes.io/cluster/{CLUSTER}": "owned",
        "kubernetes.io/service-name": "shop/web",
        "team": "shop",
    }
    assert aws.trail.calls("CreateLoadBalancer")[0].params["SecurityGroups"] == [gid]
    assert the_lb(aws)["SecurityGroups"] == [gid]
    assert rules(aws, gid) == {("tcp", 80, 80, "0.0.0.0/0", ""), ("icmp", 3, 4, "0.0.0.0/0", "")}
    # the node group still admits the clients on the node port (upstream keeps CIDR rules)
    assert ("tcp", 30080, 30080, "0.0.0.0/0", CLIENT) in ours(aws, topo.nodes_group)

    since = aws.trail.events()[-1].seq
    lb.ensure_load_balancer("kubernetes", svc, nodes(topo))
    assert mutating(aws, since) == []
    assert actions(aws, since).count("CreateSecurityGroup") == 0


def test_managed_group_rules_follow_ports_and_source_ranges_exactly(
    aws: AwsServer, topo: Topology, make_cloud: MakeCloud
) -> None:
    lb = make_cloud(extra=MANAGED).load_balancer()
    lb.ensure_load_balancer("kubernetes", service(), nodes(topo))
    group = managed_group(aws, service())
    assert group is not None
    gid = group["GroupId"]
    # a rule added by hand to the group we own is removed (upstream syncs it exactly)
    aws.client("ec2").authorize_security_group_ingress(
        GroupId=gid,
        IpPermissions=[
            {
                "IpProtocol": "tcp",
                "FromPort": 22,
                "ToPort": 22,
                "IpRanges": [{"CidrIp": "9.9.9.9/32"}],
            }
        ],
    )
    changed = service(
        {A_SOURCE_RANGES: "10.1.0.0/16, 2001:db8::/64"},
    )
    changed = replace(changed, ports=(ServicePort(port=8443, node_port=30443, name="https"),))
    since = aws.trail.events()[-1].seq
    lb.update_load_balancer("kubernetes", changed, nodes(topo))

    assert "CreateSecurityGroup" not in actions(aws, since)
    assert "SetSecurityGroups" not in actions(aws, since)
    assert rules(aws, gid) == {
        ("tcp", 8443, 8443, "10.1.0.0/16", ""),
        ("icmp", 3, 4, "10.1.0.0/16", ""),
    }
    v6 = aws.client("ec2").describe_security_groups(GroupIds=[gid])["SecurityGroups"][0]
    assert {
        (p["IpProtocol"], p["FromPort"], r["CidrIpv6"])
        for p in v6["IpPermissions"]
        for r in p.get("Ipv6Ranges", [])
    } == {("tcp", 8443, "2001:db8::/64")}


def test_delete_removes_the_nlb_then_its_group_and_keeps_everything_else(
    aws: AwsServer, topo: Topology, make_cloud: MakeCloud
) -> None:
    before = group_ids(aws)
    node_rules_before = rules(aws, topo.nodes_group)
    lb = make_cloud(extra=MANAGED).load_balancer()
    lb.ensure_load_balancer("kubernetes", service(), nodes(topo))
    group = managed_group(aws, service())
    assert group is not None
    aws.control.set_fidelity(elb_sg_release_s=0.2)  # the group stays "in use" after the NLB goes
    since = aws.trail.events()[-1].seq

    lb.ensure_load_balancer_deleted("kubernetes", service())

    seq = actions(aws, since)
    assert seq[:7] == [
        "DescribeLoadBalancers",
        "DescribeSecurityGroups",
        "RevokeSecurityGroupIngress",  # node rules first (ours)
        "DescribeTargetGroups",
        "DescribeSecurityGroups",  # buildSecurityGroupsToDelete: the NLB's groups, owned?
        "DeleteLoadBalancer",
        "DeleteTargetGroup",
    ]
    # ELBv2 releases the group after the NLB: DependencyViolation first, then retried
    deletes = aws.trail.calls("DeleteSecurityGroup")
    assert [c.params["GroupId"] for c in deletes] == [group["GroupId"]] * len(deletes)
    assert len(deletes) >= 2
    assert {c.error_code for c in deletes[:-1]} == {"DependencyViolation"}
    assert deletes[-1].error_code is None
    assert aws.client("elbv2").describe_load_balancers()["LoadBalancers"] == []
    assert target_groups(aws) == []
    assert group_ids(aws) == before
    assert rules(aws, topo.nodes_group) == node_rules_before


def test_delete_after_the_nlb_is_gone_still_deletes_the_managed_group(
    aws: AwsServer, topo: Topology, make_cloud: MakeCloud
) -> None:
    """A delete that failed after ``DeleteLoadBalancer`` is retried with the NLB gone;
    upstream returns at "already deleted" and the group leaks (ours: DEVIATIONS.md)."""
    before = group_ids(aws)
    lb = make_cloud(extra=MANAGED).load_balancer()
    lb.ensure_load_balancer("kubernetes", service(), nodes(topo))
    elbv2 = aws.client("elbv2")
    arn = the_lb(aws)["LoadBalancerArn"]
    elbv2.delete_load_balancer(LoadBalancerArn=arn)
    assert managed_group(aws, service()) is not None

    lb.ensure_load_balancer_deleted("kubernetes", service())

    assert managed_group(aws, service()) is None
    assert group_ids(aws) == before


def test_existing_nlb_without_groups_gets_none_when_the_mode_is_turned_on(
    aws: AwsServer, topo: Topology, make_cloud: MakeCloud
) -> None:
    make_cloud().load_balancer().ensure_load_balancer("kubernetes", service(), nodes(topo))
    before = group_ids(aws)
    since = aws.trail.events()[-1].seq

    make_cloud(extra=MANAGED).load_balancer().update_load_balancer(
        "kubernetes", service(), nodes(topo)
    )

    assert mutating(aws, since) == []
    assert the_lb(aws).get("SecurityGroups", []) == []
    assert group_ids(aws) == before


def test_mode_turned_off_keeps_the_group_until_the_service_is_deleted(
    aws: AwsServer, topo: Topology, make_cloud: MakeCloud
) -> None:
    before = group_ids(aws)
    make_cloud(extra=MANAGED).load_balancer().ensure_load_balancer(
        "kubernetes", service(), nodes(topo)
    )
    group = managed_group(aws, service())
    assert group is not None
    since = aws.trail.events()[-1].seq

    off = make_cloud().load_balancer()
    off.update_load_balancer("kubernetes", service(), nodes(topo))
    assert mutating(aws, since) == []
    assert the_lb(aws)["SecurityGroups"] == [group["GroupId"]]

    off.ensure_load_balancer_deleted("kubernetes", service())
    assert managed_group(aws, service()) is None
    assert group_ids(aws) == before


def test_byo_groups_replace_the_managed_group_which_is_deleted_and_are_never_touched(
    aws: AwsServer, topo: Topology, make_cloud: MakeCloud
) -> None:
    byo = user_group(aws, topo, "user-nlb")
    byo_rules = rules(aws, byo)
    lb = make_cloud(extra=MANAGED).load_balancer()
    lb.ensure_load_balancer("kubernetes", service(), nodes(topo))
    group = managed_group(aws, service())
    assert group is not None
    since = aws.trail.events()[-1].seq

    with_byo = service({A_SECURITY_GROUPS: f" {byo} "})
    lb.update_load_balancer("kubernetes", with_byo, nodes(topo))

    assert "SetSecurityGroups" in actions(aws, since)
    assert the_lb(aws)["SecurityGroups"] == [byo]
    assert managed_group(aws, service()) is None  # the dropped managed group was ours
    assert rules(aws, byo) == byo_rules  # BYO: no rules managed
    since = aws.trail.events()[-1].seq
    lb.update_load_balancer("kubernetes", with_byo, nodes(topo))
    assert mutating(aws, since) == []

    lb.ensure_load_balancer_deleted("kubernetes", with_byo)
    assert byo in group_ids(aws)
    assert rules(aws, byo) == byo_rules
    assert [c.params["GroupId"] for c in aws.trail.calls("DeleteSecurityGroup")] == [
        group["GroupId"]
    ] * len(aws.trail.calls("DeleteSecurityGroup"))


def test_new_nlb_with_byo_groups_creates_no_group(
    aws: AwsServer, topo: Topology, make_cloud: MakeCloud
) -> None:
    byo = user_group(aws, topo, "user-nlb")
    before = group_ids(aws)
    since = aws.trail.events()[-1].seq
    lb = make_cloud(extra=MANAGED).load_balancer()
    svc = service({A_SECURITY_GROUPS: byo})
    lb.ensure_load_balancer("kubernetes", svc, nodes(topo))
    assert "CreateSecurityGroup" not in actions(aws, since)
    assert aws.trail.calls("CreateLoadBalancer")[0].params["SecurityGroups"] == [byo]
    assert the_lb(aws)["SecurityGroups"] == [byo]
    assert group_ids(aws) == before


def test_byo_annotation_is_ignored_without_the_mode_and_checked_with_it(
    aws: AwsServer, topo: Topology, make_cloud: MakeCloud
) -> None:
    bad = service({A_SECURITY_GROUPS: "sg-1,not-a-group"})
    make_cloud().load_balancer().ensure_load_balancer("kubernetes", bad, nodes(topo))
    assert the_lb(aws).get("SecurityGroups", []) == []
    aws.control.clear_trail()
    other = service({A_SECURITY_GROUPS: "sg-1,not-a-group"}, name="other", uid="u-2")
    with pytest.raises(InvalidServiceConfig) as err:
        make_cloud(extra=MANAGED).load_balancer().ensure_load_balancer(
            "kubernetes", other, nodes(topo)
        )
    assert err.value.field == A_SECURITY_GROUPS
    assert "not-a-group" in str(err.value)
    assert actions(aws) == []
    [only] = aws.client("elbv2").describe_load_balancers()["LoadBalancers"]
    assert only["LoadBalancerName"] == LB_NAME  # the first Service's; nothing made for "other"


def test_managed_rules_use_tcp_for_tls_and_udp_for_udp_listeners() -> None:
    """Pure: upstream lower-cases the listener protocol, so a TLS listener's rule would be
    ``tls``, which EC2 refuses; ours opens TCP (DEVIATIONS.md). UDP stays UDP; IPv6 ranges get
    no ICMP rule."""
    from controller.aws.nlbspec import managed_security_group_rules, parse_nlb_service
    from controller.aws.sgrules import Rule

    tls = service(
        {PREFIX + "ssl-cert": "arn:aws:acm:us-east-1:123456789012:certificate/x"},
        load_balancer_source_ranges=("10.0.0.0/8", "2001:db8::/64"),
    )
    assert managed_security_group_rules(parse_nlb_service(tls)) == {
        Rule("tcp", 80, 80, "cidr", "10.0.0.0/8"),
        Rule("icmp", 3, 4, "cidr", "10.0.0.0/8"),
        Rule("tcp", 80, 80, "cidr6", "2001:db8::/64"),
    }
    udp = service(ports=(ServicePort(port=53, node_port=30053, protocol="UDP"),))
    assert managed_security_group_rules(parse_nlb_service(udp)) == {
        Rule("udp", 53, 53, "cidr", "0.0.0.0/0"),
        Rule("icmp", 3, 4, "cidr", "0.0.0.0/0"),
    }

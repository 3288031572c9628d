"""The NLB node-rule legacy switches (``k8s-57568``, ``k8s-70421``, ``k8s-98278``) against the
lab's AWS endpoint: each switch shows its old upstream behaviour in the end state and the call
trail, and the same steps without it show the fix. The pure plans are in
``test_nlb_legacy_rules``; the catalog scenarios (``e2e/test_k8s_*.py``) add the cluster and
the traffic verdicts.
"""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError

from controller.aws.clients import revoke_as_sdk_v1
from controller.cloud import CloudError, ServicePort
from lab.aws import AwsServer
from tests.controller.aws.conftest import MakeCloud
from tests.controller.aws.test_loadbalancer import nodes
from tests.controller.aws.test_nlb import CLIENT, HEALTH, MTU, ours, rules, service
from tests.controller.aws.topology import Topology

SOURCES = (
    "missing mandatory parameter: exactly one of remote-security-group, remote-ip-range, "
    "remote-ipv6-range, or prefix-list-id must be present"
)


def vpc_cidr(aws: AwsServer, topo: Topology) -> str:
    [vpc] = aws.client("ec2").describe_vpcs(VpcIds=[topo.vpc])["Vpcs"]
    return str(vpc["CidrBlock"])


def self_rule_present(aws: AwsServer, group_id: str) -> bool:
    [group] = aws.client("ec2").describe_security_groups(GroupIds=[group_id])["SecurityGroups"]
    return any(
        p["IpProtocol"] == "-1" and any(g["GroupId"] == group_id for g in p["UserIdGroupPairs"])
        for p in group["IpPermissions"]
    )


# -- k8s-57568 ---------------------------------------------------------------------------------


def test_legacy_57568_delete_sends_the_empty_ipv6_list_and_leaks_the_rules(
    aws: AwsServer, topo: Topology, make_cloud: MakeCloud
) -> None:
    lb = make_cloud("k8s-57568").load_balancer()
    lb.ensure_load_balancer("kubernetes", service(), nodes(topo))
    opened = ours(aws, topo.nodes_group)
    assert ("tcp", 30080, 30080, "0.0.0.0/0", CLIENT) in opened
    since = aws.trail.last_seq

    with pytest.raises(CloudError, match="missing mandatory parameter"):
        lb.ensure_load_balancer_deleted("kubernetes", service())
    calls = [e for e in aws.trail.events() if e.seq > since]
    # upstream's order: the NLB and its target groups go before the rules
    assert [e.action for e in calls if not e.action.startswith("Describe")] == [
        "DeleteLoadBalancer",
        "DeleteTargetGroup",
        "RevokeSecurityGroupIngress",
    ]
    [revoke] = [e for e in calls if e.action == "RevokeSecurityGroupIngress"]
    assert revoke.error_code == "InvalidParameterValue"
    assert revoke.error_message == SOURCES
    assert revoke.raw_params["IpPermissions.1.Ipv6Ranges"] == "", "aws-sdk-go's empty list"
    # the retry finds no NLB and returns: the rules stay open for good
    lb.ensure_load_balancer_deleted("kubernetes", service())
    assert aws.client("elbv2").describe_load_balancers()["LoadBalancers"] == []
    assert ours(aws, topo.nodes_group) == opened


def test_fixed_57568_delete_revokes_every_rule_first(
    aws: AwsServer, topo: Topology, make_cloud: MakeCloud
) -> None:
    lb = make_cloud().load_balancer()
    lb.ensure_load_balancer("kubernetes", service(), nodes(topo))
    since = aws.trail.last_seq
    lb.ensure_load_balancer_deleted("kubernetes", service())
    calls = [e for e in aws.trail.events() if e.seq > since]
    assert [e.error_code for e in calls] == [None] * len(calls)
    assert ours(aws, topo.nodes_group) == set()


def test_the_sdk_v1_revoke_is_refused_even_with_an_ipv4_range(aws: AwsServer) -> None:
    """The wire form alone is the fault: the same permission through boto3 (no empty list)
    is accepted, so the legacy path fails only for the reason v1.9.0 did."""
    ec2 = aws.client("ec2")
    vpc = ec2.create_vpc(CidrBlock="10.9.0.0/16")["Vpc"]["VpcId"]
    group = ec2.create_security_group(GroupName="g", Description="g", VpcId=vpc)["GroupId"]
    perm: Any = {
        "IpProtocol": "tcp",
        "FromPort": 80,
        "ToPort": 80,
        "IpRanges": [{"CidrIp": "0.0.0.0/0"}],
    }
    ec2.authorize_security_group_ingress(GroupId=group, IpPermissions=[perm])
    with pytest.raises(ClientError) as err:
        revoke_as_sdk_v1(ec2, group, [{**perm, "Ipv6Ranges": []}])
    assert err.value.response["Error"]["Message"] == SOURCES
    revoke_as_sdk_v1(ec2, group, [perm])  # nothing empty: an ordinary revoke
    [desc] = ec2.describe_security_groups(GroupIds=[group])["SecurityGroups"]
    assert desc["IpPermissions"] == []


# -- k8s-70421 ---------------------------------------------------------------------------------


def moved() -> Any:
    return service(ports=(ServicePort(port=8080, node_port=30081, name="http"),))


def test_legacy_70421_port_change_keeps_the_old_rules_open(
    aws: AwsServer, topo: Topology, make_cloud: MakeCloud
) -> None:
    lb = make_cloud("k8s-70421").load_balancer()
    lb.ensure_load_balancer("kubernetes", service(), nodes(topo))
    vpc = vpc_cidr(aws, topo)
    assert ("tcp", 30080, 30080, vpc, HEALTH) in ours(aws, topo.nodes_group), "from the VPC"
    lb.ensure_load_balancer("kubernetes", moved(), nodes(topo))
    now = ours(aws, topo.nodes_group)
    for port in (30080, 30081):
        assert ("tcp", port, port, "0.0.0.0/0", CLIENT) in now
        assert ("tcp", port, port, vpc, HEALTH) in now


def test_legacy_70421_unchanged_sync_revokes_then_restores_the_rules(
    aws: AwsServer, topo: Topology, make_cloud: MakeCloud
) -> None:
    """kubernetes#60825 / #64148: a node change revokes the rules in place; the next adds them."""
    lb = make_cloud("k8s-70421").load_balancer()
    lb.ensure_load_balancer("kubernetes", service(), nodes(topo))
    assert ("tcp", 30080, 30080, "0.0.0.0/0", CLIENT) in ours(aws, topo.nodes_group)
    lb.update_load_balancer("kubernetes", service(), nodes(topo, "node-1"))
    assert {r for r in ours(aws, topo.nodes_group) if r[4] != MTU} == set()
    lb.update_load_balancer("kubernetes", service(), nodes(topo))
    assert ("tcp", 30080, 30080, "0.0.0.0/0", CLIENT) in ours(aws, topo.nodes_group)


def test_fixed_70421_port_change_and_node_change(
    aws: AwsServer, topo: Topology, make_cloud: MakeCloud
) -> None:
    lb = make_cloud().load_balancer()
    lb.ensure_load_balancer("kubernetes", service(), nodes(topo))
    lb.update_load_balancer("kubernetes", service(), nodes(topo, "node-1"))
    assert ("tcp", 30080, 30080, "0.0.0.0/0", CLIENT) in ours(aws, topo.nodes_group)
    lb.ensure_load_balancer("kubernetes", moved(), nodes(topo))
    assert {r[1] for r in ours(aws, topo.nodes_group) if r[4] != MTU} == {30081}


# -- k8s-98278 ---------------------------------------------------------------------------------


def described_all_traffic(aws: AwsServer, group_id: str) -> None:
    """The report's step: an all-traffic rule carrying this NLB's client description."""
    aws.client("ec2").authorize_security_group_ingress(
        GroupId=group_id,
        IpPermissions=[
            {"IpProtocol": "-1", "IpRanges": [{"CidrIp": "10.20.0.0/16", "Description": CLIENT}]}
        ],
    )


@pytest.mark.parametrize("legacy", [True, False], ids=["legacy", "fixed"])
def test_98278_node_change_and_the_self_rule(
    aws: AwsServer, topo: Topology, make_cloud: MakeCloud, legacy: bool
) -> None:
    lb = make_cloud(*(["k8s-98278"] if legacy else [])).load_balancer()
    lb.ensure_load_balancer("kubernetes", service(), nodes(topo))
    described_all_traffic(aws, topo.nodes_group)
    assert self_rule_present(aws, topo.nodes_group)
    since = aws.trail.last_seq
    lb.update_load_balancer("kubernetes", service(), nodes(topo, "node-1"))
    [revoke] = [
        e for e in aws.trail.events() if e.seq > since and e.action == "RevokeSecurityGroupIngress"
    ]
    assert revoke.error_code is None
    # the described all-traffic rule goes either way (it carries our description)...
    assert ("-1", -1, -1, "10.20.0.0/16", CLIENT) not in rules(aws, topo.nodes_group)
    assert ("tcp", 30080, 30080, "0.0.0.0/0", CLIENT) in ours(aws, topo.nodes_group)
    # ...and legacy takes the self rule EC2 listed in the same permission with it
    assert self_rule_present(aws, topo.nodes_group) is not legacy
    revoked_groups = [v for k, v in revoke.raw_params.items() if k.endswith(".GroupId")]
    assert revoked_groups == ([topo.nodes_group] if legacy else [])


def test_legacy_98278_regrants_a_wanted_rule_that_shared_a_permission(
    aws: AwsServer, topo: Topology, make_cloud: MakeCloud
) -> None:
    """A user's group rule on the node port shares our client rule's permission: upstream
    revokes both on every sync and grants ours again; the user's rule is gone."""
    ec2 = aws.client("ec2")
    lb = make_cloud("k8s-98278").load_balancer()
    lb.ensure_load_balancer("kubernetes", service(), nodes(topo))
    ec2.authorize_security_group_ingress(
        GroupId=topo.nodes_group,
        IpPermissions=[
            {
                "IpProtocol": "tcp",
                "FromPort": 30080,
                "ToPort": 30080,
                "UserIdGroupPairs": [{"GroupId": topo.nodes_group, "Description": "bastion"}],
            }
        ],
    )
    lb.update_load_balancer("kubernetes", service(), nodes(topo))
    [group] = ec2.describe_security_groups(GroupIds=[topo.nodes_group])["SecurityGroups"]
    port_rules = [p for p in group["IpPermissions"] if p.get("FromPort") == 30080]
    assert [g["GroupId"] for p in port_rules for g in p["UserIdGroupPairs"]] == []
    assert ("tcp", 30080, 30080, "0.0.0.0/0", CLIENT) in ours(aws, topo.nodes_group)

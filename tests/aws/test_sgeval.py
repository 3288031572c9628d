"""Security-group evaluation: AWS semantics on rules created with boto3 against the endpoint.

Each test builds groups and rules the way a cluster and its controller do (node group,
load-balancer group, self-referencing rule, CIDR, prefix list), then asks
:class:`lab.aws.health.sgview.SecurityGroupView` what EC2 would do with a new connection.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from lab.aws import AwsServer
from lab.aws.health.sgview import SecurityGroupView
from lab.aws.sgeval import (
    Flow,
    Rule,
    SecurityGroup,
    SecurityGroupError,
    SecurityGroupModel,
    parse_cidr,
)
from tests.aws import builders as b

if TYPE_CHECKING:
    from mypy_boto3_ec2.type_defs import IpPermissionTypeDef


def node_ports_from(group_id: str) -> list[IpPermissionTypeDef]:
    """The controller's rule: the node port range from the load balancer's group."""
    return [
        {
            "IpProtocol": "tcp",
            "FromPort": 30000,
            "ToPort": 32767,
            "UserIdGroupPairs": [{"GroupId": group_id}],
        }
    ]


def _view(aws: AwsServer) -> SecurityGroupView:
    return SecurityGroupView(aws.lab)


def test_self_referencing_node_group_rule_admits_the_other_nodes(aws: AwsServer) -> None:
    ec2 = aws.client("ec2")
    node = b.group(ec2, "node")
    other = b.group(ec2, "outsider")
    b.allow_all_from(ec2, node, node)  # the cluster's "all traffic from itself" rule
    view = _view(aws)

    member = view.ingress(dest_groups=[node], protocol="tcp", port=10250, source_groups=[node])
    assert member.allowed
    assert member.reason == f"allowed by {node} (node) inbound rule all traffic from itself"

    outsider = view.ingress(dest_groups=[node], protocol="tcp", port=10250, source_groups=[other])
    assert not outsider.allowed
    assert f"no inbound rule of {node} allows tcp/10250 from {other}" in outsider.reason
    assert f"{node} (node): all traffic from itself" in outsider.reason


def test_elb_group_referenced_by_the_node_group_on_the_node_port_range(aws: AwsServer) -> None:
    ec2 = aws.client("ec2")
    node, lb = b.group(ec2, "node"), b.group(ec2, "k8s-elb-a1")
    ec2.authorize_security_group_ingress(GroupId=node, IpPermissions=node_ports_from(lb))
    view = _view(aws)

    for port, allowed in ((30000, True), (30080, True), (32767, True), (29999, False)):
        verdict = view.ingress(dest_groups=[node], protocol="tcp", port=port, source_groups=[lb])
        assert verdict.allowed is allowed, (port, verdict.reason)
    assert not view.ingress(
        dest_groups=[node], protocol="udp", port=30080, source_groups=[lb]
    ).allowed
    # the same port from an address, not from a member of the group: no
    by_ip = view.ingress(dest_groups=[node], protocol="tcp", port=30080, source_ip="10.0.0.9")
    assert not by_ip.allowed
    assert f"tcp/30000-32767 from {lb}" in by_ip.reason


def test_cidr_rules_match_addresses_inside_only(aws: AwsServer) -> None:
    ec2 = aws.client("ec2")
    lb = b.group(ec2, "elb")
    ec2.authorize_security_group_ingress(
        GroupId=lb,
        IpPermissions=[
            {
                "IpProtocol": "tcp",
                "FromPort": 80,
                "ToPort": 80,
                "IpRanges": [{"CidrIp": "203.0.113.0/24"}],
            },
            {
                "IpProtocol": "tcp",
                "FromPort": 443,
                "ToPort": 443,
                "Ipv6Ranges": [{"CidrIpv6": "2001:db8::/32"}],
            },
        ],
    )
    view = _view(aws)
    assert view.ingress(dest_groups=[lb], protocol="tcp", port=80, source_ip="203.0.113.77").allowed
    assert not view.ingress(
        dest_groups=[lb], protocol="tcp", port=80, source_ip="198.51.100.7"
    ).allowed
    assert view.ingress(dest_groups=[lb], protocol="6", port=443, source_ip="2001:db8::5").allowed
    assert not view.ingress(
        dest_groups=[lb], protocol="tcp", port=443, source_ip="203.0.113.77"
    ).allowed


def test_all_traffic_rule_covers_every_protocol_and_port(aws: AwsServer) -> None:
    ec2 = aws.client("ec2")
    sg = b.group(ec2, "open")
    ec2.authorize_security_group_ingress(
        GroupId=sg, IpPermissions=[{"IpProtocol": "-1", "IpRanges": [{"CidrIp": "10.0.0.0/8"}]}]
    )
    view = _view(aws)
    for protocol, port in (("tcp", 1), ("udp", 53), ("icmp", 8), ("47", None), ("tcp", 65535)):
        verdict = view.ingress(dest_groups=[sg], protocol=protocol, port=port, source_ip="10.1.2.3")
        assert verdict.allowed, (protocol, port)
        assert "all traffic from 10.0.0.0/8" in verdict.reason


def test_icmp_type_and_code(aws: AwsServer) -> None:
    ec2 = aws.client("ec2")
    sg = b.group(ec2, "ping")
    ec2.authorize_security_group_ingress(
        GroupId=sg,
        IpPermissions=[
            {
                "IpProtocol": "icmp",
                "FromPort": 8,
                "ToPort": -1,
                "IpRanges": [{"CidrIp": "0.0.0.0/0"}],
            }
        ],
    )
    view = _view(aws)
    assert view.ingress(dest_groups=[sg], protocol="icmp", port=8, source_ip="192.0.2.1").allowed
    assert not view.ingress(
        dest_groups=[sg], protocol="icmp", port=3, source_ip="192.0.2.1"
    ).allowed
    assert not view.ingress(dest_groups=[sg], protocol="tcp", port=8, source_ip="192.0.2.1").allowed


def test_revoked_rule_denies_and_names_what_is_left(aws: AwsServer) -> None:
    ec2 = aws.client("ec2")
    node, lb = b.group(ec2, "node"), b.group(ec2, "elb")
    perms = node_ports_from(lb)
    ec2.authorize_security_group_ingress(GroupId=node, IpPermissions=perms)
    b.allow_all_from(ec2, node, node)
    view = _view(aws)
    assert view.ingress(dest_groups=[node], protocol="tcp", port=31000, source_groups=[lb]).allowed

    ec2.revoke_security_group_ingress(GroupId=node, IpPermissions=perms)

    verdict = view.ingress(dest_groups=[node], protocol="tcp", port=31000, source_groups=[lb])
    assert not verdict.allowed
    assert verdict.reason == (
        f"denied: no inbound rule of {node} allows tcp/31000 from {lb} "
        f"(evaluated inbound rules: {node} (node): all traffic from itself)"
    )


def test_union_of_the_interface_groups_and_membership_by_any_interface(aws: AwsServer) -> None:
    """Two groups on the destination: either one's rule admits. The source is a member of a
    group that only its second network interface has."""
    ec2 = aws.client("ec2")
    web, admin, peer = b.group(ec2, "web"), b.group(ec2, "admin"), b.group(ec2, "peer")
    ec2.authorize_security_group_ingress(
        GroupId=admin,
        IpPermissions=[
            {
                "IpProtocol": "tcp",
                "FromPort": 22,
                "ToPort": 22,
                "UserIdGroupPairs": [{"GroupId": peer}],
            }
        ],
    )
    source = b.instance(ec2, web)
    eni = ec2.create_network_interface(SubnetId=b.first_subnet(ec2), Groups=[peer])
    ec2.attach_network_interface(
        NetworkInterfaceId=eni["NetworkInterface"]["NetworkInterfaceId"],
        InstanceId=source,
        DeviceIndex=1,
    )
    from lab.aws.health.view import instance

    groups = instance(aws.lab, source).groups
    assert set(groups) == {web, peer}
    view = _view(aws)
    verdict = view.ingress(dest_groups=[web, admin], protocol="tcp", port=22, source_groups=groups)
    assert verdict.allowed
    assert admin in verdict.reason
    assert not view.ingress(
        dest_groups=[web], protocol="tcp", port=22, source_groups=groups
    ).allowed


def test_prefix_list_rule_matches_its_current_entries(aws: AwsServer) -> None:
    ec2 = aws.client("ec2")
    plist = ec2.create_managed_prefix_list(
        PrefixListName="office",
        AddressFamily="IPv4",
        MaxEntries=5,
        Entries=[{"Cidr": "192.0.2.0/28"}],
    )["PrefixList"]["PrefixListId"]
    sg = b.group(ec2, "office-only")
    ec2.authorize_security_group_ingress(
        GroupId=sg,
        IpPermissions=[
            {
                "IpProtocol": "tcp",
                "FromPort": 443,
                "ToPort": 443,
                "PrefixListIds": [{"PrefixListId": plist}],
            }
        ],
    )
    view = _view(aws)
    inside = view.ingress(dest_groups=[sg], protocol="tcp", port=443, source_ip="192.0.2.5")
    assert inside.allowed
    assert plist in inside.reason
    assert not view.ingress(
        dest_groups=[sg], protocol="tcp", port=443, source_ip="192.0.2.99"
    ).allowed


def test_outbound_rules_of_the_source_apply(aws: AwsServer) -> None:
    ec2 = aws.client("ec2")
    src, dst = b.group(ec2, "src"), b.group(ec2, "dst")
    b.allow_all_from(ec2, dst, src)
    view = _view(aws)
    # a new group's default outbound rule allows everything
    assert view.connect(dest_groups=[dst], protocol="tcp", port=80, source_groups=[src]).allowed
    ec2.revoke_security_group_egress(
        GroupId=src, IpPermissions=[{"IpProtocol": "-1", "IpRanges": [{"CidrIp": "0.0.0.0/0"}]}]
    )
    verdict = view.connect(dest_groups=[dst], protocol="tcp", port=80, source_groups=[src])
    assert not verdict.allowed
    assert verdict.reason.startswith(f"denied: no outbound rule of {src} allows tcp/80 to {dst}")
    b.allow_all_from(ec2, src, dst, egress=True)
    assert view.connect(dest_groups=[dst], protocol="tcp", port=80, source_groups=[src]).allowed


def test_no_groups_and_unknown_groups_deny() -> None:
    model = SecurityGroupModel()
    flow = Flow.of("tcp", 80, source_ip="10.0.0.1")
    assert not model.ingress([], flow).allowed
    gone = model.ingress(["sg-gone"], flow)
    assert not gone.allowed
    assert "sg-gone: no such group" in gone.reason


def test_bad_questions_name_the_field() -> None:
    with pytest.raises(SecurityGroupError, match="protocol='tcpp'"):
        Flow.of("tcpp", 80)
    with pytest.raises(SecurityGroupError, match="port=70000"):
        Flow.of("tcp", 70000)
    with pytest.raises(SecurityGroupError, match="port=None"):
        Flow.of("udp", None)
    with pytest.raises(SecurityGroupError, match=r"source_ip='10\.0\.0\.300'"):
        Flow.of("tcp", 80, source_ip="10.0.0.300")
    with pytest.raises(SecurityGroupError, match=r"cidr='10\.0\.0/33'"):
        parse_cidr("10.0.0/33")


def test_model_is_pure_and_a_first_match_wins() -> None:
    node = SecurityGroup(
        "sg-node",
        "node",
        ingress=(
            Rule("sg-node", "tcp", 22, 22, cidr=parse_cidr("0.0.0.0/0")),
            Rule("sg-node", "-1", peer_group="sg-node"),
        ),
    )
    model = SecurityGroupModel(groups={"sg-node": node})
    ssh = model.ingress(
        ["sg-node"], Flow.of("tcp", 22, source_groups=["sg-node"], source_ip="1.2.3.4")
    )
    assert ssh.rule is node.ingress[0]
    assert ssh.evaluated == ("sg-node",)


def test_the_model_follows_changes_made_through_the_api(aws: AwsServer) -> None:
    ec2 = aws.client("ec2")
    sg = b.group(ec2, "later")
    view = _view(aws)
    first = view.model()
    assert view.model() is first  # cached while nothing changes
    ec2.authorize_security_group_ingress(
        GroupId=sg,
        IpPermissions=[
            {
                "IpProtocol": "udp",
                "FromPort": 53,
                "ToPort": 53,
                "IpRanges": [{"CidrIp": "10.0.0.0/8"}],
            }
        ],
    )
    assert view.model() is not first
    assert view.ingress(dest_groups=[sg], protocol="udp", port=53, source_ip="10.9.9.9").allowed

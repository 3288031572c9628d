"""Malformed EC2/ELB/ELBv2 calls get AWS's error and change nothing (issue #14's cases).

Each case builds a small world (a group, an instance, a Classic ELB), snapshots everything
boto3 can describe, sends the malformed call on the wire (boto3 would refuse most of them),
and checks the AWS error code, the HTTP status, and that the snapshot did not move.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from botocore.exceptions import ClientError

from lab.aws import AwsServer
from tests.aws.builders import classic_elb, first_subnet, group, instance
from tests.aws.wire import call, post, snapshot


@dataclass(frozen=True)
class World:
    nodes: str
    elb_group: str
    instance: str
    subnet: str


@pytest.fixture
def world(aws: AwsServer) -> World:
    ec2 = aws.client("ec2")
    nodes = group(ec2, "nodes")
    elb_group = group(ec2, "k8s-elb-a1")
    node = instance(ec2, nodes)
    classic_elb(aws.client("elb"), ec2, "a1", [elb_group])
    return World(nodes, elb_group, node, first_subnet(ec2))


SOURCES_57568 = (
    "missing mandatory parameter: exactly one of remote-security-group, remote-ip-range, "
    "remote-ipv6-range, or prefix-list-id must be present"
)


def _perm(prefix: str, **fields: str) -> dict[str, str]:
    return {f"{prefix}.{k.replace('__', '.')}": v for k, v in fields.items()}


CASES = [
    # (id, service, action, params(world) , code, message fragment)
    (
        "elb-create-without-name",
        "elb",
        "CreateLoadBalancer",
        lambda w: {
            "Listeners.member.1.Protocol": "TCP",
            "Listeners.member.1.LoadBalancerPort": "80",
            "Listeners.member.1.InstancePort": "30080",
            "Subnets.member.1": w.subnet,
        },
        "ValidationError",
        "Value null at 'loadBalancerName' failed to satisfy constraint: Member must not be null",
    ),
    (
        "sg-ingress-protocol-frob",
        "ec2",
        "AuthorizeSecurityGroupIngress",
        lambda w: (
            {"GroupId": w.nodes}
            | _perm(
                "IpPermissions.1",
                IpProtocol="frob",
                FromPort="80",
                ToPort="80",
                IpRanges__1__CidrIp="10.0.0.0/8",
            )
        ),
        "InvalidParameterValue",
        "Invalid value 'frob' for IP protocol",
    ),
    (
        "sg-create-without-name",
        "ec2",
        "CreateSecurityGroup",
        lambda w: {"GroupDescription": "x"},
        "MissingParameter",
        "GroupName",
    ),
    (
        "sg-create-in-missing-vpc",
        "ec2",
        "CreateSecurityGroup",
        lambda w: {"GroupName": "g", "GroupDescription": "x", "VpcId": "vpc-garbage"},
        "InvalidVpcID.NotFound",
        "vpc-garbage",
    ),
    (
        "sg-create-sg-prefix",
        "ec2",
        "CreateSecurityGroup",
        lambda w: {"GroupName": "sg-123", "GroupDescription": "x"},
        "InvalidParameterValue",
        "sg-*",
    ),
    (
        "sg-create-name-too-long",
        "ec2",
        "CreateSecurityGroup",
        lambda w: {"GroupName": "g" * 256, "GroupDescription": "x"},
        "InvalidParameterValue",
        "255",
    ),
    (
        "elb-name-40-chars",
        "elb",
        "CreateLoadBalancer",
        lambda w: {
            "LoadBalancerName": "a" * 40,
            "Listeners.member.1.Protocol": "TCP",
            "Listeners.member.1.LoadBalancerPort": "80",
            "Listeners.member.1.InstancePort": "30080",
            "Subnets.member.1": w.subnet,
        },
        "ValidationError",
        "cannot be longer than 32 characters",
    ),
    (
        "elb-name-unicode",
        "elb",
        "CreateLoadBalancer",
        lambda w: {
            "LoadBalancerName": "wéb",
            "Listeners.member.1.Protocol": "TCP",
            "Listeners.member.1.LoadBalancerPort": "80",
            "Listeners.member.1.InstancePort": "30080",
            "Subnets.member.1": w.subnet,
        },
        "ValidationError",
        "letters, or digits or the dash",
    ),
    (
        "elb-name-edge-hyphen",
        "elb",
        "CreateLoadBalancer",
        lambda w: {
            "LoadBalancerName": "-web",
            "Listeners.member.1.Protocol": "TCP",
            "Listeners.member.1.LoadBalancerPort": "80",
            "Listeners.member.1.InstancePort": "30080",
            "Subnets.member.1": w.subnet,
        },
        "ValidationError",
        "hyphen",
    ),
    (
        "elb-listener-port-70000",
        "elb",
        "CreateLoadBalancerListeners",
        lambda w: {
            "LoadBalancerName": "a1",
            "Listeners.member.1.Protocol": "TCP",
            "Listeners.member.1.LoadBalancerPort": "70000",
            "Listeners.member.1.InstancePort": "30080",
        },
        "ValidationError",
        "LoadBalancerPort 70000",
    ),
    (
        "elb-instance-port-70000",
        "elb",
        "CreateLoadBalancerListeners",
        lambda w: {
            "LoadBalancerName": "a1",
            "Listeners.member.1.Protocol": "TCP",
            "Listeners.member.1.LoadBalancerPort": "8080",
            "Listeners.member.1.InstancePort": "70000",
        },
        "ValidationError",
        "'listeners.1.member.instancePort' failed to satisfy constraint: "
        "Member must have value less than or equal to 65535",
    ),
    (
        "elb-port-not-allowed",
        "elb",
        "CreateLoadBalancerListeners",
        lambda w: {
            "LoadBalancerName": "a1",
            "Listeners.member.1.Protocol": "TCP",
            "Listeners.member.1.LoadBalancerPort": "22",
            "Listeners.member.1.InstancePort": "22",
        },
        "ValidationError",
        "25, 80, 443, 465, 587, 1024-65535",
    ),
    (
        "elb-missing-subnet",
        "elb",
        "CreateLoadBalancer",
        lambda w: {
            "LoadBalancerName": "b2",
            "Listeners.member.1.Protocol": "TCP",
            "Listeners.member.1.LoadBalancerPort": "80",
            "Listeners.member.1.InstancePort": "30080",
            "Subnets.member.1": "subnet-garbage",
        },
        "SubnetNotFound",
        "subnets do not exist",
    ),
    (
        "elb-missing-group",
        "elb",
        "ApplySecurityGroupsToLoadBalancer",
        lambda w: {"LoadBalancerName": "a1", "SecurityGroups.member.1": "sg-garbage"},
        "InvalidSecurityGroup",
        "security groups do not exist",
    ),
    (
        "elb-deregister-from-missing-lb",
        "elb",
        "DeregisterInstancesFromLoadBalancer",
        lambda w: {"LoadBalancerName": "nope", "Instances.member.1.InstanceId": w.instance},
        "LoadBalancerNotFound",
        "nope",
    ),
    (
        "unknown-action-ec2",
        "ec2",
        "Frob",
        lambda w: {},
        "InvalidAction",
        "The action Frob is not valid for this web service.",
    ),
    (
        "unknown-action-elb",
        "elb",
        "Frob",
        lambda w: {},
        "InvalidAction",
        "Frob",
    ),
    (
        "from-port-abc",
        "ec2",
        "AuthorizeSecurityGroupIngress",
        lambda w: (
            {"GroupId": w.nodes}
            | _perm(
                "IpPermissions.1",
                IpProtocol="tcp",
                FromPort="abc",
                ToPort="80",
                IpRanges__1__CidrIp="10.0.0.0/8",
            )
        ),
        "InvalidParameterValue",
        "IpPermissions.1.FromPort",
    ),
    (
        "port-range-reversed",
        "ec2",
        "AuthorizeSecurityGroupIngress",
        lambda w: (
            {"GroupId": w.nodes}
            | _perm(
                "IpPermissions.1",
                IpProtocol="tcp",
                FromPort="90",
                ToPort="80",
                IpRanges__1__CidrIp="10.0.0.0/8",
            )
        ),
        "InvalidParameterValue",
        "port range 90-80",
    ),
    (
        "port-out-of-range",
        "ec2",
        "AuthorizeSecurityGroupIngress",
        lambda w: (
            {"GroupId": w.nodes}
            | _perm(
                "IpPermissions.1",
                IpProtocol="udp",
                FromPort="1",
                ToPort="70000",
                IpRanges__1__CidrIp="10.0.0.0/8",
            )
        ),
        "InvalidParameterValue",
        "0..65535",
    ),
    (
        "bad-cidr",
        "ec2",
        "AuthorizeSecurityGroupIngress",
        lambda w: (
            {"GroupId": w.nodes}
            | _perm(
                "IpPermissions.1",
                IpProtocol="tcp",
                FromPort="80",
                ToPort="80",
                IpRanges__1__CidrIp="10.0.0.300/8",
            )
        ),
        "InvalidParameterValue",
        "This is not a valid CIDR block",
    ),
    (
        "missing-source-group",
        "ec2",
        "AuthorizeSecurityGroupIngress",
        lambda w: (
            {"GroupId": w.nodes}
            | _perm(
                "IpPermissions.1",
                IpProtocol="-1",
                Groups__1__GroupId="sg-garbage",
            )
        ),
        "InvalidGroup.NotFound",
        "sg-garbage",
    ),
    (
        "revoke-without-source-57568",
        "ec2",
        "RevokeSecurityGroupIngress",
        lambda w: (
            {"GroupId": w.nodes}
            | _perm("IpPermissions.1", IpProtocol="tcp", FromPort="80", ToPort="80")
        ),
        "InvalidParameterValue",
        SOURCES_57568,
    ),
    (
        # aws-sdk-go v1 serializes an empty list as ``Name=`` (queryutil ``parseList``); the
        # v1.9.0 NLB delete sent its v4 ranges with an empty ``Ipv6Ranges`` (kubernetes#57568,
        # fixed by PR #57569 splitting them)
        "revoke-empty-ipv6-ranges-57568",
        "ec2",
        "RevokeSecurityGroupIngress",
        lambda w: (
            {"GroupId": w.nodes}
            | _perm(
                "IpPermissions.1",
                IpProtocol="tcp",
                FromPort="80",
                ToPort="80",
                IpRanges__1__CidrIp="0.0.0.0/0",
                Ipv6Ranges="",
            )
        ),
        "InvalidParameterValue",
        SOURCES_57568,
    ),
    (
        "unknown-filter",
        "ec2",
        "DescribeSecurityGroups",
        lambda w: {"Filter.1.Name": "frob", "Filter.1.Value.1": "x"},
        "InvalidParameterValue",
        "The filter 'frob' is invalid",
    ),
    (
        "garbage-next-token",
        "ec2",
        "DescribeInstances",
        lambda w: {"NextToken": "garbage"},
        "InvalidParameterValue",
        "garbage",
    ),
    (
        "garbage-marker",
        "elb",
        "DescribeLoadBalancers",
        lambda w: {"Marker": "garbage"},
        "ValidationError",
        "garbage",
    ),
    (
        "draining-timeout-abc",
        "elb",
        "ModifyLoadBalancerAttributes",
        lambda w: {
            "LoadBalancerName": "a1",
            "LoadBalancerAttributes.ConnectionDraining.Enabled": "true",
            "LoadBalancerAttributes.ConnectionDraining.Timeout": "abc",
        },
        "ValidationError",
        "'loadBalancerAttributes.connectionDraining.timeout'",
    ),
    (
        "boolean-garbage",
        "elb",
        "ModifyLoadBalancerAttributes",
        lambda w: {
            "LoadBalancerName": "a1",
            "LoadBalancerAttributes.CrossZoneLoadBalancing.Enabled": "maybe",
        },
        "ValidationError",
        "Member must be true or false",
    ),
    (
        "elbv2-name-too-long",
        "elbv2",
        "CreateLoadBalancer",
        lambda w: {"Name": "a" * 33, "Subnets.member.1": w.subnet},
        "ValidationError",
        "cannot be longer than '32' characters",
    ),
    (
        "tags-on-an-unknown-instance",
        "ec2",
        "CreateTags",
        lambda w: {
            "ResourceId.1": w.instance,
            "ResourceId.2": "i-0123456789abcdef0",
            "Tag.1.Key": "team",
            "Tag.1.Value": "a",
        },
        "InvalidInstanceID.NotFound",
        "The instance ID 'i-0123456789abcdef0' does not exist",
    ),
    (
        "untag-an-unknown-instance",
        "ec2",
        "DeleteTags",
        lambda w: {"ResourceId.1": "i-0123456789abcdef0", "Tag.1.Key": "team"},
        "InvalidInstanceID.NotFound",
        "The instance ID 'i-0123456789abcdef0' does not exist",
    ),
    (
        "elbv2-enum",
        "elbv2",
        "CreateLoadBalancer",
        lambda w: {"Name": "n1", "Subnets.member.1": w.subnet, "Type": "frob"},
        "ValidationError",
        "Member must satisfy enum value set",
    ),
]


@pytest.mark.parametrize(
    ("service", "action", "params", "code", "fragment"),
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
def test_malformed_call_gets_aws_error_and_changes_nothing(
    aws: AwsServer,
    world: World,
    service: str,
    action: str,
    params: object,
    code: str,
    fragment: str,
) -> None:
    assert callable(params)
    before = snapshot(aws)
    answer = call(aws, service, action, params(world))
    assert (answer.status, answer.code) == (400, code), answer.body
    assert answer.message is not None
    assert fragment in answer.message, answer.message
    if service == "ec2":
        assert answer.body.startswith("<?xml")
        assert "<Response><Errors><Error>" in answer.body
    else:
        assert "<ErrorResponse" in answer.body
        assert "<Type>Sender</Type>" in answer.body
    assert snapshot(aws) == before
    [event] = aws.trail.calls(action, error_code=code)
    assert event.answered_by.startswith("validation:")


def test_revoke_without_source_via_boto3_is_kubernetes_57568(aws: AwsServer, world: World) -> None:
    ec2 = aws.client("ec2")
    before = snapshot(aws)
    with pytest.raises(ClientError) as err:
        ec2.revoke_security_group_ingress(
            GroupId=world.nodes, IpPermissions=[{"IpProtocol": "tcp", "FromPort": 80, "ToPort": 80}]
        )
    assert err.value.response["Error"] == {
        "Code": "InvalidParameterValue",
        "Message": SOURCES_57568,
    }
    assert err.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
    assert snapshot(aws) == before


def test_valid_permission_forms_still_pass(aws: AwsServer, world: World) -> None:
    ec2 = aws.client("ec2")
    ec2.authorize_security_group_ingress(
        GroupId=world.nodes,
        IpPermissions=[
            {
                "IpProtocol": "tcp",
                "FromPort": 30000,
                "ToPort": 32767,
                "IpRanges": [{"CidrIp": "10.0.0.0/8"}],
            },
            {
                "IpProtocol": "icmp",
                "FromPort": 3,
                "ToPort": 4,
                "IpRanges": [{"CidrIp": "0.0.0.0/0"}],
            },
            {"IpProtocol": "-1", "UserIdGroupPairs": [{"GroupId": world.elb_group}]},
            {
                "IpProtocol": "58",
                "FromPort": -1,
                "ToPort": -1,
                "Ipv6Ranges": [{"CidrIpv6": "::/0"}],
            },
            {
                "IpProtocol": "50",
                "FromPort": -1,
                "ToPort": -1,
                "IpRanges": [{"CidrIp": "10.1.0.0/16"}],
            },
        ],
    )
    ec2.authorize_security_group_ingress(
        GroupId=world.nodes, IpProtocol="udp", FromPort=53, ToPort=53, CidrIp="10.2.0.0/16"
    )
    rules = ec2.describe_security_groups(GroupIds=[world.nodes])["SecurityGroups"][0]
    assert len(rules["IpPermissions"]) == 6


def test_portless_protocols_are_all_ports_as_on_aws(aws: AwsServer, world: World) -> None:
    """AWS: ``-1`` or a protocol number other than tcp, udp, icmp and icmpv6 allows every
    port whatever the range, and icmpv6's range is optional. Without ports such a rule was a
    moto TypeError (500); now it is stored, described without ports, and revoked."""
    ec2 = aws.client("ec2")
    esp = {"IpProtocol": "50", "IpRanges": [{"CidrIp": "10.1.0.0/16"}]}
    icmpv6 = {"IpProtocol": "icmpv6", "Ipv6Ranges": [{"CidrIpv6": "::/0"}]}
    ec2.authorize_security_group_ingress(GroupId=world.nodes, IpPermissions=[esp, icmpv6])

    def portless() -> set[tuple[str, object, object]]:
        group = ec2.describe_security_groups(GroupIds=[world.nodes])["SecurityGroups"][0]
        return {
            (p["IpProtocol"], p.get("FromPort"), p.get("ToPort"))
            for p in group["IpPermissions"]
            if p["IpProtocol"] in ("50", "icmpv6")
        }

    assert portless() == {("50", None, None), ("icmpv6", None, None)}
    with pytest.raises(ClientError) as dup:
        ec2.authorize_security_group_ingress(GroupId=world.nodes, IpPermissions=[esp])
    assert dup.value.response["Error"]["Code"] == "InvalidPermission.Duplicate"
    ec2.revoke_security_group_ingress(GroupId=world.nodes, IpPermissions=[esp])
    assert portless() == {("icmpv6", None, None)}
    # ports given to a protocol that has none are ignored, as AWS ignores them: the rule is
    # the same one, so revoking it without ports finds it
    ec2.authorize_security_group_ingress(
        GroupId=world.nodes,
        IpPermissions=[{**esp, "FromPort": 1, "ToPort": 2}],
    )
    assert ("50", None, None) in portless()
    ec2.revoke_security_group_ingress(GroupId=world.nodes, IpPermissions=[esp])
    assert portless() == {("icmpv6", None, None)}
    # 58 is icmpv6 with or without a range; `all` is -1; a half-given range is no crash
    ranged = {"IpProtocol": "58", "FromPort": 2, "ToPort": 0, "Ipv6Ranges": [{"CidrIpv6": "::/0"}]}
    ec2.authorize_security_group_ingress(GroupId=world.nodes, IpPermissions=[ranged])
    ec2.revoke_security_group_ingress(
        GroupId=world.nodes, IpPermissions=[{**ranged, "IpProtocol": "icmpv6"}]
    )
    everything = {"IpProtocol": "all", "IpRanges": [{"CidrIp": "10.9.0.0/16"}]}
    ec2.authorize_security_group_ingress(GroupId=world.nodes, IpPermissions=[everything])
    ec2.revoke_security_group_ingress(
        GroupId=world.nodes, IpPermissions=[{**everything, "IpProtocol": "-1"}]
    )
    half = {"IpProtocol": "50", "FromPort": 5, "IpRanges": [{"CidrIp": "10.8.0.0/16"}]}
    ec2.authorize_security_group_ingress(GroupId=world.nodes, IpPermissions=[half])
    ec2.revoke_security_group_ingress(
        GroupId=world.nodes, IpPermissions=[esp | {"IpRanges": half["IpRanges"]}]
    )
    assert portless() == {("icmpv6", None, None)}
    # tcp still needs its ports (the validation layer's answer, before moto)
    with pytest.raises(ClientError) as tcp:
        ec2.authorize_security_group_ingress(
            GroupId=world.nodes,
            IpPermissions=[{"IpProtocol": "tcp", "IpRanges": [{"CidrIp": "10.0.0.0/8"}]}],
        )
    assert tcp.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400


def test_issued_next_token_is_accepted(aws: AwsServer, world: World) -> None:
    ec2 = aws.client("ec2")
    for _ in range(5):
        instance(ec2, world.nodes)
    pages = list(ec2.get_paginator("describe_instances").paginate(PaginationConfig={"PageSize": 5}))
    ids = [i["InstanceId"] for p in pages for r in p["Reservations"] for i in r["Instances"]]
    assert len(pages) >= 2
    assert len(set(ids)) == 6


def test_malformed_sigv4_header_is_incomplete_signature(aws: AwsServer, world: World) -> None:
    before = snapshot(aws)
    body = "Action=CreateSecurityGroup&Version=2016-11-15&GroupName=x&GroupDescription=x"
    answer = post(aws, body, headers={"Authorization": "AWS4-HMAC-SHA256 garbage"})
    assert (answer.status, answer.code) == (400, "IncompleteSignature")
    assert answer.message is not None
    assert "'Credential'" in answer.message
    scope = "AWS4-HMAC-SHA256 Credential=AK/x, SignedHeaders=host, Signature=0"
    answer = post(aws, body, headers={"Authorization": scope})
    assert (answer.status, answer.code) == (400, "IncompleteSignature")
    assert snapshot(aws) == before


@pytest.mark.parametrize(
    "signing",
    [
        "X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKID%2F20260101%2Fus-east-1%2Fec2%2F"
        "aws4_request&X-Amz-Date=20260101T000000Z&X-Amz-SignedHeaders=host&X-Amz-Signature=ab",
        "AWSAccessKeyId=AKID&SignatureVersion=2&SignatureMethod=HmacSHA256&Signature=ab",
    ],
    ids=["presigned-sigv4", "sigv2"],
)
def test_query_signed_calls_are_routed_by_action(aws: AwsServer, signing: str) -> None:
    answer = post(aws, b"", query=f"Action=DescribeVpcs&Version=2016-11-15&{signing}")
    assert answer.status == 200, answer.body
    assert "<DescribeVpcsResponse" in answer.body
    elb = post(aws, b"", query=f"Action=DescribeLoadBalancers&Version=2012-06-01&{signing}")
    # the presigned scope says ec2; the Version says Classic ELB: AWS would refuse the scope
    # mismatch, the lab at least never answers from S3
    assert "ListAllMyBucketsResult" not in elb.body


def test_validation_is_switchable(aws: AwsServer, world: World) -> None:
    params = {"GroupId": world.nodes} | _perm(
        "IpPermissions.1", IpProtocol="tcp", FromPort="80", ToPort="80"
    )
    aws.control.set_fidelity(validate_ip_permissions=False)
    answer = call(aws, "ec2", "RevokeSecurityGroupIngress", params)
    assert answer.code != "InvalidParameterValue" or SOURCES_57568 not in (answer.message or "")
    aws.control.set_fidelity(validate_ip_permissions=True, validation=False)
    answer = call(aws, "ec2", "CreateSecurityGroup", {"GroupName": "sg-x", "GroupDescription": "d"})
    assert answer.status == 200  # stock moto accepts what AWS refuses
    aws.control.set_fidelity(validation=True)
    answer = call(aws, "ec2", "CreateSecurityGroup", {"GroupName": "sg-y", "GroupDescription": "d"})
    assert answer.code == "InvalidParameterValue"


def test_every_validation_switch_is_listed_in_the_readme() -> None:
    from pathlib import Path

    from lab.aws.fidelity_config import VALIDATION_SWITCHES

    readme = (Path(__file__).parents[2] / "lab" / "aws" / "README.md").read_text()
    missing = [s for s in VALIDATION_SWITCHES if f"| `{s}` |" not in readme]
    assert not missing


def test_calls_without_scope_or_version_are_routed_by_action(aws: AwsServer) -> None:
    sigv2 = "AWSAccessKeyId=AKID&SignatureVersion=2&SignatureMethod=HmacSHA256&Signature=ab"
    answer = post(aws, b"", query=f"Action=DescribeVpcs&{sigv2}")
    assert answer.status == 200, answer.body
    assert "<DescribeVpcsResponse" in answer.body
    both = post(aws, b"", query=f"Action=DescribeLoadBalancers&{sigv2}")  # ELB and ELBv2 have it
    assert (both.status, both.code) == (400, "MissingParameter")
    assert both.message == "The request must contain the parameter Version"
    unknown = post(aws, b"", query=f"Action=Frob&{sigv2}")
    assert (unknown.status, unknown.code) == (400, "InvalidAction")
    assert "ListAllMyBucketsResult" not in both.body + unknown.body


def test_elb_tag_without_value_is_stored_empty(aws: AwsServer, world: World) -> None:
    answer = call(
        aws, "elb", "AddTags", {"LoadBalancerNames.member.1": "a1", "Tags.member.1.Key": "k"}
    )
    assert answer.status == 200, answer.body
    tags = aws.client("elb").describe_tags(LoadBalancerNames=["a1"])["TagDescriptions"][0]
    assert {"Key": "k", "Value": ""} in tags["Tags"]


def test_stock_moto_tags_an_instance_that_does_not_exist(aws: AwsServer, world: World) -> None:
    """What the CreateTags existence check adds (moto already refuses a malformed id)."""
    params = {"ResourceId.1": "i-0123456789abcdef0", "Tag.1.Key": "team", "Tag.1.Value": "a"}
    aws.control.set_fidelity(validate_existence=False)
    assert call(aws, "ec2", "CreateTags", params).status == 200
    aws.control.set_fidelity(validate_existence=True)
    assert call(aws, "ec2", "CreateTags", params).code == "InvalidInstanceID.NotFound"
    malformed = params | {"ResourceId.1": "i-eCHmOTcEW0OZ9KbNe"}  # cloud-provider-aws#1387
    answer = call(aws, "ec2", "CreateTags", malformed)
    assert (answer.code, answer.message) == (
        "InvalidID",
        "The ID 'i-eCHmOTcEW0OZ9KbNe' is not valid",
    )
    ours = params | {"ResourceId.1": world.instance}
    assert call(aws, "ec2", "CreateTags", ours).status == 200

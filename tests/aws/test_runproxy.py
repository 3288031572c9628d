"""The run's guard as the recording proxy asks it (``lab.aws.runproxy``), in process.

Wire bodies are made by botocore's own serializer (what a controller's SDK sends); the guard is
the real :class:`lab.aws.realaccount.RunGuard`, its tag look-ups answered by a stand-in that
knows which ids carry the run's tag. The full path (controller, proxy, account) is
``test_realaccount_lab.py``.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qsl, urlencode

import pytest
from botocore.exceptions import ClientError
from botocore.serialize import create_serializer

from lab.aws.protocol import AwsRequest
from lab.aws.realaccount import RUN_TAG, RunGuard, lb_arn_of
from lab.aws.runproxy import ANSWERED_BY, GuardRefusal, ProxyRunGuard, operation_model, read_params

RUN = "run-1"
VPC = "vpc-0123456789abcdef0"
THEIR_GROUP = "sg-0fedcba9876543210"
LB_ARN = (
    "arn:aws:elasticloadbalancing:eu-west-1:123456789012:loadbalancer/net/ours/50dc6c495c0c9188"
)
THEIR_ARN = (
    "arn:aws:elasticloadbalancing:eu-west-1:123456789012:loadbalancer/net/x/60dc6c495c0c9188"
)


class Tags:
    """``describe_tags`` of EC2, ELB and ELBv2 for a fixed set of ids carrying the run tag."""

    def __init__(self, tagged: set[str]) -> None:
        self.tagged = tagged

    def describe_tags(self, **kwargs: Any) -> dict[str, Any]:
        if "Filters" in kwargs:  # EC2: resource-id and key filters
            ids = kwargs["Filters"][0]["Values"]
            return {
                "Tags": [
                    {"ResourceId": i, "Key": RUN_TAG, "Value": RUN} for i in ids if i in self.tagged
                ]
            }
        ((key, names),) = kwargs.items()
        field = "LoadBalancerName" if key == "LoadBalancerNames" else "ResourceArn"
        return {
            "TagDescriptions": [
                {field: n, "Tags": [{"Key": RUN_TAG, "Value": RUN}] if n in self.tagged else []}
                for n in names
            ]
        }


@pytest.fixture
def guard() -> ProxyRunGuard:
    tags = Tags({VPC, "ours", LB_ARN})
    return ProxyRunGuard(RunGuard(RUN, {"ec2": tags, "elb": tags, "elbv2": tags}, settle_seconds=0))


def _wire(service: str, op: str, params: dict[str, Any]) -> tuple[AwsRequest, bytes]:
    model = operation_model(service, op)
    assert model is not None
    body = create_serializer(model.metadata["protocol"]).serialize_to_request(params, model)["body"]
    request = AwsRequest(service=service, action=op, region="eu-west-1")
    return request, urlencode(body).encode()


CREATES = [
    (
        "ec2",
        "CreateSecurityGroup",
        {
            "GroupName": "k8s-elb-a1",
            "Description": "Security group for Kubernetes ELB a1 (default/web)",
            "VpcId": VPC,
            "TagSpecifications": [
                {
                    "ResourceType": "security-group",
                    "Tags": [{"Key": "kubernetes.io/cluster/c", "Value": "owned"}],
                }
            ],
        },
        "TagSpecification.1.Tag.2",
    ),
    (
        "elb",
        "CreateLoadBalancer",
        {
            "LoadBalancerName": "a1",
            "Listeners": [{"Protocol": "TCP", "LoadBalancerPort": 80, "InstancePort": 30080}],
            "Subnets": ["subnet-0123456789abcdef0"],
            "SecurityGroups": ["sg-0123456789abcdef0"],
            "Tags": [{"Key": "kubernetes.io/service-name", "Value": "default/web"}],
        },
        "Tags.member.2",
    ),
    (
        "elbv2",
        "CreateTargetGroup",
        {
            "Name": "k8s-default-web-0123456789",
            "Protocol": "TCP",
            "Port": 30080,
            "VpcId": VPC,
            "HealthCheckEnabled": False,
            "TargetType": "instance",
        },
        "Tags.member.1",
    ),
]


@pytest.mark.parametrize(
    ("service", "op", "params", "tag_at"), CREATES, ids=[c[1] for c in CREATES]
)
def test_a_create_is_forwarded_with_the_run_tag_and_nothing_else_changed(
    guard: ProxyRunGuard, service: str, op: str, params: dict[str, Any], tag_at: str
) -> None:
    model = operation_model(service, op)
    assert model is not None
    request, body = _wire(service, op, params)
    sent = dict(parse_qsl(body.decode()))
    # the wire form reads back as the parameters the caller's SDK was given
    flat = {k: v for k, v in sent.items() if k not in ("Action", "Version")}
    assert read_params(flat, model.input_shape, model.metadata["protocol"]) == params

    forwarded = dict(parse_qsl(guard(request, "", body).decode()))
    assert forwarded[f"{tag_at}.Key"] == RUN_TAG
    assert forwarded[f"{tag_at}.Value"] == RUN
    added = {k: v for k, v in forwarded.items() if k not in sent}
    assert added == {f"{tag_at}.Key": RUN_TAG, f"{tag_at}.Value": RUN}
    assert {k: v for k, v in forwarded.items() if k in sent} == sent, "the rest as sent"


REFUSED = [
    (
        "ec2",
        "AuthorizeSecurityGroupIngress",
        {"GroupId": THEIR_GROUP, "IpPermissions": [{"IpProtocol": "-1"}]},
        "UnauthorizedOperation",
        f"{THEIR_GROUP}: not tagged {RUN_TAG}={RUN}",
    ),
    (
        "ec2",
        "EnableEbsEncryptionByDefault",
        {},
        "UnauthorizedOperation",
        "account-wide",
    ),
    (
        "elb",
        "ConfigureHealthCheck",
        {
            "LoadBalancerName": "theirs",
            "HealthCheck": {
                "Target": "TCP:80",
                "Interval": 10,
                "Timeout": 5,
                "UnhealthyThreshold": 2,
                "HealthyThreshold": 2,
            },
        },
        "AccessDenied",
        f"theirs: not tagged {RUN_TAG}={RUN}",
    ),
    (
        "elbv2",
        "CreateListener",
        {
            "LoadBalancerArn": THEIR_ARN,
            "Protocol": "TCP",
            "Port": 80,
            "DefaultActions": [{"Type": "forward", "TargetGroupArn": LB_ARN}],
        },
        "AccessDenied",
        f"{THEIR_ARN}: not tagged",
    ),
    (
        "elbv2",
        "CreateTargetGroup",
        {"Name": "tg", "VpcId": "vpc-0aaaaaaaaaaaaaaaa", "TargetType": "instance"},
        "AccessDenied",
        "vpc-0aaaaaaaaaaaaaaaa: not tagged",
    ),
    (
        "elb",
        "CreateLoadBalancer",
        {
            "LoadBalancerName": "a2",
            "Listeners": [{"Protocol": "TCP", "LoadBalancerPort": 80, "InstancePort": 80}],
            "Tags": [{"Key": RUN_TAG, "Value": "another-run"}],
        },
        "AccessDenied",
        f"tags {RUN_TAG}=another-run, this run is {RUN}",
    ),
    (
        "iam",
        "CreateUser",
        {"UserName": "x"},
        "AccessDenied",
        "knows how to tag and check ec2, elb, elbv2 only",
    ),
    # a read of another service can hand out credentials that escape the guard
    ("sts", "GetSessionToken", {}, "AccessDenied", "can hand out credentials"),
    # the run tag is how lab.down finds what the run made: not to be changed or removed
    (
        "ec2",
        "CreateTags",
        {"Resources": [VPC], "Tags": [{"Key": RUN_TAG, "Value": "another-run"}]},
        "UnauthorizedOperation",
        f"the run tag {RUN_TAG} is the lab's to set",
    ),
    (
        "ec2",
        "DeleteTags",
        {"Resources": [VPC], "Tags": [{"Key": RUN_TAG}]},
        "UnauthorizedOperation",
        f"the run tag {RUN_TAG} is the lab's to set",
    ),
]


@pytest.mark.parametrize(
    ("service", "op", "params", "code", "says"), REFUSED, ids=[f"{r[0]}-{r[1]}" for r in REFUSED]
)
def test_a_change_to_what_the_run_did_not_create_is_answered_as_aws_denies_it(
    guard: ProxyRunGuard, service: str, op: str, params: dict[str, Any], code: str, says: str
) -> None:
    request, body = _wire(service, op, params)
    with pytest.raises(GuardRefusal) as caught:
        guard(request, "", body)
    assert (caught.value.code, caught.value.status) == (code, 403)
    assert caught.value.source == ANSWERED_BY
    assert caught.value.message.startswith(f"ccm-lab run guard: {op}")
    assert says in caught.value.message


def test_reads_and_changes_to_the_runs_own_resources_pass_unchanged(guard: ProxyRunGuard) -> None:
    for service, op, params in (
        ("ec2", "DescribeSecurityGroups", {"GroupIds": [THEIR_GROUP]}),
        ("elb", "DescribeLoadBalancers", {"LoadBalancerNames": ["theirs"]}),
        ("elb", "DeleteLoadBalancer", {"LoadBalancerName": "ours"}),
        ("ec2", "ModifyVpcAttribute", {"VpcId": VPC, "EnableDnsSupport": {"Value": True}}),
        # a listener is part of its load balancer: the run's, so it may go
        (
            "elbv2",
            "DeleteListener",
            {"ListenerArn": LB_ARN.replace(":loadbalancer/", ":listener/") + "/f2f7dc8efc522ab2"},
        ),
    ):
        request, body = _wire(service, op, params)
        assert guard(request, "", body) == body, op
    assert guard.guard.allowed[-1][0] == "DeleteListener"


def test_a_listener_or_rule_belongs_to_its_load_balancer() -> None:
    listener = LB_ARN.replace(":loadbalancer/", ":listener/") + "/f2f7dc8efc522ab2"
    rule = (
        LB_ARN.replace(":loadbalancer/", ":listener-rule/") + "/f2f7dc8efc522ab2/9683b2d02a6cabee"
    )
    assert lb_arn_of(listener) == LB_ARN
    assert lb_arn_of(rule) == LB_ARN
    assert lb_arn_of(LB_ARN) == LB_ARN


def test_who_am_i_passes_other_regions_and_repeated_parameters_do_not() -> None:
    """STS ``GetCallerIdentity`` passes; a call for another region than the run's (where
    ``lab.down`` would never look) and one naming a parameter twice (the guard would read one
    value, AWS might act on the other) are refused."""
    tags = Tags({VPC, "ours", LB_ARN})
    guard = ProxyRunGuard(
        RunGuard(RUN, {"ec2": tags, "elb": tags, "elbv2": tags}, settle_seconds=0),
        region="eu-west-1",
    )
    request, body = _wire("sts", "GetCallerIdentity", {})
    assert guard(request, "", body) == body
    request, body = _wire("ec2", "CreateVpc", {"CidrBlock": "10.9.0.0/16"})
    elsewhere = AwsRequest(service="ec2", action="CreateVpc", region="us-east-1")
    with pytest.raises(GuardRefusal, match="in us-east-1: the run lives in eu-west-1"):
        guard(elsewhere, "", body)
    request, body = _wire("ec2", "DeleteSecurityGroup", {"GroupId": VPC})
    with pytest.raises(GuardRefusal, match=r"parameters given twice \(GroupId\)"):
        guard(request, f"GroupId={THEIR_GROUP}", body)


def test_the_proxy_forwards_nothing_the_guard_cannot_read() -> None:
    """Through a proxy with a guard: a REST call (no ``Action``: S3, whose bucket calls the
    guard cannot read) is refused (403) before the guard, never forwarded to the account."""
    from lab.aws import AwsServer
    from lab.aws.clients import make_client
    from lab.aws.proxy import AwsProxyServer

    asked: list[str] = []

    def passes(request: AwsRequest, query: str, body: bytes) -> bytes:
        asked.append(request.action)
        return body

    with (
        AwsServer(region="eu-west-1") as account,
        AwsProxyServer(account.url, region="eu-west-1", guard=passes) as proxy,
    ):
        s3 = make_client("s3", proxy.url, "eu-west-1")
        with pytest.raises(ClientError) as refused:
            s3.create_bucket(
                Bucket="not-through-the-guard",
                CreateBucketConfiguration={"LocationConstraint": "eu-west-1"},
            )
        assert refused.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403
        assert "the guard reads only query API calls" in str(refused.value)
        direct = make_client("s3", account.url, "eu-west-1")
        assert direct.list_buckets()["Buckets"] == []
        assert asked == []  # it reached neither the guard nor the account
        assert proxy.client("ec2").describe_vpcs()["Vpcs"]  # a well-formed call passes
        assert asked == ["DescribeVpcs"]

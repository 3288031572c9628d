"""Hostile and malformed input to the lab's AWS endpoint (issue 27): one bad request never
stalls the lab, a refused call changes nothing, and every answer is the real service's.

Real clients: boto3 against the lab's moto endpoint, raw ``http.client`` for what boto3 never
sends. Bounded: loopback only, at most a 1 MiB value.
"""

from __future__ import annotations

import http.client
from typing import Any
from urllib.parse import urlsplit

import pytest
from botocore.exceptions import ClientError

from lab.aws import AwsServer, wildcard

SCOPE = (
    "AWS4-HMAC-SHA256 Credential=AKID/20260101/{region}/{service}/aws4_request, "
    "SignedHeaders=host, Signature=abc"
)
FORM = "application/x-www-form-urlencoded"

#: a filter value as large as the endpoint's 1 MiB body admits with the rest of the call
BIGGEST_VALUE = (1 << 20) - 4096


def post(
    aws: AwsServer, body: bytes, *, service: str = "ec2", region: str = "us-east-1", **headers: str
) -> tuple[int, bytes]:
    """A raw signed-looking POST to the endpoint: (status, body)."""
    url = urlsplit(aws.url)
    connection = http.client.HTTPConnection(url.hostname or "127.0.0.1", url.port, timeout=30)
    sent = {"Content-Type": FORM, "Authorization": SCOPE.format(region=region, service=service)}
    sent.update({k.replace("_", "-"): v for k, v in headers.items()})
    try:
        connection.request("POST", "/", body=body, headers=sent)
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def code_of(excinfo: Any) -> str:
    return str(excinfo.value.response["Error"]["Code"])


@pytest.fixture
def vpc(aws: AwsServer) -> str:
    return str(aws.client("ec2").create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"])


def group(aws: AwsServer, vpc: str, name: str = "nodes.ccm-lab") -> str:
    ec2 = aws.client("ec2")
    return str(ec2.create_security_group(GroupName=name, Description="d", VpcId=vpc)["GroupId"])


# --- 1. filter values are wildcards, not regular expressions -----------------------------------


def names(aws: AwsServer, value: str, name: str = "group-name") -> list[str]:
    answer = aws.client("ec2").describe_security_groups(Filters=[{"Name": name, "Values": [value]}])
    return sorted({g["GroupName"] for g in answer["SecurityGroups"]} - {"default"})


def test_filter_values_are_literal_but_for_star_and_question_mark(aws: AwsServer, vpc: str) -> None:
    group(aws, vpc)
    assert names(aws, "nodes.ccm-la.") == []
    assert names(aws, "nodes.ccm-la?") == ["nodes.ccm-lab"]
    assert names(aws, "nodes.*") == ["nodes.ccm-lab"]
    assert names(aws, "(unclosed") == []
    assert names(aws, "[n]odes.ccm-lab") == []
    assert names(aws, "nodes.ccm-lab?") == []  # ? is exactly one character
    assert names(aws, "(a+)+b") == []


def test_tag_filters_and_describe_tags_are_wildcards(aws: AwsServer, vpc: str) -> None:
    ec2 = aws.client("ec2")
    group_id = group(aws, vpc)
    ec2.create_tags(Resources=[group_id], Tags=[{"Key": "role", "Value": "[x].node"}])
    assert names(aws, "[x].node", "tag:role") == ["nodes.ccm-lab"]
    assert names(aws, "[x]?node", "tag:role") == ["nodes.ccm-lab"]
    assert names(aws, "x.node", "tag:role") == []
    tags = ec2.describe_tags(Filters=[{"Name": "value", "Values": ["(x"]}])["Tags"]
    assert tags == []
    tags = ec2.describe_tags(Filters=[{"Name": "value", "Values": ["[x]*"]}])["Tags"]
    assert [t["Value"] for t in tags] == ["[x].node"]


def test_a_pathological_filter_is_answered(aws: AwsServer, vpc: str) -> None:
    group(aws, vpc, "a" * 27)
    assert names(aws, "(a+)+b") == []
    assert names(aws, "*a" * 2000 + "b") == []
    assert names(aws, "a" * BIGGEST_VALUE) == []


def test_wildcard_matcher_is_linear_by_construction() -> None:
    # backtracking matchers take exponential (regex) or quadratic-in-pattern time on these;
    # the matcher refuses a pattern with more fixed characters than the text at once and
    # otherwise works on at most twice the text's length (pytest-timeout bounds the test)
    text = "a" * 200
    assert not wildcard.matches("*a" * (1 << 19) + "b", text)
    assert wildcard.matches("*" * (1 << 20), text)
    assert not wildcard.matches("*a" * 150 + "*b", text)
    assert wildcard.matches("*a" * 150 + "*", text)
    assert not wildcard.matches("(a+)+b", "a" * 27)
    assert wildcard.matches(r"\*a\?", "*a?")
    assert not wildcard.matches(r"\*a\?", "xab")
    # AWS documents three escapes; any other backslash is itself (a Windows path, a domain user)
    assert wildcard.matches(r"C:\Users", "C:\\Users")
    assert wildcard.matches(r"CORP\alice", "CORP\\alice")
    assert wildcard.matches("\\\\*", "\\abc")
    assert not wildcard.matches("\\\\*", "abc")


# --- 2. a refused Authorize/Revoke changes nothing ---------------------------------------------


def rules(aws: AwsServer, group_id: str, direction: str = "IpPermissions") -> list[str]:
    found = aws.client("ec2").describe_security_groups(GroupIds=[group_id])["SecurityGroups"][0]
    return sorted(
        f"{p['IpProtocol']} {p.get('FromPort')} {r['CidrIp']}"
        for p in found[direction]
        for r in p.get("IpRanges", [])
    )


def tcp(port: int, cidr: str = "10.0.0.0/16") -> dict[str, Any]:
    return {"IpProtocol": "tcp", "FromPort": port, "ToPort": port, "IpRanges": [{"CidrIp": cidr}]}


def test_authorize_over_the_rule_limit_stores_nothing(aws: AwsServer, vpc: str) -> None:
    ec2 = aws.client("ec2")
    group_id = group(aws, vpc)
    with pytest.raises(ClientError) as excinfo:
        ec2.authorize_security_group_ingress(
            GroupId=group_id, IpPermissions=[tcp(1000 + n) for n in range(70)]
        )
    assert code_of(excinfo) == "RulesPerSecurityGroupLimitExceeded"
    assert rules(aws, group_id) == []


def test_authorize_with_a_duplicate_adds_nothing(aws: AwsServer, vpc: str) -> None:
    ec2 = aws.client("ec2")
    group_id = group(aws, vpc)
    ec2.authorize_security_group_ingress(GroupId=group_id, IpPermissions=[tcp(80)])
    with pytest.raises(ClientError) as excinfo:
        ec2.authorize_security_group_ingress(GroupId=group_id, IpPermissions=[tcp(443), tcp(80)])
    assert code_of(excinfo) == "InvalidPermission.Duplicate"
    assert rules(aws, group_id) == ["tcp 80 10.0.0.0/16"]
    egress = rules(aws, group_id, "IpPermissionsEgress")
    ec2.authorize_security_group_egress(GroupId=group_id, IpPermissions=[tcp(53)])
    with pytest.raises(ClientError) as excinfo:
        ec2.authorize_security_group_egress(GroupId=group_id, IpPermissions=[tcp(54), tcp(53)])
    assert code_of(excinfo) == "InvalidPermission.Duplicate"
    assert rules(aws, group_id, "IpPermissionsEgress") == sorted([*egress, "tcp 53 10.0.0.0/16"])


def test_revoke_with_a_missing_rule_removes_nothing(aws: AwsServer, vpc: str) -> None:
    ec2 = aws.client("ec2")
    group_id = group(aws, vpc)
    ec2.authorize_security_group_ingress(GroupId=group_id, IpPermissions=[tcp(80)])
    ec2.authorize_security_group_egress(GroupId=group_id, IpPermissions=[tcp(53)])
    egress = rules(aws, group_id, "IpPermissionsEgress")
    with pytest.raises(ClientError) as excinfo:
        ec2.revoke_security_group_ingress(GroupId=group_id, IpPermissions=[tcp(80), tcp(81)])
    assert code_of(excinfo) == "InvalidPermission.NotFound"
    assert rules(aws, group_id) == ["tcp 80 10.0.0.0/16"]
    with pytest.raises(ClientError) as excinfo:
        ec2.revoke_security_group_egress(GroupId=group_id, IpPermissions=[tcp(53), tcp(54)])
    assert code_of(excinfo) == "InvalidPermission.NotFound"
    assert rules(aws, group_id, "IpPermissionsEgress") == egress


# --- 3. a call the endpoint cannot take as sent: AWS's answer, and in the trail ----------------

DESCRIBE_VPCS = b"Action=DescribeVpcs&Version=2016-11-15"


@pytest.mark.parametrize(
    ("service", "region", "status", "code", "message"),
    [
        ("iam", "us-east-1", 401, "AuthFailure", "scoped to correct service: 'ec2'"),
        ("frob", "us-east-1", 401, "AuthFailure", "scoped to correct service: 'ec2'"),
        ("ec2", "eu-west-9", 401, "AuthFailure", "not able to validate the provided access"),
    ],
)
def test_a_foreign_scope_or_unknown_region_is_refused_as_aws_does(
    aws: AwsServer, service: str, region: str, status: int, code: str, message: str
) -> None:
    answer = post(aws, DESCRIBE_VPCS, service=service, region=region)
    assert answer[0] == status
    assert f"<Code>{code}</Code>".encode() in answer[1]
    assert message.encode() in answer[1]
    (event,) = aws.trail.calls("DescribeVpcs")
    assert (event.status, event.error_code) == (status, code)


def test_query_services_refuse_a_foreign_scope_with_signature_does_not_match(
    aws: AwsServer,
) -> None:
    body = b"Action=DescribeLoadBalancers&Version=2012-06-01"
    status, text = post(aws, body, service="iam")
    assert status == 403
    assert b"<Code>SignatureDoesNotMatch</Code>" in text
    assert b"scoped to correct service: 'elasticloadbalancing'" in text
    status, text = post(aws, body, service="elasticloadbalancing", region="eu-west-9")
    assert status == 403
    assert b"scoped to a valid region, not 'eu-west-9'" in text
    status, text = post(aws, DESCRIBE_VPCS, service="sts")
    assert (status, b"<Code>InvalidAction</Code>" in text) == (400, True)
    assert [e.error_code for e in aws.trail.calls()] == [
        "SignatureDoesNotMatch",
        "SignatureDoesNotMatch",
        "InvalidAction",
    ]


def test_the_json_protocol_is_missing_action_for_ec2(aws: AwsServer) -> None:
    status, text = post(
        aws,
        b"{}",
        Content_Type="application/x-amz-json-1.1",
        X_Amz_Target="AmazonEC2.DescribeVpcs",
    )
    assert status == 400
    assert b"<Code>MissingAction</Code>" in text
    assert [e.error_code for e in aws.trail.calls()] == ["MissingAction"]


def test_a_lab_bug_is_in_the_trail(aws: AwsServer, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(request: object) -> object:
        raise RuntimeError("boom")

    monkeypatch.setattr(aws.lab.fidelity, "before", broken)
    assert post(aws, DESCRIBE_VPCS)[0] == 500
    (event,) = aws.trail.calls("DescribeVpcs")
    assert (event.error_code, event.answered_by) == ("InternalError", "internal-error")
    assert aws.take_internal_errors() == ["RuntimeError: boom"]


# --- 4. error answers are well-formed XML, whatever the request carried ------------------------


@pytest.mark.parametrize("name", ["bad\x01name", "bad\x1bname\x7f", "bad\ufffename"])
def test_an_error_message_never_carries_what_xml_forbids(
    aws: AwsServer, vpc: str, name: str
) -> None:
    ec2 = aws.client("ec2")
    with pytest.raises(ClientError) as excinfo:
        ec2.create_security_group(GroupName=name, Description="d", VpcId=vpc)
    assert code_of(excinfo) == "InvalidParameterValue"
    assert "bad" in excinfo.value.response["Error"]["Message"]
    with pytest.raises(ClientError) as excinfo:
        ec2.delete_security_group(GroupId=f"sg-{name}")
    assert code_of(excinfo) in ("InvalidGroupId.Malformed", "InvalidGroup.NotFound")
    with pytest.raises(ClientError) as excinfo:
        ec2.describe_vpcs(VpcIds=[f"vpc-{name}"])
    assert code_of(excinfo) in ("InvalidVpcID.Malformed", "InvalidVpcID.NotFound")


# --- 5. what AWS refuses is refused, and nothing is stored ---------------------------------------


def refused(call: Any, **kwargs: Any) -> str:
    with pytest.raises(ClientError) as excinfo:
        call(**kwargs)
    return code_of(excinfo)


def test_an_empty_group_name_is_refused(aws: AwsServer, vpc: str) -> None:
    ec2 = aws.client("ec2")
    code = refused(ec2.create_security_group, GroupName="", Description="d", VpcId=vpc)
    assert code == "MissingParameter"
    assert names(aws, "*") == []


@pytest.mark.parametrize(
    "tag",
    [
        {"Key": "k" * 129, "Value": "v"},
        {"Key": "k", "Value": "v" * 257},
        {"Key": "aws:cloudformation:stack", "Value": "v"},
        {"Key": "", "Value": "v"},
    ],
)
def test_tags_ec2_refuses_are_refused_and_not_stored(
    aws: AwsServer, vpc: str, tag: dict[str, str]
) -> None:
    ec2 = aws.client("ec2")
    group_id = group(aws, vpc)
    assert refused(ec2.create_tags, Resources=[group_id], Tags=[tag]) == "InvalidParameterValue"
    spec = [{"ResourceType": "security-group", "Tags": [tag]}]
    code = refused(
        ec2.create_security_group,
        GroupName="other",
        Description="d",
        VpcId=vpc,
        TagSpecifications=spec,
    )
    assert code == "InvalidParameterValue"
    assert ec2.describe_tags()["Tags"] == []
    assert names(aws, "other") == []
    ok = {"Key": "k" * 128, "Value": "v" * 256}
    ec2.create_tags(Resources=[group_id], Tags=[ok])
    assert [t["Key"] for t in ec2.describe_tags()["Tags"]] == ["k" * 128]


@pytest.mark.parametrize("description", ["d" * 256, "naïve", "tab\there", "percent%"])
def test_rule_descriptions_ec2_refuses_are_refused(
    aws: AwsServer, vpc: str, description: str
) -> None:
    ec2 = aws.client("ec2")
    group_id = group(aws, vpc)
    permission = tcp(80)
    permission["IpRanges"][0]["Description"] = description
    code = refused(
        ec2.authorize_security_group_ingress, GroupId=group_id, IpPermissions=[permission]
    )
    assert code == "InvalidParameterValue"
    assert rules(aws, group_id) == []
    permission["IpRanges"][0]["Description"] = "d" * 255 + ""
    ec2.authorize_security_group_ingress(GroupId=group_id, IpPermissions=[permission])


def test_a_missing_prefix_list_is_refused(aws: AwsServer, vpc: str) -> None:
    ec2 = aws.client("ec2")
    group_id = group(aws, vpc)
    permission = {
        "IpProtocol": "tcp",
        "FromPort": 80,
        "ToPort": 80,
        "PrefixListIds": [{"PrefixListId": "pl-00000000000000000"}],
    }
    code = refused(
        ec2.authorize_security_group_ingress, GroupId=group_id, IpPermissions=[permission]
    )
    assert code == "InvalidPrefixListID.NotFound"
    found = ec2.describe_security_groups(GroupIds=[group_id])["SecurityGroups"][0]
    assert found["IpPermissions"] == []


def test_an_unknown_api_version_is_refused(aws: AwsServer) -> None:
    status, text = post(aws, b"Action=DescribeVpcs&Version=2099-01-01")
    assert status == 400
    assert b"<Code>NoSuchVersion</Code>" in text
    assert post(aws, b"Action=DescribeVpcs&Version=2016-11-15")[0] == 200


# --- 6. a request that is not UTF-8 gets the service's error -----------------------------------


@pytest.mark.parametrize(
    "body",
    [
        b"Action=DescribeVpcs&Version=2016-11-15&Filter.1.Name=vpc-id&Filter.1.Value.1=\xff\xfe",
        b"Action=DescribeVpcs&Version=2016-11-15&Filter.1.Name=vpc-id&Filter.1.Value.1=%ff%fe",
    ],
)
def test_invalid_utf8_is_a_400_in_the_services_shape(aws: AwsServer, body: bytes) -> None:
    status, text = post(aws, body)
    assert status == 400
    assert b"<Response><Errors><Error><Code>MalformedQueryString</Code>" in text
    (event,) = aws.trail.calls("DescribeVpcs")
    assert event.error_code == "MalformedQueryString"
    status, text = post(
        aws,
        b"Action=DescribeLoadBalancers&Version=2012-06-01&x=%C3",
        service="elasticloadbalancing",
    )
    assert status == 400
    assert b"<ErrorResponse" in text


# --- 7. the trail keeps a bounded amount of any call --------------------------------------------


def test_the_trail_caps_what_it_keeps_of_a_value(aws: AwsServer, vpc: str) -> None:
    value = "x" * BIGGEST_VALUE
    assert names(aws, value) == []
    (event,) = aws.trail.calls("DescribeSecurityGroups")
    assert len(event.to_json()) < 8 * 1024
    (summary,) = event.params["Filters"]
    assert summary.startswith("group-name=xxx")
    assert summary.endswith(f"({len('group-name=') + len(value)} characters, 1024 kept)")
    assert event.raw_params["Filter.1.Value.1"].endswith("…")
    ids = [f"sg-{n:017x}" for n in range(1500)]
    status, _ = post(
        aws,
        b"Action=DescribeSecurityGroups&Version=2016-11-15&"
        + "&".join(f"GroupId.{n + 1}={gid}" for n, gid in enumerate(ids)).encode(),
    )
    assert status == 400
    event = aws.trail.calls("DescribeSecurityGroups")[-1]
    assert event.params["GroupIds"][-1] == "… (500 more not kept)"
    assert len(event.params["GroupIds"]) == 1001
    assert len(event.raw_params) == 1001


# --- 8. the control plane refuses nonsense, naming the field and value, and changes nothing ----


def control(aws: AwsServer, method: str, path: str, body: bytes) -> tuple[int, bytes]:
    url = urlsplit(aws.url)
    connection = http.client.HTTPConnection(url.hostname or "127.0.0.1", url.port, timeout=30)
    try:
        connection.request(method, path, body=body, headers={"Content-Type": "application/json"})
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


@pytest.mark.parametrize(
    ("body", "named"),
    [
        (b'{"action": "*", "code": "Throttling", "service": "s3"}', b"service"),
        (b'{"action": "*", "code": "Throttling", "count": 1e30}', b"count"),
        (b'{"action": "*", "code": "Throttling", "count": 1000000000000000000000}', b"count"),
        (b'{"action": "*", "code": "Throttling", "count": 2.5}', b"count"),
    ],
)
def test_fault_rules_refuse_nonsense(aws: AwsServer, body: bytes, named: bytes) -> None:
    status, text = control(aws, "POST", "/_lab/faults", body)
    assert status == 400
    assert named in text
    assert aws.control.faults() == []
    status, _ = control(
        aws, "POST", "/_lab/faults", b'{"action": "*", "code": "X", "service": "elbv2"}'
    )
    assert status == 201


@pytest.mark.parametrize(
    "body",
    [
        b'{"instance_pending_s": 1e308}',
        b'{"instance_pending_s": NaN}',
        b'{"terminated_visible_s": Infinity}',
        b'{"elb_sg_release_s": 1e300, "instance_stopping_s": 1}',
    ],
)
def test_fidelity_switches_are_bounded(aws: AwsServer, body: bytes) -> None:
    before = aws.control.fidelity()
    status, text = control(aws, "POST", "/_lab/fidelity", body)
    assert status == 400
    assert b"_s'" in text
    assert aws.control.fidelity() == before
    assert control(aws, "POST", "/_lab/fidelity", b'{"instance_pending_s": 86400}')[0] == 200


def test_a_scope_signing_as_another_services_model_is_that_service() -> None:
    """SigV4 scopes carry signing names (``monitoring`` is CloudWatch's): the table the endpoint
    reads them through is botocore's, regenerated here (on a difference, regenerate
    ``lab/aws/signing_names.py`` from the installed botocore's ``metadata.signingName``)."""
    import botocore.session

    from lab.aws.signing_names import SIGNING_NAMES

    session = botocore.session.get_session()
    loader = session.get_component("data_loader")
    derived: dict[str, list[str]] = {}
    for name in session.get_available_services():
        meta = loader.load_service_model(name, "service-2")["metadata"]
        signing = meta.get("signingName", meta.get("endpointPrefix", name))
        if signing != name:
            derived.setdefault(signing, []).append(name)
    assert {k: tuple(sorted(v)) for k, v in derived.items()} == SIGNING_NAMES


def test_a_cloudwatch_call_is_not_refused_for_its_scope(aws: AwsServer) -> None:
    """CloudWatch signs as ``monitoring``: its call reaches moto, not a scope refusal."""
    from lab.aws.clients import make_client

    cloudwatch = make_client("cloudwatch", aws.url, "us-east-1")
    assert cloudwatch.list_metrics()["Metrics"] == []

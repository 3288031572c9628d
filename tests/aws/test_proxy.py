"""The recording proxy in front of an upstream that is not the lab's endpoint.

boto3 calls go through :class:`lab.aws.proxy.AwsProxyServer` to a stock moto server (standing in
for LocalStack or real AWS): the trail records them with their actions, upstream statuses and
error codes; fault rules answer without forwarding; nothing secret is recorded; calls are signed
again for the upstream's host (proven against an upstream that checks SigV4 with botocore's
signer); an upstream that cannot be reached is a clear AWS error, recorded.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import logging
import random
import socket
import urllib.parse
import urllib.request
import uuid
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.credentials import Credentials
from botocore.exceptions import ClientError

from lab.aws import AwsControlClient, AwsControlError
from lab.aws.clients import make_client
from lab.aws.proxy import AwsProxyProcess, AwsProxyServer, Upstream, UpstreamUnavailable
from lab.aws.proxy.upstream import Scope, caller_scope
from tests.aws.upstreams import HangUpServer, SigV4Upstream, closed_port

PROXY_KEY = Credentials("AKIDPROXYEXAMPLE", "proxy-secret", "PROXY-SESSION-TOKEN")
CALLER_TOKEN = "CALLER-SESSION-TOKEN-canary"
CALLER_KEY = "AKIDCALLERCANARY"
CALLER_SECRET = "caller/secret+canary=="


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def _error(call: Any, *args: Any, **kwargs: Any) -> tuple[int, dict[str, str]]:
    with pytest.raises(ClientError) as caught:
        call(*args, **kwargs)
    response = caught.value.response
    error = {str(k): str(v) for k, v in response["Error"].items()}
    return response["ResponseMetadata"]["HTTPStatusCode"], error


def test_calls_are_forwarded_and_recorded_with_actions_and_errors(
    proxy: AwsProxyServer, moto_url: str
) -> None:
    ec2 = proxy.client("ec2")
    name = _name("proxied")
    group = ec2.create_security_group(GroupName=name, Description="through the proxy")["GroupId"]
    direct = make_client("ec2", moto_url, "us-east-1")
    seen = direct.describe_security_groups(GroupIds=[group])["SecurityGroups"]
    assert [g["GroupName"] for g in seen] == [name]  # it reached the upstream
    status, error = _error(ec2.delete_security_group, GroupId="sg-0123456789abcdef0")
    assert (status, error["Code"]) == (400, "InvalidGroup.NotFound")
    proxy.client("elb").describe_load_balancers()

    events = proxy.control.trail()  # the same client lab.trail uses
    assert [(e.service, e.action, e.status, e.error_code) for e in events] == [
        ("ec2", "CreateSecurityGroup", 200, None),
        ("ec2", "DeleteSecurityGroup", 400, "InvalidGroup.NotFound"),
        ("elb", "DescribeLoadBalancers", 200, None),
    ]
    upstream = urllib.parse.urlsplit(moto_url).netloc
    assert {e.answered_by for e in events} == {f"upstream:{upstream}"}
    assert not any(e.injected for e in events)
    assert events[0].response == {"GroupId": group}
    assert events[0].params["GroupName"] == name
    assert events[1].params == {"GroupId": "sg-0123456789abcdef0"}
    assert events[1].error_message == error["Message"]
    health = proxy.control.health()
    assert (health.upstream, health.resigning, health.trail_events) == (moto_url, True, 3)


def test_upstream_error_codes_pass_through_unchanged(proxy: AwsProxyServer, moto_url: str) -> None:
    cases: list[tuple[str, str, dict[str, Any]]] = [
        ("ec2", "delete_security_group", {"GroupId": "sg-0123456789abcdef0"}),
        ("ec2", "describe_instances", {"InstanceIds": ["i-0123456789abcdef0"]}),
        ("elb", "describe_load_balancers", {"LoadBalancerNames": [_name("nolb")]}),
        ("elbv2", "describe_target_groups", {"Names": [_name("notg")]}),
    ]
    for service, operation, params in cases:
        direct = make_client(service, moto_url, "us-east-1")
        proxied = proxy.client(service)
        want = _error(getattr(direct, operation), **params)
        got = _error(getattr(proxied, operation), **params)
        assert got == want, operation
        assert want[0] >= 400
        assert want[1]["Code"]
    codes = [e.error_code for e in proxy.trail.calls(ok=False)]
    assert len(codes) == len(cases)
    assert all(codes)


def test_a_fault_answers_without_forwarding(proxy: AwsProxyServer, moto_url: str) -> None:
    ec2 = proxy.client("ec2")
    name = _name("faulted")
    rule = proxy.control.add_fault(
        action="CreateSecurityGroup", code="Throttling", count=2, match={"GroupName": name}
    )
    for _ in range(2):
        assert _error(ec2.create_security_group, GroupName=name, Description="d") == (
            400,
            {"Code": "Throttling", "Message": "Injected by ccm-lab"},
        )
    # had a faulted call been forwarded, this one would be a duplicate
    group = ec2.create_security_group(GroupName=name, Description="d")["GroupId"]
    other = ec2.create_security_group(GroupName=_name("unmatched"), Description="d")
    direct = make_client("ec2", moto_url, "us-east-1")
    found = direct.describe_security_groups(Filters=[{"Name": "group-name", "Values": [name]}])
    assert [g["GroupId"] for g in found["SecurityGroups"]] == [group]
    assert other["GroupId"] != group
    events = proxy.trail.calls("CreateSecurityGroup")
    assert [(e.injected, e.answered_by, e.error_code) for e in events[:3]] == [
        (True, f"fault:{rule.id}", "Throttling"),
        (True, f"fault:{rule.id}", "Throttling"),
        (False, f"upstream:{urllib.parse.urlsplit(moto_url).netloc}", None),
    ]
    assert [r.fired for r in proxy.control.faults()] == [2]


def test_fault_probability_is_seeded_and_bounded_by_count(proxy: AwsProxyServer) -> None:
    ec2 = proxy.client("ec2")
    proxy.control.add_fault(
        action="DescribeVpcs", code="RequestLimitExceeded", probability=0.5, seed=7, count=3
    )
    codes: list[str | None] = []
    for _ in range(16):
        try:
            ec2.describe_vpcs()
            codes.append(None)
        except ClientError as exc:
            codes.append(exc.response["Error"]["Code"])
    assert set(codes) == {None, "RequestLimitExceeded"}
    outcomes = [code is not None for code in codes]
    draws, expected = random.Random(7), list[bool]()
    for _ in range(16):
        fire = sum(expected) < 3 and draws.random() < 0.5
        expected.append(fire)
    assert outcomes == expected
    assert sum(outcomes) == 3
    assert [e.injected for e in proxy.trail.calls("DescribeVpcs")] == expected


def test_a_latency_fault_delays_and_then_forwards(proxy: AwsProxyServer, moto_url: str) -> None:
    rule = proxy.control.add_latency(action="DescribeVpcs", latency_ms=5, count=1)
    assert proxy.client("ec2").describe_vpcs()["Vpcs"]
    (event,) = proxy.trail.calls("DescribeVpcs")
    upstream = urllib.parse.urlsplit(moto_url).netloc
    assert (event.injected, event.status) == (True, 200)
    assert event.answered_by == f"fault:{rule.id} upstream:{upstream}"


def test_nothing_secret_reaches_the_trail_or_the_log(
    proxy: AwsProxyServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    session = boto3.session.Session(
        aws_access_key_id=CALLER_KEY,
        aws_secret_access_key=CALLER_SECRET,
        aws_session_token=CALLER_TOKEN,
        region_name="us-east-1",
    )
    ec2 = session.client("ec2", endpoint_url=proxy.url, config=Config(retries={"max_attempts": 0}))
    ec2.describe_vpcs()
    presigned = urllib.parse.urlencode(
        {
            "Action": "DescribeSubnets",
            "Version": "2016-11-15",
            "X-Amz-Algorithm": "AWS4-HMAC-SHA256",
            "X-Amz-Credential": f"{CALLER_KEY}/20260101/us-east-1/ec2/aws4_request",
            "X-Amz-Security-Token": CALLER_TOKEN,
            "X-Amz-Signature": "canarysignature0123",
        }
    )
    with urllib.request.urlopen(f"{proxy.url}/?{presigned}", timeout=30) as reply:
        assert reply.status == 200
    trail = proxy.control.trail_jsonl()
    assert [e.action for e in proxy.control.trail_events()] == ["DescribeVpcs", "DescribeSubnets"]
    ours = [r for r in caplog.records if r.name.startswith(("lab.", "werkzeug"))]
    assert any("X-Amz-Credential" in r.getMessage() for r in ours)  # the request line is logged
    logged = "\n".join(r.getMessage() for r in ours)
    for canary in (CALLER_KEY, CALLER_SECRET, CALLER_TOKEN, "canarysignature0123"):
        assert canary not in trail
        assert canary not in logged
    assert "<redacted>/20260101/us-east-1/ec2/aws4_request" in trail


@pytest.fixture
def sigv4_upstream() -> Iterator[SigV4Upstream]:
    upstream = SigV4Upstream(PROXY_KEY).start()
    yield upstream
    upstream.stop()


def test_calls_are_resigned_for_the_upstream_host(sigv4_upstream: SigV4Upstream) -> None:
    session = boto3.session.Session(
        aws_access_key_id=CALLER_KEY,
        aws_secret_access_key=CALLER_SECRET,
        aws_session_token=CALLER_TOKEN,
        region_name="eu-west-1",
    )
    config = Config(retries={"max_attempts": 0})
    with AwsProxyServer(sigv4_upstream.url, credentials=PROXY_KEY) as proxy:
        assert session.client("ec2", endpoint_url=proxy.url, config=config).describe_vpcs()
        kms = session.client("kms", endpoint_url=proxy.url, config=config)
        assert kms.list_keys(Limit=5)["Keys"] == []
        presigned = urllib.parse.urlencode(
            {
                "Action": "DescribeVpcs",
                "Version": "2016-11-15",
                "X-Amz-Algorithm": "AWS4-HMAC-SHA256",
                "X-Amz-Credential": f"{CALLER_KEY}/20260101/eu-west-1/ec2/aws4_request",
                "X-Amz-Date": "20260101T000000Z",
                "X-Amz-SignedHeaders": "host",
                "X-Amz-Security-Token": CALLER_TOKEN,
                "X-Amz-Signature": "0" * 64,
            }
        )
        with urllib.request.urlopen(f"{proxy.url}/?{presigned}", timeout=30) as reply:
            assert reply.status == 200
        events = proxy.trail.events()
    assert [(e.service, e.action, e.status) for e in events] == [
        ("ec2", "DescribeVpcs", 200),
        ("kms", "ListKeys", 200),
        ("ec2", "DescribeVpcs", 200),
    ]
    assert events[1].raw_params == {"Limit": "5"}  # a JSON-protocol call, flattened
    received = sigv4_upstream.received
    assert [r.verdict for r in received] == ["ok"] * 3
    for request in received:
        assert request.headers["host"] == sigv4_upstream.host  # not the proxy's
        assert request.headers["x-amz-security-token"] == PROXY_KEY.token  # not the caller's
        assert CALLER_KEY not in request.path
        assert CALLER_TOKEN not in request.path
        assert "X-Amz-Signature" not in request.path
        scope = request.headers["authorization"].split("Credential=")[1].split(",")[0]
        assert scope.startswith(PROXY_KEY.access_key + "/")
    assert [r.headers["authorization"].split("/")[2:4] for r in received] == [
        ["eu-west-1", "ec2"],
        ["eu-west-1", "kms"],
        ["eu-west-1", "ec2"],
    ]


def test_a_repeated_header_is_forwarded_and_signed_with_every_value(
    sigv4_upstream: SigV4Upstream,
) -> None:
    # each line goes on as sent (names as spelled); the signature covers the values in order
    body = b"Action=DescribeVpcs&Version=2016-11-15"
    with AwsProxyServer(sigv4_upstream.url, credentials=PROXY_KEY) as proxy:
        connection = http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=30)
        connection.putrequest("POST", "/", skip_accept_encoding=True)
        for name, value in (
            ("Content-Type", "application/x-www-form-urlencoded; charset=utf-8"),
            ("x-lab-repeat", "  one   two "),
            ("X-Lab-Repeat", "three"),
            (
                "Authorization",
                f"AWS4-HMAC-SHA256 Credential={CALLER_KEY}/20261129/"
                "us-east-1/ec2/aws4_request, SignedHeaders=host, Signature=00",
            ),
            ("Content-Length", str(len(body))),
        ):
            connection.putheader(name, value)
        connection.endheaders(body)
        reply = connection.getresponse()
        reply.read()
        connection.close()
    assert reply.status == 200
    (received,) = sigv4_upstream.received
    assert received.verdict == "ok"
    assert [(k, v) for k, v in received.lines if k.lower() == "x-lab-repeat"] == [
        ("x-lab-repeat", "one   two "),  # leading whitespace is not the value's (RFC 9110)
        ("X-Lab-Repeat", "three"),
    ]
    assert "x-lab-repeat" in received.headers["authorization"].split("SignedHeaders=")[1]


def test_without_resigning_a_checking_upstream_refuses_and_its_code_passes_through(
    sigv4_upstream: SigV4Upstream,
) -> None:
    with AwsProxyServer(sigv4_upstream.url) as proxy:  # forwards the caller's own signature
        ec2 = proxy.client("ec2")
        status, error = _error(ec2.describe_vpcs)
        kms_status, kms_error = _error(proxy.client("kms").list_keys)
        events = proxy.trail.events()
    assert (status, error["Code"]) == (403, "SignatureDoesNotMatch")
    assert (kms_status, kms_error["Code"]) == (403, "InvalidSignatureException")
    assert [r.verdict for r in sigv4_upstream.received] == [
        "signed with access key 'testing', not the upstream's"
    ] * 2
    assert [(e.status, e.error_code) for e in events] == [
        (403, "SignatureDoesNotMatch"),
        (403, "InvalidSignatureException"),
    ]


def test_an_unreachable_upstream_is_a_clear_aws_error_and_recorded() -> None:
    upstream = f"http://127.0.0.1:{closed_port()}"
    with AwsProxyServer(upstream, credentials=("testing", "testing"), timeout=10) as proxy:
        status, error = _error(proxy.client("ec2").describe_vpcs)
        elb_status, elb_error = _error(proxy.client("elb").describe_load_balancers)
        events = proxy.trail.events()
    assert (status, error["Code"]) == (503, "ServiceUnavailable")
    assert (elb_status, elb_error["Code"]) == (503, "ServiceUnavailable")
    assert upstream in error["Message"]
    assert "unreachable" in error["Message"]
    assert [(e.action, e.status, e.error_code, e.answered_by) for e in events] == [
        ("DescribeVpcs", 503, "ServiceUnavailable", "proxy:upstream-unreachable"),
        ("DescribeLoadBalancers", 503, "ServiceUnavailable", "proxy:upstream-unreachable"),
    ]


def test_an_upstream_that_hangs_up_is_a_502_and_recorded() -> None:
    upstream = HangUpServer()
    try:
        with AwsProxyServer(upstream.url, timeout=10) as proxy:
            status, error = _error(proxy.client("ec2").describe_vpcs)
            (event,) = proxy.trail.events()
    finally:
        upstream.stop()
    assert (status, error["Code"]) == (502, "InternalFailure")
    assert "closed the connection without answering" in error["Message"]
    assert (event.status, event.answered_by) == (502, "proxy:upstream-broken")
    assert upstream.accepted == 1


def test_control_plane_is_the_endpoints_with_the_lab_token(proxy: AwsProxyServer) -> None:
    with pytest.raises(AwsControlError) as refused:
        AwsControlClient(proxy.url).faults()
    assert refused.value.status == 401
    assert "lab's token" in refused.value.message
    with pytest.raises(AwsControlError) as unknown:
        proxy.control.set_fidelity(elb_sg_order="reversed")
    assert unknown.value.status == 404
    assert proxy.proxy.upstream.url in unknown.value.message
    with pytest.raises(AwsControlError) as seed:
        proxy.control.seed(7)
    assert seed.value.status == 404
    assert "no seed" in seed.value.message
    with pytest.raises(AwsControlError) as bad:
        proxy.control.add_fault(action="DescribeVpcs", code="Throttling", count=0)
    assert bad.value.status == 400
    assert "count=0" in bad.value.message
    assert proxy.control.faults() == []  # the bad rule changed nothing
    proxy.control.add_fault(action="*", code="InternalError")
    with pytest.raises(ClientError):
        proxy.client("ec2").describe_vpcs()
    proxy.control.reset()
    assert proxy.control.faults() == []
    assert proxy.control.trail() == []
    assert proxy.client("ec2").describe_vpcs()["Vpcs"]


def test_bad_settings_are_refused_naming_the_value() -> None:
    with pytest.raises(ValueError, match="upstream 'ftp://x'"):
        AwsProxyServer("ftp://x")
    with pytest.raises(ValueError, match="timeout=0"):
        AwsProxyServer("http://127.0.0.1:1", timeout=0)
    with pytest.raises(ValueError, match="credentials"):
        AwsProxyServer("http://127.0.0.1:1", credentials=("only-key", ""))


def test_cli_serves_with_the_token_from_the_environment(moto_url: str, tmp_path: Any) -> None:
    trail = tmp_path / "trail.jsonl"
    child = AwsProxyProcess(
        moto_url, credentials=("testing", "testing"), trail_path=trail, token="cli-token"
    )
    with_start = child.start()
    try:
        assert with_start.client("ec2").describe_vpcs()["Vpcs"]
        with pytest.raises(AwsControlError):
            AwsControlClient(child.url).trail()
        (event,) = child.control.trail()
        assert (event.action, event.status) == ("DescribeVpcs", 200)
        assert "cli-token" not in " ".join(child.command)
    finally:
        code = child.stop()
    assert code == 0
    assert [json.loads(line)["action"] for line in trail.read_text().splitlines()] == [
        "DescribeVpcs"
    ]


def test_client_connections_are_kept_open_between_calls_and_closed_on_stop(
    moto_url: str,
) -> None:
    proxy = AwsProxyServer(moto_url, credentials=("testing", "testing")).start()
    connection = http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=30)
    body = b"Action=DescribeVpcs&Version=2016-11-15"
    form = {"Content-Type": "application/x-www-form-urlencoded"}
    try:
        try:
            for _ in range(2):  # one connection, two answers (HTTP/1.1 keep-alive)
                connection.request("POST", "/", body=body, headers=form)
                reply = connection.getresponse()
                assert reply.status == 200
                assert b"<vpcSet>" in reply.read()
                assert not reply.will_close
            # a chunked body: the proxy may answer 411 and close before the body is all sent,
            # so it is written on a raw socket and a broken pipe while sending is no failure
            with socket.create_connection(("127.0.0.1", proxy.port), timeout=30) as raw:
                head = (
                    b"POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n"
                    b"Content-Type: application/x-www-form-urlencoded\r\n\r\n"
                )
                chunk = f"{len(body):x}\r\n".encode() + body + b"\r\n0\r\n\r\n"
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    raw.sendall(head + chunk)
                answer = raw.recv(4096)
            assert answer.startswith(b"HTTP/1.1 411"), answer[:80]
            assert [e.action for e in proxy.trail.events()] == ["DescribeVpcs", "DescribeVpcs"]
        finally:
            proxy.stop()

        def once_more() -> None:
            connection.request("POST", "/", body=body, headers=form)
            connection.getresponse()

        with pytest.raises((http.client.HTTPException, OSError)):
            once_more()  # the stopped proxy closed the idle connection
    finally:
        connection.close()


def test_the_scope_a_call_is_signed_for_and_the_aws_endpoint_it_goes_to() -> None:
    header = {
        "authorization": "AWS4-HMAC-SHA256 Credential=AKID/20260101/eu-west-1/"
        "elasticloadbalancing/aws4_request, SignedHeaders=host, Signature=00"
    }
    assert caller_scope(header, {}, service="elb", region="us-east-1") == Scope(
        "eu-west-1", "elasticloadbalancing"
    )
    presigned = {"X-Amz-Credential": "AKID/20260101/ap-south-1/ec2/aws4_request"}
    assert caller_scope({}, presigned, service="ec2", region="us-east-1") == Scope(
        "ap-south-1", "ec2"
    )
    sigv2 = caller_scope({}, {"AWSAccessKeyId": "AKID"}, service="elbv2", region="us-west-2")
    assert sigv2 == Scope("us-west-2", "elasticloadbalancing")
    assert caller_scope({}, {}, service="", region="us-east-1") is None
    aws = Upstream("aws")
    assert aws.base_for(Scope("eu-west-1", "elasticloadbalancing")) == (
        "https://elasticloadbalancing.eu-west-1.amazonaws.com"
    )
    with pytest.raises(UpstreamUnavailable, match="names no service"):
        aws.base_for(None)


def test_the_callers_session_token_never_reaches_the_upstream() -> None:
    upstream = SigV4Upstream(Credentials("AKIDNOTOKEN", "no-token-secret")).start()
    session = boto3.session.Session(
        aws_access_key_id=CALLER_KEY,
        aws_secret_access_key=CALLER_SECRET,
        aws_session_token=CALLER_TOKEN,
        region_name="us-east-1",
    )
    try:
        with AwsProxyServer(upstream.url, credentials=("AKIDNOTOKEN", "no-token-secret")) as proxy:
            ec2 = session.client(
                "ec2", endpoint_url=proxy.url, config=Config(retries={"max_attempts": 0})
            )
            ec2.describe_vpcs()
    finally:
        upstream.stop()
    (received,) = upstream.received
    assert received.verdict == "ok"
    assert "x-amz-security-token" not in received.headers
    assert CALLER_TOKEN not in json.dumps(received.headers)

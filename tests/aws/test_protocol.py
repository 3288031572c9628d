"""Wire details: error shapes written in one place, request parsing, internal errors surfaced."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError

from lab.aws import AwsServer
from lab.aws.exceptions import AwsError, DependencyViolation
from lab.aws.protocol import error_response, parse_request, read_error


def test_ec2_error_shape() -> None:
    response = error_response(
        "ec2", DependencyViolation("resource sg-1 has a dependent object"), request_id="r-1"
    )
    assert response.status == 400
    assert response.body.decode() == (
        '<?xml version="1.0" encoding="UTF-8"?>\n<Response><Errors><Error>'
        "<Code>DependencyViolation</Code><Message>resource sg-1 has a dependent object</Message>"
        "</Error></Errors><RequestID>r-1</RequestID></Response>"
    )
    assert read_error(response.body) == (
        "DependencyViolation",
        "resource sg-1 has a dependent object",
    )


@pytest.mark.parametrize(("status", "kind"), [(400, "Sender"), (503, "Receiver")])
def test_elb_error_shape(status: int, kind: str) -> None:
    error = AwsError("slow <down> & retry", code="Throttling", status=status)
    body = error_response("elb", error, request_id="r-2").body.decode()
    assert body.startswith(
        '<ErrorResponse xmlns="http://elasticloadbalancing.amazonaws.com/doc/2012-06-01/">'
    )
    assert f"<Type>{kind}</Type><Code>Throttling</Code>" in body
    assert "<Message>slow &lt;down&gt; &amp; retry</Message>" in body


def test_parse_request_tells_elb_from_elbv2() -> None:
    auth = (
        "AWS4-HMAC-SHA256 Credential=AK/20260101/eu-west-1/elasticloadbalancing/aws4_request,"
        " SignedHeaders=host, Signature=0"
    )
    environ: dict[str, Any] = {
        "HTTP_AUTHORIZATION": auth,
        "CONTENT_TYPE": "application/x-www-form-urlencoded; charset=utf-8",
        "REMOTE_ADDR": "127.0.0.1",
        "REMOTE_PORT": "5000",
    }
    v1 = parse_request(
        environ, b"Action=DescribeLoadBalancers&Version=2012-06-01", default_region="x"
    )
    v2 = parse_request(
        environ, b"Action=DescribeLoadBalancers&Version=2015-12-01", default_region="x"
    )
    assert (v1.service, v1.region, v1.action, v1.signed) == (
        "elb",
        "eu-west-1",
        "DescribeLoadBalancers",
        True,
    )
    assert v2.service == "elbv2"
    unsigned = parse_request({}, b"", default_region="us-west-2")
    assert (unsigned.service, unsigned.region, unsigned.signed) == ("", "us-west-2", False)


def test_a_lab_bug_becomes_an_aws_internal_error_and_is_kept(
    aws: AwsServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(request: object) -> object:
        raise RuntimeError("boom")

    monkeypatch.setattr(aws.lab.fidelity, "before", broken)
    with pytest.raises(ClientError) as err:
        aws.client("ec2").describe_vpcs()
    assert err.value.response["Error"]["Code"] == "InternalError"
    assert err.value.response["ResponseMetadata"]["HTTPStatusCode"] == 500
    assert aws.control.health().internal_errors == ["RuntimeError: boom"]
    # expected here; the fixture fails tests that leave any
    assert aws.take_internal_errors() == ["RuntimeError: boom"]

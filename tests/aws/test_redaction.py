"""Nothing secret reaches the trail or the logs: canary credentials on every signing style."""

from __future__ import annotations

import logging
import urllib.parse
import urllib.request

import pytest

from lab.aws import AwsServer
from lab.aws.redact import REDACTED, redact_params, redact_query
from tests.aws.wire import post

CANARY_KEY = "AKIACANARYKEY0000001"
CANARY_SIG = "canarysignature0123456789abcdef"
CANARY_TOKEN = "CANARYSESSIONTOKEN-zzz"
CANARY_SECRET = "canary/secret+key=="
CANARIES = (CANARY_KEY, CANARY_SIG, CANARY_TOKEN, CANARY_SECRET, "canary%2Fsecret")


def test_trail_and_logs_hold_no_credentials(
    aws: AwsServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    scope = f"{CANARY_KEY}/20260101/us-east-1/ec2/aws4_request"
    presigned = urllib.parse.urlencode(
        {
            "Action": "DescribeVpcs",
            "Version": "2016-11-15",
            "X-Amz-Algorithm": "AWS4-HMAC-SHA256",
            "X-Amz-Credential": scope,
            "X-Amz-Security-Token": CANARY_TOKEN,
            "X-Amz-Signature": CANARY_SIG,
        }
    )
    assert post(aws, b"", query=presigned).status == 200
    sigv2 = urllib.parse.urlencode(
        {
            "Action": "DescribeSecurityGroups",
            "Version": "2016-11-15",
            "AWSAccessKeyId": CANARY_KEY,
            "SignatureVersion": "2",
            "Signature": CANARY_SIG,
            "SecurityToken": CANARY_TOKEN,
        }
    )
    assert post(aws, sigv2).status == 200
    header = f"AWS4-HMAC-SHA256 Credential={scope}, SignedHeaders=host, Signature={CANARY_SIG}"
    body = "Action=DescribeSubnets&Version=2016-11-15&Foo.1.SecretAccessKey=" + urllib.parse.quote(
        CANARY_SECRET, safe=""
    )
    answer = post(
        aws, body, headers={"Authorization": header, "X-Amz-Security-Token": CANARY_TOKEN}
    )
    assert answer.status == 200
    broken = post(
        aws,
        "Action=DescribeVpcs&Version=2016-11-15",
        headers={
            "Authorization": f"AWS4-HMAC-SHA256 Credential={CANARY_KEY}/x, Signature={CANARY_SIG}"
        },
    )
    assert broken.code == "IncompleteSignature"

    with urllib.request.urlopen(aws.url + "/_lab/trail.jsonl", timeout=10) as response:
        trail = response.read().decode()
    actions = [e.action for e in aws.trail.events()]
    assert actions == ["DescribeVpcs", "DescribeSecurityGroups", "DescribeSubnets", "DescribeVpcs"]
    logs = "\n".join(record.getMessage() for record in caplog.records)
    assert "X-Amz-Signature" in logs  # the request line was logged, redacted
    for canary in CANARIES:
        assert canary not in trail
        assert canary not in logs
        assert canary not in str(aws.control.trail())
    first = aws.trail.events()[0]
    assert first.raw_params["X-Amz-Credential"] == f"{REDACTED}/20260101/us-east-1/ec2/aws4_request"
    assert first.raw_params["X-Amz-Signature"] == REDACTED


def test_redaction_helpers_keep_what_is_not_secret() -> None:
    params = {
        "GroupId": "sg-1",
        "NextToken": "t1",
        "ClientToken": "c1",
        "Signature": "s",
        "Foo.2.Password": "p",
    }
    assert redact_params(params) == {
        "GroupId": "sg-1",
        "NextToken": "t1",
        "ClientToken": "c1",
        "Signature": REDACTED,
        "Foo.2.Password": REDACTED,
    }
    line = "GET /?Action=X&X-Amz-Signature=abc&Version=1&AWSAccessKeyId=AK HTTP/1.1"
    assert redact_query(line) == (
        f"GET /?Action=X&X-Amz-Signature={REDACTED}&Version=1&AWSAccessKeyId={REDACTED} HTTP/1.1"
    )

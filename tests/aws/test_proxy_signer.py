"""The recording proxy's re-signing sends what botocore's own signer would (issue 28).

:class:`lab.aws.proxy.signer.ProxySigner` (on :class:`~lab.aws.proxy.signer.SigningRequest`)
replaces botocore's ``email``-based header handling while signing; every forwarded call's
headers must stay byte for byte what ``SigV4Auth.add_auth`` on an ``AWSRequest`` gives. Each
case here signs one call both ways at one frozen instant and compares the header lists.
"""

from __future__ import annotations

import datetime
from typing import Any
from urllib.parse import urlsplit

import botocore.auth
import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from lab.aws.proxy.signer import RequestHeaders, SignedHeaderMap
from lab.aws.proxy.upstream import (
    CALLER_AUTH_HEADERS,
    PRESIGN_PARAMS,
    SIGV2_PARAMS,
    Scope,
    Upstream,
    _host,
    _strip,
)

KEY = Credentials("AKIDPROXYEXAMPLE", "proxy/secret+key==")
TOKEN_KEY = Credentials("AKIDPROXYEXAMPLE", "proxy/secret+key==", "SESSION-TOKEN/xyz==")
AGENT = "Boto3/1.44.5 md/Botocore#1.44.5 ua/2.1 os/linux#6.1 lang/python#3.11.7"
FORM = "application/x-www-form-urlencoded; charset=utf-8"
CALLER_AUTH = (
    "AWS4-HMAC-SHA256 Credential=testing/20261129/us-east-1/ec2/aws4_request, "
    "SignedHeaders=content-type;host;x-amz-date, Signature=abc"
)


def _reference(
    base_url: str, target: str, headers: list[tuple[str, str]], body: bytes, scope: Scope, key: Any
) -> tuple[str, bytes, list[tuple[str, str]]]:
    """What the proxy sent before issue 28: botocore's ``AWSRequest`` and ``SigV4Auth``."""
    base = urlsplit(base_url)
    path, _, query = target.partition("?")
    query, _ = _strip(query, PRESIGN_PARAMS | SIGV2_PARAMS)
    content_type = next((v for k, v in headers if k.lower() == "content-type"), "")
    if body and content_type.startswith("application/x-www-form-urlencoded"):
        text, changed = _strip(body.decode("utf-8", errors="replace"), SIGV2_PARAMS)
        if changed:
            body = text.encode()
    kept = [(k, v) for k, v in headers if k.lower() not in CALLER_AUTH_HEADERS]
    url = f"{base.scheme}://{base.netloc}{base.path.rstrip('/')}{path}"
    request = AWSRequest(
        method="POST",
        url=url + (f"?{query}" if query else ""),
        data=body,
        headers={**dict(kept), "Host": _host(base)},
    )
    SigV4Auth(key, scope.service, scope.region).add_auth(request)
    return query, body, [(k, v) for k, v in request.headers.items() if k.lower() != "host"]


CASES: dict[str, tuple[str, str, list[tuple[str, str]], bytes, Scope, Any]] = {
    "ec2 form call": (
        "http://127.0.0.1:5000",
        "/",
        [
            ("Content-Type", FORM),
            ("User-Agent", AGENT),
            ("X-Amz-Date", "20261129T161500Z"),
            ("Authorization", CALLER_AUTH),
            ("Amz-Sdk-Invocation-Id", "f0e0c0a0-1111-2222-3333-444455556666"),
            ("Amz-Sdk-Request", "attempt=1"),
        ],
        b"Action=DescribeSecurityGroups&Version=2016-11-15&GroupId.1=sg-0123",
        Scope("us-east-1", "ec2"),
        KEY,
    ),
    "repeated names, case and whitespace": (
        "http://localhost:4566/base/",
        "/a/./b/../c%20d",
        [
            ("Content-Type", FORM),
            ("X-Custom", "  one   two  "),
            ("x-custom", "three"),
            ("X-CUSTOM", "four\tfive"),
            ("X-Amz-Security-Token", "the-caller's"),
        ],
        b"Action=DescribeLoadBalancers&Version=2012-06-01",
        Scope("eu-west-1", "elasticloadbalancing"),
        TOKEN_KEY,
    ),
    "a Date header, no body": (
        "https://ec2.us-west-2.amazonaws.com",
        "/?Action=DescribeRegions&Version=2016-11-15&b=2&a=1",
        [("Date", "Sun, 29 Nov 2026 16:15:00 GMT"), ("User-Agent", AGENT)],
        b"",
        Scope("us-west-2", "ec2"),
        KEY,
    ),
    "presigned query and SigV2 body": (
        "http://127.0.0.1:5000",
        "/?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=a%2Fb&Action=DescribeVpcs",
        [("Content-Type", FORM), ("Content-Md5", "x")],
        b"AWSAccessKeyId=AKID&Signature=abc%3D&SignatureVersion=2&Version=2016-11-15",
        Scope("us-east-1", "ec2"),
        TOKEN_KEY,
    ),
    "encoded parameter names, JSON body": (
        "http://[::1]:4566",
        "/?%53ignature=x&Action=Y",
        [("Content-Type", "application/x-amz-json-1.1"), ("X-Amz-Target", "TrentService.ListKeys")],
        b'{"Limit": 5}',
        Scope("us-east-1", "kms"),
        KEY,
    ),
}


@pytest.fixture(autouse=True)
def frozen_time(monkeypatch: pytest.MonkeyPatch) -> None:
    instant = datetime.datetime(2026, 11, 29, 16, 15, 7)
    monkeypatch.setattr(botocore.auth, "get_current_datetime", lambda: instant)


@pytest.mark.parametrize("case", sorted(CASES))
def test_resigned_headers_are_what_botocores_signer_gives(case: str) -> None:
    base_url, target, headers, body, scope, key = CASES[case]
    upstream = Upstream(base_url, credentials=key)
    path, _, query = target.partition("?")
    base = urlsplit(upstream.url)
    kept = [(k, v) for k, v in headers if k.lower() not in ("host", "content-length")]
    got = upstream._resign("POST", base, path, query, body, kept, scope=scope, key=key)
    assert got == _reference(upstream.url, target, kept, body, scope, key)
    # twice: the signer kept per scope carries nothing of the first call into the second
    again = upstream._resign("POST", base, path, query, body, kept, scope=scope, key=key)
    assert again == got


def test_request_headers_follow_botocores_httpheaders() -> None:
    pairs = [("A", "1"), ("b", "2"), ("a", "3")]
    ours, theirs = RequestHeaders(pairs), AWSRequest(headers=dict(pairs)).headers
    for headers in (ours, theirs):
        headers["C"] = "4"
        del headers["A"]
    assert ours.items() == list(theirs.items())
    assert ("B" in ours, "a" in ours, ours["C"]) == ("B" in theirs, "a" in theirs, theirs["C"])


def test_signed_header_map_keeps_every_value_in_order() -> None:
    found = SignedHeaderMap()
    found["x-a"] = "1"
    found["host"] = "h"
    found["x-a"] = "2"
    assert (list(found), found.get_all("x-a"), "host" in found) == (
        ["x-a", "host"],
        ["1", "2"],
        True,
    )


def test_the_kept_signing_key_follows_the_day_and_the_secret(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # the signer derives its key once per day and secret key: a new day or a rotated secret
    # (refreshed credentials) must sign as botocore does, never with the key kept before
    base_url, target, headers, body, scope, _ = CASES["ec2 form call"]
    key = Credentials("AKIDPROXYEXAMPLE", "first-secret")
    upstream = Upstream(base_url, credentials=key)
    path, _, query = target.partition("?")
    base = urlsplit(upstream.url)
    for day, secret in ((29, "first-secret"), (30, "first-secret"), (30, "rotated-secret")):
        instant = datetime.datetime(2026, 11, day, 16, 15, 7)
        monkeypatch.setattr(botocore.auth, "get_current_datetime", lambda at=instant: at)
        key.secret_key = secret
        got = upstream._resign("POST", base, path, query, body, headers, scope=scope, key=key)
        assert got == _reference(upstream.url, target, headers, body, scope, key), (day, secret)

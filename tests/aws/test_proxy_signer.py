"""The recording proxy's re-signing sends what botocore's own signer would (issue 28).

:class:`lab.aws.proxy.signer.ProxySigner` signs on plain header lists, without botocore's
``AWSRequest``; every forwarded call's headers must stay byte for byte what
``SigV4Auth.add_auth`` on an ``AWSRequest`` gives. Each case here signs one call both ways at
one frozen instant and compares the header lists: fixed cases, then seeded random ones.
"""

from __future__ import annotations

import calendar
import datetime
import random
from typing import Any
from urllib.parse import urlsplit

import botocore.auth
import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

import lab.aws.proxy.signer as signer_module
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
    request = AWSRequest(method="POST", url=url + (f"?{query}" if query else ""), data=body)
    for name, value in [*kept, ("Host", _host(base))]:
        request.headers[name] = value  # botocore's headers keep a repeated name's every value
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
    base = upstream._base(scope)
    kept = [(k, v) for k, v in headers if k.lower() not in ("host", "content-length")]
    got = upstream._resign("POST", base, path, query, body, kept, scope=scope, key=key)
    assert got == _reference(upstream.url, target, kept, body, scope, key)
    # twice: the signer kept per scope carries nothing of the first call into the second
    again = upstream._resign("POST", base, path, query, body, kept, scope=scope, key=key)
    assert again == got


def test_the_kept_signing_key_follows_the_day_and_the_secret(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # the signer derives its key once per day and secret key: a new day or a rotated secret
    # (refreshed credentials) must sign as botocore does, never with the key kept before
    base_url, target, headers, body, scope, _ = CASES["ec2 form call"]
    key = Credentials("AKIDPROXYEXAMPLE", "first-secret")
    upstream = Upstream(base_url, credentials=key)
    path, _, query = target.partition("?")
    base = upstream._base(scope)
    for day, secret in ((29, "first-secret"), (30, "first-secret"), (30, "rotated-secret")):
        instant = datetime.datetime(2026, 11, day, 16, 15, 7)
        monkeypatch.setattr(botocore.auth, "get_current_datetime", lambda at=instant: at)
        key.secret_key = secret
        got = upstream._resign("POST", base, path, query, body, headers, scope=scope, key=key)
        assert got == _reference(upstream.url, target, headers, body, scope, key), (day, secret)


_NAMES = [
    "Content-Type",
    "X-Custom",
    "x-custom",
    "User-Agent",
    "Date",
    "date",
    "X-Amz-Date",
    "X-Amz-Content-SHA256",
    "Expect",
    "Connection",
    "X-Amzn-Trace-Id",
    "Accept",
    "X-B",
]
_VALUES = ["a", "  spaced   out ", "tab\there", "", "UNSIGNED-PAYLOAD", "x,y", "Sun, 1 Nov 2026"]
_PATHS = ["/", "", "/a//b/", "/./x/../y", "/with space/~tilde/%41", "/ü/ß", "/a;b=c"]
_QUERIES = ["", "b=2&a=1", "a=2&a=1&a", "x=%2F&=v&k=", "Action=Y&Version=1&%41=z"]


@pytest.mark.parametrize("seed", range(40))
def test_random_calls_are_signed_as_botocore_signs_them(seed: int) -> None:
    rng = random.Random(seed)
    headers = [(rng.choice(_NAMES), rng.choice(_VALUES)) for _ in range(rng.randint(0, 7))]
    key = rng.choice([KEY, TOKEN_KEY])
    base_url = rng.choice(["http://127.0.0.1:5000", "https://h.example:8443/p/", "http://[::1]"])
    query = rng.choice(_QUERIES)
    target = rng.choice(_PATHS) or "/"
    target += f"?{query}" if query else ""
    body = rng.choice([b"", b"Action=DescribeVpcs&Version=2016-11-15", b'{"a": 1}'])
    scope = Scope(rng.choice(["us-east-1", "eu-west-3"]), rng.choice(["ec2", "kms"]))
    upstream = Upstream(base_url, credentials=key)
    path, _, query = target.partition("?")
    kept = [(k, v) for k, v in headers if k.lower() not in ("host", "content-length")]
    got = upstream._resign(
        "POST", upstream._base(scope), path, query, body, kept, scope=scope, key=key
    )
    assert got == _reference(upstream.url, target, kept, body, scope, key), (headers, target)


@pytest.mark.parametrize("instant", [1795988587.0, 1795988587.999999, 1795988588.000001, 0.5])
def test_the_system_clock_is_read_as_botocores_clock_reads_it(
    monkeypatch: pytest.MonkeyPatch, instant: float
) -> None:
    # with botocore's own clock in place, the signer reads the system clock itself (and
    # formats each second once): the same timestamp and second botocore's would give
    monkeypatch.setattr(botocore.auth, "get_current_datetime", signer_module._BOTOCORE_CLOCK)
    monkeypatch.setattr(signer_module.time, "time", lambda: instant)
    at = datetime.datetime.fromtimestamp(instant, datetime.UTC).replace(tzinfo=None)
    expected = (at.strftime("%Y%m%dT%H%M%SZ"), calendar.timegm(at.timetuple()))
    assert signer_module._signing_time() == expected
    assert signer_module._signing_time() == expected  # the second's stamp, kept


def test_a_frozen_botocore_clock_is_the_one_read(monkeypatch: pytest.MonkeyPatch) -> None:
    # the autouse fixture froze botocore.auth's clock: the system clock is not consulted
    monkeypatch.setattr(signer_module.time, "time", lambda: 0.0)
    assert signer_module._signing_time() == ("20261129T161507Z", 1795968907)

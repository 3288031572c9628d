"""The recording proxy with caller credentials signs for nobody else (issue #16).

A proxy in front of a stock moto (standing in for the real account) is given the lab's caller
key pair: a call signed with it is forwarded; a wrong secret, an unknown key id, no signature,
a stale ``X-Amz-Date``, a body changed after signing and a presigned query are answered with
AWS's error by the proxy itself, before fault rules and guard, nothing forwarded (the upstream
unchanged), and the trail says ``proxy:caller-auth``. The opposite expectation is shown too: a
proxy without caller credentials forwards the same wrongly signed call (the old behaviour).
Plus the wiring: the key pair reaches the controller's environment, ``lab.env`` and the state
file, and moto/LocalStack labs keep the dummy keys.
"""

from __future__ import annotations

import datetime
import http.client
import urllib.parse
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore import UNSIGNED
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.config import Config
from botocore.credentials import Credentials
from botocore.exceptions import ClientError

from lab.aws import AwsControlClient, AwsControlError
from lab.aws.clients import make_client
from lab.aws.proxy import AwsProxyProcess, AwsProxyServer
from lab.aws.proxy.callerauth import AMZ_DATE, ANSWERED_BY, new_caller_credentials
from lab.controllerproc import LAB_AWS_ENV, ControllerSpec, aws_env
from lab.labview import environment
from lab.state import LabState, make_private_dir, read_state, write_state

KEY = ("AKIALABCALLERTEST01", "lab-caller-secret/for+tests")
REGION = "us-east-1"


@pytest.fixture(scope="module")
def guarded(moto_url: str) -> Iterator[tuple[AwsProxyServer, list[str]]]:
    """The proxy with caller credentials, and the actions its guard was asked about."""
    asked: list[str] = []

    def guard(request: Any, query: str, body: bytes) -> bytes:
        asked.append(request.action)
        return body

    with AwsProxyServer(
        moto_url,
        credentials=("testing", "testing"),
        caller_credentials=KEY,
        token="t0k",
        guard=guard,
    ) as server:
        yield server, asked
        assert not server.take_internal_errors()


@pytest.fixture
def proxy(guarded: tuple[AwsProxyServer, list[str]]) -> AwsProxyServer:
    guarded[0].control.reset()
    guarded[1].clear()
    return guarded[0]


def _client(url: str, service: str, key: tuple[str, str] | None) -> Any:
    """A boto3 client at ``url`` signing with ``key`` (None: unsigned)."""
    config = Config(retries={"total_max_attempts": 1}, signature_version=UNSIGNED)
    if key is None:
        return boto3.session.Session().client(
            service, endpoint_url=url, region_name=REGION, config=config,
            aws_access_key_id="x", aws_secret_access_key="x",
        )  # fmt: skip
    return boto3.session.Session().client(
        service,
        endpoint_url=url,
        region_name=REGION,
        aws_access_key_id=key[0],
        aws_secret_access_key=key[1],
        config=Config(retries={"total_max_attempts": 1}),
    )


def _error(call: Any, **kwargs: Any) -> tuple[int, str, str]:
    with pytest.raises(ClientError) as caught:
        call(**kwargs)
    response = caught.value.response
    error = response["Error"]
    return response["ResponseMetadata"]["HTTPStatusCode"], error["Code"], error["Message"]


def _groups_named(moto_url: str, name: str) -> list[str]:
    direct = make_client("ec2", moto_url, REGION)
    found = direct.describe_security_groups(Filters=[{"Name": "group-name", "Values": [name]}])
    return [g["GroupId"] for g in found["SecurityGroups"]]


def _raw(
    url: str,
    body: bytes,
    *,
    key: tuple[str, str] = KEY,
    when: datetime.datetime | None = None,
    send: bytes | None = None,
    service: str = "ec2",
    query: str = "",
) -> tuple[int, str]:
    """POST ``body`` signed with botocore's signer as of ``when`` (default now); ``send``:
    the body actually sent (a change after signing). Returns (status, response text)."""
    host = urllib.parse.urlsplit(url).netloc
    request = AWSRequest(
        method="POST",
        url=f"{url}/" + (f"?{query}" if query else ""),
        data=body,
        headers={"Content-Type": "application/x-www-form-urlencoded; charset=utf-8"},
    )
    stamp = (when or datetime.datetime.now(datetime.UTC)).strftime(AMZ_DATE)
    signer = SigV4Auth(Credentials(*key), service, REGION)
    request.context["timestamp"] = stamp
    request.headers["X-Amz-Date"] = stamp
    signature = signer.signature(
        signer.string_to_sign(request, signer.canonical_request(request)), request
    )
    signer._inject_signature_to_request(request, signature)
    connection = http.client.HTTPConnection(host, timeout=10)
    try:
        sent = body if send is None else send
        headers = dict(request.headers.items())
        headers["Content-Length"] = str(len(sent))
        connection.request("POST", "/" + (f"?{query}" if query else ""), sent, headers)
        reply = connection.getresponse()
        return reply.status, reply.read().decode()
    finally:
        connection.close()


def _create_body(name: str) -> bytes:
    return urllib.parse.urlencode(
        {"Action": "CreateSecurityGroup", "Version": "2016-11-15", "GroupName": name,
         "GroupDescription": "d"}
    ).encode()  # fmt: skip


def test_a_call_signed_with_the_lab_key_is_forwarded(proxy: AwsProxyServer, moto_url: str) -> None:
    name = f"callerauth-{uuid.uuid4().hex[:8]}"
    group = proxy.client("ec2").create_security_group(GroupName=name, Description="d")["GroupId"]
    assert _groups_named(moto_url, name) == [group]
    assert proxy.client("sts").get_caller_identity()["Account"]
    # moto's state is the process's: what it lists depends on earlier tests, not on the proxy
    assert "LoadBalancerDescriptions" in proxy.client("elb").describe_load_balancers()
    upstream = f"upstream:{moto_url.split('//')[1]}"
    for action in ("CreateSecurityGroup", "GetCallerIdentity", "DescribeLoadBalancers"):
        assert [e.answered_by for e in proxy.trail.calls(action)] == [upstream], action
    status, _ = _raw(proxy.url, _create_body(name + "-raw"))  # the raw signer agrees
    assert status == 200
    assert proxy.control.health().caller_auth is True


def test_a_wrong_secret_is_refused_as_aws_does_and_nothing_is_forwarded(
    guarded: tuple[AwsProxyServer, list[str]], proxy: AwsProxyServer, moto_url: str
) -> None:
    wrong = (KEY[0], "not-the-secret")
    name = f"callerauth-{uuid.uuid4().hex[:8]}"
    proxy.control.add_fault(action="CreateSecurityGroup", code="Throttling", count=1)
    ec2 = _client(proxy.url, "ec2", wrong)
    status, code, _ = _error(ec2.create_security_group, GroupName=name, Description="d")
    assert (status, code) == (401, "AuthFailure")
    assert _groups_named(moto_url, name) == []  # nothing reached the upstream
    assert guarded[1] == []  # the guard was not asked
    sts = _client(proxy.url, "sts", wrong)
    assert _error(sts.get_caller_identity)[:2] == (403, "SignatureDoesNotMatch")
    elb = _client(proxy.url, "elb", wrong)
    assert _error(elb.describe_load_balancers)[:2] == (403, "SignatureDoesNotMatch")
    events = proxy.trail.events()
    assert [(e.action, e.status, e.error_code, e.answered_by) for e in events] == [
        ("CreateSecurityGroup", 401, "AuthFailure", ANSWERED_BY),
        ("GetCallerIdentity", 403, "SignatureDoesNotMatch", ANSWERED_BY),
        ("DescribeLoadBalancers", 403, "SignatureDoesNotMatch", ANSWERED_BY),
    ]
    # the fault rule (count=1) did not answer the refused call: it is still there for the
    # first call signed with the right key
    right = proxy.client("ec2").create_security_group
    assert _error(right, GroupName=name, Description="d")[1] == "Throttling"
    assert guarded[1] == []


def test_without_caller_credentials_the_same_call_is_forwarded(moto_url: str) -> None:
    """The opposite expectation on the same evidence: the old, open proxy signs for anyone."""
    name = f"callerauth-open-{uuid.uuid4().hex[:8]}"
    with AwsProxyServer(moto_url, credentials=("testing", "testing")) as open_proxy:
        ec2 = _client(open_proxy.url, "ec2", (KEY[0], "not-the-secret"))
        group = ec2.create_security_group(GroupName=name, Description="d")["GroupId"]
    assert _groups_named(moto_url, name) == [group]


def test_an_unknown_key_id_and_the_old_dummy_keys_are_refused(proxy: AwsProxyServer) -> None:
    for key in (("AKIAUNKNOWNKEY000000", KEY[1]), ("testing", "testing")):
        assert _error(_client(proxy.url, "ec2", key).describe_vpcs)[:2] == (401, "AuthFailure")
        sts = _client(proxy.url, "sts", key)
        assert _error(sts.get_caller_identity)[:2] == (403, "InvalidClientTokenId")
    assert {e.answered_by for e in proxy.trail.events()} == {ANSWERED_BY}
    assert len(proxy.trail.events()) == 4


def test_an_unsigned_call_is_refused(proxy: AwsProxyServer) -> None:
    ec2 = _client(proxy.url, "ec2", None)
    assert _error(ec2.describe_vpcs)[:2] == (401, "MissingAuthenticationToken")
    sts = _client(proxy.url, "sts", None)
    assert _error(sts.get_caller_identity)[:2] == (403, "MissingAuthenticationToken")
    assert [e.answered_by for e in proxy.trail.events()] == [ANSWERED_BY, ANSWERED_BY]


def test_a_stale_or_future_timestamp_is_refused(proxy: AwsProxyServer, moto_url: str) -> None:
    now = datetime.datetime.now(datetime.UTC)
    name = f"callerauth-{uuid.uuid4().hex[:8]}"
    status, text = _raw(proxy.url, _create_body(name), when=now - datetime.timedelta(minutes=16))
    assert (status, "<Code>RequestExpired</Code>") == (400, _code(text))
    sts_body = b"Action=GetCallerIdentity&Version=2011-06-15"
    stale = now - datetime.timedelta(minutes=20)
    status, text = _raw(proxy.url, sts_body, when=stale, service="sts")
    assert (status, _code(text)) == (403, "<Code>SignatureDoesNotMatch</Code>")
    assert f"Signature expired: {stale.strftime(AMZ_DATE)} is now earlier than" in text
    future = now + datetime.timedelta(minutes=20)
    status, text = _raw(proxy.url, sts_body, when=future, service="sts")
    assert status == 403
    assert "Signature not yet current" in text
    # within the 15 minutes it passes
    status, _ = _raw(proxy.url, sts_body, when=now - datetime.timedelta(minutes=14), service="sts")
    assert status == 200
    assert _groups_named(moto_url, name) == []


def _code(text: str) -> str:
    start = text.index("<Code>")
    return text[start : text.index("</Code>") + len("</Code>")]


def test_a_body_changed_after_signing_is_refused(proxy: AwsProxyServer, moto_url: str) -> None:
    signed_name = f"callerauth-a-{uuid.uuid4().hex[:8]}"
    sent_name = signed_name.replace("-a-", "-b-")  # same length: only the signature can tell
    status, text = _raw(proxy.url, _create_body(signed_name), send=_create_body(sent_name))
    assert (status, _code(text)) == (401, "<Code>AuthFailure</Code>")
    assert _groups_named(moto_url, sent_name) == [] == _groups_named(moto_url, signed_name)
    [event] = proxy.trail.events()
    assert (event.action, event.answered_by) == ("CreateSecurityGroup", ANSWERED_BY)


def test_a_presigned_query_is_refused(proxy: AwsProxyServer) -> None:
    query = urllib.parse.urlencode(
        {"X-Amz-Algorithm": "AWS4-HMAC-SHA256",
         "X-Amz-Credential": f"{KEY[0]}/20260101/{REGION}/ec2/aws4_request",
         "X-Amz-Signature": "0" * 64, "X-Amz-SignedHeaders": "host"}
    )  # fmt: skip
    host = urllib.parse.urlsplit(proxy.url).netloc
    connection = http.client.HTTPConnection(host, timeout=10)
    try:
        connection.request("GET", f"/?Action=DescribeVpcs&Version=2016-11-15&{query}")
        reply = connection.getresponse()
        text = reply.read().decode()
    finally:
        connection.close()
    assert (reply.status, _code(text)) == (401, "<Code>AuthFailure</Code>")
    assert "Authorization header" in text


def test_the_control_routes_keep_the_bearer_token(proxy: AwsProxyServer) -> None:
    assert proxy.control.trail() == []  # the token works; no AWS signature needed
    with pytest.raises(AwsControlError) as refused:
        AwsControlClient(proxy.url).faults()
    assert refused.value.status == 401
    host = urllib.parse.urlsplit(proxy.url).netloc
    connection = http.client.HTTPConnection(host, timeout=10)
    try:  # a valid AWS signature is not the control plane's token
        request = AWSRequest(method="GET", url=f"{proxy.url}/_lab/faults")
        SigV4Auth(Credentials(*KEY), "ec2", REGION).add_auth(request)
        connection.request("GET", "/_lab/faults", headers=dict(request.headers.items()))
        assert connection.getresponse().status == 401
    finally:
        connection.close()


# --- wiring ---------------------------------------------------------------------------------


def test_the_key_pair_is_fresh_and_reaches_the_controller_env_and_the_state(
    tmp_path: Path,
) -> None:
    first, second = new_caller_credentials(), new_caller_credentials()
    assert first != second
    assert first[0].startswith("AKIA")
    assert len(first[0]) == 20
    assert len(first[1]) == 40
    spec = ControllerSpec(
        kubeconfig=tmp_path / "k", cloud_config=tmp_path / "c", log_path=tmp_path / "l",
        imds_endpoint=None,
        aws_credentials=first,
    )  # fmt: skip
    env = spec.environ()
    assert (env["AWS_ACCESS_KEY_ID"], env["AWS_SECRET_ACCESS_KEY"]) == first
    assert "AWS_SESSION_TOKEN" not in env
    plain = ControllerSpec(
        kubeconfig=tmp_path, cloud_config=tmp_path, log_path=tmp_path, imds_endpoint=None
    )
    assert {k: plain.environ()[k] for k in LAB_AWS_ENV} == dict(LAB_AWS_ENV)  # moto, LocalStack
    assert aws_env(None) == dict(LAB_AWS_ENV)
    directory = make_private_dir(tmp_path / "labs" / "n")
    state = LabState(
        name="n", backend="sim", k8s_version="1.33", directory=str(directory), kubeconfig="k",
        cloud_config="c", aws_endpoint="http://127.0.0.1:1", imds_endpoint="http://127.0.0.1:2",
        region=REGION, cluster_id="c", nodes=(), aws="real", aws_credentials=first,
    )  # fmt: skip
    written = write_state(state)
    assert written.stat().st_mode & 0o777 == 0o600  # where the lab's token lives
    assert read_state(directory) == state
    exports = dict(environment(name="n", root=tmp_path / "labs"))  # what lab.env prints
    assert (exports["AWS_ACCESS_KEY_ID"], exports["AWS_SECRET_ACCESS_KEY"]) == first
    assert exports["AWS_SESSION_TOKEN"] == ""  # overrides a token the user's shell has
    write_state(state.replace(aws="moto", aws_credentials=None))
    exports = dict(environment(name="n", root=tmp_path / "labs"))
    assert {k: exports[k] for k in LAB_AWS_ENV} == dict(LAB_AWS_ENV)


def test_the_cli_takes_the_key_pair_from_its_environment(moto_url: str) -> None:
    child = AwsProxyProcess(moto_url, credentials=("testing", "testing"), caller_credentials=KEY)
    child.start()
    try:
        assert child.client("ec2").describe_vpcs()["Vpcs"]  # signed with the pair
        old = make_client("ec2", child.url, REGION)  # the dummy keys
        assert _error(old.describe_vpcs)[:2] == (401, "AuthFailure")
        assert KEY[1] not in " ".join(child.command)
        assert child.control.health().caller_auth is True
    finally:
        assert child.stop() == 0


def test_the_cli_refuses_half_a_key_pair_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from lab.aws.proxy.__main__ import main

    monkeypatch.setenv("CCM_LAB_CALLER_ACCESS_KEY_ID", KEY[0])
    monkeypatch.delenv("CCM_LAB_CALLER_SECRET_ACCESS_KEY", raising=False)
    assert main(["--upstream", "http://127.0.0.1:9", "--no-resign"]) == 2
    assert "CCM_LAB_CALLER_SECRET_ACCESS_KEY is empty or unset" in capsys.readouterr().err

"""The /_lab/ control plane through its typed client, and its refusals."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest

from lab.aws import AwsControlClient, AwsControlError, AwsControlUnavailable, AwsServer


def test_health_reports_the_endpoint(aws: AwsServer) -> None:
    health = aws.control.health()
    assert (health.status, health.region, health.account) == ("ok", "us-east-1", aws.account)
    assert health.trail_events == 0
    assert health.internal_errors == []


def test_standalone_client_and_fidelity_round_trip(aws: AwsServer) -> None:
    client = AwsControlClient(aws.url)
    assert client.fidelity().elb_sg_order == "creation"
    changed = client.set_fidelity(elb_sg_order="shuffle", elb_sg_order_seed=5)
    assert (changed.elb_sg_order, changed.elb_sg_order_seed) == ("shuffle", 5)
    assert aws.control.fidelity() == changed
    client.reset()  # back to the endpoint's start-up switches
    assert client.fidelity().elb_sg_order == "creation"


@pytest.mark.parametrize(
    ("changes", "names"),
    [
        ({"elb_sg_order": "random"}, "'elb_sg_order'"),
        ({"instance_pending_s": -1}, "'instance_pending_s'"),
        ({"enabled": "yes"}, "'enabled'"),
        ({"no_such_switch": True}, "'no_such_switch'"),
    ],
)
def test_bad_fidelity_switch_is_refused(
    aws: AwsServer, changes: dict[str, object], names: str
) -> None:
    with pytest.raises(AwsControlError) as err:
        aws.control.set_fidelity(**changes)
    assert names in err.value.message
    assert aws.control.fidelity().elb_sg_order == "creation"


def test_unknown_route_and_method(aws: AwsServer) -> None:
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(f"{aws.url}/_lab/nothing", timeout=5)
    assert err.value.code == 404
    assert "known" in json.loads(err.value.read())["error"]
    err.value.close()
    request = urllib.request.Request(f"{aws.url}/_lab/reset", method="GET")
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(request, timeout=5)
    assert err.value.code == 405
    err.value.close()


def test_bad_trail_query_and_seed(aws: AwsServer) -> None:
    with pytest.raises(AwsControlError, match="'injected'"):
        aws.control._call("GET", "trail?injected=maybe")
    with pytest.raises(AwsControlError, match="'seed'"):
        aws.control._call("POST", "seed", {"seed": "x"})
    with pytest.raises(AwsControlError, match="no rule"):
        aws.control.remove_fault("f999")


def test_unreachable_endpoint_is_a_clear_error() -> None:
    client = AwsControlClient("http://127.0.0.1:9", timeout=2)
    with pytest.raises(AwsControlUnavailable, match=r"127\.0\.0\.1:9"):
        client.health()


def test_moto_api_passes_through_untrailed(aws: AwsServer) -> None:
    with urllib.request.urlopen(f"{aws.url}/moto-api/data.json", timeout=10) as response:
        assert response.status == 200
    assert len(aws.trail) == 0


# --- the lab's token ---------------------------------------------------------------------------


@pytest.fixture
def guarded(aws: AwsServer) -> Iterator[AwsServer]:
    """An endpoint given a lab token (moto's state is shared with ``aws``, reset per test)."""
    with AwsServer(region="us-east-1", token="lab-secret", warm_up=False) as endpoint:
        yield endpoint
        assert endpoint.take_internal_errors() == []


def _status(url: str, method: str = "GET", token: str | None = None) -> tuple[int, str, str]:
    request = urllib.request.Request(url, method=method, data=b"" if method == "POST" else None)
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read().decode(), ""
    except urllib.error.HTTPError as exc:
        with exc:
            return exc.code, exc.read().decode(), exc.headers.get("WWW-Authenticate", "")


def test_control_plane_and_moto_api_refuse_requests_without_the_lab_token(
    guarded: AwsServer,
) -> None:
    ec2 = guarded.client("ec2")  # AWS calls stay SigV4-signed, without the lab's token
    group = ec2.create_security_group(GroupName="kept", Description="kept")["GroupId"]
    for url, method in (
        (f"{guarded.url}/_lab/reset", "POST"),
        (f"{guarded.url}/_lab/trail", "GET"),
        (f"{guarded.url}/_lab/health", "GET"),
        (f"{guarded.url}/moto-api/reset", "POST"),
        (f"{guarded.url}/moto-api/data.json", "GET"),
    ):
        for token in (None, "not-the-lab-token"):
            status, body, challenge = _status(url, method, token)
            assert (url, token, status) == (url, token, 401)
            assert challenge.startswith("Bearer")
            message = json.loads(body)["error"]
            assert "needs the lab's token" in message
            assert "state.json" in message, "says where the token is"
            assert "not-the-lab-token" not in message
    described = ec2.describe_security_groups(GroupIds=[group])["SecurityGroups"]
    assert [g["GroupName"] for g in described] == ["kept"], "nothing was reset"
    assert [e.action for e in guarded.trail.calls()] == [
        "CreateSecurityGroup",
        "DescribeSecurityGroups",
    ], "the trail is intact"
    with pytest.raises(AwsControlError) as refused:
        AwsControlClient(guarded.url).health()
    assert refused.value.status == 401


def test_the_lab_token_opens_the_control_plane_and_moto_api(guarded: AwsServer) -> None:
    ec2 = guarded.client("ec2")
    ec2.create_security_group(GroupName="gone", Description="gone")
    assert guarded.control.health().status == "ok"  # the lab's client sends the token
    assert _status(f"{guarded.url}/moto-api/reset", "POST", "lab-secret")[0] == 200
    names = [g["GroupName"] for g in ec2.describe_security_groups()["SecurityGroups"]]
    assert "gone" not in names

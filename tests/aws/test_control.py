"""The /_lab/ control plane through its typed client, and its refusals."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

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

"""The ``/_lab/`` control plane through its typed client: injections, settings, reset, errors."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from datetime import UTC, datetime, timedelta

import pytest

from lab.imds import EventSpec, ImdsControlClient, ImdsControlError, ImdsServer
from tests.imds.conftest import (
    REGION,
    SeededInstance,
    World,
    botocore_region,
    get,
    http,
    run_node,
    token,
)

WHEN = datetime(2026, 11, 22, 15, 0, 0, tzinfo=UTC)


def test_spot_interruption_appears_and_clears(imds: ImdsServer, node: SeededInstance) -> None:
    assert get(imds.url, "latest/meta-data/spot/instance-action").status == 404
    imds.control.inject_spot(node.instance_id, "terminate", WHEN)
    tok = token(imds.url)
    assert "spot/" in get(imds.url, "latest/meta-data/", tok).body.splitlines()
    action = json.loads(get(imds.url, "latest/meta-data/spot/instance-action", tok).body)
    assert action == {"action": "terminate", "time": "2026-11-22T15:00:00Z"}
    assert get(imds.url, "latest/meta-data/spot/termination-time", tok).body == (
        "2026-11-22T15:00:00Z"
    )
    imds.control.clear_spot(node.instance_id)
    assert get(imds.url, "latest/meta-data/spot/instance-action", tok).status == 404


def test_spot_injection_is_per_instance(
    imds: ImdsServer, node: SeededInstance, world: World
) -> None:
    other = run_node(world)
    imds.control.inject_spot(other.instance_id, "stop", WHEN)
    assert get(imds.url, "latest/meta-data/spot/instance-action").status == 404


@pytest.mark.parametrize("kind", ["spot", "events", "rebalance"])
def test_injection_for_unknown_instance_is_refused(
    imds: ImdsServer, node: SeededInstance, kind: str
) -> None:
    unknown = "i-0000000000000dead"
    before = imds.control.state()
    inject = {
        "spot": lambda: imds.control.inject_spot(unknown, "stop", WHEN),
        "events": lambda: imds.control.inject_events(unknown, []),
        "rebalance": lambda: imds.control.inject_rebalance(unknown, WHEN),
    }[kind]
    with pytest.raises(ImdsControlError) as err:
        inject()
    assert err.value.status == 400
    assert f"instance_id={unknown!r}" in str(err.value)
    assert imds.control.state() == before


@pytest.mark.parametrize("address", ["not-an-ip", "10.0.0.300", "fe80::zz"])
def test_source_address_must_be_an_ip(imds: ImdsServer, node: SeededInstance, address: str) -> None:
    before = imds.control.state()
    with pytest.raises(ImdsControlError) as err:
        imds.control.map_source_address(address, node.instance_id)
    assert err.value.status == 400
    assert f"address={address!r}" in str(err.value)
    with pytest.raises(ImdsControlError) as err:
        imds.control.configure({"source_addresses": {address: node.instance_id}})
    assert err.value.status == 400
    assert imds.control.state() == before


def test_head_is_not_allowed_and_unknown_versions_are_not_found(
    imds: ImdsServer, node: SeededInstance
) -> None:
    assert http("HEAD", f"{imds.url}/latest/meta-data/instance-id").status == 405
    assert get(imds.url, "1999-99-99/meta-data/instance-id").status == 404
    assert get(imds.url, "2030-01-01/meta-data/instance-id").status == 404
    assert get(imds.url, "2021-07-15/meta-data/instance-id").body == node.instance_id
    assert get(imds.url, "1.0/meta-data/instance-id").body == node.instance_id


def test_scheduled_events(imds: ImdsServer, node: SeededInstance) -> None:
    imds.control.inject_events(
        node.instance_id,
        [
            EventSpec(
                "system-reboot",
                not_before=WHEN,
                not_after=WHEN + timedelta(hours=1),
                description="scheduled reboot",
                event_id="instance-event-0d59937288b749b32",
            )
        ],
    )
    events = json.loads(get(imds.url, "latest/meta-data/events/maintenance/scheduled").body)
    assert events == [
        {
            "NotBefore": "22 Nov 2026 15:00:00 GMT",
            "Code": "system-reboot",
            "Description": "scheduled reboot",
            "EventId": "instance-event-0d59937288b749b32",
            "State": "active",
            "NotAfter": "22 Nov 2026 16:00:00 GMT",
        }
    ]
    imds.control.clear_events(node.instance_id)
    assert get(imds.url, "latest/meta-data/events/maintenance/scheduled").body == "[]"


def test_rebalance_recommendation(imds: ImdsServer, node: SeededInstance) -> None:
    path = "latest/meta-data/events/recommendations/rebalance"
    assert get(imds.url, path).status == 404
    imds.control.inject_rebalance(node.instance_id, WHEN)
    assert json.loads(get(imds.url, path).body) == {"noticeTime": "2026-11-22T15:00:00Z"}
    imds.control.clear_rebalance(node.instance_id)
    assert get(imds.url, path).status == 404


def test_bad_control_requests_name_field_and_value(imds: ImdsServer, node: SeededInstance) -> None:
    with pytest.raises(ImdsControlError, match=r"action='explode'") as caught:
        imds.control._call(
            "PUT", f"instances/{node.instance_id}/spot", {"action": "explode", "time": "x"}
        )
    assert caught.value.status == 400
    with pytest.raises(ImdsControlError, match=r"time='tomorrow'"):
        imds.control._call(
            "PUT", f"instances/{node.instance_id}/spot", {"action": "stop", "time": "tomorrow"}
        )
    with pytest.raises(ImdsControlError, match=r"events\[0\]\.code='reboot-please'"):
        imds.control._call(
            "PUT",
            f"instances/{node.instance_id}/events",
            {"events": [{"code": "reboot-please", "not_before": "2026-01-01T00:00:00Z"}]},
        )
    with pytest.raises(ImdsControlError, match=r"client_hops=0"):
        imds.control.set_client_hops(0)
    with pytest.raises(ImdsControlError, match=r"imdsv2_floor='sometimes'"):
        imds.control.configure({"imdsv2_floor": "sometimes"})  # type: ignore[typeddict-item]
    with pytest.raises(ImdsControlError, match=r"unknown setting 'colour'"):
        imds.control.configure({"colour": "blue"})  # type: ignore[typeddict-unknown-key]


def test_state_and_reset(imds: ImdsServer, node: SeededInstance) -> None:
    token(imds.url)
    imds.control.inject_spot(node.instance_id, "hibernate", WHEN)
    imds.control.require_imdsv2()
    imds.control.map_source_address("10.9.9.9", node.instance_id)
    state = imds.control.state()
    assert state["tokens"] == 1
    assert state["settings"]["imdsv2_floor"] == "required"
    assert state["settings"]["source_addresses"] == {"10.9.9.9": node.instance_id}
    assert state["injections"][node.instance_id]["spot"]["action"] == "hibernate"
    assert get(imds.url, "latest/meta-data/instance-id").status == 401

    after = imds.control.reset()
    assert after["tokens"] == 0
    assert after["injections"] == {}
    assert after["settings"]["imdsv2_floor"] == "optional"
    assert after["settings"]["source_addresses"] == {}
    assert after["settings"]["default_instance_id"] == node.instance_id
    assert get(imds.url, "latest/meta-data/instance-id").status == 200


def test_healthy_and_stop_is_idempotent(imds: ImdsServer) -> None:
    control = imds.control
    assert control.healthy()
    imds.stop()
    imds.stop()
    assert not control.healthy()


def test_control_plane_needs_the_lab_token_and_metadata_reads_do_not(
    aws_url: str, node: SeededInstance
) -> None:
    """Given the lab's token, ``/_lab/`` refuses anyone without it (nothing changes); the
    metadata itself, IMDSv1 and IMDSv2, stays what real clients (botocore here) read."""
    with ImdsServer(aws_url, instance_id=node.instance_id, token="lab-secret") as imds:
        before = imds.control.state()  # the lab's own client sends the token
        settings = json.dumps({"imdsv2_floor": "required"})
        for path, method in (
            ("/_lab/settings", "PATCH"),
            ("/_lab/reset", "POST"),
            ("/_lab/state", "GET"),
            ("/_lab/healthz", "GET"),
        ):
            for sent in ({}, {"Authorization": "Bearer not-the-lab-token"}):
                request = urllib.request.Request(
                    imds.url + path, data=settings.encode(), method=method, headers=sent
                )
                with pytest.raises(urllib.error.HTTPError) as refused:
                    urllib.request.urlopen(request, timeout=5)
                with refused.value as answer:
                    assert answer.code == 401
                    assert answer.headers["WWW-Authenticate"].startswith("Bearer")
                    assert answer.headers["X-Ccm-Lab-Error"] == "LabTokenRequired"
                    page = answer.read().decode()
                assert "needs the lab&#x27;s token" in page
                assert "state.json" in page
                assert "not-the-lab-token" not in page
        assert imds.control.state() == before, "nothing changed"
        assert get(imds.url, "latest/meta-data/instance-id").body == node.instance_id
        assert botocore_region(imds.url) == REGION
        with pytest.raises(ImdsControlError) as err:
            ImdsControlClient(imds.url).reset()
        assert err.value.status == 401

"""The recording proxy answers first and records after, and no reader of the trail can tell.

Issue 28: the proxy writes a call's answer before it records the call in the trail, so the
caller does not wait for the trail. A reader that has the answer must still find the event:
every read of the trail waits for the events of calls already answered
(:meth:`lab.aws.trail.Trail.expect`). These tests hold the recording back on a barrier and
show the order (answer, then record) and that a read made meanwhile waits and sees the event.
They also check what the answer carries (the upstream's own ``Server`` and ``Date``, no other) and
that a bug while recording is kept without losing the answer or hanging a reader.
"""

from __future__ import annotations

import http.client
import threading
from typing import Any

import pytest

import lab.aws.calls
from lab.aws.proxy import AwsProxyServer
from lab.aws.trail import Trail, TrailEvent


class _WatchedCondition(threading.Condition):
    """A condition that says when a reader starts waiting on it (the test's barrier)."""

    def __init__(self, lock: Any) -> None:
        super().__init__(lock)
        self.waiting = threading.Event()

    def wait_for(self, predicate: Any, timeout: float | None = None) -> Any:
        self.waiting.set()
        return super().wait_for(predicate, timeout)


def _watch(trail: Trail) -> _WatchedCondition:
    watched = _WatchedCondition(trail._lock)
    trail._settled = watched
    return watched


def _event(seq: int) -> TrailEvent:
    return TrailEvent(
        seq=seq,
        time=0.0,
        service="ec2",
        action="DescribeVpcs",
        region="us-east-1",
        params={},
        status=200,
        error_code=None,
        error_message=None,
        latency_ms=1.0,
        user_agent="test",
        source="127.0.0.1:1",
        request_id="r",
    )


def test_a_read_waits_for_an_expected_event_and_then_sees_it() -> None:
    trail = Trail()
    watched = _watch(trail)
    ticket = trail.expect()
    seen: list[list[str]] = []

    def read() -> None:
        seen.append([e.action for e in trail.events()])
        watched.waiting.set()  # (a read that did not wait ends the test's wait too)

    reader = threading.Thread(target=read)
    reader.start()
    watched.waiting.wait()  # the reader is waiting for the expected event
    assert not seen
    trail.append(_event, ticket=ticket)
    reader.join()
    assert seen == [["DescribeVpcs"]]


def test_a_read_waits_only_for_what_was_expected_when_it_began() -> None:
    trail = Trail()
    trail.settle(trail.expect())  # settled without an event (no action, trail off)
    assert trail.events() == []  # nothing left to wait for
    first = trail.expect()
    watched = _watch(trail)
    seen: list[int] = []

    def read() -> None:
        seen.append(len(trail))
        watched.waiting.set()

    reader = threading.Thread(target=read)
    reader.start()
    watched.waiting.wait()
    assert not seen
    later = trail.expect()  # a call answered after the read began: not waited for
    trail.append(_event, ticket=first)
    reader.join()
    assert seen == [1]
    trail.settle(later)


def test_clearing_waits_for_an_owed_event_so_none_lands_after() -> None:
    # a reset forgets the trail: the event of a call answered before it must not appear after
    trail = Trail()
    watched = _watch(trail)
    ticket = trail.expect()
    cleared = threading.Event()

    def clear() -> None:
        trail.clear()
        cleared.set()
        watched.waiting.set()

    clearing = threading.Thread(target=clear)
    clearing.start()
    watched.waiting.wait()
    assert not cleared.is_set()
    trail.append(_event, ticket=ticket)
    clearing.join()
    assert trail.events() == []


def test_the_answer_leaves_before_the_record_and_a_read_meanwhile_sees_the_event(
    proxy: AwsProxyServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = proxy.proxy.calls
    recording, release = threading.Event(), threading.Event()
    record = calls.record

    def held_record(*args: Any, **kwargs: Any) -> None:
        recording.set()
        release.wait()
        record(*args, **kwargs)

    monkeypatch.setattr(calls, "record", held_record)
    watched = _watch(proxy.trail)
    vpcs = proxy.client("ec2").describe_vpcs()["Vpcs"]  # answered while the record is held
    assert vpcs
    assert not release.is_set()
    recording.wait()
    seen: list[list[str]] = []

    def read() -> None:
        seen.append(proxy.trail.actions())
        watched.waiting.set()

    reader = threading.Thread(target=read)
    reader.start()
    watched.waiting.wait()  # the read began while the event was still owed
    assert not seen
    release.set()
    reader.join()
    assert seen == [["DescribeVpcs"]]
    # the control plane's reading (what lab.trail uses) is the same trail's
    assert [e.action for e in proxy.control.trail()] == ["DescribeVpcs"]


def test_a_bug_while_recording_is_kept_and_leaves_the_answer_and_the_readers_alone(
    proxy: AwsProxyServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(action: str, body: bytes) -> dict[str, Any]:
        raise RuntimeError("response ids broke")

    monkeypatch.setattr(lab.aws.calls, "response_ids", broken)
    assert proxy.client("ec2").describe_vpcs()["Vpcs"]  # the caller has its answer
    assert proxy.trail.events() == []  # the read does not hang on the event never made
    assert proxy.take_internal_errors() == ["RuntimeError: response ids broke"]


def test_an_answer_carries_the_upstreams_server_and_date_and_no_other(
    proxy: AwsProxyServer, moto_url: str
) -> None:
    def headers(url: str) -> list[tuple[str, str]]:
        host, port = url.removeprefix("http://").split(":")
        connection = http.client.HTTPConnection(host, int(port), timeout=30)
        body = "Action=DescribeVpcs&Version=2016-11-15"
        auth = (
            "AWS4-HMAC-SHA256 Credential=testing/20261129/us-east-1/ec2/aws4_request, "
            "SignedHeaders=host, Signature=0"
        )
        connection.request(
            "POST",
            "/",
            body,
            {"Content-Type": "application/x-www-form-urlencoded", "Authorization": auth},
        )
        answer = connection.getresponse()
        answer.read()
        connection.close()
        assert answer.status == 200
        return answer.getheaders()

    def named(pairs: list[tuple[str, str]], name: str) -> list[str]:
        return [v for k, v in pairs if k.lower() == name]

    # stock moto writes two Server lines (werkzeug's and its own) and one Date: the proxy
    # passes those on and adds none of its own (it used to add one of each)
    direct, proxied = headers(moto_url), headers(proxy.url)
    assert named(proxied, "server") == named(direct, "server")
    assert len(named(proxied, "date")) == len(named(direct, "date")) == 1


def test_a_percent_encoded_control_path_is_still_the_control_plane(
    proxy: AwsProxyServer,
) -> None:
    # /%5Flab/health is /_lab/health once decoded, as the proxy's WSGI way reads paths: the
    # control plane answers it (here: refused without the lab token), never the upstream
    host, port = proxy.url.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=30)
    connection.request("GET", "/%5Flab/health")
    answer = connection.getresponse()
    body = answer.read()
    connection.close()
    assert answer.status == 401, body

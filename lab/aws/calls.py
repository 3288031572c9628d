"""What every AWS-facing server of the lab does with a call: fault rules before, the trail after.

Role: the lab's moto endpoint (:mod:`lab.aws.app`) and the recording proxy
(:mod:`lab.aws.proxy`) answer AWS calls differently (moto in-process, or an upstream endpoint
over HTTP) but treat them alike around that: the call is offered to the fault rules first
(:meth:`CallRecorder.intercept`: an injected error answers it, injected latency delays it), and
once answered it becomes one trail event (:meth:`CallRecorder.record`). Keeping both in one
class is what makes ``lab.trail``, the fault tasks and the ``/_lab/`` routes
(:mod:`lab.aws.control`) work the same in front of every backend.

Design: the recorder sleeps injected latency itself (outside any lock the caller holds) so a
slowed call does not stall others; the request arrives parsed and redacted
(:func:`lab.aws.protocol.parse_request`), so nothing here sees a secret.

Neighbours: rules from :mod:`lab.aws.faults`, events into :mod:`lab.aws.trail`; the stages
of :mod:`lab.aws.pipeline` call both (``faults`` and ``record``).
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass
from pathlib import Path

from lab.aws.exceptions import InjectedFault
from lab.aws.faults import AwsFaults
from lab.aws.protocol import AwsRequest, WireResponse, read_error
from lab.aws.trail import Trail, TrailEvent, TrailValue, summarize_params

_RESPONSE_IDS: dict[str, tuple[tuple[str, bytes, bytes], ...]] = {
    # action: (summary key, opening tag, closing tag) of ids worth keeping from the response
    "CreateSecurityGroup": (("GroupId", b"<groupId>", b"</groupId>"),),
    "RunInstances": (("InstanceIds", b"<instanceId>", b"</instanceId>"),),
    "CreateVpc": (("VpcId", b"<vpcId>", b"</vpcId>"),),
    "CreateSubnet": (("SubnetId", b"<subnetId>", b"</subnetId>"),),
    "CreateLoadBalancer": (
        ("DNSName", b"<DNSName>", b"</DNSName>"),
        ("LoadBalancerArn", b"<LoadBalancerArn>", b"</LoadBalancerArn>"),
    ),
    "CreateTargetGroup": (("TargetGroupArn", b"<TargetGroupArn>", b"</TargetGroupArn>"),),
}
_RAW_LIMIT = 256
#: what the trail keeps of one readable value or error message (characters), and of a list
#: or of the raw parameters (items); what goes beyond is dropped with a note of its size, so a
#: hostile call (a 10 MiB filter value, 100,000 group ids) costs the trail kilobytes
VALUE_LIMIT = 1024
MAX_ITEMS = 1000


def cap_text(text: str) -> str:
    """``text``, or its first :data:`VALUE_LIMIT` characters and a note of its full length."""
    if len(text) <= VALUE_LIMIT:
        return text
    return f"{text[:VALUE_LIMIT]}… ({len(text)} characters, {VALUE_LIMIT} kept)"


def capped(value: TrailValue) -> TrailValue:
    """A readable trail value with each text capped and a list cut at :data:`MAX_ITEMS`."""
    if isinstance(value, str):
        return cap_text(value)
    kept = [cap_text(item) for item in value[:MAX_ITEMS]]
    if len(value) > MAX_ITEMS:
        kept.append(f"… ({len(value) - MAX_ITEMS} more not kept)")
    return kept


def response_ids(action: str, body: bytes) -> dict[str, TrailValue]:
    """The ids a successful response of ``action`` created or returned (for the trail)."""
    out: dict[str, TrailValue] = {}
    for key, opening, closing in _RESPONSE_IDS.get(action, ()):
        values: list[str] = []
        start = body.find(opening)
        while start != -1:
            end = body.find(closing, start)
            if end == -1:
                break
            values.append(body[start + len(opening) : end].decode("utf-8", errors="replace"))
            start = body.find(opening, end)
        if values:
            out[key] = values if key.endswith("s") else values[0]
    return out


@dataclass(frozen=True)
class Prepared:
    """What the trail keeps of a call's parameters (:meth:`CallRecorder.prepare`)."""

    request: AwsRequest
    params: dict[str, TrailValue]
    raw: dict[str, str]


@dataclass(frozen=True)
class Interception:
    """What the fault rules did to one call before it goes on."""

    injected: bool = False
    """A rule fired (an error, added latency, or both)."""
    answered_by: str = ""
    """``fault:<id>`` of the rule that answered (or of the last latency rule that fired)."""
    error: InjectedFault | None = None
    """The injected error answering the call (the pipeline serializes it); None when the call
    goes on."""


class CallRecorder:
    """The fault rules and the trail of one AWS-facing server (see the module docstring)."""

    def __init__(self, *, trail_path: Path | None = None, trail_enabled: bool = True) -> None:
        self.trail = Trail(sink=trail_path)
        self.faults = AwsFaults()
        self.trail_enabled = trail_enabled

    def intercept(self, request: AwsRequest) -> Interception:
        """Consult the fault rules; sleep the latency they add; the error that answers, if any
        (the pipeline's ``faults`` stage, :mod:`lab.aws.pipeline`, answers with it)."""
        firing = self.faults.decide(
            service=request.service,
            action=request.action,
            params=request.params,
            user_agent=request.user_agent,
        )
        if not firing:
            return Interception()
        answered_by = f"fault:{firing.error.id if firing.error else firing.fired[-1]}"
        if firing.latency_ms:
            time.sleep(firing.latency_ms / 1000.0)
        error = firing.error.injected_error() if firing.error is not None else None
        return Interception(injected=True, answered_by=answered_by, error=error)

    @staticmethod
    def prepare(request: AwsRequest) -> Prepared:
        """The trail's reading of ``request``'s parameters (what :meth:`record` keeps of them),
        for a caller with time to spare before the call is answered."""
        raw = {
            k: (v if len(v) <= _RAW_LIMIT else v[:_RAW_LIMIT] + "…")
            for k, v in itertools.islice(request.params.items(), MAX_ITEMS)
        }
        if len(request.params) > MAX_ITEMS:
            raw["…"] = f"{len(request.params) - MAX_ITEMS} more parameters not kept"
        params = {k: capped(v) for k, v in summarize_params(request.params).items()}
        return Prepared(request, params, raw)

    def record(
        self,
        request: AwsRequest,
        response: WireResponse,
        *,
        started_wall: float,
        started: float,
        injected: bool,
        answered_by: str,
        prepared: Prepared | None = None,
        ticket: int | None = None,
    ) -> None:
        """One trail event for an answered call (none for a request without an action);
        ``prepared``: :meth:`prepare`'s reading, when made ahead for this same request;
        ``ticket``: the trail's :meth:`~lab.aws.trail.Trail.expect` ticket of a call answered
        before it is recorded, settled with the event (the caller settles it otherwise)."""
        if not self.trail_enabled or not request.action:
            return
        code: str | None = None
        message: str | None = None
        if response.status >= 400:
            code, message = read_error(response.body)
        if prepared is None or prepared.request is not request:
            prepared = self.prepare(request)
        params, raw = prepared.params, prepared.raw
        ids = response_ids(request.action, response.body) if response.ok else {}
        request_id = response.header("x-amzn-RequestId") or ""
        latency_ms = round((time.perf_counter() - started) * 1000.0, 3)
        self.trail.append(
            lambda seq: TrailEvent(
                seq=seq,
                time=started_wall,
                service=request.service,
                action=request.action,
                region=request.region,
                params=params,
                status=response.status,
                error_code=code,
                error_message=None if message is None else cap_text(message),
                latency_ms=latency_ms,
                user_agent=request.user_agent,
                source=request.source,
                request_id=request_id,
                injected=injected,
                answered_by=answered_by,
                response=ids,
                raw_params=raw,
            ),
            ticket=ticket,
        )

    def clear(self) -> None:
        """Forget every event and rule."""
        self.trail.clear()
        self.faults.clear()

    def close(self) -> None:
        self.trail.close()

"""Typed Python client for the metadata service's ``/_lab/`` control plane.

Role: what tests, e2e scenarios and ``tasks.py`` use to steer a running IMDS (in-process or a
child process): map callers to instances, raise the IMDSv2 floor, put the caller behind more
hops, inject spot interruptions / scheduled events / rebalance recommendations, reset.

Plain ``urllib`` on purpose: no client library between the lab and its own endpoint, and no
boto3 outside the packages allowed to import it. Errors come back as ``ImdsControlError`` with
the server's status and message.

Neighbours: ``control`` (the server side of every call here).
"""

from __future__ import annotations

import html
import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypedDict

from lab.component.bearer import auth_headers
from lab.imds.exceptions import ImdsControlError
from lab.imds.models import EventCode, EventState, HttpTokens, SpotActionName, TagExposure


class SettingsPayload(TypedDict, total=False):
    default_instance_id: str | None
    imdsv2_floor: HttpTokens
    client_hops: int
    metadata_tags: TagExposure
    trust_instance_header: bool
    iam_role: str | None
    source_addresses: dict[str, str]


class StatePayload(TypedDict):
    settings: dict[str, Any]
    tokens: int
    injections: dict[str, Any]


@dataclass(frozen=True)
class EventSpec:
    """A scheduled maintenance event to inject."""

    code: EventCode
    not_before: datetime
    not_after: datetime | None = None
    description: str = "scheduled maintenance"
    state: EventState = "active"
    event_id: str | None = None

    def to_json(self) -> dict[str, str]:
        out = {
            "code": self.code,
            "not_before": _iso(self.not_before),
            "description": self.description,
            "state": self.state,
        }
        if self.not_after is not None:
            out["not_after"] = _iso(self.not_after)
        if self.event_id is not None:
            out["event_id"] = self.event_id
        return out


def _iso(moment: datetime) -> str:
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


class ImdsControlClient:
    """Client of ``<url>/_lab/``."""

    def __init__(self, url: str, *, token: str | None = None, timeout: float = 5.0) -> None:
        self.url = url.rstrip("/")
        self.timeout = timeout
        self._token = token

    def _call(self, method: str, path: str, body: Mapping[str, Any] | None = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            f"{self.url}/_lab/{path}",
            data=data,
            method=method,
            headers={"Content-Type": "application/json", **auth_headers(self._token)},
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as reply:
                raw = reply.read()
        except urllib.error.HTTPError as exc:
            text = exc.read().decode("utf-8", "replace")
            raise ImdsControlError(exc.code, _html_message(text)) from None
        return json.loads(raw) if raw and raw[:1] in (b"{", b"[") else raw.decode()

    # -- reads -------------------------------------------------------------------------------

    def healthy(self) -> bool:
        try:
            return bool(self._call("GET", "healthz") == "ok")
        except (ImdsControlError, OSError):
            return False

    def state(self) -> StatePayload:
        result: StatePayload = self._call("GET", "state")
        return result

    # -- settings ----------------------------------------------------------------------------

    def configure(self, settings: SettingsPayload) -> StatePayload:
        result: StatePayload = self._call("PATCH", "settings", dict(settings))
        return result

    def set_default_instance(self, instance_id: str | None) -> StatePayload:
        return self.configure({"default_instance_id": instance_id})

    def require_imdsv2(self, required: bool = True) -> StatePayload:
        return self.configure({"imdsv2_floor": "required" if required else "optional"})

    def set_client_hops(self, hops: int) -> StatePayload:
        """1 = caller on the host; 2 = inside a container (token withheld at hop limit 1)."""
        return self.configure({"client_hops": hops})

    def map_source_address(self, address: str, instance_id: str | None) -> StatePayload:
        quoted = urllib.parse.quote(address, safe="")
        if instance_id is None:
            result: StatePayload = self._call("DELETE", f"source-addresses/{quoted}")
        else:
            result = self._call("PUT", f"source-addresses/{quoted}", {"instance_id": instance_id})
        return result

    def reset(self) -> StatePayload:
        result: StatePayload = self._call("POST", "reset")
        return result

    # -- injections --------------------------------------------------------------------------

    def inject_spot(self, instance_id: str, action: SpotActionName, at: datetime) -> StatePayload:
        result: StatePayload = self._call(
            "PUT", f"instances/{instance_id}/spot", {"action": action, "time": _iso(at)}
        )
        return result

    def clear_spot(self, instance_id: str) -> StatePayload:
        result: StatePayload = self._call("DELETE", f"instances/{instance_id}/spot")
        return result

    def inject_events(self, instance_id: str, events: Sequence[EventSpec]) -> StatePayload:
        result: StatePayload = self._call(
            "PUT", f"instances/{instance_id}/events", {"events": [e.to_json() for e in events]}
        )
        return result

    def clear_events(self, instance_id: str) -> StatePayload:
        result: StatePayload = self._call("DELETE", f"instances/{instance_id}/events")
        return result

    def inject_rebalance(self, instance_id: str, at: datetime) -> StatePayload:
        result: StatePayload = self._call(
            "PUT", f"instances/{instance_id}/rebalance", {"notice_time": _iso(at)}
        )
        return result

    def clear_rebalance(self, instance_id: str) -> StatePayload:
        result: StatePayload = self._call("DELETE", f"instances/{instance_id}/rebalance")
        return result


def _html_message(text: str) -> str:
    """The ``<p>`` of the server's error page, else the raw text."""
    start, end = text.find("<p>"), text.find("</p>")
    return html.unescape(text[start + 3 : end]) if 0 <= start < end else text.strip()

"""The lab daemon's control API, both sides: its route table, its messages, a typed client.

Role: ``lab.daemon`` serves a small JSON API on loopback for what only its process can do
(the kubelet stand-in's heartbeats, the traffic probe next to the data plane). This module is
that API's contract, shared by both ends, as the other control planes have theirs
(``lab.kube.control_client``, ``lab.imds.control_client``, ``lab.aws.control_client``):

* :data:`ROUTES`: each :class:`Route` is a method, a path and the request message it takes;
  the daemon binds one handler per route, the client has one method per route;
* request and answer messages as frozen dataclasses; a request's ``from_json`` is the one
  place a body is judged, so a wrong type is :class:`BadRequest` (the daemon answers 400 with
  ``{"error": ...}``), never a dropped connection;
* :class:`DaemonClient`: plain ``urllib`` with the lab's bearer token; a refusal is a
  :class:`~lab.state.LabError` carrying the daemon's one-line message, an unreachable daemon one
  that says so.

Neighbours: ``lab.daemon`` (the server side), ``lab.labview`` (``lab.traffic``) and
``lab.frontdoor.nodes`` (``lab.nodes.stop-heartbeat``). This module imports only plumbing.
"""

from __future__ import annotations

import dataclasses
import json
import re
import urllib.error
import urllib.request
from collections.abc import Mapping
from typing import Any, Self

from lab.component.bearer import auth_headers, refusal_message
from lab.state import LabError, LabState


class BadRequest(ValueError):
    """A request body the route does not take; the daemon answers 400 with this message."""


def _field(data: Mapping[str, Any], key: str, kind: type, *, default: Any = None) -> Any:
    """``data[key]`` of type ``kind`` (None or absent: ``default``), else :class:`BadRequest`."""
    value = data.get(key)
    if value is None:
        return default
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
        shown = repr(value)
        shown = shown if len(shown) <= 60 else f"{shown[:60]}... ({len(shown)} characters)"
        raise BadRequest(f"{key!r} must be a {kind.__name__}, got {shown}")
    return value


def _object(raw: bytes) -> Mapping[str, Any]:
    try:
        data = json.loads(raw or b"{}")
    except ValueError as exc:
        raise BadRequest(f"the body is not JSON ({exc})") from None
    if not isinstance(data, dict):
        raise BadRequest("give a JSON object")
    return data


# --- messages ---------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Empty:
    """A route that takes no body."""

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Self:
        return cls()


@dataclasses.dataclass(frozen=True)
class NodeRequest:
    """A kubelet stand-in action on one node."""

    node: str

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Self:
        node = _field(data, "node", str)
        if not node:
            raise BadRequest("give a JSON object with a 'node' string")
        return cls(node)


@dataclasses.dataclass(frozen=True)
class HeartbeatAnswer:
    node: str
    #: "stop" or "resume"
    heartbeat: str


@dataclasses.dataclass(frozen=True)
class TrafficRequest:
    """``lab.traffic``: where ``requests`` requests to ``service`` go (``source``: a CIDR or
    a node name; ``port``: the Service port, default its first; same ``seed``, same answer)."""

    service: str
    requests: int = 100
    source: str | None = None
    port: int | None = None
    seed: int = 0

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Self:
        service = _field(data, "service", str)
        if service is None:
            raise BadRequest("give a JSON object with a 'service' string")
        if not _SERVICE_KEY.match(service):
            raise BadRequest(
                f"'service' must be NAME or NAMESPACE/NAME (DNS labels of at most 63 "
                f"characters), got {_shown(service)}"
            )
        source = _field(data, "source", str)
        if source is not None and not 1 <= len(source) <= 253:
            raise BadRequest(f"'source' must be a CIDR or a node name, got {_shown(source)}")
        return cls(
            service=service,
            requests=_bounded(data, "requests", 1, MAX_TRAFFIC_REQUESTS, default=100),
            source=source,
            port=_bounded(data, "port", 1, 65535, default=None),
            seed=_bounded(data, "seed", -(2**63), 2**63 - 1, default=0),
        )


#: what ``lab.traffic`` models at most per call (``lab.traffic.report.MAX_REQUESTS``)
MAX_TRAFFIC_REQUESTS = 100_000
_SERVICE_KEY = re.compile(
    r"^(?:[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?/)?[a-z]([-a-z0-9]{0,61}[a-z0-9])?\Z"
)


def _shown(value: str) -> str:
    """A value for an error message: quoted, cut after 60 characters (with its length)."""
    return repr(value) if len(value) <= 60 else f"{value[:60]!r}... ({len(value)} characters)"


def _bounded(data: Mapping[str, Any], key: str, low: int, high: int, *, default: Any) -> Any:
    """An integer ``data[key]`` in ``low..high`` (None or absent: ``default``)."""
    value = _field(data, key, int, default=default)
    if value is not None and not low <= value <= high:
        raise BadRequest(f"{key!r} must be {low}..{high}, got {value!r}")
    return value


@dataclasses.dataclass(frozen=True)
class TrafficAnswer:
    """The probe's report (``lab.traffic.TrafficReport.to_json``) and, when the lab was
    modelled without settling, why."""

    report: dict[str, Any]
    note: str = ""

    def to_json(self) -> dict[str, Any]:
        return {**self.report, **({"note": self.note} if self.note else {})}


# --- routes -----------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Route:
    method: str
    path: str
    request: type[Empty] | type[NodeRequest] | type[TrafficRequest]


HEALTHZ = Route("GET", "/healthz", Empty)
STOP_HEARTBEAT = Route("POST", "/kubelet/stop-heartbeat", NodeRequest)
RESUME_HEARTBEAT = Route("POST", "/kubelet/resume-heartbeat", NodeRequest)
TRAFFIC = Route("POST", "/traffic", TrafficRequest)
ROUTES = (HEALTHZ, STOP_HEARTBEAT, RESUME_HEARTBEAT, TRAFFIC)


def find_route(method: str, path: str) -> Route | None:
    return next((r for r in ROUTES if (r.method, r.path) == (method, path)), None)


def parse_request(route: Route, raw: bytes) -> Empty | NodeRequest | TrafficRequest:
    """The route's request message from a body, or :class:`BadRequest`."""
    return route.request.from_json(_object(raw))


# --- the client -------------------------------------------------------------------------------


class DaemonClient:
    """Client of a lab daemon's control API (the URL and token are in ``state.json``)."""

    def __init__(self, url: str, *, token: str | None = None, timeout: float = 5.0) -> None:
        self.url = url.rstrip("/")
        self.timeout = timeout
        self._token = token

    @classmethod
    def of(cls, state: LabState, *, timeout: float = 5.0) -> DaemonClient:
        """The client of ``state``'s daemon (the caller checked it runs)."""
        if state.daemon is None:
            raise LabError(f"lab {state.name!r} has no daemon; `invoke lab.up` starts one")
        return cls(state.daemon.control_url, token=state.token, timeout=timeout)

    def __repr__(self) -> str:
        return f"DaemonClient({self.url!r})"

    def _call(self, route: Route, body: Any = None, *, timeout: float | None = None) -> Any:
        data = None if body is None else json.dumps(dataclasses.asdict(body)).encode()
        request = urllib.request.Request(
            f"{self.url}{route.path}",
            data=data,
            method=route.method,
            headers={"Content-Type": "application/json", **auth_headers(self._token)},
        )
        try:
            with urllib.request.urlopen(request, timeout=timeout or self.timeout) as answer:
                return json.loads(answer.read())
        except urllib.error.HTTPError as exc:
            message, text = refusal_message(exc, "error")
            if message is None:
                message = f"HTTP {exc.code}: {text.strip()[:200]}"
            raise LabError(message) from None
        except OSError as exc:
            reason = getattr(exc, "reason", exc)
            raise LabError(
                f"the lab daemon does not answer ({reason}); see `invoke lab.status`"
            ) from None

    def healthy(self) -> bool:
        try:
            return bool(self._call(HEALTHZ).get("ok"))
        except LabError:
            return False

    def stop_heartbeat(self, node: str) -> HeartbeatAnswer:
        return HeartbeatAnswer(**self._call(STOP_HEARTBEAT, NodeRequest(node)))

    def resume_heartbeat(self, node: str) -> HeartbeatAnswer:
        return HeartbeatAnswer(**self._call(RESUME_HEARTBEAT, NodeRequest(node)))

    def traffic(self, request: TrafficRequest, *, timeout: float = 120.0) -> TrafficAnswer:
        doc = dict(self._call(TRAFFIC, request, timeout=timeout))
        note = str(doc.pop("note", ""))
        return TrafficAnswer(doc, note)

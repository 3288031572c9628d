"""Wire-level operations of the metadata service: parse what a request carries, apply the
rules in ``models``, return a ``Reply``.

Role: ``ImdsService`` owns the service's state (settings, token store, injections, the EC2
reader) and exposes one method per route. It never touches sockets or WSGI; ``routes`` maps
URLs to these methods and serializes ``ImdsError`` in one place.

Caller -> instance mapping, in order: the ``X-Ccm-Lab-Instance-Id`` header (tests; can be
switched off), the caller's source address (``Settings.source_addresses``), then the default
instance. No match is a 503 naming what was tried.

Neighbours: ``models`` (rules and values), ``ec2`` (the reader), ``routes`` (dispatch).
"""

from __future__ import annotations

import ipaddress
import json
import logging
import re
import threading
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, cast, get_args

from lab.imds.ec2 import Ec2Reader
from lab.imds.exceptions import (
    Forbidden,
    InstanceUnavailable,
    InvalidControlRequest,
    NotFound,
    Unauthorized,
)
from lab.imds.models import (
    SERVING_STATES,
    EventCode,
    EventState,
    HttpTokens,
    Injections,
    InstanceID,
    InstanceInjections,
    InstanceView,
    ScheduledEvent,
    Settings,
    SpotAction,
    SpotActionName,
    TagExposure,
    TokenStore,
    build_metadata_tree,
    dynamic_tree,
    effective_http_tokens,
    format_imds_time,
    lookup,
    parse_time,
    parse_token_ttl,
    render_listing,
)

log = logging.getLogger(__name__)

INSTANCE_HEADER = "X-Ccm-Lab-Instance-Id"
HOPS_HEADER = "X-Ccm-Lab-Client-Hops"
TOKEN_HEADER = "X-aws-ec2-metadata-token"
TTL_HEADER = "X-aws-ec2-metadata-token-ttl-seconds"
#: The metadata versions an instance serves (the EC2 user guide's list, "Get the available
#: versions of the instance metadata", plus the later dates instances answer); any other
#: first path segment is a 404 as on a real instance. All of them alias ``latest`` here.
KNOWN_VERSIONS = (
    "1.0",
    "2007-01-19",
    "2007-03-01",
    "2007-08-29",
    "2007-10-10",
    "2007-12-15",
    "2008-02-01",
    "2008-09-01",
    "2009-04-04",
    "2011-01-01",
    "2011-05-01",
    "2012-01-12",
    "2014-02-25",
    "2014-11-05",
    "2015-10-20",
    "2016-04-19",
    "2016-06-30",
    "2016-09-02",
    "2018-03-28",
    "2018-08-17",
    "2018-09-24",
    "2019-10-01",
    "2020-10-27",
    "2021-01-03",
    "2021-03-23",
    "2021-07-15",
    "2022-09-24",
    "latest",
)
VERSION = re.compile("^(" + "|".join(re.escape(v) for v in KNOWN_VERSIONS) + r")\Z")


@dataclass(frozen=True)
class Caller:
    """Who is asking: source address plus the lab's optional test headers."""

    remote_addr: str
    instance_header: str | None = None
    hops_header: str | None = None
    forwarded_for: str | None = None


@dataclass(frozen=True)
class Reply:
    status: int
    body: bytes
    content_type: str = "text/plain"
    headers: Mapping[str, str] = field(default_factory=dict)
    withheld: bool = False  # hop-limit emulation: send nothing, drop the connection


def _text(body: str, *, headers: Mapping[str, str] | None = None) -> Reply:
    return Reply(200, body.encode("utf-8"), headers=dict(headers or {}))


def _json_reply(payload: object, status: int = 200) -> Reply:
    return Reply(status, json.dumps(payload, indent=2).encode(), content_type="application/json")


class ImdsService:
    """The metadata service's state and its operations."""

    def __init__(
        self,
        reader: Ec2Reader,
        settings: Settings,
        *,
        tokens: TokenStore | None = None,
        wall_clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.reader = reader
        self.tokens = tokens if tokens is not None else TokenStore()
        self.injections = Injections()
        self._initial = settings
        self._settings = settings
        self._wall_clock = wall_clock
        self._lock = threading.Lock()

    @property
    def settings(self) -> Settings:
        with self._lock:
            return self._settings

    # -- caller -> instance ------------------------------------------------------------------

    def resolve(self, caller: Caller) -> InstanceID:
        settings = self.settings
        if caller.instance_header and settings.trust_instance_header:
            return InstanceID(caller.instance_header)
        mapped = settings.source_addresses.get(caller.remote_addr)
        if mapped is not None:
            return mapped
        if settings.default_instance_id is not None:
            return settings.default_instance_id
        raise InstanceUnavailable(
            f"no instance for caller {caller.remote_addr}: no {INSTANCE_HEADER} header, "
            "no source-address mapping and no default instance"
        )

    def _serving_view(self, instance_id: InstanceID) -> InstanceView:
        view = self.reader.instance(instance_id)
        if view is None:
            raise InstanceUnavailable(f"instance {instance_id} does not exist in EC2")
        if view.state not in SERVING_STATES:
            raise InstanceUnavailable(
                f"instance {instance_id} is {view.state}; it has no running metadata service"
            )
        return view

    # -- data plane --------------------------------------------------------------------------

    def put_token(self, caller: Caller, ttl_header: str | None) -> Reply:
        if caller.forwarded_for is not None:
            raise Forbidden("token requests carrying X-Forwarded-For are refused")
        ttl = parse_token_ttl(ttl_header)
        instance_id = self.resolve(caller)
        view = self._serving_view(instance_id)
        hops = self._client_hops(caller)
        if hops > view.hop_limit:
            log.info(
                "withholding token response for %s: caller %d hops away, hop limit %d",
                instance_id,
                hops,
                view.hop_limit,
            )
            return Reply(200, b"", withheld=True)
        token = self.tokens.mint(instance_id, ttl)
        return _text(token, headers={TTL_HEADER: str(ttl)})

    def get(self, caller: Caller, path: str, token: str | None) -> Reply:
        parts = [p for p in path.split("/") if p]
        if not parts:
            return _text("latest")
        if not VERSION.match(parts[0]):
            raise NotFound(f"/{path}")
        instance_id = self.resolve(caller)
        view = self._serving_view(instance_id)
        headers = self._authorize(view, token)
        category, rest = (parts[1], parts[2:]) if len(parts) > 1 else ("", [])
        if category == "":
            entries = ["dynamic", "meta-data"]
            if self.reader.user_data(instance_id) is not None:
                entries.append("user-data")
            return _text("\n".join(entries), headers=headers)
        if category == "user-data" and not rest:
            data = self.reader.user_data(instance_id)
            if data is None:
                raise NotFound(f"/{path}")
            return Reply(200, data, content_type="application/octet-stream", headers=headers)
        if category == "meta-data":
            tree = build_metadata_tree(
                view, self.injections.get(instance_id), self.settings, now=self._wall_clock()
            )
        elif category == "dynamic":
            tree = dynamic_tree(view)
        else:
            raise NotFound(f"/{path}")
        node = lookup(tree, rest)
        if node is None:
            raise NotFound(f"/{path}")
        body = render_listing(node) if isinstance(node, dict) else node
        return _text(body, headers=headers)

    def _authorize(self, view: InstanceView, token: str | None) -> dict[str, str]:
        if token is not None:
            remaining = self.tokens.remaining(token, view.instance_id)
            if remaining is None:
                raise Unauthorized("the metadata token is invalid, expired or for another instance")
            return {TTL_HEADER: str(remaining)}
        if effective_http_tokens(view, self.settings) == "required":
            raise Unauthorized(f"instance {view.instance_id} requires IMDSv2 (a session token)")
        return {}

    def _client_hops(self, caller: Caller) -> int:
        if caller.hops_header is not None:
            return _int_field(HOPS_HEADER, caller.hops_header, minimum=1)
        return self.settings.client_hops

    # -- control plane -----------------------------------------------------------------------

    def state(self) -> Reply:
        settings = self.settings
        return _json_reply(
            {
                "settings": _settings_json(settings),
                "tokens": len(self.tokens),
                "injections": {
                    iid: _injections_json(inj) for iid, inj in self.injections.snapshot().items()
                },
            }
        )

    def update_settings(self, body: Mapping[str, Any]) -> Reply:
        changes: dict[str, Any] = {}
        for key, value in body.items():
            if key == "default_instance_id":
                changes[key] = None if value is None else _instance_id_field(key, value)
            elif key == "imdsv2_floor":
                changes[key] = _choice(key, value, get_args(HttpTokens))
            elif key == "metadata_tags":
                changes[key] = _choice(key, value, get_args(TagExposure))
            elif key == "client_hops":
                changes[key] = _hops_field(key, value)
            elif key == "trust_instance_header":
                if not isinstance(value, bool):
                    raise InvalidControlRequest(f"{key}={value!r}: expected true or false")
                changes[key] = value
            elif key == "iam_role":
                changes[key] = None if value is None else _str_field(key, value)
            elif key == "source_addresses":
                if not isinstance(value, dict):
                    raise InvalidControlRequest(f"{key}={value!r}: expected an object ip -> id")
                changes[key] = {
                    _ip_field(key, k): InstanceID(_str_field(f"{key}.{k}", v))
                    for k, v in value.items()
                }
            else:
                raise InvalidControlRequest(f"unknown setting {key!r}")
        with self._lock:
            self._settings = replace(self._settings, **changes)
        return self.state()

    def map_source_address(self, address: str, instance_id: str | None) -> Reply:
        _ip_field("address", address)
        with self._lock:
            mapping = dict(self._settings.source_addresses)
            if instance_id is None:
                mapping.pop(address, None)
            else:
                mapping[address] = InstanceID(instance_id)
            self._settings = replace(self._settings, source_addresses=mapping)
        return self.state()

    def set_spot(self, instance_id: str, body: Mapping[str, Any] | None) -> Reply:
        if body is not None:
            self._known_instance(instance_id)
        spot = None
        if body is not None:
            action = cast(
                SpotActionName, _choice("action", body.get("action"), get_args(SpotActionName))
            )
            spot = SpotAction(action=action, time=parse_time(body.get("time"), "time"))
        self.injections.update(InstanceID(instance_id), lambda cur: replace(cur, spot=spot))
        return self.state()

    def set_events(self, instance_id: str, body: Mapping[str, Any] | None) -> Reply:
        if body is not None:
            self._known_instance(instance_id)
        events: list[ScheduledEvent] = []
        raw_events = [] if body is None else body.get("events")
        if not isinstance(raw_events, list):
            raise InvalidControlRequest(f"events={raw_events!r}: expected a list")
        for index, raw in enumerate(raw_events):
            if not isinstance(raw, dict):
                raise InvalidControlRequest(f"events[{index}]={raw!r}: expected an object")
            events.append(_event_from_json(index, raw))
        self.injections.update(
            InstanceID(instance_id), lambda cur: replace(cur, events=tuple(events))
        )
        return self.state()

    def set_rebalance(self, instance_id: str, body: Mapping[str, Any] | None) -> Reply:
        if body is not None:
            self._known_instance(instance_id)
        notice = None if body is None else parse_time(body.get("notice_time"), "notice_time")
        self.injections.update(InstanceID(instance_id), lambda cur: replace(cur, rebalance=notice))
        return self.state()

    def _known_instance(self, instance_id: str) -> None:
        """Refuse (400) an injection for an instance EC2 does not know."""
        if self.reader.instance(InstanceID(instance_id)) is None:
            raise InvalidControlRequest(
                f"instance_id={instance_id!r}: EC2 does not know this instance"
            )

    def reset(self) -> Reply:
        """Back to the settings the server started with; no tokens, no injections."""
        with self._lock:
            self._settings = self._initial
        self.tokens.clear()
        self.injections.clear()
        invalidate = getattr(self.reader, "invalidate", None)
        if callable(invalidate):
            invalidate()
        return self.state()


def _event_from_json(index: int, raw: Mapping[str, Any]) -> ScheduledEvent:
    prefix = f"events[{index}]"
    code = cast(EventCode, _choice(f"{prefix}.code", raw.get("code"), get_args(EventCode)))
    state = cast(
        EventState, _choice(f"{prefix}.state", raw.get("state", "active"), get_args(EventState))
    )
    not_after = raw.get("not_after")
    deadline = raw.get("not_before_deadline")
    return ScheduledEvent(
        code=code,
        not_before=parse_time(raw.get("not_before"), f"{prefix}.not_before"),
        not_after=None if not_after is None else parse_time(not_after, f"{prefix}.not_after"),
        description=_str_field(
            f"{prefix}.description", raw.get("description", "scheduled maintenance")
        ),
        event_id=_str_field(
            f"{prefix}.event_id", raw.get("event_id", f"instance-event-{index:017x}")
        ),
        state=state,
        not_before_deadline=None
        if deadline is None
        else parse_time(deadline, f"{prefix}.not_before_deadline"),
    )


def _choice(name: str, value: object, allowed: tuple[Any, ...]) -> str:
    if value not in allowed:
        raise InvalidControlRequest(f"{name}={value!r}: expected one of {', '.join(allowed)}")
    return cast(str, value)


def _str_field(name: str, value: object) -> str:
    if not isinstance(value, str) or not value:
        raise InvalidControlRequest(f"{name}={value!r}: expected a non-empty string")
    return value


#: an EC2 instance id: ``i-`` and 8 (older) or 17 lowercase hex digits
_INSTANCE_ID = re.compile(r"^i-(?:[0-9a-f]{8}|[0-9a-f]{17})\Z")
#: the most hops a caller may sit behind (``HttpPutResponseHopLimit`` is 1..64)
MAX_CLIENT_HOPS = 64


def _instance_id_field(name: str, value: object) -> InstanceID:
    """An instance id setting: it becomes part of every metadata path, so only an id."""
    if not isinstance(value, str) or not _INSTANCE_ID.match(value):
        raise InvalidControlRequest(
            f"{name}={value!r}: expected an EC2 instance id (i- and 8 or 17 hex digits)"
        )
    return InstanceID(value)


def _hops_field(name: str, value: object) -> int:
    """A hop count: a JSON integer 1..64, as the hop limit the PUT token response takes."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidControlRequest(f"{name}={value!r}: expected an integer 1..{MAX_CLIENT_HOPS}")
    if not 1 <= value <= MAX_CLIENT_HOPS:
        raise InvalidControlRequest(f"{name}={value!r}: expected an integer 1..{MAX_CLIENT_HOPS}")
    return value


def _int_field(name: str, value: object, *, minimum: int) -> int:
    try:
        number = int(cast(Any, value))
    except (TypeError, ValueError):
        raise InvalidControlRequest(f"{name}={value!r}: expected an integer") from None
    if isinstance(value, bool) or number < minimum:
        raise InvalidControlRequest(f"{name}={value!r}: expected an integer >= {minimum}")
    return number


def _settings_json(settings: Settings) -> dict[str, Any]:
    out = asdict(settings)
    out["source_addresses"] = dict(settings.source_addresses)
    return out


def _ip_field(name: str, value: object) -> str:
    """``value`` when it is an IPv4/IPv6 address; else a 400 naming ``name`` and the value."""
    try:
        ipaddress.ip_address(str(value))
    except ValueError:
        raise InvalidControlRequest(f"{name}={value!r}: expected an IPv4 or IPv6 address") from None
    return str(value)


def _injections_json(inj: InstanceInjections) -> dict[str, Any]:
    return {
        "spot": None
        if inj.spot is None
        else {"action": inj.spot.action, "time": format_imds_time(inj.spot.time)},
        "events": [
            {"code": e.code, "state": e.state, "not_before": format_imds_time(e.not_before)}
            for e in inj.events
        ],
        "rebalance": None if inj.rebalance is None else format_imds_time(inj.rebalance),
    }

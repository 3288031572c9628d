"""The call trail: the lab's CloudTrail of every AWS request and its response.

Role: each AWS call that reaches the endpoint becomes one :class:`TrailEvent` (time, service,
action, readable key parameters, HTTP status, AWS error code and message, latency, caller, and
whether a fault or a fidelity rule answered it instead of moto). Scenario tests assert on it
("``RevokeSecurityGroupIngress`` targeted exactly these groups", "``DeleteSecurityGroup`` failed
with ``DependencyViolation`` three times"); ``invoke lab.trail`` renders it with
:func:`render_trail`; ``--trail PATH`` streams it as JSON lines.

Design: :class:`Trail` is an append-only, lock-protected, bounded list (oldest events drop
first) with an optional JSON-lines sink; queries filter in memory. Parameters are summarized
into a small readable dict (ids, names, ``IpPermissions`` flattened to ``"tcp 80-80 from
sg-1,10.0.0.0/8"``) so a trail reads like the AWS console, while the raw flat parameters stay
available in ``raw_params``.

Neighbours: filled by the pipeline's ``record`` stage (:mod:`lab.aws.pipeline`); served by
:mod:`lab.aws.control`; read remotely by :mod:`lab.aws.control_client`.
"""

from __future__ import annotations

import json
import re
import threading
from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

TrailValue = str | list[str]


@dataclass(frozen=True)
class TrailEvent:
    """One AWS call as the endpoint saw it."""

    seq: int
    time: float
    """Wall-clock start of the call (epoch seconds)."""
    service: str
    action: str
    region: str
    params: dict[str, TrailValue]
    """Readable key parameters (see module docstring)."""
    status: int
    error_code: str | None
    error_message: str | None
    latency_ms: float
    user_agent: str
    source: str
    request_id: str
    injected: bool = False
    """True when a fault rule produced the response (error or added latency)."""
    answered_by: str = "moto"
    """``moto``, ``fidelity:<rule>`` or ``fault:<id>``."""
    response: dict[str, TrailValue] = field(default_factory=dict)
    """Ids the response created or returned (``GroupId``, ``InstanceIds``, ``DNSName``...)."""
    raw_params: dict[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.status < 400

    @property
    def iso_time(self) -> str:
        return datetime.fromtimestamp(self.time, tz=UTC).isoformat(timespec="milliseconds")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TrailEvent:
        known = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in data.items() if k in known})


# --- parameter summaries --------------------------------------------------------------------

_SCALAR_KEYS = (
    "GroupId",
    "GroupName",
    "VpcId",
    "LoadBalancerName",
    "LoadBalancerArn",
    "TargetGroupArn",
    "InstanceId",
    "ImageId",
    "InstanceType",
    "SubnetId",
    "Name",
    "Type",
    "Scheme",
    "Description",
    "GroupDescription",
    "HealthCheck.Target",
)
_LIST_KEYS = {
    # summary key: query-protocol prefixes (EC2 style first, then ELB ``.member`` style)
    "GroupIds": ("GroupId", "SecurityGroupId"),
    "GroupNames": ("GroupName",),
    "InstanceIds": ("InstanceId",),
    "SecurityGroups": ("SecurityGroups.member", "SecurityGroupId"),
    "Subnets": ("Subnets.member",),
    "LoadBalancerNames": ("LoadBalancerNames.member",),
    "Names": ("Names.member",),
    "LoadBalancerArns": ("LoadBalancerArns.member",),
    "ResourceIds": ("ResourceId",),
}
_LISTED_PREFIXES = frozenset(p for prefixes in _LIST_KEYS.values() for p in prefixes)
_PERM_RE = re.compile(r"^(IpPermissions)\.(\d+)\.(.+)\Z")
_MEMBER_RE = re.compile(r"^(\w+)\.member\.(\d+)\.(\w+)\Z")
_FILTER_RE = re.compile(r"^Filter\.(\d+)\.(Name|Value\.\d+)\Z")


def _permissions(params: Mapping[str, str]) -> list[str]:
    """``IpPermissions.N.*`` as readable rules, e.g. ``"tcp 80-80 from sg-1,0.0.0.0/0"``."""
    perms: dict[int, dict[str, str]] = {}
    for key, value in params.items():
        match = _PERM_RE.match(key)
        if match is not None:
            perms.setdefault(int(match.group(2)), {})[match.group(3)] = value
    rules: list[str] = []
    for index in sorted(perms):
        fields = perms[index]
        proto = fields.get("IpProtocol", "?")
        proto = "all" if proto == "-1" else proto
        ports = ""
        if "FromPort" in fields or "ToPort" in fields:
            ports = f" {fields.get('FromPort', '')}-{fields.get('ToPort', '')}"
        sources = [
            value
            for key, value in sorted(fields.items())
            if key.endswith(("GroupId", "GroupName", "CidrIp", "CidrIpv6", "PrefixListId"))
        ]
        rules.append(f"{proto}{ports} from {','.join(sources) or '-'}")
    return rules


def summarize_params(params: Mapping[str, str]) -> dict[str, TrailValue]:
    """The readable key parameters of a call (see module docstring)."""
    out: dict[str, TrailValue] = {}
    for key in _SCALAR_KEYS:
        if key in params:
            out[key] = params[key]
    # the lists: a key ``<prefix>.<digits>`` (what ``indexed`` reads), in one pass
    listed: dict[str, list[tuple[int, str]]] = {}
    for key, value in params.items():
        prefix, _, rest = key.rpartition(".")
        if prefix in _LISTED_PREFIXES and rest.isdigit():
            listed.setdefault(prefix, []).append((int(rest), value))
    if listed:
        for name, prefixes in _LIST_KEYS.items():
            values = [v for p in prefixes for _, v in sorted(listed.get(p, ()))]
            if values:
                out[name] = values
    # ELB structured members: Instances.member.1.InstanceId, Listeners.member.1.InstancePort
    members: dict[str, dict[int, dict[str, str]]] = {}
    filters: dict[int, dict[str, str]] = {}
    for key, value in params.items():
        if (match := _MEMBER_RE.match(key)) is not None:
            members.setdefault(match.group(1), {}).setdefault(int(match.group(2)), {})[
                match.group(3)
            ] = value
        elif (fmatch := _FILTER_RE.match(key)) is not None:
            filters.setdefault(int(fmatch.group(1)), {})[fmatch.group(2)] = value
    if "Instances" in members:
        out["Instances"] = [
            m.get("InstanceId", "?") for _, m in sorted(members["Instances"].items())
        ]
    if "Listeners" in members:
        out["Listeners"] = [
            f"{m.get('Protocol', '?')}:{m.get('LoadBalancerPort', '?')}->"
            f"{m.get('InstanceProtocol', m.get('Protocol', '?'))}:{m.get('InstancePort', '?')}"
            for _, m in sorted(members["Listeners"].items())
        ]
    if "Targets" in members:
        out["Targets"] = [m.get("Id", "?") for _, m in sorted(members["Targets"].items())]
    if filters:
        rendered = []
        for _, f in sorted(filters.items()):
            vals = [v for k, v in sorted(f.items()) if k.startswith("Value.")]
            rendered.append(f"{f.get('Name', '?')}={','.join(vals)}")
        out["Filters"] = rendered
    perms = _permissions(params)
    if perms:
        out["IpPermissions"] = perms
    return out


# --- the store --------------------------------------------------------------------------------


def _matches(
    event: TrailEvent,
    *,
    action: str | None,
    service: str | None,
    error_code: str | None,
    injected: bool | None,
    ok: bool | None,
    since_seq: int | None,
    params: Mapping[str, str] | None,
) -> bool:
    if action is not None and event.action != action:
        return False
    if service is not None and event.service != service:
        return False
    if error_code is not None and event.error_code != error_code:
        return False
    if injected is not None and event.injected != injected:
        return False
    if ok is not None and event.ok != ok:
        return False
    if since_seq is not None and event.seq <= since_seq:
        return False
    if params:
        for key, want in params.items():
            have = event.params.get(key)
            if have != want and not (isinstance(have, list) and want in have):
                return False
    return True


class Trail:
    """Thread-safe, bounded, queryable list of :class:`TrailEvent` (oldest dropped first)."""

    def __init__(self, *, max_events: int = 200_000, sink: Path | None = None) -> None:
        self._lock = threading.Lock()
        #: notified whenever an expected event settles (each reader checks its own tickets)
        self._settled = threading.Condition(self._lock)
        self._events: deque[TrailEvent] = deque(maxlen=max_events)
        self._seq = 0
        #: tickets of answered calls whose events are not appended yet (:meth:`expect`)
        self._expected: set[int] = set()
        self._tickets = 0
        self._sink_path = sink
        self._sink: IO[str] | None = None
        if sink is not None:
            sink.parent.mkdir(parents=True, exist_ok=True)
            self._sink = sink.open("a", encoding="utf-8")

    def append(
        self, build: Callable[[int], TrailEvent], *, ticket: int | None = None
    ) -> TrailEvent:
        """Append the event ``build`` makes for the next sequence number (called under the
        trail's lock); the event. Sequence numbers follow completion order, which for AWS
        calls is the order in which they reached moto (calls enter moto one at a time).
        ``ticket``: the :meth:`expect` ticket this event settles."""
        with self._lock:
            self._seq += 1
            event = build(self._seq)
            self._events.append(event)
            if self._sink is not None:
                self._sink.write(event.to_json() + "\n")
                self._sink.flush()
            if ticket is not None:
                self._settle(ticket)
            return event

    def expect(self) -> int:
        """A ticket for the event of a call answered before it is recorded (the recording
        proxy writes its answer first): until :meth:`settle` (or :meth:`append` with the
        ticket), every read of the trail waits, so a reader that has the answer finds the
        event. The one who takes a ticket settles it, whatever happens."""
        with self._lock:
            self._tickets += 1
            self._expected.add(self._tickets)
            return self._tickets

    def settle(self, ticket: int) -> None:
        """The event of ``ticket`` is appended, or will never be (no action, trail off)."""
        with self._lock:
            self._settle(ticket)

    def _settle(self, ticket: int) -> None:
        self._expected.discard(ticket)
        self._settled.notify_all()  # each waiting reader checks the tickets it waits for

    def _wait_settled(self) -> None:
        """(Under the lock.) Wait until every event expected when the read began is in."""
        if self._expected:
            waiting = set(self._expected)
            self._settled.wait_for(lambda: not (waiting & self._expected))

    def clear(self) -> None:
        """Forget every event (sequence numbers keep increasing; the sink file is kept); the
        events of calls already answered are waited for first, so none lands after."""
        with self._lock:
            self._wait_settled()
            self._events.clear()

    def close(self) -> None:
        with self._lock:
            if self._sink is not None:
                self._sink.close()
                self._sink = None

    def __len__(self) -> int:
        with self._lock:
            self._wait_settled()
            return len(self._events)

    def __iter__(self) -> Iterator[TrailEvent]:
        return iter(self.events())

    def events(self) -> list[TrailEvent]:
        with self._lock:
            self._wait_settled()
            return list(self._events)

    @property
    def last_seq(self) -> int:
        """Sequence number of the newest event so far (use as ``since_seq`` bookmark)."""
        with self._lock:
            self._wait_settled()
            return self._seq

    def calls(
        self,
        action: str | None = None,
        *,
        service: str | None = None,
        error_code: str | None = None,
        injected: bool | None = None,
        ok: bool | None = None,
        since_seq: int | None = None,
        params: Mapping[str, str] | None = None,
    ) -> list[TrailEvent]:
        """Events matching every given filter, oldest first.

        ``params`` matches summarized parameters: a scalar equal to the value, or a list
        containing it (``params={"GroupIds": "sg-1"}``).
        """
        return [
            e
            for e in self.events()
            if _matches(
                e,
                action=action,
                service=service,
                error_code=error_code,
                injected=injected,
                ok=ok,
                since_seq=since_seq,
                params=params,
            )
        ]

    def count(self, action: str | None = None, **filters: Any) -> int:
        return len(self.calls(action, **filters))

    def counts(self) -> Counter[str]:
        """How many calls per action."""
        return Counter(e.action for e in self.events())

    def actions(self, *, service: str | None = None) -> list[str]:
        """Actions in call order (optionally of one service)."""
        return [e.action for e in self.events() if service is None or e.service == service]

    def to_jsonl(self) -> str:
        return "".join(e.to_json() + "\n" for e in self.events())

    def export_jsonl(self, path: Path) -> int:
        """Write every event as JSON lines to ``path``; returns the number written."""
        events = self.events()
        path.write_text("".join(e.to_json() + "\n" for e in events), encoding="utf-8")
        return len(events)


def load_jsonl(lines: Iterable[str]) -> list[TrailEvent]:
    """Events from JSON lines (as written by :meth:`Trail.export_jsonl` or ``--trail``)."""
    return [TrailEvent.from_dict(json.loads(line)) for line in lines if line.strip()]

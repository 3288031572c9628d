"""Events: one store served as core/v1 and events.k8s.io/v1, with upstream's field mapping.

kube-apiserver keeps one Event storage (``/registry/events``) and serves it through both
APIs, converting through the internal type (``k8s.io/kubernetes/pkg/apis/events/v1``
conversion): ``regarding`` is ``involvedObject``, ``note`` is ``message``,
``reportingController`` is ``reportingComponent``, ``deprecatedSource`` /
``deprecatedFirstTimestamp`` / ``deprecatedLastTimestamp`` / ``deprecatedCount`` are
``source`` / ``firstTimestamp`` / ``lastTimestamp`` / ``count``; ``reason``, ``type``,
``action``, ``related``, ``series``, ``eventTime`` and ``reportingInstance`` keep their names.
The store keeps every Event in both shapes with one resourceVersion (``store.commit`` writes
the twin), so an Event written through one API is read, listed and watched through the other.

Validation is upstream's ``ValidateEventCreate`` / ``legacyValidateEvent``
(``pkg/apis/core/validation/events.go``): the lenient legacy rules for every write, the strict
ones (``eventTime`` required, ``type`` Normal or Warning, the deprecated fields unset, series
count at least 2) for writes through events.k8s.io. Timestamps are normalised as Go's
``metav1.Time`` (RFC 3339 in UTC, seconds) and ``metav1.MicroTime`` (six fractional digits)
write them.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

from lab.kube import exceptions as E
from lab.kube.exceptions import FieldError
from lab.kube.objects import Obj

CORE = ("", "events")
EVENTS_V1 = ("events.k8s.io", "events")

# core/v1 name -> events.k8s.io/v1 name (the rest are the same in both)
_RENAMED = {
    "involvedObject": "regarding",
    "message": "note",
    "reportingComponent": "reportingController",
    "source": "deprecatedSource",
    "firstTimestamp": "deprecatedFirstTimestamp",
    "lastTimestamp": "deprecatedLastTimestamp",
    "count": "deprecatedCount",
}
_BACK = {v: k for k, v in _RENAMED.items()}
_ORDER_V1 = (
    "metadata",
    "eventTime",
    "series",
    "reportingController",
    "reportingInstance",
    "action",
    "reason",
    "regarding",
    "related",
    "note",
    "type",
    "deprecatedSource",
    "deprecatedFirstTimestamp",
    "deprecatedLastTimestamp",
    "deprecatedCount",
)
_ORDER_CORE = (
    "metadata",
    "involvedObject",
    "reason",
    "message",
    "source",
    "firstTimestamp",
    "lastTimestamp",
    "count",
    "type",
    "eventTime",
    "series",
    "action",
    "related",
    "reportingComponent",
    "reportingInstance",
)
_EMPTY: tuple[Any, ...] = (None, "", 0, {})


def _ordered(obj: Obj, order: tuple[str, ...]) -> Obj:
    out = {k: obj[k] for k in order if k in obj}
    out.update((k, v) for k, v in obj.items() if k not in out)
    return out


def to_v1(core: Obj) -> Obj:
    """A stored core/v1 Event as events.k8s.io/v1 serves it: Go's encoder writes the struct
    values (``regarding``, ``deprecatedSource``) and the time structs (``null`` when zero)
    whatever their ``omitempty``, and leaves out the empty omitempty strings and numbers."""
    out = {_RENAMED.get(k, k): v for k, v in core.items()}
    for name in ("deprecatedCount", "reportingController", "reportingInstance"):
        if out.get(name) in _EMPTY:
            out.pop(name, None)
    out.setdefault("regarding", {})
    out.setdefault("deprecatedSource", {})
    for name in ("eventTime", "deprecatedFirstTimestamp", "deprecatedLastTimestamp"):
        out.setdefault(name, None)
    return _ordered(out, _ORDER_V1)


def to_core(v1: Obj) -> Obj:
    """An events.k8s.io/v1 Event as core/v1 stores it."""
    out = {_BACK.get(k, k): v for k, v in v1.items()}
    fill_core(out)
    return _ordered(out, _ORDER_CORE)


def fill_core(core: Obj) -> None:
    """What Go writes for a core/v1 Event whatever was sent: the struct values, the time
    structs (``null`` when zero) and the two non-omitempty reporting strings."""
    core.setdefault("involvedObject", {})
    core.setdefault("source", {})
    for name in ("firstTimestamp", "lastTimestamp", "eventTime"):
        core.setdefault(name, None)
    core.setdefault("reportingComponent", "")
    core.setdefault("reportingInstance", "")


def twin_of(k: tuple[str, str]) -> tuple[str, str] | None:
    """The table holding the other API's shape of the Events in table ``k``."""
    return EVENTS_V1 if k == CORE else CORE if k == EVENTS_V1 else None


def convert_for(k: tuple[str, str]) -> Any:
    """The conversion into the shape table ``k`` holds."""
    return to_v1 if k == EVENTS_V1 else to_core


# ------------------------------------------------------------------------------ timestamps
_STAMP = re.compile(
    r"^(\d{4})-(\d\d)-(\d\d)[Tt](\d\d):(\d\d):(\d\d)(?:\.(\d+))?([Zz]|[+-]\d\d:\d\d)$"
)
_TIMES = {
    # core/v1 name: micro?
    "firstTimestamp": False,
    "lastTimestamp": False,
    "eventTime": True,
}


def normal_time(field: str, value: Any, *, micro: bool) -> tuple[Any, FieldError | None]:
    """``value`` as Go writes a metav1.Time (``micro``: MicroTime), or the decode error."""
    if value is None:
        return None, None
    match = _STAMP.match(value) if isinstance(value, str) else None
    if match is None:
        return value, E.invalid_value(field, value, "must be an RFC 3339 timestamp")
    frac = match.group(7) or ""
    zone = match.group(8).upper()
    text = f"{value[:19].replace('t', 'T')}.{(frac + '000000')[:6]}"
    moment = datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%f")
    if zone != "Z":
        sign = 1 if zone[0] == "+" else -1
        hours, minutes = int(zone[1:3]), int(zone[4:6])
        offset = sign * (hours * 3600 + minutes * 60)
        moment = datetime.fromtimestamp(moment.replace(tzinfo=UTC).timestamp() - offset, UTC)
    if micro:
        return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ"), None
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ"), None


def normalise(core: Obj, *, v1: bool) -> list[FieldError]:
    """Rewrite, in place, the timestamps of a core-shaped Event; errors name the field as the
    request's API does."""
    errs = []
    for name, micro in _TIMES.items():
        if name in core:
            shown = _RENAMED.get(name, name) if v1 else name
            core[name], err = normal_time(shown, core[name], micro=micro)
            if err:
                errs.append(err)
    series = core.get("series")
    if isinstance(series, dict) and "lastObservedTime" in series:
        series["lastObservedTime"], err = normal_time(
            "series.lastObservedTime", series["lastObservedTime"], micro=True
        )
        if err:
            errs.append(err)
    return errs


# ------------------------------------------------------------------------------ validation
_DNS1123_SUBDOMAIN = re.compile(
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
)
_QUALIFIED = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]\Z")


def _qualified_name(field: str, value: str) -> list[FieldError]:
    """``ValidateQualifiedName``: an optional DNS subdomain prefix and a name of 63 at most."""
    prefix, _, name = value.rpartition("/")
    errs = []
    if prefix and (len(prefix) > 253 or not _DNS1123_SUBDOMAIN.match(prefix)):
        errs.append(
            E.invalid_value(
                field,
                value,
                "prefix part a lowercase RFC 1123 subdomain must consist of lower case "
                "alphanumeric characters, '-' or '.', and must start and end with an "
                "alphanumeric character (e.g. 'example.com', regex used for validation is "
                "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
            )
        )
    if not name:
        return errs  # the Required error is reported on its own
    if len(name) > 63:
        errs.append(E.invalid_value(field, value, "name part must be no more than 63 characters"))
    if not _QUALIFIED.match(name):
        errs.append(
            E.invalid_value(
                field,
                value,
                "name part must consist of alphanumeric characters, '-', '_' or '.', and must "
                "start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  "
                "or '123-abc', regex used for validation is "
                "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
            )
        )
    return errs


def validate(core: Obj, *, v1: bool, strict: bool = True) -> list[FieldError]:
    """``ValidateEventCreate`` on the core-shaped Event; ``v1``: written via events.k8s.io/v1
    (``strict``: with the rules for a create there, not only the legacy ones)."""
    ns = str(core.get("metadata", {}).get("namespace") or "")
    involved = core.get("involvedObject") or {}
    involved_ns = str(involved.get("namespace") or "") if isinstance(involved, dict) else ""
    if not core.get("eventTime"):
        errs = _legacy_namespace(ns, involved_ns)
    else:
        errs = _new_event(core, ns, involved_ns, v1=v1)
    if not v1 or not strict:
        return errs
    return errs + _v1_create(core)


def _namespace_mismatch(involved_ns: str) -> FieldError:
    return E.invalid_value(
        "involvedObject.namespace", involved_ns, "does not match event.namespace"
    )


def _legacy_namespace(ns: str, involved_ns: str) -> list[FieldError]:
    """An Event without ``eventTime``: its involved object's namespace must be its own (an
    empty one only in ``default``)."""
    if not involved_ns:
        return [] if ns in ("", "default") else [_namespace_mismatch(involved_ns)]
    return [] if ns == involved_ns else [_namespace_mismatch(involved_ns)]


def _new_event(core: Obj, ns: str, involved_ns: str, *, v1: bool) -> list[FieldError]:
    """An Event with ``eventTime``: the reporting controller and instance, action and reason
    required, each bounded, and the message at most 1024 characters."""
    errs: list[FieldError] = []
    if not involved_ns and ns not in ("default", "kube-system"):
        errs.append(_namespace_mismatch(involved_ns))
    controller_field = "reportingController" if v1 else "reportingComponent"
    controller = str(core.get("reportingComponent") or "")
    if not controller:
        errs.append(E.required(controller_field))
    errs += _qualified_name(controller_field, controller)
    for field in ("reportingInstance", "action", "reason"):
        text = str(core.get(field) or "")
        if not text:
            errs.append(E.required(field))
        if len(text) > 128:
            errs.append(E.invalid_value(field, "", "can have at most 128 characters"))
    if len(str(core.get("message") or "")) > 1024:
        errs.append(E.invalid_value("message", "", "can have at most 1024 characters"))
    return errs


def _v1_create(core: Obj) -> list[FieldError]:
    """The rules of a create through events.k8s.io/v1: series, ``eventTime`` and ``type``
    set, the deprecated fields unset."""
    errs = _series(core)
    if not core.get("eventTime"):
        errs.append(E.required("eventTime"))
    kind = core.get("type")
    if kind not in ("Normal", "Warning"):
        errs.append(E.invalid_value("type", "", f"has invalid value: {kind or ''}"))
    if core.get("firstTimestamp"):
        errs.append(E.invalid_value("deprecatedFirstTimestamp", "", "needs to be unset"))
    if core.get("lastTimestamp"):
        errs.append(E.invalid_value("deprecatedLastTimestamp", "", "needs to be unset"))
    if core.get("count"):
        errs.append(E.invalid_value("deprecatedCount", "", "needs to be unset"))
    source = core.get("source") or {}
    if isinstance(source, dict) and (source.get("component") or source.get("host")):
        errs.append(E.invalid_value("deprecatedSource", "", "needs to be unset"))
    return errs


def _series(core: Obj) -> list[FieldError]:
    series = core.get("series")
    errs: list[FieldError] = []
    if isinstance(series, dict):
        count = series.get("count")
        if not isinstance(count, int) or count < 2:
            errs.append(E.invalid_value("series.count", "", "should be at least 2"))
        if not series.get("lastObservedTime"):
            errs.append(E.required("series.lastObservedTime"))
    return errs


_IMMUTABLE = (
    ("involvedObject", "involvedObject"),
    ("reason", "reason"),
    ("message", "message"),
    ("source", "source"),
    ("firstTimestamp", "firstTimestamp"),
    ("lastTimestamp", "lastTimestamp"),
    ("count", "count"),
    ("type", "type"),
    ("eventTime", "eventTime"),
    ("action", "action"),
    ("related", "related"),
    ("reportingComponent", "reportingController"),
    ("reportingInstance", "reportingInstance"),
)


def validate_update(new: Obj, old: Obj) -> list[FieldError]:
    """``ValidateEventUpdate``'s strict part for events.k8s.io/v1: a changed series is
    validated again, everything else an Event says is immutable."""
    errs = _series(new) if new.get("series") != old.get("series") else []
    for core_name, field in _IMMUTABLE:
        if new.get(core_name) in _EMPTY and old.get(core_name) in _EMPTY:
            continue
        if new.get(core_name) != old.get(core_name):
            value = new.get(core_name)
            shown = value if isinstance(value, (str, int)) else ""
            errs.append(E.invalid_value(field, shown, "field is immutable"))
    return errs

"""The cells and columns every server-side Table printer is made of (``tables*.py``).

Role: the formatting rules ``pkg/printers/internalversion`` shares between its printers (AGE as
kubectl shows a duration, label and selector strings, "up to three, then + N more"), the
tolerant readers the printers use on objects of any shape (``dig`` and friends never raise),
and the ``Column`` / ``KindTable`` records a printer is registered with.
Neighbours: ``tables_core.py`` and ``tables_apps.py`` hold the per-kind printers, ``tables.py``
the registry, the negotiation and the Table assembly; ``scale.py`` formats a Scale's selector
with :func:`format_label_selector`.
Design: pure functions of the object and the clock, no state; split from the printers so the
two printer families share them without importing each other.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

from lab.kube.objects import Obj

JSONDict = dict[str, Any]
LOAD_BALANCER_WIDTH: Final = 16
MAX_LISTED: Final = 3


def human_duration(seconds: float) -> str:
    """A duration as kubectl's AGE column shows it: ``45s``, ``3m20s``, ``5h``, ``2d3h``, ``3y``."""
    secs = int(seconds)
    if secs < -1:
        return "<invalid>"
    if secs < 0:
        return "0s"
    if secs < 120:
        return f"{secs}s"
    minutes = secs // 60
    if minutes < 10:
        rest = secs % 60
        return f"{minutes}m{rest}s" if rest else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    hours = secs // 3600
    if hours < 8:
        rest = minutes % 60
        return f"{hours}h{rest}m" if rest else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    days = hours // 24
    if hours < 24 * 8:
        rest = hours % 24
        return f"{days}d{rest}h" if rest else f"{days}d"
    if hours < 24 * 365 * 2:
        return f"{days}d"
    years = days // 365
    if hours < 24 * 365 * 8:
        rest = days % 365
        return f"{years}y{rest}d" if rest else f"{years}y"
    return f"{years}y"


def parse_time(value: object) -> datetime | None:
    """RFC 3339 (``2024-01-02T03:04:05Z``, optional fraction or offset) to an aware datetime."""
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def since(value: object, now: datetime) -> str:
    """The AGE of a timestamp, ``<unknown>`` when it is absent or unreadable."""
    when = parse_time(value)
    if when is None:
        return "<unknown>"
    return human_duration((now - when).total_seconds())


def dig(obj: object, *path: str) -> Any:
    for key in path:
        if not isinstance(obj, Mapping):
            return None
        obj = obj.get(key)
    return obj


def dig_list(obj: object, *path: str) -> list[Any]:
    value = dig(obj, *path)
    return value if isinstance(value, list) else []


def dig_str(obj: object, *path: str) -> str:
    value = dig(obj, *path)
    return value if isinstance(value, str) else ""


def dig_int(obj: object, *path: str) -> int:
    value = dig(obj, *path)
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def format_labels(labels: object) -> str:
    """``a=1,b=2`` sorted by key, ``<none>`` when empty (labels.FormatLabels)."""
    if not isinstance(labels, Mapping) or not labels:
        return "<none>"
    return ",".join(f"{k}={labels[k]}" for k in sorted(labels))


def format_label_selector(selector: object) -> str:
    """A ``LabelSelector`` in selector syntax (``app=web,tier in (a,b),!gone``), sorted by key."""
    if not isinstance(selector, Mapping):
        return "<none>"
    parts: list[tuple[str, str]] = []
    match_labels = selector.get("matchLabels")
    if isinstance(match_labels, Mapping):
        parts += [(str(k), f"{k}={v}") for k, v in match_labels.items()]
    for expr in dig_list(selector, "matchExpressions"):
        key, op = dig_str(expr, "key"), dig_str(expr, "operator")
        values = ",".join(sorted(str(v) for v in dig_list(expr, "values")))
        rendered = {
            "In": f"{key} in ({values})",
            "NotIn": f"{key} notin ({values})",
            "Exists": key,
            "DoesNotExist": f"!{key}",
        }.get(op, "<invalid>")
        parts.append((key, rendered))
    return ",".join(text for _, text in sorted(parts)) or "<none>"


def first_n(items: Iterable[str], *, empty: str) -> str:
    """Up to three items joined by ``,``, then `` + N more...`` (the printers' list style)."""
    all_items = list(items)
    shown = ",".join(all_items[:MAX_LISTED])
    if len(all_items) > MAX_LISTED:
        return f"{shown} + {len(all_items) - MAX_LISTED} more..."
    return shown or empty


# --------------------------------------------------------------------------------------------
# Columns and the records printers are registered with


@dataclass(frozen=True)
class Column:
    name: str
    description: str
    type: str = "string"
    format: str = ""
    priority: int = 0

    def definition(self) -> JSONDict:
        return {
            "name": self.name,
            "type": self.type,
            "format": self.format,
            "description": self.description,
            "priority": self.priority,
        }


NAME = Column("Name", "Name of the object, unique within its namespace.", format="name")
AGE = Column("Age", "Time since the object was created (metadata.creationTimestamp).")
CREATED_AT = Column("Created At", "When the object was created.", type="date")


def wide(name: str, description: str) -> Column:
    return Column(name, description, priority=1)


Cells = list[object]
Printer = Callable[[Obj, datetime], Cells]


@dataclass(frozen=True)
class KindTable:
    columns: tuple[Column, ...]
    printer: Printer
    row_conditions: Callable[[Obj], list[JSONDict] | None] | None = None


def count_keys(*maps: object) -> int:
    return sum(len(m) for m in maps if isinstance(m, Mapping))


def simple(*cells: Callable[[Obj], object]) -> Printer:
    """A printer whose cells are Name, ``cells``..., Age."""

    def printer(obj: Obj, now: datetime) -> Cells:
        return [
            dig_str(obj, "metadata", "name"),
            *(cell(obj) for cell in cells),
            since(dig(obj, "metadata", "creationTimestamp"), now),
        ]

    return printer

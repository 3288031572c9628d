"""Fault rules shared by the lab's AWS endpoint and API simulator: when a rule fires, and what for.

Role: the controller's retry, backoff and error paths are exercised by making chosen calls fail
or slow down on purpose. Both emulators speak one vocabulary, defined here:

* ``effect``: ``"error"`` answers the call with an error (after ``latency_ms``, if given);
  ``"latency"`` delays the call by ``latency_ms`` and lets it proceed. A latency-only rule says
  so; no magic status value stands for it.
* ``count``: fire for the next N matching calls (an integer, 1 to 10^9), then stay listed as
  exhausted; ``None`` (the default) fires until the rule is removed or cleared.
* ``probability``: fire for each matching call with this probability in [0, 1], drawn from the
  rule's own ``random.Random(seed)`` so a run is reproducible; with ``count``, at most that
  many times.
* ``latency_ms``: 0 to 600000 (ten minutes; a longer stall is a hang, not a fault).

Every field is checked: a bad one raises :class:`InvalidFaultRule` naming the field and the
value, and the control planes answer it with 400. Rules are consulted in the order they were
added: each latency rule that fires adds its delay and the call goes on to the next rule; the
first error rule that fires answers the call.

Neighbours: each emulator adds how a rule matches a call and the shape of its error:
:mod:`lab.aws.faults` (action, service, parameters, caller; an AWS error code and status) and
:mod:`lab.kube.faults` (verb, resource, subresource; an HTTP status and ``Status`` reason).
This module imports nothing of the lab.
"""

from __future__ import annotations

import dataclasses
import itertools
import random
import threading
from collections.abc import Callable, Collection, Mapping
from typing import Any, ClassVar, Generic, Literal, Self, TypedDict, TypeVar

#: The longest delay a rule may add (ten minutes).
MAX_LATENCY_MS = 600_000
#: the largest ``count`` (a billion calls: beyond it, ``null`` says "until cleared")
MAX_COUNT = 1_000_000_000
Effect = Literal["error", "latency"]
EFFECTS: tuple[Effect, ...] = ("error", "latency")
COMMON_FIELDS = ("effect", "latency_ms", "count", "probability", "seed")


class Frequency(TypedDict, total=False):
    """How often a rule fires: the keyword arguments every typed client's ``add_*`` takes."""

    count: int | None
    probability: float | None
    seed: int | None


class InvalidFaultRule(ValueError):
    """A fault description with a bad field; the message names the field and the value."""

    def __init__(self, field: str, value: object, expected: str) -> None:
        super().__init__(f"fault: {field}={value!r}: {expected}")
        self.field = field
        self.value = value
        self.message = str(self)


@dataclasses.dataclass(frozen=True, kw_only=True)
class FaultRule:
    """What every rule has: its effect and how often it fires (see the module docstring)."""

    id: str = ""
    effect: Effect = "error"
    latency_ms: float = 0.0
    count: int | None = None
    probability: float | None = None
    seed: int | None = None
    fired: int = 0
    """How many times the rule has fired so far."""

    #: The fields this kind of rule adds, and those of them only an error rule may carry.
    FIELDS: ClassVar[tuple[str, ...]] = ()
    ERROR_FIELDS: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def parse(cls, data: Mapping[str, Any]) -> Self:
        """Validate a fault description (JSON from a control plane) into a rule (no id yet).

        A bad or unknown field raises :class:`InvalidFaultRule` naming it and its value.
        """
        shared = _common(data, cls.FIELDS)
        if shared["effect"] == "latency":
            for name in cls.ERROR_FIELDS:
                if data.get(name) is not None:
                    raise InvalidFaultRule(name, data[name], "a latency rule answers no error")
        return cls(**shared, **cls.parse_own(data, effect=shared["effect"]))

    @classmethod
    def parse_own(cls, data: Mapping[str, Any], *, effect: Effect) -> dict[str, Any]:
        """The validated fields this kind of rule adds, as keyword arguments."""
        return {}

    # field readers for parse_own: each raises InvalidFaultRule naming the field and value

    @staticmethod
    def text(data: Mapping[str, Any], name: str, *, default: str | None = None) -> str | None:
        """An optional non-empty text field."""
        value = data.get(name, default)
        if value is None:
            return None
        if not isinstance(value, str) or not value:
            raise InvalidFaultRule(name, value, "expected non-empty text")
        return value

    @staticmethod
    def message_text(data: Mapping[str, Any], *, default: str | None = None) -> str | None:
        """The optional ``message`` of an error rule (any text)."""
        value = data.get("message", default)
        if value is not None and not isinstance(value, str):
            raise InvalidFaultRule("message", value, "expected text")
        return value

    @staticmethod
    def error_status(data: Mapping[str, Any], *, default: int | None) -> int | None:
        """The optional HTTP ``status`` of an error rule: 400..599."""
        value = data.get("status", default)
        if value is None:
            return None
        if not is_int(value) or not 400 <= value <= 599:
            raise InvalidFaultRule("status", value, "expected an HTTP error status (400..599)")
        return int(value)

    @property
    def exhausted(self) -> bool:
        return self.count is not None and self.fired >= self.count

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        """A rule as a control plane listed it (unknown keys are ignored)."""
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


# --- validation --------------------------------------------------------------------------------


def is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _common(data: Mapping[str, Any], fields: Collection[str]) -> dict[str, Any]:
    """The validated common fields of a fault description, as keyword arguments."""
    known = set(fields) | set(COMMON_FIELDS)
    unknown = sorted(set(data) - known)
    if unknown:
        name = unknown[0]
        raise InvalidFaultRule(name, data[name], f"unknown field; known: {sorted(known)}")
    effect = data.get("effect", "error")
    if effect not in EFFECTS:
        raise InvalidFaultRule("effect", effect, f"expected one of {list(EFFECTS)}")
    latency = data.get("latency_ms", 0)
    if not is_number(latency) or not 0 <= latency <= MAX_LATENCY_MS:
        raise InvalidFaultRule("latency_ms", latency, f"expected a number in 0..{MAX_LATENCY_MS}")
    if effect == "latency" and not latency:
        raise InvalidFaultRule("latency_ms", latency, "a latency rule needs latency_ms > 0")
    count = data.get("count")
    if count is not None and (not is_int(count) or not 1 <= count <= MAX_COUNT):
        expected = f"expected an integer in 1..{MAX_COUNT}, or null (until cleared)"
        raise InvalidFaultRule("count", count, expected)
    probability = data.get("probability")
    if probability is not None and (not is_number(probability) or not 0 <= probability <= 1):
        raise InvalidFaultRule("probability", probability, "expected a number in [0, 1]")
    seed = data.get("seed")
    if seed is not None and not is_int(seed):
        raise InvalidFaultRule("seed", seed, "expected an integer")
    return {
        "effect": effect,
        "latency_ms": float(latency),
        "count": count,
        "probability": None if probability is None else float(probability),
        "seed": seed,
    }


# --- the rule table ----------------------------------------------------------------------------

R = TypeVar("R", bound=FaultRule)


@dataclasses.dataclass(frozen=True)
class Firing(Generic[R]):
    """What the rules did to one call: the delay to add and the error rule that answers."""

    latency_ms: float = 0.0
    error: R | None = None
    fired: tuple[str, ...] = ()
    """Ids of every rule that fired, in order."""

    def __bool__(self) -> bool:
        return bool(self.fired)


class FaultTable(Generic[R]):
    """The active rules of one emulator, in insertion order; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._rules: list[R] = []
        self._rngs: dict[str, random.Random] = {}
        self._ids = itertools.count(1)

    def add(self, rule: R) -> R:
        """Add ``rule`` under a new id; returns it with the id."""
        with self._lock:
            added = dataclasses.replace(rule, id=f"f{next(self._ids)}", fired=0)
            self._rules.append(added)
            self._rngs[added.id] = random.Random(added.seed)
            return added

    def remove(self, rule_id: str) -> bool:
        """Remove one rule; False when there is none with that id."""
        with self._lock:
            before = len(self._rules)
            self._rules = [r for r in self._rules if r.id != rule_id]
            self._rngs.pop(rule_id, None)
            return len(self._rules) < before

    def clear(self) -> None:
        with self._lock:
            self._rules.clear()
            self._rngs.clear()

    def rules(self) -> list[R]:
        with self._lock:
            return list(self._rules)

    def __len__(self) -> int:
        return len(self._rules)

    def fire(self, matches: Callable[[R], bool]) -> Firing[R]:
        """Consult the rules for one call; counts and random draws advance only on a match."""
        with self._lock:
            latency = 0.0
            fired: list[str] = []
            for index, rule in enumerate(self._rules):
                if rule.exhausted or not matches(rule):
                    continue
                if rule.probability is not None and (
                    self._rngs[rule.id].random() >= rule.probability
                ):
                    continue
                now = self._rules[index] = dataclasses.replace(rule, fired=rule.fired + 1)
                latency += now.latency_ms
                fired.append(now.id)
                if now.effect == "error":
                    return Firing(latency, now, tuple(fired))
            return Firing(latency, None, tuple(fired))

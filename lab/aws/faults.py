"""Fault injection: make chosen AWS actions fail or slow down, by count or seeded probability.

Role: the controller's retry, backoff and error paths (throttling, 5xx, ``DependencyViolation``)
must be exercised without real AWS misbehaving. A :class:`FaultRule` matches calls by action
(optionally also by service and by readable parameters, e.g. only the ``DeleteSecurityGroup``
of one group) and either answers them with an AWS error (``code``/``status``), adds
``latency_ms`` before the call proceeds, or both. It applies to the next ``count`` matching
calls, or to each matching call with ``probability`` drawn from its own
``random.Random(seed)`` so a run is reproducible. Rules are consulted in the order they were
added; the first rule that fires answers the call. Injected calls are flagged in the trail.

Neighbours: consulted by :mod:`lab.aws.app` before moto sees a call; configured through
:mod:`lab.aws.control`; the error becomes bytes in :mod:`lab.aws.protocol`.
"""

from __future__ import annotations

import itertools
import random
import threading
from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from typing import Any

from lab.aws.exceptions import InjectedFault, LabControlError
from lab.aws.trail import TrailValue, summarize_params

#: Error codes whose AWS meaning is "slow down"; they default to HTTP 400 like real AWS, the
#: rest default to 500.
THROTTLING_CODES = frozenset(
    {"Throttling", "ThrottlingException", "RequestLimitExceeded", "TooManyRequestsException"}
)


@dataclass(frozen=True)
class FaultRule:
    """One fault: which calls, what happens, how often. Built with :func:`make_rule`."""

    id: str
    action: str
    """Action name (``DeleteSecurityGroup``) or ``*`` for every action."""
    service: str | None = None
    code: str | None = None
    """AWS error code to answer with; ``None`` means only ``latency_ms`` is added."""
    status: int = 400
    message: str = "Injected by ccm-lab"
    latency_ms: float = 0.0
    count: int | None = None
    """Fire for the next ``count`` matching calls, then retire; ``None`` = unlimited."""
    probability: float | None = None
    """Fire with this probability per matching call (seeded by ``seed``)."""
    seed: int | None = None
    match: dict[str, str] | None = None
    """Only calls whose readable parameters (as in the trail) match: ``{"GroupId": "sg-1"}``
    (a list parameter matches when it contains the value)."""
    caller: str | None = None
    """Only calls whose User-Agent contains this text (``ccm-lab-controller``, ``ccm-lab-imds``,
    ``app/replica-a``), so a fault meant for one client does not hit the others."""
    fired: int = 0
    """How many times the rule has fired so far."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> FaultRule:
        known = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in data.items() if k in known})

    @property
    def exhausted(self) -> bool:
        return self.count is not None and self.fired >= self.count


def make_rule(data: Mapping[str, Any], *, rule_id: str) -> FaultRule:
    """Validate a fault description (JSON from the control plane) into a rule."""
    allowed = {
        "action",
        "service",
        "code",
        "status",
        "message",
        "latency_ms",
        "count",
        "probability",
        "seed",
        "match",
        "caller",
    }
    unknown = sorted(set(data) - allowed)
    if unknown:
        raise LabControlError(f"fault: unknown field(s) {unknown}; allowed: {sorted(allowed)}")
    action = data.get("action")
    if not isinstance(action, str) or not action:
        raise LabControlError(f"fault: 'action' must be a non-empty string, got {action!r}")
    code = data.get("code")
    if code is not None and (not isinstance(code, str) or not code):
        raise LabControlError(f"fault: 'code' must be a non-empty string, got {code!r}")
    latency = data.get("latency_ms", 0.0)
    if not isinstance(latency, int | float) or isinstance(latency, bool) or latency < 0:
        raise LabControlError(f"fault: 'latency_ms' must be a number >= 0, got {latency!r}")
    if code is None and not latency:
        raise LabControlError("fault: give an error 'code', a 'latency_ms', or both")
    default_status = 400 if code in THROTTLING_CODES or code is None else 500
    status = data.get("status", default_status)
    if not isinstance(status, int) or isinstance(status, bool) or not 400 <= status <= 599:
        raise LabControlError(f"fault: 'status' must be an HTTP error status, got {status!r}")
    count = data.get("count")
    if count is not None and (not isinstance(count, int) or isinstance(count, bool) or count < 1):
        raise LabControlError(f"fault: 'count' must be an integer >= 1, got {count!r}")
    probability = data.get("probability")
    if probability is not None and (
        not isinstance(probability, int | float)
        or isinstance(probability, bool)
        or not 0.0 <= probability <= 1.0
    ):
        raise LabControlError(f"fault: 'probability' must be in [0, 1], got {probability!r}")
    if count is not None and probability is not None:
        raise LabControlError("fault: give either 'count' or 'probability', not both")
    seed = data.get("seed")
    if seed is not None and (not isinstance(seed, int) or isinstance(seed, bool)):
        raise LabControlError(f"fault: 'seed' must be an integer, got {seed!r}")
    service = data.get("service")
    if service is not None and not isinstance(service, str):
        raise LabControlError(f"fault: 'service' must be a string, got {service!r}")
    match = data.get("match")
    if match is not None and (
        not isinstance(match, dict)
        or not all(isinstance(k, str) and isinstance(v, str) for k, v in match.items())
    ):
        raise LabControlError(f"fault: 'match' must map parameter names to strings, got {match!r}")
    caller = data.get("caller")
    if caller is not None and (not isinstance(caller, str) or not caller):
        raise LabControlError(f"fault: 'caller' must be non-empty text, got {caller!r}")
    message = data.get("message", FaultRule.message)
    if not isinstance(message, str):
        raise LabControlError(f"fault: 'message' must be a string, got {message!r}")
    return FaultRule(
        id=rule_id,
        action=action,
        service=service,
        code=code,
        status=status,
        message=message,
        latency_ms=float(latency),
        count=count,
        probability=None if probability is None else float(probability),
        seed=seed,
        match=None if match is None else dict(match),
        caller=caller,
    )


@dataclass(frozen=True)
class FaultDecision:
    """What a firing rule does to one call."""

    rule_id: str
    latency_ms: float
    error: InjectedFault | None


class FaultInjector:
    """The active fault rules; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._rules: list[FaultRule] = []
        self._rngs: dict[str, random.Random] = {}
        self._ids = itertools.count(1)

    def add(self, data: Mapping[str, Any]) -> FaultRule:
        with self._lock:
            rule = make_rule(data, rule_id=f"f{next(self._ids)}")
            self._rules.append(rule)
            self._rngs[rule.id] = random.Random(rule.seed)
            return rule

    def remove(self, rule_id: str) -> None:
        with self._lock:
            before = len(self._rules)
            self._rules = [r for r in self._rules if r.id != rule_id]
            if len(self._rules) == before:
                raise LabControlError(f"fault: no rule with id {rule_id!r}", status=404)
            self._rngs.pop(rule_id, None)

    def clear(self) -> None:
        with self._lock:
            self._rules.clear()
            self._rngs.clear()

    def rules(self) -> list[FaultRule]:
        with self._lock:
            return list(self._rules)

    def decide(
        self,
        *,
        service: str,
        action: str,
        params: Mapping[str, str] | None = None,
        user_agent: str = "",
    ) -> FaultDecision | None:
        """Consult the rules for one call; counts and random draws advance only on a match."""
        with self._lock:
            if not self._rules:
                return None
            summary: dict[str, TrailValue] | None = None
            for index, rule in enumerate(self._rules):
                if rule.exhausted:
                    continue
                if rule.action not in ("*", action):
                    continue
                if rule.service is not None and rule.service != service:
                    continue
                if rule.caller is not None and rule.caller not in user_agent:
                    continue
                if rule.match:
                    if summary is None:
                        summary = summarize_params(params or {})
                    if not _params_match(summary, rule.match):
                        continue
                draw_misses = (
                    rule.probability is not None
                    and self._rngs[rule.id].random() >= rule.probability
                )
                if draw_misses:
                    continue
                self._rules[index] = replace(rule, fired=rule.fired + 1)
                error = None
                if rule.code is not None:
                    error = InjectedFault(
                        rule.message, code=rule.code, status=rule.status, source=f"fault:{rule.id}"
                    )
                return FaultDecision(rule_id=rule.id, latency_ms=rule.latency_ms, error=error)
            return None


def _params_match(summary: Mapping[str, TrailValue], wanted: Mapping[str, str]) -> bool:
    for key, value in wanted.items():
        have = summary.get(key)
        if have != value and not (isinstance(have, list) and value in have):
            return False
    return True

"""The API simulator's fault rules: which requests a rule matches and the ``Status`` it answers.

Role: informers' relist, the controller's retries and its handling of conflicts or throttling
are exercised by making chosen API requests fail or slow down. The rule vocabulary (effect,
count, seeded probability, latency, order of consultation) is the lab's one
(:mod:`lab.faults`); a :class:`KubeFaultRule` adds what to match, by Kubernetes verb (get, list,
watch, create, update, patch, delete, deletecollection), plural resource name and subresource
(``"*"`` matches any, ``""`` only the main resource), and for an error rule the HTTP
``status`` (default 500), the ``Status`` ``reason`` (default: the one apimachinery uses for that
code) and ``message``.

Neighbours: ``handlers.Api`` consults :class:`KubeFaults` before every resource request and
raises the answer as an :class:`~lab.kube.exceptions.ApiError`; ``control`` adds and lists
rules; ``control_client.KubeControlClient`` is the typed client.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from lab.faults import Effect, FaultRule, FaultTable, Firing, Frequency, InvalidFaultRule

VERBS = ("get", "list", "watch", "create", "update", "patch", "delete", "deletecollection")


class KubeMatch(Frequency, total=False):
    """Keyword arguments of ``KubeControlClient.add_*``: which requests, how often."""

    verb: str
    resource: str
    subresource: str


_REASONS = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    409: "Conflict",
    410: "Expired",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}


def default_reason(status: int) -> str:
    """The ``Status.reason`` apimachinery gives an error with HTTP ``status``."""
    return _REASONS.get(status, "InternalError" if status >= 500 else "BadRequest")


@dataclasses.dataclass(frozen=True, kw_only=True)
class KubeFaultRule(FaultRule):
    """One API fault: which requests, and for an error rule the ``Status`` (``parse`` builds
    one)."""

    verb: str = "*"
    resource: str = "*"
    subresource: str = "*"
    status: int | None = None
    """HTTP status of an error rule (400..599); None on a latency rule."""
    reason: str | None = None
    message: str | None = None

    FIELDS = ("verb", "resource", "subresource", "status", "reason", "message")
    ERROR_FIELDS = ("status", "reason", "message")

    @classmethod
    def parse_own(cls, data: Mapping[str, Any], *, effect: Effect) -> dict[str, Any]:
        verb = data.get("verb", "*")
        if verb != "*" and verb not in VERBS:
            raise InvalidFaultRule("verb", verb, f"expected * or one of {list(VERBS)}")
        subresource = data.get("subresource", "*")
        if not isinstance(subresource, str):
            raise InvalidFaultRule("subresource", subresource, 'expected text ("" = none)')
        status = cls.error_status(data, default=500 if effect == "error" else None)
        reason = cls.text(data, "reason")
        return {
            "verb": verb,
            "resource": cls.text(data, "resource", default="*"),
            "subresource": subresource,
            "status": status,
            "reason": reason if reason or status is None else default_reason(status),
            "message": cls.message_text(data),
        }


class KubeFaults(FaultTable[KubeFaultRule]):
    """The simulator's active fault rules; thread-safe."""

    def decide(self, verb: str, resource: str, subresource: str) -> Firing[KubeFaultRule]:
        """What the rules do to one request (see :mod:`lab.faults` for the order)."""

        def matches(rule: KubeFaultRule) -> bool:
            return (
                rule.verb in ("*", verb)
                and rule.resource in ("*", resource)
                and rule.subresource in ("*", subresource)
            )

        return self.fire(matches)

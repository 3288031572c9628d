"""The AWS endpoint's fault rules: which calls a rule matches and the AWS error it answers.

Role: the controller's retry, backoff and error paths (throttling, 5xx, ``DependencyViolation``)
must be exercised without real AWS misbehaving. The rule vocabulary (effect, count, seeded
probability, latency, order of consultation) is the lab's one (:mod:`lab.faults`); an
:class:`AwsFaultRule` adds what to match, by action (``*`` for any), optionally also by service,
by readable parameters (e.g. only the ``DeleteSecurityGroup`` of one group) and by caller
(User-Agent text), and for an error rule the AWS error ``code``, HTTP ``status`` and
``message``. Injected calls are flagged in the trail.

Neighbours: consulted by the pipeline's ``faults`` stage (:mod:`lab.aws.pipeline`), which turns
the error into bytes; configured through :mod:`lab.aws.control`.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
from collections.abc import Mapping
from typing import Any

from lab.aws.exceptions import InjectedFault
from lab.aws.trail import TrailValue, summarize_params
from lab.faults import Effect, FaultRule, FaultTable, Firing, Frequency, InvalidFaultRule

#: Error codes whose AWS meaning is "slow down"; they default to HTTP 400 like real AWS, the
#: rest default to 500.
THROTTLING_CODES = frozenset(
    {"Throttling", "ThrottlingException", "RequestLimitExceeded", "TooManyRequestsException"}
)
DEFAULT_MESSAGE = "Injected by ccm-lab"
#: the services of the lab's moto endpoint (what a rule's ``service`` may name there)
SERVICES = ("ec2", "elb", "elbv2", "sts")


@functools.cache
def service_actions(service: str) -> frozenset[str]:
    """The actions of ``service`` (one of :data:`SERVICES`) in botocore's model of it."""
    import botocore.session

    return frozenset(botocore.session.get_session().get_service_model(service).operation_names)


def known_action(action: str, service: str | None = None) -> str:
    """``action`` as botocore's models spell it (``*`` stays), looked up in ``service``'s model
    or, without one, in those of every :data:`SERVICES`; any case is accepted, since a rule
    for an action no call names would never fire. Raises :class:`InvalidFaultRule` naming
    the closest actions otherwise."""
    if action == "*":
        return action
    names = sorted(set().union(*(service_actions(s) for s in ([service] if service else SERVICES))))
    by_lower = {n.lower(): n for n in names}
    if action.lower() in by_lower:
        return by_lower[action.lower()]
    close = difflib.get_close_matches(action, names, n=3, cutoff=0.6)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    where = service or "/".join(SERVICES)
    raise InvalidFaultRule("action", action, f"no such {where} action in botocore's models{hint}")


class AwsMatch(Frequency, total=False):
    """Keyword arguments of ``AwsControlClient.add_*`` beside the action: which calls, how often."""

    service: str | None
    match: dict[str, str] | None
    caller: str | None


@dataclasses.dataclass(frozen=True, kw_only=True)
class AwsFaultRule(FaultRule):
    """One AWS fault: which calls, and for an error rule the AWS error (``parse`` builds one)."""

    action: str
    """Action name (``DeleteSecurityGroup``) or ``*`` for every action."""
    service: str | None = None
    code: str | None = None
    """AWS error code of an error rule; None on a latency rule."""
    status: int | None = None
    message: str | None = None
    match: dict[str, str] | None = None
    """Only calls whose readable parameters (as in the trail) match: ``{"GroupId": "sg-1"}``
    (a list parameter matches when it contains the value)."""
    caller: str | None = None
    """Only calls whose User-Agent contains this text (``ccm-lab-controller``, ``ccm-lab-imds``,
    ``app/replica-a``), so a fault meant for one client does not hit the others."""

    FIELDS = ("action", "service", "code", "status", "message", "match", "caller")
    ERROR_FIELDS = ("code", "status", "message")

    @classmethod
    def parse_own(cls, data: Mapping[str, Any], *, effect: Effect) -> dict[str, Any]:
        action = cls.text(data, "action")
        if action is None:
            raise InvalidFaultRule("action", data.get("action"), "expected an action name or *")
        code = cls.text(data, "code")
        if effect == "error" and code is None:
            need = 'an error rule needs an AWS error code (or "effect": "latency")'
            raise InvalidFaultRule("code", None, need)
        default_status = None if code is None else 400 if code in THROTTLING_CODES else 500
        match = data.get("match")
        if match is not None and (
            not isinstance(match, dict)
            or not all(isinstance(k, str) and isinstance(v, str) for k, v in match.items())
        ):
            raise InvalidFaultRule("match", match, "expected parameter names mapped to text")
        return {
            "action": action,
            "service": cls.text(data, "service"),
            "code": code,
            "status": cls.error_status(data, default=default_status),
            "message": cls.message_text(data, default=None if code is None else DEFAULT_MESSAGE),
            "match": None if match is None else dict(match),
            "caller": cls.text(data, "caller"),
        }

    def injected_error(self) -> InjectedFault:
        """The AWS error this (error) rule answers with."""
        return InjectedFault(
            self.message or DEFAULT_MESSAGE,
            code=self.code,
            status=self.status,
            source=f"fault:{self.id}",
        )


class AwsFaults(FaultTable[AwsFaultRule]):
    """The endpoint's active fault rules; thread-safe."""

    def decide(
        self,
        *,
        service: str,
        action: str,
        params: Mapping[str, str] | None = None,
        user_agent: str = "",
    ) -> Firing[AwsFaultRule]:
        """What the rules do to one call (see :mod:`lab.faults` for the order)."""
        summary: dict[str, TrailValue] | None = None

        def matches(rule: AwsFaultRule) -> bool:
            nonlocal summary
            if rule.action not in ("*", action):
                return False
            if rule.service is not None and rule.service != service:
                return False
            if rule.caller is not None and rule.caller not in user_agent:
                return False
            if rule.match:
                if summary is None:
                    summary = summarize_params(params or {})
                return _params_match(summary, rule.match)
            return True

        return self.fire(matches)


def _params_match(summary: Mapping[str, TrailValue], wanted: Mapping[str, str]) -> bool:
    for key, value in wanted.items():
        have = summary.get(key)
        if have != value and not (isinstance(have, list) and value in have):
            return False
    return True

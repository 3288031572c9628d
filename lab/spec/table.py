"""The rule table's machinery: scopes, rules, and the one error a broken rule raises.

Role: :data:`RULES` in order, :func:`rule` to add one, :func:`check` and :func:`refusals` to
judge an object against the rules of some scopes. It knows nothing of what the rules read (a
spec, ``lab.spec.model``), so the spec can run the table when it is made and the rules
(``lab.spec.rules``) can read the spec, with every import pointing one way.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable
from typing import Any

from lab.state import LabError


class Scope(enum.StrEnum):
    """Where a rule applies: every spec, ``lab.up``'s own limits, or a spec ready to be a lab."""

    SPEC = "spec"
    UP = "up"
    FINAL = "final"


class SpecError(LabError, ValueError):
    """A spec broke a rule; the message is the rule's one-line refusal."""

    def __init__(self, rule: str, message: str) -> None:
        super().__init__(message)
        self.rule = rule


@dataclasses.dataclass(frozen=True)
class Rule:
    """One rule: its name, where it applies, and the function that returns its refusal."""

    name: str
    scope: Scope
    refuse: Callable[[Any], str | None]


RULES: list[Rule] = []


def rule(name: str, scope: Scope = Scope.SPEC) -> Callable[[Callable[[Any], str | None]], Any]:
    """Add the decorated function to :data:`RULES` (the order is the order of refusals)."""

    def register(refuse: Callable[[Any], str | None]) -> Callable[[Any], str | None]:
        RULES.append(Rule(name, scope, refuse))
        return refuse

    return register


def refusals(spec: object, *scopes: Scope) -> list[tuple[Rule, str]]:
    """Every rule of ``scopes`` that ``spec`` breaks, with its refusal, in table order."""
    found = []
    for each in RULES:
        if each.scope in scopes:
            message = each.refuse(spec)
            if message is not None:
                found.append((each, message))
    return found


def check(spec: object, *scopes: Scope) -> None:
    """Raise :class:`SpecError` with the first refusal of the rules of ``scopes``."""
    for each in RULES:
        if each.scope in scopes:
            message = each.refuse(spec)
            if message is not None:
                raise SpecError(each.name, message)

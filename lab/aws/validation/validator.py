"""The request validator of the moto endpoint: the service model first, then the rules.

Role: :class:`RequestValidator` is what the endpoint's ``validate`` stage asks
(:mod:`lab.aws.motostages`): a call to a validated service (:data:`MODEL_SERVICES`) with an
``Action`` its model lacks is ``InvalidAction``; then the model check (:mod:`.model`), then
each semantic rule of :data:`RULES` whose switch is on; the first error answers. It remembers
the pagination tokens the endpoint handed out (``validate_next_token``).
:func:`services_with_action` and :func:`unroutable` serve the ``route`` stage: the service of
a call that names none, or the refusal of one no service owns.

Neighbours: :mod:`.model`, :mod:`.rules`, :mod:`.existence`; switches from
:class:`lab.aws.fidelity_config.FidelityConfig`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING

from lab.aws.exceptions import AwsError, InvalidAction, MissingAction, MissingParameter
from lab.aws.protocol import AwsRequest
from lab.aws.validation.existence import rule_existence
from lab.aws.validation.model import model_validator
from lab.aws.validation.rules import (
    Check,
    Rule,
    rule_cidr,
    rule_elb_names,
    rule_filters,
    rule_group_names,
    rule_ip_permissions,
    rule_listener_ports,
    rule_next_token,
    rule_tags,
    rule_version,
)
from lab.aws.validation.tree import MODEL_SERVICES, param_tree

if TYPE_CHECKING:
    from lab.aws.fidelity import MotoView
    from lab.aws.fidelity_config import FidelityConfig

#: (switch, rule) in the order they run; the first error answers.
RULES: tuple[tuple[str, Rule], ...] = (
    ("validate_action", rule_version),
    ("validate_ip_permissions", rule_ip_permissions),
    ("validate_cidr", rule_cidr),
    ("validate_group_names", rule_group_names),
    ("validate_elb_names", rule_elb_names),
    ("validate_listener_ports", rule_listener_ports),
    ("validate_filters", rule_filters),
    ("validate_model", rule_tags),
    ("validate_next_token", rule_next_token),
    ("validate_existence", rule_existence),
)

_TOKEN_TAGS = (
    re.compile(rb"<nextToken>([^<]+)</nextToken>"),
    re.compile(rb"<NextMarker>([^<]+)</NextMarker>"),
)


class RequestValidator:
    """Validates calls for one endpoint and remembers the pagination tokens it handed out."""

    MAX_TOKENS = 10_000

    def __init__(self) -> None:
        self.issued_tokens: set[str] = set()

    def reset(self) -> None:
        self.issued_tokens.clear()

    def check(
        self, request: AwsRequest, config: FidelityConfig, view: Callable[[], MotoView]
    ) -> AwsError | None:
        """An AWS error for a malformed ``request`` (None when it may go on to moto)."""
        if not (config.enabled and config.validation) or request.service not in MODEL_SERVICES:
            return None
        validator = model_validator(request.service)
        if request.action not in validator.operations:
            if not config.validate_action:
                return None
            return invalid_action(request)
        tree = param_tree(request.params)
        if config.validate_model:
            problems = validator.problems(request.action, tree)
            if problems:
                return validator.error(problems)
        context = Check(request, tree, view, self.issued_tokens)
        for switch, rule in RULES:
            if getattr(config, switch):
                error = rule(context)
                if error is not None:
                    return error
        return None

    def observe(self, body: bytes) -> None:
        """Remember the pagination tokens of a response (later calls may send them back)."""
        if b"extToken>" not in body and b"NextMarker>" not in body:
            return
        for pattern in _TOKEN_TAGS:
            for match in pattern.finditer(body):
                if len(self.issued_tokens) >= self.MAX_TOKENS:
                    self.issued_tokens.clear()
                self.issued_tokens.add(match.group(1).decode("utf-8", errors="replace"))


def services_with_action(action: str) -> list[str]:
    """The validated services whose model has ``action`` (for calls that name no service)."""
    return [s for s in MODEL_SERVICES if action in model_validator(s).operations]


def unroutable(request: AwsRequest) -> AwsError:
    """The answer to a call whose service neither its signature nor its Version names, and
    whose Action does not name one service alone."""
    if services_with_action(request.action):
        return MissingParameter(
            "The request must contain the parameter Version", source="validation:action"
        )
    return InvalidAction(
        f"The action {request.action} is not valid for this web service.",
        source="validation:action",
    )


def invalid_action(request: AwsRequest) -> AwsError:
    """AWS's answer to an ``Action`` the service does not have."""
    if request.service == "ec2":
        message = f"The action {request.action} is not valid for this web service."
    elif request.action:
        message = f"Could not find operation {request.action} for version {request.version}"
    else:
        message = "The request must contain the parameter Action"
    error = InvalidAction if request.action else MissingAction
    return error(message, source="validation:action")

"""``invoke lab.fault``: add, list and clear a running lab's fault rules.

Role: the front door of fault injection. A rule makes chosen calls fail or slow down on purpose
(the vocabulary is ``lab.faults``'): on the AWS endpoint (``--api aws``, the default: an
``--action`` name or ``*``, optionally one ``--service``; an AWS error ``--code``, HTTP
``--status``, ``--message``) or on the API simulator of a sim lab (``--api kube``: ``--verb``,
``--resource``, ``--subresource``; an HTTP ``--status``, ``Status`` ``--reason``,
``--message``); either: ``--latency`` (ms, before the error, or alone: a delay), ``--count``,
``--probability``, ``--seed``. Every flag is judged here before anything is sent, with the
rule's own parser (``AwsFaultRule.parse``, ``KubeFaultRule.parse``), so a refusal is one line
naming the flag; an AWS action is checked against botocore's models and spelled as they do.

Neighbours: ``lab.faultview`` (the clients and the table ``lab.status`` shows too).
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

from rich.console import Console

from lab.faults import MAX_COUNT, MAX_LATENCY_MS, InvalidFaultRule
from lab.faultview import APIS, active_rules, aws_control, describe, kube_control, render_rules
from lab.labview import require_daemon, status_console
from lab.spec import validate_name
from lab.state import LabError, LabState, load_state

#: the flags of one API only
AWS_ONLY = ("action", "service", "code")
KUBE_ONLY = ("verb", "resource", "subresource", "reason")
#: a rule field -> the flag that sets it
FLAG_OF = {"latency_ms": "latency", "effect": "latency"}


@dataclasses.dataclass(frozen=True)
class FaultFlags:
    """``lab.fault.add``'s flags as typed (text: each is judged here; '' = not given)."""

    api: str = "aws"
    action: str = ""
    service: str = ""
    code: str = ""
    status: str = ""
    message: str = ""
    count: str = ""
    probability: str = ""
    latency: str = ""
    seed: str = ""
    verb: str = ""
    resource: str = ""
    subresource: str | None = None
    reason: str = ""

    def given(self, names: tuple[str, ...]) -> list[str]:
        return [n for n in names if getattr(self, n) not in ("", None)]


def _running(name: str, root: Path | None) -> LabState:
    validate_name(name)
    state = load_state(name, root)
    require_daemon(state)
    return state


def add_fault(
    flags: FaultFlags,
    *,
    name: str = "default",
    root: Path | None = None,
    console: Console | None = None,
) -> dict[str, Any]:
    """``lab.fault.add``: judge every flag, then add the rule; returns it (with ``api``)."""
    validate_name(name)
    api = _api(flags.api) or "aws"
    body = _rule_body(api, flags)
    state = _running(name, root)
    client = aws_control(state) if api == "aws" else kube_control(state)
    try:
        rule = {"api": api, **client.add_rule(body).to_dict()}
    except Exception as exc:  # the control plane's refusal, or it did not answer
        raise LabError(f"lab.fault.add: the {api} control plane refused the rule: {exc}") from None
    calls, effect = describe(rule)
    flag = "" if name == "default" else f" --name {name}"
    (console or status_console()).print(
        f"added {api} fault {rule['id']}: {calls} → {effect}; "
        f"`invoke lab.fault.clear{flag} --api {api} --id {rule['id']}` removes it"
    )
    return rule


def list_faults(
    *,
    name: str = "default",
    as_json: bool = False,
    root: Path | None = None,
    console: Console | None = None,
) -> list[dict[str, Any]]:
    """``lab.fault.list``: every rule of both control planes (JSON with ``as_json``)."""
    rules = active_rules(_running(name, root))
    out = console or status_console()
    if as_json:
        sys.stdout.write(json.dumps(rules, indent=2, sort_keys=True) + "\n")
    elif rules:
        render_rules(out, rules, title=f"fault rules of lab {name}")
    else:
        out.print(f"lab {name} has no fault rules")
    return rules


def clear_faults(
    *,
    name: str = "default",
    api: str = "",
    rule_id: str = "",
    root: Path | None = None,
    console: Console | None = None,
) -> list[str]:
    """``lab.fault.clear``: every rule (of ``api``, default both), or the one ``rule_id``
    (of ``api``, default aws); returns ``api:id`` of what went."""
    validate_name(name)
    api = _api(api) or ("aws" if rule_id else "")
    state = _running(name, root)
    out = console or status_console()
    if api == "kube":
        kube_control(state)  # refused at once where the API server is not the simulator
    if rule_id:
        client = aws_control(state) if api == "aws" else kube_control(state)
        known = [r.id for r in client.faults()]
        if rule_id not in known:
            have = ", ".join(known) or "none"
            raise LabError(f"--id {rule_id!r}: no {api} fault rule with that id; its rules: {have}")
        client.remove_fault(rule_id)
        out.print(f"removed {api} fault {rule_id}")
        return [f"{api}:{rule_id}"]
    cleared = [r for r in active_rules(state) if not api or r["api"] == api]
    for which in sorted({r["api"] for r in cleared}):
        (aws_control(state) if which == "aws" else kube_control(state)).clear_faults()
    out.print(f"cleared {len(cleared)} fault rule(s) of lab {name}")
    return [f"{r['api']}:{r['id']}" for r in cleared]


def _api(value: str) -> str:
    if not value:
        return ""
    if value not in APIS:
        raise LabError(
            f"--api {value!r}: choose aws (the AWS endpoint) or kube (the API simulator)"
        )
    return value


def _number(flag: str, text: str, kind: type, low: float, high: float) -> Any:
    """``--flag``'s text as ``kind`` within [low, high], or one line naming it."""
    what = "an integer" if kind is int else "a number"
    try:
        value = kind(text)
    except ValueError:
        value = None
    if value is None or not low <= value <= high:
        raise LabError(f"--{flag} {text!r}: expected {what} from {low:g} to {high:g}")
    return value


def _rule_body(api: str, flags: FaultFlags) -> dict[str, Any]:
    """The rule to send, judged by the API's own parser (one line naming the flag)."""
    others = KUBE_ONLY if api == "aws" else AWS_ONLY
    if wrong := flags.given(others):
        raise LabError(f"--{wrong[0]}: a rule of the other API; with --api {api} it means nothing")
    body: dict[str, Any] = {"message": flags.message or None}
    if flags.status:
        body["status"] = _number("status", flags.status, int, 400, 599)
    if flags.count:
        body["count"] = _number("count", flags.count, int, 1, MAX_COUNT)
    if flags.probability:
        body["probability"] = _number("probability", flags.probability, float, 0, 1)
    if flags.latency:
        body["latency_ms"] = _number("latency", flags.latency, float, 1, MAX_LATENCY_MS)
    if flags.seed:
        body["seed"] = _number("seed", flags.seed, int, -(2**63), 2**63 - 1)
    if api == "aws":
        body |= _aws_rule(flags, latency_only=bool(flags.latency) and not flags.code)
    else:
        error = flags.status or flags.reason or flags.message or not flags.latency
        body |= {"verb": flags.verb or "*", "resource": flags.resource or "*"}
        body |= {"reason": flags.reason or None, "effect": "error" if error else "latency"}
        if flags.subresource is not None:
            body["subresource"] = flags.subresource
    body = {k: v for k, v in body.items() if v is not None}
    _parse(api, body)
    return body


def _aws_rule(flags: FaultFlags, *, latency_only: bool) -> dict[str, Any]:
    from lab.aws.faults import SERVICES, known_action

    if not flags.action:
        raise LabError(
            "--action: give the AWS action to fault, e.g. DescribeInstances, or '*' for every call"
        )
    if flags.service and flags.service not in SERVICES:
        raise LabError(f"--service {flags.service!r}: one of {', '.join(SERVICES)}")
    if not flags.code and not latency_only:
        raise LabError(
            "--code: an error rule needs an AWS error code (e.g. Throttling, "
            "RequestLimitExceeded, InternalError); give --latency MS alone for a delay"
        )
    try:
        action = known_action(flags.action, flags.service or None)
    except InvalidFaultRule as exc:
        raise LabError(f"--action {flags.action!r}: {exc.message.split(': ', 2)[-1]}") from None
    effect = "latency" if latency_only else "error"
    return {"action": action, "service": flags.service or None, "code": flags.code or None,
            "effect": effect}  # fmt: skip


def _parse(api: str, body: dict[str, Any]) -> None:
    """The rule as its control plane will judge it (a refusal names our flag)."""
    from lab.aws.faults import AwsFaultRule
    from lab.kube.faults import KubeFaultRule

    try:
        (AwsFaultRule if api == "aws" else KubeFaultRule).parse(body)
    except InvalidFaultRule as exc:
        flag = FLAG_OF.get(exc.field, exc.field)
        reason = exc.message.split(": ", 2)[-1]
        raise LabError(f"--{flag} {exc.value!r}: {reason}") from None

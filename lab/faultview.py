"""The fault rules a running lab has now, as ``lab.status`` and ``lab.fault list`` show them.

Role: a fault rule left behind silently breaks a lab (every ``DescribeInstances`` throttled...),
so the rules of both control planes are read here, one list, each rule tagged with its ``api``:
``aws`` (the AWS endpoint's ``/_lab/faults``: the moto endpoint, or the recording proxy in
front of LocalStack or a real account) and ``kube`` (the API simulator's, a sim lab only: kind's
and an existing cluster's API servers are real ones). Read-only; ``lab.frontdoor.faults``
changes them.

Neighbours: ``lab.labview`` (``lab.status``) and ``lab.frontdoor.faults`` (``lab.fault``) read
this; the clients are ``lab.aws.control_client`` and ``lab.kube.control_client``.
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from lab.spec import Backend
from lab.state import LabError, LabState

#: the control planes a rule lives on
APIS = ("aws", "kube")


def aws_control(state: LabState) -> Any:
    """The typed client of the lab's AWS ``/_lab/`` (imported on use: it loads the endpoint's
    rule and trail modules)."""
    from lab.aws.control_client import AwsControlClient

    return AwsControlClient(state.aws_endpoint, token=state.token, timeout=5.0)


def kube_control(state: LabState) -> Any:
    """The typed client of the API simulator's ``/_lab/``, with the CA from the lab's
    kubeconfig; a :class:`LabError` for a lab whose API server is not the simulator."""
    from lab.kube.control_client import KubeControlClient

    if state.backend != Backend.SIM or not state.kube_endpoint:
        raise LabError(
            f"--api kube: lab {state.name!r} runs on the {state.backend} backend, whose API server "
            "is a real one; Kubernetes fault rules need the API simulator (a --backend sim lab)"
        )
    return KubeControlClient(
        state.kube_endpoint, token=state.token, ca_data=_ca_data(state.kubeconfig), timeout=5.0
    )


def _ca_data(kubeconfig: str) -> str | None:
    import yaml

    config = yaml.safe_load(Path(kubeconfig).read_text(encoding="utf-8"))
    data = config["clusters"][0]["cluster"].get("certificate-authority-data")
    return base64.b64decode(data).decode() if data else None


def active_rules(state: LabState) -> list[dict[str, Any]]:
    """Every fault rule of the lab (exhausted ones too), AWS first, each with its ``api``."""
    rules = [{"api": "aws", **r.to_dict()} for r in aws_control(state).faults()]
    if state.backend == Backend.SIM and state.kube_endpoint:
        rules += [{"api": "kube", **r.to_dict()} for r in kube_control(state).faults()]
    return rules


def describe(rule: dict[str, Any]) -> tuple[str, str]:
    """(which calls, what happens to them) of one rule, as text."""
    if rule["api"] == "aws":
        calls = rule["action"] + (f" ({rule['service']})" if rule.get("service") else "")
        error = f"{rule.get('code')} (HTTP {rule.get('status')})"
    else:
        sub = rule.get("subresource", "*")
        calls = f"{rule['verb']} {rule['resource']}" + (f"/{sub}" if sub not in ("*", "") else "")
        error = f"HTTP {rule.get('status')} {rule.get('reason')}"
    delay = f"+{rule['latency_ms']:g} ms" if rule.get("latency_ms") else ""
    effect = delay if rule["effect"] == "latency" else " then ".join(p for p in (delay, error) if p)
    if rule.get("message") and rule["effect"] == "error":
        effect += f": {rule['message']}"
    return calls, effect


def how_often(rule: dict[str, Any]) -> str:
    count = rule.get("count")
    fired = f"fired {rule.get('fired', 0)}" + (f" of {count}" if count is not None else "")
    if rule.get("probability") is not None:
        fired += f", p={rule['probability']:g}"
    if count is not None and rule.get("fired", 0) >= count:
        fired += " (exhausted)"
    return fired


def render_rules(out: Console, rules: list[dict[str, Any]], *, title: str) -> None:
    """A table of ``rules`` (``api``, ``id``, calls, effect, how often)."""
    table = Table(title=title, title_justify="left")
    for col in ("api", "id", "calls", "effect", "fired"):
        table.add_column(col, overflow="fold")
    for rule in rules:
        calls, effect = describe(rule)
        table.add_row(rule["api"], rule["id"], escape(calls), escape(effect), how_often(rule))
    out.print(table)

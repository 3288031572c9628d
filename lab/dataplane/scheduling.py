"""Pure scheduling predicates: label selectors, taints and tolerations, node affinity, fit.

Role: the decisions kube-scheduler's filter plugins make (NodeUnschedulable, NodeAffinity with
nodeSelector, TaintToleration, NodeResourcesFit, NodePorts), as functions over wire JSON so
they can be tested alone and shared: the scheduler stand-in (``scheduler``) filters nodes with
them, the taint-eviction controller (``nodelifecycle``) and the endpoint controllers use the
toleration and selector helpers. No I/O here.

Reasons are worded as the scheduler's ``0/N nodes are available: ...`` message words them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from lab.kube.objects import Obj

TAINT_UNSCHEDULABLE = "node.kubernetes.io/unschedulable"
TERMINAL_PHASES = ("Succeeded", "Failed")

_QUANTITY = re.compile(r"^([+-]?[0-9.]+)([eE][+-]?[0-9]+|[a-zA-Z]*)\Z")
_SUFFIX = {
    "": 1.0,
    "n": 1e-9,
    "u": 1e-6,
    "m": 1e-3,
    "k": 1e3,
    "M": 1e6,
    "G": 1e9,
    "T": 1e12,
    "P": 1e15,
    "E": 1e18,
    "Ki": 2.0**10,
    "Mi": 2.0**20,
    "Gi": 2.0**30,
    "Ti": 2.0**40,
    "Pi": 2.0**50,
    "Ei": 2.0**60,
}


def quantity(value: object) -> float:
    """A resource quantity (``100m``, ``1Gi``, ``2``) as a float; ValueError naming it."""
    text = str(value).strip()
    match = _QUANTITY.match(text)
    if match is None:
        raise ValueError(f"not a resource quantity: {value!r}")
    number, suffix = match.groups()
    if suffix and suffix[0] in "eE" and suffix[1:].lstrip("+-").isdigit():
        return float(number + suffix)
    if suffix not in _SUFFIX:
        raise ValueError(f"not a resource quantity: {value!r}")
    return float(number) * _SUFFIX[suffix]


def selector_matches(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    """A ``metav1.LabelSelector`` (matchLabels + matchExpressions) against ``labels``.
    An empty selector matches everything; None matches nothing (as ``LabelSelectorAsSelector``)."""
    if selector is None:
        return False
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expr in selector.get("matchExpressions") or []:
        if not _expression(expr, labels.get(expr.get("key", "")), expr.get("key", "") in labels):
            return False
    return True


def _expression(expr: Mapping[str, Any], value: str | None, present: bool) -> bool:
    op = expr.get("operator")
    values = [str(v) for v in expr.get("values") or []]
    if op == "In":
        return present and value in values
    if op == "NotIn":
        return not present or value not in values
    if op == "Exists":
        return present
    if op == "DoesNotExist":
        return not present
    if op in ("Gt", "Lt") and present and values:
        try:
            left, right = int(str(value)), int(values[0])
        except ValueError:
            return False
        return left > right if op == "Gt" else left < right
    return False


def map_selector_matches(selector: Mapping[str, str] | None, labels: Mapping[str, str]) -> bool:
    """A Service-style ``spec.selector`` map: every pair present (None matches nothing)."""
    if selector is None:
        return False
    return all(labels.get(k) == v for k, v in selector.items())


def tolerates(toleration: Mapping[str, Any], taint: Mapping[str, Any]) -> bool:
    """``v1.Toleration.ToleratesTaint``."""
    effect = toleration.get("effect") or ""
    if effect and effect != taint.get("effect"):
        return False
    key = toleration.get("key") or ""
    if key and key != taint.get("key"):
        return False
    operator = toleration.get("operator") or "Equal"
    if operator == "Exists":
        return True
    if operator == "Equal":
        return (toleration.get("value") or "") == (taint.get("value") or "")
    return False


def untolerated(
    taints: Iterable[Mapping[str, Any]],
    tolerations: Iterable[Mapping[str, Any]],
    effects: tuple[str, ...] = ("NoSchedule", "NoExecute"),
) -> Mapping[str, Any] | None:
    """The first taint with one of ``effects`` that no toleration tolerates."""
    tols = list(tolerations)
    for taint in taints:
        if taint.get("effect") not in effects:
            continue
        if not any(tolerates(t, taint) for t in tols):
            return taint
    return None


def taint_text(taint: Mapping[str, Any]) -> str:
    return f"{{{taint.get('key')}: {taint.get('value') or ''}}}"


def node_labels_match(pod: Obj, node: Obj) -> bool:
    """nodeSelector and required node affinity (terms OR-ed, expressions AND-ed)."""
    spec = pod.get("spec") or {}
    labels = (node.get("metadata") or {}).get("labels") or {}
    for key, value in (spec.get("nodeSelector") or {}).items():
        if labels.get(key) != value:
            return False
    affinity = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    )
    if not affinity:
        return True
    name = (node.get("metadata") or {}).get("name", "")
    for term in affinity.get("nodeSelectorTerms") or []:
        exprs = term.get("matchExpressions") or []
        fields = term.get("matchFields") or []
        if not exprs and not fields:
            continue  # an empty term matches nothing
        ok = all(
            _expression(e, labels.get(e.get("key", "")), e.get("key", "") in labels) for e in exprs
        )
        ok = ok and all(
            _expression(f, name, True) for f in fields if f.get("key") == "metadata.name"
        )
        if ok:
            return True
    return False


def pod_requests(pod: Obj) -> dict[str, float]:
    """cpu/memory requests of a pod: sum over containers, max with each init container."""
    spec = pod.get("spec") or {}
    total = {"cpu": 0.0, "memory": 0.0}
    for container in spec.get("containers") or []:
        for resource, value in ((container.get("resources") or {}).get("requests") or {}).items():
            if resource in total:
                total[resource] += quantity(value)
    for container in spec.get("initContainers") or []:
        for resource, value in ((container.get("resources") or {}).get("requests") or {}).items():
            if resource in total:
                total[resource] = max(total[resource], quantity(value))
    return total


def host_ports(pod: Obj) -> set[tuple[str, int]]:
    return {
        (str(p.get("protocol") or "TCP"), int(p["hostPort"]))
        for c in (pod.get("spec") or {}).get("containers") or []
        for p in c.get("ports") or []
        if p.get("hostPort")
    }


def is_terminal(pod: Obj) -> bool:
    return (pod.get("status") or {}).get("phase") in TERMINAL_PHASES


def filter_reason(pod: Obj, node: Obj, pods_on_node: Iterable[Obj]) -> str | None:
    """Why ``pod`` cannot go on ``node`` (the scheduler's reason text), or None when it fits."""
    spec = pod.get("spec") or {}
    nspec = node.get("spec") or {}
    tolerations = spec.get("tolerations") or []
    if nspec.get("unschedulable") and not any(
        tolerates(t, {"key": TAINT_UNSCHEDULABLE, "effect": "NoSchedule"}) for t in tolerations
    ):
        return "node(s) were unschedulable"
    if not node_labels_match(pod, node):
        return "node(s) didn't match Pod's node affinity/selector"
    taint = untolerated(nspec.get("taints") or [], tolerations)
    if taint is not None:
        return f"node(s) had untolerated taint {taint_text(taint)}"
    running = [p for p in pods_on_node if not is_terminal(p)]
    allocatable = (node.get("status") or {}).get("allocatable") or {}
    if "pods" in allocatable and len(running) + 1 > quantity(allocatable["pods"]):
        return "Too many pods"
    wanted = pod_requests(pod)
    for resource in ("cpu", "memory"):
        if wanted[resource] and resource in allocatable:
            used = sum(pod_requests(p)[resource] for p in running)
            if used + wanted[resource] > quantity(allocatable[resource]):
                return f"Insufficient {resource}"
    ports = host_ports(pod)
    if ports and any(ports & host_ports(p) for p in running):
        return "node(s) didn't have free ports for the requested pod ports"
    return None


def unschedulable_message(total: int, reasons: Mapping[str, int]) -> str:
    """``0/3 nodes are available: 1 Too many pods, 2 node(s) had untolerated taint {...}.``"""
    parts = ", ".join(f"{count} {reason}" for reason, count in sorted(reasons.items()))
    return (
        f"0/{total} nodes are available: {parts}." if parts else f"0/{total} nodes are available."
    )

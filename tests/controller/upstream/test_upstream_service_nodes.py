"""Upstream's service-controller node tables (``service_node_tables``) run against ours.

Adapters: a case's node is built as upstream's ``makeNode`` builds it (name ``node``, empty
labels and taints, providerID ``providerID``, Ready=True) and tweaked; our predicates read the
wire form through ``controller.cloud.Node.from_api``. ``allNodePredicates`` is our node set with
the legacy ``transient-node-predicates`` switch (readiness a predicate); the fixed node set is
``stableNodeSetPredicates``; ``shouldSyncUpdatedNode`` is ``should_sync_updated_node`` without
legacy switches. Every case must pass; a deliberate deviation would be listed in
``controller/DEVIATIONS.md`` and marked here (none is).
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from controller.cloud import Node
from controller.legacy import LegacyFlags
from controller.service import node_included, should_sync_updated_node
from tests.controller.upstream.service_node_tables import (
    PROVIDER_ID,
    RESPECTS_PREDICATES,
    SHOULD_SYNC_COMPOUNDED,
    SHOULD_SYNC_INDIVIDUAL,
    Tweak,
)

FIXED = LegacyFlags()
TRANSIENT = LegacyFlags.parse(["transient-node-predicates"])


def make_node(*tweaks: Tweak) -> dict[str, Any]:
    node: dict[str, Any] = {
        "metadata": {"name": "node", "labels": {}},
        "spec": {"taints": [], "providerID": PROVIDER_ID},
        "status": {"conditions": [{"type": "Ready", "status": "True"}]},
    }
    for tweak in tweaks:
        apply(node, tweak)
    return node


def apply(node: dict[str, Any], tweak: Tweak) -> None:
    kind, *args = tweak
    conditions = node["status"]["conditions"]
    if kind == "label":
        node["metadata"]["labels"][args[0]] = args[1]
    elif kind == "taint":
        node["spec"]["taints"].append({"key": args[0]})
    elif kind in ("ready", "condition"):
        ctype, status = ("Ready", "True" if args[0] else "False") if kind == "ready" else args
        found = next((c for c in conditions if c["type"] == ctype), None)
        if found is None:
            conditions.append({"type": ctype, "status": status})
        else:
            found["status"] = status
    elif kind == "unset":
        found = next((c for c in conditions if c["type"] == args[0]), None)
        if found is not None:
            found["type"] = "SomethingElse"  # upstream's own trick
    elif kind == "deleted":
        node["metadata"]["deletionTimestamp"] = "2026-06-12T01:29:11Z"
    elif kind == "provider_id":
        node["spec"]["providerID"] = args[0]
    else:  # pragma: no cover - a typo in the table
        raise ValueError(f"unknown tweak {tweak!r}")


def from_scratch(fields: dict[str, Any]) -> dict[str, Any]:
    """``Test_respectsPredicates`` builds its nodes by hand, not with makeNode."""
    node: dict[str, Any] = {"metadata": {"name": "n"}, "spec": {}, "status": {}}
    if "providerID" in fields:
        node["spec"]["providerID"] = fields["providerID"]
    if "ready" in fields:
        node["status"]["conditions"] = [{"type": "Ready", "status": fields["ready"]}]
    if "labels" in fields:
        node["metadata"]["labels"] = copy.deepcopy(fields["labels"])
    if "taints" in fields:
        node["spec"]["taints"] = [{"key": k, "effect": "NoSchedule"} for k in fields["taints"]]
    return node


@pytest.mark.parametrize(
    ("fields", "want"),
    [c[1:] for c in RESPECTS_PREDICATES],
    ids=[c[0] for c in RESPECTS_PREDICATES],
)
def test_respects_predicates(fields: dict[str, Any], want: bool) -> None:
    """Test_respectsPredicates (allNodePredicates: our legacy transient node set)."""
    assert node_included(Node.from_api(from_scratch(fields)), TRANSIENT) is want


CASES = SHOULD_SYNC_INDIVIDUAL + SHOULD_SYNC_COMPOUNDED


@pytest.mark.parametrize(("old", "new", "sync"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_should_sync_updated_node(old: list[Tweak], new: list[Tweak], sync: bool) -> None:
    """Test_shouldSyncUpdatedNode_individualPredicates and _compoundedPredicates."""
    before, after = Node.from_api(make_node(*old)), Node.from_api(make_node(*new))
    assert should_sync_updated_node(before, after, FIXED) is sync


@pytest.mark.parametrize(
    ("value", "included"),
    [("false", True), ("False", True), ("0", True), ("f", True), ("F", True), ("FALSE", True),
     ("true", False), ("1", False), ("", False), ("foo", False), ("no", False)],
)  # fmt: skip
def test_exclusion_label_parsed_as_go_parse_bool(value: str, included: bool) -> None:
    """nodeIncludedPredicate parses the label with strconv.ParseBool (upstream's table has
    "", "false", "true", "foo"; the other spellings are ParseBool's own)."""
    node = Node.from_api(
        make_node(("label", "node.kubernetes.io/exclude-from-external-load-balancers", value))
    )
    assert node_included(node, FIXED) is included

"""Upstream's own table tests of the service controller's node handling, as data.

Source: kubernetes/cloud-provider ``controllers/service/controller_test.go`` at commit
46666112f47d004d76fb91406104f94e6a504b2f (2026-06-12): ``Test_respectsPredicates``,
``Test_shouldSyncUpdatedNode_individualPredicates``,
``Test_shouldSyncUpdatedNode_compoundedPredicates``. Each case is (name, tweaks..., expected)
with upstream's names and expectations; the tweaks are upstream's node tweaks
(``makeNode(tweak...)``) written as tuples that ``test_upstream_service_nodes`` applies:

* ``("label", key, value)``, ``("taint", key)``, ``("ready", bool)``,
  ``("condition", type, status)``, ``("unset", "Ready")`` (the condition renamed away),
  ``("deleted",)``, ``("provider_id", value)``.
"""

from __future__ import annotations

from typing import Any

EXCLUDE = "node.kubernetes.io/exclude-from-external-load-balancers"
TO_BE_DELETED = "ToBeDeletedByClusterAutoscaler"
PROVIDER_ID = "providerID"

Tweak = tuple[Any, ...]

#: ``Test_respectsPredicates``: (name, node built from scratch (not makeNode), want) for
#: ``allNodePredicates`` (included, untainted, ready), the legacy transient predicates.
RESPECTS_PREDICATES: list[tuple[str, dict[str, Any], bool]] = [
    ("empty node", {}, False),
    ("ready, providerID", {"providerID": PROVIDER_ID, "ready": "True"}, True),
    ("ready", {"ready": "True"}, True),
    ("not ready", {"ready": "False"}, False),
    ("ready, providerID, empty labels", {"providerID": PROVIDER_ID, "ready": "True", "labels": {}},
     True),
    ("excluded ''", {"ready": "True", "labels": {EXCLUDE: ""}}, False),
    ("excluded 'false'", {"ready": "True", "labels": {EXCLUDE: "false"}}, True),
    ("excluded 'true'", {"ready": "True", "labels": {EXCLUDE: "true"}}, False),
    ("excluded 'foo'", {"ready": "True", "labels": {EXCLUDE: "foo"}}, False),
    ("to-be-deleted taint", {"ready": "True", "taints": [TO_BE_DELETED]}, False),
]  # fmt: skip

#: ``Test_shouldSyncUpdatedNode_individualPredicates``: (name, old tweaks, new tweaks, sync)
SHOULD_SYNC_INDIVIDUAL: list[tuple[str, list[Tweak], list[Tweak], bool]] = [
    ("nothing changed", [], [], False),
    ("excluded F->T", [], [("label", EXCLUDE, "")], True),
    ("excluded changed T->F", [("label", EXCLUDE, "")], [], True),
    ("excluded changed T->T", [("label", EXCLUDE, "")], [("label", EXCLUDE, "")], False),
    ("other taint F->T", [], [("taint", "other")], False),
    ("other taint T->F", [("taint", "other")], [], False),
    ("other label changed F->T", [], [("label", "other", "")], False),
    ("other label changed T->F", [("label", "other", "")], [], False),
    ("readiness changed F->F", [("ready", False)], [("ready", False)], False),
    ("readiness changed F->unset", [("ready", False)], [("unset", "Ready")], False),
    ("readiness changed unset->F", [("unset", "Ready")], [("ready", False)], False),
    ("readiness changed unset->unset", [("unset", "Ready")], [("unset", "Ready")], False),
    ("ready F, other condition changed F->T",
     [("ready", False), ("condition", "DiskPressure", "False")],
     [("ready", False), ("condition", "DiskPressure", "True")], False),
    ("ready F, other condition changed T->F",
     [("ready", False), ("condition", "DiskPressure", "True")],
     [("ready", False), ("condition", "DiskPressure", "False")], False),
    ("ready T, other condition changed F->T", [("condition", "Other", "False")],
     [("condition", "Other", "True")], False),
    ("ready T, other condition changed T->F", [("condition", "Other", "True")],
     [("condition", "Other", "False")], False),
    ("deletionTimestamp F -> T", [], [("deleted",)], False),
    ("providerID set F -> T", [("provider_id", "")], [], True),
    ("providerID set T-> F", [], [("provider_id", "")], True),
    ("providerID change", [], [("provider_id", PROVIDER_ID + "-2")], True),
]  # fmt: skip

_T = ("taint", TO_BE_DELETED)
_X = ("label", EXCLUDE, "")
_NR = ("ready", False)
_NOPID = ("provider_id", "")
_PID2 = ("provider_id", PROVIDER_ID + "-2")

#: ``Test_shouldSyncUpdatedNode_compoundedPredicates``
SHOULD_SYNC_COMPOUNDED: list[tuple[str, list[Tweak], list[Tweak], bool]] = [
    ("tainted T, excluded F->T", [_T], [_T, _X], True),
    ("tainted T, excluded T->F", [_T, _X], [_T], True),
    ("tainted T, providerID set F->T", [_T, _NOPID], [_T], True),
    ("tainted T, providerID set T->F", [_T], [_T, _NOPID], True),
    ("tainted T, providerID change", [_T], [_T, _PID2], True),
    ("tainted T, ready F->T", [_T, _NR], [_T], False),
    ("tainted T, ready T->F", [_T], [_T, _NR], False),
    ("excluded T, tainted F->T", [_X], [_X, _T], False),
    ("excluded T, tainted T->F", [_X, _T], [_X], False),
    ("excluded T, ready F->T", [_X, _NR], [_X], False),
    ("excluded T, ready T->F", [_X], [_X, _NR], False),
    ("excluded T, providerID set F->T", [_X, _NOPID], [_X], True),
    ("excluded T, providerID set T->F", [_X], [_X, _NOPID], True),
    ("excluded T, providerID change", [_X], [_X, _PID2], True),
    ("ready F, tainted F->T", [_NR], [_NR, _T], False),
    ("ready F, tainted T->F", [_NR, _T], [_NR], False),
    ("ready F, excluded F->T", [_NR], [_NR, _X], True),
    ("ready F, excluded T->F", [_NR, _X], [_NR], True),
    ("ready F, providerID set F->T", [_NR, _NOPID], [_NR], True),
    ("ready F, providerID set T->F", [_NR], [_NR, _NOPID], True),
    ("ready F, providerID change", [_NR], [_NR, _PID2], True),
    ("providerID unset, excluded F->T", [_NOPID], [_NOPID, _X], True),
    ("providerID unset, excluded T->F", [_NOPID, _X], [_NOPID], True),
    ("providerID unset, ready T->F", [_NOPID], [_NOPID, ("ready", True)], False),
    ("providerID unset, ready F->T", [_NOPID], [_NOPID, _NR], False),
    ("providerID unset, tainted T->F", [_NOPID, _T], [_NOPID], False),
    ("providerID unset, tainted F->T", [_NOPID], [_NOPID, _T], False),
]

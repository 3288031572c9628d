"""Server-side Table printing (``meta.k8s.io/v1`` ``Table``) for the Kubernetes API simulator.

Role: when a client asks ``Accept: application/json;as=Table;v=v1;g=meta.k8s.io`` (kubectl does
for ``get`` in every human-readable mode, including ``-w``), the router hands the objects it
would have returned to :func:`to_table`, which builds the same columns and cells a v1.32
kube-apiserver prints: ``kubectl get nodes`` shows STATUS/ROLES/AGE/VERSION, ``get svc`` shows
TYPE/CLUSTER-IP/EXTERNAL-IP/PORT(S)/AGE, and so on (``shared/docs/apiserver-spec.md`` §2).

Neighbours: ``resources.ResourceType`` identifies the kind; the router decides with
:func:`wants_table` / :func:`table_version` and passes ``?includeObject=``. For watches it calls
:func:`to_table` once per event, with ``column_definitions=False`` after the first event.

Design: one small printer per kind, each a pure function of the object and the clock, in a
registry keyed by (group, kind) (:data:`PRINTERS`: the core kinds' printers from
``tables_core.py``, the workload, RBAC and aggregation kinds' from ``tables_apps.py``, both
built from ``tables_cells.py``); kinds without a printer get the server's default table (Name,
Created At). Like the real server, every column is always filled, including the ``-o wide`` ones
(priority 1): kubectl hides those itself. Cell rules follow ``pkg/printers/internalversion`` in
kubernetes v1.32; the code is ours. The clock is injectable so the AGE cells are testable.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, Final

from lab.kube.discovery import parse_accept
from lab.kube.objects import Obj
from lab.kube.resources import ResourceType
from lab.kube.tables_apps import APPS_PRINTERS
from lab.kube.tables_cells import CREATED_AT, NAME, JSONDict, KindTable, dig, dig_str
from lab.kube.tables_core import CORE_PRINTERS, core_event_view

TABLE_GROUP: Final = "meta.k8s.io"
TABLE_VERSIONS: Final = ("v1", "v1beta1")
INCLUDE_OBJECT_VALUES: Final = ("None", "Metadata", "Object")


class TableRequestError(ValueError):
    """A Table request the server rejects; the router answers ``400 BadRequest`` with ``str(e)``."""

    reason = "BadRequest"
    code = 400


# --------------------------------------------------------------------------------------------
# Negotiation


def table_version(accept: str) -> str | None:
    """``"v1"``/``"v1beta1"`` if the first range we can serve asks for a Table, else ``None``."""
    for media in parse_accept(accept):
        if media.mime not in ("application/json", "application/*", "*/*"):
            continue  # protobuf tables are not served; JSON fallbacks follow in every client
        as_ = media.param("as")
        if as_ is None:
            return None
        if (
            media.mime == "application/json"
            and as_ == "Table"
            and media.param("g") == TABLE_GROUP
            and media.param("v") in TABLE_VERSIONS
        ):
            return media.param("v")
    return None


def wants_table(accept: str) -> bool:
    """True when the response to this ``Accept`` header should be a ``Table``."""
    return table_version(accept) is not None


# --------------------------------------------------------------------------------------------
# The registry

PRINTERS: Mapping[tuple[str, str], KindTable] = {**CORE_PRINTERS, **APPS_PRINTERS}

_DEFAULT_TABLE = KindTable(
    (NAME, CREATED_AT),
    lambda obj, _now: [
        dig_str(obj, "metadata", "name"),
        dig_str(obj, "metadata", "creationTimestamp"),
    ],
)


def columns_for(rt: ResourceType) -> list[JSONDict]:
    """The ``columnDefinitions`` of ``rt``'s table (the default Name/Created At if no printer)."""
    return [c.definition() for c in PRINTERS.get((rt.group, rt.kind), _DEFAULT_TABLE).columns]


# --------------------------------------------------------------------------------------------
# Table assembly


def _row_object(rt: ResourceType, obj: Obj, include_object: str, version: str) -> JSONDict | None:
    if include_object == "None":
        return None
    if include_object == "Object":
        full = dict(obj)
        full.setdefault("apiVersion", rt.api_version)
        full.setdefault("kind", rt.kind)
        return full
    return {
        "kind": "PartialObjectMetadata",
        "apiVersion": f"{TABLE_GROUP}/{version}",
        "metadata": dict(dig(obj, "metadata") or {}),
    }


def to_table(
    rt: ResourceType,
    objects: list[dict[str, Any]],
    *,
    list_meta: dict[str, Any] | None,
    include_object: str,
    now: datetime | None = None,
    version: str = "v1",
    column_definitions: bool = True,
) -> dict[str, Any]:
    """Render ``objects`` (all of kind ``rt``) as a ``meta.k8s.io`` Table.

    ``list_meta`` is the list's ``metadata`` (``resourceVersion``, ``continue``,
    ``remainingItemCount``) or ``None`` for a single object or a watch event, whose table then
    carries that object's ``resourceVersion``. ``include_object`` is the ``?includeObject=``
    value: ``Metadata`` (also ``""``, the default) embeds a ``PartialObjectMetadata`` per row,
    ``Object`` the full object, ``None`` nothing; anything else raises
    :class:`TableRequestError`. ``column_definitions=False`` leaves the columns empty, as the
    server does for watch events after the first. ``now`` defaults to the current UTC time.
    """
    mode = include_object or "Metadata"
    if mode not in INCLUDE_OBJECT_VALUES:
        raise TableRequestError(f"unrecognized includeObject value: {json.dumps(include_object)}")
    if version not in TABLE_VERSIONS:
        raise TableRequestError(f"unsupported Table version: {json.dumps(version)}")
    clock = now or datetime.now(UTC)
    spec = PRINTERS.get((rt.group, rt.kind), _DEFAULT_TABLE)
    rows: list[JSONDict] = []
    for obj in objects:
        view = core_event_view(obj, rt.group) if rt.kind == "Event" else obj
        row: JSONDict = {"cells": spec.printer(view, clock)}
        conditions = spec.row_conditions(obj) if spec.row_conditions else None
        if conditions:
            row["conditions"] = conditions
        embedded = _row_object(rt, obj, mode, version)
        if embedded is not None:
            row["object"] = embedded
        rows.append(row)
    metadata: JSONDict = {}
    if list_meta is not None:
        for key in ("resourceVersion", "continue", "remainingItemCount"):
            if list_meta.get(key) not in (None, ""):
                metadata[key] = list_meta[key]
    elif len(objects) == 1 and dig_str(objects[0], "metadata", "resourceVersion"):
        metadata["resourceVersion"] = dig_str(objects[0], "metadata", "resourceVersion")
    return {
        "kind": "Table",
        "apiVersion": f"{TABLE_GROUP}/{version}",
        "metadata": metadata,
        "columnDefinitions": [c.definition() for c in spec.columns] if column_definitions else [],
        "rows": rows,
    }

"""Small shared vocabulary for stored objects: type aliases, keys and timestamps.

Used by the store and its composed parts (``writes.py``, ``deletion.py``) and by the HTTP
layer. Timestamps are RFC 3339 in UTC with whole seconds, as the API server writes
``creationTimestamp`` and ``deletionTimestamp``.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from lab.kube.resources import ResourceType

Obj = dict[str, Any]
RTKey = tuple[str, str]  # (group, plural)
ObjKey = tuple[str, str]  # (namespace, name); namespace "" for cluster-scoped kinds


def rt_key(rt: ResourceType) -> RTKey:
    return (rt.group, rt.plural)


def now_rfc3339(*, plus_seconds: int = 0) -> str:
    moment = datetime.now(UTC) + timedelta(seconds=plus_seconds)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")

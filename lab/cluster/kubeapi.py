"""Small helpers for calling the official Kubernetes client and getting wire JSON back.

The kubelet stand-in (``lab.cluster.kubelet``) and the node patch helpers (``lab.nodes``) use
``kubernetes.client.CoreV1Api``/``CoordinationV1Api`` methods, but with ``_preload_content=False``
so they work on the JSON the server sent (camelCase keys, RFC 3339 strings) rather than on the
client's pydantic models. Patch bodies always name their content type: the client would otherwise
pick ``application/json-patch+json`` for a dict.
"""

from __future__ import annotations

import json
from typing import Any, cast

import urllib3
from kubernetes.client.exceptions import ApiException

SMP = "application/strategic-merge-patch+json"
MERGE_PATCH = "application/merge-patch+json"


def raw(response: object) -> dict[str, Any]:
    """The JSON object of a ``_preload_content=False`` response."""
    data = cast(urllib3.HTTPResponse, response).data
    parsed = json.loads(data) if data else {}
    if not isinstance(parsed, dict):
        raise TypeError(f"expected a JSON object from the API server, got {type(parsed).__name__}")
    return parsed


def status_of(error: BaseException) -> int | None:
    """The HTTP status of a client ``ApiException`` (None for other errors)."""
    if isinstance(error, ApiException):
        return int(error.status) if error.status is not None else None
    return None


def is_not_found(error: BaseException) -> bool:
    return status_of(error) == 404


def is_conflict(error: BaseException) -> bool:
    return status_of(error) == 409

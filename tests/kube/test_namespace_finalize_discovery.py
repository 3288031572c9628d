"""``namespaces/finalize`` is served, listed in discovery with its one verb, and in OpenAPI."""

from __future__ import annotations

import json

from lab.kube.discovery import handle_discovery
from lab.kube.openapi import handle_openapi


def test_namespaces_finalize_is_discoverable_update_only() -> None:
    found = handle_discovery("/api/v1", "application/json", "127.0.0.1:1")
    assert found is not None
    _status, _ctype, body = found
    entries = {r["name"]: r for r in body["resources"]}  # type: ignore[index]
    assert entries["namespaces/finalize"]["verbs"] == ["update"]
    assert entries["namespaces/status"]["verbs"] == ["get", "patch", "update"]


def test_openapi_offers_only_put_on_namespaces_finalize() -> None:
    found = handle_openapi("/openapi/v3/api/v1", "application/json")
    assert found is not None
    _status, _ctype, raw = found
    doc = json.loads(raw) if isinstance(raw, bytes) else raw
    assert set(doc["paths"]["/api/v1/namespaces/{name}/finalize"]) == {"put", "parameters"}
    assert {"get", "put", "patch"} <= set(doc["paths"]["/api/v1/namespaces/{name}/status"])

"""A minimal, valid OpenAPI document for the Kubernetes API simulator.

Role: serve ``/openapi/v3`` (the index), ``/openapi/v3/api/v1`` and
``/openapi/v3/apis/<group>/<version>`` (one document per group version) and ``/openapi/v2``, so
that ``kubectl apply -f``, ``create -f``, ``replace -f`` and ``edit`` work with their default
``--validate=strict`` (``shared/docs/apiserver-spec.md`` §1.7). kubectl downloads the v3
document of the object's group version and looks for the PATCH operation of that
group/version/kind; when it declares a ``fieldValidation`` query parameter, kubectl skips
client-side schema validation and sends ``fieldValidation=Strict`` for the server to apply.

What is deliberately absent: schemas. Each operation carries the Kubernetes extensions
(``x-kubernetes-group-version-kind``, ``x-kubernetes-action``) and its query parameters, but no
``requestBody`` and no ``components.schemas`` entries. Without a ``requestBody`` naming
``application/strategic-merge-patch+json`` kubectl does not try to compute a strategic merge
patch from the document and falls back to its compiled-in types for built-in kinds, which is
what we want; a half-written schema would be worse than none. ``kubectl explain`` is therefore
out of scope.

Neighbours: the operations come from ``resources.RESOURCES``; the router calls
:func:`handle_openapi` for ``/openapi/...`` paths. Documents are built once per process and
addressed by a content hash, as the real server does, because kubectl caches v3 documents on
disk keyed by the ``hash`` query parameter.
"""

from __future__ import annotations

import hashlib
import json
from functools import cache
from typing import Any, Final

from lab.kube.discovery import parse_accept
from lab.kube.resources import ResourceType, groups, in_group_version

JSON: Final = "application/json"
# kubectl asks with the "@v1.0" spelling, which Go's mime parser cannot read back, so the reply
# uses the ".v1.0" spelling, as the real server does.
V2_PROTOBUF_ACCEPT: Final = (
    "application/com.github.proto-openapi.spec.v2@v1.0+protobuf",
    "application/com.github.proto-openapi.spec.v2.v1.0+protobuf",
)
V2_PROTOBUF: Final = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
KUBE_VERSION: Final = "v1.32.0"
JSONDict = dict[str, Any]


def _gv_key(group: str, version: str) -> str:
    """The v3 index key: ``api/v1`` or ``apis/<group>/<version>``."""
    return f"apis/{group}/{version}" if group else f"api/{version}"


def _query_param(name: str, description: str, *, v2: bool) -> JSONDict:
    param: JSONDict = {"name": name, "in": "query", "description": description}
    if v2:
        param["type"] = "string"
        param["uniqueItems"] = True
    else:
        param["schema"] = {"type": "string", "uniqueItems": True}
    return param


def _write_params(*, v2: bool, apply: bool = False) -> list[JSONDict]:
    params = [
        _query_param("dryRun", "When present, do not persist the change (All).", v2=v2),
        _query_param("fieldManager", "Name of the actor making the change.", v2=v2),
        _query_param(
            "fieldValidation",
            "How to treat unknown or duplicate fields: Ignore, Warn or Strict.",
            v2=v2,
        ),
    ]
    if apply:
        params.append(_query_param("force", "Force a server-side apply over conflicts.", v2=v2))
    return params


def _operation(rt: ResourceType, action: str, op_id: str, *, v2: bool) -> JSONDict:
    params: list[JSONDict] = []
    if action in ("post", "put"):
        params = _write_params(v2=v2)
    elif action == "patch":
        params = _write_params(v2=v2, apply=True)
    op: JSONDict = {
        "operationId": op_id,
        "tags": [rt.group_version.replace("/", "_").replace(".", "_")],
        "description": f"{action} {rt.kind}",
        "responses": {"200": {"description": "OK"}, "401": {"description": "Unauthorized"}},
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": {
            "group": rt.group,
            "version": rt.version,
            "kind": rt.kind,
        },
    }
    if params:
        op["parameters"] = params
    if v2 and action == "patch":
        op["consumes"] = [
            "application/json-patch+json",
            "application/merge-patch+json",
            "application/strategic-merge-patch+json",
            "application/apply-patch+yaml",
        ]
    return op


def _camel(rt: ResourceType) -> str:
    gv = "".join(p.capitalize() for p in rt.group.split(".")[:1]) + rt.version.capitalize()
    return ("Core" if not rt.group else "") + gv


def _paths_for(rt: ResourceType, *, v2: bool) -> JSONDict:
    prefix = rt.path_prefix()
    scope = "/namespaces/{namespace}" if rt.namespaced else ""
    ns_word = "Namespaced" if rt.namespaced else ""
    tag = f"{_camel(rt)}{ns_word}{rt.kind}"
    collection = f"{prefix}{scope}/{rt.plural}"
    item = f"{collection}/{{name}}"
    paths: JSONDict = {
        collection: {
            "get": _operation(rt, "list", f"list{tag}", v2=v2),
            "post": _operation(rt, "post", f"create{tag}", v2=v2),
        },
        item: {
            "get": _operation(rt, "get", f"read{tag}", v2=v2),
            "put": _operation(rt, "put", f"replace{tag}", v2=v2),
            "patch": _operation(rt, "patch", f"patch{tag}", v2=v2),
            "delete": _operation(rt, "delete", f"delete{tag}", v2=v2),
        },
    }
    for sub in rt.subresources:
        sub_tag = f"{tag}{sub.capitalize()}"
        paths[f"{item}/{sub}"] = {
            "get": _operation(rt, "get", f"read{sub_tag}", v2=v2),
            "put": _operation(rt, "put", f"replace{sub_tag}", v2=v2),
            "patch": _operation(rt, "patch", f"patch{sub_tag}", v2=v2),
        }
    return paths


def _info() -> JSONDict:
    return {"title": "Kubernetes", "version": KUBE_VERSION}


@cache
def _v3_documents() -> dict[str, tuple[str, bytes]]:
    """Index key -> (hash, JSON bytes) for each served group version."""
    docs: dict[str, tuple[str, bytes]] = {}
    for group, versions in groups().items():
        for version in versions:
            paths: JSONDict = {}
            for rt in in_group_version(group, version):
                paths.update(_paths_for(rt, v2=False))
            doc = {
                "openapi": "3.0.0",
                "info": _info(),
                "paths": paths,
                "components": {"schemas": {}},
            }
            body = json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()
            digest = hashlib.sha512(body).hexdigest().upper()
            docs[_gv_key(group, version)] = (digest, body)
    return docs


def v3_index() -> JSONDict:
    """``GET /openapi/v3``: where each group version's document lives, hash included."""
    return {
        "paths": {
            key: {"serverRelativeURL": f"/openapi/v3/{key}?hash={digest}"}
            for key, (digest, _) in _v3_documents().items()
        }
    }


def v3_document(key: str) -> JSONDict | None:
    """The v3 document for ``api/v1`` or ``apis/<group>/<version>``; ``None`` if not served."""
    entry = _v3_documents().get(key)
    if entry is None:
        return None
    loaded: JSONDict = json.loads(entry[1])
    return loaded


@cache
def _v2_body() -> bytes:
    paths: JSONDict = {}
    for group, versions in groups().items():
        for version in versions:
            for rt in in_group_version(group, version):
                paths.update(_paths_for(rt, v2=True))
    doc = {"swagger": "2.0", "info": _info(), "paths": paths, "definitions": {}}
    return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()


def v2_document() -> JSONDict:
    """``GET /openapi/v2`` as JSON (Swagger 2.0)."""
    loaded: JSONDict = json.loads(_v2_body())
    return loaded


# ---- /openapi/v2 as protobuf -----------------------------------------------------------------
# kubectl asks for v2 only in protobuf (gnostic ``openapi.v2.Document``). It reads it for
# client-side schema validation, which it falls back to for manifests whose kind has no PATCH
# operation in the v3 document, notably ``kind: List`` (what ``kubectl get -o yaml`` writes).
# A document with no definitions makes every kind "schemaless", which kubectl does not
# validate, so such manifests apply with default validation, as they do against a real server.


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _pb_bytes(field_number: int, payload: bytes) -> bytes:
    """One length-delimited protobuf field (wire type 2: strings and messages)."""
    return _varint(field_number << 3 | 2) + _varint(len(payload)) + payload


@cache
def v2_protobuf() -> bytes:
    """``openapi.v2.Document{swagger: "2.0", info: {title, version}}`` in protobuf encoding."""
    info = _pb_bytes(1, b"Kubernetes") + _pb_bytes(2, KUBE_VERSION.encode())
    return _pb_bytes(1, b"2.0") + _pb_bytes(2, info)


def _v2_media(accept: str) -> str | None:
    """The v2 media type to serve: protobuf or JSON, whichever ``Accept`` prefers; else None."""
    for media in parse_accept(accept):
        if media.mime in V2_PROTOBUF_ACCEPT:
            return V2_PROTOBUF
        if media.mime in (JSON, "application/*", "*/*") and media.param("as") is None:
            return JSON
    return None


def _accepts_json(accept: str) -> bool:
    return any(
        m.mime in (JSON, "application/*", "*/*") and m.param("as") is None
        for m in parse_accept(accept)
    )


def _status(code: int, reason: str, message: str) -> JSONDict:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "details": {},
        "code": code,
    }


def handle_openapi(path: str, accept: str) -> tuple[int, str, bytes | object] | None:
    """Serve an ``/openapi/...`` path; ``None`` for any other path.

    Bodies for 200 replies are the exact bytes served (so the hash in the v3 index matches
    them); errors are ``Status`` dicts. ``/openapi/v2`` comes as JSON or, for kubectl's
    protobuf-only ``Accept``, as a protobuf document; an ``Accept`` we cannot meet gets
    ``406 NotAcceptable``.
    """
    path = path.split("?", 1)[0].rstrip("/")
    if path != "/openapi" and not path.startswith("/openapi/"):
        return None
    if path == "/openapi/v2":
        media = _v2_media(accept)
        if media == V2_PROTOBUF:
            return 200, V2_PROTOBUF, v2_protobuf()
        if media == JSON:
            return 200, JSON, _v2_body()
    if not _accepts_json(accept):
        return (
            406,
            JSON,
            _status(406, "NotAcceptable", "only application/json is served for OpenAPI documents"),
        )
    if path == "/openapi/v3":
        index = json.dumps(v3_index(), sort_keys=True, separators=(",", ":")).encode()
        return 200, JSON, index
    if path.startswith("/openapi/v3/"):
        entry = _v3_documents().get(path.removeprefix("/openapi/v3/"))
        if entry is not None:
            return 200, JSON, entry[1]
    return 404, JSON, _status(404, "NotFound", "the server could not find the requested resource")

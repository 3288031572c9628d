"""A minimal, valid OpenAPI document for the Kubernetes API simulator.

Role: serve ``/openapi/v3`` (the index), ``/openapi/v3/api/v1`` and
``/openapi/v3/apis/<group>/<version>`` (one document per group version) and ``/openapi/v2``, so
that ``kubectl apply -f``, ``create -f``, ``replace -f`` and ``edit`` work with their default
``--validate=strict`` (``shared/docs/apiserver-spec.md`` §1.7). kubectl downloads the v3
document of the object's group version and looks for the PATCH operation of that
group/version/kind; when it declares a ``fieldValidation`` query parameter, kubectl skips
client-side schema validation and sends ``fieldValidation=Strict`` for the server to apply.

What is deliberately absent: ``requestBody``. Each operation carries the Kubernetes
extensions (``x-kubernetes-group-version-kind``, ``x-kubernetes-action``) and its query
parameters, but without a ``requestBody`` naming ``application/strategic-merge-patch+json``
kubectl does not compute strategic merge patches from this document and falls back to its
compiled-in types for built-in kinds, which is what we want: our schemas carry no patch
strategies, and a wrong merge key would silently corrupt lists.

``/openapi/v2`` in JSON lists the version's upstream schema set (``lab.kube.schema``, the one
writes are checked against) as its ``definitions``; in protobuf, kubectl's form, it has none
(see the protobuf section below).

Schemas (``components.schemas``, for ``kubectl explain``) are the version's upstream schema
set (``lab.kube.schema``: the types, descriptions and extensions writes are checked against),
each group version's kinds and every type they refer to, under upstream's names, converted to
the OpenAPI 3.0 shape kube-apiserver writes (one type per node, ``allOf`` around a described
reference).

Neighbours: the operations come from ``resources.RESOURCES``; the router calls
:func:`handle_openapi` for ``/openapi/...`` paths. Documents are built once per process on
first request and addressed by a hash of everything they are made from (:func:`v3_hash`),
because kubectl caches v3 documents on disk keyed by the ``hash`` query parameter.
"""

from __future__ import annotations

import hashlib
import json
from functools import cache
from typing import Any, Final

from lab.kube.discovery import parse_accept
from lab.kube.openapi_params import hoist, operation_parameters, path_parameters
from lab.kube.resources import ResourceType, groups, in_group_version
from lab.versions.release import DEFAULT_K8S_VERSION, git_version

JSON: Final = "application/json"
# kubectl asks with the "@v1.0" spelling, which Go's mime parser cannot read back, so the reply
# uses the ".v1.0" spelling, as the real server does.
V2_PROTOBUF_ACCEPT: Final = (
    "application/com.github.proto-openapi.spec.v2@v1.0+protobuf",
    "application/com.github.proto-openapi.spec.v2.v1.0+protobuf",
)
V2_PROTOBUF: Final = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
DEFAULT_VERSION: Final = git_version(DEFAULT_K8S_VERSION)
JSONDict = dict[str, Any]


def _gv_key(group: str, version: str) -> str:
    """The v3 index key: ``api/v1`` or ``apis/<group>/<version>``."""
    return f"apis/{group}/{version}" if group else f"api/{version}"


def _operation(rt: ResourceType, action: str, op_id: str, *, v2: bool, sub: str = "") -> JSONDict:
    params = operation_parameters(action, sub, v2=v2)
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
    if rt.verbs == ("create",):  # the review kinds: POST only
        only = {"post": _operation(rt, "post", f"create{tag}", v2=v2)}
        return {collection: hoist(only, path_parameters(namespaced=False, item_kind=None, v2=v2))}
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
        operations = {
            "get": _operation(rt, "get", f"read{sub_tag}", v2=v2, sub=sub),
            "put": _operation(rt, "put", f"replace{sub_tag}", v2=v2, sub=sub),
            "patch": _operation(rt, "patch", f"patch{sub_tag}", v2=v2, sub=sub),
        }
        # namespaces/finalize is update-only on a real server; binding and token create-only
        if sub == "finalize":
            paths[f"{item}/{sub}"] = {"put": operations["put"]}
        elif sub == "log":
            paths[f"{item}/{sub}"] = {"get": operations["get"]}
        elif sub in ("exec", "attach", "portforward"):
            paths[f"{item}/{sub}"] = {
                "get": operations["get"],
                "post": _operation(rt, "post", f"connect{sub_tag}", v2=v2, sub=sub),
            }
        elif sub in ("binding", "token"):
            paths[f"{item}/{sub}"] = {"post": _operation(rt, "post", f"create{sub_tag}", v2=v2)}
        else:
            paths[f"{item}/{sub}"] = operations
    for path, path_item in paths.items():
        item_kind = rt.kind if path != collection else None
        shared = path_parameters(namespaced=rt.namespaced, item_kind=item_kind, v2=v2)
        paths[path] = hoist(path_item, shared)
    return paths


def _info(version: str) -> JSONDict:
    return {"title": "Kubernetes", "version": version}


# ---- schemas for kubectl explain ------------------------------------------------------------

INT_OR_STRING: Final = "io.k8s.apimachinery.pkg.util.intstr.IntOrString"
#: upstream's shapes of the two types the schema set writes as JSON Schema ``oneOf``
_SCALARS: Final = {
    INT_OR_STRING: {"type": "string", "format": "int-or-string"},
    "io.k8s.apimachinery.pkg.api.resource.Quantity": {"type": "string"},
}
_DEFS_REF: Final = "#/$defs/"
V2_REF: Final = "#/definitions/"
V3_REF: Final = "#/components/schemas/"


def _as_openapi(node: Any, prefix: str) -> Any:
    """A schema-set node (JSON Schema: ``#/$defs/`` references, ``[type, "null"]``) as an
    OpenAPI document writes it: references under ``prefix``, one type per node, and (v3) a
    reference with a description wrapped in ``allOf``, as kube-apiserver writes it (3.0
    ignores a ``$ref``'s siblings)."""
    if isinstance(node, list):
        return [_as_openapi(item, prefix) for item in node]
    if not isinstance(node, dict):
        return node
    out: JSONDict = {}
    for key, value in node.items():
        if key == "$ref" and isinstance(value, str) and value.startswith(_DEFS_REF):
            out[key] = prefix + value[len(_DEFS_REF) :]
        elif key == "type" and isinstance(value, list):
            kinds = [t for t in value if t != "null"]
            if len(kinds) == 1:
                out[key] = kinds[0]
        else:
            out[key] = _as_openapi(value, prefix)
    if prefix == V3_REF and "$ref" in out and len(out) > 1:
        ref = out.pop("$ref")
        out = {"allOf": [{"$ref": ref}], **out}
    return out


def _converted(name: str, node: Any, prefix: str) -> JSONDict:
    converted: JSONDict = _as_openapi(node, prefix)
    if name in _SCALARS:
        converted.pop("oneOf", None)
        converted.update(_SCALARS[name])
    return converted


def _schemas_for(group: str, version: str, k8s_version: str) -> JSONDict:
    """``components.schemas`` for one group version: each kind of it and every type those
    refer to, from the version's upstream schema set (the one writes are checked against),
    under upstream's names."""
    from lab.kube.schema import definition_name, definitions

    defs = definitions(k8s_version)
    wanted = [definition_name(rt) for rt in in_group_version(group, version)]
    seen: set[str] = set()
    while wanted:
        name = wanted.pop()
        if name in seen or name not in defs:
            continue
        seen.add(name)
        wanted.extend(_refs(defs[name]))
    return {name: _converted(name, defs[name], V3_REF) for name in sorted(seen)}


def _refs(node: Any) -> list[str]:
    if isinstance(node, list):
        return [r for item in node for r in _refs(item)]
    if not isinstance(node, dict):
        return []
    out = [r for value in node.values() for r in _refs(value)]
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith(_DEFS_REF):
        out.append(ref[len(_DEFS_REF) :])
    return out


# Bump when the schema conversion changes: it is part of every document's hash.
SCHEMA_REVISION: Final = "3"


def _served_group_versions() -> dict[str, tuple[str, str]]:
    return {_gv_key(g, v): (g, v) for g, versions in groups().items() for v in versions}


def _schema_set(version: str) -> str:
    """Which schema set (package version and Kubernetes minor) the documents come from."""
    from lab.kube.schema import schema_version

    try:
        from importlib.metadata import version as package_version

        package = package_version("kubernetes-validate")
    except Exception:  # pragma: no cover - metadata missing
        package = "none"
    return f"{package}/{schema_version(version)}"


@cache
def v3_hash(key: str, version: str = DEFAULT_VERSION) -> str:
    """The ``hash`` of a group version's document without building it.

    A document is a pure function of its operations, the client models its schemas come from
    and :data:`SCHEMA_REVISION`, so hashing those inputs names its content. The index stays
    instant while the (large) schema-bearing documents are built on first request.
    """
    group, served = _served_group_versions()[key]
    paths: JSONDict = {}
    for rt in in_group_version(group, served):
        paths.update(_paths_for(rt, v2=False))
    inputs = json.dumps(
        [paths, _info(version), _schema_set(version), SCHEMA_REVISION], sort_keys=True
    ).encode()
    return hashlib.sha512(inputs).hexdigest().upper()


@cache
def _v3_body(key: str, version: str) -> bytes:
    group, served = _served_group_versions()[key]
    paths: JSONDict = {}
    for rt in in_group_version(group, served):
        paths.update(_paths_for(rt, v2=False))
    doc = {
        "openapi": "3.0.0",
        "info": _info(version),
        "paths": paths,
        "components": {"schemas": _schemas_for(group, served, version)},
    }
    return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()


def v3_index(version: str = DEFAULT_VERSION) -> JSONDict:
    """``GET /openapi/v3``: where each group version's document lives, hash included."""
    return {
        "paths": {
            key: {"serverRelativeURL": f"/openapi/v3/{key}?hash={v3_hash(key, version)}"}
            for key in _served_group_versions()
        }
    }


def v3_document(key: str, version: str = DEFAULT_VERSION) -> JSONDict | None:
    """The v3 document for ``api/v1`` or ``apis/<group>/<version>``; ``None`` if not served."""
    if key not in _served_group_versions():
        return None
    loaded: JSONDict = json.loads(_v3_body(key, version))
    return loaded


def _v2_definitions(version: str) -> JSONDict:
    """Every type of the version's upstream schema set (the one writes are checked against),
    as kube-apiserver's ``/openapi/v2`` lists them: descriptions, group-version-kind and list
    extensions included."""
    from lab.kube.schema import definitions

    return {name: _converted(name, node, V2_REF) for name, node in definitions(version).items()}


@cache
def _v2_body(version: str) -> bytes:
    paths: JSONDict = {}
    for group, versions in groups().items():
        for served in versions:
            for rt in in_group_version(group, served):
                paths.update(_paths_for(rt, v2=True))
    doc = {
        "swagger": "2.0",
        "info": _info(version),
        "paths": paths,
        "definitions": _v2_definitions(version),
    }
    return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()


def v2_document(version: str = DEFAULT_VERSION) -> JSONDict:
    """``GET /openapi/v2`` as JSON (Swagger 2.0)."""
    loaded: JSONDict = json.loads(_v2_body(version))
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
def v2_protobuf(version: str = DEFAULT_VERSION) -> bytes:
    """``openapi.v2.Document{swagger: "2.0", info: {title, version}}`` in protobuf encoding."""
    info = _pb_bytes(1, b"Kubernetes") + _pb_bytes(2, version.encode())
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


def handle_openapi(
    path: str, accept: str, *, version: str = DEFAULT_VERSION
) -> tuple[int, str, bytes | object] | None:
    """Serve an ``/openapi/...`` path; ``None`` for any other path.

    ``version`` is the server's ``gitVersion`` (``info.version`` of every document).

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
            return 200, V2_PROTOBUF, v2_protobuf(version)
        if media == JSON:
            return 200, JSON, _v2_body(version)
    if not _accepts_json(accept):
        return (
            406,
            JSON,
            _status(406, "NotAcceptable", "only application/json is served for OpenAPI documents"),
        )
    if path == "/openapi/v3":
        index = json.dumps(v3_index(version), sort_keys=True, separators=(",", ":")).encode()
        return 200, JSON, index
    if path.startswith("/openapi/v3/"):
        key = path.removeprefix("/openapi/v3/")
        if key in _served_group_versions():
            return 200, JSON, _v3_body(key, version)
    return 404, JSON, _status(404, "NotFound", "the server could not find the requested resource")

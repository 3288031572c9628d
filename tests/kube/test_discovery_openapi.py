"""OpenAPI documents (lab.kube.openapi): what kubectl's validator and patcher read from them.

kubectl (cli-runtime ``queryParamVerifierV3``) downloads ``/openapi/v3``, follows the
``serverRelativeURL`` of the object's group version, and looks for a PATCH operation whose
``x-kubernetes-group-version-kind`` matches and whose parameters include ``fieldValidation``.
These tests walk the documents the same way.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from lab.kube.openapi import handle_openapi, v2_document, v3_document, v3_hash, v3_index
from lab.kube.resources import RESOURCES, ResourceType
from lab.versions.release import DEFAULT_K8S_VERSION, git_version

KUBECTL_V2_ACCEPT = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"


def get(path: str, accept: str = "application/json, */*") -> tuple[int, Any]:
    result = handle_openapi(path, accept)
    assert result is not None, path
    status, ctype, body = result
    assert ctype == "application/json"
    if isinstance(body, bytes):
        return status, json.loads(body)
    return status, body


def patch_operations(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return [ops["patch"] for ops in doc["paths"].values() if "patch" in ops]


def test_index_lists_every_group_version_with_its_hash() -> None:
    status, index = get("/openapi/v3?timeout=32s")
    assert status == 200
    keys = set(index["paths"])
    expected = {
        f"apis/{rt.group}/{rt.version}" if rt.group else f"api/{rt.version}" for rt in RESOURCES
    }
    assert keys == expected
    hashes = set()
    for key, entry in index["paths"].items():
        path, _, query = entry["serverRelativeURL"].partition("?")
        assert path == f"/openapi/v3/{key}"
        assert query == f"hash={v3_hash(key)}"
        assert len(v3_hash(key)) == 128
        hashes.add(v3_hash(key))
    assert len(hashes) == len(keys)
    assert index == v3_index()


@pytest.mark.parametrize("rt", RESOURCES, ids=lambda rt: f"{rt.group_version}/{rt.plural}")
def test_kubectl_finds_a_field_validation_capable_patch_for_every_kind(rt: ResourceType) -> None:
    if "patch" not in rt.verbs:
        pytest.skip(f"{rt.plural} is create-only")
    _, index = get("/openapi/v3")
    key = f"apis/{rt.group}/{rt.version}" if rt.group else f"api/{rt.version}"
    status, doc = get(index["paths"][key]["serverRelativeURL"])
    assert status == 200
    assert doc["openapi"].startswith("3.")
    assert doc["info"]["title"] == "Kubernetes"
    gvk = {"group": rt.group, "version": rt.version, "kind": rt.kind}
    matching = [
        op
        for op in patch_operations(doc)
        if op["x-kubernetes-group-version-kind"] == gvk and op["x-kubernetes-action"] == "patch"
    ]
    assert matching, f"no PATCH operation for {gvk}"
    for op in matching:
        names = {p["name"] for p in op["parameters"] if p["in"] == "query"}
        assert {"fieldValidation", "fieldManager", "dryRun", "force"} <= names
        # no requestBody: kubectl must not build a strategic merge patch from empty schemas
        assert "requestBody" not in op
        assert op["responses"]


def test_item_paths_follow_the_url_grammar() -> None:
    doc = v3_document("api/v1")
    assert doc is not None
    assert "/api/v1/namespaces/{namespace}/services/{name}" in doc["paths"]
    assert "/api/v1/namespaces/{namespace}/services/{name}/status" in doc["paths"]
    assert "/api/v1/nodes/{name}" in doc["paths"]
    assert "/api/v1/namespaces/{namespace}/nodes/{name}" not in doc["paths"]
    service = doc["components"]["schemas"]["io.k8s.api.core.v1.Service"]
    assert service["x-kubernetes-group-version-kind"] == [
        {"group": "", "version": "v1", "kind": "Service"}
    ]
    lease_doc = v3_document("apis/coordination.k8s.io/v1")
    assert lease_doc is not None
    lease = lease_doc["paths"]["/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{name}"]
    assert lease["patch"]["operationId"] == "patchCoordinationV1NamespacedLease"
    assert lease["get"]["x-kubernetes-action"] == "get"
    assert set(lease) == {"get", "put", "patch", "delete", "parameters"}  # shared ones


def test_operation_ids_are_unique() -> None:
    seen: list[str] = []
    for key in v3_index()["paths"]:
        doc = v3_document(key)
        assert doc is not None
        seen += [
            op["operationId"]
            for ops in doc["paths"].values()
            for verb, op in ops.items()
            if verb != "parameters"
        ]
    assert len(seen) == len(set(seen))


def test_v2_json_definitions_are_the_versions_upstream_types() -> None:
    """``/openapi/v2`` lists every type of the schema set writes are checked against, in
    Swagger 2.0's shape: one type per node, references inside the document."""
    doc = v2_document()
    defs = doc["definitions"]
    node = defs["io.k8s.api.core.v1.Node"]
    assert node["x-kubernetes-group-version-kind"] == [
        {"group": "", "kind": "Node", "version": "v1"}
    ]
    assert node["type"] == "object"
    assert "worker node" in node["description"]
    taints = defs["io.k8s.api.core.v1.NodeSpec"]["properties"]["taints"]
    assert taints["items"] == {"$ref": "#/definitions/io.k8s.api.core.v1.Taint"}
    assert defs["io.k8s.apimachinery.pkg.util.intstr.IntOrString"]["format"] == "int-or-string"
    refs: list[str] = []

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            assert not isinstance(value.get("type"), list), value
            assert "oneOf" not in value or "properties" in value, value
            if isinstance(value.get("$ref"), str):
                refs.append(value["$ref"])
            for sub in value.values():
                walk(sub)
        elif isinstance(value, list):
            for sub in value:
                walk(sub)

    walk(defs)
    assert refs
    assert {r.removeprefix("#/definitions/") for r in refs} <= set(defs)


def test_v2_json_document() -> None:
    status, doc = get("/openapi/v2", "application/json")
    assert status == 200
    assert doc["swagger"] == "2.0"
    assert doc == v2_document()
    op = doc["paths"]["/api/v1/namespaces/{namespace}/configmaps/{name}"]["patch"]
    assert op["x-kubernetes-group-version-kind"] == {
        "group": "",
        "version": "v1",
        "kind": "ConfigMap",
    }
    params = {p["name"]: p for p in op["parameters"]}
    assert params["fieldValidation"]["type"] == "string"
    assert "application/strategic-merge-patch+json" in op["consumes"]


def _read_varint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, pos


def _fields(data: bytes) -> dict[int, bytes]:
    """Decode length-delimited protobuf fields (all the v2 document uses)."""
    out: dict[int, bytes] = {}
    pos = 0
    while pos < len(data):
        key, pos = _read_varint(data, pos)
        assert key & 7 == 2, f"unexpected wire type in key {key}"
        length, pos = _read_varint(data, pos)
        out[key >> 3] = data[pos : pos + length]
        pos += length
    return out


def test_v2_protobuf_for_kubectls_accept() -> None:
    result = handle_openapi("/openapi/v2?timeout=32s", KUBECTL_V2_ACCEPT)
    assert result is not None
    status, ctype, body = result
    assert status == 200
    # the reply spelling Go's mime parser accepts (no "@")
    assert ctype == "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
    assert isinstance(body, bytes)
    document = _fields(body)
    assert document[1] == b"2.0"  # swagger
    info = _fields(document[2])
    assert (info[1], info[2]) == (b"Kubernetes", git_version(DEFAULT_K8S_VERSION).encode())
    assert 9 not in document  # no definitions: every kind is schemaless to kubectl


def test_unacceptable_media_types_get_406() -> None:
    for path in ("/openapi/v2", "/openapi/v3"):
        status, body = get(path, "application/xml")
        assert status == 406
        assert body["reason"] == "NotAcceptable"
    assert get("/openapi/v2", "application/xml, application/json")[0] == 200


@pytest.mark.parametrize(
    "path", ["/openapi/v3/apis/nope.example.com/v1", "/openapi/v3/api/v2", "/openapi/v4"]
)
def test_unknown_documents_are_404(path: str) -> None:
    status, body = get(path)
    assert status == 404
    assert body["kind"] == "Status"
    assert body["code"] == 404


@pytest.mark.parametrize("path", ["/api", "/apis/apps/v1", "/version", "/openapiv3", "/"])
def test_other_paths_are_not_openapi(path: str) -> None:
    assert handle_openapi(path, "application/json") is None


def _walk(node: Any) -> Iterator[tuple[str, Any]]:
    if isinstance(node, dict):
        for key, value in node.items():
            yield key, value
            yield from _walk(value)
    elif isinstance(node, list):
        for item in node:
            yield from _walk(item)


@pytest.mark.parametrize("key", sorted(v3_index()["paths"]))
def test_schemas_are_openapi_3_0_with_resolvable_refs(key: str) -> None:
    doc = v3_document(key)
    assert doc is not None
    schemas = doc["components"]["schemas"]
    assert schemas, key
    allowed = {  # OpenAPI 3.0's schema keywords (no JSON Schema-only ones such as $defs)
        "type", "format", "enum", "properties", "items", "additionalProperties", "required",
        "description", "allOf", "oneOf", "anyOf", "not", "$ref", "default", "nullable",
        "minimum", "maximum", "pattern", "minLength", "maxLength", "minItems", "maxItems",
        "uniqueItems", "readOnly",
    }  # fmt: skip
    for name, schema in schemas.items():
        for keyword, value in _walk(schema):
            if keyword == "$ref":
                assert value.removeprefix("#/components/schemas/") in schemas, (name, value)
        unknown = {k for k in schema if k not in allowed and not k.startswith("x-kubernetes-")}
        assert not unknown, (name, unknown)
        assert not isinstance(schema.get("type"), list), name
    tagged = {
        (g["group"], g["version"], g["kind"])
        for s in schemas.values()
        for g in s.get("x-kubernetes-group-version-kind", [])
    }
    served = {
        (rt.group, rt.version, rt.kind)
        for rt in RESOURCES
        if key == (f"apis/{rt.group}/{rt.version}" if rt.group else f"api/{rt.version}")
    }
    assert served <= tagged


def test_schema_details_kubectl_explain_reads() -> None:
    doc = v3_document("api/v1")
    assert doc is not None
    schemas = doc["components"]["schemas"]
    port = schemas["io.k8s.api.core.v1.ServicePort"]
    int_or_string = "#/components/schemas/io.k8s.apimachinery.pkg.util.intstr.IntOrString"
    assert port["properties"]["targetPort"]["allOf"] == [{"$ref": int_or_string}]
    assert schemas[int_or_string.rsplit("/", 1)[-1]]["format"] == "int-or-string"
    assert port["properties"]["port"]["type"] == "integer"
    assert "port" in port["required"]
    spec = schemas["io.k8s.api.core.v1.Service"]["properties"]["spec"]
    assert spec["allOf"] == [{"$ref": "#/components/schemas/io.k8s.api.core.v1.ServiceSpec"}]
    assert spec["description"]
    described = schemas["io.k8s.api.core.v1.Service"]["description"]
    assert described.startswith("Service is a named abstraction")
    assert "Attributes:" not in described
    labels = schemas["io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"]["properties"]["labels"]
    assert labels["type"] == "object"
    assert labels["additionalProperties"] == {"type": "string"}
    event_kinds = [s for s in schemas if s.endswith(".Event")]
    assert event_kinds == ["io.k8s.api.core.v1.Event"]
    refs = {
        r["$ref"].removeprefix("#/components/schemas/")
        for r in _nodes(schemas)
        if isinstance(r.get("$ref"), str)
    }
    assert refs <= set(schemas), "every reference resolves inside the document"


def _nodes(value: Any) -> list[dict[str, Any]]:
    if isinstance(value, dict):
        return [value, *(n for sub in value.values() for n in _nodes(sub))]
    if isinstance(value, list):
        return [n for sub in value for n in _nodes(sub)]
    return []

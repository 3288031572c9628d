"""Wire-format details: protobuf request bodies and fieldValidation [apiserver-spec.md 1.8, 6.9].

The protobuf bodies here are built by a tiny encoder following ``k8s.io/api`` generated.proto
field numbers, the same bytes kubectl's generator subcommands send.
"""

from __future__ import annotations

import json

import pytest

from lab.kube.protobuf import MAGIC, ProtobufError, decode_object
from lab.kube.server import KubeServer
from tests.kube.conftest import raw

PB = {"Content-Type": "application/vnd.kubernetes.protobuf"}


def varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def field(num: int, value: bytes | str | int) -> bytes:
    if isinstance(value, int):
        return varint(num << 3) + varint(value)
    data = value.encode() if isinstance(value, str) else value
    return varint(num << 3 | 2) + varint(len(data)) + data


def entry(num: int, key: str, value: str | bytes) -> bytes:
    return field(num, field(1, key) + field(2, value))


def envelope(api_version: str, kind: str, raw_obj: bytes) -> bytes:
    type_meta = field(1, api_version) + field(2, kind)
    return MAGIC + field(1, type_meta) + field(2, raw_obj)


def test_decode_configmap_secret_and_service() -> None:
    meta = field(1, "cm1") + entry(11, "app", "x") + field(8, b"")  # zero creationTimestamp
    cm = decode_object(
        envelope(
            "v1", "ConfigMap", field(1, meta) + entry(2, "a", "1") + entry(3, "b", b"\x00\x01")
        )
    )
    assert cm == {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "cm1", "labels": {"app": "x"}},
        "data": {"a": "1"},
        "binaryData": {"b": "AAE="},
    }
    secret = decode_object(
        envelope(
            "v1",
            "Secret",
            field(1, field(1, "s")) + entry(2, "pw", b"hunter2") + field(3, "Opaque"),
        )
    )
    assert secret["data"] == {"pw": "aHVudGVyMg=="}
    assert secret["type"] == "Opaque"
    port = (
        field(1, "80-8080")
        + field(2, "TCP")
        + field(3, 80)
        + field(4, field(1, 0) + field(2, 8080))
        + field(5, 0)
    )
    named = field(3, 443) + field(4, field(1, 1) + field(3, "https"))
    spec = (
        field(1, port)
        + field(1, named)
        + entry(2, "app", "web")
        + field(4, "LoadBalancer")
        + field(3, "")
    )
    svc = decode_object(envelope("v1", "Service", field(1, field(1, "web")) + field(2, spec)))
    assert svc["spec"] == {
        "ports": [
            {"name": "80-8080", "protocol": "TCP", "port": 80, "targetPort": 8080},
            {"port": 443, "targetPort": "https"},
        ],
        "selector": {"app": "web"},
        "type": "LoadBalancer",
    }


def test_decode_rejects_garbage_and_unsupported_kinds() -> None:
    with pytest.raises(ProtobufError, match="magic"):
        decode_object(b"{}")
    with pytest.raises(ProtobufError, match="not supported"):
        decode_object(envelope("v1", "Pod", b""))
    with pytest.raises(ProtobufError, match="truncated"):
        decode_object(MAGIC + b"\x0a\x80")


def test_protobuf_create_over_http(sim: KubeServer) -> None:
    body = envelope("v1", "Namespace", field(1, field(1, "pb-ns")))
    status, ns = raw(sim, "POST", "/api/v1/namespaces", body, PB)
    assert status == 201
    assert ns["status"]["phase"] == "Active"
    status, err = raw(
        sim, "POST", "/api/v1/namespaces/default/pods", envelope("v1", "Pod", b""), PB
    )
    assert status == 415
    assert err["reason"] == "UnsupportedMediaType"
    status, err = raw(sim, "POST", "/api/v1/namespaces", MAGIC + b"\x0a\x80", PB)
    assert status == 400


def test_field_validation_modes(sim: KubeServer) -> None:
    def create(name: str, mode: str | None) -> tuple[int, dict[str, object]]:
        body = json.dumps({"metadata": {"name": name, "bogus": 1}, "dataa": {"k": "v"}}).encode()
        query = f"?fieldValidation={mode}" if mode else ""
        return raw(
            sim,
            "POST",
            f"/api/v1/namespaces/default/configmaps{query}",
            body,
            {"Content-Type": "application/json"},
        )

    status, err = create("strict", "Strict")
    assert status == 400
    assert (
        err["message"]
        == 'strict decoding error: unknown field "dataa", unknown field "metadata.bogus"'
    )
    for name, mode in (("warn", None), ("ignore", "Ignore")):
        status, obj = create(name, mode)
        assert status == 201
        assert "dataa" not in obj
        assert "bogus" not in obj["metadata"]
    status, err = create("bad", "Loud")
    assert status == 400
    assert "fieldValidation: Unsupported value" in str(err["message"])


def test_list_and_watch_option_validation(sim: KubeServer) -> None:
    base = "/api/v1/namespaces/default/configmaps"
    status, err = raw(sim, "GET", f"{base}?resourceVersionMatch=NotOlderThan")
    assert status == 422
    assert err["details"]["kind"] == "ListOptions"
    assert "resourceVersionMatch is forbidden unless resourceVersion is provided" in err["message"]
    status, err = raw(sim, "GET", f"{base}?resourceVersion=0&resourceVersionMatch=Exact")
    assert status == 422
    assert 'resourceVersionMatch "exact" is forbidden for resourceVersion "0"' in err["message"]
    status, err = raw(sim, "GET", f"{base}?watch=1&resourceVersionMatch=NotOlderThan")
    assert status == 422
    assert "forbidden for watch unless sendInitialEvents is provided" in err["message"]
    status, err = raw(sim, "GET", f"{base}/kube-root-ca.crt?resourceVersion=999999999")
    assert status == 504
    assert err["reason"] == "Timeout"
    assert err["message"].startswith("Timeout: Too large resource version: 999999999, current: ")
    status, err = raw(sim, "GET", f"{base}?labelSelector=a%20in%20b")
    assert status == 400
    status, err = raw(sim, "DELETE", f"{base}/kube-root-ca.crt?dryRun=Some")
    assert status == 422
    assert err["details"]["kind"] == "DryRunOptions"

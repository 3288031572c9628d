"""Hostile and malformed input to the API simulator: refused as kube-apiserver refuses it.

Issue 27: one bad request never changes the store, and the answer (code, reason, message) is
the real server's: apps and core validation (negative replicas, a targetPort that is no
IANA service name), the field manager's validation, the strict decoder's duplicate fields,
a patch that moves an object to another namespace or kind, a continue token or watch timeout
past int64, and the system namespaces the apiserver keeps in existence.
"""

from __future__ import annotations

import base64
import http.client
import json
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest
from kubernetes import client, watch

from lab.kube.server import KubeServer

JSON = {"Content-Type": "application/json"}
MERGE = {"Content-Type": "application/merge-patch+json"}


@pytest.fixture(scope="module")
def kube() -> Iterator[KubeServer]:
    with KubeServer() as sim:
        yield sim


@pytest.fixture
def sim(kube: KubeServer) -> Iterator[KubeServer]:
    kube.control.reset()
    kube.take_internal_errors()
    yield kube
    assert kube.take_internal_errors() == []


def call(
    sim: KubeServer, method: str, path: str, body: bytes | None = None, headers: Any = None
) -> tuple[int, dict[str, str], dict[str, Any]]:
    """One raw request: (status, headers, decoded JSON body)."""
    parts = urlsplit(sim.url)
    conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=30)
    try:
        sent = dict(headers or {})
        if sim.token:
            sent["Authorization"] = f"Bearer {sim.token}"
        conn.request(method, path, body=body, headers=sent)
        resp = conn.getresponse()
        return resp.status, dict(resp.getheaders()), json.loads(resp.read() or b"{}")
    finally:
        conn.close()


def deployment(name: str, replicas: int) -> dict[str, Any]:
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]},
            },
        },
    }


def test_negative_deployment_replicas_are_refused(sim: KubeServer) -> None:
    apps = client.AppsV1Api(sim.api_client())
    with pytest.raises(client.ApiException) as refused:
        apps.create_namespaced_deployment("default", deployment("neg", -1))
    assert refused.value.status == 422
    status = json.loads(refused.value.body)
    assert status["reason"] == "Invalid"
    assert status["message"] == (
        'Deployment.apps "neg" is invalid: spec.replicas: Invalid value: -1: '
        "must be greater than or equal to 0"
    )
    assert apps.list_namespaced_deployment("default").items == []
    # an update, a patch and the scale subresource refuse it as well, and change nothing
    apps.create_namespaced_deployment("default", deployment("web", 2))
    for write in (
        lambda: apps.replace_namespaced_deployment("web", "default", deployment("web", -1)),
        lambda: apps.patch_namespaced_deployment("web", "default", {"spec": {"replicas": -1}}),
        lambda: apps.patch_namespaced_deployment_scale(
            "web", "default", {"spec": {"replicas": -1}}
        ),
    ):
        with pytest.raises(client.ApiException) as again:
            write()
        assert again.value.status == 422
        assert "spec.replicas: Invalid value: -1: must be greater than or equal to 0" in str(
            json.loads(again.value.body)["message"]
        )
    assert apps.read_namespaced_deployment("web", "default").spec.replicas == 2


@pytest.mark.parametrize("kind", ["ReplicaSet", "StatefulSet"])
def test_negative_replicas_of_other_workloads(sim: KubeServer, kind: str) -> None:
    body = deployment("neg", -1) | {"kind": kind}
    status, _, answer = call(
        sim,
        "POST",
        f"/apis/apps/v1/namespaces/default/{kind.lower()}s",
        json.dumps(body).encode(),
        JSON,
    )
    assert status == 422, answer
    assert (
        "spec.replicas: Invalid value: -1: must be greater than or equal to 0" in answer["message"]
    )


@pytest.mark.parametrize(
    ("target", "problems"),
    [
        (
            "Not_A-Name--x",
            [
                "must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)",
                "must not contain consecutive hyphens",
            ],
        ),
        ("way-too-long-port-name", ["must be no more than 15 characters"]),
        ("8080", ["must contain at least one letter (a-z)"]),
        ("-http", ["must not begin or end with a hyphen"]),
    ],
)
def test_target_port_must_be_an_iana_service_name(
    sim: KubeServer, target: str, problems: list[str]
) -> None:
    core = client.CoreV1Api(sim.api_client())
    svc = {"metadata": {"name": "svc"}, "spec": {"ports": [{"port": 80, "targetPort": target}]}}
    with pytest.raises(client.ApiException) as refused:
        core.create_namespaced_service("default", svc)
    assert refused.value.status == 422
    message = json.loads(refused.value.body)["message"]
    for problem in problems:
        assert f'spec.ports[0].targetPort: Invalid value: "{target}": {problem}' in message
    assert [s.metadata.name for s in core.list_namespaced_service("default").items] == [
        "kubernetes"
    ]
    svc["spec"]["ports"][0]["targetPort"] = "http-alt"
    assert core.create_namespaced_service("default", svc).spec.ports[0].target_port == "http-alt"


@pytest.mark.parametrize(
    ("method", "path", "options"),
    [
        ("POST", "/api/v1/namespaces/default/configmaps", "CreateOptions"),
        ("PUT", "/api/v1/namespaces/default/configmaps/cm", "UpdateOptions"),
        ("PATCH", "/api/v1/namespaces/default/configmaps/cm", "PatchOptions"),
    ],
)
@pytest.mark.parametrize(
    ("manager", "shown", "detail"),
    [
        ("a%00b", '"a\\x00b"', "invalid character U+0000 (at position 1)"),
        ("ctl%0A", '"ctl\\n"', "invalid character U+000A (at position 3)"),
    ],
)
def test_field_manager_must_be_printable(
    sim: KubeServer, method: str, path: str, options: str, manager: str, shown: str, detail: str
) -> None:
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}}
    assert (
        call(sim, "POST", "/api/v1/namespaces/default/configmaps", json.dumps(cm).encode(), JSON)[0]
        == 201
    )
    body = {"data": {"k": "v"}} if method == "PATCH" else cm | {"data": {"k": "v"}}
    if method == "POST":
        body["metadata"] = {"name": "cm2"}
    headers = MERGE if method == "PATCH" else JSON
    status, _, answer = call(
        sim, method, f"{path}?fieldManager={manager}", json.dumps(body).encode(), headers
    )
    assert status == 422, answer
    assert answer["reason"] == "Invalid"
    assert answer["message"] == (
        f'{options}.meta.k8s.io "" is invalid: fieldManager: Invalid value: {shown}: {detail}'
    )
    # nothing changed
    status, _, items = call(sim, "GET", "/api/v1/namespaces/default/configmaps")
    assert [(i["metadata"]["name"], i.get("data")) for i in items["items"]] == [
        ("cm", None),
        ("kube-root-ca.crt", items["items"][1]["data"]),
    ]


DUPLICATED = (
    b'{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"dup"},"data":{"a":"1","a":"2"}}'
)


def test_duplicate_fields_under_strict_validation_are_refused(sim: KubeServer) -> None:
    path = "/api/v1/namespaces/default/configmaps"
    status, _, answer = call(sim, "POST", f"{path}?fieldValidation=Strict", DUPLICATED, JSON)
    assert status == 400, answer
    assert answer["reason"] == "BadRequest"
    assert answer["message"] == 'strict decoding error: duplicate field "data.a"'
    assert call(sim, "GET", f"{path}/dup")[0] == 404


def test_duplicate_fields_warn_by_default_and_ignore_is_silent(sim: KubeServer) -> None:
    path = "/api/v1/namespaces/default/configmaps"
    status, headers, stored = call(sim, "POST", path, DUPLICATED, JSON)
    assert status == 201
    assert headers.get("Warning") == '299 - "duplicate field \\"data.a\\""'
    assert stored["data"] == {"a": "2"}  # the last one wins, as in Go's decoder
    body = DUPLICATED.replace(b'"dup"', b'"quiet"')
    status, headers, _ = call(sim, "POST", f"{path}?fieldValidation=Ignore", body, JSON)
    assert status == 201
    assert "Warning" not in headers
    # a merge patch's body is decoded strictly too
    patch = b'{"data":{"b":"1","b":"2"}}'
    status, _, answer = call(sim, "PATCH", f"{path}/dup?fieldValidation=Strict", patch, MERGE)
    assert (status, answer["message"]) == (400, 'strict decoding error: duplicate field "data.b"')
    status, headers, _ = call(sim, "PATCH", f"{path}/dup", patch, MERGE)
    assert status == 200
    assert headers.get("Warning") == '299 - "duplicate field \\"data.b\\""'


def test_a_patch_may_not_move_an_object_to_another_namespace_or_kind(sim: KubeServer) -> None:
    core = client.CoreV1Api(sim.api_client())
    core.create_namespaced_config_map("default", {"metadata": {"name": "cm"}, "data": {"k": "v"}})
    path = "/api/v1/namespaces/default/configmaps/cm"
    before = core.read_namespaced_config_map("cm", "default").metadata.resource_version
    status, _, answer = call(sim, "PATCH", path, b'{"metadata":{"namespace":"kube-system"}}', MERGE)
    assert (status, answer["reason"], answer["message"]) == (
        400,
        "BadRequest",
        "the namespace of the provided object does not match the namespace sent on the request",
    )
    status, _, answer = call(sim, "PATCH", path, b'{"kind":"Secret"}', MERGE)
    assert (status, answer["reason"]) == (422, "Invalid")
    assert answer["message"] == (
        ' "" is invalid: patch: Invalid value: "{\\"kind\\":\\"Secret\\"}": '
        "converting (v1.Secret) to (core.ConfigMap): unknown conversion"
    )
    status, _, answer = call(
        sim,
        "PATCH",
        path,
        b'[{"op":"replace","path":"/kind","value":"Frobnicator"}]',
        {"Content-Type": "application/json-patch+json"},
    )
    assert status == 422
    assert 'no kind "Frobnicator" is registered for version "v1"' in answer["message"]
    after = core.read_namespaced_config_map("cm", "default")
    assert after.metadata.resource_version == before
    with pytest.raises(client.ApiException) as missing:
        core.read_namespaced_config_map("cm", "kube-system")
    assert missing.value.status == 404


def continue_token(rv: int) -> str:
    raw = json.dumps({"v": "meta.k8s.io/v1", "rv": rv, "start": "default/a\x00"})
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def test_continue_token_past_int64_is_a_bad_request(sim: KubeServer) -> None:
    path = "/api/v1/namespaces/default/configmaps?limit=1&continue="
    status, _, answer = call(sim, "GET", path + continue_token(2**70))
    assert (status, answer["reason"]) == (400, "BadRequest")
    assert answer["message"] == (
        "invalid continue token: continue key is not valid: json: cannot unmarshal number "
        "1180591620717411303424 into Go struct field continueToken.rv of type int64"
    )
    # in range but ahead of the store: etcd's own error, as the etcd3 store passes it on
    status, _, answer = call(sim, "GET", path + continue_token(2**40))
    assert (status, answer["message"]) == (
        500,
        "etcdserver: mvcc: required revision is a future revision",
    )


@pytest.mark.parametrize("value", ["100000000000000000000", "-9223372036854775809"])
def test_watch_timeout_past_int64_is_a_bad_request(sim: KubeServer, value: str) -> None:
    status, _, answer = call(
        sim, "GET", f"/api/v1/namespaces/default/configmaps?watch=1&timeoutSeconds={value}"
    )
    assert (status, answer["reason"]) == (400, "BadRequest")
    assert answer["message"] == f'strconv.ParseInt: parsing "{value}": value out of range'


def test_kube_node_lease_comes_back_and_the_immortal_ones_stay(sim: KubeServer) -> None:
    core = client.CoreV1Api(sim.api_client())
    before = core.read_namespace("kube-node-lease").metadata.uid
    version = core.list_namespace().metadata.resource_version
    core.delete_namespace("kube-node-lease")
    # the system-namespaces controller creates it again: a watcher sees it go and come back
    seen = []
    for event in watch.Watch().stream(
        core.list_namespace,
        resource_version=version,
        field_selector="metadata.name=kube-node-lease",
        timeout_seconds=60,
    ):
        seen.append(event["type"])
        if event["type"] == "ADDED":
            break
    assert seen[-2:] == ["DELETED", "ADDED"]
    again = core.read_namespace("kube-node-lease")
    assert again.metadata.uid != before
    assert again.status.phase == "Active"
    for name in ("default", "kube-system", "kube-public"):
        with pytest.raises(client.ApiException) as refused:
            core.delete_namespace(name)
        assert refused.value.status == 403
        assert json.loads(refused.value.body)["message"] == (
            f'namespaces "{name}" is forbidden: this namespace may not be deleted'
        )

"""The lab's client-side Kubernetes errors (``lab.kubeclient``): one table from a ``Status``
code and reason to a class, the class following the HTTP status and the reason narrowing it, and
the official client's ``ApiException`` never leaking out of a ``typed_api`` object or the data
plane's ``Api``."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from lab.dataplane.api import Api
from lab.kube.server import KubeServer
from lab.kubeclient import (
    ERRORS,
    AlreadyExists,
    Conflict,
    Expired,
    Gone,
    Invalid,
    KubeError,
    NotFound,
    WireApi,
    error_from,
    translate,
    typed_api,
)


def _status(code: int, reason: str, message: str = "m") -> str:
    return json.dumps(
        {"kind": "Status", "status": "Failure", "code": code, "reason": reason, "message": message}
    )


@pytest.mark.parametrize(
    ("code", "reason", "expected"),
    [
        (404, "NotFound", NotFound),
        (409, "Conflict", Conflict),
        (409, "AlreadyExists", AlreadyExists),
        (410, "Expired", Expired),
        (410, "Gone", Gone),
        (422, "Invalid", Invalid),
        (409, "NotFound", Conflict),  # a reason of another code does not move the class
        (418, "Teapot", KubeError),  # a code the table does not know
    ],
)
def test_the_code_picks_the_class_and_the_reason_narrows_it(
    code: int, reason: str, expected: type[KubeError]
) -> None:
    err = error_from(code, "Phrase", _status(code, reason, "it said so"))
    assert type(err) is expected
    assert (err.status, err.reason, err.message) == (code, reason, "it said so")
    assert err.body["code"] == code


def test_an_already_exists_is_a_conflict_as_status_409_was() -> None:
    assert isinstance(error_from(409, "Conflict", _status(409, "AlreadyExists")), Conflict)
    assert isinstance(error_from(410, "Gone", _status(410, "Expired")), Gone)


def test_a_body_that_is_not_a_status_keeps_the_phrase_and_text() -> None:
    err = error_from(404, "Not Found", b"404 page not found\n")
    assert type(err) is NotFound
    assert (err.reason, err.message, err.body) == ("Not Found", "404 page not found", {})


def test_every_reason_class_sits_under_its_codes_class() -> None:
    by_code = {e.code: e for e in ERRORS if e.__base__ is KubeError}
    assert len(by_code) == len({e.code for e in ERRORS})
    for e in ERRORS:
        assert issubclass(e, by_code[e.code])
    assert len({e.status_reason for e in ERRORS}) == len(ERRORS)


def test_translate_takes_the_client_exception_apart() -> None:
    exc = ApiException(status=409, reason="Conflict")
    exc.body = _status(409, "AlreadyExists", 'nodes "n1" already exists')
    err = translate(exc)
    assert type(err) is AlreadyExists
    assert err.message == 'nodes "n1" already exists'


@pytest.fixture(scope="module")
def kube() -> Iterator[KubeServer]:
    with KubeServer() as server:
        yield server


def test_typed_api_raises_typed_errors_and_never_the_client_exception(kube: KubeServer) -> None:
    core: Any = typed_api(client.CoreV1Api(kube.api_client()))
    with pytest.raises(NotFound) as missing:
        core.read_node("absent")
    assert not isinstance(missing.value, ApiException)
    assert isinstance(missing.value.__cause__, ApiException)
    node = {"metadata": {"name": "typed-n1"}}
    core.create_node(node)
    with pytest.raises(AlreadyExists):
        core.create_node(node)
    stale = {"metadata": {"name": "typed-n1", "resourceVersion": "1"}}
    with pytest.raises(Conflict) as conflict:
        core.replace_node("typed-n1", stale)
    assert type(conflict.value) is Conflict
    assert core.api_client is not None  # attributes pass through untouched


def test_the_data_plane_api_raises_typed_errors(kube: KubeServer) -> None:
    api = Api(kube.api_client())
    with pytest.raises(NotFound) as missing:
        api.get("/api/v1/namespaces/default/pods/absent")
    assert missing.value.reason == "NotFound"
    with pytest.raises(Invalid):
        api.create("/api/v1/namespaces/default/configmaps", {"metadata": {"name": "Bad_Name"}})


class _Sent(Exception):
    """Raised by a stubbed ``call_api``: what the client would have sent."""


def _sent(api_client: Any, call: Any) -> tuple[Any, ...]:
    """The request (method, URL, headers, body, form) ``call`` makes through ``api_client``."""
    original = api_client.call_api

    def capture(*request: Any, **_: Any) -> Any:
        raise _Sent(request)

    api_client.call_api = capture
    try:
        with pytest.raises(_Sent) as sent:
            call()
    finally:
        api_client.call_api = original
    return tuple(sent.value.args[0])


def test_wire_api_sends_what_the_generated_methods_send() -> None:
    """Each request the kubelet stand-in makes, built both ways (TLS and a token, as the lab
    serves): the same method, URL, headers and body."""
    with KubeServer(tls=True, token="wire-token") as kube:
        api_client = kube.api_client()
        _compare_wire_and_generated(api_client)


def _compare_wire_and_generated(api_client: Any) -> None:
    core, coordination = client.CoreV1Api(api_client), client.CoordinationV1Api(api_client)
    wire = WireApi(api_client)
    smp = "application/strategic-merge-patch+json"
    lease = client.V1Lease.from_dict(
        {
            "metadata": {"name": "n 1", "namespace": "kube-node-lease"},
            "spec": {"holderIdentity": "n"},
        }
    )
    node = client.V1Node.from_dict({"metadata": {"name": "n1", "labels": {"a": "b"}}})
    patch = {"status": {"conditions": [{"type": "Ready", "status": "True"}]}}
    leases = "/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"
    pairs = [
        (lambda: core.create_node(node, _preload_content=False),
         lambda: wire.call("POST", "/api/v1/nodes", node)),
        (lambda: core.read_node("n/1", _preload_content=False),
         lambda: wire.call("GET", "/api/v1/nodes/{name}", name="n/1")),
        (lambda: core.delete_node("n1", _preload_content=False),
         lambda: wire.call("DELETE", "/api/v1/nodes/{name}", name="n1")),
        (lambda: core.patch_node_status("n1", patch, _content_type=smp, _preload_content=False),
         lambda: wire.call("PATCH", "/api/v1/nodes/{name}/status", patch, content_type=smp,
                           name="n1")),
        (lambda: coordination.replace_namespaced_lease(
            "n 1", "kube-node-lease", lease, _preload_content=False),
         lambda: wire.call("PUT", leases + "/{name}", lease, namespace="kube-node-lease",
                           name="n 1")),
        (lambda: coordination.create_namespaced_lease(
            "kube-node-lease", lease, _preload_content=False),
         lambda: wire.call("POST", leases, lease, namespace="kube-node-lease")),
    ]  # fmt: skip
    for generated, ours in pairs:
        assert _sent(api_client, ours) == _sent(api_client, generated)


def test_wire_api_answers_json_and_raises_typed_errors(kube: KubeServer) -> None:
    wire = WireApi(kube.api_client())
    with pytest.raises(NotFound) as missing:
        wire.call("GET", "/api/v1/nodes/{name}", name="wire-absent")
    assert isinstance(missing.value.__cause__, ApiException)
    created = wire.call("POST", "/api/v1/nodes", {"metadata": {"name": "wire-n1"}})
    assert created["metadata"]["name"] == "wire-n1"
    with pytest.raises(AlreadyExists):
        wire.call("POST", "/api/v1/nodes", {"metadata": {"name": "wire-n1"}})
    assert wire.call("GET", "/api/v1/nodes/{name}", name="wire-n1")["kind"] == "Node"

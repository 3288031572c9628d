"""ApiKube against the API simulator: request shapes and the error table.

No ``kubernetes``/``urllib3`` exception may leave the seam: every failure is one of
``controller.runtime.kube``'s classes, chosen from the ``Status`` reason/code.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from controller.runtime.events import EventRecorder, ObjectRef
from controller.runtime.kube import (
    AlreadyExists,
    ApiKube,
    Conflict,
    Expired,
    KubeError,
    NotFound,
    Unavailable,
    error_from_status,
)
from tests.controller.builders import make_node

server = pytest.importorskip("lab.kube.server", reason="needs the lab's API simulator")


@pytest.fixture(scope="module")
def sim() -> Iterator[Any]:
    with server.KubeServer() as s:
        yield s


@pytest.fixture
def kube(sim: Any) -> Iterator[ApiKube]:
    sim.control.reset()
    k = ApiKube.from_kubeconfig(str(sim.kubeconfig_path))
    yield k
    k.close()
    assert sim.take_internal_errors() == []


def create_node(sim: Any, name: str) -> None:
    sim.control.seed([make_node(name)])


def test_error_table() -> None:
    assert isinstance(error_from_status(404, b'{"reason":"NotFound","message":"x"}'), NotFound)
    assert isinstance(error_from_status(409, b'{"reason":"AlreadyExists"}'), AlreadyExists)
    assert isinstance(error_from_status(409, b'{"reason":"Conflict"}'), Conflict)
    assert isinstance(error_from_status(200, {"code": 410, "reason": "Expired"}), Expired)
    other = error_from_status(503, b"not json")
    assert type(other) is KubeError
    assert other.code == 503
    assert str(other) == "not json"


def test_http_errors_map_to_seam_classes(sim: Any, kube: ApiKube) -> None:
    with pytest.raises(NotFound, match='nodes "absent" not found'):
        kube.get_node("absent")
    create_node(sim, "n1")
    node = kube.get_node("n1")
    stale = dict(node)
    changed = {**node, "metadata": {**node["metadata"], "labels": {"x": "1"}}}
    kube.replace_node(changed)
    with pytest.raises(Conflict):
        kube.replace_node(stale)
    sim.control.add_fault(verb="list", resource="nodes", status=503, message="etcd is sad", count=1)
    with pytest.raises(KubeError, match="etcd is sad") as exc:
        kube.list_objects("nodes")
    assert exc.value.code == 503
    lease = {"metadata": {"name": "l", "namespace": "default"}, "spec": {}}
    kube.create_lease("default", lease)
    with pytest.raises(AlreadyExists):
        kube.create_lease("default", lease)


def test_no_answer_is_unavailable() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    from kubernetes import client

    cfg = client.Configuration()
    cfg.host = f"http://127.0.0.1:{port}"
    cfg.retries = 0
    kube = ApiKube(client.ApiClient(cfg), request_timeout=2)
    with pytest.raises(Unavailable, match="GET /api/v1/nodes"):
        kube.list_objects("nodes")


def test_watch_from_compacted_version_raises_expired(sim: Any, kube: ApiKube) -> None:
    _, rv = kube.list_objects("nodes")
    create_node(sim, "n1")
    sim.control.compact()
    stream = kube.watch_objects("nodes", rv, 5)
    with pytest.raises(Expired, match="too old resource version"):
        list(stream)


def test_watch_close_from_another_thread_ends_the_stream(sim: Any, kube: ApiKube) -> None:
    _, rv = kube.list_objects("nodes")
    stream = kube.watch_objects("nodes", rv, 60)
    got_one, ended = threading.Event(), threading.Event()

    def read() -> None:
        for _ in stream:
            got_one.set()  # then back into recv for the next event, which never comes
        ended.set()

    t = threading.Thread(target=read, daemon=True)
    t.start()
    create_node(sim, "n1")
    assert got_one.wait(10)  # the reader is reading (closing an unread stream is the easy case)
    stream.close()
    # the server would end this watch only after 60 s: ending well before that is the close's
    assert ended.wait(30)


def test_event_aggregation_patches_count_on_the_server(kube: ApiKube) -> None:
    rec = EventRecorder(kube, "service-controller")
    ref = ObjectRef("Service", "web", "default", "uid-web")
    for _ in range(3):
        rec.event(ref, "Warning", "SyncLoadBalancerFailed", "Error syncing load balancer: x")
    rec.event(ref, "Normal", "EnsuredLoadBalancer", "Ensured load balancer")
    from kubernetes import client

    core: Any = client.CoreV1Api(kube._api)
    items = {e.reason: e for e in core.list_namespaced_event("default").items}
    assert items["SyncLoadBalancerFailed"].count == 3
    assert items["SyncLoadBalancerFailed"].source.component == "service-controller"
    assert items["SyncLoadBalancerFailed"].involved_object.uid == "uid-web"
    assert items["EnsuredLoadBalancer"].count == 1

"""The watch cache window and etcd compaction: 410 for a watch or an exact list outside them,
per resource type, and informers that relist through it."""

from __future__ import annotations

import json
import threading
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from controller.runtime.informer import Handlers, Informer
from controller.runtime.kube import ApiKube
from lab.kube.exceptions import ApiError
from lab.kube.registry import Registry
from lab.kube.server import KubeServer
from lab.kube.store import Selection, WatchWindow
from lab.kube.watch import ExpiredError
from tests.kube.conftest import raw

# no age margin: only the last ``min_events`` of a type stay; compaction on every write
TIGHT = WatchWindow(min_events=2, max_events=10, fresh_seconds=0, compaction_seconds=0)


def cm(name: str, value: str = "1") -> dict[str, Any]:
    return {"metadata": {"name": name}, "data": {"v": value}}


def test_defaults_are_kube_apiservers() -> None:
    window = WatchWindow()
    assert (window.min_events, window.fresh_seconds, window.compaction_seconds) == (100, 75, 300)


def test_a_watch_before_the_window_is_too_old_per_resource_type() -> None:
    store = Registry(window=TIGHT)
    cms = store.rt("", "configmaps")
    secrets = store.rt("", "secrets")
    first = store.writer.create(cms, "default", cm("a"))["metadata"]["resourceVersion"]
    store.writer.create(secrets, "default", {"metadata": {"name": "s"}})
    for value in "234":
        store.writer.patch(
            cms, "default", "a", "application/merge-patch+json", {"data": {"v": value}}
        )
    # three newer ConfigMap events, two kept: the watch from ``first`` lost one
    with pytest.raises(ExpiredError) as info:
        store.watch(cms, "default", _no_selection(), resource_version=first)
    dropped = store.compacted(("", "configmaps"))
    assert dropped > int(first)
    assert info.value.message == f"too old resource version: {first} ({dropped})"
    # the same revision is fine for Secrets: their window is their own
    w, _ = store.watch(secrets, "default", _no_selection(), resource_version=first)
    w.close()
    # from the last dropped revision on, the kept events replay
    w, _ = store.watch(cms, "default", _no_selection(), resource_version=str(dropped))
    assert not w.empty()
    w.close()


def test_a_list_at_a_compacted_revision_is_too_old() -> None:
    store = Registry(window=TIGHT)
    cms = store.rt("", "configmaps")
    old = int(store.writer.create(cms, "default", cm("a"))["metadata"]["resourceVersion"])
    store.writer.create(cms, "default", cm("b"))
    store.writer.create(cms, "default", cm("c"))  # the compactor's round passed ``old``
    with pytest.raises(ApiError) as info:
        store.check_list_revision(old)
    assert (info.value.code, info.value.reason) == (410, "Expired")
    assert info.value.message == "The resourceVersion for the provided list is too old."
    store.check_list_revision(store.rv)  # the current revision is never compacted


@pytest.fixture
def tight() -> Iterator[KubeServer]:
    with KubeServer(window=TIGHT) as server:
        yield server
        assert server.take_internal_errors() == []


def _post(sim: KubeServer, body: dict[str, Any]) -> str:
    status, out = raw(
        sim,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        json.dumps(body).encode(),
        {"Content-Type": "application/json"},
    )
    assert status == 201, out
    return str(out["metadata"]["resourceVersion"])


def test_http_watch_and_exact_list_answer_410(tight: KubeServer) -> None:
    first = _post(tight, cm("a"))
    for name in "bcd":
        _post(tight, cm(name))
    base = tight.url + "/api/v1/namespaces/default/configmaps"
    with urllib.request.urlopen(f"{base}?watch=1&resourceVersion={first}", timeout=10) as resp:
        line = json.loads(resp.readline())
    assert line["type"] == "ERROR"
    assert line["object"]["code"] == 410
    assert line["object"]["reason"] == "Expired"
    assert line["object"]["message"].startswith(f"too old resource version: {first} (")
    status, body = raw(
        tight, "GET", f"/api/v1/configmaps?resourceVersion={first}&resourceVersionMatch=Exact"
    )
    assert status == 410
    assert body["message"] == "The resourceVersion for the provided list is too old."
    # the legacy exact case: a limit and a resourceVersion without a match
    assert raw(tight, "GET", f"/api/v1/configmaps?resourceVersion={first}&limit=1")[0] == 410
    # NotOlderThan is served from the cache: any newer state will do
    status, body = raw(
        tight,
        "GET",
        f"/api/v1/configmaps?resourceVersion={first}&resourceVersionMatch=NotOlderThan",
    )
    assert status == 200
    assert {i["metadata"]["name"] for i in body["items"]} >= {"a", "b", "c", "d"}


def test_the_controllers_informer_relists_after_410(tight: KubeServer) -> None:
    kube = ApiKube(tight.api_client())
    informer = Informer(kube, "services", max_backoff=0.05)
    seen: list[str] = []
    lock = threading.Lock()

    def added(obj: dict[str, Any]) -> None:
        with lock:
            seen.append(obj["metadata"]["name"])

    informer.add_handlers(Handlers(on_add=added))
    informer.start()
    try:
        assert informer.wait_synced(10)
        relists = informer.relists
        # its watch fails (503) until cleared, while more Services change than the window keeps
        tight.control.add_fault(verb="watch", resource="services", status=503)
        tight.control.close_watches()
        for i in range(4):
            status, out = raw(
                tight,
                "POST",
                "/api/v1/namespaces/default/services",
                json.dumps(
                    {"metadata": {"name": f"s{i}"}, "spec": {"ports": [{"port": 80}]}}
                ).encode(),
                {"Content-Type": "application/json"},
            )
            assert status == 201, out
        tight.control.clear_faults()
        # the re-watch from its old resourceVersion gets 410 and the informer lists again
        pause = threading.Event()
        for _ in range(600):  # up to 30 s under load
            with lock:
                if {f"s{i}" for i in range(4)} <= set(seen) and informer.relists > relists:
                    break
            pause.wait(0.05)
        with lock:
            assert {f"s{i}" for i in range(4)} <= set(seen)
        assert informer.relists > relists
    finally:
        informer.stop()


def _no_selection() -> Selection:
    return Selection()

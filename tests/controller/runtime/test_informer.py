"""Informer list+watch against the fake apiserver: relist on 410, re-watch on dropped streams."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from controller.fake import FakeKube
from controller.runtime.informer import Handlers, Informer
from controller.runtime.kube import Unavailable
from tests.controller.builders import edit, labelled, make_node


def wait_for(cond: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.01)
    raise AssertionError("condition not met in time")


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []
        self.lock = threading.Lock()

    def handlers(self) -> Handlers:
        def rec(kind: str) -> Callable[..., None]:
            def f(*objs: dict[str, Any]) -> None:
                with self.lock:
                    self.events.append((kind, objs[-1]["metadata"]["name"]))

            return f

        return Handlers(on_add=rec("add"), on_update=rec("update"), on_delete=rec("delete"))

    def seen(self) -> list[tuple[str, str]]:
        with self.lock:
            return list(self.events)


def start(kube: FakeKube) -> tuple[Informer, Recorder]:
    informer = Informer(kube, "nodes", max_backoff=0.05)
    rec = Recorder()
    informer.add_handlers(rec.handlers())
    informer.start()
    assert informer.wait_synced(5)
    return informer, rec


def test_list_then_watch_delivers_add_update_delete() -> None:
    kube = FakeKube()
    kube.create("nodes", make_node("a"))
    informer, rec = start(kube)
    try:
        kube.create("nodes", make_node("b"))
        kube.update("nodes", edit(kube.get("nodes", "a"), labelled("x", "1")))
        kube.delete("nodes", "b")
        wait_for(lambda: len(rec.seen()) == 4)
        assert rec.seen() == [("add", "a"), ("add", "b"), ("update", "a"), ("delete", "b")]
        node_a = informer.get("a")
        assert node_a is not None
        assert node_a["metadata"]["labels"]["x"] == "1"
        assert informer.get("b") is None
    finally:
        informer.stop()


def test_relist_on_410_emits_what_happened_meanwhile() -> None:
    kube = FakeKube()
    kube.create("nodes", make_node("a"))
    kube.create("nodes", make_node("gone"))
    informer, rec = start(kube)
    try:
        assert informer.relists == 1
        # An outage: the stream is cut, objects change, history is compacted.
        kube.hold_watches()
        kube.drop_watches()
        kube.create("nodes", make_node("new"))
        kube.delete("nodes", "gone")
        kube.compact()
        kube.hold_watches(False)
        wait_for(lambda: informer.get("new") is not None and informer.get("gone") is None)
        assert informer.relists == 2  # the re-watch got 410 Expired, then one relist
        assert rec.seen()[-2:] in (
            [("delete", "gone"), ("add", "new")],
            [("add", "new"), ("delete", "gone")],
        )
        assert sorted(o["metadata"]["name"] for o in informer.list()) == ["a", "new"]
        kube.create("nodes", make_node("after"))  # and it watches again afterwards
        wait_for(lambda: informer.get("after") is not None)
    finally:
        informer.stop()


def test_dropped_stream_rewatches_from_last_version_without_relist() -> None:
    kube = FakeKube()
    informer, rec = start(kube)
    try:
        kube.create("nodes", make_node("a"))
        wait_for(lambda: informer.get("a") is not None)
        kube.drop_watches()
        kube.create("nodes", make_node("b"))
        wait_for(lambda: informer.get("b") is not None)
        assert informer.relists == 1
        assert rec.seen() == [("add", "a"), ("add", "b")]
    finally:
        informer.stop()


def test_unavailable_apiserver_is_retried() -> None:
    kube = FakeKube()
    kube.fail("list", Unavailable("connection refused"), Unavailable("connection refused"))
    kube.create("nodes", make_node("a"))
    informer = Informer(kube, "nodes", max_backoff=0.05)
    informer.start()
    try:
        assert informer.wait_synced(5)
        assert informer.get("a") is not None
        assert [r for r in kube.requests if r == ("list", "nodes")] == [("list", "nodes")] * 3
    finally:
        informer.stop()

"""The machinery under every stand-in: informers (list, watch, indexes, relist after the
history is compacted or the watch closed) and the work-queue controller (dedup, no key synced
twice at once, AddAfter on the lab clock, retries)."""

from __future__ import annotations

import time
from collections.abc import Hashable, Iterator

import pytest

from lab.clock import ScaledClock
from lab.dataplane.api import PODS, Api, Obj, path
from lab.dataplane.controller import Controller
from lab.dataplane.informers import Informer
from lab.kube.server import KubeServer
from tests.dataplane.conftest import wait


@pytest.fixture
def sim() -> Iterator[KubeServer]:
    with KubeServer() as server:
        yield server
        assert server.internal_errors() == []


def pod(name: str, app: str = "a") -> Obj:
    return {
        "metadata": {"name": name, "labels": {"app": app}},
        "spec": {"containers": [{"name": "c", "image": "x"}]},
    }


def test_informer_lists_watches_indexes_and_relists(sim: KubeServer) -> None:
    api = Api(sim.api_client())
    api.create(path(PODS, "default"), pod("before"))
    informer = Informer(api, PODS)
    informer.add_index("app", lambda p: [p["metadata"]["labels"]["app"]])
    seen: list[tuple[str, str]] = []
    informer.add_handler(lambda event, obj, old: seen.append((event, obj["metadata"]["name"])))
    informer.start()
    try:
        assert informer.wait_synced()
        assert ("ADDED", "before") in seen
        api.create(path(PODS, "default"), pod("b", app="b"))
        wait("the watch event", lambda: informer.get("default", "b"))
        assert [p["metadata"]["name"] for p in informer.by_index("app", "b")] == ["b"]
        api.patch(path(PODS, "default", "b"), {"metadata": {"labels": {"app": "c"}}})
        wait("the index to follow the label", lambda: informer.by_index("app", "c"))
        assert informer.by_index("app", "b") == []
        # history compacted and the watch cut: changes made meanwhile arrive through a relist
        sim.control.compact()
        sim.control.close_watches()
        api.delete(path(PODS, "default", "before"), {"gracePeriodSeconds": 0})
        api.create(path(PODS, "default"), pod("after"))
        wait(
            "the relist",
            lambda: informer.get("default", "after") and informer.get("default", "before") is None,
        )
        assert ("DELETED", "before") in seen
        assert informer.errors == []
    finally:
        informer.stop()
    assert not informer.running


class Recorder(Controller):
    name = "recorder"
    workers = 3

    def __init__(self, clock: ScaledClock) -> None:
        super().__init__(clock)
        self.active: set[Hashable] = set()
        self.synced: list[Hashable] = []
        self.overlap = False
        self.fail_first: set[Hashable] = set()

    def sync(self, key: Hashable) -> None:
        if key in self.active:
            self.overlap = True
        self.active.add(key)
        time.sleep(0.02)
        self.synced.append(key)
        self.active.discard(key)
        if key in self.fail_first:
            self.fail_first.discard(key)
            raise RuntimeError("transient")


def test_controller_queue_semantics() -> None:
    clock = ScaledClock(100)
    controller = Recorder(clock)
    controller.fail_first.add("flaky")
    controller.start()
    try:
        for _ in range(5):
            controller.enqueue("a")  # dedup: queued at most once
        controller.enqueue("b")
        wait("a and b synced", lambda: {"a", "b"} <= set(controller.synced))
        controller.enqueue("a")
        time.sleep(0.005)
        controller.enqueue("a")  # while "a" runs: one more sync afterwards, never two at once
        wait("idle", lambda: controller.idle)
        assert not controller.overlap
        started = time.monotonic()
        controller.requeue_after("later", 100)  # 1 real second at 100x
        controller.requeue_after("later", 10)  # AddAfter keeps the earlier time
        wait("later", lambda: "later" in controller.synced)
        assert time.monotonic() - started < 0.9
        controller.enqueue("flaky")
        wait("retried after the failure", lambda: controller.synced.count("flaky") == 2)
        assert controller.errors == []
    finally:
        controller.stop()
    assert not controller.running

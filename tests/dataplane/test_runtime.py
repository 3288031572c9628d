"""The machinery under every stand-in: informers (list, watch, indexes, relist after the
history is compacted or the watch closed) and the work-queue controller (dedup, no key synced
twice at once, AddAfter on the lab clock, retries)."""

from __future__ import annotations

import threading
from collections.abc import Hashable, Iterator

import pytest

from lab.clock import LabClock, ManualClock, ScaledClock
from lab.dataplane.api import PODS, Api, path
from lab.dataplane.controller import Controller
from lab.dataplane.informers import Informer
from lab.kube.objects import Obj
from lab.kube.server import KubeServer
from lab.settle import SettleTimeout, settle
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

    def __init__(self, clock: LabClock) -> None:
        super().__init__(clock)
        self.active: set[Hashable] = set()
        self.synced: list[Hashable] = []
        self.overlap = False
        self.fail_first: set[Hashable] = set()
        #: syncs of these keys wait until the test opens the gate (after ``entered`` is set)
        self.gated: dict[Hashable, tuple[threading.Event, threading.Event]] = {}

    def sync(self, key: Hashable) -> None:
        if key in self.active:
            self.overlap = True
        self.active.add(key)
        gate = self.gated.pop(key, None)
        if gate is not None:
            entered, release = gate
            entered.set()
            release.wait(10)
        self.synced.append(key)
        self.active.discard(key)
        if key in self.fail_first:
            self.fail_first.discard(key)
            raise RuntimeError("transient")


def _settle(controller: Controller, clock: LabClock) -> None:
    settle(lambda: [controller], clock=clock, timeout=10)


def test_controller_queue_semantics() -> None:
    clock = ManualClock()
    controller = Recorder(clock)
    controller.fail_first.add("flaky")
    controller.start()
    try:
        for _ in range(5):
            controller.enqueue("a")  # dedup: queued at most once
        controller.enqueue("b")
        _settle(controller, clock)
        assert sorted(map(str, controller.synced)) == ["a", "b"]

        entered, release = threading.Event(), threading.Event()
        controller.gated["a"] = (entered, release)
        controller.enqueue("a")
        assert entered.wait(10)  # "a" is being synced now
        controller.enqueue("a")  # while it runs: one more sync afterwards, never two at once
        controller.enqueue("a")
        assert not controller.progress().settled
        release.set()
        _settle(controller, clock)
        assert controller.synced.count("a") == 3
        assert not controller.overlap

        controller.schedule("later", 100)
        controller.schedule("later", 10)  # AddAfter keeps the earlier time
        _settle(controller, clock)  # a scheduled timer is not waited for
        assert "later" not in controller.synced
        clock.advance(10)
        _settle(controller, clock)  # due now: it is
        assert controller.synced.count("later") == 1
        clock.advance(100)
        _settle(controller, clock)
        assert controller.synced.count("later") == 1  # the later time was superseded
        assert controller.errors == []
    finally:
        controller.stop()
    assert not controller.running


def test_a_failed_sync_is_retried_and_settle_waits_for_the_retry() -> None:
    clock = ScaledClock(1000)  # the backoff is lab time: 0.1 lab s here
    controller = Recorder(clock)
    controller.fail_first.add("flaky")
    controller.start()
    try:
        controller.enqueue("flaky")
        _settle(controller, clock)  # the retry is a follow-up: the barrier waits for it
        assert controller.synced == ["flaky", "flaky"]
        assert controller.errors == []
    finally:
        controller.stop()


def test_follow_ups_keep_a_controller_unsettled_and_schedules_do_not() -> None:
    clock = ManualClock()
    controller = Recorder(clock)
    controller.start()
    try:
        controller.follow_up("batch", 1.0)
        progress = controller.progress()
        assert not progress.settled
        assert "follow-up for 'batch' in 1.00 lab s" in progress.doing
        assert [o.name for o in clock.owed()] == ["recorder"]  # the clock knows it is due
        with pytest.raises(SettleTimeout, match=r"recorder: follow-up for 'batch'"):
            settle(lambda: [controller], clock=clock, timeout=0.2)
        clock.advance(1.0)
        _settle(controller, clock)
        assert controller.synced == ["batch"]
        controller.schedule("probe", 10.0)
        assert controller.progress().settled
        assert controller.progress().next_timer == pytest.approx(11.0)
    finally:
        controller.stop()
    assert clock.owed() == []  # a stopped controller owes nothing

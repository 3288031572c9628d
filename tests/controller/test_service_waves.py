"""The service controller's sync waves (controller.waves): which syncs share one wave."""

from __future__ import annotations

from dataclasses import dataclass

from controller.fake import FakeCloud
from controller.service import ServiceController
from tests.controller.builders import ServiceHarness, make_node, make_service


@dataclass
class WaveCloud(FakeCloud):
    """The fake cloud, also told of waves (``controller.cloud.SyncWaves``)."""

    def begin_wave(self, size: int) -> None:
        self._call("begin_wave", str(size))

    def grow_wave(self, was: int, now: int) -> None:
        self._call("grow_wave", f"{was}->{now}")

    def end_wave(self, size: int) -> None:
        self._call("end_wave", str(size))


def harness() -> ServiceHarness:
    h = ServiceHarness()
    h.cloud = WaveCloud()
    h.ctrl = ServiceController(
        h.kube, h.cloud, services=h.kube.stores["services"], nodes=h.kube.stores["nodes"],
        clock=h.clock,
    )  # fmt: skip
    h.ctrl.register(h.kube.stores["services"], h.kube.stores["nodes"])
    h.kube.create("nodes", make_node("n1"))
    return h


def waves_and_syncs(h: ServiceHarness) -> list[tuple[str, str]]:
    keep = ("begin_wave", "grow_wave", "end_wave", "ensure_load_balancer", "update_load_balancer")
    return [(m, t) for m, t in h.cloud.calls if m in keep]


def test_queued_services_are_one_wave_and_a_lone_one_its_own() -> None:
    h = harness()
    for name in ("a", "b", "c"):
        h.kube.create("services", make_service(name))
    h.ctrl.drain()
    assert waves_and_syncs(h) == [
        ("begin_wave", "3"),
        ("ensure_load_balancer", "default/a"),
        ("grow_wave", "3->4"),
        ("ensure_load_balancer", "default/b"),
        ("grow_wave", "4->5"),
        ("ensure_load_balancer", "default/c"),
        ("end_wave", "5"),
    ]
    h.cloud.calls.clear()
    h.kube.create("services", make_service("d"))
    h.ctrl.drain()
    assert waves_and_syncs(h) == [
        ("begin_wave", "1"),
        ("ensure_load_balancer", "default/d"),
        ("end_wave", "1"),
    ]


def test_a_node_sync_is_one_wave_of_every_service_it_updates() -> None:
    h = harness()
    for name in ("a", "b"):
        h.kube.create("services", make_service(name))
    h.ctrl.drain()
    h.cloud.calls.clear()
    h.kube.create("nodes", make_node("n2"))
    h.ctrl.drain()
    assert waves_and_syncs(h) == [
        ("begin_wave", "2"),
        ("update_load_balancer", "default/a"),
        ("update_load_balancer", "default/b"),
        ("end_wave", "2"),
    ]


def test_a_cloud_without_waves_is_synced_as_before() -> None:
    h = ServiceHarness()
    h.kube.create("nodes", make_node("n1"))
    h.kube.create("services", make_service("a"))
    h.ctrl.drain()
    assert h.cloud.calls_of("ensure_load_balancer") == ["default/a"]

"""Object builders with tweak functions: ``make_node("n1", provider_id(...), ready(False))``."""

from __future__ import annotations

import copy
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from controller.cloud import LABEL_EXCLUDE_LB, TAINT_UNINITIALIZED, ServiceKey
from controller.fake import FakeCloud, FakeKube
from controller.legacy import LegacyFlags
from controller.runtime.clock import FakeClock
from controller.service import ServiceController

Obj = dict[str, Any]
Tweak = Callable[[Obj], None]


def make_service(name: str, *tweaks: Tweak, namespace: str = "default") -> Obj:
    obj: Obj = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}"},
        "spec": {
            "type": "LoadBalancer",
            "ports": [{"port": 80, "protocol": "TCP", "nodePort": 30080, "targetPort": 8080}],
        },
        "status": {"loadBalancer": {}},
    }
    for tweak in tweaks:
        tweak(obj)
    return obj


def annotated(key: str, value: str) -> Tweak:
    def tweak(obj: Obj) -> None:
        obj["metadata"].setdefault("annotations", {})[key] = value

    return tweak


def of_type(svc_type: str) -> Tweak:
    def tweak(obj: Obj) -> None:
        obj["spec"]["type"] = svc_type

    return tweak


def lb_class(name: str) -> Tweak:
    def tweak(obj: Obj) -> None:
        obj["spec"]["loadBalancerClass"] = name

    return tweak


def make_node(name: str, *tweaks: Tweak) -> Obj:
    obj: Obj = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "spec": {},
        "status": {
            "conditions": [{"type": "Ready", "status": "True"}],
            "addresses": [{"type": "Hostname", "address": name}],
        },
    }
    for tweak in tweaks:
        tweak(obj)
    return obj


def provider_id(pid: str) -> Tweak:
    def tweak(obj: Obj) -> None:
        obj["spec"]["providerID"] = pid

    return tweak


def ready(value: bool | None) -> Tweak:
    status = {True: "True", False: "False", None: "Unknown"}[value]

    def tweak(obj: Obj) -> None:
        obj["status"]["conditions"] = [{"type": "Ready", "status": status}]

    return tweak


def labelled(key: str, value: str = "") -> Tweak:
    def tweak(obj: Obj) -> None:
        obj["metadata"].setdefault("labels", {})[key] = value

    return tweak


def excluded(value: str = "") -> Tweak:
    return labelled(LABEL_EXCLUDE_LB, value)


def tainted(key: str, effect: str = "NoSchedule", value: str | None = None) -> Tweak:
    def tweak(obj: Obj) -> None:
        taint: Obj = {"key": key, "effect": effect}
        if value is not None:
            taint["value"] = value
        obj["spec"].setdefault("taints", []).append(taint)

    return tweak


def uninitialized() -> Tweak:
    return tainted(TAINT_UNINITIALIZED, value="true")


def provided_ip(ip: str) -> Tweak:
    return annotated("alpha.kubernetes.io/provided-node-ip", ip)


def created_at(ts: str) -> Tweak:
    def tweak(obj: Obj) -> None:
        obj["metadata"]["creationTimestamp"] = ts

    return tweak


def edit(obj: Obj, *tweaks: Tweak) -> Obj:
    out = copy.deepcopy(obj)
    for tweak in tweaks:
        tweak(out)
    return out


class ServiceHarness:
    """A service controller wired to the fake Kubernetes and the fake cloud on fake time."""

    def __init__(self, *legacy: str) -> None:
        self.clock = FakeClock()
        self.kube = FakeKube()
        self.cloud = FakeCloud()
        self.ctrl = ServiceController(
            self.kube,
            self.cloud,
            services=self.kube.stores["services"],
            nodes=self.kube.stores["nodes"],
            legacy=LegacyFlags.parse(legacy),
            clock=self.clock,
        )
        self.ctrl.register(self.kube.stores["services"], self.kube.stores["nodes"])

    def lb_nodes(self, key: str = "default/web") -> tuple[str, ...]:
        return self.cloud.load_balancers[ServiceKey(key)].nodes


class NodeHarness:
    """Node and lifecycle controllers on the fake Kubernetes and the fake cloud, fake time."""

    def __init__(self, *legacy: str, grace: float = 120.0) -> None:
        from controller.lifecycle import LifecycleController
        from controller.node import NodeController

        self.clock = FakeClock(start=datetime(2026, 1, 1, 0, 10, tzinfo=UTC))
        self.kube = FakeKube()
        self.cloud = FakeCloud()
        self.nodes = NodeController(
            self.kube, self.cloud, nodes=self.kube.stores["nodes"], clock=self.clock
        )
        self.nodes.register(self.kube.stores["nodes"])
        self.lifecycle = LifecycleController(
            self.kube,
            self.cloud,
            nodes=self.kube.stores["nodes"],
            legacy=LegacyFlags.parse(legacy),
            clock=self.clock,
            deletion_grace_period=grace,
        )

"""Higher-level clients of the official library against the simulator.

``kubernetes.informer.SharedInformer`` (list+watch, resume by resourceVersion, re-list after
410) and ``kubernetes.dynamic.DynamicClient`` (legacy discovery, server-side apply) are what
controllers and the upstream e2e suites build on [apiserver-spec.md 4.4, 12.1].
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from kubernetes import client, dynamic
from kubernetes.informer.informer import SharedInformer

from lab.kube.server import KubeServer
from tests.kube.conftest import make_cm


def wait_for(cond: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.02)


def test_shared_informer_follows_changes_and_relists_after_410(
    sim: KubeServer, core: client.CoreV1Api
) -> None:
    seen: list[tuple[str, str]] = []
    lock = threading.Lock()
    informer = SharedInformer(core.list_namespaced_config_map, namespace="default", resync_period=1)

    def record(kind: str) -> Callable[[Any], None]:
        def handler(obj: Any) -> None:
            with lock:
                seen.append((kind, obj.metadata.name))

        return handler

    for kind in ("ADDED", "MODIFIED", "DELETED"):
        informer.add_event_handler(kind, record(kind))
    informer.start()
    try:
        wait_for(lambda: ("ADDED", "kube-root-ca.crt") in seen)
        core.create_namespaced_config_map("default", make_cm("inf"))
        core.patch_namespaced_config_map("inf", "default", {"data": {"k": "2"}})
        wait_for(lambda: ("MODIFIED", "inf") in seen)
        core.delete_namespaced_config_map("inf", "default")
        wait_for(lambda: ("DELETED", "inf") in seen)
        # history compaction: the informer's next watch gets 410 and re-lists
        core.create_namespaced_config_map("default", make_cm("before-compact"))
        wait_for(lambda: ("ADDED", "before-compact") in seen)
        sim.control.compact()
        sim.control.close_watches("configmaps")
        core.create_namespaced_config_map("default", make_cm("after-compact"))
        wait_for(lambda: ("ADDED", "after-compact") in seen)
        wait_for(
            lambda: (
                {o.metadata.name for o in informer.cache.list()}
                == {"kube-root-ca.crt", "before-compact", "after-compact"}
            )
        )
    finally:
        informer.stop()


def test_dynamic_client_discovers_and_applies(sim: KubeServer, api_client: Any) -> None:
    dyn = dynamic.DynamicClient(api_client)
    cms = dyn.resources.get(api_version="v1", kind="ConfigMap")
    manifest = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "dyn", "namespace": "default"},
        "data": {"a": "1"},
    }
    made = cms.server_side_apply(body=manifest, field_manager="e2e")
    assert made.data.a == "1"
    manifest["data"] = {"a": "2"}
    again = cms.server_side_apply(body=manifest, field_manager="e2e")
    assert again.data.a == "2"
    assert again.metadata.resourceVersion != made.metadata.resourceVersion
    leases = dyn.resources.get(api_version="coordination.k8s.io/v1", kind="Lease")
    lease = leases.create(
        body={
            "metadata": {"name": "ccm", "namespace": "kube-system"},
            "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15},
        }
    )
    assert lease.spec.holderIdentity == "a"
    listed = leases.get(namespace="kube-system")
    assert [i.metadata.name for i in listed.items] == ["ccm"]

"""``kopf run`` against the simulator: the operator in ``kopf_operator.py`` as a subprocess.

kopf finds its resources through discovery, lists and watches them, patches objects (merge
and JSON patches with a resourceVersion test), patches status through the ``status``
subresource, keeps its progress and last-handled state in annotations, adds and removes its
finalizer, and posts core/v1 Events. Each test starts its own operator (``--standalone``: no
peering objects, which would need a CRD), waits for it through its own log lines, observes
the cluster with the official client, then stops it with a signal and expects a clean exit.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
from kubernetes import client, watch

from lab.kube.server import KubeServer

OPERATOR = Path(__file__).with_name("kopf_operator.py")
LABELS = {"ccm-lab.test/kopf": "yes"}
PROGRESS = "kopf.zalando.org/configmap_created"
LAST_HANDLED = "kopf.zalando.org/last-handled-configuration"
FINALIZER = "kopf.zalando.org/KopfFinalizerMarker"
WAIT = 60.0  # generous: CI runs two workers on two cores

T = TypeVar("T")


class Operator:
    def __init__(self, proc: subprocess.Popen[bytes], log: Path) -> None:
        self.proc = proc
        self.log = log

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def stop(self, sig: signal.Signals) -> int:
        self.proc.send_signal(sig)
        return self.proc.wait(timeout=WAIT)


def eventually(probe: Callable[[], T | None], what: str, operator: Operator) -> T:
    """Poll ``probe`` until it returns a value; fail naming ``what`` with kopf's log tail."""
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        value = probe()
        if value is not None:
            return value
        if operator.proc.poll() is not None:
            break
        time.sleep(0.05)
    tail = "\n".join(operator.output().splitlines()[-40:])
    pytest.fail(f"{what} did not happen; kopf (rc={operator.proc.poll()}) said:\n{tail}")


@pytest.fixture
def operator(sim: KubeServer, kubeconfig: Path, tmp_path: Path) -> Iterator[Operator]:
    log = tmp_path / "kopf.log"
    env = {
        **os.environ,
        "KUBECONFIG": str(kubeconfig),
        "PYTHONUNBUFFERED": "1",  # the log lines the fixture waits for, as they are written
        "NO_PROXY": "127.0.0.1",
        "no_proxy": "127.0.0.1",
    }
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "kopf", "run", "--standalone", "--namespace", "default",
             "--verbose", str(OPERATOR)],
            env=env, stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    op = Operator(proc, log)
    try:
        for plural in ("configmaps", "services"):
            line = f"Starting the watch-stream for {plural}.v1 in 'default'."
            eventually(lambda line=line: True if line in op.output() else None, line, op)  # type: ignore[misc]
        yield op
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=WAIT)


@pytest.fixture
def core(sim: KubeServer) -> client.CoreV1Api:
    return client.CoreV1Api(sim.api_client())


def annotations(core: client.CoreV1Api, name: str) -> dict[str, str]:
    cm = core.read_namespaced_config_map(name, "default")
    return dict(cm.metadata.annotations or {})


def events_about(core: client.CoreV1Api, name: str) -> list[Any]:
    field = f"involvedObject.name={name}"
    return list(core.list_namespaced_event("default", field_selector=field).items)


def test_kopf_handles_create_with_retry_update_and_delete(
    operator: Operator, core: client.CoreV1Api
) -> None:
    created = core.create_namespaced_config_map(
        "default", {"metadata": {"name": "c1", "labels": LABELS}, "data": {"k": "v1"}}
    )
    stream = watch.Watch()
    seen: list[dict[str, str]] = []
    for event in stream.stream(
        core.list_namespaced_config_map,
        "default",
        field_selector="metadata.name=c1",
        resource_version=created.metadata.resource_version,
        timeout_seconds=int(WAIT),
    ):
        seen.append(dict(event["object"].metadata.annotations or {}))
        if "ccm-lab.test/created-after-retries" in seen[-1] and LAST_HANDLED in seen[-1]:
            stream.stop()
    assert seen, "no change to the ConfigMap was watched"
    done = seen[-1]
    # the handler ran twice: kopf stored the failed attempt as progress and read it back
    assert done["ccm-lab.test/created-after-retries"] == "1"
    assert done["ccm-lab.test/value"] == "v1"
    progress = [json.loads(a[PROGRESS]) for a in seen if PROGRESS in a]
    assert progress, f"kopf's progress annotation never appeared in {seen}"
    assert progress[0]["retries"] == 1
    assert progress[0]["success"] is False
    assert progress[0]["message"] == "first attempt refused on purpose"
    assert PROGRESS not in done  # purged once the handler succeeded
    assert json.loads(done[LAST_HANDLED])["data"] == {"k": "v1"}
    cm = core.read_namespaced_config_map("c1", "default")
    assert cm.metadata.finalizers == [FINALIZER]  # kopf has a delete handler for it

    core.patch_namespaced_config_map("c1", "default", {"data": {"k": "v2"}})
    eventually(
        lambda: True if annotations(core, "c1").get("ccm-lab.test/value") == "v2" else None,
        "the update handler's annotation",
        operator,
    )

    core.delete_namespaced_config_map("c1", "default")

    def gone() -> bool | None:
        names = [c.metadata.name for c in core.list_namespaced_config_map("default").items]
        return True if "c1" not in names else None

    eventually(gone, "the ConfigMap's deletion once kopf removed its finalizer", operator)
    messages = eventually(
        lambda: {e.message for e in events_about(core, "c1")} or None,
        "kopf's events about c1",
        operator,
    )
    assert "configmap handled after 1 retries" in messages
    assert "Handler 'configmap_created' failed temporarily: first attempt refused on purpose" in (
        messages
    )

    assert operator.stop(signal.SIGINT) == 0
    out = operator.output()
    assert "Signal SIGINT is received. Operator is stopping." in out
    assert "Handler 'configmap_deleted' succeeded." in out
    assert "Traceback" not in out


def test_kopf_patches_service_status_and_posts_events(
    operator: Operator, core: client.CoreV1Api, sim: KubeServer
) -> None:
    core.create_namespaced_service(
        "default",
        {
            "metadata": {"name": "lb", "labels": LABELS},
            "spec": {"type": "LoadBalancer", "ports": [{"port": 80}]},
        },
    )

    def ingress() -> list[Any] | None:
        status = core.read_namespaced_service_status("lb", "default").status
        return status.load_balancer.ingress or None

    assert [i.hostname for i in eventually(ingress, "the load balancer status", operator)] == [
        "lb.elb.example.com"
    ]
    svc = core.read_namespaced_service("lb", "default")
    writers = {(m.manager, m.subresource) for m in svc.metadata.managed_fields}
    assert ("kopf", "status") in writers  # sent to the status subresource

    def both() -> list[Any] | None:
        got = events_about(core, "lb")
        return got if {e.reason for e in got} >= {"EnsuredLoadBalancer", "Logging"} else None

    events = eventually(both, "kopf's events about the Service", operator)
    ensured = next(e for e in events if e.reason == "EnsuredLoadBalancer")
    assert ensured.message == "load balancer lb.elb.example.com ensured"
    assert ensured.source.component == "ccm-lab-kopf"
    assert ensured.involved_object.kind == "Service"
    assert ensured.involved_object.uid == svc.metadata.uid
    # the same Events through events.k8s.io/v1 (kopf writes eventTime, so they decode)
    new = client.EventsV1Api(sim.api_client()).list_namespaced_event(
        "default", field_selector="regarding.name=lb"
    )
    by_name = {e.metadata.name: e for e in new.items}
    mirrored = by_name[ensured.metadata.name]
    assert mirrored.note == ensured.message
    assert mirrored.reporting_controller == "ccm-lab-kopf"
    assert mirrored.reporting_instance == "kopf-test"
    assert mirrored.regarding.uid == svc.metadata.uid
    assert mirrored.event_time is not None

    assert operator.stop(signal.SIGTERM) == 0
    assert "Signal SIGTERM is received. Operator is stopping." in operator.output()

"""The kubelet stand-in against the API simulator, through the official client and kubectl:
registration shape, Lease renewal, NotReady after the grace period, recovery.

The Unknown status and the taints come from kube-controller-manager's node lifecycle
controller (``lab.dataplane.nodelifecycle``), which runs here next to the stand-in, as in a
sim lab; everything is on a lab clock at 100x (10 s renewals, a 40 s grace period)."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
from kubernetes import client

from lab.clock import ManualClock, ScaledClock
from lab.cluster.base import Role
from lab.cluster.kubeapi import raw
from lab.cluster.kubelet import KubeletStandIn, NodeRegistration
from lab.dataplane.api import Api
from lab.dataplane.informers import Informers
from lab.dataplane.nodelifecycle import NodeLifecycleController
from lab.kube.server import KubeServer
from lab.versions.dataplane import node_lifecycle_behaviour
from lab.versions.release import KubeVersion

KUBECTL = Path(__file__).resolve().parents[2] / ".venv" / "bin" / "kubectl"
T = TypeVar("T")


def wait_for(what: str, probe: Callable[[], T | None], timeout: float = 10.0) -> T:
    deadline = time.monotonic() + timeout
    last: T | None = None
    while time.monotonic() < deadline:
        last = probe()
        if last:
            return last
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}; last: {last!r}")


@pytest.fixture
def sim() -> Iterator[KubeServer]:
    with KubeServer() as simulator:
        yield simulator
        assert simulator.internal_errors() == []


@pytest.fixture
def core(sim: KubeServer) -> client.CoreV1Api:
    return client.CoreV1Api(sim.api_client())


@pytest.fixture
def coordination(sim: KubeServer) -> client.CoordinationV1Api:
    return client.CoordinationV1Api(sim.api_client())


@pytest.fixture
def kubelet(sim: KubeServer) -> Iterator[KubeletStandIn]:
    clock = ScaledClock(100)
    standin = KubeletStandIn(
        sim.api_client(), lease_renew_interval=10, status_report_interval=30, clock=clock
    )
    informers = Informers(Api(sim.api_client()))
    lifecycle = NodeLifecycleController(
        informers.api,
        informers,
        clock,
        behaviour=node_lifecycle_behaviour("1.33"),
        grace=40,
        monitor_period=5,
    )
    informers.start()
    informers.wait_synced()
    lifecycle.start()
    with standin:
        yield standin
    lifecycle.stop()
    informers.stop()
    assert standin.errors == []
    assert lifecycle.errors == []


def node_json(core: client.CoreV1Api, name: str) -> dict[str, Any]:
    return raw(core.read_node(name, _preload_content=False))


def lease_json(coordination: client.CoordinationV1Api, name: str) -> dict[str, Any]:
    return raw(coordination.read_namespaced_lease(name, "kube-node-lease", _preload_content=False))


def node_if(
    core: client.CoreV1Api, name: str, predicate: Callable[[dict[str, Any]], bool]
) -> Callable[[], dict[str, Any] | None]:
    def probe() -> dict[str, Any] | None:
        node = node_json(core, name)
        return node if predicate(node) else None

    return probe


def ready(node: dict[str, Any]) -> dict[str, Any]:
    (condition,) = [c for c in node["status"]["conditions"] if c["type"] == "Ready"]
    assert isinstance(condition, dict)
    return condition


def taint_keys(node: dict[str, Any]) -> list[tuple[str, str]]:
    return [(t["key"], t["effect"]) for t in node["spec"].get("taints") or []]


UNREACHABLE_NO_EXECUTE = ("node.kubernetes.io/unreachable", "NoExecute")
CP = NodeRegistration(
    name="cp",
    ip="10.0.1.10",
    version=KubeVersion.parse("1.22"),
    role=Role.CONTROL_PLANE,
    provider_id="aws:///us-east-1a/i-0aaaaaaaaaaaaaaa1",
)
WORKER = NodeRegistration(name="w1", ip="10.0.1.11", version=KubeVersion.parse("1.33"))


def test_registration_shape_on_the_server(
    kubelet: KubeletStandIn, core: client.CoreV1Api, coordination: client.CoordinationV1Api
) -> None:
    created = kubelet.register(CP)
    kubelet.register(WORKER)
    cp = node_json(core, "cp")
    assert cp["metadata"]["uid"] == created["metadata"]["uid"]
    assert cp["spec"]["providerID"] == "aws:///us-east-1a/i-0aaaaaaaaaaaaaaa1"
    assert cp["metadata"]["annotations"]["alpha.kubernetes.io/provided-node-ip"] == "10.0.1.10"
    assert "node-role.kubernetes.io/master" in cp["metadata"]["labels"]  # 1.22 kubeadm
    assert "node.kubernetes.io/exclude-from-external-load-balancers" in cp["metadata"]["labels"]
    assert taint_keys(cp) == [
        ("node-role.kubernetes.io/master", "NoSchedule"),
        ("node.cloudprovider.kubernetes.io/uninitialized", "NoSchedule"),
    ]
    assert cp["status"]["nodeInfo"]["kubeletVersion"] == "v1.22.17"
    assert ready(cp)["status"] == "True"
    w1 = node_json(core, "w1")
    assert "providerID" not in w1["spec"]
    assert w1["status"]["addresses"] == [
        {"type": "InternalIP", "address": "10.0.1.11"},
        {"type": "Hostname", "address": "w1"},
    ]
    lease = lease_json(coordination, "w1")
    assert lease["spec"]["holderIdentity"] == "w1"
    assert lease["spec"]["leaseDurationSeconds"] == 40
    (owner,) = lease["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["uid"]) == ("Node", "w1", w1["metadata"]["uid"])
    assert kubelet.node_names == ["cp", "w1"]


def test_leases_renew_and_status_heartbeats(
    kubelet: KubeletStandIn, core: client.CoreV1Api, coordination: client.CoordinationV1Api
) -> None:
    kubelet.register(WORKER)
    first = lease_json(coordination, "w1")["spec"]["renewTime"]
    wait_for(
        "the lease to be renewed twice",
        lambda: len({first, *renewals(coordination, 3)}) >= 3,
    )
    beat = ready(node_json(core, "w1"))["lastHeartbeatTime"]
    wait_for(
        "a newer Ready heartbeat",
        lambda: ready(node_json(core, "w1"))["lastHeartbeatTime"] > beat,
        timeout=5,
    )
    assert ready(node_json(core, "w1"))["status"] == "True"


def renewals(coordination: client.CoordinationV1Api, samples: int) -> set[str]:
    seen = set()
    for _ in range(samples):
        seen.add(lease_json(coordination, "w1")["spec"]["renewTime"])
        time.sleep(0.05)
    return seen


def kubectl_nodes(sim: KubeServer) -> dict[str, str]:
    out = subprocess.run(
        [str(KUBECTL), "--kubeconfig", str(sim.kubeconfig_path), "get", "nodes", "--no-headers"],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    ).stdout
    return {line.split()[0]: line.split()[1] for line in out.splitlines() if line.strip()}


def test_stop_heartbeat_makes_node_not_ready_and_resume_recovers(
    sim: KubeServer,
    kubelet: KubeletStandIn,
    core: client.CoreV1Api,
    coordination: client.CoordinationV1Api,
) -> None:
    kubelet.register(CP)
    kubelet.register(WORKER)
    kubelet.stop_heartbeat("w1")
    # Like the node lifecycle controller: conditions first, then (separate write) the taints.
    node = wait_for(
        "w1 Ready=Unknown and tainted unreachable",
        node_if(
            core,
            "w1",
            lambda n: (
                ready(n)["status"] == "Unknown"
                and ("node.kubernetes.io/unreachable", "NoExecute") in taint_keys(n)
            ),
        ),
    )
    condition = ready(node)
    assert condition["reason"] == "NodeStatusUnknown"
    assert condition["message"] == "Kubelet stopped posting node status."
    assert all(c["status"] == "Unknown" for c in node["status"]["conditions"])
    assert taint_keys(node) == [
        ("node.cloudprovider.kubernetes.io/uninitialized", "NoSchedule"),
        ("node.kubernetes.io/unreachable", "NoSchedule"),
        ("node.kubernetes.io/unreachable", "NoExecute"),
    ]
    (no_execute,) = [t for t in node["spec"]["taints"] if t["effect"] == "NoExecute"]
    assert no_execute["timeAdded"].endswith("Z")
    # The silent node's lease no longer moves while the healthy one keeps renewing.
    frozen = lease_json(coordination, "w1")["spec"]["renewTime"]
    cp_before = lease_json(coordination, "cp")["spec"]["renewTime"]
    wait_for(
        "cp lease renewal",
        lambda: lease_json(coordination, "cp")["spec"]["renewTime"] != cp_before,
    )
    assert lease_json(coordination, "w1")["spec"]["renewTime"] == frozen
    assert kubectl_nodes(sim) == {"cp": "Ready", "w1": "NotReady"}

    kubelet.resume_heartbeat("w1")
    node = wait_for(
        "w1 Ready again without unreachable taints",
        node_if(core, "w1", lambda n: ready(n)["status"] == "True" and len(taint_keys(n)) == 1),
    )
    assert taint_keys(node) == [("node.cloudprovider.kubernetes.io/uninitialized", "NoSchedule")]
    assert ready(node)["reason"] == "KubeletReady"
    assert kubectl_nodes(sim)["w1"] == "Ready"


def test_status_posts_leave_cloud_controller_fields_alone(
    kubelet: KubeletStandIn, core: client.CoreV1Api
) -> None:
    kubelet.register(WORKER)
    cloud_addresses = [
        {"type": "InternalIP", "address": "10.0.1.11"},
        {"type": "InternalDNS", "address": "ip-10-0-1-11.ec2.internal"},
        {"type": "Hostname", "address": "ip-10-0-1-11.ec2.internal"},
    ]
    core.patch_node_status(
        "w1",
        {"status": {"addresses": cloud_addresses}},
        _content_type="application/merge-patch+json",
    )
    beat = ready(node_json(core, "w1"))["lastHeartbeatTime"]
    wait_for(
        "a newer heartbeat",
        lambda: ready(node_json(core, "w1"))["lastHeartbeatTime"] > beat,
        timeout=5,
    )
    assert node_json(core, "w1")["status"]["addresses"] == cloud_addresses


def test_reregistering_an_existing_node_reconciles_it(
    kubelet: KubeletStandIn, core: client.CoreV1Api
) -> None:
    kubelet.register(WORKER)
    core.patch_node(
        "w1",
        {"metadata": {"annotations": {"alpha.kubernetes.io/provided-node-ip": "192.0.2.1"}}},
        _content_type="application/merge-patch+json",
    )
    uid = node_json(core, "w1")["metadata"]["uid"]
    kubelet.stop_heartbeat("w1")
    wait_for(
        "w1 unreachable",
        node_if(
            core, "w1", lambda n: ("node.kubernetes.io/unreachable", "NoExecute") in taint_keys(n)
        ),
    )
    again = kubelet.register(WORKER)  # a restarted kubelet: the Node exists
    assert again["metadata"]["uid"] == uid
    annotations = node_json(core, "w1")["metadata"]["annotations"]
    assert annotations["alpha.kubernetes.io/provided-node-ip"] == "10.0.1.11"
    # the restarted kubelet posts Ready at once; the lifecycle taints go away
    node = wait_for(
        "w1 Ready after re-registration",
        node_if(core, "w1", lambda n: ready(n)["status"] == "True" and len(taint_keys(n)) == 1),
    )
    assert taint_keys(node) == [("node.cloudprovider.kubernetes.io/uninitialized", "NoSchedule")]


def test_unregister_deletes_node_and_lease(
    kubelet: KubeletStandIn, core: client.CoreV1Api, coordination: client.CoordinationV1Api
) -> None:
    kubelet.register(WORKER)
    kubelet.unregister("w1")
    assert kubelet.node_names == []
    names = [n["metadata"]["name"] for n in raw(core.list_node(_preload_content=False))["items"]]
    assert names == []
    leases = raw(coordination.list_namespaced_lease("kube-node-lease", _preload_content=False))
    assert leases["items"] == []
    kubelet.unregister("w1")  # idempotent


def test_unknown_node_and_bad_intervals_are_clear_errors(sim: KubeServer) -> None:
    standin = KubeletStandIn(sim.api_client())
    with pytest.raises(KeyError, match="node 'nope' is not registered"):
        standin.stop_heartbeat("nope")
    with pytest.raises(ValueError, match="lease_renew_interval must be > 0, got 0"):
        KubeletStandIn(sim.api_client(), lease_renew_interval=0)


def test_json_helper_rejects_non_objects() -> None:
    class Fake:
        data = json.dumps([1, 2]).encode()

    with pytest.raises(TypeError, match="expected a JSON object"):
        raw(Fake())


def test_kubelet_reported_not_ready_keeps_lease_and_taints_not_ready(
    sim: KubeServer,
    kubelet: KubeletStandIn,
    core: client.CoreV1Api,
    coordination: client.CoordinationV1Api,
) -> None:
    kubelet.register(WORKER)
    kubelet.report_not_ready("w1", "container runtime is down")
    node = wait_for(
        "w1 Ready=False with not-ready taints",
        node_if(
            core,
            "w1",
            lambda n: (
                ready(n)["status"] == "False"
                and ("node.kubernetes.io/not-ready", "NoExecute") in taint_keys(n)
            ),
        ),
    )
    assert ready(node)["reason"] == "KubeletNotReady"
    assert ready(node)["message"] == "container runtime is down"
    others = [c for c in node["status"]["conditions"] if c["type"] != "Ready"]
    assert {c["status"] for c in others} == {"False"}  # pressure conditions stay healthy
    assert taint_keys(node) == [
        ("node.cloudprovider.kubernetes.io/uninitialized", "NoSchedule"),
        ("node.kubernetes.io/not-ready", "NoSchedule"),
        ("node.kubernetes.io/not-ready", "NoExecute"),
    ]
    before = lease_json(coordination, "w1")["spec"]["renewTime"]
    wait_for(
        "the lease to keep renewing",
        lambda: lease_json(coordination, "w1")["spec"]["renewTime"] != before,
    )
    assert kubectl_nodes(sim)["w1"] == "NotReady"
    # stays NotReady: not mistaken for the grace-period Unknown path
    assert ready(node_json(core, "w1"))["status"] == "False"

    kubelet.report_ready("w1")
    node = wait_for(
        "w1 Ready again",
        node_if(core, "w1", lambda n: ready(n)["status"] == "True" and len(taint_keys(n)) == 1),
    )
    assert ready(node)["reason"] == "KubeletReady"


def test_a_deleted_node_is_retried_a_period_later_and_lab_time_runs_on(
    core: client.CoreV1Api, kubelet: KubeletStandIn
) -> None:
    """The controller deletes a Node whose kubelet still runs (a terminated instance): the
    status post fails with 404, as a real kubelet's does, and is tried again a renewal period
    later; before, the stand-in retried at once, without end, owing the lab clock the past
    (lab time stood still)."""
    clock = kubelet.clock
    kubelet.register(WORKER)
    core.delete_node(WORKER.name)
    start = clock.now()
    clock.sleep(60)  # the 30 s status post fails; lab time must run on through the retries
    assert clock.now() - start >= 60
    progress = kubelet.progress()
    assert progress.next_timer is not None
    assert progress.next_timer > clock.now() - kubelet.lease_renew_interval
    assert kubelet.errors == []  # a gone Node is the world's state, not the stand-in's error


UNKNOWN = {"status": "Unknown", "reason": "NodeStatusUnknown"}


def unknown_conditions(node: dict[str, Any], stamp: str) -> list[dict[str, str]]:
    """The lifecycle controller's write after a late heartbeat: every condition Unknown."""
    return [
        {
            **condition,
            **UNKNOWN,
            "message": "Kubelet stopped posting node status.",
            "lastTransitionTime": stamp,
        }
        for condition in node["status"]["conditions"]
    ]


@pytest.fixture
def manual_kubelet(sim: KubeServer) -> tuple[KubeletStandIn, ManualClock]:
    """The stand-in with the kubelet's own periods (10 s updates, 5 min reports) on a clock
    only the test moves; no background loop: the test runs each pass."""
    clock = ManualClock()
    return KubeletStandIn(sim.api_client(), clock=clock), clock


def test_a_condition_someone_else_wrote_is_put_right_within_one_update_period(
    manual_kubelet: tuple[KubeletStandIn, ManualClock], core: client.CoreV1Api
) -> None:
    """kubelet's status loop reads the Node every nodeStatusUpdateFrequency (10 s) and posts
    when the API's conditions differ from its own: the lifecycle controller's Unknown after a
    late heartbeat is gone within 10 s, not at the next 5-minute report."""
    kubelet, clock = manual_kubelet
    kubelet.register(WORKER)
    node = node_json(core, "w1")
    stamp = "2026-01-01T00:00:01Z"
    core.patch_node_status(
        "w1",
        {"status": {"conditions": unknown_conditions(node, stamp)}},
        _content_type="application/strategic-merge-patch+json",
    )
    clock.advance(5)
    kubelet.heartbeat_once()
    assert ready(node_json(core, "w1"))["status"] == "Unknown"  # not yet a period
    clock.advance(5)
    kubelet.heartbeat_once()
    node = node_json(core, "w1")
    statuses = {c["type"]: (c["status"], c["reason"]) for c in node["status"]["conditions"]}
    assert statuses == {
        "MemoryPressure": ("False", "KubeletHasSufficientMemory"),
        "DiskPressure": ("False", "KubeletHasNoDiskPressure"),
        "PIDPressure": ("False", "KubeletHasSufficientPID"),
        "Ready": ("True", "KubeletReady"),
    }
    # every status changed, so every condition has a new transition, at lab time 10 s
    assert {c["lastTransitionTime"] for c in node["status"]["conditions"]} == {
        "2026-01-01T00:00:10Z"
    }
    assert kubelet.errors == []


def test_an_unchanged_node_is_posted_only_at_the_report_period(
    manual_kubelet: tuple[KubeletStandIn, ManualClock], core: client.CoreV1Api
) -> None:
    """Equal conditions are not re-posted at each 10 s look (the kubelet's patch is skipped);
    the 5-minute report posts a fresh heartbeat and keeps each condition's transition time."""
    kubelet, clock = manual_kubelet
    kubelet.register(WORKER)
    before = node_json(core, "w1")
    for _ in range(29):  # 290 s of 10 s passes
        clock.advance(10)
        kubelet.heartbeat_once()
    assert (
        node_json(core, "w1")["metadata"]["resourceVersion"]
        == (before["metadata"]["resourceVersion"])
    )
    clock.advance(10)
    kubelet.heartbeat_once()
    after = ready(node_json(core, "w1"))
    assert after["lastHeartbeatTime"] == "2026-01-01T00:05:00Z"
    assert after["lastTransitionTime"] == ready(before)["lastTransitionTime"]
    assert kubelet.errors == []

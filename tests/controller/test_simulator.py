"""The controllers through the official Kubernetes client against the lab's API simulator.

Real HTTP, real wire format: list+watch with resourceVersions, 410 relists, strategic-merge
patches on ``services/{name}/status`` for the finalizer and the ingress, the Node PUT and the
``$patch: replace`` address patch, core/v1 Events, and Lease-based leader election with two
managers. The cloud is the in-memory fake (the AWS side is exercised by ``e2e/``).
"""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from controller.app import ControllerManager, Options
from controller.cloud import LB_FINALIZER, TAINT_UNINITIALIZED, ServiceKey
from controller.fake import FakeCloud, FakeInstance
from controller.runtime.informer import Informer
from controller.runtime.kube import ApiKube
from controller.runtime.leader import LeaderElectionConfig
from tests.controller.builders import make_node, make_service, provided_ip, uninitialized

server = pytest.importorskip("lab.kube.server", reason="needs the lab's API simulator")
KubeServer = server.KubeServer


def wait_for(cond: Callable[[], object], timeout: float = 15.0, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what or cond}")


@pytest.fixture
def sim() -> Iterator[Any]:
    with KubeServer(tls=True) as s:  # as a lab serves it: HTTPS and a bearer token
        yield s
        assert s.take_internal_errors() == []


@pytest.fixture
def core(sim: Any) -> Any:
    from kubernetes import client

    return client.CoreV1Api(sim.api_client())


def kube_for(sim: Any) -> ApiKube:
    return ApiKube.from_kubeconfig(str(sim.kubeconfig_path))


def manager(sim: Any, cloud: FakeCloud, **kw: Any) -> ControllerManager:
    opts = dataclasses.replace(Options(metrics_addr="", node_monitor_period=0.2), **kw)
    return ControllerManager(kube_for(sim), cloud, opts)


def lb_service(name: str) -> dict[str, Any]:
    """A LoadBalancer Service whose nodePort the API server allocates."""
    svc = make_service(name)
    del svc["spec"]["ports"][0]["nodePort"]
    return svc


def events(core: Any, name: str) -> list[tuple[str, str, str]]:
    """The object's events in creation order (names are ``<object>.<hex unix nanos>``)."""
    items = sorted(core.list_namespaced_event("default").items, key=lambda e: e.metadata.name)
    return [(e.type, e.reason, e.message) for e in items if e.involved_object.name == name]


def test_informer_rewatches_and_relists_on_410(sim: Any, core: Any) -> None:
    core.create_node(body=make_node("a"))
    informer = Informer(kube_for(sim), "nodes", max_backoff=0.1)
    seen: list[str] = []
    from controller.runtime.informer import Handlers

    informer.add_handlers(
        Handlers(
            on_add=lambda o: seen.append("add " + o["metadata"]["name"]),
            on_delete=lambda o: seen.append("delete " + o["metadata"]["name"]),
        )
    )
    informer.start()
    try:
        assert informer.wait_synced(10)
        core.create_node(body=make_node("b"))
        wait_for(lambda: informer.get("b") is not None, what="watch event for b")
        # A dropped stream: the informer re-watches from its resourceVersion, no relist.
        sim.control.close_watches()
        core.create_node(body=make_node("c"))
        wait_for(lambda: informer.get("c") is not None, what="event after stream drop")
        assert informer.relists == 1
        # An outage during which history is compacted: the re-watch gets 410, then a relist.
        sim.control.add_fault(verb="watch", resource="nodes", status=503)
        sim.control.close_watches()
        core.delete_node("a")
        core.create_node(body=make_node("d"))
        sim.control.compact()
        sim.control.clear_faults()
        wait_for(lambda: informer.get("d") is not None and informer.get("a") is None, what="relist")
        assert informer.relists == 2
        assert "delete a" in seen
        assert "add d" in seen
        assert sorted(o["metadata"]["name"] for o in informer.list()) == ["b", "c", "d"]
    finally:
        informer.stop()


def test_service_finalizer_status_and_events_round_trip(sim: Any, core: Any) -> None:
    cloud = FakeCloud()
    core.create_node(body=make_node("n1"))
    m = manager(sim, cloud, controllers=("service",)).start()
    try:
        core.create_namespaced_service("default", body=lb_service("web"))
        wait_for(
            lambda: core.read_namespaced_service("web", "default").status.load_balancer.ingress,
            what="status.loadBalancer.ingress",
        )
        svc = core.read_namespaced_service("web", "default")
        assert svc.metadata.finalizers == [LB_FINALIZER]
        assert svc.status.load_balancer.ingress[0].hostname.endswith(".elb.amazonaws.com")
        assert cloud.load_balancers[ServiceKey("default/web")].nodes == ("n1",)
        wait_for(lambda: len(events(core, "web")) >= 2, what="events")
        assert [r for _, r, _ in events(core, "web")] == [
            "EnsuringLoadBalancer",
            "EnsuredLoadBalancer",
        ]
        # The node path: a second node is registered with UpdateLoadBalancer.
        core.create_node(body=make_node("n2"))
        wait_for(lambda: cloud.load_balancers[ServiceKey("default/web")].nodes == ("n1", "n2"))
        # Deletion waits for the finalizer, which goes only after the LB is deleted.
        core.delete_namespaced_service("web", "default")
        wait_for(
            lambda: (
                not core.list_namespaced_service(
                    "default", field_selector="metadata.name=web"
                ).items
            ),
            what="service deletion",
        )
        assert ServiceKey("default/web") not in cloud.load_balancers
        # DeletedLoadBalancer is posted just after the finalizer goes (upstream order).
        wait_for(
            lambda: (
                [r for _, r, _ in events(core, "web")][-2:]
                == ["DeletingLoadBalancer", "DeletedLoadBalancer"]
            ),
            what="the DeletingLoadBalancer, DeletedLoadBalancer events",
        )
        assert cloud.calls_of("ensure_load_balancer_deleted") == ["default/web"]
    finally:
        m.stop()
        assert m.wait(15) == 0


def test_node_initialization_and_provided_node_ip(sim: Any, core: Any) -> None:
    cloud = FakeCloud()
    cloud.add_instance(FakeInstance("i-0abc", private_ip="10.0.1.5"), node_name="kind-worker")
    core.create_node(body=make_node("kind-worker", uninitialized(), provided_ip("172.18.0.2")))
    m = manager(sim, cloud, controllers=("cloud-node",)).start()
    try:
        wait_for(lambda: events(core, "kind-worker"), what="SyncNodeFailed event")
        [(etype, reason, message)] = events(core, "kind-worker")
        assert (etype, reason) == ("Warning", "SyncNodeFailed")
        assert (
            "failed to get node address from cloud provider that matches ip: 172.18.0.2" in message
        )
        node = core.read_node("kind-worker")
        assert [t.key for t in node.spec.taints] == [TAINT_UNINITIALIZED]
        assert not node.spec.provider_id
        # The write-up's fix: point the annotation at the instance's private IP.
        core.patch_node(
            "kind-worker",
            {"metadata": {"annotations": {"alpha.kubernetes.io/provided-node-ip": "10.0.1.5"}}},
        )
        wait_for(lambda: not core.read_node("kind-worker").spec.taints, what="taint removal")
        node = core.read_node("kind-worker")
        assert node.spec.provider_id == "aws:///us-east-1a/i-0abc"
        assert node.metadata.labels["topology.kubernetes.io/zone"] == "us-east-1a"
        assert node.metadata.labels["node.kubernetes.io/instance-type"] == "m5.large"
        wait_for(lambda: core.read_node("kind-worker").status.addresses[0].address == "10.0.1.5")
        addresses = [(a.type, a.address) for a in core.read_node("kind-worker").status.addresses]
        assert ("InternalDNS", "ip-10-0-1-5.ec2.internal") in addresses
        wait_for(lambda: any(r == "Synced" for _, r, _ in events(core, "kind-worker")))
    finally:
        m.stop()
        m.wait(15)


def test_leader_election_only_leader_acts_and_standby_takes_over(sim: Any, core: Any) -> None:
    clouds = [FakeCloud(), FakeCloud()]
    core.create_node(body=make_node("n1"))
    managers = [
        manager(
            sim,
            clouds[i],
            controllers=("service",),
            leader_elect=True,
            leader=LeaderElectionConfig(
                identity=f"ccm-{i}",
                lease_duration=2.0,
                renew_deadline=1.5,
                retry_period=0.2,
                release_on_cancel=False,  # a stopped leader looks like a crashed one
            ),
        ).start()
        for i in range(2)
    ]
    try:
        wait_for(lambda: any(m.running for m in managers), what="a leader")
        leader = 0 if managers[0].running else 1
        standby = 1 - leader
        from kubernetes import client

        coord: Any = client.CoordinationV1Api(sim.api_client())
        held = coord.read_namespaced_lease("cloud-controller-manager", "kube-system")
        assert held.spec.holder_identity == f"ccm-{leader}"
        core.create_namespaced_service("default", body=lb_service("web"))
        wait_for(lambda: ServiceKey("default/web") in clouds[leader].load_balancers)
        assert clouds[standby].calls == []
        # The leader dies without releasing: the standby takes over only once the lease has
        # expired, i.e. at least a lease duration after the leader's last renewal. Judged on
        # the Lease's own timestamps, not on how fast this machine is: under load the leader's
        # last renewal may come well before stop(), so the takeover may follow stop() at once.
        last_seen = coord.read_namespaced_lease("cloud-controller-manager", "kube-system")
        managers[leader].stop()
        managers[leader].wait(15)
        wait_for(lambda: managers[standby].running, timeout=15, what="takeover")
        core.create_namespaced_service("default", body=lb_service("api"))
        wait_for(lambda: ServiceKey("default/api") in clouds[standby].load_balancers)
        held = coord.read_namespaced_lease("cloud-controller-manager", "kube-system")
        assert held.spec.holder_identity == f"ccm-{standby}"
        assert held.spec.lease_transitions == 1
        assert held.spec.acquire_time >= last_seen.spec.renew_time + timedelta(seconds=2.0)
    finally:
        for m in managers:
            m.stop()
            m.wait(15)


# Off-cluster ("dummy self instance") mode: the AWS provider starts without instance metadata,
# and with no Services and no Nodes it makes no AWS call, so no endpoint is needed.
OFF_CLUSTER_CONFIG = """[Global]
Region = us-east-1
VPC = vpc-0123
SubnetID = subnet-0123
KubernetesClusterID = ccm-lab-test
"""


def test_sigterm_shuts_down_cleanly_and_releases_the_lease(sim: Any, tmp_path: Path) -> None:
    from kubernetes import client

    address_file = tmp_path / "addr"
    cloud_config = tmp_path / "cloud.conf"
    cloud_config.write_text(OFF_CLUSTER_CONFIG)
    argv = [
        *("--kubeconfig", str(sim.kubeconfig_path), "--cloud-config", str(cloud_config)),
        *("--metrics-addr", "127.0.0.1:0", "--address-file", str(address_file)),
        *("--leader-elect", "--leader-elect-identity", "sub"),
        *("--leader-elect-lease-duration", "2s", "--leader-elect-renew-deadline", "1500ms"),
        *("--leader-elect-retry-period", "200ms"),
    ]
    env = {
        **os.environ,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_ENDPOINT_URL": "http://127.0.0.1:9",
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "controller", *argv],
        cwd=Path(__file__).resolve().parents[2],
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        wait_for(address_file.exists, what="address file")
        url = address_file.read_text().strip()
        assert url.startswith("http://127.0.0.1:")

        def ready() -> bool:
            try:
                with urllib.request.urlopen(url + "/readyz", timeout=2) as resp:
                    return bool(resp.status == 200)
            except OSError:
                return False

        wait_for(ready, what="/readyz")

        def leading() -> bool:  # a standby is ready too: leadership comes when the lease does
            with urllib.request.urlopen(url + "/metrics", timeout=2) as resp:
                return "ccm_leader 1.0" in resp.read().decode()

        wait_for(leading, what="ccm_leader 1.0 in /metrics")
        coord: Any = client.CoordinationV1Api(sim.api_client())
        lease = coord.read_namespaced_lease("cloud-controller-manager", "kube-system")
        assert lease.spec.holder_identity == "sub"
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=15)
        assert proc.returncode == 0
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate(timeout=5)
    assert "received SIGTERM" in stderr
    assert "released lease kube-system/cloud-controller-manager" in stderr
    assert "Traceback" not in stderr
    lease = coord.read_namespaced_lease("cloud-controller-manager", "kube-system")
    assert lease.spec.holder_identity in ("", None)

"""The kubelet stand-in's pod half: the status sequences each kubelet version writes, as
termination-bugs.md §1 describes them (#108594/#109414, #109718, #110309, #115331), the IPs
it hands out, readiness control, logs."""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable

import pytest

from lab.dataplane.nodelifecycle import MONITOR
from lab.kube.objects import Obj
from tests.dataplane.conftest import Cluster, Recorder, Snapshot, wait

PROBE = {"exec": {"command": ["cat", "/tmp/ready"]}, "periodSeconds": 2, "failureThreshold": 1}


def pod_spec(grace: int = 30, probe: dict | None = None, on: str | None = None) -> dict:
    container: dict = {"name": "app", "image": "nginx", "ports": [{"containerPort": 80}]}
    if probe:
        container["readinessProbe"] = probe
    spec: dict = {"containers": [container], "terminationGracePeriodSeconds": grace}
    if on:
        spec["nodeName"] = on
    return spec


def settled_running(cluster: Cluster, name: str, ns: str = "default") -> Obj:
    """The pod once the lab settled: a pod bound to a live node, with the default start and no
    readinessProbe, must be Running with an IP by then (its start is the kubelet's reaction)."""
    cluster.settle()
    pod = cluster.running(name, ns)
    status = (cluster.pod(name, ns) or {}).get("status")
    assert pod is not None, f"pod {ns}/{name} not Running once the lab settled: {status}"
    return pod


def settled_pod(cluster: Cluster, name: str, ns: str = "default") -> Obj:
    """The pod as the API holds it once the lab settled (it must still exist)."""
    cluster.settle()
    pod = cluster.pod(name, ns)
    assert pod is not None, f"pod {ns}/{name} is gone once the lab settled"
    return pod


def phases(states: list[Snapshot]) -> list[tuple[str, str | None, str]]:
    out: list[tuple[str, str | None, str]] = []
    for s in states:
        step = (s.phase, s.ready, s.state)
        if not out or out[-1] != step:
            out.append(step)
    return out


@pytest.mark.parametrize(("version", "sandbox_condition"), [("1.22.8", False), ("1.29", True)])
def test_start_sequence(
    make_cluster: Callable[..., Cluster], version: str, sandbox_condition: bool
) -> None:
    cluster = make_cluster(version)
    recorder = Recorder(cluster, "web")
    cluster.create_pod("web", spec=pod_spec(on="w1"))
    pod = settled_running(cluster, "web")
    # the test's own watch is no lab component: the barrier does not cover it
    wait(
        "the watch to show it",
        lambda: recorder.states and recorder.states[-1].phase == "Running",
        cluster=cluster,
    )
    states = recorder.stop()
    assert phases(states) == [
        ("Pending", None, "none"),
        ("Pending", "False", "waiting"),
        ("Running", "True", "running"),
    ]
    node_cidr = cluster.get("/api/v1/nodes/w1")["spec"]["podCIDR"]
    assert pod["status"]["podIP"] == node_cidr.rsplit(".", 1)[0] + ".2"  # the first free address
    assert pod["status"]["podIPs"] == [{"ip": pod["status"]["podIP"]}]
    assert pod["status"]["hostIP"] == "10.0.0.11"
    expected = ["Initialized", "Ready", "ContainersReady", "PodScheduled"]
    if sandbox_condition:
        expected.insert(0, "PodReadyToStartContainers")
    assert list(states[-1].conditions) == expected
    (container,) = pod["status"]["containerStatuses"]
    assert container["image"] == "docker.io/library/nginx:latest"
    assert container["containerID"].startswith("containerd://")
    assert container["ready"] is True
    assert container["started"] is True


@pytest.mark.parametrize(("version", "goes_not_ready"), [("1.22.8", False), ("1.22.11", True)])
def test_readiness_during_graceful_termination_110309(
    make_cluster: Callable[..., Cluster], version: str, goes_not_ready: bool
) -> None:
    """K1 in the lab: an app that fails readiness on SIGTERM and needs 20 s to exit."""
    cluster = make_cluster(version, speed=20)
    cluster.create_service("web")
    cluster.create_pod(
        "web",
        spec=pod_spec(grace=60, probe=PROBE),
        annotations={
            "sim.ccm-lab.io/shutdown-seconds": "20",
            "sim.ccm-lab.io/serve-during-shutdown": "true",
        },
    )
    pod = settled_running(cluster, "web")
    assert cluster.condition(pod, "Ready") == "True", pod["status"]
    ip = pod["status"]["podIP"]
    cluster.settle()
    assert cluster.slice_endpoints("web").get(ip, {}).get("ready"), cluster.slice_endpoints("web")
    recorder = Recorder(cluster, "web")
    cluster.api.delete("/api/v1/namespaces/default/pods/web")
    # 10 lab seconds on (a failing probe's period is 2 s), settled: the endpoint controllers
    # have handled the deletion and whatever the probes found
    cluster.clock.sleep(10)  # halfway through the app's 20 s shutdown
    cluster.settle()
    midway = cluster.slice_endpoints("web").get(ip)
    assert midway is not None, cluster.slice_endpoints("web")
    assert midway["terminating"] is True
    assert midway["ready"] is False
    assert midway["serving"] is not goes_not_ready  # #110309: buggy kubelets keep serving=true
    assert cluster.endpoints("web") == (set(), set())  # Endpoints drop terminating pods at once
    wait("the pod gone", lambda: recorder.gone, timeout=20, cluster=cluster)
    states = recorder.stop()
    running_while_terminating = [s for s in states if s.terminating and s.state == "running"]
    assert running_while_terminating, states
    assert {s.ready for s in running_while_terminating} == (
        {"True", "False"} if goes_not_ready else {"True"}
    )
    assert states[-1].state == "terminated"


@pytest.mark.parametrize(("version", "final_phase"), [("1.26", "Running"), ("1.27", "Succeeded")])
def test_deleted_pod_final_status(
    make_cluster: Callable[..., Cluster], version: str, final_phase: str
) -> None:
    cluster = make_cluster(version)
    cluster.create_pod("web", spec=pod_spec(on="w1"))
    settled_running(cluster, "web")
    recorder = Recorder(cluster, "web")
    cluster.api.delete("/api/v1/namespaces/default/pods/web")
    cluster.settle()  # the app exits at SIGTERM: the kubelet deletes the pod in reaction
    assert cluster.pod("web") is None, cluster.pod("web")
    wait("the watch to see it deleted", lambda: recorder.gone, cluster=cluster)
    last = recorder.stop()[-1]
    assert (last.phase, last.ready, last.state) == (final_phase, "False", "terminated")


def test_grace_period_kill_exit_code(make_cluster: Callable[..., Cluster]) -> None:
    cluster = make_cluster("1.33")
    cluster.create_pod(
        "slow",
        spec=pod_spec(grace=2, on="w1"),
        annotations={"sim.ccm-lab.io/shutdown-seconds": "600"},
    )
    settled_running(cluster, "slow")
    recorder = Recorder(cluster, "slow")
    cluster.api.delete("/api/v1/namespaces/default/pods/slow")
    wait("gone", lambda: recorder.gone, timeout=10, cluster=cluster)  # killed at the 2 s grace
    recorder.stop()
    logs_seen = "\n".join(cluster.extra.get("logs", []))
    assert logs_seen == ""  # the pod is gone: its logs went with it
    assert recorder.states[-1].phase == "Failed"  # 1.27+: exit 137 makes it Failed


@pytest.mark.parametrize(
    ("version", "ready_after_eviction"), [("1.22.8", "True"), ("1.22.11", "False")]
)
def test_evicted_pod_ready_condition_108594_and_ip_reuse(
    make_cluster: Callable[..., Cluster], version: str, ready_after_eviction: str
) -> None:
    cluster = make_cluster(version)
    cluster.create_pod("victim", spec=pod_spec(on="w1"))
    victim = settled_running(cluster, "victim")
    ip = victim["status"]["podIP"]
    cluster.plane.kubelet.evict(
        "default", "victim", reason="OutOfcpu", message="Node didn't have enough resource: cpu"
    )
    failed = settled_pod(cluster, "victim")  # killed with no grace: Failed in reaction
    assert failed["status"]["phase"] == "Failed", failed["status"]
    assert failed["status"]["reason"] == "OutOfcpu"
    assert failed["status"]["podIP"] == ip  # the object keeps its stale IP
    assert cluster.condition(failed, "Ready") == ready_after_eviction
    assert failed["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 0
    cluster.create_pod("newcomer", ns="kube-public", labels={"app": "api"}, spec=pod_spec(on="w1"))
    newcomer = settled_running(cluster, "newcomer", "kube-public")
    assert newcomer["status"]["podIP"] == ip  # lowest free first: the address is reused
    assert cluster.plane.kubelet.pod_at(ip).namespace == "kube-public"


@pytest.mark.parametrize(
    ("version", "reason", "ready", "disruption"),
    [
        ("1.21", "Shutdown", "False", False),
        ("1.22.8", "Terminated", "True", False),
        ("1.22.11", "Terminated", "False", False),
        ("1.26", "Terminated", "False", True),
    ],
)
def test_graceful_node_shutdown_109718(
    make_cluster: Callable[..., Cluster], version: str, reason: str, ready: str, disruption: bool
) -> None:
    cluster = make_cluster(version)
    cluster.create_pod("web", spec=pod_spec(on="w1"))
    settled_running(cluster, "web")
    cluster.plane.kubelet.shutdown_node("w1", grace_seconds=20)
    pod = settled_pod(cluster, "web")  # the app exits at SIGTERM: Failed in reaction
    assert pod["status"]["phase"] == "Failed", pod["status"]
    assert pod["status"]["reason"] == reason
    assert pod["status"]["message"] == "Pod was terminated in response to imminent node shutdown."
    assert cluster.condition(pod, "Ready") == ready
    assert (cluster.condition(pod, "DisruptionTarget") == "True") is disruption
    node = cluster.get("/api/v1/nodes/w1")
    (node_ready,) = [c for c in node["status"]["conditions"] if c["type"] == "Ready"]
    assert node_ready["message"] in (
        "node is shutting down",
        "Kubelet stopped posting node status.",
    )
    # every pod on it terminated: the node powers off in reaction
    assert not cluster.kubelet.is_running("w1"), "w1 still heartbeats after its pods terminated"


def test_readiness_annotations_and_the_lab_switch(cluster: Cluster) -> None:
    cluster.create_pod(
        "late",
        spec=pod_spec(on="w1"),
        annotations={
            "sim.ccm-lab.io/ready-after-seconds": "10",
            "sim.ccm-lab.io/not-ready-after-seconds": "30",
        },
    )
    recorder = Recorder(cluster, "late")
    wait(
        "ready, then failing readiness",
        lambda: (
            [s.ready for s in recorder.states if s.phase == "Running"][-2:] == ["True", "False"]
        ),
        cluster=cluster,
    )
    recorder.stop()
    cluster.create_pod("switch", spec=pod_spec(on="w2"))
    switch = settled_running(cluster, "switch")
    assert cluster.condition(switch, "Ready") == "True", switch["status"]
    cluster.plane.kubelet.set_ready("default", "switch", False)
    switch = settled_pod(cluster, "switch")
    assert cluster.condition(switch, "Ready") == "False", switch["status"]
    cluster.plane.kubelet.set_ready("default", "switch", None)
    switch = settled_pod(cluster, "switch")
    assert cluster.condition(switch, "Ready") == "True", switch["status"]
    with pytest.raises(KeyError, match="pod default/nope is not running on a lab kubelet"):
        cluster.plane.kubelet.set_ready("default", "nope", True)


def test_logs_and_a_bad_annotation_is_reported(cluster: Cluster) -> None:
    cluster.create_pod(
        "web", spec=pod_spec(on="w1"), annotations={"sim.ccm-lab.io/shutdown-seconds": "soon"}
    )
    settled_running(cluster, "web")
    lines = cluster.plane.kubelet.logs("default", "web")
    assert len(lines) == 1
    assert "started container(s) app on w1, IP 10.244." in lines[0]
    events = [
        e
        for e in cluster.api.get("/api/v1/namespaces/default/events")["items"]
        if e["reason"] == "InvalidSimAnnotation"
    ]
    assert events, "no InvalidSimAnnotation event once the lab settled"
    assert events[0]["message"] == (
        "sim.ccm-lab.io/shutdown-seconds: 'soon' is not a number of seconds >= 0; using the default"
    )
    assert events[0]["involvedObject"]["name"] == "web"


def test_dead_kubelet_freezes_status_and_resume_catches_up(cluster: Cluster) -> None:
    cluster.kubelet.stop_heartbeat("w1")
    cluster.create_pod("web", spec=pod_spec(on="w1"))
    pod = settled_pod(cluster, "web")
    cluster.clock.sleep(5)
    frozen = settled_pod(cluster, "web")
    assert frozen["status"]["phase"] == "Pending", frozen["status"]
    assert "hostIP" not in frozen["status"], frozen["status"]
    cluster.kubelet.resume_heartbeat("w1")
    settled_running(cluster, "web")  # the kubelet back: it starts the pod in reaction
    assert pod["metadata"]["uid"] == cluster.pod("web")["metadata"]["uid"]


def test_a_node_monitor_pass_due_after_a_shutdown_sees_the_pods_killed_first(
    make_cluster: Callable[..., Cluster], monkeypatch: pytest.MonkeyPatch
) -> None:
    """kubernetes#109718 on 1.22.8: the pod killed by a graceful node shutdown keeps Ready=True
    because the node reported NotReady itself and the node lifecycle controller marks only pods
    updated after it has seen that. The shutdown and the pods' kills happen at one lab instant;
    a monitor pass due after it must see both, however late the kubelet's thread is. Here the
    kubelet is held in the middle of writing the pod's end while a pass falls due: the pass
    waits for it (``Controller.after_earlier_work``) instead of judging the node first and
    then marking the pod NotReady (the flake this reproduces: 1 run in ~10 of the catalog)."""
    cluster = make_cluster("1.22.8")
    cluster.create_pod("web", spec=pod_spec(on="w1"))
    settled_running(cluster, "web")
    kubelet, lifecycle = cluster.plane.kubelet, cluster.plane.node_lifecycle
    held, release = threading.Event(), threading.Event()
    inner = kubelet.sync

    def slow_sync(key: Hashable) -> None:
        if key == ("default", "web") and not release.is_set():
            held.set()
            release.wait(30)
        inner(key)

    monkeypatch.setattr(kubelet, "sync", slow_sync)
    kubelet.shutdown_node("w1", grace_seconds=20)
    assert held.wait(30), "the kubelet took the pod's kill"
    lifecycle.enqueue(MONITOR)  # a pass falls due while the kubelet is still at it
    # Before letting the kubelet go: the pass has either judged the node already (the race
    # lost) or is waiting for the kubelet's earlier work.
    wait(
        "the monitor pass to run or to wait for the kubelet",
        lambda: (
            "syncing ('monitor',)" in lifecycle.progress().doing
            or lifecycle.node_ready_seen("w1") == "False"
        ),
    )
    release.set()
    pod = settled_pod(cluster, "web")
    assert pod["status"]["phase"] == "Failed", pod["status"]
    assert cluster.condition(pod, "Ready") == "True", "#108594: the killed pod keeps Ready=True"

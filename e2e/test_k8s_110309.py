"""k8s-110309: readiness probes stop during termination; a pod that stopped listening stays serving.

Source: seed 004 (KubeCon NA 2022 "SIGs Aren't Silos"); kubernetes#110309, the 1.22 pod-worker
rework; fixed by #110191 (cherry-picked as #110418 to 1.22.11, #110417 to 1.23.8, #110416 to
1.24.2); ``reference/termination-bugs.md`` §1.4, §3.1 and recipe R5. The kube-proxy side is
KEP-1669 (ProxyTerminatingEndpoints: alpha in 1.22 for ``externalTrafficPolicy: Local`` only,
k/k#97238).

Story. A LoadBalancer Service with ``externalTrafficPolicy: Local`` is being rolled: on one
node both of its pods are terminating, on another a new pod is ready. Of the two terminating
pods, one drains (keeps serving and passing its readiness probe until it exits), the other
stops listening at SIGTERM and fails its probe, but takes a while to exit (cleanup), as the
issue's own reproduction does. The ELB's health check on that node's healthCheckNodePort
turns 503 at once (terminating endpoints never count as local), but until it has failed
``UnhealthyThreshold`` times in a row the ELB still sends connections there, and kube-proxy,
with the ProxyTerminatingEndpoints fallback that exists for exactly this window, forwards
them to the node's *serving* terminating endpoints. On 1.22.0-1.22.10 the kubelet stops
probing at SIGTERM, so the quitter's Ready stays True, its slice endpoint stays
``serving: true``, and a share of the node's connections is refused by a pod that no longer
listens. Fixed (1.22.11, #110191): probes run during termination, the quitter turns
``serving: false`` 2 s after deletion, and every connection the node receives goes to the
draining pod.

Honesty about versions: the buggy kubelets (1.22.0-.10, 1.23.0-.7, 1.24.0-.1) all predate the
fallback being on by default (1.26), so the traffic consequence needs the alpha gate
``ProxyTerminatingEndpoints=true`` on kube-proxy, which both labs here set. Without it a node
with only terminating pods drops the Service's traffic whatever the kubelet does; the third
case shows that, so the catalog does not claim a traffic difference where none exists. The
requests here are sent inside the health-check window: the rolling node's healthCheckNodePort
answers 503 from the deletion on, and the lab's ELB takes it out of service after
``UnhealthyThreshold`` x ``Interval`` (6 x 10 lab seconds, 6 s at the default clock speed).

Stand-ins on sim: the kubelet (probes, SIGTERM, grace), the EndpointSlice controller and
kube-proxy of the release under test (``lab/dataplane``), with the gate set on the data plane
(``LabSpec.feature_gates``, ``invoke lab.up --feature-gates``).

On a real kubelet (kind): recipe K1, the issue's own pod (an exec readiness probe on a file its
SIGTERM trap removes, then 30 s of cleanup) deleted behind a Service, its Ready condition and
slice ``serving`` sampled every second; on the pinned v1.22.9 (buggy) and v1.22.13 (fixed)
images (CI's seed-004 job, which pulls the upstream e2e busybox image). The sim's kubelet
stand-in runs no containers, so on sim this case skips and the stand-in cases above show it;
not run here, where no image registry answers.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from kubernetes import client, watch

from e2e import recipes
from e2e.catalog import Narrator, ReleaseReplay
from e2e.support import answered_by, create_service, lb_service, quiet, wait_for, wait_hostname
from e2e.workloads import create_pod, slice_endpoints, wait_pods_answer, wait_running
from lab.compose import Lab
from lab.traffic.report import TrafficReport
from lab.versions.dataplane import kubelet_behaviour

standin = pytest.mark.standin("the kubelet's probes and kube-proxy of a given release")

BUGGY, FIXED = "1.22.8", "1.22.11"
GATE = "ProxyTerminatingEndpoints=true"
#: the kind clusters of the same releases (termination-bugs.md §5)
KIND = {"buggy": "v1.22.9", "fixed": "v1.22.13"}
NS = "default"
DRAINS = {
    "sim.ccm-lab.io/shutdown-seconds": "120",
    "sim.ccm-lab.io/serve-during-shutdown": "true",
    "sim.ccm-lab.io/ready-during-shutdown": "true",
}
QUITS = {"sim.ccm-lab.io/shutdown-seconds": "120"}  # refuses and fails readiness from SIGTERM


@dataclass(frozen=True)
class Evidence:
    quitter_ip: str
    drainer_ip: str
    slice: dict[str, dict[str, bool]]
    traffic: TrafficReport


def run_scenario(lab: Lab, say: Narrator = quiet) -> Evidence:
    core = client.CoreV1Api(lab.api_client())
    rolling, steady = lab.workers[0].name, lab.workers[1].name
    say(
        f"start the controller; Service web (externalTrafficPolicy: Local); on {rolling} a pod "
        "that drains and one that quits at SIGTERM, on "
        f"{steady} a third; each with a readiness probe every 2 s"
    )
    lab.start_controller()
    create_service(core, lb_service("web", external_traffic_policy="Local"))
    create_pod(core, "drainer", namespace=NS, app="web", node=rolling, grace=180,
               annotations=DRAINS, readiness_probe=True)  # fmt: skip
    create_pod(core, "quitter", namespace=NS, app="web", node=rolling, grace=180,
               annotations=QUITS, readiness_probe=True)  # fmt: skip
    create_pod(core, "steady", namespace=NS, app="web", node=steady, readiness_probe=True)
    ips = {name: wait_running(lab, core, name, NS).status.pod_ip for name in ("drainer", "quitter")}
    wait_running(lab, core, "steady", NS)
    wait_hostname(core, "web", timeout=30)
    wait_pods_answer(lab, "web", 3)
    say.result(
        f"drainer ({ips['drainer']}), quitter ({ips['quitter']}) and steady answer through the ELB"
    )

    say(
        f"delete both pods on {rolling} (grace 180 s): the drainer keeps serving, the quitter "
        f"stops listening and fails its probe (the {lab.config.k8s_version} kubelet, "
        f"kube-proxy with {GATE})"
    )
    for name in ("drainer", "quitter"):
        core.delete_namespaced_pod(name, NS)
    wait_for(
        lambda: all(
            slice_endpoints(lab, "web", NS).get(ip, {}).get("terminating") for ip in ips.values()
        ),
        timeout=30,
        what="both endpoints terminating in the slice",
    )
    # Several probe periods (2 lab seconds each) for a fixed kubelet to report the quitter.
    lab.clock.sleep(8)
    lab.settle()  # the endpoint controllers and kube-proxy have seen all of it
    endpoints = slice_endpoints(lab, "web", NS)
    say.result(
        "in the EndpointSlice: "
        + "; ".join(f"{n} serving={endpoints.get(ip, {}).get('serving')}" for n, ip in ips.items())
    )
    say(f"send 300 requests to web through its ELB while {rolling} is still in service")
    traffic = lab.traffic.send("web", requests=300, seed=9)
    say.result(answered_by(traffic))
    return Evidence(
        quitter_ip=ips["quitter"], drainer_ip=ips["drainer"], slice=endpoints, traffic=traffic
    )


def _refused(ev: Evidence) -> int:
    return sum(n for (_, reason), n in ev.traffic.dropped.items() if "quitter" in reason)


def assert_reproduced(ev: Evidence) -> None:
    quitter = ev.slice.get(ev.quitter_ip, {})
    assert quitter.get("terminating") is True
    assert quitter.get("serving") is True, "#110309: no probes, Ready frozen, still serving"
    assert _refused(ev) > 0, f"connections refused by the quitter: {ev.traffic.to_json()}"
    assert ev.traffic.answered.get(f"{NS}/drainer", 0) > 0, "the fallback is in use"


def assert_fixed(ev: Evidence) -> None:
    quitter = ev.slice.get(ev.quitter_ip, {})
    assert quitter.get("terminating") is True
    assert quitter.get("serving") is False, "the probe ran during termination and failed"
    assert _refused(ev) == 0, ev.traffic.to_json()
    assert ev.traffic.answered_total == 300, ev.traffic.to_json()
    assert ev.traffic.answered.get(f"{NS}/drainer", 0) > 0, "the rolling node drains"


REPLAY = ReleaseReplay(BUGGY, FIXED, run_scenario, assert_reproduced, assert_fixed, gate=GATE)


@standin
def test_reproduce_terminating_pod_stays_serving_and_refuses(
    lab_at: Callable[..., Lab],
) -> None:
    ev = run_scenario(lab_at(BUGGY, GATE))
    assert_reproduced(ev)
    with pytest.raises(AssertionError):
        assert_fixed(ev)


@standin
def test_fixed_terminating_pod_turns_not_serving(lab_at: Callable[..., Lab]) -> None:
    ev = run_scenario(lab_at(FIXED, GATE))
    assert_fixed(ev)
    with pytest.raises(AssertionError):
        assert_reproduced(ev)


@standin
def test_without_the_fallback_gate_the_kubelet_fix_changes_no_traffic(
    lab_at: Callable[..., Lab],
) -> None:
    """1.22's default (gate off): the rolling node drops the Service's traffic on both
    releases; only the slice's ``serving`` tells them apart."""
    buggy, fixed = run_scenario(lab_at(BUGGY)), run_scenario(lab_at(FIXED))
    for ev in (buggy, fixed):
        assert _refused(ev) == 0
        assert f"{NS}/drainer" not in ev.traffic.answered
        assert any("no local endpoint" in reason for _, reason in ev.traffic.dropped)
    assert buggy.slice[buggy.quitter_ip]["serving"] is True
    assert fixed.slice[fixed.quitter_ip]["serving"] is False


# --- on a real kubelet: recipe K1 (termination-bugs.md §4) -----------------------------------

#: upstream's e2e busybox (kubernetes test/utils/image/manifest.go), from registry.k8s.io
BUSYBOX = "registry.k8s.io/e2e-test-images/busybox:1.36.1-1"
K1_SCRIPT = (
    "touch /tmp/ready; trap 'rm -f /tmp/ready; sleep 30; exit 0' TERM; while true; do sleep 1; done"
)


@dataclass(frozen=True)
class K1Evidence:
    #: (pod Ready, slice serving, container still running) at every change the API showed,
    #: from the deletion until the container exited (or, fixed, until not ready and not
    #: serving): watched, not sampled, so no state is missed and none is waited for
    states: list[tuple[str, bool | None, bool]]

    @property
    def while_running(self) -> list[tuple[str, bool | None]]:
        return [(ready, serving) for ready, serving, running in self.states if running]


def _k1_timeline(
    lab: Lab, ns: str, ip: str, *, resource_version: str, until_not_serving: bool
) -> list[tuple[str, bool | None, bool]]:
    """Watch web-1 and its Service's slices (from ``resource_version``, the deletion's) and
    record every combined change until the container exits or, with ``until_not_serving``,
    until it is not ready and not serving; bounded by the pod's 30 s grace period."""
    api = lab.api_client()
    core, discovery = client.CoreV1Api(api), client.DiscoveryV1Api(api)
    lock = threading.Condition()
    now: dict[str, Any] = {"ready": "True", "serving": True, "running": True}
    states: list[tuple[str, bool | None, bool]] = []
    done = threading.Event()

    def record(**change: Any) -> None:
        with lock:
            now.update(change)
            state = (now["ready"], now["serving"], now["running"])
            if not states or states[-1] != state:
                states.append(state)
            if not now["running"] or (until_not_serving and state[:2] == ("False", False)):
                done.set()

    def pods() -> None:
        for event in watch.Watch().stream(
            core.list_namespaced_pod, ns, field_selector="metadata.name=web-1",
            resource_version=resource_version, timeout_seconds=60,
        ):  # fmt: skip
            p = event["object"]
            statuses = p.status.container_statuses or []
            running = event["type"] != "DELETED" and not any(
                s.state and s.state.terminated for s in statuses
            )
            record(ready=_ready(p), running=running)
            if done.is_set():
                return

    def slices() -> None:
        for event in watch.Watch().stream(
            discovery.list_namespaced_endpoint_slice, ns,
            label_selector="kubernetes.io/service-name=web",
            resource_version=resource_version, timeout_seconds=60,
        ):  # fmt: skip
            eps = [e for e in event["object"].endpoints or [] if ip in e.addresses]
            record(serving=eps[0].conditions.serving if eps and eps[0].conditions else None)
            if done.is_set():
                return

    threads = [threading.Thread(target=f, daemon=True) for f in (pods, slices)]
    for thread in threads:
        thread.start()
    done.wait(60)  # the container exits 30 s after SIGTERM: the watch ends there
    with lock:
        return list(states)


def run_k1(lab: Lab, *, wait_not_serving: bool) -> K1Evidence:
    """The recipe on the lab's nodes. They come back from a reset as they registered, tainted
    uninitialized, so the controller runs first: the pod is scheduled once it initialized them."""
    core = client.CoreV1Api(lab.api_client())
    lab.start_controller()
    ns = "k1-lab-a"
    recipes.ensure_namespace(core, ns)
    try:
        recipes.create_service(core, ns, "web", "web")
        core.create_namespaced_pod(
            ns,
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "web-1", "labels": {"app": "web"}},
                "spec": {
                    "restartPolicy": "Never",
                    "terminationGracePeriodSeconds": 30,
                    "containers": [
                        {
                            "name": "c",
                            "image": BUSYBOX,
                            "command": ["sh", "-c", K1_SCRIPT],
                            "readinessProbe": {
                                "exec": {"command": ["cat", "/tmp/ready"]},
                                "periodSeconds": 2,
                                "failureThreshold": 1,
                            },
                        }
                    ],
                },
            },
        )
        running = wait_for(
            lambda: (
                (p := core.read_namespaced_pod("web-1", ns)).status.pod_ip
                and _ready(p) == "True"
                and p
            ),
            timeout=120,  # the image pull
            what="the K1 pod running and ready",
        )
        ip = running.status.pod_ip
        wait_for(
            lambda: (recipes.listing(lab, ns, "web").slice.get(ip) or {}).get("serving") is True,
            timeout=30,
            what="the K1 pod serving in the slice",
        )
        deleting = core.delete_namespaced_pod("web-1", ns)
        rv = str(deleting.metadata.resource_version)  # watch every change from the deletion on
        return K1Evidence(
            _k1_timeline(lab, ns, ip, resource_version=rv, until_not_serving=wait_not_serving)
        )
    finally:
        recipes.force_delete_pods(core, ns)


def _ready(p: Any) -> str:
    return next((c.status for c in (p.status.conditions or []) if c.type == "Ready"), "?")


def assert_k1_reproduced(ev: K1Evidence) -> None:
    assert ev.states, "no change recorded"
    assert not ev.states[-1][2], f"the container exited: {ev.states}"
    assert ev.while_running, ev.states
    assert all(s == ("True", True) for s in ev.while_running), (
        f"Ready and serving until the container exited: {ev.states}"
    )


def assert_k1_fixed(ev: K1Evidence) -> None:
    assert ("False", False) in ev.while_running, (
        f"not ready, not serving while the container still ran: {ev.states}"
    )


@pytest.mark.realnodes("K1 runs busybox with an exec readiness probe and a SIGTERM trap")
@pytest.mark.parametrize("release", ["buggy", "fixed"])
def test_recipe_k1_terminating_pod_readiness_on_a_real_kubelet(
    request: pytest.FixtureRequest, release: str
) -> None:
    if recipes.sim_backend(request):
        pytest.skip(
            "K1 needs a real kubelet running containers (kind); on the sim backend the "
            "stand-in cases of this module show #110309"
        )
    lab: Lab = request.getfixturevalue("lab")
    fixed = not kubelet_behaviour(lab.version).probes_stop_on_termination
    recipes.expect_release(request, lab, fixed, release=release, recipe="K1", kind=KIND)
    ev = run_k1(lab, wait_not_serving=fixed)
    recipes.judge(fixed, ev, assert_fixed=assert_k1_fixed, assert_reproduced=assert_k1_reproduced)

"""k8s-109414: a Failed pod published as a ready endpoint; its IP reused in another namespace.

Source: seed 004 (KubeCon NA 2022 "SIGs Aren't Silos"); kubernetes#109414 (GKE 1.22.7), the
kubelet regression #108594 and the controllers' fix #110255 (cherry-picked to 1.22.11 by
#110260; the kubelet side #110256/#110481); ``reference/termination-bugs.md`` §1.2 and
recipes R1/R3.

Story. A Deployment-style pod (``restartPolicy: Always``) is killed by its kubelet (here an
``OutOfmemory`` admission failure after a reboot). The 1.22.0-1.22.10 kubelet writes
``phase: Failed`` and leaves ``Ready=True``; the endpoint controllers of that release decide
readiness from the Ready condition alone, so the dead pod stays a *ready* endpoint. Its object
is not deleted and keeps its ``podIP``; the node's host-local IPAM hands the freed address to
the next pod, here one of another team's pods in another namespace. Service A's traffic is then
answered by Service B's pod: the outage of the report. Fixed (1.22.11: #110255 + #110256):
the kubelet writes ``Ready=False`` and terminal pods are never published; every request
reaches A's own pod.

Evidence: the Failed pod's Ready condition, its address in A's Endpoints and EndpointSlice,
the newcomer holding that address, and 300 requests through A's ELB (``lab.traffic``).

Stand-ins on sim: the kubelet, the endpoint controllers, kube-proxy and host-local IPAM of the
release under test (``lab/dataplane``).

On any backend (``e2e/recipes.py``): recipes R1 and R3, what the endpoint controllers of a
release publish for a Failed pod that kept Ready=True and for a second pod given its IP in
another namespace, on fake nodes; on kind with the pinned v1.22.9 (buggy, kind v0.14.0) and
v1.22.13 (fixed, kind v0.15.0) images of termination-bugs.md §5 (CI's seed-004 job; not run
here, where no image registry answers).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pytest
from kubernetes import client

from e2e import recipes
from e2e.catalog import Narrator, ReleaseReplay
from e2e.support import answered_by, create_service, lb_service, quiet, wait_for, wait_hostname
from e2e.workloads import (
    create_pod,
    endpoints_addresses,
    ensure_namespace,
    pod,
    ready,
    slice_endpoints,
    wait_running,
)
from lab.compose import Lab
from lab.traffic.report import TrafficReport
from lab.versions.dataplane import endpoints_behaviour

standin = pytest.mark.standin("the kubelet and endpoint controllers of a given release")

BUGGY, FIXED = "1.22.8", "1.22.11"
#: the kind clusters of the same releases (termination-bugs.md §5)
KIND = {"buggy": "v1.22.9", "fixed": "v1.22.13"}
A, B = "team-a", "team-b"


@dataclass(frozen=True)
class Evidence:
    victim_phase: str
    victim_ready: str
    victim_ip: str
    newcomer_ip: str
    endpoints: set[str]
    slice: dict[str, dict[str, bool]]
    traffic: TrafficReport


def run_scenario(lab: Lab, say: Narrator = quiet) -> Evidence:
    core = client.CoreV1Api(lab.api_client())
    say(f"start the controller; a LoadBalancer Service {A}/web and two of its pods on one node")
    lab.start_controller()
    for ns in (A, B):
        ensure_namespace(core, ns)
    create_service(core, lb_service("web", namespace=A))
    worker = lab.workers[0].name
    for name in ("web-1", "web-2"):
        create_pod(core, name, namespace=A, app="web", node=worker)
    pods = {name: wait_running(lab, core, name, A) for name in ("web-1", "web-2")}
    wait_hostname(core, "web", A, timeout=30)
    victim = min(pods, key=lambda n: [int(x) for x in pods[n].status.pod_ip.split(".")])
    victim_ip = pods[victim].status.pod_ip
    wait_for(
        lambda: lab.traffic.send(f"{A}/web", requests=50).answered_total == 50,
        timeout=30,
        what="A's pods answering through the ELB",
    )
    say.result(
        " and ".join(f"{n} ({pods[n].status.pod_ip})" for n in sorted(pods))
        + f" run on {worker} and answer through the ELB"
    )

    say(
        f"the kubelet rejects {victim} ({victim_ip}) at admission: OutOfmemory after a reboot "
        f"(the {lab.config.k8s_version} kubelet and endpoint controllers)"
    )
    lab.sim.plane.kubelet.evict(
        A, victim, reason="OutOfmemory", message="Node didn't have enough resource: memory"
    )
    failed = wait_for(
        lambda: (p := pod(core, victim, A)).status.phase == "Failed" and p,
        timeout=30,
        what=f"{victim} Failed",
    )
    say.result(f"{victim} is {failed.status.phase}, Ready={ready(pod(core, victim, A))}")
    say(
        f"another team's pod {B}/api-1 starts on the same node; host-local IPAM hands out "
        "the lowest free address"
    )
    create_pod(core, "api-1", namespace=B, app="api", node=worker)
    newcomer = wait_running(lab, core, "api-1", B)
    lab.settle()  # the endpoint controllers and kube-proxy have seen all of it
    reused = " (the Failed pod's address)" if newcomer.status.pod_ip == victim_ip else ""
    say.result(f"{B}/api-1 runs with {newcomer.status.pod_ip}{reused}")
    say(f"send 300 requests to {A}/web through its ELB")
    traffic = lab.traffic.send(f"{A}/web", requests=300, seed=4)
    say.result(answered_by(traffic))
    return Evidence(
        victim_phase=failed.status.phase,
        victim_ready=ready(pod(core, victim, A)),
        victim_ip=victim_ip,
        newcomer_ip=newcomer.status.pod_ip,
        endpoints=endpoints_addresses(core, "web", A),
        slice=slice_endpoints(lab, "web", A),
        traffic=traffic,
    )


def assert_reproduced(ev: Evidence) -> None:
    assert ev.newcomer_ip == ev.victim_ip, "host-local IPAM reused the freed address"
    assert (ev.victim_phase, ev.victim_ready) == ("Failed", "True"), "#108594"
    assert ev.victim_ip in ev.endpoints, "the dead pod is a ready address of A's Endpoints"
    assert ev.slice.get(ev.victim_ip, {}).get("ready") is True, "and a ready slice endpoint"
    wrong = ev.traffic.answered.get(f"{B}/api-1", 0)
    assert wrong > 0, f"A's traffic answered by B's pod: {ev.traffic.to_json()}"


def assert_fixed(ev: Evidence) -> None:
    assert ev.victim_phase == "Failed"
    assert ev.victim_ready == "False", "the kubelet marks terminal pods not ready (#110256)"
    assert ev.victim_ip not in ev.endpoints, "terminal pods are never published (#110255)"
    assert ev.victim_ip not in ev.slice
    assert ev.traffic.answered_total == 300, ev.traffic.to_json()
    assert all(p.startswith(f"{A}/") for p in ev.traffic.answered), ev.traffic.answered


REPLAY = ReleaseReplay(BUGGY, FIXED, run_scenario, assert_reproduced, assert_fixed)


@standin
def test_reproduce_failed_pod_ip_reused_answers_for_another_service(
    lab_at: Callable[[str], Lab],
) -> None:
    ev = run_scenario(lab_at(BUGGY))
    assert_reproduced(ev)
    with pytest.raises(AssertionError):
        assert_fixed(ev)


@standin
def test_fixed_terminal_pods_are_never_endpoints(lab_at: Callable[[str], Lab]) -> None:
    ev = run_scenario(lab_at(FIXED))
    assert_fixed(ev)
    with pytest.raises(AssertionError):
        assert_reproduced(ev)


# --- on any backend: recipes R1 and R3 (termination-bugs.md §4) ------------------------------

X = "10.244.77.10"  # the Failed pod's address, then the newcomer's


@dataclass(frozen=True)
class RecipeEvidence:
    a: recipes.Listing  # lab-a/web, the Failed pod's Service
    b: recipes.Listing  # lab-b/api, the newcomer's


def run_recipe(lab: Lab) -> RecipeEvidence:
    core = client.CoreV1Api(lab.api_client())
    a, b = "r1-lab-a", "r1-lab-b"
    with recipes.fake_node(lab, "fake-node-1") as node:
        try:
            for ns, svc, app, barrier_ip in ((a, "web", "web", "10.244.77.2"),
                                             (b, "api", "api", "10.244.77.3")):  # fmt: skip
                recipes.ensure_namespace(core, ns)
                recipes.create_service(core, ns, svc, app)
                recipes.create_pod(core, ns, f"barrier-{svc}", app=app, node=node, ip=barrier_ip)
            recipes.create_pod(core, a, "web-1", app="web", node=node, ip=X)
            recipes.barrier(lab, a, "web", pod="barrier-web", ip="10.244.77.2")
            # R1: the state the 1.22.0-1.22.10 kubelet wrote for a rejected pod
            recipes.set_pod_status(
                core, a, "web-1", phase="Failed", ready=True, ip=X, reason="OutOfcpu",
                message="Node didn't have enough resource: cpu",
            )  # fmt: skip
            # R3: another namespace's pod on the same node, given the same address
            recipes.create_pod(core, b, "api-1", app="api", node=node, ip=X)
            recipes.barrier(lab, a, "web", pod="barrier-web", ip="10.244.77.2")
            recipes.barrier(lab, b, "api", pod="barrier-api", ip="10.244.77.3")
            return RecipeEvidence(recipes.listing(lab, a, "web"), recipes.listing(lab, b, "api"))
        finally:
            for ns in (a, b):
                recipes.force_delete_pods(core, ns)


def assert_recipe_reproduced(ev: RecipeEvidence) -> None:
    assert X in ev.a.ready, "the Failed pod with Ready=True is a ready address of web"
    assert ev.a.slice.get(X) == {"ready": True, "serving": True, "terminating": False}, ev.a
    assert X in ev.b.ready, "and the newcomer's: one address, a ready endpoint of both Services"


def assert_recipe_fixed(ev: RecipeEvidence) -> None:
    assert not ev.a.anywhere(X), f"a terminal pod is never published: {ev.a}"
    assert X in ev.b.ready, "the address belongs to lab-b/api alone"


@pytest.mark.parametrize("release", ["buggy", "fixed"])
def test_recipe_failed_pod_published_and_its_ip_reused(
    request: pytest.FixtureRequest, release: str
) -> None:
    lab = recipes.release_lab(request, BUGGY if release == "buggy" else FIXED)
    fixed = endpoints_behaviour(lab.version).skip_terminal_pods
    recipes.expect_release(request, lab, fixed, release=release, recipe="R1/R3", kind=KIND)
    ev = run_recipe(lab)
    recipes.judge(
        fixed, ev, assert_fixed=assert_recipe_fixed, assert_reproduced=assert_recipe_reproduced
    )

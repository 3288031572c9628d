"""k8s-109718: a pod on a gracefully shut-down node stays a ready endpoint; traffic to it fails.

Source: seed 004 (KubeCon NA 2022 "SIGs Aren't Silos"); kubernetes#109718, the kubelet
regression #108594, node-lifecycle's missed True->Unknown transition (#109998); fixed by
#110255 and #110256 (1.22.11); ``reference/termination-bugs.md`` §1.3 and recipe R4.

Story. A node is shut down gracefully (``shutdownGracePeriod``): its kubelet reports
``Ready=False`` "node is shutting down", kills its pods (``phase: Failed``, ``reason:
Terminated``, "Pod was terminated in response to imminent node shutdown.") and the machine
powers off. The 1.22.0-1.22.10 kubelet leaves the killed pod ``Ready=True``; because the node
reported False before going silent, the node-lifecycle controller never marks its pods not
ready; the endpoint controllers publish the dead pod as ready. Requests that kube-proxy on the
surviving node sends to that address fail: even once the ELB's health checks have taken the
powered-off node out of service, a share of every request through the ELB is lost. Fixed
(1.22.11): the killed pod is not ready and not published; once the ELB stops sending to the
dead node, every request reaches the surviving pod.

Evidence: the killed pod's status, the Service's Endpoints and EndpointSlice, and 300 requests
through the ELB (``lab.traffic``) after the dead node's instance is OutOfService.

Stand-ins on sim: kubelet graceful node shutdown, node lifecycle, endpoint controllers and
kube-proxy of the release under test (``lab/dataplane``).

On any backend (``e2e/recipes.py``): recipe R4, the killed pod's status and its node's
``Ready=False`` written by hand on fake nodes, and what the endpoint controllers of the
release publish; on kind with the pinned v1.22.9 (buggy) and v1.22.13 (fixed) images (CI's
seed-004 job; not run here).
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
    pod,
    ready,
    slice_endpoints,
    wait_pods_answer,
    wait_running,
)
from lab.compose import Lab
from lab.traffic.report import TrafficReport
from lab.versions.dataplane import endpoints_behaviour

standin = pytest.mark.standin("graceful node shutdown by the kubelet of a given release")

BUGGY, FIXED = "1.22.8", "1.22.11"
#: the kind clusters of the same releases (termination-bugs.md §5)
KIND = {"buggy": "v1.22.9", "fixed": "v1.22.13"}
NS = "default"


@dataclass(frozen=True)
class Evidence:
    victim_phase: str
    victim_reason: str
    victim_ready: str
    victim_ip: str
    endpoints: set[str]
    slice: dict[str, dict[str, bool]]
    traffic: TrafficReport


def run_scenario(lab: Lab, say: Narrator = quiet) -> Evidence:
    core = client.CoreV1Api(lab.api_client())
    say("start the controller; a LoadBalancer Service web with one pod on each of two nodes")
    lab.start_controller()
    create_service(core, lb_service("web"))
    down, up = lab.workers[0].name, lab.workers[1].name
    create_pod(core, "web-down", namespace=NS, app="web", node=down)
    create_pod(core, "web-up", namespace=NS, app="web", node=up)
    victim_ip = wait_running(lab, core, "web-down", NS).status.pod_ip
    wait_running(lab, core, "web-up", NS)
    wait_hostname(core, "web", timeout=30)
    wait_pods_answer(lab, "web", 2)
    say.result(f"web-down ({victim_ip}) on {down} and web-up on {up} answer through the ELB")

    say(
        f"graceful node shutdown of {down} (shutdownGracePeriod 20 s) by the "
        f"{lab.config.k8s_version} kubelet; the node powers off"
    )
    lab.sim.plane.kubelet.shutdown_node(down, grace_seconds=20)
    wait_for(
        lambda: pod(core, "web-down", NS).status.phase == "Failed",
        timeout=30,
        what="the pod on the shut-down node Failed",
    )
    wait_for(lambda: lab.sim.plane.kubelet.powered_off(down), timeout=30, what="power off")
    lab.settle()  # the endpoint controllers and kube-proxy have seen all of it
    victim = pod(core, "web-down", NS)
    down_instance = lab.node(down).instance_id
    say.result(
        f"{down} is off; web-down is {victim.status.phase} ({victim.status.reason}), "
        f"Ready={ready(victim)}"
    )
    say(f"wait for the ELB's health checks to take {down} ({down_instance}) out of service")
    wait_for(
        lambda: down_instance not in lab.traffic.send("web", requests=30).instances,
        timeout=30,
        what=f"{down_instance} OutOfService",
    )
    say.result(f"{down_instance} is OutOfService: the ELB sends it no request")
    say("send 300 requests to web through its ELB")
    traffic = lab.traffic.send("web", requests=300, seed=5)
    say.result(answered_by(traffic))
    return Evidence(
        victim_phase=victim.status.phase,
        victim_reason=victim.status.reason or "",
        victim_ready=ready(victim),
        victim_ip=victim_ip,
        endpoints=endpoints_addresses(core, "web", NS),
        slice=slice_endpoints(lab, "web", NS),
        traffic=traffic,
    )


def assert_reproduced(ev: Evidence) -> None:
    assert (ev.victim_phase, ev.victim_reason) == ("Failed", "Terminated")
    assert ev.victim_ready == "True", "#108594: the killed pod keeps Ready=True"
    assert ev.victim_ip in ev.endpoints, "published as a ready address"
    assert ev.slice.get(ev.victim_ip, {}).get("ready") is True
    lost = ev.traffic.requests - ev.traffic.answered_total
    assert lost > 0, f"requests sent to the dead pod are lost: {ev.traffic.to_json()}"
    assert any(ev.victim_ip in reason for _, reason in ev.traffic.dropped), ev.traffic.dropped


def assert_fixed(ev: Evidence) -> None:
    assert (ev.victim_phase, ev.victim_reason) == ("Failed", "Terminated")
    assert ev.victim_ready == "False"
    assert ev.victim_ip not in ev.endpoints
    assert ev.victim_ip not in ev.slice
    assert not any(ev.victim_ip in reason for _, reason in ev.traffic.dropped)
    assert ev.traffic.answered_total == 300, ev.traffic.to_json()
    assert dict(ev.traffic.answered) == {f"{NS}/web-up": 300}


REPLAY = ReleaseReplay(BUGGY, FIXED, run_scenario, assert_reproduced, assert_fixed)


@standin
def test_reproduce_shut_down_nodes_pod_stays_a_ready_endpoint(
    lab_at: Callable[[str], Lab],
) -> None:
    ev = run_scenario(lab_at(BUGGY))
    assert_reproduced(ev)
    with pytest.raises(AssertionError):
        assert_fixed(ev)


@standin
def test_fixed_shut_down_nodes_pod_leaves_the_endpoints(lab_at: Callable[[str], Lab]) -> None:
    ev = run_scenario(lab_at(FIXED))
    assert_fixed(ev)
    with pytest.raises(AssertionError):
        assert_reproduced(ev)


# --- on any backend: recipe R4 (termination-bugs.md §4) --------------------------------------

Y = "10.244.78.10"  # the pod on the node that shuts down
BARRIER = "10.244.78.2"


def run_recipe(lab: Lab) -> recipes.Listing:
    """The pod on fake-node-2 is killed by a graceful shutdown (the buggy kubelet's status:
    Failed, Terminated, Ready left True) and the node reports Ready=False; the barrier pod is
    on a healthy node (a pod updated on a not-ready node is marked not ready)."""
    core = client.CoreV1Api(lab.api_client())
    ns = "r4-lab-a"
    with (
        recipes.fake_node(lab, "fake-node-1") as healthy,
        recipes.fake_node(lab, "fake-node-2") as going,
    ):
        try:
            recipes.ensure_namespace(core, ns)
            recipes.create_service(core, ns, "web", "web")
            recipes.create_pod(core, ns, "barrier-web", app="web", node=healthy, ip=BARRIER)
            recipes.create_pod(core, ns, "web-2", app="web", node=going, ip=Y)
            recipes.barrier(lab, ns, "web", pod="barrier-web", ip=BARRIER)
            assert Y in recipes.listing(lab, ns, "web").ready, "web-2 serving before shutdown"
            recipes.set_pod_status(
                core, ns, "web-2", phase="Failed", ready=True, ip=Y, reason="Terminated",
                message="Pod was terminated in response to imminent node shutdown.",
            )  # fmt: skip
            recipes.set_node_ready(core, going, False)
            recipes.barrier(lab, ns, "web", pod="barrier-web", ip=BARRIER)
            return recipes.listing(lab, ns, "web")
        finally:
            recipes.force_delete_pods(core, ns)


def assert_recipe_reproduced(seen: recipes.Listing) -> None:
    # ready, or not ready if the node lifecycle controller marked it so: listed either way
    assert Y in seen.ready | seen.not_ready, f"the shut-down pod is still listed: {seen}"
    assert Y in seen.slice, seen


def assert_recipe_fixed(seen: recipes.Listing) -> None:
    assert not seen.anywhere(Y), f"a terminal pod is never published: {seen}"
    assert BARRIER in seen.ready


@pytest.mark.parametrize("release", ["buggy", "fixed"])
def test_recipe_shut_down_nodes_pod_published(request: pytest.FixtureRequest, release: str) -> None:
    lab = recipes.release_lab(request, BUGGY if release == "buggy" else FIXED)
    fixed = endpoints_behaviour(lab.version).skip_terminal_pods
    recipes.expect_release(request, lab, fixed, release=release, recipe="R4", kind=KIND)
    seen = run_recipe(lab)
    recipes.judge(
        fixed, seen, assert_fixed=assert_recipe_fixed, assert_reproduced=assert_recipe_reproduced
    )

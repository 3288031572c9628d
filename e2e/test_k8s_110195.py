"""k8s-110195: the ELB keeps sending traffic to a node the cluster autoscaler is removing.

Source: seed 004 (KubeCon NA 2022 "SIGs Aren't Silos"); kubernetes#110195 "Kubernetes sending
traffic to draining nodes" (about ten socket timeouts per scale-down); KEP-3836 "kube-proxy
improved ingress connectivity reliability" (``KubeProxyDrainingTerminatingNodes``: alpha 1.28
off, beta 1.30 on, GA 1.31; kubernetes#116470): kube-proxy's ``/healthz`` on 10256 answers 503
``"nodeEligible": false`` on a Node tainted ``ToBeDeletedByClusterAutoscaler`` or being
deleted, so a load balancer health-checking 10256 stops sending new connections to a node
before its machine goes. ``reference/termination-bugs.md`` §1.5, §3.2, §3.3 and recipe R8.

Story. The autoscaler scales a worker down: it taints the Node ``ToBeDeletedByClusterAutoscaler``,
evicts its pods, and after its drain window terminates the instance; the cloud controller then
deletes the Node and deregisters the instance. With the stable node set (KEP-3458, which our
controller follows; the legacy path is ``transient-node-predicates``) the taint alone changes
no ELB, so until the machine goes, only the ELB's health check can stop new connections to it.
For ``externalTrafficPolicy: Cluster`` the AWS cloud controller's Classic ELB health check is
``TCP:<nodePort>`` by default, or ``HTTP:10256/healthz`` (kube-proxy's own health) with the
cloud config's ``ClusterServiceLoadBalancerHealthProbeMode = Shared`` (cloud-provider-aws
``pkg/providers/v1/config``; ``ensureLoadBalancer``'s non-local branch).

* Reproduce (1.29: kube-proxy's ``/healthz`` knows nothing of the taint): the draining node
  passes every health check up to the moment it is removed, so it keeps its share of new
  requests; on a real cluster each connection open at removal is cut (the report's socket
  timeouts). The same holds on a fixed release with the default ``TCP:<nodePort>`` check:
  kube-proxy still forwards to pods on other nodes, so the check passes (third case: KEP-3836
  reaches a Classic ELB only through the Shared probe mode).
* Fixed (1.31 with the Shared probe mode; 1.28/1.29 behave so with ``lab.up
  --feature-gates KubeProxyDrainingTerminatingNodes=true``): ``/healthz`` on the draining node
  answers 503, the ELB marks it OutOfService after UnhealthyThreshold checks, and no request
  reaches it in the drain window; every request is answered before and after the removal.

The drain window here is 30 lab seconds (pods' grace plus the autoscaler's delay after the
taint); the Service's health check annotations (interval 5 s, unhealthy threshold 2) let the
ELB decide within it. With the controller's defaults (10 s x 6) a real ELB needs a minute: a
drain window shorter than that leaves even the fixed setup sending to the node.

Evidence: the ELB's health check target, ``/healthz`` on the draining node, the instance's
DescribeInstanceHealth answer just before removal, the requests the ELB sends to the draining
node during the drain window, and requests through the ELB before and after the removal.

Stand-ins on sim: kube-proxy of the release under test (its ``/healthz``), the pod lifecycle,
and the lab's ELB health checks on the lab clock.

On any backend (``e2e/recipes.py``): recipe R8, kube-proxy's ``/healthz`` on a worker before,
while and after it carries the autoscaler's taint; on kind with the pinned v1.29.2 (buggy,
kind v0.22.0) and v1.31.0 (fixed, kind v0.24.0) images (CI's seed-004 job; not run here).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pytest
from kubernetes import client

from e2e import recipes
from e2e.catalog import Narrator, ReleaseReplay
from e2e.support import (
    ANN,
    answered_by,
    create_service,
    elb_name,
    lb_service,
    quiet,
    wait_for,
    wait_hostname,
)
from e2e.workloads import create_pod, wait_pods_answer, wait_running
from lab.compose import Lab
from lab.traffic.report import TrafficReport
from lab.versions.dataplane import kube_proxy_behaviour

standin = pytest.mark.standin("kube-proxy's /healthz of a given release and a node powered off")

BUGGY, FIXED = "1.29", "1.31"
#: the kind clusters of the same releases (pinned node images)
KIND = {"buggy": "v1.29.2", "fixed": "v1.31.0"}
NS = "default"
AUTOSCALER_TAINT = "ToBeDeletedByClusterAutoscaler"
SHARED_PROBE = (("ClusterServiceLoadBalancerHealthProbeMode", "Shared"),)
HEALTH_CHECK = {
    ANN + "healthcheck-interval": "5",
    ANN + "healthcheck-timeout": "3",
    ANN + "healthcheck-unhealthy-threshold": "2",
    ANN + "healthcheck-healthy-threshold": "2",
}
DRAIN_WINDOW_S = 30.0  # lab seconds between the taint and the instance's termination
# the node lifecycle controller checks NotReady nodes often and, the lab's nodes being minutes
# old, without the grace period for new nodes (k8s-81636): the removal follows the termination
FAST_LIFECYCLE = ("--node-monitor-period", "0.5s", "--node-deletion-grace-period", "1s")
UNHEALTHY = "failed at least the UnhealthyThreshold number of health checks"


@dataclass(frozen=True)
class Evidence:
    health_check_target: str
    healthz_status: int
    healthz_body: dict[str, Any]
    draining_state: str
    draining_description: str
    to_draining: int
    traffic: TrafficReport
    """Requests through the ELB at the end of the drain window, just before the removal."""
    after_removal: TrafficReport


def _health(lab: Lab, load_balancer: str, instance_id: str) -> tuple[str, str]:
    aws = lab.aws
    assert aws is not None
    found = aws.client("elb").describe_instance_health(
        LoadBalancerName=load_balancer, Instances=[{"InstanceId": instance_id}]
    )["InstanceStates"]
    return (found[0]["State"], found[0]["Description"]) if found else ("absent", "")


def run_scenario(lab: Lab, say: Narrator = quiet, *, shared_probe: bool = True) -> Evidence:
    core = client.CoreV1Api(lab.api_client())
    mode = "Shared (HTTP:10256/healthz)" if shared_probe else "the default (TCP:<nodePort>)"
    say(f"start the controller with ClusterServiceLoadBalancerHealthProbeMode {mode}")
    config = lab.write_cloud_config(extra_global=SHARED_PROBE if shared_probe else ())
    lab.start_controller(cloud_config=config, args=FAST_LIFECYCLE)
    say.result("the controller is ready")
    stays, goes = lab.workers[0].name, lab.workers[1].name
    say(f"a LoadBalancer Service web (eTP=Cluster) with one pod on {stays} and one on {goes}")
    load_balancer = elb_name(create_service(core, lb_service("web", annotations=HEALTH_CHECK)))
    create_pod(core, "web-stays", namespace=NS, app="web", node=stays)
    create_pod(core, "web-goes", namespace=NS, app="web", node=goes, grace=5)
    wait_running(lab, core, "web-stays", NS)
    wait_running(lab, core, "web-goes", NS)
    wait_hostname(core, "web", timeout=30)
    wait_pods_answer(lab, "web", 2)
    aws = lab.aws
    assert aws is not None
    target = aws.client("elb").describe_load_balancers(LoadBalancerNames=[load_balancer])[
        "LoadBalancerDescriptions"
    ][0]["HealthCheck"]["Target"]
    goes_instance = lab.node(goes).instance_id
    say.result(f"ELB {load_balancer} checks {target}; both pods answer through it")

    say(f"the cluster autoscaler scales {goes} down: taint {AUTOSCALER_TAINT}, evict its pod")
    node = core.read_node(goes)
    stamp = str(int(datetime.now(UTC).timestamp()))
    taints = [t.to_dict() for t in node.spec.taints or []]
    taints.append({"key": AUTOSCALER_TAINT, "value": stamp, "effect": "NoSchedule"})
    core.patch_node(goes, {"spec": {"taints": taints}})
    core.delete_namespaced_pod("web-goes", NS)
    proxy = lab.sim.plane.kube_proxy
    wait_for(
        lambda: any(
            t.get("key") == AUTOSCALER_TAINT
            for t in (proxy.nodes.get("", goes) or {}).get("spec", {}).get("taints") or []
        ),
        timeout=30,
        what="kube-proxy's informer to see the taint",
    )
    status, body = proxy.healthz(node=goes)
    say.result(f"kube-proxy's /healthz on {goes} answers {status}")

    say(f"the drain window: {DRAIN_WINDOW_S:.0f} lab seconds of requests before the machine goes")
    lab.clock.sleep(DRAIN_WINDOW_S)
    state, description = _health(lab, load_balancer, goes_instance)
    window = lab.traffic.send("web", requests=200, seed=11)
    say.result(
        f"{goes_instance} is {state} on the ELB; {window.instances.get(goes_instance, 0)} of 200 "
        "new requests reached it"
    )

    say(f"the autoscaler terminates {goes_instance}; the controller deletes the Node")
    aws.client("ec2").terminate_instances(InstanceIds=[goes_instance])
    lab.sim.plane.kubelet.shutdown_node(goes, grace_seconds=0)
    wait_for(
        lambda: goes not in {n.metadata.name for n in core.list_node().items},
        timeout=60,
        what=f"the Node {goes} deleted",
    )
    after = lab.traffic.send("web", requests=200, seed=12)
    say.result(f"the Node {goes} is deleted; after it: {answered_by(after)}")
    return Evidence(
        health_check_target=str(target),
        healthz_status=status,
        healthz_body=body,
        draining_state=state,
        draining_description=description,
        to_draining=window.instances.get(goes_instance, 0),
        traffic=window,
        after_removal=after,
    )


def assert_reproduced(ev: Evidence) -> None:
    assert ev.draining_state == "InService", (ev.draining_state, ev.draining_description)
    assert ev.to_draining > 0, f"new requests still reach the draining node: {ev.traffic.to_json()}"
    # kube-proxy there forwards them to the pod that stays: nothing fails until the machine goes
    assert ev.traffic.answered_total == ev.traffic.requests, ev.traffic.to_json()


def assert_fixed(ev: Evidence) -> None:
    assert ev.health_check_target == "HTTP:10256/healthz", ev.health_check_target
    assert (ev.healthz_status, ev.healthz_body.get("nodeEligible")) == (503, False)
    assert ev.draining_state == "OutOfService", (ev.draining_state, ev.draining_description)
    assert UNHEALTHY in ev.draining_description, ev.draining_description
    assert ev.to_draining == 0, ev.traffic.to_json()
    assert dict(ev.traffic.answered) == {f"{NS}/web-stays": ev.traffic.requests}
    assert dict(ev.after_removal.answered) == {f"{NS}/web-stays": ev.after_removal.requests}


REPLAY = ReleaseReplay(BUGGY, FIXED, run_scenario, assert_reproduced, assert_fixed)


@standin
def test_reproduce_draining_node_keeps_its_share_of_requests(
    lab_at: Callable[[str], Lab],
) -> None:
    ev = run_scenario(lab_at(BUGGY), shared_probe=True)
    assert ev.health_check_target == "HTTP:10256/healthz"
    assert ev.healthz_status == 200, "1.29's kube-proxy does not fail /healthz for the taint"
    assert "nodeEligible" not in ev.healthz_body
    assert_reproduced(ev)
    with pytest.raises(AssertionError):
        assert_fixed(ev)


@standin
def test_fixed_draining_node_taken_out_by_kube_proxy_healthz(
    lab_at: Callable[[str], Lab],
) -> None:
    ev = run_scenario(lab_at(FIXED), shared_probe=True)
    assert_fixed(ev)
    with pytest.raises(AssertionError):
        assert_reproduced(ev)


@standin
def test_fixed_release_with_a_tcp_health_check_still_sends_to_the_draining_node(
    lab_at: Callable[[str], Lab],
) -> None:
    """KEP-3836 reaches a Classic ELB only through the Shared probe mode: with the default
    ``TCP:<nodePort>`` check kube-proxy's 503 on 10256 is never asked."""
    ev = run_scenario(lab_at(FIXED), shared_probe=False)
    assert ev.health_check_target.startswith("TCP:"), ev.health_check_target
    assert (ev.healthz_status, ev.healthz_body.get("nodeEligible")) == (503, False)
    assert_reproduced(ev)
    with pytest.raises(AssertionError):
        assert_fixed(ev)


# --- on any backend: recipe R8 (termination-bugs.md §4) --------------------------------------


@dataclass(frozen=True)
class RecipeEvidence:
    before: tuple[int, dict[str, Any]]
    tainted: list[tuple[int, dict[str, Any]]]  # every answer while the taint was on
    after: tuple[int, dict[str, Any]]


def run_recipe(lab: Lab, *, drains: bool) -> RecipeEvidence:
    """Taint a worker ``ToBeDeletedByClusterAutoscaler`` and read kube-proxy's ``/healthz``
    there: a release that drains answers 503 within 30 s; one that does not is asked once the
    lab settled (sim: its informer has the taint), or sampled for 5 s on a real cluster."""
    node = lab.workers[0].name
    before = recipes.proxy_healthz(lab, node)
    stamp = str(int(datetime.now(UTC).timestamp()))
    recipes.set_taint(lab, node, AUTOSCALER_TAINT, stamp)
    tainted: list[tuple[int, dict[str, Any]]] = []
    try:
        if drains:
            wait_for(
                lambda: tainted.append(recipes.proxy_healthz(lab, node)) or tainted[-1][0] == 503,
                timeout=30,
                what=f"kube-proxy's /healthz on {node} failing for the taint",
            )
        elif lab.settles_cluster:
            # the barrier: kube-proxy's informer has the taint, so one answer is the answer
            tainted.append(recipes.proxy_healthz(lab, node))
        else:
            # a real kube-proxy gives no sign of having seen the taint when it ignores it: the
            # evidence is its answers over an observation window of 5 s after the taint
            for _ in range(10):
                tainted.append(recipes.proxy_healthz(lab, node))
                time.sleep(0.5)
    finally:
        recipes.set_taint(lab, node, AUTOSCALER_TAINT, None)
    after = wait_for(
        lambda: (answer := recipes.proxy_healthz(lab, node))[0] == 200 and answer,
        timeout=30,
        what=f"kube-proxy's /healthz on {node} healthy again without the taint",
    )
    return RecipeEvidence(before, tainted, after)


def assert_recipe_reproduced(ev: RecipeEvidence) -> None:
    assert ev.before[0] == 200
    assert ev.tainted, "no answer sampled while tainted"
    assert all(status == 200 for status, _ in ev.tainted), ev.tainted
    assert all("nodeEligible" not in body for _, body in ev.tainted), ev.tainted


def assert_recipe_fixed(ev: RecipeEvidence) -> None:
    assert (ev.before[0], ev.before[1].get("nodeEligible")) == (200, True), ev.before
    status, body = ev.tainted[-1]
    assert (status, body.get("nodeEligible")) == (503, False), ev.tainted
    assert (ev.after[0], ev.after[1].get("nodeEligible")) == (200, True), ev.after


@pytest.mark.parametrize("release", ["buggy", "fixed"])
def test_recipe_kube_proxy_healthz_on_a_tainted_node(
    request: pytest.FixtureRequest, release: str
) -> None:
    lab = recipes.release_lab(request, BUGGY if release == "buggy" else FIXED)
    drains = kube_proxy_behaviour(lab.version).healthz_node_eligibility
    recipes.expect_release(request, lab, drains, release=release, recipe="R8", kind=KIND)
    ev = run_recipe(lab, drains=drains)
    recipes.judge(
        drains, ev, assert_fixed=assert_recipe_fixed, assert_reproduced=assert_recipe_reproduced
    )

"""transient-node-predicates: nodes cut from the ELB without draining.

Source: seed 004 (KubeCon "SIGs Aren't Silos": kubernetes#110195 "traffic to draining
nodes") and KEP-3458 (``StableLoadBalancerNodeSet``, beta 1.27, GA 1.30). Legacy: the service
controller's node set used transient predicates: a node going NotReady (or tainted
``ToBeDeletedByClusterAutoscaler``) was deregistered from every ELB at once, so a blip in the
kubelet's heartbeat cut live connections, and the ELB's own health check, which exists for
exactly that, was bypassed. Fixed = current upstream cloud-provider
(``controllers/service/controller.go``): a node update starts a load-balancer sync only when
the exclusion label or the providerID changes (``shouldSyncUpdatedNode``), plus node add and
delete; a sync's node set is ``stableNodeSetPredicates`` (not being deleted, not excluded, not
tainted ``ToBeDeletedByClusterAutoscaler``); readiness is never a predicate, so the ELB's
health check decides; a tainted node leaves at the next sync something else starts, and with
connection draining on, that deregistration drains. Whether new requests stop reaching the
tainted node before then is the health check's business: ``k8s-110195`` shows that half
with traffic.

Evidence is the trail (Register/Deregister calls), the ELB's instances and its attributes.
To show that the fixed controller *saw* the NotReady node and still kept it, the test then
makes an unrelated node-set change (the control plane is included in load balancing) and
checks that this sync registers the control plane while the NotReady worker stays.

Stand-ins on sim: the kubelet stand-in reports the worker NotReady (``Ready=False``, still
heartbeating: a kubelet whose runtime is unhealthy).
"""

from __future__ import annotations

import urllib.request
from dataclasses import dataclass
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from e2e.catalog import conformance
from e2e.support import (
    ANN,
    create_service,
    elb_name,
    lb_service,
    registered_instances,
    wait_for,
    wait_hostname,
)
from lab import nodes as node_patches
from lab.compose import Lab

standin = pytest.mark.standin("makes a kubelet report NotReady")


AUTOSCALER_TAINT = "ToBeDeletedByClusterAutoscaler"
DRAINING = {ANN + "connection-draining-enabled": "true", ANN + "connection-draining-timeout": "30"}


@dataclass(frozen=True)
class Evidence:
    worker_instance: str
    cp_instance: str
    instances_after: set[str]
    deregistered: list[str]
    registered: list[str]


def _ids(value: Any) -> list[str]:
    if isinstance(value, list):
        return [str(v) for v in value]
    return [str(value)] if value else []


def run_scenario(lab: Lab, core: Any, elb: Any, *, legacy: bool) -> Evidence:
    aws = lab.aws
    kubelet = lab.sim.kubelet
    assert aws is not None
    assert kubelet is not None
    worker, cp = lab.workers[0], lab.control_plane
    lab.start_controller(legacy=["transient-node-predicates"] if legacy else [])
    svc = create_service(core, lb_service("web", annotations=DRAINING))
    name = elb_name(svc)
    wait_hostname(core, "web")
    wait_for(lambda: registered_instances(elb, name) == {worker.instance_id}, what="registered")
    mark = aws.trail.last_seq

    kubelet.report_not_ready(worker.name)
    wait_for(
        lambda: any(
            c.type == "Ready" and c.status == "False"
            for c in core.read_node(worker.name).status.conditions
        ),
        what="the worker NotReady",
    )
    if legacy:
        wait_for(
            lambda: worker.instance_id not in registered_instances(elb, name),
            what="the legacy controller to drop the NotReady worker",
        )
    # An unrelated node-set change: the control plane joins load balancing.
    node_patches.include(core, cp.name)
    wait_for(lambda: cp.instance_id in registered_instances(elb, name), what="cp registered")
    calls = [e for e in aws.trail.events() if e.seq > mark]
    return Evidence(
        worker_instance=worker.instance_id,
        cp_instance=cp.instance_id,
        instances_after=registered_instances(elb, name),
        deregistered=[
            i
            for e in calls
            if e.action == "DeregisterInstancesFromLoadBalancer"
            for i in _ids(e.params.get("Instances"))
        ],
        registered=[
            i
            for e in calls
            if e.action == "RegisterInstancesWithLoadBalancer"
            for i in _ids(e.params.get("Instances"))
        ],
    )


def assert_cut(ev: Evidence) -> None:
    assert ev.worker_instance in ev.deregistered, "the NotReady worker is deregistered"
    assert ev.instances_after == {ev.cp_instance}


def assert_stable(ev: Evidence) -> None:
    assert ev.worker_instance not in ev.deregistered
    assert ev.instances_after == {ev.worker_instance, ev.cp_instance}
    assert ev.cp_instance in ev.registered, "the later node sync did run"


def _metric(ctl: Any, name: str, **labels: str) -> float:
    """One sample of our controller's ``/metrics`` (0 when the series is not there yet)."""
    url = ctl.metrics_url
    assert url is not None, "needs our controller's /metrics"
    with urllib.request.urlopen(url, timeout=10) as resp:
        text = resp.read().decode()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                return float(sample.value)
    return 0.0


@conformance(failure="transient-node-predicates", expect="reproduce")
@standin
def test_reproduce_not_ready_node_dropped_at_once(lab: Lab, core_v1: Any, elb: Any) -> None:
    ev = run_scenario(lab, core_v1, elb, legacy=True)
    assert_cut(ev)
    with pytest.raises(AssertionError):
        assert_stable(ev)


@conformance(failure="transient-node-predicates", expect="fixed")
@standin
def test_fixed_not_ready_node_stays(lab: Lab, core_v1: Any, elb: Any) -> None:
    ev = run_scenario(lab, core_v1, elb, legacy=False)
    assert_stable(ev)
    with pytest.raises(AssertionError):
        assert_cut(ev)


def test_fixed_autoscaler_taint_waits_for_the_next_sync(lab: Lab, core_v1: Any, elb: Any) -> None:
    """Upstream's shouldSyncUpdatedNode: the taint starts no sync (the legacy controller
    deregistered at once); the node leaves the ELB at the next sync something else starts
    (here the control plane joining), and the ELB drains its connections. Whether new requests
    stop reaching it before that is the health check's business: ``k8s-110195``."""
    worker, cp = lab.workers[0], lab.control_plane
    aws = lab.aws
    assert aws is not None
    lab.start_controller()
    svc = create_service(core_v1, lb_service("web", annotations=DRAINING))
    name = elb_name(svc)
    wait_hostname(core_v1, "web")
    wait_for(lambda: registered_instances(elb, name) == {worker.instance_id}, what="registered")
    attrs = elb.describe_load_balancer_attributes(LoadBalancerName=name)["LoadBalancerAttributes"]
    assert attrs["ConnectionDraining"] == {"Enabled": True, "Timeout": 30}
    mark = aws.trail.last_seq
    ctl = lab.controller
    assert ctl is not None
    adds_before = _metric(ctl, "ccm_workqueue_adds_total", queue="service-node-sync")
    node = core_v1.read_node(worker.name)
    taints = [*(node.spec.taints or []), {"key": AUTOSCALER_TAINT, "effect": "NoSchedule"}]
    tainted = core_v1.patch_node(worker.name, {"spec": {"taints": taints}})
    # Evidence, not a pause: the controller's node handlers have had the taint (its informer
    # reports the newest resourceVersion they were given), and they queued no node sync for it
    # (the legacy controller's handler queues one, and deregisters the worker).
    rv = int(tainted.metadata.resource_version)
    wait_for(
        lambda: _metric(ctl, "ccm_informer_resource_version", kind="nodes") >= rv,
        what="the controller's node handlers to have the taint",
    )
    assert _metric(ctl, "ccm_workqueue_adds_total", queue="service-node-sync") == adds_before
    assert registered_instances(elb, name) == {worker.instance_id}
    assert not [
        e for e in aws.trail.events()
        if e.seq > mark and e.action == "DeregisterInstancesFromLoadBalancer"
    ]  # fmt: skip
    node_patches.include(core_v1, cp.name)
    wait_for(
        lambda: registered_instances(elb, name) == {cp.instance_id},
        what="the next sync: the control plane in, the tainted worker out",
    )

"""legacy-node-role: the only node is excluded from the load balancer.

Source: seed 000. In a single-node cluster the control-plane node is never registered with
the ELB. Before Kubernetes 1.21 the service controller skipped nodes labelled
``node-role.kubernetes.io/master`` (feature gate ``LegacyNodeRoleBehavior``, on by default);
since 1.21 kubeadm labels control-plane nodes
``node.kubernetes.io/exclude-from-external-load-balancers``, which is always honoured.
Symptom: the ELB has zero instances and the Service gets the Warning event
``UnAvailableLoadBalancer``. The write-up's fixes: remove the label (``invoke
lab.nodes.include``) or turn the gate off (here: the controller without
``--legacy-behavior=legacy-node-role``).

Stand-ins on sim: the kubelet stand-in registers the control plane with the labels kubeadm
sets for the chosen version (1.20: the master label; 1.33: control-plane + exclusion label).
"""

from __future__ import annotations

from typing import Any

import pytest

from e2e.catalog import conformance
from e2e.support import (
    create_service,
    elb_name,
    events_for,
    lb_service,
    reasons,
    registered_instances,
    wait_for,
    wait_hostname,
)
from e2e.workloads import assert_pod_answers, create_pod, wait_running
from lab import nodes as node_patches
from lab.compose import Lab
from lab.versions.release import KubeVersion

pytestmark = pytest.mark.standin(
    "removes nodes and re-registers the control plane as an older kubeadm would"
)


EXCLUDE = "node.kubernetes.io/exclude-from-external-load-balancers"
MASTER = "node-role.kubernetes.io/master"


def single_node(lab: Lab, *, version: str | None = None) -> Any:
    for worker in lab.workers:
        lab.sim.remove_node(worker.name)
    cp = lab.control_plane
    if version is not None:
        return lab.sim.reregister(cp.name, version=KubeVersion.parse(version))
    return None


def ensure_service(lab: Lab, core: Any) -> str:
    """The Service and one pod behind it on the only node (bound there, as a single-node
    cluster's workloads are)."""
    svc = create_service(core, lb_service("web"))
    create_pod(core, "web-0", namespace="default", app="web", node=lab.control_plane.name)
    wait_running(lab, core, "web-0", "default")
    wait_hostname(core, "web")
    return elb_name(svc)


def assert_no_traffic(lab: Lab, name: str) -> None:
    """What the user sees: the ELB has nowhere to send a request."""
    report = lab.traffic.send("web", requests=50)
    assert report.answered_total == 0, report.to_json()
    assert report.dropped == {("elb", f"{name} has no registered instance"): 50}, report.dropped


def assert_excluded(lab: Lab, core: Any, elb: Any, name: str) -> None:
    assert registered_instances(elb, name) == set(), "zero instances"
    events = events_for(core, "Service", "web")
    assert "UnAvailableLoadBalancer" in reasons(events)
    warning = next(e for e in events if e.reason == "UnAvailableLoadBalancer")
    assert warning.type == "Warning"
    assert lab.control_plane.instance_id not in registered_instances(elb, name)


def wait_registered(lab: Lab, elb: Any, name: str) -> None:
    wait_for(
        lambda: registered_instances(elb, name) == {lab.control_plane.instance_id},
        timeout=20,
        what="the control plane registered with the ELB",
    )


def test_reproduce_exclusion_label_then_include(lab: Lab, core_v1: Any, elb: Any) -> None:
    """1.33: kubeadm's exclusion label keeps the only node out; removing it fixes it."""
    single_node(lab)
    node = core_v1.read_node(lab.control_plane.name)
    assert EXCLUDE in node.metadata.labels
    lab.start_controller()
    name = ensure_service(lab, core_v1)
    assert_excluded(lab, core_v1, elb, name)
    assert_no_traffic(lab, name)
    # The fix: invoke lab.nodes.include
    node_patches.include(core_v1, lab.control_plane.name)
    wait_registered(lab, elb, name)
    assert_pod_answers(lab)
    wait_for(
        lambda: "UpdatedLoadBalancer" in reasons(events_for(core_v1, "Service", "web")),
        timeout=10,
        what="the UpdatedLoadBalancer event",
    )


@conformance(failure="legacy-node-role", expect="reproduce")
def test_reproduce_legacy_master_label(lab: Lab, core_v1: Any, elb: Any) -> None:
    """1.20 control plane (master label, no exclusion label) with the legacy gate on."""
    node = single_node(lab, version="1.20")
    assert MASTER in node["metadata"]["labels"]
    assert EXCLUDE not in node["metadata"]["labels"]
    lab.start_controller(legacy=["legacy-node-role"])
    name = ensure_service(lab, core_v1)
    assert_excluded(lab, core_v1, elb, name)
    assert_no_traffic(lab, name)


@conformance(failure="legacy-node-role", expect="fixed")
def test_fixed_gate_off_registers_the_master(lab: Lab, core_v1: Any, elb: Any) -> None:
    """The same 1.20 node with the gate off (the 1.21+ behaviour): registered."""
    single_node(lab, version="1.20")
    lab.start_controller()
    name = ensure_service(lab, core_v1)
    wait_registered(lab, elb, name)
    assert "UnAvailableLoadBalancer" not in reasons(events_for(core_v1, "Service", "web"))
    assert_pod_answers(lab)
    with pytest.raises(AssertionError):
        assert_no_traffic(lab, name)

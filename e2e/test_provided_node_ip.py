"""provided-node-ip: the node IP given to the kubelet is not a cloud address.

Source: seed 000. kind starts each kubelet with its container's address as ``--node-ip``;
with ``--cloud-provider=external`` the kubelet records it in the annotation
``alpha.kubernetes.io/provided-node-ip`` and registers the node tainted
``node.cloudprovider.kubernetes.io/uninitialized:NoSchedule``. The cloud node controller then
requires that IP to be among the addresses the cloud reports for the instance (upstream
``GetNodeAddressesFromNodeIP``, k8s ≥ 1.24). It is not, so initialization fails with
"failed to get node address from cloud provider that matches ip: <ip>", the taint stays and
the sync is retried with backoff for ever. The write-up fixed it by editing the annotation
(``invoke lab.nodes.fix-ip``); the lab instead provisions each fake instance with the node's
real IP, so a default lab never hits it.

As in the write-up's kind config, the kubelet here is started with ``--provider-id``, so the
node has a providerID from the start; what the failure withholds is everything else the cloud
node controller sets (zone, region and instance-type labels, addresses, the taint removal).

Stand-ins on sim: the kubelet stand-in registers the node (annotation, taint, addresses seeded
from the node IP, as a 1.33 kubelet does).
"""

from __future__ import annotations

from typing import Any

import pytest

from e2e.support import UNINITIALIZED, events_for, node_taint_keys, wait_for
from e2e.workloads import assert_pod_answers, assert_traffic_fails_for_want_of_a_node, serve
from lab import nodes as node_patches
from lab.compose import Lab, LabNode

standin = pytest.mark.standin(
    "re-registers a node with kind's container IP, as a kubelet with another --node-ip"
)


KIND_CONTAINER_IP = "172.18.0.3"
MISMATCH = f"failed to get node address from cloud provider that matches ip: {KIND_CONTAINER_IP}"


def assert_stuck(node: Any, events: list[Any], log: str) -> None:
    """The documented symptoms: tainted, unlabelled, the error reported and retried."""
    labels = node.metadata.labels or {}
    assert UNINITIALIZED in node_taint_keys(node)
    for key in (
        "topology.kubernetes.io/zone",
        "topology.kubernetes.io/region",
        "node.kubernetes.io/instance-type",
    ):
        assert key not in labels, key
    failures = [e for e in events if e.type == "Warning" and MISMATCH in e.message]
    assert failures, f"a Warning event naming the IP; got {events}"
    assert sum(e.count for e in failures) >= 2 or log.count(MISMATCH) >= 2, "retried"
    assert MISMATCH in log


def assert_initialized(node: Any, expected: LabNode, events: list[Any]) -> None:
    labels = node.metadata.labels or {}
    assert UNINITIALIZED not in node_taint_keys(node)
    assert node.spec.provider_id == expected.provider_id
    assert labels["topology.kubernetes.io/zone"] == expected.zone
    assert labels["failure-domain.beta.kubernetes.io/zone"] == expected.zone
    assert labels["topology.kubernetes.io/region"] == "us-east-1"
    assert labels["failure-domain.beta.kubernetes.io/region"] == "us-east-1"
    assert labels["node.kubernetes.io/instance-type"] == "m5.large"
    assert labels["beta.kubernetes.io/instance-type"] == "m5.large"
    addresses = {(a.type, a.address) for a in node.status.addresses}
    assert ("InternalIP", expected.private_ip) in addresses
    assert ("InternalDNS", expected.private_dns_name) in addresses
    assert not [e for e in events if e.type == "Warning" and MISMATCH in e.message]


def _initialized(core: Any, name: str) -> Any:
    """The node once the taint is gone and the cloud's addresses are written (upstream
    removes the taint first and patches ``status.addresses`` right after)."""
    node = core.read_node(name)
    has_cloud_dns = any(a.type == "InternalDNS" for a in node.status.addresses or [])
    return node if UNINITIALIZED not in node_taint_keys(node) and has_cloud_dns else None


def _stuck_evidence(lab: Lab, core: Any, name: str) -> tuple[Any, list[Any], str]:
    ctl = lab.controller
    assert ctl is not None
    # The first sync fails at once; upstream's backoff retries after 5 s.
    wait_for(lambda: ctl.log_text().count(MISMATCH) >= 2, timeout=20, what="a retried sync")
    return core.read_node(name), events_for(core, "Node", name), ctl.log_text()


@standin
def test_reproduce_kind_node_ip_not_an_instance_address(lab: Lab, core_v1: Any) -> None:
    worker = lab.workers[0]
    lab.sim.reregister(worker.name, ip=KIND_CONTAINER_IP)
    lab.start_controller()
    serve(lab, core_v1)
    node, events, log = _stuck_evidence(lab, core_v1, worker.name)
    assert_traffic_fails_for_want_of_a_node(lab, core_v1)
    assert node.metadata.annotations["alpha.kubernetes.io/provided-node-ip"] == KIND_CONTAINER_IP
    assert_stuck(node, events, log)
    # The control plane, whose IP matches its instance, is initialized meanwhile.
    cp = wait_for(lambda: _initialized(core_v1, lab.control_plane.name), timeout=20, what="cp")
    assert_initialized(cp, lab.control_plane, [])
    with pytest.raises(AssertionError):
        assert_initialized(node, worker, events)


@standin
def test_fixed_by_patching_the_annotation(lab: Lab, core_v1: Any) -> None:
    """The write-up's fix: edit the annotation to the instance's private IP."""
    worker = lab.workers[0]
    lab.sim.reregister(worker.name, ip=KIND_CONTAINER_IP)
    lab.start_controller()
    serve(lab, core_v1)
    _stuck_evidence(lab, core_v1, worker.name)
    assert_traffic_fails_for_want_of_a_node(lab, core_v1)
    node_patches.fix_provided_ip(core_v1, worker.name, worker.private_ip)
    node = wait_for(lambda: _initialized(core_v1, worker.name), timeout=20, what="init")
    wait_for(
        lambda: "Synced" in [e.reason for e in events_for(core_v1, "Node", worker.name)],
        timeout=10,
        what="a Synced event after the fix",
    )
    labels = node.metadata.labels
    assert labels["topology.kubernetes.io/zone"] == worker.zone
    assert_pod_answers(lab)


def test_fixed_by_provisioning_the_instance_with_the_node_ip(lab: Lab, core_v1: Any) -> None:
    """The lab's default: every fake instance carries its node's IP."""
    lab.start_controller()
    serve(lab, core_v1)
    for expected in lab.nodes:
        node = wait_for(lambda n=expected: _initialized(core_v1, n.name), timeout=20, what="init")
        events = events_for(core_v1, "Node", expected.name)
        assert_initialized(node, expected, events)
        with pytest.raises(AssertionError):
            assert_stuck(node, events, lab.controller.log_text() if lab.controller else "")
    assert_pod_answers(lab)
    with pytest.raises(AssertionError):
        assert_traffic_fails_for_want_of_a_node(lab, core_v1)

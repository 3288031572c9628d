"""node-name-private-dns: node names must equal the EC2 private DNS name.

Source: seed 003 (why nodes are renamed to ``ip-…compute.internal``); cloud-provider-aws #63,
#335, #384, #1471. The legacy AWS code maps a node to its instance by ``PrivateDnsName`` only.
A node registered under another name (``node00.k8s.internal``, a short hostname, a custom
DHCP domain, or a resource-based ``i-…`` name) cannot be found: it stays uninitialized (and,
with in-tree kubelets, was silently renamed). Fixed (current upstream): look up by
``spec.providerID`` first, parse resource-based names (``i-…``, with or without a domain)
directly, and use the name lookup only as the last fallback; the node is initialized under its
own name. Also (#1471): a NotReady node whose instance cannot be looked up must not be deleted
by the lifecycle controller: a lookup error is not proof of absence.

Stand-ins on sim: the kubelet stand-in registers nodes under the chosen names (with or without
``--provider-id``) and stops heartbeating on request (NotReady after its grace period).
"""

from __future__ import annotations

from typing import Any

import pytest

from e2e.support import UNINITIALIZED, events_for, node_taint_keys, wait_for
from e2e.workloads import assert_pod_answers, assert_traffic_fails_for_want_of_a_node, serve
from lab.compose import Lab

pytestmark = pytest.mark.standin("re-registers a node under another name")


CUSTOM = "node00.k8s.internal"
FAST_LIFECYCLE = ("--node-monitor-period", "0.3s")


def _node(core: Any, name: str) -> Any:
    return core.read_node(name)


def _initialized(core: Any, name: str) -> Any:
    node = _node(core, name)
    return node if UNINITIALIZED not in node_taint_keys(node) else None


def _failed_syncs(core: Any, name: str) -> int:
    return sum(e.count for e in events_for(core, "Node", name) if e.reason == "SyncNodeFailed")


def assert_stuck(core: Any, name: str) -> None:
    node = _node(core, name)
    assert node.metadata.name == name, "kept its name"
    assert UNINITIALIZED in node_taint_keys(node)
    assert "topology.kubernetes.io/zone" not in (node.metadata.labels or {})
    assert _failed_syncs(core, name) >= 1, "the lookup error is reported as an event"


def assert_initialized(core: Any, name: str, zone: str, provider_id: str) -> None:
    node = _node(core, name)
    assert node.metadata.name == name, "initialized under its own name"
    assert UNINITIALIZED not in node_taint_keys(node)
    assert node.spec.provider_id == provider_id
    assert node.metadata.labels["topology.kubernetes.io/zone"] == zone
    assert _failed_syncs(core, name) == 0


@pytest.mark.parametrize("naming", ["custom-name-with-provider-id", "resource-based-name"], ids=str)
def test_reproduce_private_dns_only_lookup(lab: Lab, core_v1: Any, naming: str) -> None:
    worker = lab.workers[0]
    name, provider_id = _register(lab, naming)
    lab.start_controller(legacy=["node-name-private-dns"])
    serve(lab, core_v1)
    wait_for(lambda: _failed_syncs(core_v1, name) >= 1, timeout=20, what="a failed sync")
    assert_stuck(core_v1, name)
    assert_traffic_fails_for_want_of_a_node(lab, core_v1)
    assert "ip-" not in name, "the node was not renamed to the private DNS name"
    with pytest.raises(AssertionError):
        assert_initialized(core_v1, name, worker.zone, provider_id)


@pytest.mark.parametrize("naming", ["custom-name-with-provider-id", "resource-based-name"], ids=str)
def test_fixed_provider_id_and_resource_names(lab: Lab, core_v1: Any, naming: str) -> None:
    worker = lab.workers[0]
    name, provider_id = _register(lab, naming)
    lab.start_controller()
    serve(lab, core_v1)
    wait_for(lambda: _initialized(core_v1, name), timeout=20, what=f"{name} initialized")
    assert_initialized(core_v1, name, worker.zone, provider_id)
    with pytest.raises(AssertionError):
        assert_stuck(core_v1, name)
    assert_pod_answers(lab)
    with pytest.raises(AssertionError):
        assert_traffic_fails_for_want_of_a_node(lab, core_v1)


def test_fixed_not_ready_node_that_cannot_be_looked_up_is_kept(lab: Lab, core_v1: Any) -> None:
    """#1471: no providerID, a name EC2 does not know, NotReady: an error, not a deletion."""
    worker = lab.workers[0]
    lab.sim.reregister(worker.name, name=CUSTOM, provider_id=None)
    kubelet = lab.sim.kubelet
    assert kubelet is not None
    kubelet.stop_heartbeat(CUSTOM)
    lab.start_controller(args=FAST_LIFECYCLE)
    wait_for(
        lambda: any(
            c.type == "Ready" and c.status != "True"
            for c in _node(core_v1, CUSTOM).status.conditions
        ),
        timeout=20,
        what="the node to go NotReady",
    )
    ctl = lab.controller
    assert ctl is not None
    wait_for(
        lambda: ctl.log_text().count(f"error checking if node {CUSTOM} exists") >= 3,
        timeout=20,
        what="three lifecycle checks that could not look the node up",
    )
    assert _node(core_v1, CUSTOM).metadata.deletion_timestamp is None
    assert "DeletingNode" not in [e.reason for e in events_for(core_v1, "Node", CUSTOM)]


def _register(lab: Lab, naming: str) -> tuple[str, str]:
    worker = lab.workers[0]
    if naming == "custom-name-with-provider-id":
        lab.sim.reregister(worker.name, name=CUSTOM)
        return CUSTOM, worker.provider_id
    # A resource-based name (``i-…``), no providerID: the name is the instance id.
    name = f"{worker.instance_id}.us-east-1.compute.internal"
    lab.sim.reregister(worker.name, name=name, provider_id=None)
    return name, worker.provider_id

"""Cloud node lifecycle: deletion of gone instances, shutdown taint, k8s-81636 grace period."""

from __future__ import annotations

from controller.cloud import TAINT_SHUTDOWN
from controller.fake import FakeInstance
from tests.controller.builders import (
    NodeHarness,
    created_at,
    edit,
    make_node,
    provider_id,
    ready,
)

PID = "aws:///us-east-1a/i-1"
OLD = "2026-01-01T00:00:00Z"  # ten minutes before the harness clock


def harness(*legacy: str, state: str = "running", created: str = OLD) -> NodeHarness:
    h = NodeHarness(*legacy)
    h.cloud.add_instance(FakeInstance("i-1", state=state))
    h.kube.create("nodes", make_node("n1", provider_id(PID), ready(False), created_at(created)))
    return h


def taints(h: NodeHarness) -> list[str]:
    return [t["key"] for t in h.kube.get("nodes", "n1")["spec"].get("taints") or []]


def test_not_ready_node_with_terminated_instance_is_deleted() -> None:
    h = harness(state="terminated")
    h.lifecycle.monitor_nodes()
    assert h.kube.stores["nodes"].get("n1") is None
    [event] = h.kube.events_for("n1", "DeletingNode")
    assert event["message"] == "Deleting node n1 because it does not exist in the cloud provider"
    assert event["source"] == {"component": "cloud-node-lifecycle-controller"}


def test_not_ready_node_with_vanished_instance_is_deleted() -> None:
    h = harness()
    h.cloud.remove_instance("i-1")
    h.lifecycle.monitor_nodes()
    assert h.kube.stores["nodes"].get("n1") is None


def test_ready_node_is_never_looked_up_or_deleted() -> None:
    h = harness(state="terminated")
    h.kube.update("nodes", edit(h.kube.get("nodes", "n1"), ready(True)))
    h.lifecycle.monitor_nodes()
    assert h.kube.stores["nodes"].get("n1") is not None
    assert h.cloud.calls_of("instance_exists") == []


def test_stopped_instance_gets_shutdown_taint_removed_when_ready() -> None:
    h = harness(state="stopped")
    h.lifecycle.monitor_nodes()
    assert taints(h) == [TAINT_SHUTDOWN]
    assert h.kube.get("nodes", "n1")["spec"]["taints"][0]["effect"] == "NoSchedule"
    h.lifecycle.monitor_nodes()
    assert taints(h) == [TAINT_SHUTDOWN]  # idempotent
    h.cloud.set_state("i-1", "running")
    h.kube.update("nodes", edit(h.kube.get("nodes", "n1"), ready(True)))
    h.lifecycle.monitor_nodes()
    assert taints(h) == []


def test_lookup_error_deletes_nothing() -> None:
    """cloud-provider-aws#1471: a node whose instance cannot be looked up is kept."""
    h = NodeHarness()
    h.kube.create("nodes", make_node("node00.k8s.internal", ready(False), created_at(OLD)))
    h.lifecycle.monitor_nodes()
    assert h.kube.stores["nodes"].get("node00.k8s.internal") is not None
    assert h.kube.events == []


def test_k8s_81636_fixed_lookup_miss_right_after_creation_is_not_deletion() -> None:
    h = harness(created="2026-01-01T00:09:30Z")  # 30 s old
    h.cloud.hide("i-1")  # eventually consistent DescribeInstances misses it
    h.lifecycle.monitor_nodes()
    assert h.kube.stores["nodes"].get("n1") is not None
    assert h.kube.events == []
    # Past the grace period a real absence still deletes.
    h.clock.advance(120)
    h.lifecycle.monitor_nodes()
    assert h.kube.stores["nodes"].get("n1") is None


def test_k8s_81636_legacy_lookup_miss_right_after_creation_deletes() -> None:
    h = harness("k8s-81636", created="2026-01-01T00:09:30Z")
    h.cloud.hide("i-1")
    h.lifecycle.monitor_nodes()
    assert h.kube.stores["nodes"].get("n1") is None
    assert h.kube.reasons("n1") == ["DeletingNode"]


def test_failed_delete_warns() -> None:
    from controller.runtime.kube import KubeError

    h = harness(state="terminated")
    h.kube.fail("delete_node", KubeError("forbidden", code=403, reason="Forbidden"))
    h.lifecycle.monitor_nodes()
    assert h.kube.reasons("n1") == ["DeletingNode", "DeletingNodeFailed"]

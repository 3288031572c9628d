"""Service controller against the fake cloud and fake Kubernetes, on fake time."""

from __future__ import annotations

from typing import Any

import pytest

from controller.cloud import (
    LABEL_LEGACY_MASTER,
    LB_FINALIZER,
    TAINT_TO_BE_DELETED,
    ImplementedElsewhere,
    RetryAfter,
    ServiceKey,
)
from controller.fake import IDLE_TIMEOUT_ANNOTATION
from tests.controller.builders import (
    ServiceHarness,
    Tweak,
    annotated,
    edit,
    excluded,
    labelled,
    lb_class,
    make_node,
    make_service,
    of_type,
    ready,
    tainted,
)


@pytest.fixture
def h() -> ServiceHarness:
    harness = ServiceHarness()
    harness.kube.create("nodes", make_node("n1"))
    harness.kube.create("nodes", make_node("n2"))
    harness.ctrl.drain()
    return harness


def test_ensure_adds_finalizer_creates_lb_and_patches_hostname(h: ServiceHarness) -> None:
    h.kube.create("services", make_service("web"))
    results = h.ctrl.drain()
    assert [r.outcome for r in results] == ["success"]
    svc = h.kube.get("services", "default/web")
    assert svc["metadata"]["finalizers"] == [LB_FINALIZER]
    hostname = svc["status"]["loadBalancer"]["ingress"][0]["hostname"]
    assert hostname.endswith(".elb.amazonaws.com")
    assert h.lb_nodes() == ("n1", "n2")
    assert h.kube.reasons("web") == ["EnsuringLoadBalancer", "EnsuredLoadBalancer"]
    event = h.kube.events_for("web")[0]
    assert event["source"] == {"component": "service-controller"}
    assert event["involvedObject"]["kind"] == "Service"
    assert event["involvedObject"]["namespace"] == "default"
    # The finalizer must be on the object before the cloud is asked for anything.
    verbs = [v for v, _ in h.kube.requests]
    assert verbs.index("add_service_finalizer") < verbs.index("patch_service_status")
    assert h.cloud.calls_of("ensure_load_balancer") == ["default/web"]


def test_our_own_patches_and_resyncs_do_not_requeue(h: ServiceHarness) -> None:
    h.kube.create("services", make_service("web"))
    h.ctrl.drain()
    h.kube.update("services", h.kube.get("services", "default/web"))  # a no-op resync
    assert h.ctrl.drain() == []
    assert h.cloud.calls_of("ensure_load_balancer") == ["default/web"]


def test_annotation_change_goes_through_ensure_not_update(h: ServiceHarness) -> None:
    h.kube.create("services", make_service("web"))
    h.ctrl.drain()
    svc = h.kube.get("services", "default/web")
    h.kube.update("services", edit(svc, annotated("example.com/x", "1")))
    h.ctrl.drain()
    assert h.cloud.calls_of("ensure_load_balancer") == ["default/web", "default/web"]
    assert h.cloud.calls_of("update_load_balancer") == []


def test_services_not_wanting_a_load_balancer_are_ignored(h: ServiceHarness) -> None:
    h.kube.create("services", make_service("cip", of_type("ClusterIP")))
    h.kube.create("services", make_service("nlb", lb_class("service.k8s.aws/nlb")))
    assert h.ctrl.drain() == []
    assert h.cloud.calls == []


def test_delete_path_deletes_lb_then_removes_finalizer(h: ServiceHarness) -> None:
    h.kube.create("services", make_service("web"))
    h.ctrl.drain()
    h.kube.delete("services", "default/web")
    assert h.kube.get("services", "default/web")["metadata"]["deletionTimestamp"]
    h.ctrl.drain()
    with pytest.raises(Exception, match="not found"):
        h.kube.get("services", "default/web")
    assert "default/web" not in h.cloud.load_balancers
    assert h.kube.reasons("web")[-2:] == ["DeletingLoadBalancer", "DeletedLoadBalancer"]


def test_failed_delete_keeps_finalizer_and_retries_with_backoff(h: ServiceHarness) -> None:
    h.kube.create("services", make_service("web"))
    h.ctrl.drain()
    h.cloud.fail("ensure_load_balancer_deleted", RuntimeError("DependencyViolation"))
    h.kube.delete("services", "default/web")
    [result] = h.ctrl.drain()
    assert result.outcome == "error"
    assert result.requeue_after == 5.0
    assert h.kube.get("services", "default/web")["metadata"]["finalizers"] == [LB_FINALIZER]
    [failed] = h.kube.events_for("web", "SyncLoadBalancerFailed")
    assert failed["type"] == "Warning"
    assert failed["message"] == (
        "Error syncing load balancer: failed to delete load balancer: DependencyViolation"
    )
    h.clock.advance(5)
    # the retry, then the deletion event of the Service its last finalizer took with it
    assert [r.outcome for r in h.ctrl.drain()] == ["success", "success"]
    assert "default/web" not in h.cloud.load_balancers
    assert h.cloud.calls_of("ensure_load_balancer_deleted") == ["default/web"] * 2


def test_type_change_away_from_lb_cleans_up(h: ServiceHarness) -> None:
    h.kube.create("services", make_service("web"))
    h.ctrl.drain()
    svc = h.kube.get("services", "default/web")
    h.kube.update("services", edit(svc, of_type("ClusterIP")))
    h.ctrl.drain()
    svc = h.kube.get("services", "default/web")
    assert svc["metadata"]["finalizers"] == []
    assert svc["status"]["loadBalancer"] == {}
    assert h.cloud.calls_of("ensure_load_balancer_deleted") == ["default/web"]


def test_invalid_config_warns_with_annotation_and_value_and_backs_off(h: ServiceHarness) -> None:
    h.kube.create("services", make_service("web", annotated(IDLE_TIMEOUT_ANNOTATION, "ten")))
    [result] = h.ctrl.drain()
    assert result.outcome == "error"
    [event] = h.kube.events_for("web", "SyncLoadBalancerFailed")
    assert IDLE_TIMEOUT_ANNOTATION in event["message"]
    assert "'ten'" in event["message"]
    assert event["message"].startswith("Error syncing load balancer: failed to ensure")
    assert "default/web" not in h.cloud.load_balancers
    # Backoff doubles: 5, 10, 20 ... and the repeated event is aggregated by count.
    delays = [result.requeue_after]
    for _ in range(3):
        h.clock.advance(delays[-1] or 0)
        [again] = h.ctrl.drain()
        delays.append(again.requeue_after)
    assert delays == [5.0, 10.0, 20.0, 40.0]
    [event] = h.kube.events_for("web", "SyncLoadBalancerFailed")
    assert event["count"] == 4
    assert h.clock.monotonic() > 0
    assert h.ctrl.drain() == []  # nothing runs before the backoff expires


def test_retry_after_uses_the_cloud_delay(h: ServiceHarness) -> None:
    h.cloud.fail("ensure_load_balancer", RetryAfter(42.0, "throttled"))
    h.kube.create("services", make_service("web"))
    [result] = h.ctrl.drain()
    assert result.outcome == "retry-after"
    assert h.ctrl.queue.waiting() == {"default/web": 42.0}
    h.clock.advance(41)
    assert h.ctrl.drain() == []
    h.clock.advance(1)
    assert [r.outcome for r in h.ctrl.drain()] == ["success"]


def test_implemented_elsewhere_is_silent(h: ServiceHarness) -> None:
    h.cloud.fail("ensure_load_balancer", ImplementedElsewhere("nlb"))
    h.kube.create("services", make_service("web"))
    [result] = h.ctrl.drain()
    assert result.outcome == "success"
    assert h.kube.reasons("web") == ["EnsuringLoadBalancer"]
    assert h.kube.get("services", "default/web")["status"]["loadBalancer"] == {}


def test_zero_nodes_warns_unavailable() -> None:
    h = ServiceHarness()
    h.kube.create("nodes", make_node("cp", excluded()))
    h.kube.create("services", make_service("web"))
    h.ctrl.drain()
    assert "UnAvailableLoadBalancer" in h.kube.reasons("web")
    assert h.lb_nodes() == ()


def test_node_set_change_calls_update_with_event(h: ServiceHarness) -> None:
    h.kube.create("services", make_service("web"))
    h.ctrl.drain()
    h.kube.create("nodes", make_node("n3"))
    h.ctrl.drain()
    assert h.cloud.calls_of("update_load_balancer") == ["default/web"]
    assert h.lb_nodes() == ("n1", "n2", "n3")
    assert h.kube.reasons("web")[-1] == "UpdatedLoadBalancer"
    h.kube.delete("nodes", "n3")
    h.ctrl.drain()
    assert h.lb_nodes() == ("n1", "n2")


def test_update_failure_warns_and_retries_through_ensure(h: ServiceHarness) -> None:
    h.kube.create("services", make_service("web"))
    h.ctrl.drain()
    h.cloud.fail("update_load_balancer", RuntimeError("Throttling"))
    h.kube.create("nodes", make_node("n3"))
    h.ctrl.drain()
    [event] = h.kube.events_for("web", "UpdateLoadBalancerFailed")
    assert "Throttling" in event["message"]
    assert "n3" in event["message"]
    h.clock.advance(5)
    h.ctrl.drain()
    assert h.cloud.calls_of("ensure_load_balancer") == ["default/web", "default/web"]
    assert h.lb_nodes() == ("n1", "n2", "n3")


@pytest.mark.parametrize(
    ("tweak", "included"),
    [
        (excluded(""), False),
        (excluded("true"), False),
        (excluded("false"), True),
        (tainted(TAINT_TO_BE_DELETED), False),
        (labelled(LABEL_LEGACY_MASTER), True),
        (ready(False), True),
        (ready(None), True),
    ],
)
def test_fixed_predicates(tweak: Tweak, included: bool) -> None:
    h = ServiceHarness()
    h.kube.create("nodes", make_node("n1"))
    h.kube.create("nodes", make_node("x", tweak))
    h.kube.create("services", make_service("web"))
    h.ctrl.drain()
    assert ("x" in h.lb_nodes()) is included


def test_legacy_node_role_excludes_the_only_node() -> None:
    """Catalog legacy-node-role: a master-labelled single node never joins the ELB."""
    for legacy, expected in (((), ("cp",)), (("legacy-node-role",), ())):
        h = ServiceHarness(*legacy)
        h.kube.create("nodes", make_node("cp", labelled(LABEL_LEGACY_MASTER)))
        h.kube.create("services", make_service("web"))
        h.ctrl.drain()
        assert h.lb_nodes() == expected
        assert ("UnAvailableLoadBalancer" in h.kube.reasons("web")) is (expected == ())


@pytest.mark.parametrize("legacy", [False, True])
def test_transient_node_predicates(legacy: bool) -> None:
    """Catalog transient-node-predicates: NotReady drops a node only in the legacy mode."""
    h = ServiceHarness(*(["transient-node-predicates"] if legacy else []))
    h.kube.create("nodes", make_node("n1"))
    h.kube.create("nodes", make_node("n2"))
    h.kube.create("services", make_service("web"))
    h.ctrl.drain()
    h.kube.update("nodes", edit(h.kube.get("nodes", "n2"), ready(False)))
    h.ctrl.drain()
    if legacy:
        assert h.lb_nodes() == ("n1",)
        assert h.cloud.calls_of("update_load_balancer") == ["default/web"]
    else:
        assert h.lb_nodes() == ("n1", "n2")
        assert h.cloud.calls_of("update_load_balancer") == []
    # The autoscaler taint: the legacy controller removes the node at once; the fixed one
    # (upstream's shouldSyncUpdatedNode) starts no sync for it and drops the node at the next
    # sync something else starts.
    h.kube.update("nodes", edit(h.kube.get("nodes", "n1"), tainted(TAINT_TO_BE_DELETED)))
    h.ctrl.drain()
    assert ("n1" in h.lb_nodes()) is not legacy
    h.kube.create("nodes", make_node("n3"))
    h.ctrl.drain()
    assert "n1" not in h.lb_nodes()
    assert "n3" in h.lb_nodes()


@pytest.mark.parametrize(
    ("tweak", "syncs"),
    [
        (excluded("true"), True),
        (excluded("false"), False),
        (tainted(TAINT_TO_BE_DELETED), False),
        (ready(False), False),
        (labelled(LABEL_LEGACY_MASTER), False),
    ],
)
def test_which_node_updates_start_a_sync(tweak: Tweak, syncs: bool) -> None:
    """Upstream's shouldSyncUpdatedNode (KEP-3458): the exclusion label and the providerID."""
    h = ServiceHarness()
    h.kube.create("nodes", make_node("n1"))
    h.kube.create("nodes", make_node("n2"))
    h.kube.create("services", make_service("web"))
    h.ctrl.drain()
    started: list[str] = []
    add = h.ctrl.node_queue.add
    h.ctrl.node_queue.add = lambda key: (started.append(key), add(key))[1]  # type: ignore[method-assign]
    before = len(h.cloud.calls_of("update_load_balancer"))
    h.kube.update("nodes", edit(h.kube.get("nodes", "n2"), tweak))
    h.ctrl.drain()
    assert bool(started) is syncs
    assert (len(h.cloud.calls_of("update_load_balancer")) > before) is syncs


def test_gone_service_is_forgotten(h: ServiceHarness) -> None:
    h.kube.create("services", make_service("web"))
    h.ctrl.drain()
    h.ctrl.queue.add("default/absent")
    assert [r.outcome for r in h.ctrl.drain()] == ["success"]


def test_a_node_that_changes_while_the_load_balancer_is_created_is_registered(
    h: ServiceHarness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The node-sync worker runs beside the service worker: a node event during the first
    ensure finds no load balancer to update yet (not an error, upstream says), so the ensure
    must notice the node set moved on and sync the hosts again."""
    from controller.runtime.workqueue import process_next

    ensure = h.cloud.ensure_load_balancer

    def ensure_while_a_node_joins(cluster: str, service: Any, nodes: Any) -> Any:
        h.kube.create("nodes", make_node("n3"))
        # the node-sync worker takes that event now and finds no load balancer yet
        assert process_next(h.ctrl.node_queue, h.ctrl.sync_nodes, block=False) is not None
        return ensure(cluster, service, nodes)

    monkeypatch.setattr(h.cloud, "ensure_load_balancer", ensure_while_a_node_joins)
    h.kube.create("services", make_service("web"))
    h.ctrl.drain()
    assert h.lb_nodes() == ("n1", "n2", "n3")


def _strip_finalizer_and_delete(h: ServiceHarness, name: str) -> None:
    h.kube.remove_service_finalizer("default", name, LB_FINALIZER)
    h.kube.delete("services", f"default/{name}")


def test_a_service_deleted_without_its_finalizer_still_loses_its_load_balancer(
    h: ServiceHarness,
) -> None:
    """Upstream processServiceDeletion: the deletion event is queued and the cached Service's
    load balancer deleted (before: forgotten, the ELB leaked)."""
    h.kube.create("services", make_service("web"))
    h.ctrl.drain()
    _strip_finalizer_and_delete(h, "web")
    assert [r.outcome for r in h.ctrl.drain()] == ["success"]
    assert h.cloud.calls_of("ensure_load_balancer_deleted") == ["default/web"]
    assert "default/web" not in h.cloud.load_balancers
    assert h.kube.reasons("web")[-2:] == ["DeletingLoadBalancer", "DeletedLoadBalancer"]


def test_a_failed_delete_then_a_vanished_service_still_deletes_the_load_balancer(
    h: ServiceHarness,
) -> None:
    h.kube.create("services", make_service("web"))
    h.ctrl.drain()
    h.cloud.fail("ensure_load_balancer_deleted", RuntimeError("DependencyViolation"))
    h.kube.delete("services", "default/web")
    assert [r.outcome for r in h.ctrl.drain()] == ["error"]
    # someone strips the finalizer: the Service is gone, the load balancer is not
    h.kube.remove_service_finalizer("default", "web", LB_FINALIZER)
    h.clock.advance(5)
    h.ctrl.drain()
    assert "default/web" not in h.cloud.load_balancers
    assert h.cloud.calls_of("ensure_load_balancer_deleted") == ["default/web"] * 2


def test_a_service_recreated_without_finalizer_loses_the_old_load_balancer_first(
    h: ServiceHarness,
) -> None:
    h.kube.create("services", make_service("web"))
    h.ctrl.drain()
    _strip_finalizer_and_delete(h, "web")
    obj = make_service("web")
    obj["metadata"]["uid"] = "uid-web-2"
    h.kube.create("services", obj)
    h.ctrl.drain()
    assert [m for m, _ in h.cloud.calls if m.startswith("ensure")] == [
        "ensure_load_balancer",
        "ensure_load_balancer_deleted",
        "ensure_load_balancer",
    ]
    assert h.cloud.load_balancers[ServiceKey("default/web")].service.uid == "uid-web-2"


def test_a_failed_node_sync_update_is_retried_by_ensure_not_the_next_node_sync(
    h: ServiceHarness,
) -> None:
    """Upstream nodeSyncService records the node set before the update: another node sync
    with the same nodes does not repeat a failed update; the service queue's ensure does."""
    h.kube.create("services", make_service("web"))
    h.ctrl.drain()
    h.cloud.fail("update_load_balancer", RuntimeError("Throttling"))
    h.kube.create("nodes", make_node("n3"))
    h.ctrl.sync_nodes("node-sync")
    h.ctrl.sync_nodes("node-sync")
    assert h.cloud.calls_of("update_load_balancer") == ["default/web"]
    h.clock.advance(5)
    h.ctrl.drain()
    assert h.lb_nodes() == ("n1", "n2", "n3")

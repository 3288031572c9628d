"""The service controller: Services of ``type: LoadBalancer`` become cloud load balancers.

Follows upstream ``k8s.io/cloud-provider/controllers/service`` (reference: upstream-ccm.md §7):

* which Services: ``type: LoadBalancer`` without ``loadBalancerClass``; add events enqueue
  those and the ones that need cleanup, update events only when :func:`needs_update` or
  :func:`needs_cleanup` says so (a resync or our own finalizer patch changes nothing);
* the ensure path: ``EnsuringLoadBalancer``, add the finalizer
  ``service.kubernetes.io/load-balancer-cleanup`` (status-subresource patch), the node set
  through the predicates (``UnAvailableLoadBalancer`` when empty), ``ensure_load_balancer``,
  ``EnsuredLoadBalancer``, then the status patch when the ingress changed;
* the delete path (no longer wants a load balancer, or deleting with the finalizer):
  ``DeletingLoadBalancer`` + ``ensure_load_balancer_deleted`` if one exists, remove the
  finalizer, ``DeletedLoadBalancer``, clear the status;
* a Service gone from the store (deleted without our finalizer, so no delete path ran) whose
  load balancer we ensured has it deleted from the cached state (upstream
  ``processServiceDeletion``; ``DeleteLoadBalancerFailed`` and a retry on error); a Service
  seen again under a new UID loses the old one's load balancer first;
* node changes go through a second queue with a single key: every cached Service whose
  predicate-filtered node set differs from the last synced one gets
  ``update_load_balancer`` (``UpdatedLoadBalancer``), the node set recorded as synced first
  (upstream ``nodeSyncService``); on failure ``UpdateLoadBalancerFailed`` and a retry through
  the service queue (i.e. a full ensure), not by the next node sync.

Errors are raised; :func:`controller.runtime.workqueue.process_next` requeues with backoff
(or the ``RetryAfter`` delay) and calls :meth:`ServiceController.on_sync_error`, which records
the Warning ``SyncLoadBalancerFailed`` ("Error syncing load balancer: …"). An
``InvalidServiceConfig`` from the cloud therefore names the annotation and value in that event
and is retried with growing backoff; the cloud guarantees it changed nothing.

Legacy branches (``controller.legacy``) live in :func:`node_included`.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from typing import Any

from controller.cloud import (
    LABEL_EXCLUDE_LB,
    LABEL_LEGACY_MASTER,
    LB_FINALIZER,
    TAINT_TO_BE_DELETED,
    Cloud,
    ImplementedElsewhere,
    LoadBalancer,
    LoadBalancerStatus,
    Node,
    RetryAfter,
    Service,
)
from controller.legacy import LegacyFlags
from controller.runtime.clock import Clock, RealClock
from controller.runtime.events import NORMAL, WARNING, EventRecorder, ObjectRef
from controller.runtime.informer import EventSource, Handlers, Store
from controller.runtime.kube import KubeClient, NotFound, Obj
from controller.runtime.workqueue import (
    ControllerMetrics,
    RateLimitingQueue,
    SyncResult,
    process_next,
    run_worker,
)
from controller.waves import QueueWaves, node_sync_wave

log = logging.getLogger(__name__)

COMPONENT = "service-controller"
NODE_SYNC_KEY = "node-sync"


# -- which Services ------------------------------------------------------------------------
def wants_load_balancer(svc: Service) -> bool:
    return svc.type == "LoadBalancer" and svc.load_balancer_class is None


def needs_cleanup(svc: Service) -> bool:
    return LB_FINALIZER in svc.finalizers and (svc.deleting or svc.type != "LoadBalancer")


_UPDATE_FIELDS = (
    "loadBalancerSourceRanges",
    "sessionAffinity",
    "sessionAffinityConfig",
    "loadBalancerIP",
    "externalIPs",
    "externalTrafficPolicy",
    "healthCheckNodePort",
)
_PORT_FIELDS = ("name", "protocol", "port", "nodePort", "targetPort", "appProtocol")


def needs_update(old: Obj, new: Obj) -> bool:
    """Upstream ``needsUpdate``: did anything the load balancer depends on change?"""
    old_svc, new_svc = Service.from_api(old), Service.from_api(new)
    if wants_load_balancer(old_svc) != wants_load_balancer(new_svc):
        return True
    if not wants_load_balancer(old_svc) and not wants_load_balancer(new_svc):
        return False
    old_spec, new_spec = old.get("spec") or {}, new.get("spec") or {}
    if any(old_spec.get(f) != new_spec.get(f) for f in _UPDATE_FIELDS):
        return True
    if _ports(old_spec) != _ports(new_spec):
        return True
    if old_svc.annotations != new_svc.annotations or old_svc.uid != new_svc.uid:
        return True
    return len(old_spec.get("ipFamilies") or ()) != len(new_spec.get("ipFamilies") or ())


def _ports(spec: Mapping[str, Any]) -> list[tuple[Any, ...]]:
    return [tuple(p.get(f) for f in _PORT_FIELDS) for p in spec.get("ports") or ()]


# -- which nodes ----------------------------------------------------------------------------
#: Go's ``strconv.ParseBool`` spellings of false (true ones and anything unparseable exclude)
_GO_FALSE = frozenset({"0", "f", "F", "FALSE", "false", "False"})


def node_label_included(node: Node, legacy: LegacyFlags) -> bool:
    """Upstream's ``nodeIncludedPredicate``: not labelled for exclusion from load balancers.
    The label's value is parsed as Go's ``strconv.ParseBool``: a false value includes the node,
    a true one or anything unparseable (the empty string too) excludes it."""
    exclude = node.labels.get(LABEL_EXCLUDE_LB)
    if exclude is not None and exclude not in _GO_FALSE:
        return False
    # LegacyNodeRoleBehavior (on before 1.21, PR #97543): the master role label excludes.
    # Fixed: the master label means nothing to the service controller (kubeadm adds the
    # exclusion label instead).
    return not (legacy.enabled("legacy-node-role") and LABEL_LEGACY_MASTER in node.labels)


def node_included(node: Node, legacy: LegacyFlags) -> bool:
    """The node predicates: may this node serve load balancers (at the next sync)?"""
    if node.deleting or not node_label_included(node, legacy):
        return False
    if node.has_taint(TAINT_TO_BE_DELETED):
        return False
    if legacy.enabled("transient-node-predicates"):
        # kubernetes#110195, pre-KEP-3458: readiness is a predicate, so a NotReady node is
        # deregistered at once and its connections are cut.
        return node.ready is True
    # Fixed (KEP-3458 StableLoadBalancerNodeSet): readiness is not a predicate; the load
    # balancer's own health checks take NotReady nodes out of rotation.
    return True


def should_sync_updated_node(old: Node, new: Node, legacy: LegacyFlags) -> bool:
    """Upstream's ``shouldSyncUpdatedNode``: whether a node update starts a node sync.

    Fixed (KEP-3458): only the exclusion label and the providerID; a
    ToBeDeletedByClusterAutoscaler taint, a deletionTimestamp or readiness changes start no
    sync (they take effect at the next sync something else starts, or the Node's deletion).
    Legacy transient-node-predicates: any change of the whole predicate starts one, so the
    taint or a NotReady blip deregisters the node at once."""
    if node_label_included(old, legacy) != node_label_included(new, legacy):
        return True
    if old.provider_id != new.provider_id:
        return True
    if legacy.enabled("transient-node-predicates"):
        return node_included(old, legacy) != node_included(new, legacy)
    return False


def service_ref(svc: Service) -> ObjectRef:
    """The event reference of a Service."""
    return ObjectRef("Service", svc.name, svc.namespace, svc.uid)


def _node_set(nodes: list[Node]) -> frozenset[tuple[str, str]]:
    return frozenset((n.name, n.provider_id) for n in nodes)


class SyncError(Exception):
    """A sync step failed; the message says which step, the cause is chained."""

    def __init__(self, message: str, cause: Exception) -> None:
        super().__init__(message)
        self.cause = cause


def _wrap(step: str, exc: Exception) -> Exception:
    """Prefix the failing step, keeping the retry vocabulary (``RetryAfter`` stays one)."""
    if isinstance(exc, RetryAfter):
        return RetryAfter(exc.delay, f"{step}: {exc}")
    return SyncError(f"{step}: {exc}", exc)


class ServiceController:
    """Reconciles Services of ``type: LoadBalancer`` with the cloud's load balancers."""

    def __init__(
        self,
        kube: KubeClient,
        cloud: Cloud,
        *,
        services: Store,
        nodes: Store,
        cluster_name: str = "kubernetes",
        legacy: LegacyFlags | None = None,
        recorder: EventRecorder | None = None,
        clock: Clock | None = None,
        metrics: ControllerMetrics | None = None,
    ) -> None:
        balancer = cloud.load_balancer()
        if balancer is None:
            raise ValueError(f"cloud {cloud.provider_name!r} does not support load balancers")
        self.kube = kube
        self.balancer: LoadBalancer = balancer
        self.services = services
        self.nodes = nodes
        self.cluster_name = cluster_name
        self.legacy = legacy or LegacyFlags()
        self.clock: Clock = clock or RealClock()
        self.recorder = recorder or EventRecorder(kube, COMPONENT, clock=self.clock)
        self._sync_metrics = metrics
        self.queue: RateLimitingQueue[str] = RateLimitingQueue(
            "service", clock=self.clock, metrics=metrics
        )
        self.node_queue: RateLimitingQueue[str] = RateLimitingQueue(
            "service-node-sync", clock=self.clock, metrics=metrics
        )
        self._queue_waves = QueueWaves(balancer, lambda: len(self.queue))
        self._cache: dict[str, Service] = {}
        self._last_synced_nodes: dict[str, frozenset[tuple[str, str]]] = {}
        # Services whose load balancer is being deleted: out of the node sync, still deleted
        # if the Service disappears without our finalizer.
        self._deleting: dict[str, Service] = {}
        self._lock = threading.Lock()

    # -- wiring -----------------------------------------------------------------------------
    def register(self, services: EventSource, nodes: EventSource) -> None:
        services.add_handlers(
            Handlers(
                on_add=self._service_added,
                on_update=self._service_updated,
                on_delete=self._service_deleted,
            )
        )
        nodes.add_handlers(
            Handlers(
                on_add=lambda _: self.node_queue.add(NODE_SYNC_KEY),
                on_update=self._node_updated,
                on_delete=lambda _: self.node_queue.add(NODE_SYNC_KEY),
            )
        )

    def _service_added(self, obj: Obj) -> None:
        svc = Service.from_api(obj)
        if wants_load_balancer(svc) or needs_cleanup(svc):
            self.queue.add(svc.key)

    def _service_updated(self, old: Obj, new: Obj) -> None:
        svc = Service.from_api(new)
        if needs_update(old, new) or needs_cleanup(svc):
            self.queue.add(svc.key)

    def _service_deleted(self, obj: Obj) -> None:
        # upstream enqueues every deletion; the sync finds the key gone from the store and
        # deletes the load balancer of a Service it cached (processServiceDeletion)
        self.queue.add(Service.from_api(obj).key)

    def _node_updated(self, old: Obj, new: Obj) -> None:
        if should_sync_updated_node(Node.from_api(old), Node.from_api(new), self.legacy):
            self.node_queue.add(NODE_SYNC_KEY)

    def run(self, stop: threading.Event, *, workers: int = 1) -> list[threading.Thread]:
        threads = [
            threading.Thread(
                target=run_worker,
                args=(self.queue, self.sync_service, stop),
                kwargs={"on_error": self.on_sync_error, "metrics": self._sync_metrics},
                name=f"service-worker-{i}",
                daemon=True,
            )
            for i in range(workers)
        ]
        threads.append(
            threading.Thread(
                target=run_worker,
                args=(self.node_queue, self.sync_nodes, stop),
                kwargs={"metrics": self._sync_metrics},
                name="service-node-sync",
                daemon=True,
            )
        )
        for t in threads:
            t.start()
        return threads

    def shut_down(self) -> None:
        self.queue.shut_down()
        self.node_queue.shut_down()

    def drain(self, limit: int = 1000) -> list[SyncResult]:
        """Process every ready item of both queues now (tests and single-threaded use)."""
        results: list[SyncResult] = []
        while len(results) < limit:
            r = process_next(
                self.node_queue, self.sync_nodes, metrics=self._sync_metrics, block=False
            ) or process_next(
                self.queue,
                self.sync_service,
                on_error=self.on_sync_error,
                metrics=self._sync_metrics,
                block=False,
            )
            if r is None:
                return results
            results.append(r)
        return results

    # -- the service path -------------------------------------------------------------------
    def on_sync_error(self, key: str, exc: Exception) -> None:
        obj = self.services.get(key)
        if obj is None:
            return
        self.recorder.event(
            service_ref(Service.from_api(obj)),
            WARNING,
            "SyncLoadBalancerFailed",
            f"Error syncing load balancer: {exc}",
        )

    def sync_service(self, key: str) -> None:
        with self._queue_waves.sync():  # syncs taken back to back share reads (controller.waves)
            self._sync_service(key)

    def _sync_service(self, key: str) -> None:
        obj = self.services.get(key)
        if obj is None:
            self._process_deletion(key)
            return
        svc = Service.from_api(obj)
        with self._lock:
            cached = self._cache.get(key) or self._deleting.get(key)
        if cached is not None and cached.uid != svc.uid:
            # Deleted and created again while we did not look (possible only without the
            # finalizer): the old Service's load balancer goes first (upstream
            # processServiceCreateOrUpdate).
            self._delete_cached(key, cached)
        previous = dict((obj.get("status") or {}).get("loadBalancer") or {})
        if not wants_load_balancer(svc) or needs_cleanup(svc):
            new_status = self._delete(svc)
        else:
            status = self._ensure(svc)
            if status is None:
                return  # another controller owns it
            new_status = status.to_api()
        if new_status != previous:
            # Also after the last finalizer went and the Service with it, as upstream does:
            # the patch then answers NotFound, which is not an error.
            try:
                self.kube.patch_service_load_balancer_status(svc.namespace, svc.name, new_status)
            except NotFound:
                log.info("service %s was deleted before its status could be written", key)

    def _process_deletion(self, key: str) -> None:
        """Upstream ``processServiceDeletion``: a Service gone from the store whose load
        balancer we made (it was deleted without our finalizer) still has it deleted."""
        with self._lock:
            cached = self._cache.get(key) or self._deleting.get(key)
        if cached is None:
            log.debug("service %s is gone; nothing of it is cached", key)
            return
        log.info("service %s has been deleted; deleting its load balancer", key)
        self._delete_cached(key, cached)

    def _delete_cached(self, key: str, cached: Service) -> None:
        """Upstream ``processLoadBalancerDelete`` for the cached state of a Service, then
        forget it. The cloud's error is raised as it is (the key is retried)."""
        ref = service_ref(cached)
        with self._lock:
            self._cache.pop(key, None)
            self._last_synced_nodes.pop(key, None)
            self._deleting[key] = cached
        self.recorder.event(ref, NORMAL, "DeletingLoadBalancer", "Deleting load balancer")
        try:
            self.balancer.ensure_load_balancer_deleted(self.cluster_name, cached)
        except ImplementedElsewhere:
            log.info("load balancer of %s is implemented elsewhere", key)
        except Exception as exc:
            self.recorder.event(
                ref, WARNING, "DeleteLoadBalancerFailed", f"Error deleting load balancer: {exc}"
            )
            raise
        self.recorder.event(ref, NORMAL, "DeletedLoadBalancer", "Deleted load balancer")
        with self._lock:
            if self._deleting.get(key) is cached:
                del self._deleting[key]

    def _delete(self, svc: Service) -> dict[str, Any]:
        with self._lock:
            # Kept (out of the node sync) until the load balancer is gone: a Service that
            # then disappears without our finalizer still has it deleted.
            cached = self._cache.pop(svc.key, None)
            if cached is not None:
                self._deleting[svc.key] = svc
            self._last_synced_nodes.pop(svc.key, None)
        try:
            _, exists = self.balancer.get_load_balancer(self.cluster_name, svc)
        except Exception as exc:
            raise _wrap("failed to check if load balancer exists before cleanup", exc) from exc
        ref = service_ref(svc)
        if exists:
            log.info("deleting load balancer of service %s", svc.key)
            self.recorder.event(ref, NORMAL, "DeletingLoadBalancer", "Deleting load balancer")
            try:
                self.balancer.ensure_load_balancer_deleted(self.cluster_name, svc)
            except ImplementedElsewhere:
                log.info("load balancer of %s is implemented elsewhere", svc.key)
            except Exception as exc:
                raise _wrap("failed to delete load balancer", exc) from exc
        with self._lock:
            self._deleting.pop(svc.key, None)
        if LB_FINALIZER in svc.finalizers:
            try:
                self.kube.remove_service_finalizer(svc.namespace, svc.name, LB_FINALIZER)
            except Exception as exc:
                raise _wrap("failed to remove load balancer cleanup finalizer", exc) from exc
        self.recorder.event(ref, NORMAL, "DeletedLoadBalancer", "Deleted load balancer")
        return {}

    def _ensure(self, svc: Service) -> LoadBalancerStatus | None:
        ref = service_ref(svc)
        self.recorder.event(ref, NORMAL, "EnsuringLoadBalancer", "Ensuring load balancer")
        if LB_FINALIZER not in svc.finalizers:
            try:
                self.kube.add_service_finalizer(svc.namespace, svc.name, LB_FINALIZER)
            except Exception as exc:
                raise _wrap("failed to add load balancer cleanup finalizer", exc) from exc
        nodes = self.eligible_nodes()
        if not nodes:
            self.recorder.event(
                ref,
                WARNING,
                "UnAvailableLoadBalancer",
                "There are no available nodes for LoadBalancer",
            )
        with self._lock:
            self._cache[svc.key] = svc
            self._deleting.pop(svc.key, None)
            self._last_synced_nodes[svc.key] = _node_set(nodes)
        try:
            status = self.balancer.ensure_load_balancer(self.cluster_name, svc, nodes)
        except ImplementedElsewhere:
            log.info("load balancer of %s is implemented elsewhere; skipping", svc.key)
            return None
        except Exception as exc:
            raise _wrap("failed to ensure load balancer", exc) from exc
        self.recorder.event(ref, NORMAL, "EnsuredLoadBalancer", "Ensured load balancer")
        if _node_set(self.eligible_nodes()) != _node_set(nodes):
            # A node changed while the load balancer was being created: the node sync that
            # event started found no load balancer to update yet (and recorded its node set
            # as synced), so record what this ensure registered and run it again now.
            with self._lock:
                if svc.key in self._cache:
                    self._last_synced_nodes[svc.key] = _node_set(nodes)
            self.node_queue.add(NODE_SYNC_KEY)
        return status

    def eligible_nodes(self) -> list[Node]:
        nodes = [Node.from_api(o) for o in self.nodes.list()]
        return sorted((n for n in nodes if node_included(n, self.legacy)), key=lambda n: n.name)

    # -- the node path ------------------------------------------------------------------------
    def sync_nodes(self, _key: str) -> None:
        nodes = self.eligible_nodes()
        current = _node_set(nodes)
        with self._lock:
            todo = [
                svc
                for key, svc in self._cache.items()
                if self._last_synced_nodes.get(key) != current
            ]
            # Recorded before the update, as upstream's nodeSyncService does: a failed update
            # is retried through the service queue (a full ensure), not by the next node sync.
            for svc in todo:
                self._last_synced_nodes[svc.key] = current
        with node_sync_wave(self.balancer, len(todo)):  # one wave: reads shared
            for svc in todo:
                self._update_hosts(svc, nodes)

    def _update_hosts(self, svc: Service, nodes: list[Node]) -> None:
        ref = service_ref(svc)
        try:
            self.balancer.update_load_balancer(self.cluster_name, svc, nodes)
        except Exception as exc:
            try:
                _, exists = self.balancer.get_load_balancer(self.cluster_name, svc)
            except Exception:
                exists = True
            if exists:
                names = [n.name for n in nodes]
                self.recorder.event(
                    ref,
                    WARNING,
                    "UpdateLoadBalancerFailed",
                    f"Error updating load balancer with new hosts {names}: {exc}",
                )
                log.warning("updating hosts of %s failed: %s; retrying via ensure", svc.key, exc)
                self.queue.add_rate_limited(svc.key)
            return
        if nodes:
            self.recorder.event(
                ref, NORMAL, "UpdatedLoadBalancer", "Updated load balancer with new hosts"
            )
        else:
            self.recorder.event(
                ref,
                WARNING,
                "UnAvailableLoadBalancer",
                "There are no available nodes for LoadBalancer",
            )

"""Prometheus metrics of the controller manager, and the callback the cloud reports calls to.

One :class:`Metrics` object owns a private ``CollectorRegistry`` (so tests and several
managers in one process never collide) and implements the small observer protocols the
rest of the code depends on:

* ``QueueMetrics.set_depth`` / ``SyncMetrics.observe_sync`` (``controller.runtime.workqueue``);
* :class:`CloudCallObserver` — the seam for the cloud implementation: call
  ``observe_cloud_call(service="ec2", action="DescribeInstances", outcome="success",
  seconds=0.012)`` once per API call; ``outcome`` is ``"success"`` or the error code
  (``"Throttling"``, ``"DependencyViolation"``, ``"RequestError"`` for no answer). The manager
  hands it to the cloud with ``cloud.set_call_observer(metrics)`` when the cloud has that
  method.

Exposed series (all prefixed ``ccm_``): ``sync_total{controller,outcome}``,
``sync_duration_seconds{controller}``, ``workqueue_depth{queue}``,
``cloud_api_calls_total{service,action,outcome}``, ``cloud_api_call_duration_seconds
{service,action}``, ``leader`` (1 while this instance leads), ``informer_relists_total{kind}``,
``workqueue_adds_total{queue}`` (every add, as client-go's ``workqueue_adds_total`` counts them)
and ``informer_resource_version{kind}`` (the newest resourceVersion whose event the handlers
have had: etcd revisions are integers, so it is a gauge; a test waits on it to know the
controller has seen a change, and then reads what its handlers did with it).
"""

from __future__ import annotations

from typing import Protocol

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest


class CloudCallObserver(Protocol):
    def observe_cloud_call(
        self, *, service: str, action: str, outcome: str, seconds: float
    ) -> None: ...


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.syncs = Counter(
            "ccm_sync", "Work-queue syncs by outcome", ["controller", "outcome"], registry=r
        )
        self.sync_seconds = Histogram(
            "ccm_sync_duration_seconds", "Sync duration", ["controller"], registry=r
        )
        self.depth = Gauge(
            "ccm_workqueue_depth", "Items ready in a work queue", ["queue"], registry=r
        )
        self.cloud_calls = Counter(
            "ccm_cloud_api_calls",
            "Cloud API calls by action and outcome (success or error code)",
            ["service", "action", "outcome"],
            registry=r,
        )
        self.cloud_seconds = Histogram(
            "ccm_cloud_api_call_duration_seconds",
            "Cloud API call latency",
            ["service", "action"],
            registry=r,
        )
        self.leader = Gauge(
            "ccm_leader", "1 while this instance holds the leader lease", registry=r
        )
        self.relists = Counter(
            "ccm_informer_relists", "Informer (re)lists by kind", ["kind"], registry=r
        )
        self.adds = Counter(
            "ccm_workqueue_adds", "Items added to a work queue", ["queue"], registry=r
        )
        self.resource_version = Gauge(
            "ccm_informer_resource_version",
            "The newest resourceVersion an informer's handlers have had",
            ["kind"],
            registry=r,
        )

    # QueueMetrics
    def set_depth(self, queue: str, depth: int) -> None:
        self.depth.labels(queue=queue).set(depth)

    def observe_add(self, queue: str) -> None:
        self.adds.labels(queue=queue).inc()

    # SyncMetrics
    def observe_sync(self, controller: str, outcome: str, seconds: float) -> None:
        self.syncs.labels(controller=controller, outcome=outcome).inc()
        self.sync_seconds.labels(controller=controller).observe(max(0.0, seconds))

    # CloudCallObserver
    def observe_cloud_call(
        self, *, service: str, action: str, outcome: str, seconds: float
    ) -> None:
        self.cloud_calls.labels(service=service, action=action, outcome=outcome).inc()
        self.cloud_seconds.labels(service=service, action=action).observe(max(0.0, seconds))

    # InformerMetrics
    def observe_resource_version(self, kind: str, resource_version: str) -> None:
        if resource_version.isdigit():  # another server's opaque versions are not shown
            self.resource_version.labels(kind=kind).set(int(resource_version))

    def observe_relist(self, kind: str) -> None:
        self.relists.labels(kind=kind).inc()

    def render(self) -> bytes:
        return bytes(generate_latest(self.registry))

"""The cloud node controller: initialise new Nodes from the cloud, refresh their addresses.

Follows upstream ``k8s.io/cloud-provider/controllers/node`` (upstream-ccm.md §6):

* add/update events enqueue the node name; :meth:`NodeController.sync_node` initialises
  Nodes carrying ``node.cloudprovider.kubernetes.io/uninitialized``: ``instance_metadata``,
  then under retry-on-conflict one PUT that sets ``spec.providerID`` (only when empty), the
  instance-type/zone/region labels (GA and beta), the cloud's additional labels (never
  overwriting, never ``kubernetes.io``/``k8s.io`` keys) and removes the taint; then the
  addresses (status patch) and the ``Synced`` event;
* a kubelet-provided node IP (``alpha.kubernetes.io/provided-node-ip``) must be one of the
  instance's addresses, otherwise initialisation fails with upstream's wrapped error
  ``failed to get node modifiers from cloud provider: provided node ip for node "<name>" is
  not valid: failed to get node address from cloud provider that matches ip: <ip>``; the node
  stays tainted and is retried with backoff (event ``SyncNodeFailed``, our name: upstream only
  logs);
* initialised Nodes get their beta labels copied to the GA ones when those differ;
* :meth:`NodeController.update_node_addresses` runs every ``address_refresh_period``
  (upstream ``--node-status-update-frequency``, 5 min) and patches changed addresses.

Errors are raised and interpreted by the work-queue loop.
"""

from __future__ import annotations

import logging
import threading

from controller.cloud import (
    ANNOTATION_PROVIDED_NODE_IP,
    TAINT_UNINITIALIZED,
    Cloud,
    InstanceMetadata,
    InstancesV2,
    Node,
    NodeAddress,
    RetryAfter,
)
from controller.nodeutil import (
    NodeIPError,
    addresses_for_node_ip,
    addresses_to_api,
    node_ref,
    remove_taint,
    update_node,
)
from controller.runtime.clock import Clock, RealClock
from controller.runtime.events import NORMAL, WARNING, EventRecorder
from controller.runtime.informer import EventSource, Handlers, Store
from controller.runtime.kube import KubeClient, NotFound, Obj
from controller.runtime.workqueue import (
    ControllerMetrics,
    RateLimitingQueue,
    SyncResult,
    process_next,
    run_worker,
)

log = logging.getLogger(__name__)

COMPONENT = "cloud-node-controller"

LABEL_INSTANCE_TYPE = "node.kubernetes.io/instance-type"
LABEL_INSTANCE_TYPE_BETA = "beta.kubernetes.io/instance-type"
LABEL_ZONE = "topology.kubernetes.io/zone"
LABEL_ZONE_BETA = "failure-domain.beta.kubernetes.io/zone"
LABEL_REGION = "topology.kubernetes.io/region"
LABEL_REGION_BETA = "failure-domain.beta.kubernetes.io/region"
BETA_TO_GA = {
    LABEL_ZONE_BETA: LABEL_ZONE,
    LABEL_REGION_BETA: LABEL_REGION,
    LABEL_INSTANCE_TYPE_BETA: LABEL_INSTANCE_TYPE,
}


class NodeSyncError(Exception):
    """Node initialisation failed; the message is upstream's wording."""


def _reserved_label(key: str) -> bool:
    domain = key.split("/", 1)[0] if "/" in key else ""
    return any(domain == d or domain.endswith("." + d) for d in ("kubernetes.io", "k8s.io"))


def _with_hostname(new: tuple[NodeAddress, ...], node: Node) -> tuple[NodeAddress, ...]:
    """Keep the kubelet's Hostname address when the cloud reports none."""
    if any(a.type == "Hostname" for a in new):
        return new
    return new + tuple(a for a in node.addresses if a.type == "Hostname")


class NodeController:
    def __init__(
        self,
        kube: KubeClient,
        cloud: Cloud,
        *,
        nodes: Store,
        recorder: EventRecorder | None = None,
        clock: Clock | None = None,
        address_refresh_period: float = 300.0,
        metrics: ControllerMetrics | None = None,
    ) -> None:
        instances = cloud.instances_v2()
        if instances is None:
            raise ValueError(f"cloud {cloud.provider_name!r} does not support InstancesV2")
        self.kube = kube
        self.instances: InstancesV2 = instances
        self.nodes = nodes
        self.clock: Clock = clock or RealClock()
        self.recorder = recorder or EventRecorder(kube, COMPONENT, clock=self.clock)
        self.address_refresh_period = address_refresh_period
        self._metrics = metrics
        self.queue: RateLimitingQueue[str] = RateLimitingQueue(
            "node", clock=self.clock, metrics=metrics
        )

    def register(self, nodes: EventSource) -> None:
        enqueue = self._enqueue
        nodes.add_handlers(Handlers(on_add=enqueue, on_update=lambda _old, new: enqueue(new)))

    def _enqueue(self, obj: Obj) -> None:
        self.queue.add(str(obj["metadata"]["name"]))

    def run(self, stop: threading.Event) -> list[threading.Thread]:
        worker = threading.Thread(
            target=run_worker,
            args=(self.queue, self.sync_node, stop),
            kwargs={"on_error": self.on_sync_error, "metrics": self._metrics},
            name="node-worker",
            daemon=True,
        )
        refresher = threading.Thread(
            target=self._refresh_loop, args=(stop,), name="node-address-refresh", daemon=True
        )
        worker.start()
        refresher.start()
        return [worker, refresher]

    def _refresh_loop(self, stop: threading.Event) -> None:
        while not self.clock.wait(stop, self.address_refresh_period):
            try:
                self.update_node_addresses()
            except Exception:
                log.exception("periodic node address refresh failed")

    def shut_down(self) -> None:
        self.queue.shut_down()

    def drain(self, limit: int = 1000) -> list[SyncResult]:
        out: list[SyncResult] = []
        while len(out) < limit:
            r = process_next(self.queue, self.sync_node, on_error=self.on_sync_error, block=False)
            if r is None:
                break
            out.append(r)
        return out

    def on_sync_error(self, name: str, exc: Exception) -> None:
        obj = self.nodes.get(name)
        if obj is None:
            return
        self.recorder.event(
            node_ref(Node.from_api(obj)),
            WARNING,
            "SyncNodeFailed",
            f"Error syncing node: {exc}",
        )

    # -- sync -------------------------------------------------------------------------------
    def sync_node(self, name: str) -> None:
        obj = self.nodes.get(name)
        if obj is None:
            return
        node = Node.from_api(obj)
        if not node.has_taint(TAINT_UNINITIALIZED):
            self._reconcile_labels(node)
            return
        self._initialize(node)

    def _reconcile_labels(self, node: Node) -> None:
        wanted = {
            ga: node.labels[beta]
            for beta, ga in BETA_TO_GA.items()
            if beta in node.labels and node.labels.get(ga) != node.labels[beta]
        }
        if not wanted:
            return

        def mutate(o: Obj) -> bool:
            o["metadata"].setdefault("labels", {}).update(wanted)
            return True

        update_node(self.kube, node.name, mutate)

    def _metadata(self, node: Node) -> InstanceMetadata:
        try:
            return self.instances.instance_metadata(node)
        except RetryAfter:
            raise
        except Exception as exc:
            raise NodeSyncError(
                f"failed to get instance metadata for node {node.name}: {exc}"
            ) from exc

    def _initialize(self, node: Node) -> None:
        log.info("initializing node %s with cloud provider", node.name)
        meta = self._metadata(node)
        if not node.provider_id and not meta.provider_id:
            raise NodeSyncError(
                "failed to get node modifiers from cloud provider: "
                "cloud provider does not set node provider ID"
            )
        addresses = self._addresses(node, meta, initializing=True)

        def mutate(o: Obj) -> bool:
            spec = o.setdefault("spec", {})
            if not spec.get("providerID") and meta.provider_id:
                spec["providerID"] = meta.provider_id
            labels = o["metadata"].setdefault("labels", {})
            for keys, value in (
                ((LABEL_INSTANCE_TYPE, LABEL_INSTANCE_TYPE_BETA), meta.instance_type),
                ((LABEL_ZONE, LABEL_ZONE_BETA), meta.zone),
                ((LABEL_REGION, LABEL_REGION_BETA), meta.region),
            ):
                if value:
                    for key in keys:
                        labels[key] = value
            for key, value in meta.additional_labels.items():
                if _reserved_label(key):
                    log.info("discarding additional label %s: reserved namespace", key)
                elif key not in labels:
                    labels[key] = value
            remove_taint(o, TAINT_UNINITIALIZED)
            return True

        updated = update_node(self.kube, node.name, mutate)
        if addresses is not None:
            self._patch_addresses(Node.from_api(updated), addresses)
        log.info("successfully initialized node %s with cloud provider", node.name)
        self.recorder.event(node_ref(node), NORMAL, "Synced", "Node synced successfully")

    def _addresses(
        self, node: Node, meta: InstanceMetadata, *, initializing: bool
    ) -> tuple[NodeAddress, ...] | None:
        if not meta.node_addresses:
            return None
        addresses = _with_hostname(tuple(meta.node_addresses), node)
        provided = node.annotations.get(ANNOTATION_PROVIDED_NODE_IP)
        if provided is not None:
            try:
                addresses = addresses_for_node_ip(addresses, provided)
            except NodeIPError as exc:
                if initializing:
                    raise NodeSyncError(
                        "failed to get node modifiers from cloud provider: provided node ip "
                        f'for node "{node.name}" is not valid: {exc}'
                    ) from exc
                log.warning("not updating addresses of node %s: %s", node.name, exc)
                return None
        return addresses

    def _patch_addresses(self, node: Node, addresses: tuple[NodeAddress, ...]) -> None:
        if set(addresses) == set(node.addresses) and len(addresses) == len(node.addresses):
            return
        self.kube.patch_node_addresses(node.name, addresses_to_api(addresses))

    def update_node_addresses(self) -> None:
        """The periodic refresh: patch initialised Nodes whose cloud addresses changed."""
        for obj in self.nodes.list():
            node = Node.from_api(obj)
            if node.has_taint(TAINT_UNINITIALIZED):
                continue
            try:
                meta = self.instances.instance_metadata(node)
                addresses = self._addresses(node, meta, initializing=False)
                if addresses is not None:
                    self._patch_addresses(node, addresses)
            except NotFound:
                continue
            except Exception as exc:
                log.warning("address refresh of node %s failed: %s", node.name, exc)

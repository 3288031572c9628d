"""Kubelet stand-in: registers Nodes and keeps them alive the way real kubelets would.

The ``sim`` backend has no kubelets, so :class:`KubeletStandIn` does their API-visible work
against any API server (the simulator or a real one) through the official client: the requests
``CoreV1Api``/``CoordinationV1Api`` send, made by the ``ApiClient`` passed in
(``lab.kubeclient.WireApi``, which spares the daemon importing those classes):

* **register**: create the Node a ``--cloud-provider=external`` kubelet of the chosen version
  creates (``lab.cluster.node_shapes.node_manifest``: uninitialized taint, provided-node-ip,
  kubeadm role labels, seeded addresses), then its Lease in ``kube-node-lease`` owned by the Node.
  If the Node already exists, patch the kubelet-owned labels and the annotation onto it, as a
  restarting kubelet reconciles them.
* **heartbeat**: renew the Lease (``renewTime``) every ``lease_renew_interval`` (kubelet: 10 s).
* **status loop**: every ``status_update_interval`` (kubelet's ``nodeStatusUpdateFrequency``:
  10 s) read the Node and post the conditions when the API's copy differs from what the kubelet
  reports (``lastHeartbeatTime`` aside), and in any case every ``status_report_interval``
  (``nodeStatusReportFrequency``: 5 min) with a fresh ``lastHeartbeatTime``. So a condition
  someone else wrote (the lifecycle controller's ``Unknown`` after a late heartbeat, a hand
  edit) is put right within one update period, as the kubelet's ``tryUpdateNodeStatus`` does.
  A condition keeps the API's ``lastTransitionTime`` while its status is unchanged and gets a
  new one when it changes. All intervals are lab seconds on the lab clock (``lab.clock``).
  Status posts are strategic-merge patches of ``status.conditions`` (merge key ``type``), so
  addresses and labels written by the cloud controller are left alone.
* **stop_heartbeat(name)**: the kubelet dies; nothing is renewed or posted. What follows (the
  Node going ``Unknown`` after the node-monitor grace period, the ``unreachable`` taints, pods
  marked NotReady and evicted) is kube-controller-manager's node lifecycle controller's work:
  ``lab.dataplane.nodelifecycle``, which the sim provider runs next to this stand-in.
* **resume_heartbeat(name)**: the kubelet is back: Lease renewed and fresh conditions posted
  at once (the lifecycle controller then lifts its taints).
* **report_not_ready(name, message)** / **report_ready(name)**: the kubelet keeps renewing its
  Lease but reports ``Ready=False`` (reason ``KubeletNotReady``, e.g. CNI not initialised);
  the lifecycle controller taints the Node ``node.kubernetes.io/not-ready``.

Pod lifecycle (the other half of a kubelet) is ``lab.dataplane.kubelet_pods``; it asks
:meth:`KubeletStandIn.is_running` and subscribes with :meth:`KubeletStandIn.add_listener` to
know which nodes have a live kubelet.

The loop wakes when the next renewal or report falls due (and at once when a node's state
changes), tells the lab clock when that is (``lab.clock``: lab time holds for a starved stand-in
instead of letting its Lease lapse), and reports its progress to the settle barrier
(:meth:`KubeletStandIn.progress`, ``lab.settle``).

The uninitialized taint, addresses, providerID and zone labels are left to the cloud controller
under test. Errors in the background loop are logged and kept in ``errors`` so a test can assert
that none happened.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any

from kubernetes import client

from lab.clock import LabClock, ScaledClock
from lab.cluster.base import Role
from lab.cluster.kubeapi import SMP
from lab.cluster.node_shapes import (
    NODE_LEASE_NAMESPACE,
    NodeIPFlag,
    healthy_conditions,
    lease_manifest,
    micro_time,
    node_manifest,
)
from lab.kubeclient import AlreadyExists, Conflict, NotFound, WireApi
from lab.settle import Progress
from lab.versions.release import KubeVersion

log = logging.getLogger(__name__)

_HEALTHY, _NOT_READY, _STALE = "healthy", "not-ready", "stale"
#: what the status loop compares between the API's copy and the kubelet's (the heartbeat aside)
_COMPARED = ("status", "reason", "message", "lastTransitionTime")
_LEASES = "/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"
_LEASE = _LEASES + "/{name}"
NOT_READY_REASON = "KubeletNotReady"
DEFAULT_NOT_READY_MESSAGE = (
    "container runtime network not ready: NetworkReady=false "
    "reason:NetworkPluginNotReady message:Network plugin returns error: cni plugin not initialized"
)
KUBELET_OWNED_LABELS = (
    "beta.kubernetes.io/arch",
    "beta.kubernetes.io/os",
    "kubernetes.io/arch",
    "kubernetes.io/hostname",
    "kubernetes.io/os",
)


@dataclasses.dataclass(frozen=True)
class NodeRegistration:
    """What one kubelet is started with."""

    name: str
    ip: str
    version: KubeVersion
    role: Role = Role.WORKER
    provider_id: str | None = None
    node_ip_flag: NodeIPFlag = NodeIPFlag.SPECIFIC
    labels: Mapping[str, str] = dataclasses.field(default_factory=dict)
    control_plane_taints: bool = True
    exclusion_label: bool = True


@dataclasses.dataclass
class _Tracked:
    reg: NodeRegistration
    uid: str
    lease_rv: str | None
    heartbeating: bool = True
    #: message of a kubelet-reported Ready=False, None when the kubelet reports Ready
    not_ready: str | None = None
    #: what the kubelet last posted: _HEALTHY, _NOT_READY, or _STALE (found existing, or back
    #: after a stop: whatever the API shows is someone else's)
    posted: str = "healthy"
    last_renew: float = 0.0
    last_status: float = 0.0
    #: lab time of the status loop's last look at the API's copy
    last_sync: float = 0.0
    #: after a failed renewal or post: lab time of the next try (the kubelet's 10 s retry)
    retry_at: float = float("-inf")


def _model(model: Any, body: Mapping[str, Any]) -> Any:
    """A client model from wire JSON (the typed client validates bodies against its schema)."""
    built = model.from_dict(dict(body))
    if built is None:
        raise ValueError(f"cannot build {model.__name__} from {body!r}")
    return built


class KubeletStandIn:
    """Registers nodes and heartbeats them from one background thread (see module doc)."""

    def __init__(
        self,
        api_client: Any,
        *,
        lease_renew_interval: float = 10.0,
        status_report_interval: float = 300.0,
        status_update_interval: float = 10.0,
        clock: LabClock | None = None,
    ) -> None:
        for field, value in (
            ("lease_renew_interval", lease_renew_interval),
            ("status_report_interval", status_report_interval),
            ("status_update_interval", status_update_interval),
        ):
            if value <= 0:
                raise ValueError(f"{field} must be > 0, got {value!r}")
        self.api = WireApi(api_client)
        self.lease_renew_interval = lease_renew_interval
        self.status_report_interval = status_report_interval
        self.status_update_interval = status_update_interval
        self.clock: LabClock = clock or ScaledClock(1.0)
        self._nodes: dict[str, _Tracked] = {}
        self._listeners: list[Callable[[str, bool], None]] = []
        self._lock = threading.RLock()
        self._tick_lock = threading.Lock()  # one renewal/post at a time per stand-in
        self._stop = threading.Event()
        self._wake = threading.Condition()
        self._thread: threading.Thread | None = None
        self.name = "kubelet-stand-in"
        self.errors: list[str] = []

    # --- lifecycle -------------------------------------------------------------------

    def __enter__(self) -> KubeletStandIn:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        if self._thread is not None:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name=self.name, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop the background loop (nodes stay registered). Idempotent."""
        thread, self._thread = self._thread, None
        if thread is None:
            return
        self._stop.set()
        self._poke()
        thread.join(timeout=10)
        self.clock.owe(self, None, name=self.name)

    @property
    def node_names(self) -> list[str]:
        with self._lock:
            return sorted(self._nodes)

    def is_running(self, name: str) -> bool:
        """True while ``name`` is registered here and its kubelet heartbeats."""
        with self._lock:
            tracked = self._nodes.get(name)
            return tracked is not None and tracked.heartbeating

    def add_listener(self, listener: Callable[[str, bool], None]) -> None:
        """Call ``listener(node, running)`` whenever a node's kubelet starts or stops."""
        with self._lock:
            self._listeners.append(listener)

    def _notify(self, name: str, running: bool) -> None:
        with self._lock:
            listeners = list(self._listeners)
        for listener in listeners:
            try:
                listener(name, running)
            except Exception:
                log.exception("kubelet stand-in listener failed for %s", name)

    # --- registration ----------------------------------------------------------------

    def register(self, reg: NodeRegistration) -> dict[str, Any]:
        """Create (or reconcile) the Node and its Lease; returns the Node as the server has it."""
        manifest = node_manifest(
            version=reg.version,
            name=reg.name,
            ip=reg.ip,
            role=reg.role,
            provider_id=reg.provider_id,
            node_ip_flag=reg.node_ip_flag,
            labels=reg.labels,
            control_plane_taints=reg.control_plane_taints,
            exclusion_label=reg.exclusion_label,
            now=self.clock.wall(),
        )
        posted = _HEALTHY
        try:
            body = _model(client.V1Node, manifest)
            node = self.api.call("POST", "/api/v1/nodes", body)
        except AlreadyExists:  # a restarting kubelet finds its Node
            node = self._reconcile_existing(reg.name, manifest["metadata"])
            posted = _STALE  # post fresh conditions (and clear lifecycle taints) on the next tick
        uid = str(node["metadata"]["uid"])
        lease_rv = self._ensure_lease(reg.name, uid)
        now = self.clock.now()
        with self._lock:
            self._nodes[reg.name] = _Tracked(
                reg, uid, lease_rv, posted=posted, last_renew=now, last_status=now, last_sync=now
            )
        log.info("registered node %s (kubelet %s)", reg.name, reg.version)
        self._poke()
        self._notify(reg.name, True)
        return node

    def unregister(self, name: str, *, delete: bool = True) -> None:
        """Forget the node; with ``delete`` remove the Node and its Lease (404s are fine)."""
        with self._lock:
            known = self._nodes.pop(name, None) is not None
        if known:
            self._notify(name, False)
        if not delete:
            return
        with contextlib.suppress(NotFound):
            self.api.call("DELETE", "/api/v1/nodes/{name}", name=name)
        with contextlib.suppress(NotFound):
            self.api.call("DELETE", _LEASE, namespace=NODE_LEASE_NAMESPACE, name=name)

    def _reconcile_existing(self, name: str, metadata: Mapping[str, Any]) -> dict[str, Any]:
        labels = {k: metadata["labels"][k] for k in KUBELET_OWNED_LABELS}
        patch = {"metadata": {"labels": labels, "annotations": metadata["annotations"]}}
        return self.api.call("PATCH", "/api/v1/nodes/{name}", patch, content_type=SMP, name=name)

    def _ensure_lease(self, name: str, uid: str) -> str | None:
        body = lease_manifest(name=name, node_uid=uid, now=self.clock.wall())
        try:
            lease = self.api.call(
                "POST", _LEASES, _model(client.V1Lease, body), namespace=NODE_LEASE_NAMESPACE
            )
        except AlreadyExists:
            return self._renew_lease(name, uid, None)
        return str(lease["metadata"].get("resourceVersion") or "") or None

    # --- heartbeat control -------------------------------------------------------------

    def stop_heartbeat(self, name: str) -> None:
        """The kubelet on ``name`` stops: no more renewals (Unknown after the grace period)."""
        with self._lock:
            self._tracked(name).heartbeating = False
        self._notify(name, False)

    def resume_heartbeat(self, name: str) -> None:
        with self._lock:
            tracked = self._tracked(name)
            tracked.heartbeating = True
            now = self.clock.now()  # both due now
            tracked.last_renew = now - self.lease_renew_interval
            tracked.last_status = now - self.status_report_interval
            tracked.posted = _STALE  # the API may show the lifecycle controller's Unknown
        self._poke()
        self._notify(name, True)

    def report_not_ready(self, name: str, message: str = DEFAULT_NOT_READY_MESSAGE) -> None:
        """The kubelet on ``name`` keeps heartbeating but reports ``Ready=False``
        (``KubeletNotReady`` with ``message``); ``report_ready`` undoes it."""
        with self._lock:
            tracked = self._tracked(name)
            tracked.not_ready = message
        self._tick_now(tracked)

    def report_ready(self, name: str) -> None:
        with self._lock:
            tracked = self._tracked(name)
            tracked.not_ready = None
        self._tick_now(tracked)

    def _tick_now(self, node: _Tracked) -> None:
        """Post a changed condition at once, as the kubelet's status loop reacts to it."""
        with self._tick_lock:
            self._tick_node(node)

    def _tracked(self, name: str) -> _Tracked:
        try:
            return self._nodes[name]
        except KeyError:
            raise KeyError(f"node {name!r} is not registered with this kubelet stand-in") from None

    # --- the loop --------------------------------------------------------------------

    def _poke(self) -> None:
        """Wake the loop: something fell due now."""
        with self._wake:
            self._wake.notify_all()

    def _due(self) -> float | None:
        """Lab time the next renewal or report falls due (None: no heartbeating node)."""
        now = self.clock.now()
        dues = []
        with self._lock:
            for node in self._nodes.values():
                if not node.heartbeating:
                    continue
                desired = _NOT_READY if node.not_ready is not None else _HEALTHY
                due = min(
                    now if node.posted != desired else float("inf"),
                    node.last_renew + self.lease_renew_interval,
                    node.last_status + self.status_report_interval,
                    node.last_sync + self.status_update_interval,
                )
                dues.append(max(due, node.retry_at))
        return min(dues) if dues else None

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.heartbeat_once()
            with self._wake:
                due = self._due()
                if self._thread is not None:
                    self.clock.owe(self, due, name=self.name)
                if self._stop.is_set():
                    return
                left = 1.0 if due is None else self.clock.real_seconds(due - self.clock.now())
                if left > 0:
                    self._wake.wait(min(left, 1.0))

    def progress(self) -> Progress:
        """Settled when no renewal or report is due now (``lab.settle``)."""
        if self._thread is None:
            return Progress(self.name, True, "stopped")
        now = self.clock.now()
        due = self._due()
        if due is not None and due <= now:
            return Progress(self.name, False, "a renewal or status report is due", next_timer=due)
        return Progress(self.name, True, next_timer=due)

    def heartbeat_once(self) -> None:
        """One pass over all nodes: renew the Leases and post the conditions that are due."""
        with self._lock:
            tracked = list(self._nodes.values())
        for node in tracked:
            try:
                with self._tick_lock:
                    self._tick_node(node)
            except NotFound:  # the Node was deleted: a real kubelet logs and retries
                node.retry_at = self.clock.now() + self.lease_renew_interval
                log.info("kubelet stand-in: node %s is gone from the API", node.reg.name)
            except Exception as err:
                # tried again a renewal period later, as the kubelet's status loop does (not
                # at once: that loop would spin and owe the lab clock the past for good)
                node.retry_at = self.clock.now() + self.lease_renew_interval
                message = f"{node.reg.name}: {type(err).__name__}: {err}"
                log.warning("kubelet stand-in: %s", message)
                with self._lock:
                    self.errors.append(message)

    def _tick_node(self, node: _Tracked) -> None:
        now = self.clock.now()
        if not node.heartbeating or now < node.retry_at:
            return
        name = node.reg.name
        if now - node.last_renew >= self.lease_renew_interval:
            node.lease_rv = self._renew_lease(name, node.uid, node.lease_rv)
            node.last_renew = now
        desired = _NOT_READY if node.not_ready is not None else _HEALTHY
        report_due = now - node.last_status >= self.status_report_interval
        if (
            node.posted == desired
            and not report_due
            and now - node.last_sync < self.status_update_interval
        ):
            return
        # The kubelet's tryUpdateNodeStatus: read the Node, set the conditions on that copy,
        # patch when anything but the heartbeat changed or the report period is up.
        current = self._api_conditions(name)
        conditions = self._conditions(node, current)
        node.last_sync = now
        if node.posted != desired or report_due or _differs(current, conditions):
            self._post_conditions(name, conditions)
            node.last_status = now
            node.posted = desired

    def _api_conditions(self, name: str) -> dict[str, Mapping[str, Any]]:
        """The Node's conditions by type, as the API has them."""
        node = self.api.call("GET", "/api/v1/nodes/{name}", name=name)
        conditions = (node.get("status") or {}).get("conditions") or []
        return {str(c.get("type")): c for c in conditions if isinstance(c, Mapping)}

    def _conditions(
        self, node: _Tracked, current: Mapping[str, Mapping[str, Any]]
    ) -> list[dict[str, str]]:
        """What the kubelet reports now: a fresh heartbeat; a condition keeps the API's
        ``lastTransitionTime`` while its status is unchanged (the kubelet's setters)."""
        conditions = healthy_conditions(self.clock.wall())
        for condition in conditions:
            if condition["type"] == "Ready" and node.not_ready is not None:
                condition.update(status="False", reason=NOT_READY_REASON, message=node.not_ready)
            seen = current.get(condition["type"])
            if seen is not None and seen.get("status") == condition["status"]:
                condition["lastTransitionTime"] = str(
                    seen.get("lastTransitionTime") or condition["lastTransitionTime"]
                )
        return conditions

    def _renew_lease(self, name: str, uid: str, resource_version: str | None) -> str | None:
        for _ in range(3):
            body: dict[str, Any] = dict(
                lease_manifest(name=name, node_uid=uid, now=self.clock.wall())
            )
            if resource_version:
                body["metadata"] = {**body["metadata"], "resourceVersion": resource_version}
            try:
                lease = self.api.call(
                    "PUT",
                    _LEASE,
                    _model(client.V1Lease, body),
                    namespace=NODE_LEASE_NAMESPACE,
                    name=name,
                )
                return str(lease["metadata"].get("resourceVersion") or "") or None
            except NotFound:  # deleted under us: kubelet's ensureLease recreates it
                return self._ensure_lease(name, uid)
            except Conflict:
                current = self.api.call("GET", _LEASE, namespace=NODE_LEASE_NAMESPACE, name=name)
                resource_version = str(current["metadata"].get("resourceVersion") or "") or None
        raise RuntimeError(f"lease {NODE_LEASE_NAMESPACE}/{name}: conflicts on every retry")

    def _post_conditions(self, name: str, conditions: list[dict[str, str]]) -> None:
        self.api.call(
            "PATCH",
            "/api/v1/nodes/{name}/status",
            {"status": {"conditions": conditions}},
            content_type=SMP,
            name=name,
        )


def _differs(current: Mapping[str, Mapping[str, Any]], conditions: list[dict[str, str]]) -> bool:
    """True when the API's conditions differ from the kubelet's, the heartbeat aside."""
    for condition in conditions:
        seen = current.get(condition["type"])
        if seen is None or any(seen.get(key) != condition[key] for key in _COMPARED):
            return True
    return False


__all__ = ["KubeletStandIn", "NodeIPFlag", "NodeRegistration", "micro_time", "node_manifest"]

"""core/v1 Event recorder with aggregation of repeats.

Controllers call :meth:`EventRecorder.event` with an :class:`ObjectRef` (kind, name,
namespace, uid: upstream's ``v1.ObjectReference``), a type (``Normal``/``Warning``), a reason
and a message, as upstream's ``record.EventRecorder``. The recorder knows no domain type; each
controller builds the references of its objects (``controller.service.service_ref``,
``controller.nodeutil.node_ref``).
The recorder POSTs a ``core/v1`` Event whose ``source.component`` names the controller
(``service-controller``, ``cloud-node-controller``, ``cloud-node-lifecycle-controller``);
an identical event (same object, type, reason, message) within the aggregation window
PATCHes ``count`` and ``lastTimestamp`` of the first one instead of creating another, which
is what ``kubectl describe`` shows as ``(x3 over 2m)``. Events for cluster-scoped objects
(Nodes) live in namespace ``default``.

Recording never raises: an event that cannot be written is logged and dropped, as upstream
(events are best effort and must not fail a sync).
"""

from __future__ import annotations

import logging
import socket
import threading
from dataclasses import dataclass
from datetime import datetime

from controller.runtime.clock import Clock, RealClock
from controller.runtime.kube import KubeClient, KubeError, NotFound

log = logging.getLogger(__name__)

NORMAL = "Normal"
WARNING = "Warning"
AGGREGATION_WINDOW = 600.0


@dataclass(frozen=True)
class ObjectRef:
    """The object an event is about (``involvedObject``); ``namespace`` "" = cluster-scoped."""

    kind: str
    name: str
    namespace: str = ""
    uid: str = ""
    api_version: str = "v1"


@dataclass
class _Aggregate:
    name: str
    namespace: str
    count: int
    first_seen: float


def _timestamp(now: datetime) -> str:
    return now.strftime("%Y-%m-%dT%H:%M:%SZ")


class EventRecorder:
    """Records events for one component through the :class:`KubeClient` seam."""

    def __init__(
        self,
        kube: KubeClient,
        component: str,
        *,
        clock: Clock | None = None,
        host: str | None = None,
    ) -> None:
        self.kube = kube
        self.component = component
        self.clock: Clock = clock or RealClock()
        self.host = host or socket.gethostname()
        self._seen: dict[tuple[str, ...], _Aggregate] = {}
        self._lock = threading.Lock()
        self._last_nanos = 0

    def event(self, ref: ObjectRef, etype: str, reason: str, message: str) -> None:
        log.log(
            logging.WARNING if etype == WARNING else logging.INFO,
            "event %s %s %s/%s: %s",
            etype,
            reason,
            ref.kind,
            f"{ref.namespace}/{ref.name}" if ref.namespace else ref.name,
            message,
        )
        namespace = ref.namespace or "default"
        agg_key = (ref.kind, ref.namespace, ref.name, ref.uid, etype, reason, message)
        now = self.clock.now()
        mono = self.clock.monotonic()
        with self._lock:
            agg = self._seen.get(agg_key)
            if agg is not None and mono - agg.first_seen > AGGREGATION_WINDOW:
                agg = None
            if agg is not None:
                agg.count += 1
                count, name = agg.count, agg.name
        try:
            if agg is not None:
                try:
                    self.kube.patch_event(
                        namespace, name, {"count": count, "lastTimestamp": _timestamp(now)}
                    )
                    return
                except NotFound:
                    pass  # expired or deleted: write a new one
            created = self.kube.create_event(
                namespace, self._body(ref, etype, reason, message, now)
            )
            with self._lock:
                self._seen[agg_key] = _Aggregate(
                    str((created.get("metadata") or {}).get("name") or ""), namespace, 1, mono
                )
        except KubeError as exc:
            log.warning("could not record event %s for %s %s: %s", reason, ref.kind, ref.name, exc)

    def _unique_suffix(self, now: datetime) -> str:
        """Upstream names events ``<object>.<hex unix nanos>``; keep them unique and ordered."""
        with self._lock:
            nanos = max(int(now.timestamp() * 1e9), self._last_nanos + 1)
            self._last_nanos = nanos
        return f"{nanos:x}"

    def _body(
        self, ref: ObjectRef, etype: str, reason: str, message: str, now: datetime
    ) -> dict[str, object]:
        namespace = ref.namespace or "default"
        involved: dict[str, str] = {
            "kind": ref.kind,
            "name": ref.name,
            "apiVersion": ref.api_version,
        }
        if ref.namespace:
            involved["namespace"] = ref.namespace
        if ref.uid:
            involved["uid"] = ref.uid
        ts = _timestamp(now)
        return {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {
                "name": f"{ref.name}.{self._unique_suffix(now)}",
                "namespace": namespace,
            },
            "involvedObject": involved,
            "reason": reason,
            "message": message,
            "type": etype,
            "source": {"component": self.component},
            "reportingComponent": self.component,
            "reportingInstance": self.host,
            "firstTimestamp": ts,
            "lastTimestamp": ts,
            "count": 1,
        }

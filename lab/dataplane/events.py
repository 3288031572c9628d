"""Events the data-plane stand-ins record, as their real counterparts do (``kubectl describe``).

Role: one helper that writes a core/v1 Event about an object, named and shaped the way
client-go's event recorder does (``<name>.<hex>``, involvedObject, source component, counts),
so ``kubectl get events`` reads the same. As client-go's broadcaster does, writing is
asynchronous when the ``Api`` carries an :class:`EventSink` (the data plane attaches one): a
controller never waits for its events, and past 1,000 queued events new ones are dropped.
Failures to record are logged and ignored. Neighbours: every controller that reports something.
"""

from __future__ import annotations

import logging
import queue
import secrets
import threading

from lab.clock import LabClock
from lab.dataplane.api import EVENTS, Api, meta, path
from lab.kube.objects import Obj
from lab.settle import Progress

log = logging.getLogger(__name__)


def involved(obj: Obj, *, kind: str, api_version: str = "v1") -> Obj:
    m = meta(obj)
    ref: Obj = {"kind": kind, "name": m.get("name"), "apiVersion": api_version}
    if m.get("namespace"):
        ref["namespace"] = m["namespace"]
    if m.get("uid"):
        ref["uid"] = m["uid"]
    if m.get("resourceVersion"):
        ref["resourceVersion"] = m["resourceVersion"]
    return ref


def record(
    api: Api,
    clock: LabClock,
    ref: Obj,
    *,
    reason: str,
    message: str,
    component: str,
    type_: str = "Normal",
    host: str | None = None,
) -> None:
    """Write one Event about ``ref`` (an involvedObject); errors are logged, not raised."""
    namespace = str(ref.get("namespace") or "default")
    stamp = clock.wall().strftime("%Y-%m-%dT%H:%M:%SZ")
    source: Obj = {"component": component}
    if host:
        source["host"] = host
    body: Obj = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {
            "name": f"{ref.get('name')}.{secrets.token_hex(8)}",
            "namespace": namespace,
        },
        "involvedObject": ref,
        "reason": reason,
        "message": message,
        "type": type_,
        "source": source,
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "count": 1,
        "reportingComponent": component,
        "reportingInstance": host or "",
    }
    sink = getattr(api, "event_sink", None)
    if isinstance(sink, EventSink):
        sink.put(namespace, body)
    else:
        _write(api, namespace, body)


def _write(api: Api, namespace: str, body: Obj) -> None:
    try:
        api.create(path(EVENTS, namespace), body)
    except Exception as err:
        log.debug("event %s not recorded: %s", body.get("reason"), err)


class EventSink:
    """A background writer for events (client-go's broadcaster, 1,000 deep).

    It reports what it still has to write (:meth:`progress`, ``lab.settle``) and tells the
    lab clock since when (``lab.clock``): an event waiting to be written is work due."""

    name = "event-writer"

    def __init__(self, api: Api, *, depth: int = 1000, clock: LabClock | None = None) -> None:
        self.api = api
        self.clock = clock
        self._queue: queue.Queue[tuple[str, Obj] | None] = queue.Queue(maxsize=depth)
        self._lock = threading.Lock()
        self._pending = 0  # queued or being written
        self._thread = threading.Thread(target=self._run, name="event-sink", daemon=True)
        self.dropped = 0
        self._thread.start()

    def put(self, namespace: str, body: Obj) -> None:
        try:
            with self._lock:
                self._queue.put_nowait((namespace, body))
                self._pending += 1
                if self.clock is not None and self._pending == 1:
                    self.clock.owe(self, self.clock.now(), name=self.name)
        except queue.Full:
            self.dropped += 1

    def _run(self) -> None:
        while (item := self._queue.get()) is not None:
            try:
                _write(self.api, *item)
            finally:
                with self._lock:
                    self._pending -= 1
                    if self.clock is not None and self._pending == 0:
                        self.clock.owe(self, None, name=self.name)

    def progress(self) -> Progress:
        with self._lock:
            pending = self._pending
        if pending:
            return Progress(self.name, False, f"{pending} event(s) to write", queued=pending)
        return Progress(self.name, True)

    def stop(self) -> None:
        """Write what is queued, then stop."""
        self._queue.put(None)
        self._thread.join(timeout=10)
        if self.clock is not None:
            self.clock.owe(self, None, name=self.name)

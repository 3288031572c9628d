"""Events the data-plane stand-ins record, as their real counterparts do (``kubectl describe``).

Role: one helper that writes a core/v1 Event about an object, named and shaped the way
client-go's event recorder does (``<name>.<hex>``, involvedObject, source component, counts),
so ``kubectl get events`` reads the same. Failures to record are logged and ignored, as in
client-go. Neighbours: every controller module that reports something.
"""

from __future__ import annotations

import logging
import secrets

from lab.clock import LabClock
from lab.dataplane.api import EVENTS, Api, Obj, meta, path

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
    try:
        api.create(path(EVENTS, namespace), body)
    except Exception as err:
        log.debug("event %s on %s not recorded: %s", reason, ref.get("name"), err)

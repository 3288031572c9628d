"""``POST .../pods/{name}/binding``: how a scheduler assigns a pod to a node.

Follows ``registry/core/pod/storage`` ``BindingREST`` (what kube-scheduler's bind step calls):
the body is a ``v1.Binding`` naming the pod (``metadata.name``, defaulting to the URL's) and a
target Node (``target.kind`` ``Node`` or empty, ``target.name`` required). In one write the pod
gets ``spec.nodeName``, the binding's annotations and ``PodScheduled=True``; the answer is
``201`` with a ``Success`` Status. A pod that is being deleted or already bound gets ``409``
(``Operation cannot be fulfilled on pods/binding "web": pod web is already assigned to node
"n1"``), a missing pod ``404``. The main pod resource itself still refuses nothing about
``spec.nodeName`` (a known leniency, see README). Called from ``handlers.py``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from lab.kube import exceptions as E
from lab.kube.objects import Obj, clone, now_rfc3339
from lab.kube.resources import ResourceType

if TYPE_CHECKING:
    from lab.kube.store import Store


def _conflict(name: str, message: str) -> E.ApiError:
    return E.ApiError(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on pods/binding "{name}": {message}',
        details={"name": name, "kind": "pods/binding"},
    )


def bind(
    store: Store, rt: ResourceType, ns: str, name: str, body: Any, *, dry_run: bool = False
) -> Obj:
    """Bind pod ``ns/name`` as ``body`` (a Binding) says; returns the Status to answer."""
    if not isinstance(body, dict):
        raise E.bad_request("the body of a binding must be a JSON object")
    meta = body.get("metadata") or {}
    target = body.get("target") or {}
    errors = []
    if meta.get("name") and meta["name"] != name:
        raise E.bad_request(
            f"the name of the object ({meta['name']}) does not match the name on the URL ({name})"
        )
    if not target.get("name"):
        errors.append(E.required("target.name"))
    if target.get("kind") not in (None, "", "Node"):
        errors.append(E.not_supported("target.kind", target.get("kind"), ["Node"]))
    if errors:
        raise E.ApiError(
            422,
            "Invalid",
            f'Binding "{name}" is invalid: ' + ", ".join(e.render() for e in errors),
            details={"name": name, "kind": "Binding"},
        )
    with store.lock:
        entry = store.find(rt, ns, name)
        if entry is None:
            raise E.not_found(rt, name)
        pod = entry.obj
        if pod["metadata"].get("deletionTimestamp"):
            raise _conflict(name, f"pod {name} is being deleted, cannot be assigned to a host")
        assigned = (pod.get("spec") or {}).get("nodeName")
        if assigned:
            raise _conflict(name, f'pod {name} is already assigned to node "{assigned}"')
        uid = meta.get("uid")
        if uid and uid != pod["metadata"]["uid"]:
            raise _conflict(name, f"the UID in the binding ({uid}) does not match the pod's")
        new = clone(pod)
        new["spec"]["nodeName"] = target["name"]
        if meta.get("annotations"):
            annotations = new["metadata"].setdefault("annotations", {})
            annotations.update(meta["annotations"])
        status = new.setdefault("status", {})
        scheduled = {
            "type": "PodScheduled",
            "status": "True",
            "lastProbeTime": None,
            "lastTransitionTime": now_rfc3339(),
        }
        conditions = list(status.get("conditions") or [])
        at = next((i for i, c in enumerate(conditions) if c.get("type") == "PodScheduled"), None)
        if at is None:
            conditions.append(scheduled)
        else:  # UpdatePodCondition: in place
            conditions[at] = scheduled
        status["conditions"] = conditions
        if not dry_run:
            store.commit(rt, "MODIFIED", new, pod)
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}

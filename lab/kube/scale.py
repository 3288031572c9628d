"""The ``scale`` subresource: an ``autoscaling/v1`` Scale view of a workload's replicas.

Served, as upstream, for Deployments, ReplicaSets, StatefulSets and ReplicationControllers
(``pkg/registry/apps/deployment/storage/storage.go`` ``ScaleREST`` and its siblings): GET
builds the Scale from the object (name, namespace, uid, resourceVersion and
creationTimestamp; ``spec.replicas``; ``status.replicas`` and the selector in label-selector
syntax); PUT and PATCH validate the Scale (``spec.replicas`` >= 0), honour its
``resourceVersion`` as a precondition and write only ``spec.replicas`` of the object, recorded
in ``managedFields`` under subresource ``scale``.
"""

from __future__ import annotations

from typing import Any

from lab.kube import exceptions as E
from lab.kube import patch as P
from lab.kube.objects import Obj, clone
from lab.kube.registry import Registry
from lab.kube.resources import ResourceType
from lab.kube.schema import json_kind
from lab.kube.store import Store
from lab.kube.tables_cells import format_label_selector

SCALE_API_VERSION = "autoscaling/v1"


def _selector(rt: ResourceType, obj: Obj) -> str:
    selector = (obj.get("spec") or {}).get("selector")
    if rt.group == "" and rt.kind == "ReplicationController":
        # a map selector (labels.SelectorFromSet)
        selector = {"matchLabels": selector or {}}
    text = format_label_selector(selector)
    return "" if text == "<none>" else text


def to_scale(rt: ResourceType, obj: Obj) -> Obj:
    meta = obj.get("metadata") or {}
    scale_meta = {
        k: meta[k]
        for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
        if k in meta
    }
    replicas = (obj.get("spec") or {}).get("replicas") or 0
    status: Obj = {"replicas": (obj.get("status") or {}).get("replicas") or 0}
    selector = _selector(rt, obj)
    if selector:
        status["selector"] = selector
    return {
        "kind": "Scale",
        "apiVersion": SCALE_API_VERSION,
        "metadata": scale_meta,
        "spec": {"replicas": replicas} if replicas else {},
        "status": status,
    }


def get_scale(store: Store, rt: ResourceType, ns: str, name: str) -> Obj:
    return to_scale(rt, store.get(rt, ns, name).obj)


def _check_scale(rt: ResourceType, name: str, scale: Any) -> int:
    if not isinstance(scale, dict):
        raise E.bad_request("the body of the request was in an unknown format")
    kind, api_version = scale.get("kind"), scale.get("apiVersion")
    if (kind, api_version) not in ((None, None), ("Scale", SCALE_API_VERSION)):
        raise E.bad_request(
            f"the API version in the data ({api_version}) does not match the expected API "
            f"version ({SCALE_API_VERSION})"
            if api_version != SCALE_API_VERSION
            else f"the kind in the data ({kind}) does not match the expected kind (Scale)"
        )
    spec = scale.get("spec") or {}
    replicas = spec.get("replicas", 0) if isinstance(spec, dict) else None
    if not isinstance(replicas, int) or isinstance(replicas, bool):
        raise E.bad_request(
            'Scale in version "v1" cannot be handled as a Scale: json: cannot unmarshal '
            f"{json_kind(replicas)} into Go struct field ScaleSpec.spec.replicas of type int32"
        )
    if replicas < 0:
        scale_rt = ResourceType("autoscaling", "v1", "Scale", "scale", "scale", namespaced=True)
        raise E.invalid(
            scale_rt,
            name,
            [E.invalid_value("spec.replicas", replicas, "must be greater than or equal to 0")],
        )
    meta_name = (scale.get("metadata") or {}).get("name")
    if meta_name and meta_name != name:
        raise E.bad_request(
            f"the name of the object ({meta_name}) does not match the name on the URL ({name})"
        )
    return replicas


def update_scale(
    store: Registry,
    rt: ResourceType,
    ns: str,
    name: str,
    scale: Any,
    *,
    dry_run: bool,
    manager: str,
) -> Obj:
    replicas = _check_scale(rt, name, scale)
    with store.lock:
        old = store.get(rt, ns, name).obj
        new = clone(old)
        new.setdefault("spec", {})["replicas"] = replicas
        rv = (scale.get("metadata") or {}).get("resourceVersion")
        if rv:
            new["metadata"]["resourceVersion"] = rv
        else:
            new["metadata"].pop("resourceVersion", None)
        obj, _ = store.writer.update(
            rt, ns, name, new, subresource="scale", dry_run=dry_run, manager=manager
        )
        return to_scale(rt, obj)


def patch_scale(
    store: Registry,
    rt: ResourceType,
    ns: str,
    name: str,
    patch_type: str,
    body: Any,
    *,
    dry_run: bool,
    manager: str,
) -> Obj:
    with store.lock:
        current = get_scale(store, rt, ns, name)
        if patch_type == P.JSONPatch:
            patched = P.apply_json_patch(clone(current), body)
        elif not isinstance(body, dict):
            raise E.bad_request(
                "json: cannot unmarshal array into Go value of type map[string]interface {}"
            )
        elif patch_type == P.MERGE:
            patched = P.merge_patch(clone(current), body)
        elif patch_type == P.STRATEGIC:
            patched = P.strategic_merge(clone(current), body, P.strategies_for("Scale"))
        else:
            patched = P.apply_patch(clone(current), body, "Scale")
        # a patch carries no resourceVersion unless the client put one there
        body_meta = body.get("metadata") if isinstance(body, dict) else None
        if not (isinstance(body_meta, dict) and body_meta.get("resourceVersion")):
            patched.setdefault("metadata", {}).pop("resourceVersion", None)
        return update_scale(store, rt, ns, name, patched, dry_run=dry_run, manager=manager)
